//! What one ring key holds: the ring's configuration and nodes, its points, and its simulated
//! Redis Cluster slot table, changed together so that a refused change leaves both untouched.

use super::error::EngineError;
use super::flavour::Flavour;
use super::keyslot::{key_slot, SLOT_COUNT};
use super::ring::{Node, Ring};
use super::slots::{create_master_order, RebalanceStep, SlotTable};
use std::collections::HashMap;

/// Largest `WEIGHT` accepted.
pub const MAX_WEIGHT: u32 = 1_000_000;
/// Largest `VNODES` accepted.
pub const MAX_VNODES: u32 = 100_000;
/// The most points any ring may have, however it is made: the upper bound of
/// `ringslot.max-points`, and the ceiling a stored ring (an RDB, a `RESTORE` or `MIGRATE`
/// payload, a full sync) is checked against before any point is built. Below it, a stored ring
/// loads as written whatever this server's `ringslot.max-points`, since a replica or the target
/// of a reshard must hold what its master held.
pub const MAX_POINTS_CEILING: u64 = 100_000_000;

/// A ring and its slot table. Every method that changes it validates everything first, so an
/// `Err` means nothing changed.
#[derive(Debug, Clone)]
pub struct Topology {
    ring: Ring,
    slots: SlotTable,
}

/// One node's figures, as `RING.NODES` reports them.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeStats<'a> {
    /// The node's name.
    pub name: &'a [u8],
    /// Its weight (>= 1).
    pub weight: u32,
    /// Its points on the ring.
    pub points: u32,
    /// Exact fraction of the ring's hash space it owns (0.0..=1.0).
    pub ring_share: f64,
    /// Hash slots it owns in the slot table (0..=16384).
    pub slots: u32,
    /// `slots / 16384`.
    pub slot_share: f64,
}

/// The ring-wide figures of `RING.INFO`.
#[derive(Debug, Clone, PartialEq)]
pub struct Info {
    /// The flavour.
    pub flavour: Flavour,
    /// Points per unit of weight.
    pub vnodes: u32,
    /// Whether members hash by their hash tag on the ring.
    pub hashtag: bool,
    /// Number of nodes.
    pub nodes: usize,
    /// Number of points.
    pub points: usize,
    /// Peak-to-mean load of the ring (see [`Topology::ring_peak_to_mean`]).
    pub ring_peak_to_mean: f64,
    /// Peak-to-mean load of the slot table (see [`Topology::slot_peak_to_mean`]).
    pub slot_peak_to_mean: f64,
    /// Approximate heap bytes used.
    pub memory_bytes: usize,
}

/// A ring's configuration: what `RING.CREATE` set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The flavour.
    pub flavour: Flavour,
    /// Points per unit of weight.
    pub vnodes: u32,
    /// Whether members hash by their hash tag on the ring.
    pub hashtag: bool,
}

/// How big a command may make a ring: `ringslot.max-points` and `ringslot.max-nodes`. Writes
/// replayed from the AOF or sent by a master, and what-ifs of such rings, use
/// [`Limits::NONE`]: they were accepted once already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most points.
    pub points: u64,
    /// The most nodes.
    pub nodes: u64,
}

impl Limits {
    /// No limit.
    pub const NONE: Limits = Limits {
        points: u64::MAX,
        nodes: u64::MAX,
    };
}

/// Checks a `WEIGHT` value: `1..=MAX_WEIGHT`.
pub fn check_weight(weight: i64) -> Result<u32, EngineError> {
    u32::try_from(weight)
        .ok()
        .filter(|w| (1..=MAX_WEIGHT).contains(w))
        .ok_or(EngineError::BadWeight { max: MAX_WEIGHT })
}

