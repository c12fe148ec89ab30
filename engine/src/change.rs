//! A change of a ring key's nodes, as the write that would make it (`RING.ADD` of a node, a
//! re-weight, `RING.DEL`), checked against the ring without changing it, and the slot table's
//! plan for it: the moves `redis-cli --cluster rebalance` would make.

use super::error::EngineError;
use super::ring::delta::NodeChange;
use super::topology::{check_weight, follow_nodes, Limits, Topology};

/// A node change to evaluate, as the write that would make it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `RING.ADD key [WEIGHT w] node`: a new node joins with `weight` (default 1); a node
    /// already in the ring takes `weight` (a re-weight), which must then be given.
    Add {
        /// The node's name.
        node: Vec<u8>,
        /// Its weight, if given.
        weight: Option<i64>,
    },
    /// `RING.DEL key node`: a node of the ring leaves.
    Del {
        /// The node's name (must be in the ring).
        node: Vec<u8>,
    },
}

/// A change checked against a topology, in the common index space of
/// [`crate::ring::delta`].
pub(crate) struct Prepared<'a> {
    pub(crate) node_change: NodeChange<'a>,
    /// The node that joins, leaves or is re-weighted.
    pub(crate) changed: usize,
    /// The fraction a perfect scheme moves.
    pub(crate) ideal: f64,
    /// Every node's weight after the change (0: it leaves; the joining node last).
    pub(crate) weights: Vec<u32>,
    /// The nodes' names (the joining node last), when the slot table is empty and needs them
    /// for its create layout; empty otherwise.
    pub(crate) names: Vec<&'a [u8]>,
    /// The change changes nothing (a re-weight to the weight the node has).
    pub(crate) same: bool,
}

/// One move of a rebalance plan, nodes by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedMove {
    /// The node that gives the slots (`None`: unassigned slots).
    pub from: Option<Vec<u8>>,
    /// The node that takes them (`None`: they become unassigned).
    pub to: Option<Vec<u8>>,
    /// The slots, ascending.
    pub slots: Vec<u16>,
}

impl Topology {
    /// Checks `change` (as [`Topology::what_if`] documents its errors) and works out what it
    /// needs, without copying anything of the ring.
    pub(crate) fn prepare<'a>(
        &'a self,
        change: &'a Change,
        limits: Limits,
    ) -> Result<Prepared<'a>, EngineError> {
        let nodes = self.nodes();
        let count = nodes.len();
        let total_weight: f64 = nodes.iter().map(|n| f64::from(n.weight)).sum();
        let mut weights: Vec<u32> = nodes.iter().map(|n| n.weight).collect();
        // Names matter only to lay out an empty slot table (as `--cluster create` would).
        let mut names: Vec<&[u8]> = if self.slot_table().is_empty() {
            nodes.iter().map(|n| n.name.as_slice()).collect()
        } else {
            Vec::new()
        };
        let (node_change, changed, ideal) = match change {
            Change::Add { node, weight } => {
                let weight = weight.map(check_weight).transpose()?;
                if node.is_empty() {
                    return Err(EngineError::EmptyNodeName);
                }
                match (self.ring().node_index(node), weight) {
                    (Some(_), None) => return Err(EngineError::NodeExists(node.clone())),
                    (Some(index), Some(w)) => {
                        // A re-weight: a perfect scheme moves the change of the node's share.
                        let old = f64::from(weights.get(index).copied().unwrap_or(0));
                        let new_total = total_weight - old + f64::from(w);
                        if let Some(slot) = weights.get_mut(index) {
                            *slot = w;
                        }
                        let ideal = (f64::from(w) / new_total - old / total_weight).abs();
                        (NodeChange::Reweight { index, weight: w }, index, ideal)
                    }
                    (None, w) => {
                        let w = w.unwrap_or(1);
                        weights.push(w);
                        names.push(node);
                        let ideal = f64::from(w) / (total_weight + f64::from(w));
                        (
                            NodeChange::Join {
                                name: node,
                                weight: w,
                            },
                            count,
                            ideal,
                        )
                    }
                }
            }
            Change::Del { node } => {
                let index = self
                    .ring()
                    .node_index(node)
                    .ok_or_else(|| EngineError::UnknownNode(node.clone()))?;
                let ideal = f64::from(weights.get(index).copied().unwrap_or(0)) / total_weight;
                if let Some(slot) = weights.get_mut(index) {
                    *slot = 0;
                }
                (NodeChange::Leave { index }, index, ideal)
            }
        };
        if !matches!(node_change, NodeChange::Leave { .. }) {
            self.check_points(&weights, limits)?;
        }
        let same = weights.len() == count && weights.iter().zip(nodes).all(|(&w, n)| w == n.weight);
        Ok(Prepared {
            node_change,
            changed,
            ideal,
            weights,
            names,
            same,
        })
    }

    /// Checks `change` against the ring as [`Topology::what_if`] would (an unknown node, a bad
    /// weight, a ring past `limits`), without evaluating anything. Cost: O(N).
    pub fn check_change(&self, change: &Change, limits: Limits) -> Result<(), EngineError> {
        self.prepare(change, limits).map(|_| ())
    }

    /// The slots `change` would move, as `redis-cli --cluster rebalance
    /// --cluster-use-empty-masters` would move them (in the order it would, one entry per
    /// "Moving N slots from A to B"), or as `--cluster create` lays out the first nodes.
    /// Changes nothing. Errors: those of [`Topology::what_if`].
    pub fn plan(&self, change: &Change, limits: Limits) -> Result<Vec<PlannedMove>, EngineError> {
        let p = self.prepare(change, limits)?;
        if p.same {
            return Ok(Vec::new());
        }
        let mut slots = self.slot_table().clone();
        let moves = follow_nodes(&mut slots, &p.names, &p.weights);
        let name = |i: Option<usize>| -> Option<Vec<u8>> {
            let i = i?;
            match (self.nodes().get(i), change) {
                (Some(n), _) => Some(n.name.clone()),
                (None, Change::Add { node, .. }) => Some(node.clone()),
                (None, Change::Del { .. }) => None,
            }
        };
        Ok(moves
            .into_iter()
            .map(|m| PlannedMove {
                from: name(m.from),
                to: name(m.to),
                slots: m.slots,
            })
            .collect())
    }
}
