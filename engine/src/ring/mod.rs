//! The consistent-hash ring: nodes with integer weights and their points kept sorted, owner
//! and preference-list lookup, and exact shares of the hash space.
//!
//! The ring is the one of Karger et al. (1997) as used by ketama clients: every node is present
//! as many points (virtual nodes) on a circle of `2^bits` hash values; a member is owned by the
//! node of the first point at or after the member's hash, wrapping to the first point.
//!
//! - [`index`]: the bucket index that makes a lookup read one index line and the line of points
//!   that holds its answer, instead of a binary search;
//! - [`update`]: node changes that hash only the points that come or go;
//! - [`delta`]: what a change would do, without applying it (what-ifs).

pub mod delta;
pub mod index;
mod update;

use super::flavour::Flavour;
use super::keyslot::hashed_part;
use index::BucketIndex;

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

/// A consistent-hash ring of one flavour. Points are kept in one array of (hash, owner)
/// records sorted by hash, then by the flavour's tie rule, so that the first of equal points
/// wins a lookup, with a bucket index over them ([`index`]).
#[derive(Debug, Clone)]
pub struct Ring {
    flavour: Flavour,
    vnodes: u32,
    hashtag: bool,
    nodes: Vec<Node>,
    /// Node indices sorted by name, for lookups by name in O(log N).
    by_name: Vec<u32>,
    points: Vec<Point>,
    index: BucketIndex,
}

/// One point of the ring: its hash on the circle and its owner (an index into
/// [`Ring::nodes`]), side by side in 12 bytes (4-byte aligned), so that a lookup finds both in
/// the same cache line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C, packed(4))]
pub struct Point {
    hash: u64,
    owner: u32,
}

impl Point {
    /// The point of `owner` at `hash`.
    pub fn new(hash: u64, owner: u32) -> Point {
        Point { hash, owner }
    }

    /// The point's hash on the circle.
    #[inline]
    pub fn hash(self) -> u64 {
        self.hash
    }

    /// The point's owner, an index into [`Ring::nodes`].
    #[inline]
    pub fn owner(self) -> u32 {
        self.owner
    }

    /// The point as `(hash, owner)`.
    pub fn pair(self) -> (u64, u32) {
        (self.hash, self.owner)
    }
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
            by_name: Vec::new(),
            points: Vec::new(),
            index: BucketIndex::new(flavour.hash_bits()),
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
        let node_name = |&i: &u32| self.nodes.get(i as usize).map(|n| n.name.as_slice());
        let at = self
            .by_name
            .binary_search_by(|i| node_name(i).cmp(&Some(name)))
            .ok()?;
        self.by_name.get(at).map(|&i| i as usize)
    }

    /// Total number of points on the ring.
    pub fn point_count(&self) -> usize {
        self.points.len()
    }

    /// The points sorted by hash (then by the flavour's tie rule), each with its owner.
    pub fn points(&self) -> &[Point] {
        &self.points
    }

    /// Points each node would have for these weights, in order: `vnodes x weight` for native and
    /// groupcache, libmemcached's weighted counts for ketama. Units: points (u64, no overflow).
    pub fn planned_points(flavour: Flavour, vnodes: u32, weights: &[u32]) -> Vec<u64> {
        match flavour {
            Flavour::Ketama => super::flavour::ketama_point_counts(weights)
                .into_iter()
                .map(u64::from)
                .collect(),
            Flavour::Native | Flavour::NativeFnv | Flavour::Groupcache => weights
                .iter()
                .map(|&w| u64::from(vnodes) * u64::from(w))
                .collect(),
        }
    }

    /// The hash of `member` on this ring's circle (of its hash tag when `HASHTAG` is set).
    pub fn member_hash(&self, member: &[u8]) -> u64 {
        self.flavour.member_hash(self.key_bytes(member))
    }

    /// The bytes of `member` that are hashed: its hash tag when `HASHTAG` is set, else all.
    pub fn key_bytes<'m>(&self, member: &'m [u8]) -> &'m [u8] {
        if self.hashtag {
            hashed_part(member)
        } else {
            member
        }
    }

    /// Index of the first point at or after `hash` (the point count when there is none), found
    /// through the bucket index: one index line, then the bucket's first point or the next.
    fn first_at_or_after(&self, hash: u64) -> usize {
        self.index.first_at_or_after(&self.points, hash)
    }

    /// Index of the first point at or after `hash`, wrapping to 0; `None` on a ring without
    /// points.
    fn point_at_or_after(&self, hash: u64) -> Option<usize> {
        if self.points.is_empty() {
            return None;
        }
        let i = self.first_at_or_after(hash);
        Some(if i >= self.points.len() { 0 } else { i })
    }

    /// The owner (index into [`Ring::nodes`]) of a hash on the circle; `None` without points.
    pub fn owner_of_hash(&self, hash: u64) -> Option<usize> {
        let i = self.point_at_or_after(hash)?;
        self.points.get(i).map(|p| p.owner() as usize)
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
        let (tail, head) = self.points.split_at(start);
        for o in head.iter().chain(tail).map(|p| p.owner()) {
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

    /// The exact number of hash values each node owns (`u128`, summing to `2^bits` when the
    /// ring has points): a point owns the values after the previous point up to itself.
    pub fn owned_values(&self) -> Vec<u128> {
        let mut owned = vec![0u128; self.nodes.len()];
        let (Some(first), Some(last)) = (self.points.first(), self.points.last()) else {
            return owned;
        };
        let (first, last) = (first.hash(), last.hash());
        let mut prev: Option<u64> = None;
        for (h, o) in self.points.iter().map(|p| p.pair()) {
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

    /// Approximate heap bytes used by the ring: points (12 bytes each, plus 0.5-2.2 for the
    /// bucket index) and node names.
    pub fn memory_bytes(&self) -> usize {
        self.points.capacity() * std::mem::size_of::<Point>()
            + self.index.memory_bytes()
            + self.by_name.capacity() * 4
            + self
                .nodes
                .iter()
                .map(|n| n.name.capacity() + std::mem::size_of::<Node>())
                .sum::<usize>()
    }
}

/// The name of node `index` of `nodes` (empty when out of range).
pub(crate) fn node_name(nodes: &[Node], index: u32) -> &[u8] {
    nodes.get(index as usize).map_or(&[], |n| n.name.as_slice())
}

/// Whether point `a` sorts before point `b` (both `(hash, owner index into nodes)`): by hash,
/// then by node name (`by_name`) or by owner index (ketama's rule).
pub(crate) fn point_before(by_name: bool, nodes: &[Node], a: (u64, u32), b: (u64, u32)) -> bool {
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
            let points = r.points();
            let probes = points
                .iter()
                .map(|p| p.hash())
                .flat_map(|h| [h.wrapping_sub(1), h, h.wrapping_add(1)])
                .chain([0, u64::from(u32::MAX), u64::MAX]);
            for h in probes {
                let h = if f.hash_bits() == 32 {
                    h & 0xFFFF_FFFF
                } else {
                    h
                };
                let i = points.partition_point(|p| p.hash() < h) % points.len();
                assert_eq!(
                    r.owner_of_hash(h),
                    Some(points[i].owner() as usize),
                    "{f:?} {h}"
                );
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