impl Topology {
    /// A `WEIGHT` given to this ring's nodes, checked ([`check_weight`]), refused when not 1
    /// for a flavour without weights (redis-rb) and above the flavour's largest (HAProxy's
    /// 256). Errors: `BadWeight`, `NoWeights`.
    pub fn given_weight(&self, weight: Option<i64>) -> Result<Option<u32>, EngineError> {
        let weight = weight.map(check_weight).transpose()?;
        let flavour = self.ring.flavour();
        if weight.is_some_and(|w| w != 1) && !flavour.takes_weights() {
            return Err(EngineError::NoWeights {
                flavour: flavour.name(),
            });
        }
        if let (Some(w), Some(max)) = (weight, flavour.max_weight()) {
            if w > max {
                return Err(EngineError::BadWeight { max });
            }
        }
        Ok(weight)
    }

    /// An empty ring of `flavour`. `vnodes` (points per unit of weight, `1..=MAX_VNODES`)
    /// defaults to the flavour's; it is refused with ketama, whose counts are fixed.
    pub fn new(
        flavour: Flavour,
        vnodes: Option<i64>,
        hashtag: bool,
    ) -> Result<Topology, EngineError> {
        let vnodes = match vnodes {
            None => flavour.default_vnodes(),
            Some(_) if flavour.fixes_vnodes() => {
                return Err(EngineError::VnodesFixed {
                    flavour: flavour.name(),
                })
            }
            Some(v) => u32::try_from(v)
                .ok()
                .filter(|v| (1..=MAX_VNODES).contains(v))
                .ok_or(EngineError::BadVnodes { max: MAX_VNODES })?,
        };
        Ok(Topology {
            ring: Ring::new(flavour, vnodes, hashtag),
            slots: SlotTable::new(),
        })
    }

    /// The ring `RING.ADD` creates on a missing key: native, `vnodes` points per unit of
    /// weight (`ringslot.default-vnodes`), members hashed whole. Error: `vnodes` out of range.
    pub fn implicit(vnodes: i64) -> Result<Topology, EngineError> {
        Topology::new(Flavour::Native, Some(vnodes), false)
    }

    /// Rebuilds a topology from stored parts (RDB): configuration, nodes in order, and the slot
    /// table as `(start, end, node index)` ranges. Everything is checked before any point is
    /// built: `vnodes` in range (160 for ketama, which fixes it), names non-empty and distinct,
    /// weights in `1..=MAX_WEIGHT`, at most [`MAX_POINTS_CEILING`] points, slot ranges inside
    /// `0..=16383`, in ascending order without overlap and owned by a listed node. Error:
    /// `Corrupt` naming the first inconsistency; nothing is built then.
    pub fn from_parts(
        flavour: Flavour,
        vnodes: u32,
        hashtag: bool,
        nodes: Vec<(Vec<u8>, u32)>,
        slot_ranges: &[(u16, u16, usize)],
    ) -> Result<Topology, EngineError> {
        if vnodes == 0 || vnodes > MAX_VNODES {
            return Err(EngineError::Corrupt("vnodes out of range"));
        }
        if flavour.fixes_vnodes() && vnodes != flavour.default_vnodes() {
            return Err(EngineError::Corrupt("vnodes differs from the flavour's"));
        }
        let mut seen = HashMap::with_capacity(nodes.len());
        for (name, weight) in &nodes {
            if name.is_empty() {
                return Err(EngineError::Corrupt("empty node name"));
            }
            if *weight == 0 || *weight > MAX_WEIGHT {
                return Err(EngineError::Corrupt("weight out of range"));
            }
            if seen.insert(name.as_slice(), ()).is_some() {
                return Err(EngineError::Corrupt("duplicate node"));
            }
        }
        let weights: Vec<u32> = nodes.iter().map(|(_, w)| *w).collect();
        let ceiling = Limits {
            points: MAX_POINTS_CEILING,
            nodes: u64::MAX,
        };
        if Topology::check_planned_points(flavour, vnodes, &weights, ceiling).is_err() {
            return Err(EngineError::Corrupt(
                "more points than any ring may have (the ceiling of ringslot.max-points)",
            ));
        }
        let mut next_free = 0usize;
        for &(start, end, owner) in slot_ranges {
            let (start, end) = (usize::from(start), usize::from(end));
            if start > end || end >= SLOT_COUNT || start < next_free {
                return Err(EngineError::Corrupt("bad slot range"));
            }
            if owner >= nodes.len() {
                return Err(EngineError::Corrupt("slot range owned by no node"));
            }
            next_free = end + 1;
        }
        let mut slots = SlotTable::new();
        for &(start, end, owner) in slot_ranges {
            slots.assign(start, end, owner);
        }
        let mut ring = Ring::new(flavour, vnodes, hashtag);
        ring.set_nodes(nodes);
        Ok(Topology { ring, slots })
    }

