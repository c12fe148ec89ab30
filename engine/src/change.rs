//! A change of a ring key's nodes, as the writes or the cluster operation that would make it
//! (nodes joining, re-weighted or leaving, several at once; the rebalance pending after
//! `redis-cli --cluster add-node`), checked against the ring without changing it, and the slot
//! table's plan for it: the moves `redis-cli --cluster rebalance --cluster-use-empty-masters`
//! would make.

use super::error::EngineError;
use super::keyslot::SLOT_COUNT;
use super::ring::delta::NodeChange;
use super::slots::{RebalanceStep, SlotTable};
use super::topology::{follow_nodes, Limits, Topology, MAX_WEIGHT};
use std::borrow::Cow;
use std::collections::HashSet;

/// `redis-cli --cluster rebalance`'s default `--cluster-threshold`, in percent.
pub const DEFAULT_THRESHOLD: f64 = 2.0;

/// A change of a ring key's nodes to evaluate.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// `RING.ADD key [WEIGHT w] node [node ...]`: nodes that are not in the ring join with
    /// `weight` (default 1), all in one step (on a cluster: each `add-node`d, then one
    /// `rebalance --cluster-use-empty-masters`); nodes already in the ring take `weight` (a
    /// re-weight), which must then be given.
    Add {
        /// The nodes' names, in order (a name given twice counts once).
        nodes: Vec<Vec<u8>>,
        /// Their weight, if given.
        weight: Option<i64>,
    },
    /// `RING.DEL key node [node ...]`: nodes of the ring leave, all in one step (on a cluster:
    /// one rebalance giving each weight 0, then a `del-node` each).
    Del {
        /// The nodes' names (each must be in the ring).
        nodes: Vec<Vec<u8>>,
    },
    /// The rebalance pending on the slot table now, as `redis-cli --cluster rebalance
    /// --cluster-use-empty-masters` makes it: after `add-node`, the new masters serve no slot.
    /// Its threshold rule is redis-cli's (`clusterManagerCommandRebalance`): nothing moves
    /// unless a node's slots are more than `threshold` percent off its expected share (an
    /// empty node counts when it expects more than one slot), and a threshold of 0 moves
    /// nothing, as there. On the ring and modulo, the nodes that serve no slot now are not
    /// there yet, and join if the rebalance gives them slots; a node left with none leaves.
    Rebalance {
        /// `--cluster-threshold`, in percent (redis-cli's default: [`DEFAULT_THRESHOLD`]).
        threshold: f64,
        /// `--cluster-weight node=w` for some nodes (0 drains a node before `del-node`); the
        /// others keep their ring weight.
        weights: Vec<(Vec<u8>, u32)>,
    },
}

/// A change checked against a topology: the change of the nodes of the ring as it serves
/// before the change (its base), and what the slot table needs.
pub(crate) struct Prepared<'a> {
    /// The key's node indices that make the base, in order: every node, or, for a pending
    /// rebalance, the nodes that serve slots now (the others are not there yet).
    pub(crate) base_nodes: Vec<usize>,
    /// The change of the base's nodes, in its common index space ([`crate::ring::delta`]).
    pub(crate) node_change: NodeChange<'a>,
    /// The nodes the change touches (join, leave, re-weight), in the base's common index
    /// space.
    pub(crate) changed: Vec<bool>,
    /// Every node's weight after the change, in the base's common index space (0: it
    /// leaves).
    pub(crate) weights: Vec<u32>,
    /// The fraction a perfect scheme moves: the total variation of the nodes' weight shares.
    pub(crate) ideal: f64,
    /// The slot table after the change, with the key's node indices (joining nodes after
    /// them), when it was worked out (a rebalance), and the moves that made it.
    pub(crate) slots: Option<(SlotTable, Vec<RebalanceStep>)>,
    /// The key's node indices whose slot share the change touches (joining nodes after
    /// them): those of `changed`, or for a rebalance those that gain their first slot, lose
    /// their last one or change weight.
    pub(crate) slot_changed: Vec<bool>,
    /// Names of the key's nodes in its common index space (joining nodes after them).
    pub(crate) names: Vec<&'a [u8]>,
    /// Weights for the key's slot table, in its common index space (0: drained).
    pub(crate) slot_weights: Vec<u32>,
    /// The change changes nothing (re-weights to the weights the nodes have, a rebalance
    /// under the threshold).
    pub(crate) same: bool,
}

