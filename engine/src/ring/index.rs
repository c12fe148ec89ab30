//! The bucket index of a ring: a compact table over the top bits of the hash space that says
//! where each bucket's points start, so that a lookup reads one index line and then the one
//! line of points that holds its answer, instead of a binary search over all of them.
//!
//! Layout: about one bucket per point (so that a bucket holds one point or none, and the
//! answer is the bucket's first point or the next), kept as 64-byte groups of 60 buckets: the
//! position of the group's first point (`u32`) and, per bucket, how far after it the bucket
//! starts (`u8`). That is 1.07 bytes a bucket where a `u32` a bucket would take 4, so the index
//! of a 160000-point ring (273 KiB) stays in a core's cache beside the points it indexes.
//! An offset that does not fit a byte is stored as 255, a position at or before the bucket's
//! start: a lookup that starts there is still exact (it skips the smaller points), and one
//! that meets a saturated offset binary-searches up to the next group instead of scanning.

use super::Point;

/// Buckets per group: a `u32` base and 60 one-byte offsets fill one 64-byte cache line.
const GROUP: usize = 60;

/// The stored offset that means "255 or more": the bucket starts at or after `base + 255`.
const SATURATED: u8 = u8::MAX;

/// Points a lookup compares one by one before it binary-searches the rest of the group.
const SCAN: usize = 4;

/// Most index bits: 2^26 buckets (68 MiB of index) serve rings of up to 64M points at one
/// point a bucket; bigger rings get more points a bucket.
const MAX_BITS: u32 = 26;

/// One 64-byte line of the index: the position of the first point at or after the group's
/// first bucket, and each bucket's start relative to it (saturated at 255).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
struct Group {
    base: u32,
    offsets: [u8; GROUP],
}

impl Group {
    const EMPTY: Group = Group {
        base: 0,
        offsets: [0; GROUP],
    };
}

/// Where each bucket of the hash space starts among a ring's sorted points.
///
/// Invariant (kept by every method): for a ring of `n` sorted points, bucket `b` (of group
/// `b / 60`, slot `b % 60`) stores `base + offset` = `min(first(b), base + 255)`, where
/// `first(b)` is the position of the first point whose bucket is `>= b` (`n` when there is
/// none, and for the last group's slots past the last bucket), `base` = `first(60 * group)`,
/// and the bucket of a hash is its top `bits` bits. Memory: 64 bytes per 60 buckets, one to
/// four buckets per two points (0.53-2.13 bytes a point).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketIndex {
    groups: Vec<Group>,
    bits: u32,
    hash_bits: u32,
}

impl BucketIndex {
    /// An empty index over a hash space of `2^hash_bits` values (32 or 64).
    pub fn new(hash_bits: u32) -> BucketIndex {
        BucketIndex {
            groups: Vec::new(),
            bits: 0,
            hash_bits,
        }
    }

    /// Index bits that suit `points` points: the fewest that give at least one bucket per
    /// point (at most 26, at most the hash space's bits).
    pub fn bits_for(hash_bits: u32, points: usize) -> u32 {
        let mut bits = 0;
        while bits < MAX_BITS && (1usize << bits) < points {
            bits += 1;
        }
        bits.min(hash_bits)
    }

    /// The number of index bits in use.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// The bucket of `hash`: its top `bits` bits (0 without an index).
    pub fn bucket(&self, hash: u64) -> usize {
        let shift = self.hash_bits.saturating_sub(self.bits);
        hash.checked_shr(shift).unwrap_or(0) as usize
    }

    /// Position of the first of the sorted `points` whose hash is `>= hash` (`points.len()`
    /// when there is none). Reads one index line and, in the common case, the one or two
    /// points after the bucket's start, which share a cache line. The `points` must be the
    /// ones the index was built or updated for.
    pub fn first_at_or_after(&self, points: &[Point], hash: u64) -> usize {
        let bucket = self.bucket(hash);
        let Some(group) = self.groups.get(bucket / GROUP) else {
            // Only a hash outside the space or an index never built gets here.
            return points.partition_point(|p| p.hash() < hash);
        };
        let offset = group.offsets.get(bucket % GROUP).copied().unwrap_or(0);
        let start = group.base as usize + usize::from(offset);
        if offset != SATURATED {
            let near = points.get(start..).unwrap_or(&[]);
            for (i, p) in near.iter().take(SCAN).enumerate() {
                if p.hash() >= hash {
                    return start + i;
                }
            }
        }
        // A bucket of many points (or past a saturated offset): binary search up to the next
        // group's first point, an exact bound the answer cannot pass.
        let end = self
            .groups
            .get(bucket / GROUP + 1)
            .map_or(points.len(), |g| g.base as usize)
            .min(points.len());
        let lo = start.min(end);
        lo + points
            .get(lo..end)
            .map_or(0, |run| run.partition_point(|p| p.hash() < hash))
    }

