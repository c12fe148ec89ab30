//! The consistent-hash ring: nodes with integer weights, their points kept sorted for binary
//! search, owner and preference-list lookup, incremental changes and exact shares.
//!
//! The ring is the one of Karger et al. (1997) as used by ketama clients: every node is present
//! as many points (virtual nodes) on a circle of `2^bits` hash values; a member is owned by the
//! node of the first point at or after the member's hash, wrapping to the first point.

use super::flavour::Flavour;
use super::keyslot::hashed_part;
use fnv::FnvHashMap;

/// Owner mapping of a node that leaves the ring.
const GONE: u32 = u32::MAX;

/// A node of the ring: its name (any non-empty byte string), its weight (>= 1) and the number of
/// points it has on the ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The node's name, e.g. `10.0.0.1:6379`; binary-safe.
    pub name: Vec<u8>,
    /// Integer weight, >= 1.
    pub weight: u32,
    /// Points on the ring: `VNODES x weight` (native, groupcache) or libmemcached's weighted
    /// count (ketama, possibly 0).
    pub points: u32,
}

/// A consistent-hash ring of one flavour. Points are kept in two parallel arrays sorted by
/// hash, then by the flavour's tie rule, so that the first of equal points wins a lookup.
#[derive(Debug, Clone)]
pub struct Ring {
    flavour: Flavour,
    vnodes: u32,
    hashtag: bool,
    nodes: Vec<Node>,
    hashes: Vec<u64>,
    owners: Vec<u32>,
    /// Bucket index over the top `index_bits` bits of the hash space: `index[b]` is the first
    /// point whose bucket is >= b (the last bucket ends at the point count). About one bucket
    /// per four points, so a lookup reads one bucket and searches a handful of points instead
    /// of a binary search over every point (about 1 byte per point).
    index: Vec<u32>,
    index_bits: u32,
}

impl Ring {
    /// An empty ring. `vnodes` is the number of points per unit of weight (ignored by ketama,
    /// whose counts are libmemcached's); `hashtag` makes members hash by their `{hash tag}`.
    pub fn new(flavour: Flavour, vnodes: u32, hashtag: bool) -> Ring {
        Ring {
            flavour,
            vnodes,
            hashtag,
            nodes: Vec::new(),
            hashes: Vec::new(),
            owners: Vec::new(),
            index: Vec::new(),
            index_bits: 0,
        }
    }

    /// The ring's flavour.
    pub fn flavour(&self) -> Flavour {
        self.flavour
    }

    /// Points per unit of weight.
    pub fn vnodes(&self) -> u32 {
        self.vnodes
    }

    /// Whether members are hashed by their hash tag.
    pub fn hashtag(&self) -> bool {
        self.hashtag
    }

    /// The nodes, in the order they were added.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Position of the node called `name` in [`Ring::nodes`], if any.
    pub fn node_index(&self, name: &[u8]) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Total number of points on the ring.
    pub fn point_count(&self) -> usize {
        self.hashes.len()
    }

    /// The sorted point hashes and their owners (indices into [`Ring::nodes`]).
    pub fn points(&self) -> (&[u64], &[u32]) {
        (&self.hashes, &self.owners)
    }

    /// Points each node would have for these weights, in order: `vnodes x weight` for native and
    /// groupcache, libmemcached's weighted counts for ketama. Units: points (u64, no overflow).
    pub fn planned_points(flavour: Flavour, vnodes: u32, weights: &[u32]) -> Vec<u64> {
        match flavour {
            Flavour::Ketama => super::flavour::ketama_point_counts(weights)
                .into_iter()
                .map(u64::from)
                .collect(),
            Flavour::Native | Flavour::Groupcache => weights
                .iter()
                .map(|&w| u64::from(vnodes) * u64::from(w))
                .collect(),
        }
    }

    /// The hash of `member` on this ring's circle (of its hash tag when `HASHTAG` is set).
    pub fn member_hash(&self, member: &[u8]) -> u64 {
        let hashed = if self.hashtag {
            hashed_part(member)
        } else {
            member
        };
        self.flavour.member_hash(hashed)
    }

