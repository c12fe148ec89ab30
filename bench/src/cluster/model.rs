//! The duration models' calibration: the run each local `cluster` run writes for them
//! (`<name>-run.csv` per key, `<name>-atomic-run.csv` atomic), and `cluster-fit`, which fits
//! the per-key model ([`ringslot_tool::predict::duration`]) to such runs ([`fit`]) and prints
//! each run's error and whether it fell inside the range the report gave.

use super::real::Outcome;
use crate::report::{self, fixed, Table};
use anyhow::{anyhow, Result};
use ringslot_tool::predict::duration::{
    extra_round_trip, ClusterTiming, Counts, PerKeyModel, ServerKind, DEFAULT_DUMP, FITTED_RTT,
    KEY_FACTOR,
};
use ringslot_tool::predict::method::Method;
use std::path::Path;

/// The columns of a per-key run.
const RUN_COLUMNS: [&str; 16] = [
    "server",
    "condition",
    "slots",
    "masters",
    "batches",
    "keys",
    "round_trips",
    "config_writes",
    "rtt",
    "rtt_spaced",
    "dump_per_key",
    "bytes",
    "seconds",
    "low",
    "mid",
    "high",
];

/// Writes the run of a local `outcome` for a fit of its method's duration model (per key: what
/// was counted and measured, the seconds, the estimate; atomic: jobs, DUMP bytes, seconds,
/// the estimate), labelled `condition` (`idle`, `busy`). Nothing without a real change.
pub fn write_run(dir: &Path, name: &str, outcome: &Outcome, condition: &str) -> Result<()> {
    let (p, Some(r)) = (&outcome.prediction, outcome.real.as_ref()) else {
        return Ok(());
    };
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.9}"));
    if r.method == Method::PerKey {
        let c = &p.counts;
        let mut run = Table::new(&RUN_COLUMNS);
        run.push(vec![
            p.timing.server.unwrap_or_default().label().to_string(),
            condition.to_string(),
            c.slots.to_string(),
            c.masters.to_string(),
            c.batches.to_string(),
            c.keys.to_string(),
            c.round_trips.to_string(),
            c.config_writes.to_string(),
            opt(p.timing.rtt),
            opt(p.timing.rtt_spaced),
            opt(p.timing.dump_per_key),
            format!("{:.0}", p.bytes.value),
            fixed(r.rebalance_seconds, 3),
            fixed(p.duration_range.low, 3),
            fixed(p.duration_range.mid, 3),
            fixed(p.duration_range.high, 3),
        ]);
        report::write(dir, &format!("{name}-run.csv"), &run.csv())?;
    } else if let Some(cost) = p.methods.iter().find(|c| c.method == Method::Atomic) {
        let mut atomic = Table::new(&["jobs", "bytes", "seconds", "estimate"]);
        atomic.push(vec![
            cost.jobs.to_string(),
            format!("{:.0}", p.bytes.value),
            fixed(r.rebalance_seconds, 3),
            fixed(cost.seconds, 3),
        ]);
        report::write(dir, &format!("{name}-atomic-run.csv"), &atomic.csv())?;
    }
    Ok(())
}

/// `ringslot-bench cluster-fit`: the per-key model's error on the runs local `cluster` runs
/// wrote, and a refit of its constants per server family.
#[derive(clap::Args, Debug)]
pub struct FitArgs {
    /// The `<name>-run.csv` files of local runs.
    #[arg(required = true)]
    runs: Vec<std::path::PathBuf>,
    /// The refit's range: its costs over and times this.
    #[arg(long, default_value_t = 1.35)]
    spread: f64,
}

/// One run read back, with its label.
struct Labelled {
    name: String,
    condition: String,
    run: Run,
}

