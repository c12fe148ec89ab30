//! What a change of one ring's node set does to its points, without applying it: the points
//! that come and go, an owner lookup on the changed ring that combines the unchanged ring with
//! them, and the exact share of the hash space whose owner changes. Its cost grows with the
//! points that change (O(k log k) to build, O(log P + log k) per lookup), never with a copy of
//! the ring: what-ifs (`RING.MOVES`) use it on rings of any size.
//!
//! Owners are named in one index space for both rings: the ring's node indices, and for the
//! nodes that join, the node count and up, in order.

use super::{node_name, point_before, sort_points, Node, Ring};
use crate::flavour::{Lookup, Ties};

/// The points a node-set change adds and removes.
#[derive(Debug, Clone)]
pub struct RingDelta<'a> {
    ring: &'a Ring,
    /// Points that come in, as (hash, owner), sorted in the changed ring's order.
    added: Vec<(u64, u32)>,
    /// The ring indices of the points that go, sorted: only those with no copy left (a node
    /// can hold two points of one hash, and losing one of them changes no lookup).
    removed_at: Vec<usize>,
    /// For each entry of `removed_at`, the index of the first surviving point after it, or
    /// the point count when none survives before the end of the ring.
    survivor_after: Vec<usize>,
    /// The first surviving index of the ring; `None` when every point goes.
    first_survivor: Option<usize>,
    /// The names of the nodes that join, in order (for the name tie rule).
    joining: Vec<&'a [u8]>,
    /// For the flavours whose points or lookup the incremental delta does not model (a
    /// nearest-point lookup, points keyed by position: [`Ring::delta`]), the changed ring
    /// itself, built whole, with the common index of each of its nodes.
    rebuilt: Option<(Box<Ring>, Vec<u32>)>,
}

/// A change of a ring's nodes, as [`Ring::delta`] takes it: nodes of the ring that take a new
/// weight (0: they leave) and nodes that join, at once (several masters added, or drained and
/// removed, in one rebalance). In the common index space of the module docs, the nodes that
/// join are numbered after the ring's, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeChange<'a> {
    /// Nodes of the ring (their indices) that take a new weight; 0 for a node that leaves.
    pub weights: Vec<(usize, u32)>,
    /// Nodes that join, with their weights (>= 1).
    pub joining: Vec<(&'a [u8], u32)>,
}

impl<'a> NodeChange<'a> {
    /// The node `name` (not in the ring) joins with `weight`.
    pub fn join(name: &'a [u8], weight: u32) -> NodeChange<'a> {
        NodeChange {
            weights: Vec::new(),
            joining: vec![(name, weight)],
        }
    }

    /// The node at `index` leaves.
    pub fn leave(index: usize) -> NodeChange<'a> {
        NodeChange::reweight(index, 0)
    }

    /// The node at `index` takes `weight` (0: it leaves).
    pub fn reweight(index: usize, weight: u32) -> NodeChange<'a> {
        NodeChange {
            weights: vec![(index, weight)],
            joining: Vec::new(),
        }
    }

    /// The nodes that leave, in the order given.
    pub fn leaving(&self) -> impl Iterator<Item = usize> + '_ {
        self.weights.iter().filter(|w| w.1 == 0).map(|w| w.0)
    }

    /// Whether the node at `index` (common index space) joins, leaves or changes weight.
    pub fn touches(&self, index: usize, ring_nodes: usize) -> bool {
        index >= ring_nodes || self.weights.iter().any(|w| w.0 == index)
    }
}