    /// Index of the first point at or after `hash`, wrapping to 0; `None` on a ring without
    /// points.
    fn point_at_or_after(&self, hash: u64) -> Option<usize> {
        if self.hashes.is_empty() {
            return None;
        }
        let bucket = self.bucket_of(hash);
        let i = match self.index.get(bucket) {
            Some(&lo) => {
                let lo = lo as usize;
                let hi = self
                    .index
                    .get(bucket + 1)
                    .map_or(self.hashes.len(), |&hi| hi as usize);
                let within = self.hashes.get(lo..hi).unwrap_or(&[]);
                lo + within.partition_point(|&p| p < hash)
            }
            // Only a hash outside the flavour's space gets here; search everything.
            None => self.hashes.partition_point(|&p| p < hash),
        };
        Some(if i >= self.hashes.len() { 0 } else { i })
    }

    /// The bucket of `hash` in the index: its top `index_bits` bits (0 without an index).
    fn bucket_of(&self, hash: u64) -> usize {
        let shift = self.flavour.hash_bits().saturating_sub(self.index_bits);
        hash.checked_shr(shift).unwrap_or(0) as usize
    }

    /// Index bits for `points` points: about one bucket per four points (the index stays small
    /// enough to sit in cache), at most 2^24 buckets.
    fn index_bits_for(flavour: Flavour, points: usize) -> u32 {
        let mut bits = 0;
        while bits < 24 && (4usize << bits) < points {
            bits += 1;
        }
        bits.min(flavour.hash_bits())
    }

    /// Rebuilds the bucket index from the points at the size that suits their count.
    fn rebuild_index(&mut self) {
        self.rebuild_index_with(Ring::index_bits_for(self.flavour, self.hashes.len()));
    }

    /// Rebuilds the bucket index from the points with `2^bits` buckets: one pass over the
    /// points and one over the buckets.
    fn rebuild_index_with(&mut self, bits: u32) {
        self.index_bits = bits;
        let buckets = 1usize << self.index_bits;
        // Count the points of each bucket into index[bucket + 1] (the last bucket's count is
        // not needed), then prefix-sum: index[b] becomes the number of points in buckets
        // before b, i.e. the first point of b.
        let mut index = std::mem::take(&mut self.index);
        index.clear();
        if index.capacity() / 4 > buckets {
            index.shrink_to(buckets); // a ring that lost most of its points gives memory back
        }
        index.resize(buckets, 0);
        for &h in &self.hashes {
            if let Some(c) = index.get_mut(self.bucket_of(h) + 1) {
                *c += 1;
            }
        }
        let mut sum = 0u32;
        for c in index.iter_mut() {
            sum += *c;
            *c = sum;
        }
        self.index = index;
    }

    /// Brings the bucket index up to date after the points `added` (as `(hash, owner)`) came
    /// in and points of the buckets `dropped` (bucket numbers under the current index) went:
    /// `index[b]` moves by the number of points gained minus lost in buckets before `b`, one
    /// pass over the buckets after the first change instead of one over every point. The
    /// index is rebuilt instead when its size is off by more than a factor of two for the new
    /// count.
    fn update_index(&mut self, added: &[(u64, u32)], dropped: &[usize]) {
        let ideal = Ring::index_bits_for(self.flavour, self.hashes.len());
        if self.index.is_empty() || ideal.abs_diff(self.index_bits) > 1 {
            self.rebuild_index();
            return;
        }
        // Each change shifts index[b] for every bucket b after its own; as (from, +1 or -1
        // in two's complement), sorted, then applied as a running sum over bucket ranges.
        let mut steps: Vec<(usize, u32)> = added
            .iter()
            .map(|a| (self.bucket_of(a.0) + 1, 1))
            .chain(dropped.iter().map(|&b| (b + 1, u32::MAX)))
            .collect();
        steps.sort_unstable_by_key(|s| s.0);
        let mut shift = 0u32;
        for (i, &(from, step)) in steps.iter().enumerate() {
            shift = shift.wrapping_add(step);
            let to = steps.get(i + 1).map_or(self.index.len(), |s| s.0);
            if let Some(run) = self.index.get_mut(from..to) {
                for first in run {
                    *first = first.wrapping_add(shift);
                }
            }
        }
    }

