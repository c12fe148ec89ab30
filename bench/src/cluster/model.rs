//! The duration models' calibration: the run each local `cluster` run writes for them
//! (`<name>-run.csv` per key, `<name>-atomic-run.csv` atomic), and `cluster-fit`, which fits
//! the per-key model ([`ringslot_tool::predict::duration`]) to such runs and prints each run's
//! error and whether it fell inside the range the report gave.

use crate::report::{self, fixed, Table};
use anyhow::{anyhow, Result};
use ringslot_tool::predict::duration::{fit, ClusterTiming, Counts, PerKeyModel, Run, ServerKind};
use ringslot_tool::predict::method::Method;
use ringslot_tool::predict::Outcome;
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
