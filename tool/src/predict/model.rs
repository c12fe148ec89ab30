//! How long a rebalance takes: a linear model of its slots, keys and bytes, fitted to real
//! `redis-cli --cluster rebalance` runs of `ringslot-bench cluster --local` (redis-cli 7.0.15, `--cluster-pipeline
//! 10`, loopback, 2 vCPUs; BENCHMARKS.md "On a Redis Cluster" gives the runs and the error).
//!
//! Per slot, redis-cli sends `CLUSTER SETSLOT` to both ends, `CLUSTER GETKEYSINSLOT`, and a
//! `CLUSTER SETSLOT ... NODE` to every master (so a slot costs more the more masters there
//! are); per key batch of `--cluster-pipeline` keys, one `MIGRATE`, whose target restores
//! each key; per byte, the copy.

/// The model's coefficients: `seconds = per_slot x slots + per_key x keys`. The bytes do not
/// enter it: on loopback, where it was fitted, they cost less than the runs' noise (169 MiB
/// more took no measurable time); over a network, add the bytes at its bandwidth
/// ([`network_seconds`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    /// Seconds per slot moved.
    pub per_slot: f64,
    /// Seconds per key moved.
    pub per_key: f64,
}

/// Fitted on 2026-12-01 to the 14 runs of `make bench-cluster-fit` and `make bench-cluster`
/// (2734 to 8194 slots, 4 to 8 masters, 7463 to 520119 keys, 4 to 333 MiB); its error on
/// them was -20% to +44%, and two identical runs differed by 20% (BENCHMARKS.md).
pub const FITTED: Model = Model {
    per_slot: 0.001_494,
    per_key: 0.000_023_74,
};

impl Model {
    /// Seconds for a rebalance that moves `slots` slots holding `keys` keys.
    pub fn seconds(&self, slots: u64, keys: u64) -> f64 {
        self.per_slot * slots as f64 + self.per_key * keys as f64
    }
}

/// Seconds to send `bytes` at `megabits` Mbit/s.
pub fn network_seconds(bytes: f64, megabits: f64) -> f64 {
    bytes * 8.0 / (megabits * 1e6)
}

/// One run: slots moved, keys moved, seconds.
pub type Run = (u64, u64, f64);

/// Least squares of `seconds ~ per_slot x slots + per_key x keys` over `runs` (the 2 x 2
/// normal equations, solved by Cramer's rule); `None` with fewer than 2 runs or when the runs
/// cannot tell slots and keys apart (a singular system).
pub fn fit(runs: &[Run]) -> Option<Model> {
    if runs.len() < 2 {
        return None;
    }
    let (mut ss, mut sk, mut kk, mut st, mut kt) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(s, k, t) in runs {
        let (s, k) = (s as f64, k as f64);
        ss += s * s;
        sk += s * k;
        kk += k * k;
        st += s * t;
        kt += k * t;
    }
    let det = ss * kk - sk * sk;
    if det.abs() <= 1e-9 * ss * kk {
        return None;
    }
    Some(Model {
        per_slot: (st * kk - kt * sk) / det,
        per_key: (ss * kt - sk * st) / det,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fit_recovers_the_coefficients_of_exact_runs() {
        let truth = Model {
            per_slot: 0.0015,
            per_key: 0.000_02,
        };
        let runs: Vec<Run> = [(4096u64, 250_000u64), (8194, 10_000), (5462, 100_000)]
            .iter()
            .map(|&(s, k)| (s, k, truth.seconds(s, k)))
            .collect();
        let got = fit(&runs).unwrap();
        assert!((got.per_slot - truth.per_slot).abs() < 1e-12, "{got:?}");
        assert!((got.per_key - truth.per_key).abs() < 1e-12, "{got:?}");
        assert!(fit(&runs[..1]).is_none());
        // Runs in proportion cannot tell slots from keys.
        assert!(fit(&[(100, 10, 1.0), (200, 20, 2.0)]).is_none());
        assert!((network_seconds(125e6, 1000.0) - 1.0).abs() < 1e-12);
    }
}