    /// The owner (index into [`Ring::nodes`]) of a hash on the circle; `None` without points.
    pub fn owner_of_hash(&self, hash: u64) -> Option<usize> {
        let i = self.point_at_or_after(hash)?;
        self.owners.get(i).map(|&o| o as usize)
    }

    /// The owner (index into [`Ring::nodes`]) of `member`; `None` on a ring without points.
    pub fn owner(&self, member: &[u8]) -> Option<usize> {
        self.owner_of_hash(self.member_hash(member))
    }

    /// Up to `count` distinct nodes met walking clockwise from `member`'s hash, the owner first
    /// (a preference list, as Dynamo's). Shorter when fewer nodes have points.
    pub fn preference_list(&self, member: &[u8], count: usize) -> Vec<usize> {
        let mut list = Vec::new();
        let Some(start) = self.point_at_or_after(self.member_hash(member)) else {
            return list;
        };
        let want = count.min(self.nodes.len());
        let mut seen = vec![false; self.nodes.len()];
        let (tail, head) = self.owners.split_at(start);
        for &o in head.iter().chain(tail) {
            if list.len() >= want {
                break;
            }
            if let Some(s) = seen.get_mut(o as usize) {
                if !*s {
                    *s = true;
                    list.push(o as usize);
                }
            }
        }
        list
    }

    /// Replaces the node list by `nodes` (names unique and non-empty, weights >= 1, in the new
    /// order: survivors keep their relative order), hashing only the points that appear and
    /// dropping only those that disappear. The point arrays change in place: one compaction
    /// pass when points go or owners are renumbered, one merge of the new points, and the
    /// bucket index is adjusted rather than rebuilt. Cost: O(P + k log k) for P points and k
    /// changed points, dominated by moving the points once (a memmove); no rehash, no sort of
    /// the whole ring.
    pub fn set_nodes(&mut self, nodes: Vec<(Vec<u8>, u32)>) {
        let change = self.plan_change(nodes);
        let dropped = self.drop_points(&change);
        self.insert_points(&change.added, &change.nodes);
        self.nodes = change.nodes;
        if self.hashes.capacity() > self.hashes.len() + self.hashes.len() / 8 + 16 {
            self.hashes.shrink_to_fit();
            self.owners.shrink_to_fit();
        }
        self.update_index(&change.added, &dropped);
    }