impl Ring {
    /// What `change` does to the points, in the common index space (see the module docs).
    /// Cost: the points of the changed nodes (and, for ketama, whose counts depend on every
    /// weight, the few points each other node gains or loses), hashed and sorted.
    pub fn delta<'a>(&'a self, change: &NodeChange<'a>) -> RingDelta<'a> {
        let count = self.nodes.len();
        let joining: Vec<&[u8]> = change.joining.iter().map(|j| j.0).collect();
        if self.flavour.lookup() == Lookup::Nearest
            || self.flavour.points_by_position()
            || self.table.is_some()
        {
            return self.rebuilt_delta(change, joining);
        }
        // Only ketama's and Predis's counts depend on every weight (and on the node count); the
        // other flavours' counts change for the changed nodes alone, so only they are looked at.
        if !self.flavour.counts_follow_shares() {
            let count_of = |w: u32| {
                let counts = self.flavour.point_counts(self.vnodes, &[w]);
                if w == 0 {
                    0
                } else {
                    counts.first().copied().unwrap_or(0)
                }
            };
            let counts: Vec<(usize, u64)> = change
                .weights
                .iter()
                .map(|&(i, w)| (i, count_of(w)))
                .chain(
                    change
                        .joining
                        .iter()
                        .enumerate()
                        .map(|(j, &(_, w))| (count + j, count_of(w))),
                )
                .collect();
            return self.delta_of(&counts, joining);
        }
        let mut weights: Vec<u32> = self.nodes.iter().map(|n| n.weight).collect();
        for &(i, w) in &change.weights {
            if let Some(slot) = weights.get_mut(i) {
                *slot = w;
            }
        }
        weights.extend(change.joining.iter().map(|j| j.1));
        // A leaving node counts as weight 0 for its own points, but not in ketama's formula,
        // whose server count drops by one for each.
        let present: Vec<u32> = weights.iter().copied().filter(|&w| w > 0).collect();
        let mut planned = Ring::planned_points(self.flavour, self.vnodes, &present).into_iter();
        let counts: Vec<(usize, u64)> = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                (
                    i,
                    if w == 0 {
                        0
                    } else {
                        planned.next().unwrap_or(0)
                    },
                )
            })
            .collect();
        self.delta_of(&counts, joining)
    }

    /// The delta of a flavour whose changed ring is built whole (see [`RingDelta`]'s
    /// `rebuilt`): a copy of the ring with the change applied. Cost: O(P) and the changed
    /// ring's new points.
    fn rebuilt_delta<'a>(
        &'a self,
        change: &NodeChange<'a>,
        joining: Vec<&'a [u8]>,
    ) -> RingDelta<'a> {
        let mut nodes = Vec::new();
        let mut map = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let weight = change
                .weights
                .iter()
                .rev()
                .find(|w| w.0 == i)
                .map_or(n.weight, |w| w.1);
            if weight > 0 {
                nodes.push((n.name.clone(), weight));
                map.push(i as u32);
            }
        }
        for (j, &(name, weight)) in change.joining.iter().enumerate() {
            nodes.push((name.to_vec(), weight));
            map.push((self.nodes.len() + j) as u32);
        }
        let mut after = self.clone();
        after.set_nodes(nodes);
        RingDelta {
            ring: self,
            added: Vec::new(),
            removed_at: Vec::new(),
            survivor_after: Vec::new(),
            first_survivor: None,
            joining,
            rebuilt: Some((Box::new(after), map)),
        }
    }

    /// The delta of nodes taking new point counts (`(index, count)`, the joining node at the
    /// node count).
    ///
    /// The points that go are found in one of two ways, whichever costs less: when few go,
    /// each is hashed and looked up (O(k log P)); when many go (a node with many points
    /// leaves or is re-weighted down), one pass over the ring's owners collects the shrinking
    /// nodes' points and a merge with the hashed losses picks those that go, and a node that
    /// leaves is not hashed at all (O(P + k log k)).
    fn delta_of<'a>(&'a self, counts: &[(usize, u64)], joining: Vec<&'a [u8]>) -> RingDelta<'a> {
        let points = self.points.len();
        let before_of = |i: usize| self.nodes.get(i).map_or(0, |n| n.points);
        let now_of = |count: u64| u32::try_from(count).unwrap_or(u32::MAX);
        let losing: u64 = counts
            .iter()
            .map(|&(i, c)| u64::from(before_of(i).saturating_sub(now_of(c))))
            .sum();
        // A lookup costs a few cache misses; a pass over the owners, a few nanoseconds a point.
        let scan = losing.saturating_mul(32) >= points as u64;
        let slots = self.nodes.len() + joining.len();
        let (mut emptied, mut shrinking) = if scan {
            (vec![false; slots], vec![false; slots])
        } else {
            (Vec::new(), Vec::new())
        };
        let mut added = Vec::new();
        let mut lost: Vec<(u64, u32)> = Vec::new();
        let mut scratch = Vec::new();
        for &(i, count) in counts {
            let now = now_of(count);
            let before = before_of(i);
            let name = name_of(&self.nodes, &joining, i as u32);
            if now == before {
                continue;
            }
            if now < before && scan {
                if now == 0 {
                    // Every point of the node goes: the pass over the owners finds them.
                    if let Some(e) = emptied.get_mut(i) {
                        *e = true;
                    }
                    continue;
                }
                if let Some(s) = shrinking.get_mut(i) {
                    *s = true;
                }
            }
            scratch.clear();
            let (from, to) = (now.min(before), now.max(before));
            self.flavour
                .push_points(name, i as u32 + 1, from, to, &mut scratch);
            let points = scratch.iter().map(|&h| (h, i as u32));
            if now > before {
                added.extend(points);
            } else {
                lost.extend(points);
            }
        }
        lost.sort_unstable();
        let removed_at = if scan {
            self.removed_by_scan(&lost, &emptied, &shrinking)
        } else {
            self.removed_by_lookup(&lost)
        };
        let mut delta = RingDelta {
            ring: self,
            added,
            removed_at: Vec::new(),
            survivor_after: Vec::new(),
            first_survivor: None,
            joining,
            rebuilt: None,
        };
        let nodes = &self.nodes;
        let joining = &delta.joining;
        sort_points(&mut delta.added, self.flavour.ties(), |o| {
            name_of(nodes, joining, o)
        });
        delta.index_removed(removed_at);
        delta
    }

    /// The ring indices of the points that go, given the lost points as sorted (hash, owner):
    /// a point goes only when every copy of it goes (a node can hold two points of one hash,
    /// and losing one of them changes no lookup). One lookup per lost point.
    fn removed_by_lookup(&self, lost: &[(u64, u32)]) -> Vec<usize> {
        let mut at = Vec::with_capacity(lost.len());
        for run in lost.chunk_by(|a, b| a == b) {
            let Some(&(h, o)) = run.first() else {
                continue;
            };
            let lo = self.first_at_or_after(h);
            let same = self.points.get(lo..).unwrap_or(&[]);
            let len = same.iter().take_while(|p| p.hash() == h).count();
            let same = same.get(..len).unwrap_or(&[]);
            let copies = same.iter().filter(|p| p.owner() == o).count();
            if copies <= run.len() {
                at.extend(
                    (lo..)
                        .zip(same)
                        .filter(|(_, p)| p.owner() == o)
                        .map(|(i, _)| i),
                );
            }
        }
        at.sort_unstable();
        at
    }

    /// [`Ring::removed_by_lookup`] by one pass over the owners: every point of an `emptied`
    /// node goes; the points of a `shrinking` node are merged with the lost points (both in
    /// hash order) and go when every copy is lost.
    fn removed_by_scan(
        &self,
        lost: &[(u64, u32)],
        emptied: &[bool],
        shrinking: &[bool],
    ) -> Vec<usize> {
        let flag = |v: &[bool], o: u32| v.get(o as usize).copied().unwrap_or(false);
        let mut at = Vec::new();
        let mut mine = Vec::new();
        for (i, o) in self.points.iter().map(|p| p.owner()).enumerate() {
            if flag(emptied, o) {
                at.push(i);
            } else if flag(shrinking, o) {
                mine.push(i);
            }
        }
        let hash = |i: usize| self.points.get(i).map_or(0, |p| p.hash());
        let owner = |i: usize| self.points.get(i).map_or(0, |p| p.owner());
        let mut rest = lost;
        for group in mine.chunk_by(|&a, &b| hash(a) == hash(b)) {
            let Some(&first) = group.first() else {
                continue;
            };
            let h = hash(first);
            // Both lists are in hash order: a merge, not a search.
            let skip = rest.iter().take_while(|p| p.0 < h).count();
            rest = rest.get(skip..).unwrap_or(&[]);
            let len = rest.iter().take_while(|p| p.0 == h).count();
            let lost_here = rest.get(..len).unwrap_or(&[]);
            // Groups hold the copies of one hash: one or two points.
            for &i in group {
                let o = owner(i);
                let copies = group.iter().filter(|&&j| owner(j) == o).count();
                let gone = lost_here.iter().filter(|p| p.1 == o).count();
                if copies <= gone {
                    at.push(i);
                }
            }
        }
        at.sort_unstable();
        at
    }
}

