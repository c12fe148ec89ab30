//! What a member weighs in a weighted what-if (`RING.MOVES ... WEIGH BYTES | HITS`): its
//! memory in bytes and its accesses, so that a what-if counts moved bytes and moved hits beside
//! moved keys, and each node's load after the change.
//!
//! Accesses come either exactly from a workload that counted them, or from Redis' LFU counter
//! ([`lfu_accesses`]).

/// One member's weights. Both are 0 for a member that carries none (a `SAMPLE` member).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemberWeight {
    /// Its memory, in bytes (`MEMORY USAGE`, or a memcached item's `size`).
    pub bytes: u64,
    /// Its accesses (reads), exact or estimated.
    pub hits: u64,
}

/// The LFU counter's initial value: a new key starts at 5 (`LFU_INIT_VAL` in Redis' `server.h`),
/// so that it is not evicted before it had a chance to be read.
pub const LFU_INIT_VAL: u8 = 5;

/// The expected number of accesses that took an LFU counter from [`LFU_INIT_VAL`] to `counter`,
/// with the server's `lfu-log-factor` `factor`.
///
/// Source: Redis' `evict.c`, `LFULogIncr`: on each access a counter `c` above 5 grows by one
/// with probability `p(c) = 1 / ((c - 5) * factor + 1)` (always at or below 5), and never past
/// 255. The number of accesses it spends at `c` is geometric with mean `1 / p(c) = (c - 5) *
/// factor + 1`, so the expected accesses from 5 to `c` are
/// `sum_{k=5}^{c-1} ((k - 5) * factor + 1) = (c - 5) + factor * (c - 5) * (c - 6) / 2`.
/// A counter at or below 5 gives 0: a key never read, or one whose counter `lfu-decay-time` has
/// decayed (the server decays the counter by one per `lfu-decay-time` minutes without access,
/// `LFUDecrAndReturn`, and `RedisModule_GetLFU` returns the decayed value), so this estimates
/// the accesses still "remembered" after decay, not all accesses ever. Its error: the sum of
/// geometric waits has a standard deviation of `sqrt(sum (1 - p) / p^2)`; with factor 10 that
/// is 0 at `c = 6` (one certain step), 87% of the mean at 7, 53% at 10, and about 12% near
/// 100, where many steps add up; a counter that saturated at 255 says only "at least this
/// many".
/// BENCHMARKS.md measures the error against exact access counts.
pub fn lfu_accesses(counter: u8, factor: u64) -> u64 {
    let above = u64::from(counter.saturating_sub(LFU_INIT_VAL));
    above + factor.saturating_mul(above * above.saturating_sub(1) / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lfu_accesses_sum_the_expected_waits_of_each_step() {
        // Worked out by hand from LFULogIncr's probability with the default factor 10:
        // 5 -> 6 takes 1 access, 6 -> 7 takes 11, 7 -> 8 takes 21.
        assert_eq!(lfu_accesses(0, 10), 0);
        assert_eq!(lfu_accesses(5, 10), 0);
        assert_eq!(lfu_accesses(6, 10), 1);
        assert_eq!(lfu_accesses(7, 10), 1 + 11);
        assert_eq!(lfu_accesses(8, 10), 1 + 11 + 21);
        // The closed form against the sum, for every counter and a few factors.
        for factor in [0u64, 1, 10, 100] {
            let mut sum = 0u64;
            for c in 5u8..=255 {
                assert_eq!(lfu_accesses(c, factor), sum, "counter {c} factor {factor}");
                sum += u64::from(c - 5) * factor + 1;
            }
        }
        // redis.conf's table under "lfu-log-factor" (measured by Redis' authors, factor 10):
        // 100 hits -> counter 10, 1K -> 18, 100K -> 142, 1M -> 255 (saturated). The inverse of
        // each counter lands within a quarter of the hits that made it.
        for (counter, hits) in [(10u8, 100u64), (18, 1_000), (142, 100_000)] {
            let estimate = lfu_accesses(counter, 10) as f64;
            let ratio = estimate / hits as f64;
            assert!(
                (0.75..=1.25).contains(&ratio),
                "counter {counter}: {estimate} for {hits}"
            );
        }
        assert!(lfu_accesses(255, 10) < 1_000_000);
    }
}
