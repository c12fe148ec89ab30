//! The report of a cluster run: the table, the CSV and the chart.

use super::{MasterChange, Outcome};
use crate::report::{self, fixed, Chart, Panel, Series, Table};
use anyhow::Result;
use plotters::prelude::SeriesLabelPosition;
use std::collections::HashMap;
use std::path::Path;

pub(super) fn fraction(moved: u64, keys: u64) -> f64 {
    if keys == 0 {
        0.0
    } else {
        moved as f64 / keys as f64
    }
}

/// Writes the Markdown, CSV and SVG of `outcome` under `dir/name.*`; returns the Markdown.
pub fn write_outputs(dir: &Path, name: &str, outcome: &Outcome) -> Result<String> {
    let p = &outcome.prediction;
    let real = outcome.real.as_ref();
    let change = outcome.change.args().join(" ");
    let mut t = Table::new(&[
        "scheme",
        "keys",
        "moved",
        "moved between old masters",
        "fraction",
        "ideal",
        "real moved",
        "real fraction",
    ]);
    let real_cell = |r: Option<u64>| r.map_or("-".to_string(), |n| n.to_string());
    let real_fraction =
        |r: Option<u64>| r.map_or("-".to_string(), |n| fixed(fraction(n, p.keys), 4));
    t.push(vec![
        "slots (redis-cli --cluster rebalance)".into(),
        p.keys.to_string(),
        p.slots_moved.to_string(),
        p.slots_between.to_string(),
        fixed(fraction(p.slots_moved, p.keys), 4),
        fixed(p.ideal, 4),
        real_cell(real.map(|r| r.moved)),
        real_fraction(real.map(|r| r.moved)),
    ]);
    for (flavour, sums) in &p.rings {
        t.push(vec![
            format!("ring ({flavour})"),
            sums.members.to_string(),
            sums.ring_moved.to_string(),
            sums.ring_between.to_string(),
            fixed(fraction(sums.ring_moved, sums.members), 4),
            fixed(p.ideal, 4),
            "-".into(),
            "-".into(),
        ]);
    }
    if let Some((_, sums)) = p.rings.first() {
        t.push(vec![
            "modulo (hash mod N)".into(),
            sums.members.to_string(),
            sums.modulo_moved.to_string(),
            sums.modulo_between.to_string(),
            fixed(fraction(sums.modulo_moved, sums.members), 4),
            fixed(p.ideal, 4),
            "-".into(),
            "-".into(),
        ]);
    }
    // Keys per master before and after, under the slot scheme.
    let tally = |owners: &[Option<String>]| -> HashMap<String, (usize, u64)> {
        let mut t: HashMap<String, (usize, u64)> = HashMap::new();
        for (slot, owner) in owners.iter().enumerate() {
            if let Some(o) = owner {
                let e = t.entry(o.clone()).or_default();
                e.0 += 1;
                e.1 += p.counts[slot];
            }
        }
        t
    };
    let before = tally(&p.owner_before);
    let planned = tally(&p.owner_after);
    let really = real.map(|r| tally(&r.owner_after));
    let mut all: Vec<String> = p.masters.iter().map(|(a, _)| a.clone()).collect();
    if let MasterChange::Add { node, .. } = &outcome.change {
        all.push(node.clone());
    }
    let mut per = Table::new(&[
        "master",
        "slots before",
        "keys before",
        "slots after (plan)",
        "keys after (plan)",
        "keys after (real)",
    ]);
    let get = |t: &HashMap<String, (usize, u64)>, a: &str| t.get(a).copied().unwrap_or((0, 0));
    for address in &all {
        let (sb, kb) = get(&before, address);
        let (sa, ka) = get(&planned, address);
        per.push(vec![
            address.clone(),
            sb.to_string(),
            kb.to_string(),
            sa.to_string(),
            ka.to_string(),
            really
                .as_ref()
                .map_or("-".to_string(), |t| get(t, address).1.to_string()),
        ]);
    }
    let entry = &p.entry;
    let slots_planned: usize = p.plan.iter().map(|m| m.slots.len()).sum();
    let mut plan_lines = String::new();
    for m in &p.plan {
        plan_lines.push_str(&format!(
            "- {} slots from {} to {}\n",
            m.slots.len(),
            m.from.as_deref().unwrap_or("(unassigned)"),
            m.to.as_deref().unwrap_or("(unassigned)")
        ));
    }
    // The slot scheme key by key: each mirror copy's RING.MOVES evaluated the same plan.
    let per_key: Vec<String> = p
        .rings
        .iter()
        .map(|(_, sums)| sums.slots_moved.to_string())
        .collect();
    let agree = p
        .rings
        .iter()
        .all(|(_, sums)| sums.slots_moved == p.slots_moved);
    let mut check = format!(
        "The slot scheme evaluated key by key on the masters (`RING.MOVES ... SLOTS` on each \
         mirror copy): {} keys moved; {} the sum of the moved slots' counts.\n",
        per_key.join(", "),
        if agree {
            "equal to"
        } else {
            "**not equal to**"
        }
    );
    for (flavour, sums) in &p.rings {
        if sums.members != p.keys {
            check.push_str(&format!(
                "\n**The {flavour} pass evaluated {} keys where the masters counted {}**: keys \
                 were written or deleted during the run, or the user may not read some.\n",
                sums.members, p.keys
            ));
        }
    }
    let mut md = format!(
        "# ringslot on a Redis Cluster: {change}\n\n\
         {} masters, {} keys. The plan (`RING.PLAN` on a mirror of the live cluster, made on \
         {entry}: what `redis-cli --cluster rebalance {entry}` does) moves {slots_planned} \
         slots:\n\n{plan_lines}\n{}\n{check}\n## Keys per master (slot \
         scheme)\n\n{}",
        p.masters.len(),
        p.keys,
        t.markdown(),
        per.markdown()
    );
    let mut times = Table::new(&["step", "seconds"]);
    for (step, secs) in &p.steps {
        times.push(vec![format!("- {step}"), fixed(*secs, 2)]);
    }
    times.push(vec![
        "prediction (topology, counts, plan, every key under every ring)".into(),
        fixed(p.seconds, 2),
    ]);
    if let Some(r) = real {
        times.push(vec![
            "real change (add-node or drain, rebalance, del-node, convergence)".into(),
            fixed(r.seconds, 2),
        ]);
        times.push(vec![
            "prediction / real".into(),
            fixed(p.seconds / r.seconds.max(1e-9), 3),
        ]);
        let same_owners = r.owner_after == p.owner_after;
        md.push_str(&format!(
            "\n## Predicted against real\n\n\
             - keys the slot scheme moves: predicted {}, real {} (per-slot counts before, slot \
             owners after){}\n\
             - keys moved between old masters: predicted {}, real {}\n\
             - slot owners after the real rebalance {} the plan's\n\
             - redis-cli printed: {}\n",
            p.slots_moved,
            r.moved,
            r.scan_moved.map_or(String::new(), |n| format!(
                "; a SCAN of every master before and after: {n}"
            )),
            p.slots_between,
            r.between,
            if same_owners {
                "equal"
            } else {
                "**differ from**"
            },
            if r.moves_printed.is_empty() {
                "nothing moved".to_string()
            } else {
                r.moves_printed.join("; ")
            }
        ));
    }
    md.push_str(&format!("\n## Time\n\n{}", times.markdown()));
    report::write(dir, &format!("{name}.md"), &md)?;
    report::write(dir, &format!("{name}.csv"), &t.csv())?;
    // The chart: moved fraction per scheme against the ideal, and keys per master.
    let mut schemes = vec!["slots".to_string()];
    let mut predicted = vec![(0.0, fraction(p.slots_moved, p.keys))];
    for (k, (flavour, sums)) in p.rings.iter().enumerate() {
        schemes.push(flavour.clone());
        predicted.push(((k + 1) as f64, fraction(sums.ring_moved, sums.members)));
    }
    if let Some((_, sums)) = p.rings.first() {
        schemes.push("modulo".into());
        predicted.push((
            (schemes.len() - 1) as f64,
            fraction(sums.modulo_moved, sums.members),
        ));
    }
    let last = (schemes.len() - 1) as f64;
    let mut left = vec![
        Series {
            markers_only: true,
            ..Series::line("predicted".into(), predicted, 0)
        },
        Series::reference("ideal", p.ideal, 0.0, last),
    ];
    if let Some(r) = real {
        left.push(Series {
            markers_only: true,
            dashed: true,
            ..Series::line(
                "real (slots)".into(),
                vec![(0.0, fraction(r.moved, p.keys))],
                1,
            )
        });
    }
    let point = |t: &HashMap<String, (usize, u64)>| -> Vec<(f64, f64)> {
        all.iter()
            .enumerate()
            .map(|(i, a)| (i as f64, get(t, a).1 as f64))
            .collect()
    };
    let mut right = vec![
        Series {
            markers_only: true,
            ..Series::line("before".into(), point(&before), 2)
        },
        Series {
            markers_only: true,
            dashed: true,
            ..Series::line("after (plan)".into(), point(&planned), 3)
        },
    ];
    if let Some(t) = &really {
        right.push(Series {
            markers_only: true,
            ..Series::line("after (real)".into(), point(t), 4)
        });
    }
    let title = format!("{} masters, {} keys: {change}", p.masters.len(), p.keys);
    report::svg_panels(
        &dir.join(format!("{name}.svg")),
        &title,
        vec![
            Panel {
                chart: Chart {
                    title: "Moved fraction per scheme",
                    x_label: "scheme",
                    y_label: "keys moved / keys",
                    x_log: false,
                    y_log: false,
                    x_names: schemes,
                    legend: SeriesLabelPosition::UpperLeft,
                },
                series: left,
                width: 1,
            },
            Panel {
                chart: Chart {
                    title: "Keys per master (slot scheme)",
                    x_label: "master",
                    y_label: "keys",
                    x_log: false,
                    y_log: false,
                    x_names: all.clone(),
                    legend: SeriesLabelPosition::LowerRight,
                },
                series: right,
                width: 1,
            },
        ],
    )?;
    Ok(md)
}
