//! What the tool finds about a cluster, one type for every command: what `status` reports,
//! what makes `predict` refuse to plan on a cluster, what `apply` refuses before its first
//! write or stops on between slots and before a batch. Each carries its exit status
//! ([`Finding::exit_status`], docs/cluster.md "Exit status", checked by tests/docs.rs). The
//! findings are typed, for `--json`; their words are the command line's
//! (`cli/render.rs`).

use super::budget::Judgement;
use serde::Serialize;

/// The exit status of a run refused, or stopped between steps, by a safety rule: nothing
/// unsafe was done, and the text says what to fix.
pub const EXIT_REFUSED: i32 = 3;

/// A state of the cluster no run of a plan reaches (`apply`'s resume rule): why, naming the
/// slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "how", content = "why")]
pub enum Unreached {
    /// A slot is served by a master the plan does not lead it to: the cluster changed since
    /// the plan was made (or a view was read while a slot changed owner: worth reading again).
    Changed(String),
    /// A later move of a lane is done while an earlier one is not.
    OutOfOrder(String),
    /// A slot is open otherwise than as the plan's next move opens it.
    Open(String),
}

/// Something found about the cluster (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Finding {
    /// A node flagged failing (`fail?`, `fail`), in handshake or without an address, as the
    /// seed sees it; `master` whether it is a master (its slots wait for a failover).
    Flagged {
        node: String,
        id: String,
        flag: String,
        master: bool,
    },
    /// A master that could not be read (it did not answer, or refused a command): why.
    Unread { node: String, why: String },
    /// Slots no master serves, as the seed sees them.
    Uncovered { slots: u64 },
    /// A replica whose link to its master is not up (`master_link_status`), or that could not
    /// be read (`why`).
    ReplicaDown {
        node: String,
        master: String,
        link: String,
        why: String,
    },
    /// A master that does not list itself in its own `CLUSTER NODES`.
    Unlisted { node: String },
    /// A master of the plan that is not the master it was: a replica now (`replica`), or
    /// another node (`id`).
    Failover {
        node: String,
        replica: bool,
        id: String,
    },
    /// A master that says `cluster_state` is not `ok`.
    ClusterState { node: String, state: String },
    /// A slot migrating or importing (`importing`) on `node`, the other side `peer` where
    /// known.
    OpenSlot {
        slot: u16,
        node: String,
        importing: bool,
        peer: Option<String>,
    },
    /// A node that lists other masters or another slot table than the seed.
    Disagree { node: String },
    /// An atomic slot migration running on `node` (Valkey 9's `CLUSTER GETSLOTMIGRATIONS`):
    /// its name, operation (`EXPORT`, `IMPORT`), slots, state, and the other side.
    AtomicJob {
        node: String,
        name: String,
        operation: String,
        slots: String,
        state: String,
        peer: String,
    },
    /// A master without atomic slot migration (`--atomic` needs Valkey 9 or later).
    NoAtomicMigration { node: String },
    /// The cluster's state is not one the plan reaches.
    Unreached { why: Unreached },
    /// A node past its limit less the headroom, now or at a moment of a plan (the memory
    /// model's judgement).
    Memory { judgement: Judgement },
    /// A master the run brings keys to evicted `keys` keys since the run began.
    Evicted { node: String, keys: u64 },
    /// Any other safety rule, in words: a permission missing, no confirmation, a copy of a
    /// key that differs, a replica that does not catch up.
    Rule { text: String },
}

impl Finding {
    /// The exit status a command ends with for it where it refuses or stops on it
    /// (`status` reports every finding and exits 0).
    pub fn exit_status(&self) -> i32 {
        match self {
            Finding::Flagged { .. }
            | Finding::Unread { .. }
            | Finding::Uncovered { .. }
            | Finding::ReplicaDown { .. }
            | Finding::Unlisted { .. }
            | Finding::Failover { .. }
            | Finding::ClusterState { .. }
            | Finding::OpenSlot { .. }
            | Finding::Disagree { .. }
            | Finding::AtomicJob { .. }
            | Finding::NoAtomicMigration { .. }
            | Finding::Unreached { .. }
            | Finding::Memory { .. }
            | Finding::Evicted { .. }
            | Finding::Rule { .. } => EXIT_REFUSED,
        }
    }

