//! Node changes on a ring: the points that appear are hashed and merged in, the points that
//! disappear are dropped in place, owners are renumbered, and the bucket index is adjusted
//! rather than rebuilt, so that a change costs about one pass over the points and no rehash
//! or sort of the whole ring.

use super::{node_name, point_before, sort_points, Node, Point, Ring};
use fnv::FnvHashMap;

/// Owner mapping of a node that leaves the ring.
const GONE: u32 = u32::MAX;

impl Ring {
    /// Replaces the node list by `nodes` (names unique and non-empty, weights >= 1, in the new
    /// order: survivors keep their relative order), hashing only the points that appear and
    /// dropping only those that disappear. The point array changes in place: one compaction
    /// pass when points go or owners are renumbered, one merge of the new points, and the
    /// bucket index is adjusted rather than rebuilt. Cost: O(P + k log k) for P points and k
    /// changed points, dominated by moving the points once (a memmove); no rehash, no sort of
    /// the whole ring.
    pub fn set_nodes(&mut self, nodes: Vec<(Vec<u8>, u32)>) {
        let change = self.plan_change(nodes);
        let dropped = self.drop_points(&change);
        self.insert_points(&change.added, &change.nodes);
        self.nodes = change.nodes;
        self.by_name = (0..self.nodes.len() as u32).collect();
        let nodes = &self.nodes;
        self.by_name
            .sort_unstable_by(|&a, &b| node_name(nodes, a).cmp(node_name(nodes, b)));
        if self.points.capacity() > self.points.len() + self.points.len() / 8 + 16 {
            self.points.shrink_to_fit();
        }
        let added: Vec<u64> = change.added.iter().map(|a| a.0).collect();
        self.index.update(&self.points, &added, &dropped);
        self.table = super::table::Table::build(self.flavour, &self.nodes);
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
            // A node whose points follow its position is a new node wherever it moved: its
            // old points all go and its new ones come.
            let old = old_index
                .get(name.as_slice())
                .copied()
                .filter(|&o| !self.flavour.points_by_position() || o == new_i as usize);
            let old_points = old.and_then(|o| self.nodes.get(o)).map_or(0, |n| n.points);
            scratch.clear();
            if points > old_points {
                self.flavour
                    .push_points(&name, new_i + 1, old_points, points, &mut scratch);
                added.extend(scratch.iter().map(|&h| (h, new_i)));
            }
            if let Some(o) = old {
                if let Some(slot) = old_to_new.get_mut(o) {
                    *slot = new_i;
                }
                if points < old_points {
                    self.flavour
                        .push_points(&name, o as u32 + 1, points, old_points, &mut scratch);
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

        sort_points(&mut added, self.flavour.ties(), |o| {
            node_name(&new_nodes, o)
        });
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
            for (at, point) in self.points.iter_mut().enumerate() {
                let new_o = change
                    .old_to_new
                    .get(point.owner() as usize)
                    .copied()
                    .unwrap_or(GONE);
                if new_o == GONE {
                    gone_at.push(at);
                } else {
                    *point = Point::new(point.hash(), new_o);
                }
            }
        } else {
            let mut lost = change.lost.clone();
            for (at, point) in self.points.iter_mut().enumerate() {
                let (h, owner) = point.pair();
                let new_o = change
                    .old_to_new
                    .get(owner as usize)
                    .copied()
                    .unwrap_or(GONE);
                let loses = change.shrunk.get(owner as usize) == Some(&true)
                    && lost.get_mut(&(h, owner)).is_some_and(|left| {
                        let take = *left > 0;
                        *left = left.saturating_sub(1);
                        take
                    });
                if new_o == GONE || loses {
                    gone_at.push(at);
                } else {
                    *point = Point::new(h, new_o);
                }
            }
        }
        let dropped = gone_at
            .iter()
            .filter_map(|&at| self.points.get(at))
            .map(|p| self.index.bucket(p.hash()))
            .collect();
        let Some(&first_gone) = gone_at.first() else {
            return dropped;
        };
        let mut kept = first_gone;
        for (i, &at) in gone_at.iter().enumerate() {
            let run = at + 1..gone_at.get(i + 1).copied().unwrap_or(self.points.len());
            let len = run.len();
            self.points.copy_within(run, kept);
            kept += len;
        }
        self.points.truncate(kept);
        dropped
    }

    /// Merges `added` (sorted in ring order, owners already new indices into `nodes`) into
    /// the sorted points: in place when the array has room, else into a new array.
    fn insert_points(&mut self, added: &[(u64, u32)], nodes: &[Node]) {
        if added.is_empty() {
            return;
        }
        let kept = self.points.len();
        let total = kept + added.len();
        let few = added.len().saturating_mul(64) <= kept;
        let ties = self.flavour.ties();
        let before = |a: (u64, u32), b: (u64, u32)| point_before(ties, nodes, a, b);
        // Where `a` goes among the old points `lo..hi`: after those with a smaller hash, and
        // after equal-hash points that sort before it.
        let place = |points: &[Point], lo: usize, hi: usize, a: (u64, u32)| {
            let mut pos = lo
                + points
                    .get(lo..hi)
                    .map_or(0, |old| old.partition_point(|p| p.hash() < a.0));
            while pos < hi {
                match points.get(pos).map(|p| p.pair()) {
                    Some(p) if p.0 == a.0 && !before(a, p) => pos += 1,
                    _ => break,
                }
            }
            pos
        };
        if self.points.capacity() < total {
            // No room: merge into a new array (each old point copied once, in runs), keeping
            // about 3% of room to grow so that a run of small additions does not reallocate
            // each time. A first build gets no room.
            let room = if kept == 0 { 0 } else { total / 32 };
            let mut points = Vec::with_capacity(total + room);
            if few {
                let mut from = 0;
                for &a in added {
                    let to = place(&self.points, from, kept, a);
                    points.extend_from_slice(self.points.get(from..to).unwrap_or(&[]));
                    points.push(Point::new(a.0, a.1));
                    from = to;
                }
                points.extend_from_slice(self.points.get(from..).unwrap_or(&[]));
                self.points = points;
                return;
            }
            points.extend_from_slice(&self.points);
            self.points = points;
        }
        self.points.resize(total, Point::default());
        if few {
            // From the back: each added point (largest first) finds its place among the old
            // points still unmoved, the old points after it shift up by the number of added
            // points still to place (one memmove per added point, each old point moved once),
            // and it drops in.
            let mut old_left = kept;
            for (j, &a) in added.iter().enumerate().rev() {
                let pos = place(&self.points, 0, old_left, a);
                self.points.copy_within(pos..old_left, pos + j + 1);
                if let Some(p) = self.points.get_mut(pos + j) {
                    *p = Point::new(a.0, a.1);
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
                    .and_then(|i| self.points.get(i))
                    .map(|p| p.pair());
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
                if let Some(p) = self.points.get_mut(dst) {
                    *p = Point::new(point.0, point.1);
                }
            }
        }
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

#[cfg(test)]
mod tests {
    use super::super::index::BucketIndex;
    use super::super::Flavour;
    use super::*;
    use std::collections::HashMap;

    type NodeList = Vec<(Vec<u8>, u32)>;

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
            let points = r.points();
            assert_eq!(points[0].hash(), points[1].hash(), "the two points collide");
            let owner = r.owner_of_hash(points[0].hash()).expect("owner");
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
                let mut rebuilt = BucketIndex::new(f.hash_bits());
                rebuilt.rebuild_with(&r.points, r.index.bits());
                assert_eq!(r.index, rebuilt, "{f:?}");
                let ideal = BucketIndex::bits_for(f.hash_bits(), r.point_count());
                let bits = r.index.bits();
                assert!(bits <= ideal && ideal - bits <= 1, "{f:?}: index size");
            }
        }
    }
}