fn read_runs(a: &FitArgs) -> Result<Vec<Labelled>> {
    let mut runs = Vec::new();
    for path in &a.runs {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
        for line in lines.filter(|l| !l.trim().is_empty()) {
            let f: Vec<&str> = line.split(',').collect();
            let get = |col: &str| -> Option<&str> {
                let i = header.iter().position(|h| *h == col)?;
                f.get(i).copied().filter(|v| !v.is_empty())
            };
            let num = |col: &str| -> Result<f64> {
                get(col)
                    .and_then(|v| v.trim().parse().ok())
                    .ok_or_else(|| anyhow!("{}: no {col} in {line:?}", path.display()))
            };
            let opt = |col: &str| get(col).and_then(|v| v.trim().parse::<f64>().ok());
            let counts = Counts {
                slots: num("slots")? as u64,
                masters: num("masters")? as u64,
                batches: num("batches")? as u64,
                keys: num("keys")? as u64,
                round_trips: num("round_trips")? as u64,
                config_writes: num("config_writes")? as u64,
                pairs: 0,
            };
            let counts = Counts {
                pairs: counts.slots * counts.masters * counts.masters,
                ..counts
            };
            runs.push(Labelled {
                name: path
                    .file_name()
                    .map(|n| n.to_string_lossy().trim_end_matches("-run.csv").to_string())
                    .unwrap_or_default(),
                condition: get("condition").unwrap_or("idle").to_string(),
                run: Run {
                    counts,
                    timing: ClusterTiming {
                        rtt: opt("rtt"),
                        rtt_spaced: opt("rtt_spaced"),
                        dump_per_key: opt("dump_per_key"),
                        server: Some(match get("server") {
                            Some("Valkey") => ServerKind::Valkey,
                            Some("Redis 8") => ServerKind::Redis8,
                            _ => ServerKind::Redis7,
                        }),
                    },
                    seconds: num("seconds")?,
                },
            });
        }
    }
    Ok(runs)
}

/// Prints each run's estimate under the shipped constants of its server family (the range,
/// the error of its middle, whether the real time fell inside), the median error over each
/// group of runs of the same name but its last `-N`, and a refit per server family (three
/// runs or more).
pub fn run_fit(a: &FitArgs) -> Result<()> {
    let runs = read_runs(a)?;
    let mut refits = Vec::new();
    for kind in [ServerKind::Redis7, ServerKind::Redis8, ServerKind::Valkey] {
        let of_kind: Vec<Run> = runs
            .iter()
            .filter(|l| l.run.timing.server == Some(kind))
            .map(|l| l.run)
            .collect();
        if let Some(m) = fit(&of_kind, a.spread) {
            refits.push((kind, m));
        }
    }
    let mut t = Table::new(&[
        "run",
        "server",
        "condition",
        "slots",
        "keys",
        "rtt ms (back to back / apart)",
        "DUMP µs",
        "real s",
        "estimate s (low-high)",
        "error",
        "inside",
        "refit s",
        "refit error",
    ]);
    let error = |e: f64, real: f64| (e - real) / real.max(1e-9) * 100.0;
    let mut groups: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for l in &runs {
        let r = &l.run;
        let e = PerKeyModel::of(&r.timing).estimate(&r.counts, &r.timing);
        let refit = refits
            .iter()
            .find(|(k, _)| Some(*k) == r.timing.server)
            .map(|(_, m)| m.estimate(&r.counts, &r.timing));
        let group = l
            .name
            .rsplit_once('-')
            .filter(|(_, n)| n.parse::<u32>().is_ok())
            .map_or(l.name.clone(), |(g, _)| g.to_string());
        groups
            .entry(group)
            .or_default()
            .push(error(e.mid, r.seconds));
        t.push(vec![
            l.name.clone(),
            r.timing.server.unwrap_or_default().label().to_string(),
            l.condition.clone(),
            r.counts.slots.to_string(),
            r.counts.keys.to_string(),
            format!(
                "{} / {}",
                r.timing.rtt.map_or("-".into(), |v| fixed(v * 1000.0, 3)),
                r.timing
                    .rtt_spaced
                    .map_or("-".into(), |v| fixed(v * 1000.0, 3))
            ),
            r.timing
                .dump_per_key
                .map_or("-".into(), |v| fixed(v * 1e6, 1)),
            fixed(r.seconds, 2),
            format!(
                "{} ({}-{})",
                fixed(e.mid, 2),
                fixed(e.low, 2),
                fixed(e.high, 2)
            ),
            format!("{:+.0}%", error(e.mid, r.seconds)),
            if (e.low..=e.high).contains(&r.seconds) {
                "yes".into()
            } else {
                "**no**".into()
            },
            refit.map_or("-".into(), |f| fixed(f.mid, 2)),
            refit.map_or("-".into(), |f| format!("{:+.0}%", error(f.mid, r.seconds))),
        ]);
    }
    println!("{}", t.markdown());
    let mut g = Table::new(&["runs", "count", "median error"]);
    for (name, errors) in &groups {
        g.push(vec![
            name.clone(),
            errors.len().to_string(),
            format!("{:+.0}%", crate::common::median(errors)),
        ]);
    }
    println!("{}", g.markdown());
    for (kind, m) in &refits {
        println!(
            "refit {}: per_pair {:.6} s, per_pair_rtt {:.3}, per_batch {:.6} s, key_factor {:.3}",
            kind.label(),
            m.per_pair,
            m.per_pair_rtt,
            m.per_batch,
            m.key_factor
        );
    }
    Ok(())
}