    /// Its kind, as `--json` names it (`open_slot`, `memory`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Finding::Flagged { .. } => "flagged",
            Finding::Unread { .. } => "unread",
            Finding::Uncovered { .. } => "uncovered",
            Finding::ReplicaDown { .. } => "replica_down",
            Finding::Unlisted { .. } => "unlisted",
            Finding::Failover { .. } => "failover",
            Finding::ClusterState { .. } => "cluster_state",
            Finding::OpenSlot { .. } => "open_slot",
            Finding::Disagree { .. } => "disagree",
            Finding::AtomicJob { .. } => "atomic_job",
            Finding::NoAtomicMigration { .. } => "no_atomic_migration",
            Finding::Unreached { .. } => "unreached",
            Finding::Memory { .. } => "memory",
            Finding::Evicted { .. } => "evicted",
            Finding::Rule { .. } => "rule",
        }
    }

    /// A rule's finding, in words.
    pub fn rule(text: impl Into<String>) -> Finding {
        Finding::Rule { text: text.into() }
    }

    /// The finding in `e` or in an error it wraps, if any.
    pub fn of(e: &anyhow::Error) -> Option<&Finding> {
        e.chain().find_map(|c| c.downcast_ref::<Finding>())
    }

    /// One of each kind (for the docs' table of exit statuses and its test).
    pub fn samples() -> Vec<Finding> {
        let s = String::new;
        vec![
            Finding::Flagged {
                node: s(),
                id: s(),
                flag: s(),
                master: true,
            },
            Finding::Unread {
                node: s(),
                why: s(),
            },
            Finding::Uncovered { slots: 1 },
            Finding::ReplicaDown {
                node: s(),
                master: s(),
                link: s(),
                why: s(),
            },
            Finding::Unlisted { node: s() },
            Finding::Failover {
                node: s(),
                replica: true,
                id: s(),
            },
            Finding::ClusterState {
                node: s(),
                state: s(),
            },
            Finding::OpenSlot {
                slot: 0,
                node: s(),
                importing: false,
                peer: None,
            },
            Finding::Disagree { node: s() },
            Finding::AtomicJob {
                node: s(),
                name: s(),
                operation: s(),
                slots: s(),
                state: s(),
                peer: s(),
            },
            Finding::NoAtomicMigration { node: s() },
            Finding::Unreached {
                why: Unreached::Changed(s()),
            },
            Finding::Memory {
                judgement: Judgement {
                    node: s(),
                    replica_of: None,
                    now: 0.0,
                    would_reach: 0.0,
                    held: super::budget::Held::Maxmemory {
                        maxmemory: 0.0,
                        policy: super::memory::Policy::NoEviction,
                    },
                    limit: 0.0,
                    headroom: 0.0,
                    fit: super::budget::Fit::Crosses,
                    slot: None,
                },
            },
            Finding::Evicted { node: s(), keys: 1 },
            Finding::rule(""),
        ]
    }
}

impl std::error::Error for Finding {}

/// `return Err(Finding::rule(format!(...)).into())`: [`anyhow::bail`] for a safety rule's
/// refusal in words.
macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err($crate::cluster::finding::Finding::rule(format!($($arg)*)).into())
    };
}
pub(crate) use refuse;

/// `Err(finding)`, with what the run did and what to do said before it (`context`: the
/// command line prints "context: finding").
pub fn stop<T>(finding: Finding, context: String) -> anyhow::Result<T> {
    Err(anyhow::Error::new(finding).context(context))
}

/// Whether `e`, or an error it wraps, is a [`Finding`] (a safety rule's refusal or stop).
pub fn is_refused(e: &anyhow::Error) -> bool {
    Finding::of(e).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_named_as_json_names_it_and_exits_3() {
        let samples = Finding::samples();
        let mut kinds: Vec<&str> = samples.iter().map(Finding::kind).collect();
        for f in &samples {
            let json = serde_json::to_value(f).unwrap();
            assert_eq!(json["kind"], f.kind(), "{json}");
            assert_eq!(f.exit_status(), EXIT_REFUSED);
        }
        kinds.sort_unstable();
        kinds.dedup();
        assert_eq!(kinds.len(), samples.len(), "one sample a kind");
        let wrapped = anyhow::Error::new(Finding::rule("no confirmation")).context("apply");
        assert_eq!(Finding::of(&wrapped).map(Finding::kind), Some("rule"));
        assert!(is_refused(&wrapped));
        assert!(!is_refused(&anyhow::anyhow!("cannot reach a node")));
    }
}