/// The fraction of a circle of `space` values whose owner differs between two rings given
/// as [`Ring::owner_runs`], the second's owners mapped to the first's index space by `map`:
/// one merge of the runs. Either ring without points: 0 when both are empty, else 1.
fn moved_between_runs(
    before: &[(u64, u32)],
    after: &[(u64, u32)],
    map: &[u32],
    space: u128,
) -> f64 {
    if before.is_empty() || after.is_empty() {
        return if before.is_empty() && after.is_empty() {
            0.0
        } else {
            1.0
        };
    }
    let mut starts: Vec<u64> = before.iter().chain(after).map(|r| r.0).collect();
    starts.sort_unstable();
    starts.dedup();
    let owner_at = |runs: &[(u64, u32)], x: u64| {
        let k = runs.partition_point(|r| r.0 <= x);
        runs.get(k.saturating_sub(1)).map(|r| r.1)
    };
    let mut moved: u128 = 0;
    for (k, &x) in starts.iter().enumerate() {
        let end = starts.get(k + 1).map_or(space, |&e| u128::from(e));
        let b = owner_at(before, x);
        let a = owner_at(after, x).and_then(|o| map.get(o as usize).copied());
        if a != b {
            moved += end - u128::from(x);
        }
    }
    moved as f64 / space as f64
}

