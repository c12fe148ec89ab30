//! How long a rebalance takes: a linear model of its slots, keys and bytes, fitted to real
//! `redis-cli --cluster rebalance` runs of `--local` (redis-cli 7.0.15, `--cluster-pipeline
//! 10`, loopback, 2 vCPUs; BENCHMARKS.md "On a Redis Cluster" gives the runs and the error).
//!
//! Per slot, redis-cli sends `CLUSTER SETSLOT` to both ends, `CLUSTER GETKEYSINSLOT`, and a
//! `CLUSTER SETSLOT ... NODE` to every master; per key batch of `--cluster-pipeline` keys, one
//! `MIGRATE`, whose target restores each key; per byte, the copy.

/// The model's coefficients.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    /// Seconds per run (add-node, convergence, redis-cli's checks).
    pub fixed: f64,
    /// Seconds per slot moved.
    pub per_slot: f64,
    /// Seconds per key moved.
    pub per_key: f64,
    /// Seconds per MiB moved (`DUMP` payloads).
    pub per_mib: f64,
}

/// Fitted to the `make bench-cluster` runs of 2026-12-01 (see the module docs).
pub const FITTED: Model = Model {
    fixed: 2.0,
    per_slot: 0.0015,
    per_key: 0.000_02,
    per_mib: 0.01,
};

impl Model {
    /// Seconds for a rebalance that moves `slots` slots holding `keys` keys of `bytes` bytes.
    pub fn seconds(&self, slots: u64, keys: u64, bytes: f64) -> f64 {
        self.fixed
            + self.per_slot * slots as f64
            + self.per_key * keys as f64
            + self.per_mib * bytes / (1024.0 * 1024.0)
    }
}

/// `ringslot-bench cluster-fit`: fits the model to the runs local `cluster` runs wrote.
#[derive(clap::Args, Debug)]
pub struct FitArgs {
    /// The `<name>-run.csv` files of local runs (`slots,keys,bytes,seconds,estimate`).
    #[arg(required = true)]
    runs: Vec<std::path::PathBuf>,
}

/// Prints each run's error under [`FITTED`] and under a fit to the runs given (which needs
/// four runs or more).
pub fn run_fit(a: &FitArgs) -> anyhow::Result<()> {
    use crate::report::{fixed, Table};
    let mut runs = Vec::new();
    for path in &a.runs {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            let f: Vec<&str> = line.split(',').collect();
            let num = |i: usize| -> anyhow::Result<f64> {
                f.get(i)
                    .and_then(|v| v.trim().parse().ok())
                    .ok_or_else(|| anyhow::anyhow!("{}: bad line {line:?}", path.display()))
            };
            runs.push((num(0)? as u64, num(1)? as u64, num(2)?, num(3)?));
        }
    }
    let fitted = fit(&runs);
    let mut t = Table::new(&[
        "slots",
        "keys",
        "MiB",
        "real s",
        "estimate s",
        "error",
        "refit s",
        "refit error",
    ]);
    for &(slots, keys, bytes, secs) in &runs {
        let e = FITTED.seconds(slots, keys, bytes);
        let refit = fitted.map(|m| m.seconds(slots, keys, bytes));
        t.push(vec![
            slots.to_string(),
            keys.to_string(),
            fixed(bytes / (1024.0 * 1024.0), 1),
            fixed(secs, 2),
            fixed(e, 2),
            format!("{:+.0}%", (e - secs) / secs.max(1e-9) * 100.0),
            refit.map_or("-".into(), |r| fixed(r, 2)),
            refit.map_or("-".into(), |r| {
                format!("{:+.0}%", (r - secs) / secs.max(1e-9) * 100.0)
            }),
        ]);
    }
    println!("{}", t.markdown());
    match fitted {
        Some(m) => println!(
            "fit: fixed {:.3} s, per_slot {:.6} s, per_key {:.8} s, per_mib {:.5} s",
            m.fixed, m.per_slot, m.per_key, m.per_mib
        ),
        None => println!("fit: needs 4 runs or more that tell slots, keys and bytes apart"),
    }
    Ok(())
}

/// Least squares of `seconds ~ fixed + slots + keys + MiB` over runs `(slots, keys, bytes,
/// seconds)`, by the normal equations (4 x 4, Gaussian elimination with partial pivoting);
/// `None` with fewer than 4 runs or a singular system (then a coefficient cannot be told
/// apart from the others).
pub fn fit(runs: &[(u64, u64, f64, f64)]) -> Option<Model> {
    if runs.len() < 4 {
        return None;
    }
    let rows: Vec<[f64; 5]> = runs
        .iter()
        .map(|&(s, k, b, t)| [1.0, s as f64, k as f64, b / (1024.0 * 1024.0), t])
        .collect();
    // A = X^T X (4x4), y = X^T t.
    let mut m = [[0.0f64; 5]; 4];
    for r in &rows {
        for i in 0..4 {
            for j in 0..4 {
                m[i][j] += r[i] * r[j];
            }
            m[i][4] += r[i] * r[4];
        }
    }
    for col in 0..4 {
        let pivot = (col..4).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() < 1e-12 {
            return None;
        }
        m.swap(col, pivot);
        let pivot_row = m[col];
        for (row, r) in m.iter_mut().enumerate() {
            if row != col {
                let f = r[col] / pivot_row[col];
                for (x, p) in r.iter_mut().zip(pivot_row).skip(col) {
                    *x -= f * p;
                }
            }
        }
    }
    let c: Vec<f64> = (0..4).map(|i| m[i][4] / m[i][i]).collect();
    Some(Model {
        fixed: c[0],
        per_slot: c[1],
        per_key: c[2],
        per_mib: c[3],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fit_recovers_the_coefficients_of_exact_runs() {
        let truth = Model {
            fixed: 1.5,
            per_slot: 0.002,
            per_key: 0.00003,
            per_mib: 0.02,
        };
        let runs: Vec<(u64, u64, f64, f64)> = [
            (4096u64, 250_000u64, 80e6f64),
            (8194, 500_000, 90e6),
            (5462, 100_000, 300e6),
            (2000, 900_000, 10e6),
            (100, 1_000, 1e3),
        ]
        .iter()
        .map(|&(s, k, b)| (s, k, b, truth.seconds(s, k, b)))
        .collect();
        let got = fit(&runs).unwrap();
        assert!((got.fixed - truth.fixed).abs() < 1e-6, "{got:?}");
        assert!((got.per_slot - truth.per_slot).abs() < 1e-9, "{got:?}");
        assert!((got.per_key - truth.per_key).abs() < 1e-10, "{got:?}");
        assert!((got.per_mib - truth.per_mib).abs() < 1e-8, "{got:?}");
        assert!(fit(&runs[..3]).is_none());
    }
}
