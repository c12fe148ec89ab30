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
pub mod table;
mod update;

use super::flavour::{Flavour, Lookup, TagRule, Ties};
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
    /// The placement of a flavour that has no points ([`table`]), rebuilt with the nodes.
    table: Option<table::Table>,
    /// The flavour's lookup, kept here so that a lookup does not ask the flavour each time.
    lookup: Lookup,
    /// Whether the flavour routes by part of a key ([`Flavour::routing_key`]).
    routes: bool,
    /// The largest hash of the flavour's space (`2^bits - 1`).
    mask: u64,
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
    /// whose counts are libmemcached's); `hashtag` makes members hash by their `{hash tag}`
    /// (always so for the flavours whose implementation always does,
    /// [`Flavour::always_hash_tags`]).
    pub fn new(flavour: Flavour, vnodes: u32, hashtag: bool) -> Ring {
        Ring {
            flavour,
            vnodes,
            hashtag: hashtag || flavour.always_hash_tags(),
            nodes: Vec::new(),
            by_name: Vec::new(),
            points: Vec::new(),
            index: BucketIndex::new(flavour.hash_bits()),
            table: table::Table::build(flavour, &[]),
            lookup: flavour.lookup(),
            routes: flavour.routes_by_part(),
            mask: u64::MAX >> (64 - flavour.hash_bits()),
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

    /// Points each node would have for these weights, in order, as the flavour counts them
    /// ([`Flavour::point_counts`]). Units: points (u64, no overflow).
    pub fn planned_points(flavour: Flavour, vnodes: u32, weights: &[u32]) -> Vec<u64> {
        flavour.point_counts(vnodes, weights)
    }

    /// The hash of `member` on this ring's circle (of its hash tag when `HASHTAG` is set).
    #[inline]
    pub fn member_hash(&self, member: &[u8]) -> u64 {
        let h = self.flavour.key_hash(self.key_bytes(member));
        match self.lookup {
            Lookup::Predecessor => self.mask - h,
            _ => h,
        }
    }

    /// The bytes of `member` that are hashed: its hash tag (by the flavour's
    /// [`crate::flavour::TagRule`]) when `HASHTAG` is set or the flavour always takes it, else
    /// all.
    #[inline]
    pub fn key_bytes<'m>(&self, member: &'m [u8]) -> &'m [u8] {
        let member = if self.routes {
            self.flavour.routing_key(member)
        } else {
            member
        };
        if !self.hashtag {
            return member;
        }
        match self.flavour.tag_rule() {
            TagRule::Redis => hashed_part(member),
            TagRule::LeadingBrace => leading_brace_tag(member).unwrap_or(member),
        }
    }

    /// Index of the first point at or after `hash` (the point count when there is none), found
    /// through the bucket index: one index line, then the bucket's first point or the next.
    #[inline]
    fn first_at_or_after(&self, hash: u64) -> usize {
        self.index.first_at_or_after(&self.points, hash)
    }

    /// Index of the first point at or after `hash`, wrapping to 0; `None` on a ring without
    /// points.
    #[inline]
    fn point_at_or_after(&self, hash: u64) -> Option<usize> {
        if self.points.is_empty() {
            return None;
        }
        let i = self.first_at_or_after(hash);
        Some(if i >= self.points.len() { 0 } else { i })
    }

    /// Index of the point that owns `hash` by the flavour's [`Lookup`]: the first at or after
    /// it (wrapping), or for [`Lookup::Nearest`] that one or the point before it, whichever is
    /// closer around the circle, the one before winning a tie. `None` without points.
    #[inline]
    fn owning_point(&self, hash: u64) -> Option<usize> {
        let next = self.point_at_or_after(hash)?;
        if self.lookup != Lookup::Nearest {
            return Some(next);
        }
        let prev = next.checked_sub(1).unwrap_or(self.points.len() - 1);
        let (Some(p), Some(n)) = (self.points.get(prev), self.points.get(next)) else {
            return Some(next);
        };
        let before = hash.wrapping_sub(p.hash()) & self.mask;
        let after = n.hash().wrapping_sub(hash) & self.mask;
        Some(if before <= after { prev } else { next })
    }

    /// The owner (index into [`Ring::nodes`]) of a hash on the circle; `None` without points.
    #[inline]
    pub fn owner_of_hash(&self, hash: u64) -> Option<usize> {
        if let Some(t) = &self.table {
            return t.owner(hash);
        }
        let i = self.owning_point(hash)?;
        self.points.get(i).map(|p| p.owner() as usize)
    }

    /// The ring's ownership of the circle as runs: `(first hash, owner)` sorted by first hash,
    /// the first starting at 0, each run reaching to the next's start (the last to the end
    /// of the circle). Runs next to each other may have the same owner. Exact for every
    /// [`Lookup`]: the owner can only change just after a point, or for
    /// [`Lookup::Nearest`] half-way between two points, and is read at each such place.
    /// Empty without points. Cost: O(P log P).
    pub fn owner_runs(&self) -> Vec<(u64, u32)> {
        if self.points.is_empty() {
            return Vec::new();
        }
        let mask = u64::MAX >> (64 - self.flavour.hash_bits());
        let mut starts: Vec<u64> = vec![0];
        let hashes: Vec<u64> = self.points.iter().map(|p| p.hash()).collect();
        for (k, &h) in hashes.iter().enumerate() {
            starts.push(h);
            if h < mask {
                starts.push(h + 1);
            }
            if self.flavour.lookup() == Lookup::Nearest {
                let next = hashes.get(k + 1).or(hashes.first()).copied().unwrap_or(h);
                let gap = next.wrapping_sub(h) & mask;
                let half = h.wrapping_add(gap / 2).wrapping_add(1) & mask;
                starts.push(half);
            }
        }
        starts.sort_unstable();
        starts.dedup();
        starts
            .into_iter()
            .filter_map(|s| self.owner_of_hash(s).map(|o| (s, o as u32)))
            .collect()
    }

    /// The owner (index into [`Ring::nodes`]) of `member`; `None` on a ring without points.
    #[inline]
    pub fn owner(&self, member: &[u8]) -> Option<usize> {
        match &self.table {
            None => self.owner_of_hash(self.member_hash(member)),
            Some(t) => t.owner_of_key(
                &self.nodes,
                self.key_bytes(member),
                self.member_hash(member),
            ),
        }
    }

    /// Whether an owner needs the member itself, not only its hash ([`Ring::owner_of_hash`]
    /// answers `None`): pymemcache scores each node with the key.
    pub fn owner_needs_key(&self) -> bool {
        self.flavour.rule() == crate::flavour::Rule::KeyedRendezvous
    }

    /// The placement of a flavour without points, if this ring's is one.
    pub fn table(&self) -> Option<&table::Table> {
        self.table.as_ref()
    }

    /// Up to `count` distinct nodes met walking clockwise from the point that owns `member`'s
    /// hash, the owner first (a preference list, as Dynamo's). Shorter when fewer nodes have
    /// points; the owner alone for a flavour without points.
    pub fn preference_list(&self, member: &[u8], count: usize) -> Vec<usize> {
        let mut list = Vec::new();
        if self.table.is_some() {
            // A table names one owner: the implementations' fallbacks are not modelled.
            list.extend(self.owner(member).filter(|_| count > 0));
            return list;
        }
        let Some(start) = self.owning_point(self.member_hash(member)) else {
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
        if let Some(t) = &self.table {
            return t.owned_values(&self.nodes, self.flavour.hash_bits());
        }
        let mut owned = vec![0u128; self.nodes.len()];
        if self.flavour.lookup() == Lookup::Nearest {
            let runs = self.owner_runs();
            let ends = runs.iter().skip(1).map(|r| u128::from(r.0));
            for (&(start, o), end) in runs.iter().zip(ends.chain([self.flavour.space()])) {
                if let Some(slot) = owned.get_mut(o as usize) {
                    *slot += end - u128::from(start);
                }
            }
            return owned;
        }
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
    /// bucket index), node names, and the table of a flavour without points.
    pub fn memory_bytes(&self) -> usize {
        self.points.capacity() * std::mem::size_of::<Point>()
            + self.index.memory_bytes()
            + self.table.as_ref().map_or(0, table::Table::memory_bytes)
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
/// then by the tie rule: node name, or owner index (first or last wins).
pub(crate) fn point_before(ties: Ties, nodes: &[Node], a: (u64, u32), b: (u64, u32)) -> bool {
    if a.0 != b.0 {
        return a.0 < b.0;
    }
    match ties {
        Ties::Name => node_name(nodes, a.1) < node_name(nodes, b.1),
        Ties::First => a.1 < b.1,
        Ties::Last => a.1 > b.1,
    }
}

/// Sorts `points` (hash, owner) in ring order by hash, then by `ties`, with `name` giving an
/// owner's name for [`Ties::Name`].
pub(crate) fn sort_points<'n>(
    points: &mut [(u64, u32)],
    ties: Ties,
    name: impl Fn(u32) -> &'n [u8],
) {
    points.sort_unstable();
    if ties == Ties::First {
        return;
    }
    for run in points.chunk_by_mut(|a, b| a.0 == b.0) {
        if run.len() > 1 {
            match ties {
                Ties::Last => run.reverse(),
                _ => run.sort_by(|a, b| name(a.1).cmp(name(b.1))),
            }
        }
    }
}

/// The tag redis-rb's default `/^\{(.+?)\}/` takes from `key`: at the first place where a
/// line starts with `{` (the key's start, or after a newline: Ruby's `^`), the shortest run of
/// at least one byte other than a newline followed by `}`. `None` when it does not match.
pub fn leading_brace_tag(key: &[u8]) -> Option<&[u8]> {
    let starts = std::iter::once(0).chain(
        key.iter()
            .enumerate()
            .filter(|(_, &b)| b == b'\n')
            .map(|(i, _)| i + 1),
    );
    for start in starts {
        if key.get(start) != Some(&b'{') {
            continue;
        }
        let body = key.get(start + 1..).unwrap_or(&[]);
        // At least one byte before the `}`, and no newline up to it.
        for (i, &b) in body.iter().enumerate() {
            if b == b'\n' {
                break;
            }
            if b == b'}' && i >= 1 {
                return body.get(..i);
            }
        }
    }
    None
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
        for f in Flavour::rings() {
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
                let mut i = points.partition_point(|p| p.hash() < h) % points.len();
                if f.lookup() == Lookup::Nearest {
                    // HAProxy: the point before wins when at most as far.
                    let prev = (i + points.len() - 1) % points.len();
                    let before = (h.wrapping_sub(points[prev].hash())) & 0xFFFF_FFFF;
                    let after = (points[i].hash().wrapping_sub(h)) & 0xFFFF_FFFF;
                    if before <= after {
                        i = prev;
                    }
                }
                assert_eq!(
                    r.owner_of_hash(h),
                    Some(points[i].owner() as usize),
                    "{f:?} {h}"
                );
            }
        }
    }

    #[test]
    fn owner_runs_hold_the_owner_of_every_hash_they_cover() {
        // At each run's first hash and the hash before it the lookup agrees with the runs; a
        // nearest-point ring's runs also split each gap where HAProxy's rule does (a tie goes
        // to the point before).
        for f in Flavour::rings() {
            let r = ring(f, &["a", "b", "c"]);
            let runs = r.owner_runs();
            assert_eq!(runs.first().map(|x| x.0), Some(0), "{f:?}");
            let space = f.space();
            for (k, &(start, owner)) in runs.iter().enumerate() {
                let end = runs.get(k + 1).map_or(space, |x| u128::from(x.0));
                assert_eq!(
                    r.owner_of_hash(start),
                    Some(owner as usize),
                    "{f:?} at {start}"
                );
                let last = u64::try_from(end - 1).unwrap_or(u64::MAX);
                assert_eq!(
                    r.owner_of_hash(last),
                    Some(owner as usize),
                    "{f:?} at {last}"
                );
            }
            assert_eq!(r.owned_values().iter().sum::<u128>(), space, "{f:?}");
        }
        let mut r = Ring::new(Flavour::Haproxy, 16, false);
        r.set_nodes(vec![(b"x".to_vec(), 1), (b"y".to_vec(), 1)]);
        for pair in r.points().windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let mid = a.hash() + (b.hash() - a.hash()) / 2;
            assert_eq!(r.owner_of_hash(mid), Some(a.owner() as usize));
            assert_eq!(r.owner_of_hash(mid + 1), Some(b.owner() as usize));
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
