//! The engine's errors. Each message is the text after `ERR ` in the module's reply.

use thiserror::Error;

/// Why an engine operation was refused. A refused operation leaves its ring unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EngineError {
    /// A node name that is not in the ring (`RING.ASSIGN`, `RING.MOVES DEL`).
    #[error("no such node in the ring")]
    UnknownNode,
    /// `RING.MOVES ADD` of a node that is already in the ring.
    #[error("node is already in the ring")]
    NodeExists,
    /// An empty node name.
    #[error("node name must not be empty")]
    EmptyNodeName,
    /// The change would give the ring more points than allowed (`ringslot.max-points`).
    #[error("the ring would have {points} points, more than ringslot.max-points ({limit})")]
    TooManyPoints {
        /// Points the ring would have after the change.
        points: u64,
        /// The configured limit.
        limit: u64,
    },
    /// A slot range outside `0..=16383` or with start after end.
    #[error("invalid slot range {start}..{end}: slots are 0..16383 and start <= end")]
    BadSlotRange {
        /// First slot asked for.
        start: i64,
        /// Last slot asked for.
        end: i64,
    },
    /// A weight outside `1..=MAX_WEIGHT`.
    #[error("WEIGHT must be between 1 and {max}")]
    BadWeight {
        /// Largest weight accepted.
        max: u32,
    },
    /// A VNODES outside `1..=MAX_VNODES`.
    #[error("VNODES must be between 1 and {max}")]
    BadVnodes {
        /// Largest VNODES accepted.
        max: u32,
    },
    /// VNODES given for a flavour whose points per node are fixed (ketama).
    #[error("VNODES cannot be set with COMPAT {flavour}: it fixes the points per node")]
    VnodesFixed {
        /// The flavour's name.
        flavour: &'static str,
    },
    /// The evaluation would exceed `ringslot.max-sample` members.
    #[error("{members} members to evaluate, more than ringslot.max-sample ({limit})")]
    TooManyMembers {
        /// Members asked for.
        members: u64,
        /// The configured limit.
        limit: u64,
    },
    /// More keys match a `KEYS` pattern than `ringslot.max-sample` allows (found without
    /// listing every match).
    #[error("more than ringslot.max-sample ({limit}) keys match the pattern")]
    TooManyMatches {
        /// The configured limit.
        limit: u64,
    },
    /// Stored state that does not describe a valid ring (RDB load).
    #[error("corrupt ring data: {0}")]
    Corrupt(&'static str),
}
