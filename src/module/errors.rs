//! Every error reply of the RING.* commands, in one catalogue: [`ArgError`] for a misuse of the
//! arguments, [`CommandError`] for everything a command can refuse. `Display` is the whole
//! reply text, starting with its code (`ERR`, `WRONGTYPE`, `NOPERM`).
//!
//! Texts are the core's where the core has one (`ERR value is not an integer or out of
//! range`, the arity and `WRONGTYPE` errors), and `ERR syntax error, <what is wrong>` for a
//! misuse of options, in the form of the core's own hints (`XADD`: `ERR syntax error, LIMIT
//! cannot be used without ...`), so that a script matching `ERR syntax error` still matches.
//! Names in texts are shown by [`shown`]: quoted, escaped, cut after 128 bytes.

use crate::engine::error::shown;
use crate::engine::{EngineError, Flavour, DEFAULT_SAMPLE};
use redis_module::RedisError;
use std::fmt;

/// Why the arguments of a command were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// A misuse of options: an unknown one, one without its value, two that exclude each
    /// other. The text says which (`WEIGHT needs a value`).
    Syntax(String),
    /// A number that does not parse as a 64-bit integer (Redis' `string2ll` rules).
    NotInteger,
    /// A number that does not parse as a finite float.
    NotFloat,
    /// A number outside its option's range.
    OutOfRange {
        /// The option, as the user types it (`COUNT`, `SAMPLE`).
        option: &'static str,
        /// Smallest value accepted.
        min: i64,
        /// Largest value accepted (`i64::MAX`: no upper bound).
        max: i64,
    },
    /// `COMPAT` names no flavour.
    UnknownCompat,
    /// Neither `SAMPLE` nor `KEYS` was given and the default sample is more than
    /// `ringslot.max-sample`.
    DefaultSample {
        /// The configured limit.
        limit: u64,
    },
    /// The engine refused a value (weight, vnodes, sample size).
    Engine(EngineError),
}

/// The flavours' names, for messages.
pub fn flavour_names() -> String {
    let names: Vec<&str> = Flavour::ALL.iter().map(|f| f.name()).collect();
    names.join(", ")
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::Syntax(hint) => write!(f, "ERR syntax error, {hint}"),
            ArgError::NotInteger => f.write_str("ERR value is not an integer or out of range"),
            ArgError::NotFloat => f.write_str("ERR value is not a valid float"),
            ArgError::OutOfRange { option, min, max } if *max == i64::MAX => {
                write!(f, "ERR {option} must be {min} or more")
            }
            ArgError::OutOfRange { option, min, max } => {
                write!(f, "ERR {option} must be between {min} and {max}")
            }
            ArgError::UnknownCompat => {
                write!(f, "ERR COMPAT must be one of {}", flavour_names())
            }
            ArgError::DefaultSample { limit } => write!(
                f,
                "ERR the default SAMPLE {DEFAULT_SAMPLE} is more than ringslot.max-sample \
                 ({limit}): give SAMPLE n (at most {limit}) or KEYS pattern"
            ),
            ArgError::Engine(e) => write!(f, "ERR {e}"),
        }
    }
}

impl From<EngineError> for ArgError {
    fn from(e: EngineError) -> Self {
        ArgError::Engine(e)
    }
}

