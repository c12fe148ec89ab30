//! Envoy `ring_hash` (`ring_hash_lb.cc`): its default ring sizes, the points each host gets,
//! and `STD_HASH_SEED` (`source/common/common/hash.h`), the seed of its `murmurHash2`. The
//! hashes are xxHash64 (the `xxhash-rust` crate) and MurmurHash64A (`murmur2.rs`); Envoy's
//! `maglev` table is in `ring/table.rs`.

/// Envoy `ring_hash`'s default `minimum_ring_size` (`DefaultMinRingSize`).
pub const ENVOY_MIN_RING_SIZE: u32 = 1024;
/// Envoy `ring_hash`'s default `maximum_ring_size` (`DefaultMaxRingSize`, 8M).
const ENVOY_MAX_RING_SIZE: f64 = 8_388_608.0;
/// Envoy's `STD_HASH_SEED` (`source/common/common/hash.h`), the seed of its `murmurHash2`.
pub const ENVOY_HASH_SEED: u32 = 0xc70f_6907;

/// Points per host of an Envoy `ring_hash` ring, in host order, as Envoy's `Ring` constructor
/// shares out the ring (`ring_hash_lb.cc`, default sizes): weights normalized to shares `w`
/// (weight / sum, doubles), `scale = min(ceil(min_w x 1024) / min_w, 8M)` with `min_w` the
/// smallest share (at most 1), then running totals over the hosts in order: the target grows
/// by `scale x w`, and points are added while the count so far is below it. Every step is the
/// same double arithmetic as Envoy's, in its order.
pub fn envoy_point_counts(weights: &[u32]) -> Vec<u64> {
    let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let shares: Vec<f64> = weights
        .iter()
        .map(|&w| f64::from(w) * 1.0 / sum as f64)
        .collect();
    let min_w = shares.iter().copied().fold(1.0f64, f64::min);
    let scale = ((min_w * f64::from(ENVOY_MIN_RING_SIZE)).ceil() / min_w).min(ENVOY_MAX_RING_SIZE);
    let (mut current, mut target) = (0.0f64, 0.0f64);
    shares
        .iter()
        .map(|&w| {
            target += scale * w;
            let mut count = 0u64;
            while current < target {
                count += 1;
                current += 1.0;
            }
            count
        })
        .collect()
}