    /// The ring.
    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// The slot table.
    pub fn slot_table(&self) -> &SlotTable {
        &self.slots
    }

    /// The nodes, in the order they were added.
    pub fn nodes(&self) -> &[Node] {
        self.ring.nodes()
    }

    fn node_name(&self, index: usize) -> Option<&[u8]> {
        self.ring.nodes().get(index).map(|n| n.name.as_slice())
    }

    /// Adds the nodes `names` (duplicates count once) with `weight` (default 1), or re-weights
    /// those already present when `weight` is given. Returns `(added, changed)`: how many nodes
    /// are new, and whether anything changed. The slot table is laid out as `--cluster create`
    /// when it was empty, else rebalanced. Errors: empty name, weight out of range, more points
    /// or nodes than `limits` allow; nothing changes then.
    pub fn add(
        &mut self,
        names: &[&[u8]],
        weight: Option<i64>,
        limits: Limits,
    ) -> Result<(usize, bool), EngineError> {
        let weight = self.given_weight(weight)?;
        if names.iter().any(|n| n.is_empty()) {
            return Err(EngineError::EmptyNodeName);
        }
        let mut nodes: Vec<(Vec<u8>, u32)> = self
            .ring
            .nodes()
            .iter()
            .map(|n| (n.name.clone(), n.weight))
            .collect();
        let mut index: HashMap<Vec<u8>, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.clone(), i))
            .collect();
        let (mut added, mut changed) = (0, false);
        for &name in names {
            match index.get(name).and_then(|&i| nodes.get_mut(i)) {
                Some(node) => {
                    if let Some(w) = weight {
                        if node.1 != w {
                            node.1 = w;
                            changed = true;
                        }
                    }
                }
                None => {
                    index.insert(name.to_vec(), nodes.len());
                    nodes.push((name.to_vec(), weight.unwrap_or(1)));
                    added += 1;
                    changed = true;
                }
            }
        }
        if !changed {
            return Ok((0, false));
        }
        let weights: Vec<u32> = nodes.iter().map(|(_, w)| *w).collect();
        self.check_points(&weights, limits)?;
        let names: Vec<&[u8]> = nodes.iter().map(|(n, _)| n.as_slice()).collect();
        follow_nodes(&mut self.slots, &names, &weights);
        self.ring.set_nodes(nodes);
        Ok((added, true))
    }

    /// Checks that a ring of this one's flavour and VNODES with nodes of `weights` would stay
    /// within `limits`, without building it. Errors: `TooManyNodes`, `TooManyPoints`.
    pub fn check_points(&self, weights: &[u32], limits: Limits) -> Result<(), EngineError> {
        Topology::check_planned_points(self.ring.flavour(), self.ring.vnodes(), weights, limits)
    }

    /// [`Topology::check_points`] for a ring not built yet, of `flavour` with `vnodes` points
    /// per unit of weight: checked before any point is made.
    pub fn check_planned_points(
        flavour: Flavour,
        vnodes: u32,
        weights: &[u32],
        limits: Limits,
    ) -> Result<(), EngineError> {
        let nodes = weights.len() as u64;
        if nodes > limits.nodes {
            return Err(EngineError::TooManyNodes {
                nodes,
                limit: limits.nodes,
            });
        }
        let points: u64 = Ring::planned_points(flavour, vnodes, weights).iter().sum();
        if points > limits.points {
            return Err(EngineError::TooManyPoints {
                points,
                limit: limits.points,
            });
        }
        Ok(())
    }

    /// Removes the nodes `names` that are in the ring (others are ignored; duplicates count
    /// once) and returns how many were removed. Their slots are first drained to the survivors
    /// as a rebalance with their weight at 0 would; removing every node empties the table.
    pub fn del(&mut self, names: &[&[u8]]) -> usize {
        let mut gone = vec![false; self.ring.nodes().len()];
        for name in names {
            if let Some(g) = self.ring.node_index(name).and_then(|i| gone.get_mut(i)) {
                *g = true;
            }
        }
        let removed = gone.iter().filter(|&&g| g).count();
        if removed == 0 {
            return 0;
        }
        let weights: Vec<u32> = self
            .ring
            .nodes()
            .iter()
            .zip(&gone)
            .map(|(n, &g)| if g { 0 } else { n.weight })
            .collect();
        follow_nodes(&mut self.slots, &[], &weights);
        self.slots.remove_nodes(&gone);
        let survivors = self
            .ring
            .nodes()
            .iter()
            .zip(&gone)
            .filter(|(_, &g)| !g)
            .map(|(n, _)| (n.name.clone(), n.weight))
            .collect();
        self.ring.set_nodes(survivors);
        removed
    }

    /// Gives slots `start..=end` to the existing node `node`, as `CLUSTER ADDSLOTSRANGE` /
    /// `CLUSTER SETSLOT ... NODE` would, and returns whether any slot changed owner (O(range)).
    /// Errors: a range outside `0..=16383` or reversed, an unknown node.
    pub fn assign(&mut self, start: i64, end: i64, node: &[u8]) -> Result<bool, EngineError> {
        let range_ok = 0 <= start && start <= end && end < SLOT_COUNT as i64;
        if !range_ok {
            return Err(EngineError::BadSlotRange { start, end });
        }
        let owner = self
            .ring
            .node_index(node)
            .ok_or_else(|| EngineError::UnknownNode(node.to_vec()))?;
        Ok(self.slots.assign(start as u16, end as u16, owner))
    }

    /// Unassigns slots `start..=end`, as `CLUSTER DELSLOTSRANGE`; returns whether any slot had
    /// an owner. Error: a range outside `0..=16383` or reversed.
    pub fn unassign(&mut self, start: i64, end: i64) -> Result<bool, EngineError> {
        let range_ok = 0 <= start && start <= end && end < SLOT_COUNT as i64;
        if !range_ok {
            return Err(EngineError::BadSlotRange { start, end });
        }
        Ok(self.slots.unassign(start as u16, end as u16))
    }

    /// The owner of `member` on the ring, `None` on a ring without points.
    pub fn owner(&self, member: &[u8]) -> Option<&[u8]> {
        self.ring.owner(member).and_then(|i| self.node_name(i))
    }

    /// Up to `count` distinct nodes clockwise from `member` (its preference list).
    pub fn preference_list(&self, member: &[u8], count: usize) -> Vec<&[u8]> {
        self.ring
            .preference_list(member, count)
            .into_iter()
            .filter_map(|i| self.node_name(i))
            .collect()
    }

    /// The member's hash slot (0..=16383) and that slot's owner in the slot table.
    pub fn slot(&self, member: &[u8]) -> (u16, Option<&[u8]>) {
        let slot = key_slot(member);
        (slot, self.slots.owner(slot).and_then(|i| self.node_name(i)))
    }

    /// The slot table as `(start, end, node)` ranges, in slot order (as `CLUSTER SLOTS`).
    pub fn slot_ranges(&self) -> Vec<(u16, u16, &[u8])> {
        self.slots
            .ranges()
            .into_iter()
            .filter_map(|(s, e, o)| self.node_name(o).map(|n| (s, e, n)))
            .collect()
    }

    /// Figures for every node, in node order.
    pub fn node_stats(&self) -> Vec<NodeStats<'_>> {
        let shares = self.ring.shares();
        let counts = self.slots.counts(self.ring.nodes().len());
        self.ring
            .nodes()
            .iter()
            .zip(shares)
            .zip(counts)
            .map(|((n, ring_share), slots)| NodeStats {
                name: &n.name,
                weight: n.weight,
                points: n.points,
                ring_share,
                slots,
                slot_share: f64::from(slots) / SLOT_COUNT as f64,
            })
            .collect()
    }

    fn ideal_shares(&self) -> Vec<f64> {
        let total: f64 = self.ring.nodes().iter().map(|n| f64::from(n.weight)).sum();
        self.ring
            .nodes()
            .iter()
            .map(|n| f64::from(n.weight) / total)
            .collect()
    }

    /// Peak-to-mean load of the ring: the largest ratio of a node's exact share of the hash
    /// space to its weight share (1.0 is perfect balance; 0.0 for an empty ring).
    pub fn ring_peak_to_mean(&self) -> f64 {
        peak_to_mean(&self.ring.shares(), &self.ideal_shares())
    }

    /// Peak-to-mean load of the slot table: the largest ratio of a node's slot share to its
    /// weight share (0.0 for an empty ring).
    pub fn slot_peak_to_mean(&self) -> f64 {
        let shares: Vec<f64> = self
            .slots
            .counts(self.ring.nodes().len())
            .into_iter()
            .map(|c| f64::from(c) / SLOT_COUNT as f64)
            .collect();
        peak_to_mean(&shares, &self.ideal_shares())
    }

    /// Approximate heap bytes used by the ring, its nodes and its slot table.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Topology>() + self.ring.memory_bytes() + self.slots.memory_bytes()
    }

    /// The ring's configuration (O(1), unlike [`Topology::info`], which walks the points).
    pub fn config(&self) -> Config {
        Config {
            flavour: self.ring.flavour(),
            vnodes: self.ring.vnodes(),
            hashtag: self.ring.hashtag(),
        }
    }

    /// The ring-wide figures of `RING.INFO`.
    pub fn info(&self) -> Info {
        Info {
            flavour: self.ring.flavour(),
            vnodes: self.ring.vnodes(),
            hashtag: self.ring.hashtag(),
            nodes: self.ring.nodes().len(),
            points: self.ring.point_count(),
            ring_peak_to_mean: self.ring_peak_to_mean(),
            slot_peak_to_mean: self.slot_peak_to_mean(),
            memory_bytes: self.memory_bytes(),
        }
    }
}