impl<'a> Prepared<'a> {
    /// The ring before the change: `key` itself, or for a pending rebalance while some
    /// nodes serve no slot, a ring of the others, built here (O(their points)). Error: none
    /// in practice (the key's own parts, checked when it was built).
    pub(crate) fn base(&self, key: &'a Topology) -> Result<Cow<'a, Topology>, EngineError> {
        let nodes = key.nodes();
        if self.base_nodes.len() == nodes.len() {
            return Ok(Cow::Borrowed(key));
        }
        let parts: Vec<(Vec<u8>, u32)> = self
            .base_nodes
            .iter()
            .filter_map(|&i| nodes.get(i).map(|n| (n.name.clone(), n.weight)))
            .collect();
        let mut position = vec![None; nodes.len()];
        for (b, &i) in self.base_nodes.iter().enumerate() {
            if let Some(p) = position.get_mut(i) {
                *p = Some(b);
            }
        }
        let ranges: Vec<(u16, u16, usize)> = key
            .slot_table()
            .ranges()
            .into_iter()
            .filter_map(|(a, b, o)| Some((a, b, position.get(o).copied().flatten()?)))
            .collect();
        let c = key.config();
        Topology::from_parts(c.flavour, c.vnodes, c.hashtag, parts, &ranges).map(Cow::Owned)
    }

    /// The base's nodes after the change, names and weights, in its common index space (0: a
    /// node that leaves; joining nodes last).
    pub(crate) fn after_nodes(&self) -> Vec<(&'a [u8], u32)> {
        self.base_nodes
            .iter()
            .filter_map(|&i| self.names.get(i).copied())
            .chain(self.node_change.joining.iter().map(|j| j.0))
            .zip(self.weights.iter().copied())
            .collect()
    }

    /// The slot table after the change, and the moves that make it (the key's node indices,
    /// joining nodes after them): `redis-cli --cluster create`'s layout for a table that is
    /// empty, else a rebalance with the nodes' weights.
    pub(crate) fn slots_after(&self, key: &Topology) -> (SlotTable, Vec<RebalanceStep>) {
        if let Some(done) = &self.slots {
            return done.clone();
        }
        let mut table = key.slot_table().clone();
        if self.same {
            return (table, Vec::new());
        }
        let names: &[&[u8]] = if table.is_empty() { &self.names } else { &[] };
        let moves = follow_nodes(&mut table, names, &self.slot_weights);
        (table, moves)
    }
}

/// Whether `redis-cli --cluster rebalance --cluster-use-empty-masters` with `threshold` (in
/// percent) moves anything on a table whose nodes own `counts` slots and weigh `weights`
/// (`clusterManagerCommandRebalance`, single precision as there): a node is over the
/// threshold when `|100 - 100 * expected / slots|` exceeds it, or, owning no slot, when it
/// expects more than one; a threshold of 0 or less reaches nothing.
pub fn threshold_reached(counts: &[u32], weights: &[u32], threshold: f64) -> bool {
    let total: f32 = weights.iter().map(|&w| w as f32).sum();
    if total <= 0.0 || threshold <= 0.0 {
        return false;
    }
    let threshold = threshold as f32;
    counts.iter().zip(weights).any(|(&slots, &w)| {
        let expected = ((SLOT_COUNT as f32 / total) * w as f32) as i32;
        if slots > 0 {
            let err = (100.0 - 100.0 * f64::from(expected) / f64::from(slots)).abs() as f32;
            err > threshold
        } else {
            expected > 1
        }
    })
}

/// The total variation between two weight vectors' shares (the first `before.len()` entries
/// of `after` are the same nodes; more are joiners): the least fraction of the key space any
/// scheme must move. Worked out exactly in integers, `sum max(0, a Tb - b Ta) / (Ta Tb)`,
/// then divided once, so that one node of three joining is 1/3 to the last bit. A ring that
/// was empty or becomes empty moves everything (1.0), or nothing if it stays empty.
fn share_shift(before: &[u32], after: &[u32]) -> f64 {
    let tb: u128 = before.iter().map(|&w| u128::from(w)).sum();
    let ta: u128 = after.iter().map(|&w| u128::from(w)).sum();
    match (tb, ta) {
        (0, 0) => return 0.0,
        (0, _) | (_, 0) => return 1.0,
        _ => {}
    }
    let gained: u128 = after
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let b = before.get(i).copied().unwrap_or(0);
            (u128::from(a) * tb).saturating_sub(u128::from(b) * ta)
        })
        .sum();
    gained as f64 / (ta * tb) as f64
}

