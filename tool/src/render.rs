//! The tool's findings in words, for the command line's messages and the reports: the one
//! place a [`Finding`] or a memory [`Judgement`] is turned into text (in MiB and percent of
//! the limit).

use crate::cluster::budget::{Fit, Held, Judgement};
use crate::cluster::finding::{Finding, Unreached};
use crate::cluster::memory::Policy;
use std::fmt;

/// `bytes` in MiB, one decimal.
pub fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / 1048576.0)
}

/// What it is held to, in words: `maxmemory 74.3 MiB (noeviction)`, `its host's RAM of
/// 23.5 GiB`.
pub fn held(j: &Judgement) -> String {
    match &j.held {
        Held::Maxmemory { maxmemory, policy } => {
            format!("maxmemory {} ({})", mib(*maxmemory), policy.name())
        }
        Held::HostRam {
            host,
            system,
            nodes,
        } => format!(
            "the RAM of host {host}, {} (total_system_memory, shared by {nodes} node{} there; \
             it ignores a container's memory limit)",
            mib(*system),
            if *nodes == 1 { "" } else { "s" }
        ),
    }
}

/// What passing its limit does to the node `j` judges, in words.
pub fn consequence(j: &Judgement) -> &'static str {
    match (&j.held, &j.replica_of) {
        (Held::HostRam { .. }, _) => {
            "the host runs out of memory, and the kernel's OOM killer ends a node"
        }
        (Held::Maxmemory { .. }, Some(_)) => {
            "a replica does not evict: it grows past its maxmemory towards its host's RAM, and \
             once promoted it evicts or refuses writes at once"
        }
        (Held::Maxmemory { policy, .. }, None) => match policy {
            Policy::AllKeys(_) => {
                "it evicts keys to make room: any key, the migrated ones and the clients' \
                 writes too, deleted for good"
            }
            Policy::Volatile(_) => {
                "it evicts keys with a TTL to make room; where none is left it refuses writes \
                 and the RESTOREs of a MIGRATE with OOM, key by key (the slot is left half \
                 moved)"
            }
            Policy::NoEviction => {
                "it refuses writes and the RESTOREs of a MIGRATE with OOM, key by key (the slot \
                 is left half moved; Valkey's atomic import fails)"
            }
        },
    }
}

/// `master` or `replica of <address>`.
pub fn role(j: &Judgement) -> String {
    match &j.replica_of {
        Some(m) => format!("replica of {m}"),
        None => "master".to_string(),
    }
}

impl fmt::Display for Judgement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let past = match self.fit {
            Fit::Crosses => "past its limit",
            Fit::InMargin => "past its limit less the headroom",
            Fit::Fits => "within its limit less the headroom",
        };
        let with = match self.slot {
            Some(slot) => format!(" with slot {slot}"),
            None => String::new(),
        };
        write!(
            f,
            "{} ({}) would reach {}{with}, {:.0}% of {}: {past} ({} with {:.0}% kept free; it \
             counts {} now). Past its limit, {}",
            self.node,
            role(self),
            mib(self.would_reach),
            100.0 * self.fill(),
            held(self),
            mib(self.within()),
            100.0 * self.headroom,
            mib(self.now),
            consequence(self)
        )
    }
}

impl fmt::Display for Unreached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreached::Changed(why) => write!(
                f,
                "{why}: the cluster changed since the plan was made (or the plan was edited); \
                 make a new one"
            ),
            Unreached::OutOfOrder(why) | Unreached::Open(why) => f.write_str(why),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Flagged {
                node,
                id,
                flag,
                master,
            } => write!(
                f,
                "node {node} ({}) is flagged `{flag}`{}",
                id.get(..8).unwrap_or(id),
                if *master {
                    " (a master: its slots wait for a replica to take over)"
                } else {
                    ""
                }
            ),
            Finding::Unread { node, why } => write!(f, "master {node} could not be read ({why})"),
            Finding::Uncovered { slots } => write!(
                f,
                "{slots} slots are served by no master (redis-cli --cluster fix)"
            ),
            Finding::ReplicaDown {
                node,
                master,
                link,
                why,
            } => {
                if why.is_empty() {
                    write!(f, "replica {node} of {master}: its link is `{link}`")
                } else {
                    write!(f, "replica {node} of {master} could not be read ({why})")
                }
            }
            Finding::Unlisted { node } => {
                write!(f, "{node} does not list itself in CLUSTER NODES")
            }
            Finding::Failover { node, replica, id } => write!(
                f,
                "{node} is not the master it was (a failover: now {}, id {id})",
                if *replica { "a replica" } else { "a master" }
            ),
            Finding::ClusterState { node, state } => write!(
                f,
                "{node} says cluster_state:{state} (a master just added says so for a few \
                 seconds, until it has heard from the others)"
            ),
            Finding::OpenSlot {
                slot,
                node,
                importing,
                peer,
            } => {
                let (how, way) = if *importing {
                    ("importing", "from")
                } else {
                    ("migrating", "to")
                };
                write!(f, "slot {slot} of {node} is {how}")?;
                if let Some(peer) = peer {
                    write!(f, " ({way} {peer})")?;
                }
                f.write_str(
                    ": a migration under way or left open (redis-cli --cluster check, and \
                     --cluster fix if it is stuck)",
                )
            }
            Finding::Disagree { node } => write!(
                f,
                "{node} and the seed disagree on the masters or the slot table: run when \
                 every node's CLUSTER NODES lists the same masters and slots (after an \
                 add-node the others take a few seconds to meet the new master, which \
                 redis-cli --cluster check, reading the seed alone, does not show)"
            ),
            Finding::AtomicJob {
                node,
                name,
                operation,
                slots,
                state,
                peer,
            } => write!(
                f,
                "{node} runs an atomic slot migration ({name}: {} of slots {slots} with {peer}, \
                 {state}): wait for it to end (CLUSTER GETSLOTMIGRATIONS)",
                operation.to_lowercase()
            ),
            Finding::NoAtomicMigration { node } => write!(
                f,
                "{node} has no atomic slot migration (CLUSTER MIGRATESLOTS is Valkey 9 and \
                 later): run without --atomic to move the slots key by key"
            ),
            Finding::Unreached { why } => why.fmt(f),
            Finding::Memory { judgement } => judgement.fmt(f),
            Finding::Evicted { node, keys } => write!(
                f,
                "{node} evicted {keys} keys during the run (evicted_keys grew) while it takes the \
                 run's keys: it is past its maxmemory"
            ),
            Finding::Rule { text } => f.write_str(text),
        }
    }
}
