//! What a prediction reads of every node besides its keys, before it plans: each master's and
//! each replica's memory and limit ([`crate::cluster::memory`]) and whether each master has
//! atomic slot migration. A master of the cluster is reached by its link; a joining one,
//! which the cluster does not list yet, as the seed is, at its address. A node that cannot be
//! read is named, and what it means said once (a refused `INFO`, a user who cannot log in).

use crate::cluster::budget::Budget;
use crate::cluster::connection::NodeConnection;
use crate::cluster::error::{Code, NodeError};
use crate::cluster::link::{Access, Link};
use crate::cluster::memory::{read_memory, NodeMemory};
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

    fn failed(&mut self, address: &str, e: &NodeError) {
        self.unknown.push(address.to_string());
        if self.note.is_none() {
            self.note = Some(e.to_string());
            self.hint = match e.code {
                Code::NoPermCommand => Some("`INFO` needs `+info`."),
                Code::Auth => Some(
                    "The user could not log in there: make it on every node, the joining ones \
                     too.",
                ),
                _ => None,
            };
        }
    }
}

/// Reads `masters` (addresses: the cluster's, then the joining ones) and every replica of
/// `topo`. Never fails: a node that cannot be read is in [`NodeReads::unknown`].
pub(crate) fn read_nodes(access: &Access, topo: &LiveCluster, masters: &[String]) -> NodeReads {
    let mut reads = NodeReads::default();
    for address in masters {
        let link = match topo.masters.iter().find(|m| m.address == *address) {
            Some(m) => m.link.clone(),
            None => match access.at(address) {
                Ok(link) => link,
                Err(_) => continue,
            },
        };
        match read_master(&link) {
            Ok((memory, atomic)) => {
                reads.atomic.insert(address.clone(), atomic);
                reads.masters.push(memory);
            }
            Err(e) => reads.failed(address, &e),
        }
    }
    for r in &topo.replicas {
        match r.link.connect().and_then(|mut con| read_memory(&mut con)) {
            Ok(memory) => reads.replicas.push((memory, r.master.clone())),
            Err(e) => reads.failed(&r.address, &e),
        }
    }
    reads
}

/// One master's memory, and whether it has atomic slot migration.
fn read_master(link: &Link) -> Result<(NodeMemory, bool), NodeError> {
    let mut con: NodeConnection = link.connect()?;
    let server = con.text(&["INFO", "server"])?;
    Ok((read_memory(&mut con)?, crate::reply::is_valkey_9(&server)))
}
