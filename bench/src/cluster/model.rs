//! The duration models' calibration: the run each local `cluster` run writes for them
//! (`<name>-run.csv` per key, `<name>-atomic-run.csv` atomic), and `cluster-fit`, which fits
//! the per-key model ([`ringslot_tool::predict::model`]) to such runs and prints each run's
//! error.

use crate::report::{self, fixed, Table};
use anyhow::Result;
use ringslot_tool::predict::method::Method;
use ringslot_tool::predict::model::{fit, FITTED};
use ringslot_tool::predict::Outcome;
use std::path::Path;

/// Writes the run of a local `outcome` for a fit of its method's duration model: slots,
/// masters, keys, bytes, seconds and the estimate (per key), or jobs, bytes, seconds and the
/// estimate (atomic). Nothing without a real change.
pub fn write_run(dir: &Path, name: &str, outcome: &Outcome) -> Result<()> {
    let (p, real) = (&outcome.prediction, outcome.real.as_ref());
    let slots_planned: usize = p.plan.iter().map(|m| m.slots.len()).sum();
    if let Some(r) = real {
        // The run for a fit of the duration model (`ringslot-bench cluster-fit`).
        let mut run = Table::new(&["slots", "masters", "keys", "bytes", "seconds", "estimate"]);
        run.push(vec![
            slots_planned.to_string(),
            p.masters.len().to_string(),
            p.keys_moved.to_string(),
            format!("{:.0}", p.bytes.value),
            fixed(r.rebalance_seconds, 3),
            fixed(p.duration, 3),
        ]);
        if r.method == Method::PerKey {
            report::write(dir, &format!("{name}-run.csv"), &run.csv())?;
        } else if let Some(cost) = p.methods.iter().find(|c| c.method == Method::Atomic) {
            // The run for a fit of the atomic model: jobs, DUMP bytes, seconds.
            let mut atomic = Table::new(&["jobs", "bytes", "seconds", "estimate"]);
            atomic.push(vec![
                cost.jobs.to_string(),
                format!("{:.0}", p.bytes.value),
                fixed(r.rebalance_seconds, 3),
                fixed(cost.seconds, 3),
            ]);
            report::write(dir, &format!("{name}-atomic-run.csv"), &atomic.csv())?;
        }
    }
    Ok(())
}

/// `ringslot-bench cluster-fit`: fits the model to the runs local `cluster` runs wrote.
#[derive(clap::Args, Debug)]
pub struct FitArgs {
    /// The `<name>-run.csv` files of local runs (`slots,masters,keys,bytes,seconds,estimate`).
    #[arg(required = true)]
    runs: Vec<std::path::PathBuf>,
}

/// Prints each run's error under [`FITTED`] and under a fit to the runs given (which needs
/// four runs or more).
pub fn run_fit(a: &FitArgs) -> anyhow::Result<()> {
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
            // slots, masters, keys, bytes, seconds, estimate
            runs.push((num(0)? as u64, num(2)? as u64, num(4)?));
        }
    }
    let fitted = fit(&runs);
    let mut t = Table::new(&[
        "slots",
        "keys",
        "real s",
        "estimate s",
        "error",
        "refit s",
        "refit error",
    ]);
    for &(slots, keys, secs) in &runs {
        let e = FITTED.seconds(slots, keys);
        let refit = fitted.map(|m| m.seconds(slots, keys));
        t.push(vec![
            slots.to_string(),
            keys.to_string(),
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
            "fit: per_slot {:.6} s, per_key {:.8} s",
            m.per_slot, m.per_key
        ),
        None => println!("fit: needs 2 runs or more that tell slots and keys apart"),
    }
    Ok(())
}
