//! The engine's errors. Each message is the text after `ERR ` in the module's reply.

use thiserror::Error;

/// Why an engine operation was refused. A refused operation leaves its ring unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EngineError {
    /// A node name that is not in the ring (`RING.ASSIGN`, `RING.MOVES DEL`).
    #[error("no such node {} in the ring", shown(.0))]
    UnknownNode(Vec<u8>),
    /// `RING.MOVES ADD` of a node that is already in the ring, without a new `WEIGHT`.
    #[error("node {} is already in the ring (give WEIGHT w to evaluate a re-weight)", shown(.0))]
    NodeExists(Vec<u8>),
    /// An empty node name.
    #[error("node name must not be empty")]
    EmptyNodeName,
    /// A change that names no node (`ADD` or `DEL` followed by an option, `NODES 0`).
    #[error("the change names no node")]
    NoNodes,
    /// A rebalance of a slot table that does not cover every slot: `redis-cli --cluster
    /// rebalance` refuses then ("Please fix your cluster problems before rebalancing").
    #[error("{unassigned} slots are unassigned: redis-cli --cluster rebalance refuses to run until every slot is served")]
    SlotsNotCovered {
        /// Slots without an owner.
        unassigned: u32,
    },
    /// The change would give the ring more points than allowed (`ringslot.max-points`).
    #[error("the ring would have {points} points, more than ringslot.max-points ({limit})")]
    TooManyPoints {
        /// Points the ring would have after the change.
        points: u64,
        /// The configured limit.
        limit: u64,
    },
    /// The change would give the ring more nodes than allowed (`ringslot.max-nodes`).
    #[error("the ring would have {nodes} nodes, more than ringslot.max-nodes ({limit})")]
    TooManyNodes {
        /// Nodes the ring would have after the change.
        nodes: u64,
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
    /// A weight other than 1 given to a flavour whose implementation has no weights.
    #[error("COMPAT {flavour} has no weights: its nodes all weigh 1")]
    NoWeights {
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
    /// A what-if under bounded loads over more members than it keeps.
    #[error("bounded loads evaluates at most {limit} members (it keeps every member's hash)")]
    BoundedTooMany {
        /// The most members.
        limit: u64,
    },
    /// `RING.MIRROR` of an existing mirror with options that differ from its own.
    #[error("the mirror exists with COMPAT {flavour} VNODES {vnodes}{}: a refresh keeps its options (DEL the key to mirror with others)", if *.hashtag { " HASHTAG" } else { "" })]
    MirrorOptions {
        /// The mirror's flavour.
        flavour: &'static str,
        /// Its VNODES.
        vnodes: u32,
        /// Whether it has `HASHTAG`.
        hashtag: bool,
    },
    /// Stored state that does not describe a valid ring (RDB load).
    #[error("corrupt ring data: {0}")]
    Corrupt(&'static str),
    /// A plan by weight asked of inconsistent input ([`crate::by_weight`]).
    #[error("cannot plan by weight: {0}")]
    WeightProblem(String),
}

/// Longest part of a name an error message shows.
const SHOWN_MAX: usize = 128;

/// `name` as an error message shows it: in single quotes, printable ASCII as it is, `'` and
/// `\` escaped, other bytes as `\xHH` (so a binary name cannot break the reply), and cut
/// after 128 bytes with `...` (a 64 KiB name does not make a 256 KiB error).
pub fn shown(name: &[u8]) -> String {
    let mut out = String::with_capacity(name.len().min(SHOWN_MAX) + 2);
    out.push('\'');
    for &b in name.iter().take(SHOWN_MAX) {
        match b {
            b'\'' | b'\\' => {
                out.push('\\');
                out.push(char::from(b));
            }
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    if name.len() > SHOWN_MAX {
        out.push_str("...");
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shown_quoted_escaped_and_cut() {
        assert_eq!(shown(b"10.0.0.1:6379"), "'10.0.0.1:6379'");
        assert_eq!(shown(b"a'b\\c"), "'a\\'b\\\\c'");
        assert_eq!(shown(b"\x00bin\xff\r\n"), "'\\x00bin\\xff\\x0d\\x0a'");
        let long = vec![b'x'; 200];
        assert_eq!(shown(&long), format!("'{}...'", "x".repeat(128)));
        assert_eq!(
            EngineError::UnknownNode(b"zz".to_vec()).to_string(),
            "no such node 'zz' in the ring"
        );
    }
}