/// The share of the hash space whose owner differs between two rings of a flavour without
/// points, the second's owners mapped by `map`: exact for modula (its 32768 hash values) and
/// Maglev (entry by entry, each weighed by the 64-bit hashes falling on it), estimated from
/// the probes of [`super::table::share_probes`] otherwise (hashes spread by `fmix64`, or keys
/// `0`, `1`, ...).
fn moved_between_tables(before: &Ring, after: &Ring, map: &[u32]) -> f64 {
    use super::table::Table;
    let mapped = |o: Option<usize>| o.and_then(|o| map.get(o).copied()).map(|c| c as usize);
    match (&before.table, &after.table) {
        (Some(Table::Modula(_)), Some(_)) => {
            let moved = (0..32768u64)
                .filter(|&v| {
                    before.owner_of_hash(v.max(1)) != mapped(after.owner_of_hash(v.max(1)))
                })
                .count();
            moved as f64 / 32768.0
        }
        (Some(Table::Maglev(b)), Some(Table::Maglev(a))) if a.len() == b.len() => {
            let moved = b
                .iter()
                .zip(a)
                .filter(|(&x, &y)| {
                    let x = (x != u32::MAX).then_some(x as usize);
                    x != mapped((y != u32::MAX).then_some(y as usize))
                })
                .count();
            moved as f64 / b.len().max(1) as f64
        }
        (Some(t), _) => {
            let probes = super::table::share_probes(t, &before.nodes);
            let mut digits = Vec::new();
            let moved = (0..probes)
                .filter(|&i| {
                    if before.owner_needs_key() {
                        digits.clear();
                        digits.extend_from_slice(i.to_string().as_bytes());
                        before.owner(&digits) != mapped(after.owner(&digits))
                    } else {
                        let h = crate::flavour::fmix64(i);
                        before.owner_of_hash(h) != mapped(after.owner_of_hash(h))
                    }
                })
                .count();
            moved as f64 / probes as f64
        }
        (None, _) => 0.0,
    }
}