/// One real run for a fit: what was counted and measured, and the seconds it took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    pub counts: Counts,
    pub timing: ClusterTiming,
    pub seconds: f64,
}

/// Least squares of `seconds - round trips x extra - keys x KEY_FACTOR x dump ~ per_pair x
/// pairs + per_pair_rtt x pairs x rtt + per_batch x batches` over `runs`
/// ([`extra_round_trip`]; the 3 x 3 normal equations, by Gaussian elimination), with `spread`
/// for the range. `None` with fewer than 3 runs or runs that cannot tell the terms apart.
pub fn fit(runs: &[Run], spread: f64) -> Option<PerKeyModel> {
    if runs.len() < 3 {
        return None;
    }
    const N: usize = 3;
    let mut a = [[0.0f64; N + 1]; N];
    for r in runs {
        let extra = extra_round_trip(&r.timing);
        let dump = r.timing.dump_per_key.unwrap_or(DEFAULT_DUMP);
        let rtt = r.timing.rtt.unwrap_or(FITTED_RTT);
        let trips = (r.counts.slots * (r.counts.masters + 3) + 3 * r.counts.batches) as f64;
        let pairs = r.counts.pairs as f64;
        let x = [pairs, pairs * rtt, r.counts.batches as f64];
        let y = r.seconds - trips * extra - r.counts.keys as f64 * dump * KEY_FACTOR;
        for i in 0..N {
            for j in 0..N {
                a[i][j] += x[i] * x[j];
            }
            a[i][N] += x[i] * y;
        }
    }
    // Gaussian elimination with partial pivoting.
    for col in 0..N {
        let pivot = (col..N).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        a.swap(col, pivot);
        let p = a[col][col];
        if p.abs() < 1e-30 {
            return None;
        }
        let pivot_row = a[col];
        for (i, row) in a.iter_mut().enumerate() {
            if i != col {
                let f = row[col] / p;
                for (x, y) in row.iter_mut().zip(pivot_row.iter()).skip(col) {
                    *x -= f * y;
                }
            }
        }
    }
    let solve = |i: usize| a[i][N] / a[i][i];
    Some(PerKeyModel {
        per_pair: solve(0),
        per_pair_rtt: solve(1),
        per_batch: solve(2),
        key_factor: KEY_FACTOR,
        spread,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fit_recovers_the_constants_of_exact_runs() {
        let truth = PerKeyModel {
            per_pair: 0.00005,
            per_pair_rtt: 0.5,
            per_batch: 0.0003,
            key_factor: KEY_FACTOR,
            spread: 1.0,
        };
        let runs: Vec<Run> = [
            (4096u64, 4u64, 10u64, 0.0001),
            (8192, 6, 30, 0.0002),
            (5461, 6, 5, 0.0004),
            (2000, 3, 60, 0.00015),
            (3000, 5, 20, 0.00005),
        ]
        .iter()
        .map(|&(slots, masters, keys_a_slot, rtt)| {
            let counts = Counts::of(
                std::iter::repeat_n(keys_a_slot, slots as usize),
                masters,
                10,
            );
            let timing = ClusterTiming {
                rtt: Some(rtt),
                rtt_spaced: Some(rtt),
                dump_per_key: Some(0.000_003 * masters as f64),
                server: None,
            };
            Run {
                counts,
                timing,
                seconds: truth.estimate(&counts, &timing).mid,
            }
        })
        .collect();
        let got = fit(&runs, 1.0).unwrap();
        assert!((got.per_pair - truth.per_pair).abs() < 1e-9, "{got:?}");
        assert!(
            (got.per_pair_rtt - truth.per_pair_rtt).abs() < 1e-6,
            "{got:?}"
        );
        assert!((got.per_batch - truth.per_batch).abs() < 1e-9, "{got:?}");

        assert!(fit(&runs[..2], 1.0).is_none());
        assert!(fit(&runs[..2], 1.0).is_none());
    }
}
