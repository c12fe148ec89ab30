//! The bucket index of a ring: a small table over the top bits of the hash space that says
//! where each bucket's points start, so that a lookup reads one bucket and searches a handful
//! of points instead of a binary search over all of them.

/// Where each bucket of the hash space starts among a ring's sorted points.
///
/// Invariant (kept by every method): for a ring of `n` sorted points, `first[b]` is the
/// position of the first point whose bucket is `>= b` (`n` when there is none), where the
/// bucket of a hash is its top `bits` bits. About one bucket per four points (at most
/// `2^24` buckets), so the index costs about 1 byte per point and stays in cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketIndex {
    first: Vec<u32>,
    bits: u32,
    hash_bits: u32,
}

impl BucketIndex {
    /// An empty index over a hash space of `2^hash_bits` values (32 or 64).
    pub fn new(hash_bits: u32) -> BucketIndex {
        BucketIndex {
            first: Vec::new(),
            bits: 0,
            hash_bits,
        }
    }

    /// Index bits that suit `points` points: about one bucket per four points, at most 24 and
    /// at most the hash space's bits.
    pub fn bits_for(hash_bits: u32, points: usize) -> u32 {
        let mut bits = 0;
        while bits < 24 && (4usize << bits) < points {
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

    /// The positions `lo..hi` among the `len` sorted points where the first point `>= hash`
    /// must be (it is `hi` when every point of the bucket is smaller); `None` for a hash
    /// outside the space or an index that was never built.
    pub fn range(&self, hash: u64, len: usize) -> Option<(usize, usize)> {
        let bucket = self.bucket(hash);
        let lo = *self.first.get(bucket)? as usize;
        let hi = self.first.get(bucket + 1).map_or(len, |&hi| hi as usize);
        Some((lo, hi))
    }

    /// Rebuilds the index from the sorted point `hashes` at the size that suits their count.
    pub fn rebuild(&mut self, hashes: &[u64]) {
        self.rebuild_with(hashes, BucketIndex::bits_for(self.hash_bits, hashes.len()));
    }

    /// Rebuilds the index from the sorted point `hashes` with `2^bits` buckets: one pass over
    /// the points and one over the buckets.
    pub fn rebuild_with(&mut self, hashes: &[u64], bits: u32) {
        self.bits = bits;
        let buckets = 1usize << bits;
        // Count the points of each bucket into first[bucket + 1] (the last bucket's count is
        // not needed), then prefix-sum: first[b] becomes the number of points in buckets
        // before b, i.e. the first point of b.
        let mut first = std::mem::take(&mut self.first);
        first.clear();
        if first.capacity() / 4 > buckets {
            first.shrink_to(buckets); // a ring that lost most of its points gives memory back
        }
        first.resize(buckets, 0);
        for &h in hashes {
            let bucket = self.bucket(h);
            if let Some(c) = first.get_mut(bucket + 1) {
                *c += 1;
            }
        }
        let mut sum = 0u32;
        for c in first.iter_mut() {
            sum += *c;
            *c = sum;
        }
        self.first = first;
    }

    /// Brings the index up to date for the sorted point `hashes` after the points `added` came
    /// in and points of the buckets `dropped` (under this index, before the change) went:
    /// `first[b]` moves by the points gained minus lost in buckets before `b`, one pass over
    /// the buckets after the first change instead of one over every point. Rebuilt instead
    /// when its size is off by more than a factor of two for the new count.
    pub fn update(&mut self, hashes: &[u64], added: &[u64], dropped: &[usize]) {
        let ideal = BucketIndex::bits_for(self.hash_bits, hashes.len());
        if self.first.is_empty() || ideal.abs_diff(self.bits) > 1 {
            self.rebuild(hashes);
            return;
        }
        // Each change shifts first[b] for every bucket b after its own; as (from, +1 or -1
        // in two's complement), sorted, then applied as a running sum over bucket ranges.
        let mut steps: Vec<(usize, u32)> = added
            .iter()
            .map(|&h| (self.bucket(h) + 1, 1))
            .chain(dropped.iter().map(|&b| (b + 1, u32::MAX)))
            .collect();
        steps.sort_unstable_by_key(|s| s.0);
        let mut shift = 0u32;
        for (i, &(from, step)) in steps.iter().enumerate() {
            shift = shift.wrapping_add(step);
            let to = steps.get(i + 1).map_or(self.first.len(), |s| s.0);
            if let Some(run) = self.first.get_mut(from..to) {
                for first in run {
                    *first = first.wrapping_add(shift);
                }
            }
        }
    }

    /// Heap bytes of the index (4 per bucket).
    pub fn memory_bytes(&self) -> usize {
        self.first.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_bracket_the_first_point_at_or_after_a_hash() {
        // 64-bit space, 2 index bits: buckets start at 0, 2^62, 2^63, 3 * 2^62.
        let q = 1u64 << 62;
        let hashes = [5, q + 1, q + 2, 3 * q + 7];
        let mut index = BucketIndex::new(64);
        index.rebuild_with(&hashes, 2);
        assert_eq!(index.first, vec![0, 1, 3, 3]);
        for (hash, expected) in [
            (0, (0, 1)),
            (q, (1, 3)),
            (2 * q + 1, (3, 3)),
            (u64::MAX, (3, 4)),
        ] {
            let (lo, hi) = index.range(hash, hashes.len()).expect("a range");
            assert_eq!((lo, hi), expected, "{hash}");
            let first = hashes.partition_point(|&p| p < hash);
            assert!(lo <= first && first <= hi, "{hash}");
        }
    }

    #[test]
    fn an_update_equals_a_rebuild() {
        let q = 1u64 << 60;
        let before: Vec<u64> = (0..64).map(|i| i * (q / 4) + 3).collect();
        let mut index = BucketIndex::new(64);
        index.rebuild(&before);
        // Drop every third point, add a few new ones, keep the sorted order.
        let dropped: Vec<usize> = before.iter().step_by(3).map(|&h| index.bucket(h)).collect();
        let added = [1, 7 * q + 5, 15 * q + 2];
        let mut after: Vec<u64> = before
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 != 0)
            .map(|(_, &h)| h)
            .chain(added)
            .collect();
        after.sort_unstable();
        index.update(&after, &added, &dropped);
        let mut rebuilt = BucketIndex::new(64);
        rebuilt.rebuild_with(&after, index.bits());
        assert_eq!(index, rebuilt);
    }
}