/// Why a command failed. A handler does all its fallible work before it replies, so an error
/// is always the whole reply.
#[derive(Debug, Clone, PartialEq)]
pub enum CommandError {
    /// Redis' standard arity error (sent with `RedisModule_WrongArity`).
    WrongArity,
    /// `WRONGTYPE Operation against a key holding the wrong kind of value`.
    WrongType,
    /// A misuse of the arguments.
    Args(ArgError),
    /// The engine refused (an unknown node, a limit, ...).
    Engine(EngineError),
    /// An error reply of a command the module called, or of the module API: its own text.
    Redis(String),
    /// A ring that must exist does not (a what-if of a typo is not an empty ring).
    NoSuchKey(Vec<u8>),
    /// `RING.CREATE` of a key that exists.
    KeyExists(Vec<u8>),
    /// Work past `ringslot.inline-limit` where the client cannot wait (`MULTI`, a script).
    PastInlineLimit {
        /// The command (`RING.MOVES`).
        command: &'static str,
        /// What costs (`this what-if (SAMPLE 1000)`).
        what: String,
        /// Its estimated work, in units.
        units: u64,
        /// `ringslot.inline-limit`.
        limit: u64,
    },
    /// `ringslot.max-background` runs go already.
    BackgroundBusy {
        /// The limit.
        max: i64,
    },
    /// The module API cannot block clients (no `RedisModule_BlockClient`).
    NoBlocking,
    /// This client cannot be blocked.
    CannotBlock,
    /// No thread could be started for a background run.
    NoThread,
    /// The module API has no thread-safe contexts.
    NoThreadSafeContext,
    /// The module API has no `RedisModule_Scan`.
    NoScan,
    /// A background run was cancelled (its client left, or the server shuts down).
    Cancelled {
        /// The command.
        command: &'static str,
    },
    /// A panic in a handler (`None`) or in a background run of the command.
    Internal {
        /// The command of a background run.
        command: Option<&'static str>,
        /// The panic's message.
        why: String,
    },
    /// `ringslot.maglev-size` is not a prime, and Maglev was asked for.
    MaglevSize {
        /// The configured size.
        size: u32,
    },
    /// The caller may not run `SCAN`, which a keyspace walk amounts to.
    NoScanPermission,
    /// A walk's reader may read the keys but not run `GET`, which the module checks a key's
    /// read right with.
    NoGetPermission {
        /// The ACL user.
        user: String,
    },
    /// The caller's ACL user was deleted meanwhile.
    UserGone,
    /// `WEIGH HITS` on a server that keeps no LFU counters.
    NoLfu,
    /// A walk that must run in the background (see [`super::live::keys_read_in_own_slot`])
    /// where the client cannot wait (`MULTI`, a script).
    BackgroundOnly {
        /// The command.
        command: &'static str,
    },
    /// A command of the live cluster on a server that is not a cluster node.
    NotClusterNode {
        /// The command (`RING.MOVES ... SLOTS`).
        command: &'static str,
    },
    /// `CLUSTER NODES` has no `myself` line.
    NotInClusterNodes,
    /// A slot of `SLOTS` that another node (or no node) serves.
    SlotElsewhere {
        /// The slot.
        slot: u16,
        /// Its owner's address, or `no node`.
        owner: String,
        /// This node's address.
        me: String,
    },
    /// A slot of `SLOTS` that is migrating.
    SlotMigrating {
        /// The slot.
        slot: u16,
    },
    /// A slot of `SLOTS` that is importing.
    SlotImporting {
        /// The slot.
        slot: u16,
    },
    /// The hash slots this node serves changed while a keyspace walk ran.
    SlotsChanged,
    /// An atomic slot migration (Valkey's `CLUSTER MIGRATESLOTS`) of this node is running.
    AtomicMigration {
        /// `import` or `export`, as `CLUSTER GETSLOTMIGRATIONS` says.
        operation: String,
        /// Its slot ranges, as `CLUSTER GETSLOTMIGRATIONS` shows them.
        slots: String,
        /// Its state (`snapshotting`, `receiving-snapshot`, ...).
        state: String,
    },
    /// A reply of a command the module called that it cannot read.
    UnexpectedReply {
        /// The command (`CLUSTER NODES`).
        command: &'static str,
        /// The reply, as debug text.
        reply: String,
    },
    /// `RING.MIRROR` of an existing mirror with other options.
    MirrorOptions {
        /// The mirror's flavour.
        flavour: Flavour,
        /// Its VNODES.
        vnodes: u32,
        /// Whether it has `HASHTAG`.
        hashtag: bool,
    },
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::WrongArity => f.write_str("ERR wrong number of arguments"),
            CommandError::WrongType => {
                f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            CommandError::Args(e) => e.fmt(f),
            CommandError::Engine(e) => write!(f, "ERR {e}"),
            CommandError::Redis(text) => f.write_str(text),
            CommandError::NoSuchKey(key) => write!(f, "ERR no such key {}", shown(key)),
            CommandError::KeyExists(key) => write!(f, "ERR key {} already exists", shown(key)),
            CommandError::PastInlineLimit {
                command,
                what,
                units,
                limit,
            } => write!(
                f,
                "ERR {what} is about {units} units of work, more than ringslot.inline-limit \
                 ({limit}), the most {command} does on Redis' main thread, and here (MULTI, a \
                 script) it cannot run in the background"
            ),
            CommandError::BackgroundBusy { max } => write!(
                f,
                "ERR {max} RING.* evaluations already run in the background, the most \
                 ringslot.max-background allows: try again when one ends"
            ),
            CommandError::NoBlocking => f.write_str("ERR this Redis cannot block clients"),
            CommandError::CannotBlock => f.write_str("ERR this client cannot be blocked"),
            CommandError::NoThread => f.write_str("ERR could not start a background thread"),
            CommandError::NoThreadSafeContext => {
                f.write_str("ERR this Redis has no thread-safe contexts")
            }
            CommandError::NoScan => f.write_str("ERR this Redis has no RedisModule_Scan"),
            CommandError::Cancelled { command } => write!(f, "ERR {command} was cancelled"),
            CommandError::Internal { command: None, .. } => f.write_str("ERR internal error"),
            CommandError::Internal {
                command: Some(command),
                why,
            } => write!(f, "ERR internal error in a background {command}: {why}"),
            CommandError::MaglevSize { size } => write!(
                f,
                "ERR ringslot.maglev-size is {size}: Maglev needs a prime table size (65537, the \
                 default, or another prime)"
            ),
            CommandError::NoGetPermission { user } => write!(
                f,
                "NOPERM the user '{user}' may read these keys but not run the 'get' command, \
                 which RING.MOVES ... KEYS and SLOTS check a key's read right with: it would \
                 count none of them (ACL SETUSER {user} +get)"
            ),
            CommandError::NoScanPermission => f.write_str(
                "NOPERM this user has no permissions to run the 'scan' command, which RING.MOVES \
                 ... KEYS and SLOTS need",
            ),
            CommandError::BackgroundOnly { command } => write!(
                f,
                "ERR {command} ... KEYS and SLOTS read keys of other hash slots, which this \
                 cluster node (Valkey, or Redis 7.4 and later) reads right only outside the \
                 calling command, in the background; MULTI and scripts cannot wait for it"
            ),
            CommandError::NoLfu => f.write_str(
                "ERR WEIGH HITS reads each key's LFU access counter, which the server keeps only \
                 with maxmemory-policy allkeys-lfu or volatile-lfu",
            ),
            CommandError::UserGone => {
                f.write_str("NOPERM the user of this connection no longer exists")
            }
            CommandError::NotClusterNode { command } => write!(
                f,
                "ERR {command} needs a cluster node (cluster-enabled yes)"
            ),
            CommandError::NotInClusterNodes => f.write_str("ERR this node is not in CLUSTER NODES"),
            CommandError::SlotElsewhere { slot, owner, me } => write!(
                f,
                "ERR slot {slot} is served by {owner}, not by this node ({me})"
            ),
            CommandError::SlotMigrating { slot } => write!(
                f,
                "ERR slot {slot} is migrating to another node: evaluate it when the migration \
                 ends"
            ),
            CommandError::SlotImporting { slot } => write!(
                f,
                "ERR slot {slot} is importing from another node: evaluate it when the migration \
                 ends"
            ),
            CommandError::SlotsChanged => f.write_str(
                "ERR the hash slots of this node changed while its keys were walked (a slot \
                 migrated): evaluate them again",
            ),
            CommandError::AtomicMigration {
                operation,
                slots,
                state,
            } => write!(
                f,
                "ERR an atomic slot migration ({operation} of slots {slots}, {state}) is running \
                 on this node: evaluate its keys when CLUSTER GETSLOTMIGRATIONS shows it over"
            ),
            CommandError::UnexpectedReply { command, reply } => {
                write!(f, "ERR unexpected {command} reply: {reply}")
            }
            CommandError::MirrorOptions {
                flavour,
                vnodes,
                hashtag,
            } => write!(
                f,
                "ERR the mirror exists with COMPAT {} VNODES {vnodes}{}: a refresh keeps its \
                 options (DEL the key to mirror with others)",
                flavour.name(),
                if *hashtag { " HASHTAG" } else { "" }
            ),
        }
    }
}

