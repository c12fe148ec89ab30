//! The consistent-hash ring: nodes with integer weights, their points kept sorted for binary
//! search, owner and preference-list lookup, incremental changes and exact shares.
//!
//! The ring is the one of Karger et al. (1997) as used by ketama clients: every node is present
//! as many points (virtual nodes) on a circle of `2^bits` hash values; a member is owned by the
//! node of the first point at or after the member's hash, wrapping to the first point.

use super::flavour::Flavour;
use super::keyslot::hashed_part;
use std::collections::HashMap;

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

    /// Rebuilds the bucket index after the points changed: one pass over the points.
    fn rebuild_index(&mut self) {
        let points = self.hashes.len();
        // About one bucket per four points (the index stays small enough to sit in cache),
        // at most 2^24 buckets.
        let mut bits = 0;
        while bits < 24 && (4usize << bits) < points {
            bits += 1;
        }
        self.index_bits = bits.min(self.flavour.hash_bits());
        let buckets = 1usize << self.index_bits;
        // Count the points of each bucket into index[bucket + 1] (the last bucket's count is
        // not needed), then prefix-sum: index[b] becomes the number of points in buckets
        // before b, i.e. the first point of b.
        let mut index = std::mem::take(&mut self.index);
        index.clear();
        index.resize(buckets, 0);
        let shift = self.flavour.hash_bits() - self.index_bits;
        for &h in &self.hashes {
            let bucket = h.checked_shr(shift).unwrap_or(0) as usize;
            if let Some(c) = index.get_mut(bucket + 1) {
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
    /// dropping only those that disappear, then merging them with the kept points in one pass.
    /// Cost: O(P + k log k) for P points and k changed points; no full rebuild.
    pub fn set_nodes(&mut self, nodes: Vec<(Vec<u8>, u32)>) {
        let weights: Vec<u32> = nodes.iter().map(|(_, w)| *w).collect();
        let counts: Vec<u32> = Ring::planned_points(self.flavour, self.vnodes, &weights)
            .into_iter()
            .map(|c| u32::try_from(c).unwrap_or(u32::MAX))
            .collect();
        let old_index: HashMap<&[u8], usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_slice(), i))
            .collect();

        let mut old_to_new = vec![u32::MAX; self.nodes.len()];
        let mut added: Vec<(u64, u32)> = Vec::new();
        let mut removed: HashMap<(u64, u32), u32> = HashMap::new();
        let mut scratch = Vec::new();
        for (new_i, ((name, _), &count)) in nodes.iter().zip(&counts).enumerate() {
            let new_i = new_i as u32;
            let old = old_index.get(name.as_slice()).copied();
            let old_count = old.and_then(|o| self.nodes.get(o)).map_or(0, |n| n.points);
            if let Some(o) = old {
                if let Some(slot) = old_to_new.get_mut(o) {
                    *slot = new_i;
                }
            }
            scratch.clear();
            if count > old_count {
                self.flavour
                    .push_points(name, old_count, count, &mut scratch);
                added.extend(scratch.iter().map(|&h| (h, new_i)));
            } else if count < old_count {
                self.flavour
                    .push_points(name, count, old_count, &mut scratch);
                if let Some(o) = old {
                    for &h in &scratch {
                        *removed.entry((h, o as u32)).or_insert(0) += 1;
                    }
                }
            }
        }

        let new_nodes: Vec<Node> = nodes
            .into_iter()
            .zip(&counts)
            .map(|((name, weight), &points)| Node {
                name,
                weight,
                points,
            })
            .collect();
        let by_name = self.flavour.ties_by_name();
        let before = |a: (u64, u32), b: (u64, u32)| -> bool {
            if a.0 != b.0 {
                return a.0 < b.0;
            }
            if by_name {
                let na = new_nodes.get(a.1 as usize).map(|n| n.name.as_slice());
                let nb = new_nodes.get(b.1 as usize).map(|n| n.name.as_slice());
                na < nb
            } else {
                a.1 < b.1
            }
        };
        // (hash, node index) is ketama's order; for the name tie rule, re-sort the rare runs
        // of equal hashes by name.
        added.sort_unstable();
        if by_name {
            let mut start = 0;
            while start < added.len() {
                let hash = added.get(start).map_or(0, |a| a.0);
                let run = added
                    .get(start..)
                    .map_or(0, |rest| rest.iter().take_while(|a| a.0 == hash).count());
                if run > 1 {
                    if let Some(ties) = added.get_mut(start..start + run) {
                        ties.sort_by(|&a, &b| {
                            let name = |x: (u64, u32)| new_nodes.get(x.1 as usize).map(|n| &n.name);
                            name(a).cmp(&name(b))
                        });
                    }
                }
                start += run.max(1);
            }
        }

        // In place, so that the big point arrays are neither reallocated nor copied:
        // first drop the points of removed nodes and renumber owners, then merge the added
        // points in from the back.
        let unchanged_owners =
            removed.is_empty() && old_to_new.iter().enumerate().all(|(i, &n)| n as usize == i);
        let first_read = if unchanged_owners {
            self.hashes.len()
        } else {
            0
        };
        let mut kept = first_read;
        for read in first_read..self.hashes.len() {
            let (Some(&h), Some(&o)) = (self.hashes.get(read), self.owners.get(read)) else {
                break;
            };
            let new_o = old_to_new.get(o as usize).copied().unwrap_or(u32::MAX);
            if new_o == u32::MAX {
                continue;
            }
            if !removed.is_empty() {
                if let Some(left) = removed.get_mut(&(h, o)) {
                    if *left > 0 {
                        *left -= 1;
                        continue;
                    }
                }
            }
            if let (Some(hw), Some(ow)) = (self.hashes.get_mut(kept), self.owners.get_mut(kept)) {
                *hw = h;
                *ow = new_o;
            }
            kept += 1;
        }
        self.hashes.truncate(kept);
        self.owners.truncate(kept);
        let total = kept + added.len();
        self.hashes.reserve_exact(added.len());
        self.owners.reserve_exact(added.len());
        self.hashes.resize(total, 0);
        self.owners.resize(total, 0);
        if added.len().saturating_mul(64) <= kept {
            // From the back: each added point (largest first) finds its place among the old points
            // still unmoved by binary search, the old points after it shift up by the number of
            // added points still to place (one memmove per added point), and it drops in.
            let mut old_left = kept;
            for (j, &a) in added.iter().enumerate().rev() {
                let mut pos = self
                    .hashes
                    .get(..old_left)
                    .map_or(0, |old| old.partition_point(|&h| h < a.0));
                // Among equal hashes, old points that sort before `a` stay before it.
                while pos < old_left {
                    match (self.hashes.get(pos), self.owners.get(pos)) {
                        (Some(&h), Some(&o)) if h == a.0 && !before(a, (h, o)) => pos += 1,
                        _ => break,
                    }
                }
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
        if self.hashes.capacity() > total + total / 8 + 16 {
            self.hashes.shrink_to_fit();
            self.owners.shrink_to_fit();
        }
        self.nodes = new_nodes;
        self.rebuild_index();
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn single_point_owns_everything() {
        let mut r = Ring::new(Flavour::Native, 1, false);
        r.set_nodes(vec![(b"solo".to_vec(), 1)]);
        assert_eq!(r.owned_values(), vec![1u128 << 64]);
        assert_eq!(r.owner(b"anything"), Some(0));
    }
}
