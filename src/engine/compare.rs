//! The what-if comparison: what one node joining, leaving or changing weight costs under the ring, the slot
//! table and naive `hash mod N`, over a list of members, without changing anything.

use super::error::EngineError;
use super::keyslot::{key_slot, SLOT_COUNT};
use super::topology::{check_weight, Topology};

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

/// Moves under one scheme.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SchemeMoves {
    /// Members whose owner changed.
    pub moved: u64,
    /// Members that moved between two nodes neither of which is the one that joined, left or
    /// was re-weighted: the moves a perfect scheme never makes.
    pub between_old: u64,
    /// `moved / members` (0.0 when there are no members).
    pub fraction: f64,
}

/// The result of a what-if, as `RING.MOVES` replies it.
#[derive(Debug, Clone, PartialEq)]
pub struct WhatIf {
    /// Members evaluated.
    pub members: u64,
    /// The fraction a perfect scheme would move: the node's share of the total weight.
    pub ideal: f64,
    /// Moves on the ring.
    pub ring: SchemeMoves,
    /// Exact fraction of the ring's hash space whose owner changes.
    pub ring_space: f64,
    /// Moves in the slot table.
    pub slots: SchemeMoves,
    /// Hash slots whose owner changes.
    pub slots_moved: u32,
    /// Moves under `member hash mod N` over the nodes in order.
    pub modulo: SchemeMoves,
}

struct Counter {
    moved: u64,
    between_old: u64,
}

impl Counter {
    /// Counts one member whose owner was `before` (old index, mapped through `old_to_new`) and
    /// is `after` (new index); `changed` is the new index of the node that joined or was
    /// re-weighted.
    fn count(
        &mut self,
        before: Option<usize>,
        after: Option<usize>,
        old_to_new: &[Option<usize>],
        changed: Option<usize>,
    ) {
        let mapped = before.and_then(|b| old_to_new.get(b).copied().flatten());
        if mapped == after && before.is_some() {
            return;
        }
        if before.is_none() && after.is_none() {
            return;
        }
        self.moved += 1;
        if mapped.is_some() && after.is_some() && after != changed && mapped != changed {
            self.between_old += 1;
        }
    }

    fn finish(&self, members: u64) -> SchemeMoves {
        SchemeMoves {
            moved: self.moved,
            between_old: self.between_old,
            fraction: if members == 0 {
                0.0
            } else {
                self.moved as f64 / members as f64
            },
        }
    }
}