    /// Works out what [`Ring::set_nodes`] must do: the new nodes with their point counts, how
    /// old node indices map to new ones, the points to insert (sorted in ring order) and the
    /// points that nodes staying on the ring lose.
    fn plan_change(&self, nodes: Vec<(Vec<u8>, u32)>) -> PlannedChange {
        let weights: Vec<u32> = nodes.iter().map(|(_, w)| *w).collect();
        let counts = Ring::planned_points(self.flavour, self.vnodes, &weights);
        let old_index: FnvHashMap<&[u8], usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_slice(), i))
            .collect();

        let mut old_to_new = vec![GONE; self.nodes.len()];
        let mut shrunk = vec![false; self.nodes.len()];
        let mut added: Vec<(u64, u32)> = Vec::new();
        let mut lost: FnvHashMap<(u64, u32), u32> = FnvHashMap::default();
        let mut new_nodes = Vec::with_capacity(nodes.len());
        let mut scratch = Vec::new();
        for (new_i, ((name, weight), count)) in nodes.into_iter().zip(counts).enumerate() {
            let new_i = new_i as u32;
            let points = u32::try_from(count).unwrap_or(u32::MAX);
            let old = old_index.get(name.as_slice()).copied();
            let old_points = old.and_then(|o| self.nodes.get(o)).map_or(0, |n| n.points);
            scratch.clear();
            if points > old_points {
                self.flavour
                    .push_points(&name, old_points, points, &mut scratch);
                added.extend(scratch.iter().map(|&h| (h, new_i)));
            }
            if let Some(o) = old {
                if let Some(slot) = old_to_new.get_mut(o) {
                    *slot = new_i;
                }
                if points < old_points {
                    self.flavour
                        .push_points(&name, points, old_points, &mut scratch);
                    for &h in &scratch {
                        *lost.entry((h, o as u32)).or_insert(0) += 1;
                    }
                    if let Some(s) = shrunk.get_mut(o) {
                        *s = true;
                    }
                }
            }
            new_nodes.push(Node {
                name,
                weight,
                points,
            });
        }

        // (hash, node index) is ketama's order; for the name tie rule, re-sort the rare runs
        // of equal hashes by name.
        added.sort_unstable();
        if self.flavour.ties_by_name() {
            for run in added.chunk_by_mut(|a, b| a.0 == b.0) {
                if run.len() > 1 {
                    run.sort_by(|a, b| node_name(&new_nodes, a.1).cmp(node_name(&new_nodes, b.1)));
                }
            }
        }
        PlannedChange {
            nodes: new_nodes,
            old_to_new,
            added,
            lost,
            shrunk,
        }
    }

    /// Drops, in place, the points of nodes that leave and those that staying nodes lose, and
    /// renumbers the owners of the rest; returns the index buckets of the dropped points, in
    /// ascending order. Skipped when nothing goes and no owner is renumbered.
    fn drop_points(&mut self, change: &PlannedChange) -> Vec<usize> {
        let renumbered = change
            .old_to_new
            .iter()
            .enumerate()
            .any(|(i, &n)| n as usize != i);
        if !renumbered && change.lost.is_empty() {
            return Vec::new();
        }
        // Two passes: the first renumbers owners in place and finds the points to drop; the
        // second closes the gaps, one memmove per run of kept points.
        let mut gone_at = Vec::new();
        if change.lost.is_empty() {
            // Nodes only leave or move: a tight pass over the owners alone.
            for (at, owner) in self.owners.iter_mut().enumerate() {
                let new_o = change
                    .old_to_new
                    .get(*owner as usize)
                    .copied()
                    .unwrap_or(GONE);
                if new_o == GONE {
                    gone_at.push(at);
                } else {
                    *owner = new_o;
                }
            }
        } else {
            let mut lost = change.lost.clone();
            for (at, (&h, owner)) in self.hashes.iter().zip(self.owners.iter_mut()).enumerate() {
                let old = *owner as usize;
                let new_o = change.old_to_new.get(old).copied().unwrap_or(GONE);
                let loses = change.shrunk.get(old) == Some(&true)
                    && lost.get_mut(&(h, *owner)).is_some_and(|left| {
                        let take = *left > 0;
                        *left = left.saturating_sub(1);
                        take
                    });
                if new_o == GONE || loses {
                    gone_at.push(at);
                } else {
                    *owner = new_o;
                }
            }
        }
        let dropped = gone_at
            .iter()
            .filter_map(|&at| self.hashes.get(at))
            .map(|&h| self.bucket_of(h))
            .collect();
        let Some(&first_gone) = gone_at.first() else {
            return dropped;
        };
        let mut kept = first_gone;
        for (i, &at) in gone_at.iter().enumerate() {
            let run = at + 1..gone_at.get(i + 1).copied().unwrap_or(self.hashes.len());
            let len = run.len();
            self.hashes.copy_within(run.clone(), kept);
            self.owners.copy_within(run, kept);
            kept += len;
        }
        self.hashes.truncate(kept);
        self.owners.truncate(kept);
        dropped
    }

    /// Merges `added` (sorted in ring order, owners already new indices into `nodes`) into
    /// the sorted points: in place when the arrays have room, else into new arrays.
    fn insert_points(&mut self, added: &[(u64, u32)], nodes: &[Node]) {
        if added.is_empty() {
            return;
        }
        let kept = self.hashes.len();
        let total = kept + added.len();
        let few = added.len().saturating_mul(64) <= kept;
        let by_name = self.flavour.ties_by_name();
        let before = |a: (u64, u32), b: (u64, u32)| point_before(by_name, nodes, a, b);
        // Where `a` goes among the old points `lo..hi`: after those with a smaller hash, and
        // after equal-hash points that sort before it.
        let place = |hashes: &[u64], owners: &[u32], lo: usize, hi: usize, a: (u64, u32)| {
            let mut pos = lo
                + hashes
                    .get(lo..hi)
                    .map_or(0, |old| old.partition_point(|&h| h < a.0));
            while pos < hi {
                match (hashes.get(pos), owners.get(pos)) {
                    (Some(&h), Some(&o)) if h == a.0 && !before(a, (h, o)) => pos += 1,
                    _ => break,
                }
            }
            pos
        };
        if self.hashes.capacity() < total || self.owners.capacity() < total {
            // No room: merge into new arrays (each old point copied once, in runs), keeping
            // about 3% of room to grow so that a run of small additions does not reallocate
            // each time. A first build gets no room.
            let room = if kept == 0 { 0 } else { total / 32 };
            let mut hashes = Vec::with_capacity(total + room);
            let mut owners = Vec::with_capacity(total + room);
            if few {
                let mut from = 0;
                for &a in added {
                    let to = place(&self.hashes, &self.owners, from, kept, a);
                    hashes.extend_from_slice(self.hashes.get(from..to).unwrap_or(&[]));
                    owners.extend_from_slice(self.owners.get(from..to).unwrap_or(&[]));
                    hashes.push(a.0);
                    owners.push(a.1);
                    from = to;
                }
                hashes.extend_from_slice(self.hashes.get(from..).unwrap_or(&[]));
                owners.extend_from_slice(self.owners.get(from..).unwrap_or(&[]));
                self.hashes = hashes;
                self.owners = owners;
                return;
            }
            hashes.extend_from_slice(&self.hashes);
            owners.extend_from_slice(&self.owners);
            self.hashes = hashes;
            self.owners = owners;
        }
        self.hashes.resize(total, 0);
        self.owners.resize(total, 0);
        if few {
            // From the back: each added point (largest first) finds its place among the old
            // points still unmoved, the old points after it shift up by the number of added
            // points still to place (one memmove per added point, each old point moved once),
            // and it drops in.
            let mut old_left = kept;
            for (j, &a) in added.iter().enumerate().rev() {
                let pos = place(&self.hashes, &self.owners, 0, old_left, a);
                self.hashes.copy_within(pos..old_left, pos + j + 1);
                self.owners.copy_within(pos..old_left, pos + j + 1);
                if let (Some(hw), Some(ow)) =
                    (self.hashes.get_mut(pos + j), self.owners.get_mut(pos + j))
                {
                    *hw = a.0;
                    *ow = a.1;
                }
                old_left = pos;
            }
        } else {
            // Many added points: one linear merge from the back instead of a memmove each.
            let (mut old_left, mut added_left) = (kept, added.len());
            for dst in (0..total).rev() {
                let Some(&a) = added_left.checked_sub(1).and_then(|j| added.get(j)) else {
                    break; // every added point is placed; the rest are old points in place
                };
                let old = old_left
                    .checked_sub(1)
                    .and_then(|i| Some((*self.hashes.get(i)?, *self.owners.get(i)?)));
                let point = match old {
                    Some(o) if before(a, o) => {
                        old_left -= 1;
                        o
                    }
                    _ => {
                        added_left -= 1;
                        a
                    }
                };
                if let (Some(hw), Some(ow)) = (self.hashes.get_mut(dst), self.owners.get_mut(dst)) {
                    *hw = point.0;
                    *ow = point.1;
                }
            }
        }
    }

    /// The exact number of hash values each node owns (`u128`, summing to `2^bits` when the
    /// ring has points): a point owns the values after the previous point up to itself.
    pub fn owned_values(&self) -> Vec<u128> {
        let mut owned = vec![0u128; self.nodes.len()];
        let (Some(&first), Some(&last)) = (self.hashes.first(), self.hashes.last()) else {
            return owned;
        };
        let mut prev: Option<u64> = None;
        for (&h, &o) in self.hashes.iter().zip(&self.owners) {
            let arc = match prev {
                None => u128::from(first) + 1 + (self.flavour.space() - 1 - u128::from(last)),
                Some(p) => u128::from(h - p),
            };
            if let Some(slot) = owned.get_mut(o as usize) {
                *slot += arc;
            }
            prev = Some(h);
        }
        owned
    }

    /// Each node's exact share of the hash space (0.0..=1.0), in node order.
    pub fn shares(&self) -> Vec<f64> {
        let space = self.flavour.space() as f64;
        self.owned_values()
            .into_iter()
            .map(|v| v as f64 / space)
            .collect()
    }

    /// Approximate heap bytes used by the ring: points (12 bytes each, plus about 1 for the
    /// bucket index) and node names.
    pub fn memory_bytes(&self) -> usize {
        self.hashes.capacity() * 8
            + self.owners.capacity() * 4
            + self.index.capacity() * 4
            + self
                .nodes
                .iter()
                .map(|n| n.name.capacity() + std::mem::size_of::<Node>())
                .sum::<usize>()
    }
}