impl Topology {
    /// Checks `change` (as [`Topology::what_if`] documents its errors) and works out what it
    /// needs, without copying the ring (but for a pending rebalance while some nodes serve no
    /// slot: the ring without them is built).
    pub(crate) fn prepare<'a>(
        &'a self,
        change: &'a Change,
        limits: Limits,
    ) -> Result<Prepared<'a>, EngineError> {
        match change {
            Change::Add { nodes, weight } => self.prepare_add(nodes, *weight, limits),
            Change::Del { nodes } => self.prepare_del(nodes),
            Change::Rebalance { threshold, weights } => {
                self.prepare_rebalance(*threshold, weights, limits)
            }
        }
    }

    /// The names of the key's nodes, in order.
    fn names(&self) -> Vec<&[u8]> {
        self.nodes().iter().map(|n| n.name.as_slice()).collect()
    }

    /// `Change::Add`.
    fn prepare_add<'a>(
        &'a self,
        names: &'a [Vec<u8>],
        weight: Option<i64>,
        limits: Limits,
    ) -> Result<Prepared<'a>, EngineError> {
        let weight = self.given_weight(weight)?;
        if names.is_empty() {
            return Err(EngineError::NoNodes);
        }
        let before: Vec<u32> = self.nodes().iter().map(|n| n.weight).collect();
        let mut weights = before.clone();
        let mut all = self.names();
        let mut change = NodeChange::default();
        let mut seen: HashSet<&[u8]> = HashSet::new();
        for name in names {
            if name.is_empty() {
                return Err(EngineError::EmptyNodeName);
            }
            if !seen.insert(name) {
                continue;
            }
            match (self.ring().node_index(name), weight) {
                (Some(_), None) => return Err(EngineError::NodeExists(name.clone())),
                (Some(index), Some(w)) => {
                    if let Some(slot) = weights.get_mut(index) {
                        if *slot != w {
                            *slot = w;
                            change.weights.push((index, w));
                        }
                    }
                }
                (None, w) => {
                    let w = w.unwrap_or(1);
                    weights.push(w);
                    all.push(name);
                    change.joining.push((name, w));
                }
            }
        }
        self.check_points(&weights, limits)?;
        Ok(self.prepared(change, before, weights, all))
    }

    /// `Change::Del`.
    fn prepare_del<'a>(&'a self, names: &'a [Vec<u8>]) -> Result<Prepared<'a>, EngineError> {
        if names.is_empty() {
            return Err(EngineError::NoNodes);
        }
        let before: Vec<u32> = self.nodes().iter().map(|n| n.weight).collect();
        let mut weights = before.clone();
        let mut change = NodeChange::default();
        for name in names {
            let index = self
                .ring()
                .node_index(name)
                .ok_or_else(|| EngineError::UnknownNode(name.clone()))?;
            if let Some(slot) = weights.get_mut(index) {
                if *slot != 0 {
                    *slot = 0;
                    change.weights.push((index, 0));
                }
            }
        }
        Ok(self.prepared(change, before, weights, self.names()))
    }

    /// A change of the key's own nodes (the key is its own base).
    fn prepared<'a>(
        &'a self,
        node_change: NodeChange<'a>,
        before: Vec<u32>,
        weights: Vec<u32>,
        names: Vec<&'a [u8]>,
    ) -> Prepared<'a> {
        let count = self.nodes().len();
        let changed: Vec<bool> = (0..weights.len())
            .map(|i| node_change.touches(i, count))
            .collect();
        let same = node_change.weights.is_empty() && node_change.joining.is_empty();
        Prepared {
            base_nodes: (0..count).collect(),
            ideal: share_shift(&before, &weights),
            slot_changed: changed.clone(),
            changed,
            slot_weights: weights.clone(),
            weights,
            node_change,
            slots: None,
            names,
            same,
        }
    }

    /// `Change::Rebalance` (see its docs).
    fn prepare_rebalance<'a>(
        &'a self,
        threshold: f64,
        overrides: &'a [(Vec<u8>, u32)],
        limits: Limits,
    ) -> Result<Prepared<'a>, EngineError> {
        let nodes = self.nodes();
        let count = nodes.len();
        let mut weights: Vec<u32> = nodes.iter().map(|n| n.weight).collect();
        for (name, w) in overrides {
            if *w > MAX_WEIGHT {
                return Err(EngineError::BadWeight { max: MAX_WEIGHT });
            }
            // A weight of 0 drains the node; any other goes through the flavour's rules.
            if *w > 0 {
                self.given_weight(Some(i64::from(*w)))?;
            }
            let index = self
                .ring()
                .node_index(name)
                .ok_or_else(|| EngineError::UnknownNode(name.clone()))?;
            if let Some(slot) = weights.get_mut(index) {
                *slot = *w;
            }
        }
        let unassigned: u32 = self
            .slot_table()
            .unassigned()
            .iter()
            .map(|&(a, b)| u32::from(b - a) + 1)
            .sum();
        if unassigned > 0 {
            return Err(EngineError::SlotsNotCovered { unassigned });
        }
        let counts = self.slot_table().counts(count);
        let mut table = self.slot_table().clone();
        let reached = threshold_reached(&counts, &weights, threshold);
        let moves = if reached {
            table.rebalance(&weights)
        } else {
            Vec::new()
        };
        let after_counts = table.counts(count);
        let serving_before: Vec<bool> = counts.iter().map(|&c| c > 0).collect();
        let serving_after: Vec<bool> = after_counts.iter().map(|&c| c > 0).collect();
        // The base: the nodes that serve slots now, in order.
        let base_nodes: Vec<usize> = (0..count)
            .filter(|&i| serving_before.get(i) == Some(&true))
            .collect();
        // The base's change: nodes that serve after and not now join (in the key's order),
        // nodes that serve now and not after leave, the others take their weight.
        let mut change = NodeChange::default();
        let mut after_weights: Vec<u32> = Vec::new();
        let mut before_weights: Vec<u32> = Vec::new();
        let mut slot_changed = vec![false; count];
        for (b, &i) in base_nodes.iter().enumerate() {
            let old = nodes.get(i).map_or(0, |n| n.weight);
            let new = match (serving_after.get(i), weights.get(i)) {
                (Some(true), Some(&w)) => w.max(1),
                _ => 0,
            };
            before_weights.push(old);
            after_weights.push(new);
            if new != old {
                change.weights.push((b, new));
                if let Some(c) = slot_changed.get_mut(i) {
                    *c = true;
                }
            }
        }
        for (i, node) in nodes.iter().enumerate() {
            if serving_after.get(i) == Some(&true) && serving_before.get(i) == Some(&false) {
                let w = weights.get(i).copied().unwrap_or(1).max(1);
                change.joining.push((node.name.as_slice(), w));
                after_weights.push(w);
                if let Some(c) = slot_changed.get_mut(i) {
                    *c = true;
                }
            }
        }
        self.check_points(&after_weights, limits)?;
        let base_count = base_nodes.len();
        let changed: Vec<bool> = (0..after_weights.len())
            .map(|i| change.touches(i, base_count))
            .collect();
        let same = moves.is_empty() && change.weights.is_empty() && change.joining.is_empty();
        Ok(Prepared {
            ideal: share_shift(&before_weights, &after_weights),
            base_nodes,
            node_change: change,
            changed,
            weights: after_weights,
            slots: Some((table, moves)),
            slot_changed,
            names: self.names(),
            slot_weights: weights,
            same,
        })
    }

    /// Checks `change` against the ring as [`Topology::what_if`] would (an unknown node, a bad
    /// weight, a ring past `limits`), without evaluating anything. Cost: O(N) (a rebalance:
    /// one of a copy of the slot table too).
    pub fn check_change(&self, change: &Change, limits: Limits) -> Result<(), EngineError> {
        self.prepare(change, limits).map(|_| ())
    }

    /// The slots `change` would move, as `redis-cli --cluster rebalance
    /// --cluster-use-empty-masters` would move them (in the order it would, one entry per
    /// "Moving N slots from A to B"), or as `--cluster create` lays out the first nodes.
    /// Changes nothing. Errors: those of [`Topology::what_if`].
    pub fn plan(
        &self,
        change: &Change,
        limits: Limits,
    ) -> Result<Vec<RebalanceStep<Vec<u8>>>, EngineError> {
        let p = self.prepare(change, limits)?;
        let (_, moves) = p.slots_after(self);
        Ok(moves
            .into_iter()
            .map(|m| m.named(|i| p.names.get(i).map(|n| n.to_vec())))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Flavour;

    fn ring(nodes: &[(&str, i64)]) -> Topology {
        let mut t = Topology::new(Flavour::Native, Some(10), false).unwrap();
        for &(n, w) in nodes {
            t.add(&[n.as_bytes()], Some(w), Limits::NONE).unwrap();
        }
        t
    }

    #[test]
    fn the_threshold_rule_is_redis_clis() {
        // 16384 slots over 3 equal nodes: expected 5461 each.
        assert!(!threshold_reached(&[5461, 5462, 5461], &[1, 1, 1], 2.0));
        // 5% off one: over a 2% threshold, under a 10% one.
        assert!(threshold_reached(&[5200, 5723, 5461], &[1, 1, 1], 2.0));
        assert!(!threshold_reached(&[5200, 5723, 5461], &[1, 1, 1], 10.0));
        // An empty node that expects more than one slot is over any threshold.
        assert!(threshold_reached(&[8192, 8192, 0], &[1, 1, 1], 50.0));
        // A threshold of 0 moves nothing, as in redis-cli (its test is `threshold > 0`).
        assert!(!threshold_reached(&[8192, 8192, 0], &[1, 1, 1], 0.0));
    }

    #[test]
    fn ideal_is_the_total_variation_of_the_shares() {
        assert_eq!(share_shift(&[1, 1], &[1, 1, 1]), 1.0 / 3.0);
        assert_eq!(share_shift(&[1, 2, 3], &[1, 2, 0]), 0.5);
        assert_eq!(share_shift(&[], &[2]), 1.0);
        assert_eq!(share_shift(&[2], &[0]), 1.0);
        assert_eq!(share_shift(&[], &[]), 0.0);
        assert!((share_shift(&[1, 1, 1], &[1, 1, 1, 1, 1, 1]) - 0.5).abs() < 1e-12);
        assert!((share_shift(&[1, 1, 1, 1], &[1, 1, 0, 0]) - 0.5).abs() < 1e-12);
        assert!((share_shift(&[1, 1], &[3, 1]) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn several_nodes_join_or_leave_in_one_rebalance() {
        let t = ring(&[("a", 1), ("b", 1), ("c", 1)]);
        let three = Change::Add {
            nodes: vec![b"d".to_vec(), b"e".to_vec(), b"f".to_vec()],
            weight: None,
        };
        let plan = t.plan(&three, Limits::NONE).unwrap();
        let moved: usize = plan.iter().map(|m| m.slots.len()).sum();
        // Each of d, e and f expects (int)(16384 / 6) = 2730 slots; the create layout's 5461,
        // 5462 and 5461 give 4 more than 3 x 2730, which redis-cli hands out one at a time to
        // the nodes at or under their share, in order: d, e, f and d again.
        assert_eq!(moved, 2732 + 2731 + 2731);
        assert!(plan.iter().all(|m| m.to.as_deref() != Some(b"a")));
        let p = t.prepare(&three, Limits::NONE).unwrap();
        assert!((p.ideal - 0.5).abs() < 1e-12);
        assert_eq!(p.changed, vec![false, false, false, true, true, true]);
        // Two leave: one rebalance drains both.
        let t6 = ring(&[("a", 1), ("b", 1), ("c", 1), ("d", 1), ("e", 1), ("f", 1)]);
        let two = Change::Del {
            nodes: vec![b"e".to_vec(), b"f".to_vec()],
        };
        let plan = t6.plan(&two, Limits::NONE).unwrap();
        assert!(plan
            .iter()
            .all(|m| matches!(m.from.as_deref(), Some(b"e") | Some(b"f"))));
        let drained: usize = plan.iter().map(|m| m.slots.len()).sum();
        let counts = t6.slot_table().counts(6);
        assert_eq!(drained as u32, counts[4] + counts[5]);
        assert!(matches!(
            t6.plan(
                &Change::Del {
                    nodes: vec![b"x".to_vec()]
                },
                Limits::NONE
            ),
            Err(EngineError::UnknownNode(_))
        ));
    }

    #[test]
    fn the_pending_rebalance_after_add_node() {
        // Three masters serving the create layout, then a fourth add-node'd (no slots): the
        // mirror's table, as RING.MIRROR makes it.
        let t = ring(&[("a", 1), ("b", 1), ("c", 1)]);
        let parts = vec![
            (b"a".to_vec(), 1),
            (b"b".to_vec(), 1),
            (b"c".to_vec(), 1),
            (b"d".to_vec(), 1),
        ];
        let mirror =
            Topology::from_parts(Flavour::Native, 10, false, parts, &t.slot_table().ranges())
                .unwrap();
        let rebalance = Change::Rebalance {
            threshold: DEFAULT_THRESHOLD,
            weights: Vec::new(),
        };
        let pending = mirror.plan(&rebalance, Limits::NONE).unwrap();
        // The same moves as adding d to the three-master ring.
        let join = t
            .plan(
                &Change::Add {
                    nodes: vec![b"d".to_vec()],
                    weight: None,
                },
                Limits::NONE,
            )
            .unwrap();
        assert_eq!(pending, join);
        let p = mirror.prepare(&rebalance, Limits::NONE).unwrap();
        assert_eq!(p.base_nodes, vec![0, 1, 2], "d is not there yet");
        assert_eq!(p.base(&mirror).unwrap().nodes().len(), 3);
        assert_eq!(p.node_change.joining, vec![(&b"d"[..], 1)]);
        assert!((p.ideal - 0.25).abs() < 1e-12);
        // Balanced: nothing to do.
        let balanced = t.plan(&rebalance, Limits::NONE).unwrap();
        assert!(balanced.is_empty());
        // Draining c before del-node: weight 0.
        let drain = Change::Rebalance {
            threshold: DEFAULT_THRESHOLD,
            weights: vec![(b"c".to_vec(), 0)],
        };
        let plan = t.plan(&drain, Limits::NONE).unwrap();
        assert!(plan.iter().all(|m| m.from.as_deref() == Some(b"c")));
        let p = t.prepare(&drain, Limits::NONE).unwrap();
        assert_eq!(p.node_change.weights, vec![(2, 0)]);
    }
}
