//! What a prediction reads of every node besides its keys, before it plans: each master's and
//! each replica's memory and limit ([`crate::cluster::memory`]) and whether each master has
//! atomic slot migration. The nodes the cluster lists are read through its snapshot
//! ([`crate::cluster::snapshot`], refreshed right before the plan); a joining one, which the
//! cluster does not list yet, here, at its address, as the seed is. A node that cannot be
//! read is named, and what it means said once (a refused `INFO`, a user who cannot log in).

use crate::cluster::budget::Budget;
use crate::cluster::error::Code;
use crate::cluster::link::{Access, Link};
use crate::cluster::memory::{read_memory_info, NodeMemory};
use crate::cluster::snapshot::{NodeRead, Snapshot};
use crate::cluster::topology::LiveCluster;
use std::collections::BTreeMap;

/// What the prediction read of the nodes.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeReads {
    /// Every master that answered, in the order asked.
    pub masters: Vec<NodeMemory>,
    /// Every replica that answered, with its master's address.
    pub replicas: Vec<(NodeMemory, String)>,
    /// Whether each master that answered has atomic slot migration (Valkey 9 or later).
    pub atomic: BTreeMap<String, bool>,
    /// The nodes that could not be read.
    pub unknown: Vec<String>,
    /// Why the first of them could not, and what to do about it.
    pub note: Option<String>,
    pub hint: Option<&'static str>,
}

impl NodeReads {
    /// Each master's `maxmemory` by address.
    pub fn maxmemory(&self) -> BTreeMap<String, f64> {
        self.masters
            .iter()
            .map(|m| (m.address.clone(), m.maxmemory))
            .collect()
    }

    /// Every node that answered as the memory model holds it, keeping `headroom` (a
    /// fraction) of each limit free.
    pub fn budget(&self, headroom: f64) -> Budget {
        let mut budget = Budget::new(headroom);
        for m in &self.masters {
            budget.add_master(m.clone());
        }
        for (r, master) in &self.replicas {
            budget.add_replica(r.clone(), master);
        }
        budget
    }

    fn failed(&mut self, address: &str, why: String, code: Option<Code>) {
        self.unknown.push(address.to_string());
        if self.note.is_none() {
            self.note = Some(why);
            self.hint = match code {
                Some(Code::NoPermCommand) => Some("`INFO` needs `+info`."),
                Some(Code::Auth) => Some(
                    "The user could not log in there: make it on every node, the joining ones \
                     too.",
                ),
                _ => None,
            };
        }
    }
}

/// The memory of `masters` (addresses: the cluster's, then the joining ones) and of every
/// replica of `topo`: as `snapshot` read it for the nodes the cluster lists, read here for a
/// joining master (at its address, as the seed is reached). Never fails: a node that could not
/// be read is in [`NodeReads::unknown`].
pub(crate) fn read_nodes(
    access: &Access,
    snapshot: &Snapshot,
    topo: &LiveCluster,
    masters: &[String],
) -> NodeReads {
    let mut reads = NodeReads::default();
    for address in masters {
        let read = match snapshot.node(address) {
            Some(n) => of_snapshot(n),
            None => match access.at(address) {
                Ok(link) => read_master(&link),
                Err(_) => continue,
            },
        };
        match read {
            Ok((memory, info)) => {
                reads
                    .atomic
                    .insert(address.clone(), crate::reply::is_valkey_9(&info));
                reads.masters.push(memory);
            }
            Err((why, code)) => reads.failed(address, why, code),
        }
    }
    for r in &topo.replicas {
        let read = match snapshot.node(&r.address) {
            Some(n) => of_snapshot(n),
            None => Err((format!("{}: not listed by the seed", r.address), None)),
        };
        match read {
            Ok((memory, _)) => reads.replicas.push((memory, r.master.clone())),
            Err((why, code)) => reads.failed(&r.address, why, code),
        }
    }
    reads
}

/// Why a node could not be read, and the code of its error answer, if any.
type Unread = (String, Option<Code>);

/// A node's memory and `INFO` text as `snapshot` read it.
fn of_snapshot(n: &NodeRead) -> Result<(NodeMemory, String), Unread> {
    match (&n.memory, &n.info) {
        (Some(memory), Some(info)) => Ok((memory.clone(), info.clone())),
        _ => Err((
            n.why_unread()
                .unwrap_or_else(|| format!("{}: not read", n.node.address)),
            n.unread_code.clone(),
        )),
    }
}

/// A joining master's memory and `INFO` text.
fn read_master(link: &Link) -> Result<(NodeMemory, String), Unread> {
    link.connect()
        .and_then(|mut con| read_memory_info(&mut con))
        .map_err(|e| (e.to_string(), Some(e.code)))
}