    /// Rebuilds the index from the sorted `points` at the size that suits their count.
    pub fn rebuild(&mut self, points: &[Point]) {
        self.rebuild_with(points, BucketIndex::bits_for(self.hash_bits, points.len()));
    }

    /// Rebuilds the index from the sorted `points` with `2^bits` buckets: one pass over the
    /// points and one over the buckets.
    pub fn rebuild_with(&mut self, points: &[Point], bits: u32) {
        self.bits = bits;
        let groups = (1usize << bits).div_ceil(GROUP);
        let mut out = std::mem::take(&mut self.groups);
        out.clear();
        if out.capacity() / 4 > groups {
            out.shrink_to(groups); // a ring that lost most of its points gives memory back
        }
        out.resize(groups, Group::EMPTY);
        // Walk the buckets and the points together: first(b) is the number of points whose
        // bucket is below b. The last group's slots past the last bucket hold the point
        // count, as buckets after every point would.
        let mut at = 0usize;
        let mut base = 0usize;
        for b in 0..groups * GROUP {
            while points.get(at).is_some_and(|p| self.bucket(p.hash()) < b) {
                at += 1;
            }
            let Some(group) = out.get_mut(b / GROUP) else {
                break;
            };
            if b % GROUP == 0 {
                base = at;
                group.base = at as u32;
            }
            if let Some(o) = group.offsets.get_mut(b % GROUP) {
                *o = u8::try_from(at - base).unwrap_or(SATURATED);
            }
        }
        self.groups = out;
    }

    /// Brings the index up to date for the sorted `points` after the points `added` came in
    /// and points of the buckets `dropped` (under this index, before the change) went: the
    /// first point of every bucket after a change moves by the points gained minus lost
    /// before it, so group bases move by a running sum (one pass over the groups after the
    /// first change) and only the changed groups' offsets are touched. Rebuilt instead when
    /// it is bigger than suits the new count (so that it never costs more than 2.13 bytes a
    /// point) or more than a factor of two smaller, when the changes outnumber the groups (a
    /// rebuild is then cheaper), or when an offset would leave a byte's range.
    pub fn update(&mut self, points: &[Point], added: &[u64], dropped: &[usize]) {
        let ideal = BucketIndex::bits_for(self.hash_bits, points.len());
        let fits = self.bits <= ideal && ideal - self.bits <= 1;
        let few = added.len() + dropped.len() <= self.groups.len();
        if self.groups.is_empty() || !fits || !few || !self.shift(added, dropped) {
            self.rebuild(points);
        }
    }

    /// Applies the changes of [`BucketIndex::update`] in place; `false` (index half-changed,
    /// to be rebuilt) when an offset saturates or is saturated.
    fn shift(&mut self, added: &[u64], dropped: &[usize]) -> bool {
        // A change in bucket c moves first(b) for every bucket b after c by +1 or -1 (two's
        // complement): the offsets of the later buckets of c's group, and the base of every
        // later group (a running sum over the changes in bucket order).
        let mut steps: Vec<(usize, u32)> = added
            .iter()
            .map(|&h| (self.bucket(h), 1))
            .chain(dropped.iter().map(|&b| (b, u32::MAX)))
            .collect();
        steps.sort_unstable_by_key(|s| s.0);
        for &(bucket, step) in &steps {
            let Some(group) = self.groups.get_mut(bucket / GROUP) else {
                return false;
            };
            for o in group.offsets.iter_mut().skip(bucket % GROUP + 1) {
                match u8::try_from(u32::from(*o).wrapping_add(step)) {
                    Ok(moved) if *o != SATURATED && moved != SATURATED => *o = moved,
                    _ => return false,
                }
            }
        }
        let mut shift = 0u32;
        let mut i = 0;
        while let Some(&(bucket, _)) = steps.get(i) {
            let g = bucket / GROUP;
            while let Some(&(_, step)) = steps.get(i).filter(|s| s.0 / GROUP == g) {
                shift = shift.wrapping_add(step);
                i += 1;
            }
            // Groups after g up to the next change's group have every change so far before
            // their first bucket.
            let to = steps.get(i).map_or(self.groups.len(), |s| s.0 / GROUP + 1);
            if let Some(run) = self.groups.get_mut(g + 1..to) {
                for group in run {
                    group.base = group.base.wrapping_add(shift);
                }
            }
        }
        true
    }