impl Topology {
    /// Evaluates `change` over `members` under the ring, the slot table (rebalanced as the
    /// change would rebalance it) and modulo, changing nothing. Errors: adding a node already
    /// in the ring without a weight, removing an unknown node, a bad weight, a ring that would
    /// have more than `max_points` points after the change (checked before anything is built).
    pub fn what_if<I, M>(
        &self,
        change: &Change,
        members: I,
        max_points: u64,
    ) -> Result<WhatIf, EngineError>
    where
        I: IntoIterator<Item = M>,
        M: AsRef<[u8]>,
    {
        let nodes = self.nodes();
        let total_weight: f64 = nodes.iter().map(|n| f64::from(n.weight)).sum();
        let identity = || (0..nodes.len()).map(Some).collect::<Vec<_>>();
        // Everything that can refuse the change comes before the copy of the ring is made.
        // `changed` is the index (after the change) of the node that joins or is re-weighted.
        let (after, old_to_new, changed, ideal) = match change {
            Change::Add { node, weight } => {
                let weight = weight.map(check_weight).transpose()?;
                if node.is_empty() {
                    return Err(EngineError::EmptyNodeName);
                }
                let mut weights: Vec<u32> = nodes.iter().map(|n| n.weight).collect();
                let (changed, ideal) = match (self.ring().node_index(node), weight) {
                    (Some(_), None) => return Err(EngineError::NodeExists(node.clone())),
                    (Some(i), Some(w)) => {
                        // A re-weight: a perfect scheme moves the change of the node's share.
                        let old = f64::from(weights.get(i).copied().unwrap_or(0));
                        let new_total = total_weight - old + f64::from(w);
                        if let Some(slot) = weights.get_mut(i) {
                            *slot = w;
                        }
                        (i, (f64::from(w) / new_total - old / total_weight).abs())
                    }
                    (None, w) => {
                        let w = w.unwrap_or(1);
                        weights.push(w);
                        (nodes.len(), f64::from(w) / (total_weight + f64::from(w)))
                    }
                };
                self.check_points(&weights, max_points)?;
                let mut after = self.clone();
                let weight = weight.map_or(1, i64::from);
                after.add(&[node.as_slice()], Some(weight), max_points)?;
                (after, identity(), Some(changed), ideal)
            }
            Change::Del { node } => {
                let gone = self
                    .ring()
                    .node_index(node)
                    .ok_or_else(|| EngineError::UnknownNode(node.clone()))?;
                let mut after = self.clone();
                after.del(&[node.as_slice()]);
                let ideal = nodes
                    .get(gone)
                    .map_or(0.0, |n| f64::from(n.weight) / total_weight);
                let map = (0..nodes.len())
                    .map(|i| match i.cmp(&gone) {
                        std::cmp::Ordering::Less => Some(i),
                        std::cmp::Ordering::Equal => None,
                        std::cmp::Ordering::Greater => Some(i - 1),
                    })
                    .collect();
                (after, map, None, ideal)
            }
        };

        let (n_before, n_after) = (nodes.len() as u64, after.nodes().len() as u64);
        let mut ring = Counter {
            moved: 0,
            between_old: 0,
        };
        let mut slots = Counter {
            moved: 0,
            between_old: 0,
        };
        let mut modulo = Counter {
            moved: 0,
            between_old: 0,
        };
        let mut members_seen = 0u64;
        for member in members {
            let member = member.as_ref();
            members_seen += 1;
            let hash = self.ring().member_hash(member);
            ring.count(
                self.ring().owner_of_hash(hash),
                after.ring().owner_of_hash(hash),
                &old_to_new,
                changed,
            );
            let slot = key_slot(member);
            slots.count(
                self.slot_table().owner(slot),
                after.slot_table().owner(slot),
                &old_to_new,
                changed,
            );
            let m_before = hash.checked_rem(n_before).map(|i| i as usize);
            let m_after = hash.checked_rem(n_after).map(|i| i as usize);
            modulo.count(m_before, m_after, &old_to_new, changed);
        }

        let slots_moved = (0..SLOT_COUNT as u16)
            .filter(|&s| {
                let before = self
                    .slot_table()
                    .owner(s)
                    .and_then(|b| old_to_new.get(b).copied().flatten());
                before != after.slot_table().owner(s)
            })
            .count() as u32;

        Ok(WhatIf {
            members: members_seen,
            ideal,
            ring: ring.finish(members_seen),
            ring_space: moved_space(self, &after, &old_to_new),
            slots: slots.finish(members_seen),
            slots_moved,
            modulo: modulo.finish(members_seen),
        })
    }
}

/// Exact fraction of the hash space whose owner differs between two rings of one flavour,
/// by one sweep over the union of their points (owners of `before` mapped by `old_to_new`).
fn moved_space(before: &Topology, after: &Topology, old_to_new: &[Option<usize>]) -> f64 {
    let (bh, bo) = before.ring().points();
    let (ah, ao) = after.ring().points();
    let space = before.ring().flavour().space();
    if bh.is_empty() && ah.is_empty() {
        return 0.0;
    }
    if bh.is_empty() || ah.is_empty() {
        return 1.0;
    }
    // Owner of the values in (prev, boundary] for each ring: the first point >= boundary.
    let owner_at = |hashes: &[u64], owners: &[u32], i: usize| -> Option<usize> {
        let i = if i >= hashes.len() { 0 } else { i };
        owners.get(i).map(|&o| o as usize)
    };
    let map_before = |o: Option<usize>| o.and_then(|o| old_to_new.get(o).copied().flatten());
    let (mut i, mut j) = (0usize, 0usize);
    let mut prev: Option<u64> = None;
    let mut moved: u128 = 0;
    loop {
        let next = match (bh.get(i), ah.get(j)) {
            (Some(&x), Some(&y)) => x.min(y),
            (Some(&x), None) => x,
            (None, Some(&y)) => y,
            (None, None) => break,
        };
        let arc = match prev {
            None => u128::from(next) + 1,
            Some(p) => u128::from(next - p),
        };
        if map_before(owner_at(bh, bo, i)) != owner_at(ah, ao, j) {
            moved += arc;
        }
        prev = Some(next);
        while bh.get(i) == Some(&next) {
            i += 1;
        }
        while ah.get(j) == Some(&next) {
            j += 1;
        }
    }
    // The wrap-around arc after the last boundary belongs to the first points of both rings.
    if let Some(p) = prev {
        let tail = space - 1 - u128::from(p);
        if map_before(owner_at(bh, bo, 0)) != owner_at(ah, ao, 0) {
            moved += tail;
        }
    }
    moved as f64 / space as f64
}