/// Brings a slot table in line with a new node list (index = node; `names` and `weights` in
/// node order, weight 0 for a node that leaves), as a real cluster would be: an empty table
/// gets the `redis-cli --cluster create` layout over the nodes, a table whose nodes all leave
/// is emptied, and any other change is a `redis-cli --cluster rebalance` with the weights.
/// Returns the moves made, in order. (`names` is read only for the create layout.)
pub fn follow_nodes(slots: &mut SlotTable, names: &[&[u8]], weights: &[u32]) -> Vec<RebalanceStep> {
    if weights.iter().all(|&w| w == 0) {
        let moves = by_owner(slots, |owner| RebalanceStep {
            from: Some(owner),
            to: None,
            slots: Vec::new(),
        });
        slots.clear();
        moves
    } else if slots.is_empty() {
        slots.create_layout(&create_master_order(names));
        by_owner(slots, |owner| RebalanceStep {
            from: None,
            to: Some(owner),
            slots: Vec::new(),
        })
    } else {
        slots.rebalance(weights)
    }
}

/// One move per owner of the table, holding its slots, owners in order of their first slot.
fn by_owner(slots: &SlotTable, make: impl Fn(usize) -> RebalanceStep) -> Vec<RebalanceStep> {
    let mut moves: Vec<RebalanceStep> = Vec::new();
    let mut at_of: HashMap<usize, usize> = HashMap::new();
    for (start, end, owner) in slots.ranges() {
        let at = *at_of.entry(owner).or_insert_with(|| {
            moves.push(make(owner));
            moves.len() - 1
        });
        if let Some(m) = moves.get_mut(at) {
            m.slots.extend(start..=end);
        }
    }
    moves
}

/// The largest `share / ideal` over nodes with a non-zero ideal share; 0.0 when there are none.
pub fn peak_to_mean(shares: &[f64], ideal: &[f64]) -> f64 {
    shares
        .iter()
        .zip(ideal)
        .filter(|(_, &i)| i > 0.0)
        .map(|(&s, &i)| s / i)
        .fold(0.0, f64::max)
}