/// What [`Ring::set_nodes`] must do, as worked out by [`Ring::plan_change`].
struct PlannedChange {
    /// The new node list with each node's point count.
    nodes: Vec<Node>,
    /// Old node index -> new node index; [`GONE`] for a node that leaves.
    old_to_new: Vec<u32>,
    /// Points to insert as (hash, new owner), sorted in ring order.
    added: Vec<(u64, u32)>,
    /// Points that staying nodes lose, as (hash, old owner) -> how many such points.
    lost: FnvHashMap<(u64, u32), u32>,
    /// Old node index -> whether the node loses points listed in `lost`.
    shrunk: Vec<bool>,
}

/// The name of node `index` of `nodes` (empty when out of range).
fn node_name(nodes: &[Node], index: u32) -> &[u8] {
    nodes.get(index as usize).map_or(&[], |n| n.name.as_slice())
}

/// Whether point `a` sorts before point `b` (both `(hash, owner index into nodes)`): by hash,
/// then by node name (`by_name`) or by owner index (ketama's rule).
fn point_before(by_name: bool, nodes: &[Node], a: (u64, u32), b: (u64, u32)) -> bool {
    if a.0 != b.0 {
        a.0 < b.0
    } else if by_name {
        node_name(nodes, a.1) < node_name(nodes, b.1)
    } else {
        a.1 < b.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    type NodeList = Vec<(Vec<u8>, u32)>;

    fn ring(flavour: Flavour, names: &[&str]) -> Ring {
        let mut r = Ring::new(flavour, flavour.default_vnodes(), false);
        r.set_nodes(names.iter().map(|n| (n.as_bytes().to_vec(), 1)).collect());
        r
    }

    #[test]
    fn empty_ring_has_no_owner() {
        let r = Ring::new(Flavour::Native, 160, false);
        assert_eq!(r.owner(b"x"), None);
        assert!(r.preference_list(b"x", 3).is_empty());
        assert_eq!(r.owned_values(), Vec::<u128>::new());
    }

    #[test]
    fn owned_values_cover_the_space() {
        for f in Flavour::ALL {
            let r = ring(f, &["a", "b", "c"]);
            assert_eq!(r.owned_values().iter().sum::<u128>(), f.space());
        }
    }

    #[test]
    fn preference_list_is_distinct_and_starts_with_owner() {
        let r = ring(Flavour::Native, &["a", "b", "c", "d"]);
        let list = r.preference_list(b"member", 10);
        assert_eq!(list.len(), 4);
        assert_eq!(Some(list[0]), r.owner(b"member"));
        let mut sorted = list.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 4);
    }

    #[test]
    fn bucket_index_agrees_with_binary_search() {
        for f in Flavour::ALL {
            let r = ring(f, &["a", "b", "c", "d", "e"]);
            let (hashes, owners) = r.points();
            let probes = hashes
                .iter()
                .flat_map(|&h| [h.wrapping_sub(1), h, h.wrapping_add(1)])
                .chain([0, u64::from(u32::MAX), u64::MAX]);
            for h in probes {
                let h = if f.hash_bits() == 32 {
                    h & 0xFFFF_FFFF
                } else {
                    h
                };
                let i = hashes.partition_point(|&p| p < h) % hashes.len();
                assert_eq!(r.owner_of_hash(h), Some(owners[i] as usize), "{f:?} {h}");
            }
        }
    }

    #[test]
    fn collided_points_go_to_the_lower_name_in_any_order() {
        // Find two groupcache nodes whose only point (label "0" + name) collides in CRC32;
        // the birthday bound makes one turn up within a few hundred thousand names.
        let mut seen = HashMap::new();
        let (a, b) = (0u32..2_000_000)
            .find_map(|i| {
                let name =
                    format!("n{:x}", u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15)).into_bytes();
                let mut label = b"0".to_vec();
                label.extend_from_slice(&name);
                let h = crc32fast::hash(&label);
                seen.insert(h, name.clone()).map(|other| (other, name))
            })
            .expect("a CRC32 collision");
        let lower = a.clone().min(b.clone());
        for order in [[a.clone(), b.clone()], [b.clone(), a.clone()]] {
            let mut r = Ring::new(Flavour::Groupcache, 1, false);
            r.set_nodes(vec![(order[0].clone(), 1)]);
            r.set_nodes(vec![(order[0].clone(), 1), (order[1].clone(), 1)]);
            let (hashes, _) = r.points();
            assert_eq!(hashes[0], hashes[1], "the two points collide");
            let owner = r.owner_of_hash(hashes[0]).expect("owner");
            assert_eq!(r.nodes()[owner].name, lower);
        }
    }

    #[test]
    fn adding_few_points_to_a_big_ring_equals_a_rebuild() {
        // 100 nodes x 160 points, then one more: few added points, so the memmove path runs.
        for f in [Flavour::Native, Flavour::Groupcache] {
            let names: Vec<Vec<u8>> = (0..101).map(|i| format!("node-{i}").into_bytes()).collect();
            let mut grown = Ring::new(f, 160, false);
            grown.set_nodes(names[..100].iter().map(|n| (n.clone(), 1)).collect());
            grown.set_nodes(names.iter().map(|n| (n.clone(), 1)).collect());
            let mut scratch = Ring::new(f, 160, false);
            scratch.set_nodes(names.iter().map(|n| (n.clone(), 1)).collect());
            assert_eq!(grown.points(), scratch.points(), "{f:?}");
        }
    }

    #[test]
    fn changes_keep_the_points_and_index_of_a_rebuild() {
        // A 200-node ring through additions, removals, weight rises and falls, emptied and
        // filled again; after each change the points equal a from-scratch ring's, and the
        // adjusted bucket index equals one rebuilt at the same size, a size that suits the
        // point count.
        for f in Flavour::ALL {
            let mut nodes: Vec<(Vec<u8>, u32)> = (0..200)
                .map(|i| (format!("10.1.0.{i}:11211").into_bytes(), 1))
                .collect();
            let mut r = Ring::new(f, 40, false);
            r.set_nodes(nodes.clone());
            let steps: [&dyn Fn(&mut NodeList); 9] = [
                &|n| n.push((b"joiner-a".to_vec(), 1)),
                &|n| n.push((b"joiner-b".to_vec(), 3)),
                &|n| n[7].1 = 4,
                &|n| n[7].1 = 2,
                &|n| drop(n.remove(100)),
                &|n| n.retain(|(name, _)| !name.starts_with(b"joiner")),
                &|n| n.truncate(20),
                &|n| n.clear(),
                &|n| n.extend((0..150).map(|i| (format!("back-{i}").into_bytes(), 1))),
            ];
            for step in steps {
                step(&mut nodes);
                r.set_nodes(nodes.clone());
                let mut scratch = Ring::new(f, 40, false);
                scratch.set_nodes(nodes.clone());
                assert_eq!(r.points(), scratch.points(), "{f:?}");
                let mut rebuilt = r.clone();
                rebuilt.rebuild_index_with(r.index_bits);
                assert_eq!(r.index, rebuilt.index, "{f:?}");
                let ideal = Ring::index_bits_for(f, r.point_count());
                assert!(ideal.abs_diff(r.index_bits) <= 1, "{f:?}: index size");
            }
        }
    }

    #[test]
    fn single_point_owns_everything() {
        let mut r = Ring::new(Flavour::Native, 1, false);
        r.set_nodes(vec![(b"solo".to_vec(), 1)]);
        assert_eq!(r.owned_values(), vec![1u128 << 64]);
        assert_eq!(r.owner(b"anything"), Some(0));
    }
}