    /// Heap bytes of the index (64 per 60 buckets).
    pub fn memory_bytes(&self) -> usize {
        self.groups.capacity() * std::mem::size_of::<Group>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(hashes: &[u64]) -> Vec<Point> {
        hashes.iter().map(|&h| Point::new(h, 0)).collect()
    }

    /// The answer of a binary search over every point, which the index must equal.
    fn searched(points: &[Point], hash: u64) -> usize {
        points.partition_point(|p| p.hash() < hash)
    }

    #[test]
    fn buckets_start_at_their_first_point() {
        // 64-bit space, 2 index bits: buckets start at 0, 2^62, 2^63, 3 * 2^62; the slots of
        // the one group past the fourth bucket hold the point count.
        let q = 1u64 << 62;
        let ps = points(&[5, q + 1, q + 2, 3 * q + 7]);
        let mut index = BucketIndex::new(64);
        index.rebuild_with(&ps, 2);
        assert_eq!(index.groups.len(), 1);
        assert_eq!(index.groups[0].base, 0);
        assert_eq!(index.groups[0].offsets[..5], [0, 1, 3, 3, 4]);
        assert!(index.groups[0].offsets[4..].iter().all(|&o| o == 4));
        for hash in [0, 5, 6, q, q + 2, q + 3, 2 * q + 1, 3 * q + 7, u64::MAX] {
            assert_eq!(
                index.first_at_or_after(&ps, hash),
                searched(&ps, hash),
                "{hash}"
            );
        }
    }

    #[test]
    fn crowded_buckets_and_saturated_offsets_stay_exact() {
        // 600 points in the first bucket of a group of 2^8 buckets, then one in each of a
        // few later buckets: offsets past 255 saturate, and lookups there binary-search.
        let step = 1u64 << 56; // one bucket of 8 index bits
        let mut hashes: Vec<u64> = (0..600).map(|i| 1000 + i * 7).collect();
        hashes.extend((1..40).map(|b| b * step + 3));
        hashes.extend((61..70).map(|b| b * step));
        let ps = points(&hashes);
        let mut index = BucketIndex::new(64);
        index.rebuild_with(&ps, 8);
        assert!(index.groups[0].offsets.contains(&SATURATED));
        let probes = hashes
            .iter()
            .flat_map(|&h| [h.wrapping_sub(1), h, h + 1])
            .chain([0, u64::MAX, 45 * step, 60 * step, 71 * step]);
        for hash in probes {
            assert_eq!(
                index.first_at_or_after(&ps, hash),
                searched(&ps, hash),
                "{hash}"
            );
        }
    }

    #[test]
    fn a_32_bit_space_and_hashes_outside_it() {
        let ps = points(&[1, 1 << 20, 1 << 31, u64::from(u32::MAX)]);
        let mut index = BucketIndex::new(32);
        index.rebuild(&ps);
        for hash in [
            0,
            1,
            2,
            1 << 20,
            1 << 31,
            u64::from(u32::MAX),
            1 << 32,
            u64::MAX,
        ] {
            assert_eq!(
                index.first_at_or_after(&ps, hash),
                searched(&ps, hash),
                "{hash}"
            );
        }
    }

    #[test]
    fn an_update_equals_a_rebuild() {
        // 64 points over 2^6 buckets (a little more than one group), then every third point
        // dropped and a few added, in the first group, at the group boundary and in the last.
        let q = 1u64 << 58;
        let before: Vec<u64> = (0..64).map(|i| i * q + 3).collect();
        let mut index = BucketIndex::new(64);
        index.rebuild_with(&points(&before), 6);
        let dropped: Vec<usize> = before.iter().step_by(3).map(|&h| index.bucket(h)).collect();
        let added = [1, 59 * q + 5, 60 * q + 1, 63 * q + 9];
        let mut after: Vec<u64> = before
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 != 0)
            .map(|(_, &h)| h)
            .chain(added)
            .collect();
        after.sort_unstable();
        let after = points(&after);
        let mut shifted = index.clone();
        assert!(
            shifted.shift(&added, &dropped),
            "adjusted in place, not rebuilt"
        );
        index.update(&after, &added, &dropped);
        let mut rebuilt = BucketIndex::new(64);
        rebuilt.rebuild_with(&after, index.bits());
        assert_eq!(shifted, rebuilt);
        assert_eq!(index, rebuilt);
    }
}