impl From<EngineError> for CommandError {
    fn from(e: EngineError) -> Self {
        CommandError::Engine(e)
    }
}

impl From<ArgError> for CommandError {
    fn from(e: ArgError) -> Self {
        CommandError::Args(e)
    }
}

impl From<RedisError> for CommandError {
    fn from(e: RedisError) -> Self {
        match e {
            RedisError::WrongArity => CommandError::WrongArity,
            RedisError::WrongType => CommandError::WrongType,
            other => CommandError::Redis(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_text() {
        let cases: Vec<(CommandError, &str)> = vec![
            (
                CommandError::WrongType,
                "WRONGTYPE Operation against a key holding the wrong kind of value",
            ),
            (
                EngineError::UnknownNode(b"n".to_vec()).into(),
                "ERR no such node 'n' in the ring",
            ),
            (
                ArgError::NotInteger.into(),
                "ERR value is not an integer or out of range",
            ),
            (ArgError::NotFloat.into(), "ERR value is not a valid float"),
            (
                CommandError::NoLfu,
                "ERR WEIGH HITS reads each key's LFU access counter, which the server keeps only \
                 with maxmemory-policy allkeys-lfu or volatile-lfu",
            ),
            (
                CommandError::BackgroundOnly {
                    command: "RING.MOVES",
                },
                "ERR RING.MOVES ... KEYS and SLOTS read keys of other hash slots, which this \
                 cluster node (Valkey, or Redis 7.4 and later) reads right only outside the \
                 calling command, in the background; MULTI and scripts cannot wait for it",
            ),
            (EngineError::NoNodes.into(), "ERR the change names no node"),
            (
                EngineError::NoWeights {
                    flavour: "redis-rb",
                }
                .into(),
                "ERR COMPAT redis-rb has no weights: its nodes all weigh 1",
            ),
            (
                CommandError::NoSuchKey(b"cahce".to_vec()),
                "ERR no such key 'cahce'",
            ),
            (
                CommandError::KeyExists(b"k\x00".to_vec()),
                "ERR key 'k\\x00' already exists",
            ),
            (
                CommandError::PastInlineLimit {
                    command: "RING.MOVES",
                    what: "this what-if (SAMPLE 1000)".into(),
                    units: 1263,
                    limit: 1000,
                },
                "ERR this what-if (SAMPLE 1000) is about 1263 units of work, more than \
                 ringslot.inline-limit (1000), the most RING.MOVES does on Redis' main thread, \
                 and here (MULTI, a script) it cannot run in the background",
            ),
            (
                CommandError::BackgroundBusy { max: 2 },
                "ERR 2 RING.* evaluations already run in the background, the most \
                 ringslot.max-background allows: try again when one ends",
            ),
            (
                CommandError::Cancelled {
                    command: "RING.BALANCE",
                },
                "ERR RING.BALANCE was cancelled",
            ),
            (
                CommandError::Internal {
                    command: None,
                    why: "boom".into(),
                },
                "ERR internal error",
            ),
            (
                CommandError::Internal {
                    command: Some("RING.MOVES"),
                    why: "boom".into(),
                },
                "ERR internal error in a background RING.MOVES: boom",
            ),
            (
                CommandError::MaglevSize { size: 65536 },
                "ERR ringslot.maglev-size is 65536: Maglev needs a prime table size (65537, the \
                 default, or another prime)",
            ),
            (
                CommandError::NoGetPermission {
                    user: "reader".into(),
                },
                "NOPERM the user 'reader' may read these keys but not run the 'get' command, \
                 which RING.MOVES ... KEYS and SLOTS check a key's read right with: it would \
                 count none of them (ACL SETUSER reader +get)",
            ),
            (
                CommandError::NoScanPermission,
                "NOPERM this user has no permissions to run the 'scan' command, which RING.MOVES \
                 ... KEYS and SLOTS need",
            ),
            (
                CommandError::NotClusterNode {
                    command: "RING.MIRROR",
                },
                "ERR RING.MIRROR needs a cluster node (cluster-enabled yes)",
            ),
            (
                CommandError::SlotElsewhere {
                    slot: 7,
                    owner: "no node".into(),
                    me: "127.0.0.1:7000".into(),
                },
                "ERR slot 7 is served by no node, not by this node (127.0.0.1:7000)",
            ),
            (
                CommandError::SlotMigrating { slot: 12000 },
                "ERR slot 12000 is migrating to another node: evaluate it when the migration ends",
            ),
            (
                CommandError::AtomicMigration {
                    operation: "export".into(),
                    slots: "0-100".into(),
                    state: "snapshotting".into(),
                },
                "ERR an atomic slot migration (export of slots 0-100, snapshotting) is running on \
                 this node: evaluate its keys when CLUSTER GETSLOTMIGRATIONS shows it over",
            ),
            (
                CommandError::MirrorOptions {
                    flavour: Flavour::Ketama,
                    vnodes: 160,
                    hashtag: true,
                },
                "ERR the mirror exists with COMPAT ketama VNODES 160 HASHTAG: a refresh keeps its \
                 options (DEL the key to mirror with others)",
            ),
            (
                ArgError::OutOfRange {
                    option: "COUNT",
                    min: 1,
                    max: i64::MAX,
                }
                .into(),
                "ERR COUNT must be 1 or more",
            ),
            (
                ArgError::UnknownCompat.into(),
                "ERR COMPAT must be one of native, ketama, groupcache, native-fnv, nginx, predis, predis-ketama, redis-rb, haproxy, haproxy-crc32, envoy-ring, envoy-redis, python-memcached, go-redis-ring, mcrouter-ch3, envoy-maglev, pymemcache",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }
}
