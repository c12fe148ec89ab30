//! The memory model's judgements in words, for the command line's messages and the reports:
//! the one place a [`Judgement`] is turned into text (in MiB and percent of the limit).

use crate::apply::MemoryStop;
use crate::cluster::budget::{Fit, Held, Judgement};
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

impl fmt::Display for MemoryStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryStop::Limit(j) => j.fmt(f),
            MemoryStop::Evicted { node, keys } => write!(
                f,
                "{node} evicted {keys} keys during the run (evicted_keys grew) while it takes the \
                 run's keys: it is past its maxmemory"
            ),
        }
    }
}