/// The name of `owner` in the common index space (empty when out of range).
fn name_of<'n>(nodes: &'n [Node], joining: &[&'n [u8]], owner: u32) -> &'n [u8] {
    match (owner as usize).checked_sub(nodes.len()) {
        Some(j) => joining.get(j).copied().unwrap_or_default(),
        None => node_name(nodes, owner),
    }
}

impl RingDelta<'_> {
    /// The changed ring's points as sorted (hash, owner) pairs, owners in the common index
    /// space: the ring's surviving points merged with the added ones. O(P + k): a copy.
    pub fn after_points(&self) -> Vec<(u64, u32)> {
        if let Some((after, map)) = &self.rebuilt {
            return after
                .points
                .iter()
                .map(|p| {
                    (
                        p.hash(),
                        map.get(p.owner() as usize).copied().unwrap_or(u32::MAX),
                    )
                })
                .collect();
        }
        let ring = self.ring;
        let mut out = Vec::with_capacity(ring.points.len() + self.added.len());
        let mut removed = self.removed_at.iter().peekable();
        let mut added = self.added.iter().peekable();
        for (i, (h, o)) in ring.points.iter().map(|p| p.pair()).enumerate() {
            if removed.peek() == Some(&&i) {
                removed.next();
                continue;
            }
            while let Some(&&(ah, ao)) = added.peek() {
                if ah < h || (ah == h && self.before((ah, ao), (h, o))) {
                    out.push((ah, ao));
                    added.next();
                } else {
                    break;
                }
            }
            out.push((h, o));
        }
        out.extend(added.copied());
        out
    }

    /// The points the change adds and removes.
    pub fn changed_points(&self) -> usize {
        if let Some((after, _)) = &self.rebuilt {
            return self.ring.points.len() + after.points.len();
        }
        self.added.len() + self.removed_at.len()
    }

    /// Takes `at`, the sorted ring indices of the points that go, and fills `survivor_after`
    /// and `first_survivor`, so that an owner lookup jumps over a run of removed points in
    /// O(log k) instead of walking it (a node that leaves can hold long runs of consecutive
    /// points). Cost: O(k).
    fn index_removed(&mut self, at: Vec<usize>) {
        let points = self.ring.points.len();
        // Backwards, so that the survivor after a removed point's successor is known.
        let mut after = vec![points; at.len()];
        for k in (0..at.len()).rev() {
            let next = at.get(k).map_or(points, |&i| i + 1);
            let next_removed = at.get(k + 1) == Some(&next);
            let found = if next_removed {
                after.get(k + 1).copied().unwrap_or(points)
            } else {
                next
            };
            if let Some(slot) = after.get_mut(k) {
                *slot = found;
            }
        }
        self.first_survivor = match at.first() {
            Some(0) => after.first().copied().filter(|&i| i < points),
            _ if points == 0 => None,
            _ => Some(0),
        };
        self.removed_at = at;
        self.survivor_after = after;
    }

    /// The first surviving index at or after ring index `i` (< the point count), wrapping;
    /// `None` when every point goes.
    fn survivor_from(&self, i: usize) -> Option<usize> {
        match self.removed_at.binary_search(&i) {
            Err(_) => Some(i),
            Ok(k) => match self.survivor_after.get(k) {
                Some(&s) if s < self.ring.points.len() => Some(s),
                _ => self.first_survivor,
            },
        }
    }

    /// Whether point `a` comes before point `b` in the changed ring (both in the common space).
    fn before(&self, a: (u64, u32), b: (u64, u32)) -> bool {
        let ties = self.ring.flavour.ties();
        if a.0 != b.0 || ties != Ties::Name {
            return point_before(ties, &[], a, b);
        }
        let name = |o| name_of(&self.ring.nodes, &self.joining, o);
        name(a.1) < name(b.1)
    }

    /// The owner (common index space) of `member` on the changed ring: [`RingDelta::owner_after`]
    /// of its hash, or of the member itself where the owner needs it (pymemcache).
    pub fn owner_after_member(&self, member: &[u8]) -> Option<usize> {
        match &self.rebuilt {
            Some((after, map)) if after.owner_needs_key() => {
                let o = after.owner(member)?;
                map.get(o).map(|&c| c as usize)
            }
            _ => self.owner_after(self.ring.member_hash(member)),
        }
    }

    /// The owner (common index space) of `hash` on the changed ring; `None` when it has no
    /// points.
    pub fn owner_after(&self, hash: u64) -> Option<usize> {
        if let Some((after, map)) = &self.rebuilt {
            let o = after.owner_of_hash(hash)?;
            return map.get(o).map(|&c| c as usize);
        }
        self.owner_after_from(hash, self.ring.first_at_or_after(hash))
    }

    /// [`RingDelta::owner_after`], given `at`, the index of the ring's first point at or after
    /// `hash` (the point count when there is none).
    fn owner_after_from(&self, hash: u64, at: usize) -> Option<usize> {
        let next_added = self.added.partition_point(|&(h, _)| h < hash);
        self.owner_after_at(hash, at, next_added)
    }

    /// [`RingDelta::owner_after_from`], given also `next_added`, the index of the first added
    /// point at or after `hash`.
    fn owner_after_at(&self, hash: u64, at: usize, next_added: usize) -> Option<usize> {
        let ring = self.ring;
        let points = ring.points.len();
        // The first surviving old point at or after `hash`, wrapping.
        let start = if at >= points { 0 } else { at };
        let old = match self.survivor_from(start) {
            Some(i) if points > 0 => ring.points.get(i).map(|p| p.pair()),
            _ => None,
        };
        let new = self
            .added
            .get(next_added)
            .or_else(|| self.added.first())
            .copied();
        // Distance clockwise from `hash`, so that a wrapped point counts as far.
        let distance = |h: u64| h.wrapping_sub(hash);
        let winner = match (old, new) {
            (Some(o), Some(n)) => {
                let (d_o, d_n) = (distance(o.0), distance(n.0));
                if d_n < d_o || (d_n == d_o && self.before(n, o)) {
                    n
                } else {
                    o
                }
            }
            (Some(p), None) | (None, Some(p)) => p,
            (None, None) => return None,
        };
        Some(winner.1 as usize)
    }

    /// The exact fraction of the hash space whose owner (common index space) differs between
    /// the ring and the changed ring. Only the arcs that end at a changed point can change
    /// owner: an arc `(prev, x]` between consecutive points of either ring is owned by the
    /// first point at or after `x`, which is the same point in both rings unless a point at
    /// `x` came or went. Cost: O(k (log k + 1)) for k changed points, each placed among the
    /// ring's points once through the bucket index.
    pub fn moved_space(&self) -> f64 {
        let ring = self.ring;
        let space = ring.flavour.space();
        if let Some((after, map)) = &self.rebuilt {
            if ring.table.is_some() {
                return moved_between_tables(ring, after, map);
            }
            return moved_between_runs(&ring.owner_runs(), &after.owner_runs(), map, space);
        }
        let points = ring.points.len();
        let after_empty = self.added.is_empty() && self.first_survivor.is_none();
        match (points == 0, after_empty) {
            (true, true) => return 0.0,
            (true, false) | (false, true) => return 1.0,
            (false, false) => {}
        }
        let added: Vec<u64> = self.added.iter().map(|p| p.0).collect();
        let mut changed: Vec<u64> = added.clone();
        if !self.removed_at.is_empty() {
            let all = &ring.points;
            changed.extend(
                self.removed_at
                    .iter()
                    .filter_map(|&i| all.get(i))
                    .map(|p| p.hash()),
            );
            changed.sort_unstable();
        }
        changed.dedup();
        // Where each changed hash falls among the ring's points: independent lookups, so that
        // the CPU overlaps their cache misses on a big ring.
        let at: Vec<usize> = changed.iter().map(|&x| ring.first_at_or_after(x)).collect();
        // The owner there before the change, read in a pass of its own for the same reason.
        let owners_before: Vec<Option<usize>> = at
            .iter()
            .map(|&i| {
                let i = if i >= points { 0 } else { i };
                ring.points.get(i).map(|p| p.owner() as usize)
            })
            .collect();
        let arc_from = |prev: u64, x: u64| -> u128 {
            match prev.cmp(&x) {
                std::cmp::Ordering::Less => u128::from(x - prev),
                std::cmp::Ordering::Greater => u128::from(x) + space - u128::from(prev),
                std::cmp::Ordering::Equal => space,
            }
        };
        let mut moved: u128 = 0;
        // `changed` is sorted: the first added point at or after x only moves forward.
        let mut j = 0;
        for ((&x, &i), &before) in changed.iter().zip(&at).zip(&owners_before) {
            // The point of either ring just before x (any old point bounds an arc: it is a
            // point of the ring before the change), wrapping to the largest.
            let old_prev = match i.checked_sub(1) {
                Some(k) => ring.points.get(k),
                None => ring.points.last(),
            }
            .map(|p| p.hash());
            while added.get(j).is_some_and(|&p| p < x) {
                j += 1;
            }
            let added_prev = match j.checked_sub(1) {
                Some(k) => added.get(k),
                None => added.last(),
            };
            let arc = [old_prev, added_prev.copied()]
                .into_iter()
                .flatten()
                .map(|p| arc_from(p, x))
                .min()
                .unwrap_or(space);
            if before != self.owner_after_at(x, i, j) {
                moved += arc;
            }
        }
        moved as f64 / space as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flavour::Flavour;

    /// A change, the node list after it, and the common index of each node after it.
    type Case<'a> = (NodeChange<'a>, Vec<(Vec<u8>, u32)>, Vec<u32>);

    /// The owner (common index space) of `hash` on `after`, a ring built from scratch with
    /// the change applied, whose node `i` is `map[i]` in the common space.
    fn rebuilt_owner(after: &Ring, map: &[u32], hash: u64) -> Option<usize> {
        after.owner_of_hash(hash).map(|i| map[i] as usize)
    }

    fn names(n: usize) -> Vec<(Vec<u8>, u32)> {
        (0..n)
            .map(|i| (format!("10.1.0.{i}:6379").into_bytes(), 1 + (i % 3) as u32))
            .collect()
    }

    #[test]
    fn lookups_and_moved_space_equal_a_rebuilt_ring() {
        for flavour in Flavour::rings() {
            let nodes = names(12);
            let mut ring = Ring::new(flavour, 20, false);
            ring.set_nodes(nodes.clone());
            let n = nodes.len() as u32;
            let cases: Vec<Case> = vec![
                (
                    NodeChange::join(b"joiner", 2),
                    [nodes.clone(), vec![(b"joiner".to_vec(), 2)]].concat(),
                    (0..=n).collect(),
                ),
                (
                    NodeChange::reweight(4, 3),
                    nodes
                        .iter()
                        .enumerate()
                        .map(|(i, (m, w))| (m.clone(), if i == 4 { 3 } else { *w }))
                        .collect(),
                    (0..n).collect(),
                ),
                (
                    NodeChange::reweight(2, 1),
                    nodes
                        .iter()
                        .enumerate()
                        .map(|(i, (m, w))| (m.clone(), if i == 2 { 1 } else { *w }))
                        .collect(),
                    (0..n).collect(),
                ),
                (
                    NodeChange::leave(5),
                    nodes
                        .iter()
                        .enumerate()
                        .filter(|&(i, _)| i != 5)
                        .map(|(_, x)| x.clone())
                        .collect(),
                    (0..n).filter(|&i| i != 5).collect(),
                ),
                // Several at once: two join, two leave, one is re-weighted (3 -> 6 masters,
                // 6 -> 4, and a weight change in one rebalance).
                (
                    NodeChange {
                        weights: vec![(7, 0), (1, 3), (10, 0)],
                        joining: vec![(b"joiner-a", 1), (b"joiner-b", 3)],
                    },
                    nodes
                        .iter()
                        .enumerate()
                        .filter(|&(i, _)| i != 7 && i != 10)
                        .map(|(i, (m, w))| (m.clone(), if i == 1 { 3 } else { *w }))
                        .chain([(b"joiner-a".to_vec(), 1), (b"joiner-b".to_vec(), 3)])
                        .collect(),
                    (0..n + 2).filter(|&i| i != 7 && i != 10).collect(),
                ),
            ];
            for (change, after_nodes, map) in cases {
                check(&ring, 20, change, after_nodes, &map);
            }
        }
    }

    /// Checks `ring.delta(change)` against a ring rebuilt from `after_nodes` (see
    /// [`rebuilt_owner`]): owners at, before and after every point of both rings, and the moved
    /// share by a sweep over all of them.
    fn check(
        ring: &Ring,
        vnodes: u32,
        change: NodeChange,
        after_nodes: Vec<(Vec<u8>, u32)>,
        map: &[u32],
    ) {
        let flavour = ring.flavour;
        let delta = ring.delta(&change);
        let mut after = Ring::new(flavour, vnodes, false);
        after.set_nodes(after_nodes);
        // Probe at every point of both rings and next to it.
        let bh: Vec<u64> = ring.points().iter().map(|p| p.hash()).collect();
        let ah: Vec<u64> = after.points().iter().map(|p| p.hash()).collect();
        for &p in bh.iter().chain(&ah) {
            for h in [p.wrapping_sub(1), p, p.wrapping_add(1)] {
                let h = if flavour.hash_bits() == 32 {
                    h & 0xFFFF_FFFF
                } else {
                    h
                };
                assert_eq!(
                    delta.owner_after(h),
                    rebuilt_owner(&after, map, h),
                    "{flavour:?} {change:?} at {h}"
                );
            }
        }
        // The changed ring's points, as the rebuilt ring has them (owners mapped).
        let rebuilt: Vec<(u64, u32)> = after
            .points()
            .iter()
            .map(|p| (p.hash(), map[p.owner() as usize]))
            .collect();
        assert_eq!(
            delta.after_points(),
            rebuilt,
            "{flavour:?} {change:?}: after_points"
        );
        // The moved share by a sweep over both rings' owned values: for a successor lookup
        // each arc ends at a point of either ring; for a nearest-point lookup the arcs also
        // end half-way between points, so the sweep takes every run of either ring.
        let mut moved = 0u128;
        let space = flavour.space();
        if flavour.lookup() == crate::flavour::Lookup::Nearest {
            let mut starts: Vec<u64> = ring
                .owner_runs()
                .into_iter()
                .chain(after.owner_runs())
                .map(|r| r.0)
                .collect();
            starts.sort_unstable();
            starts.dedup();
            for (k, &x) in starts.iter().enumerate() {
                let end = starts.get(k + 1).map_or(space, |&e| u128::from(e));
                if ring.owner_of_hash(x) != rebuilt_owner(&after, map, x) {
                    moved += end - u128::from(x);
                }
            }
        } else {
            let mut bounds: Vec<u64> = bh.iter().chain(&ah).copied().collect();
            bounds.sort_unstable();
            bounds.dedup();
            for (k, &x) in bounds.iter().enumerate() {
                let arc = match k.checked_sub(1).map(|j| bounds[j]) {
                    Some(p) => u128::from(x - p),
                    None => u128::from(x) + space - u128::from(*bounds.last().unwrap()),
                };
                if ring.owner_of_hash(x) != rebuilt_owner(&after, map, x) {
                    moved += arc;
                }
            }
        }
        let expected = moved as f64 / space as f64;
        assert!(
            (delta.moved_space() - expected).abs() < 1e-12,
            "{flavour:?} {change:?}: {} vs {expected}",
            delta.moved_space()
        );
    }

    #[test]
    fn long_runs_of_removed_points_are_jumped_over() {
        // VNODES 1 and a heavy node: the heavy node's points make long runs, so that a lookup
        // after it leaves must jump them; the last case removes every point.
        for flavour in Flavour::rings() {
            let nodes = vec![(b"heavy".to_vec(), 400), (b"light".to_vec(), 1)];
            let mut ring = Ring::new(flavour, 1, false);
            ring.set_nodes(nodes.clone());
            let light = vec![(b"light".to_vec(), 1)];
            check(&ring, 1, NodeChange::leave(0), light.clone(), &[1]);
            let thin = vec![(b"heavy".to_vec(), 1), (b"light".to_vec(), 1)];
            check(&ring, 1, NodeChange::reweight(0, 1), thin, &[0, 1]);
            check(&ring, 1, NodeChange::leave(1), vec![nodes[0].clone()], &[0]);
            let mut alone = Ring::new(flavour, 1, false);
            alone.set_nodes(light);
            check(&alone, 1, NodeChange::leave(0), Vec::new(), &[]);
        }
    }

    #[test]
    fn both_ways_of_finding_the_points_that_go_agree() {
        // 200 nodes: the lookup way, the merge of a shrinking node's points and the pass for
        // a node that leaves must name the same ring indices.
        for flavour in Flavour::rings() {
            let mut ring = Ring::new(flavour, 20, false);
            ring.set_nodes(names(200));
            for k in [0usize, 7, 100, 199] {
                let node = &ring.nodes[k];
                // Ketama's points come four to a digest.
                let unit = if matches!(flavour, Flavour::Ketama | Flavour::PredisKetama) {
                    4
                } else {
                    1
                };
                for now in [0, unit, node.points / 2 / unit * unit] {
                    let mut hashes = Vec::new();
                    let position = k as u32 + 1;
                    flavour.push_points(&node.name, position, now, node.points, &mut hashes);
                    let mut lost: Vec<(u64, u32)> = hashes.iter().map(|&h| (h, k as u32)).collect();
                    lost.sort_unstable();
                    let mut flags = vec![false; 201];
                    flags[k] = true;
                    let none = vec![false; 201];
                    let by_lookup = ring.removed_by_lookup(&lost);
                    assert_eq!(
                        by_lookup.len(),
                        (node.points - now) as usize,
                        "{flavour:?} k {k} now {now} points {}",
                        node.points
                    );
                    assert_eq!(ring.removed_by_scan(&lost, &none, &flags), by_lookup);
                    if now == 0 {
                        assert_eq!(ring.removed_by_scan(&[], &flags, &none), by_lookup);
                    }
                }
            }
        }
    }
}
