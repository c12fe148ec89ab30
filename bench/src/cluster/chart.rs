//! The chart of a local cluster run: each scheme's moved keys over the ideal, and keys per
//! master before, after as planned and after for real.

use super::real::Outcome;
use crate::report::{self, Chart, Panel, Series};
use anyhow::Result;
use plotters::prelude::SeriesLabelPosition;
use ringslot_tool::predict::report::fraction;
use std::path::Path;

/// The chart: moved fraction over the ideal per scheme (1.0 is best; a scheme that moves
/// less than the ideal left a node short of its share), and keys per master before and after.
pub fn chart(dir: &Path, name: &str, outcome: &Outcome) -> Result<()> {
    let label = outcome.change.label();
    let p = &outcome.prediction;
    let real = outcome.real.as_ref();
    let over_ideal = |f: f64| if p.ideal > 0.0 { f / p.ideal } else { 0.0 };
    let mut schemes = vec!["slots".to_string()];
    let mut predicted = vec![(0.0, over_ideal(fraction(p.keys_moved, p.keys)))];
    for (k, r) in p.rings.iter().enumerate() {
        let sums = &r.sums;
        schemes.push(r.flavour.clone());
        predicted.push((
            (k + 1) as f64,
            over_ideal(fraction(sums.ring_moved, sums.members)),
        ));
    }
    if let Some(sums) = p.rings.first().map(|r| &r.sums) {
        schemes.push("modulo".into());
        predicted.push((
            (schemes.len() - 1) as f64,
            over_ideal(fraction(sums.modulo_moved, sums.members)),
        ));
    }
    let last = (schemes.len() - 1) as f64;
    let mut left = vec![
        Series::reference("1.0 = the ideal share moved", 1.0, -0.3, last + 0.3),
        Series {
            markers_only: true,
            ..Series::line("predicted".into(), predicted, 0)
        },
    ];
    if let Some(r) = real {
        left.push(Series {
            markers_only: true,
            dashed: true,
            ..Series::line(
                "real (slots)".into(),
                vec![(0.15, over_ideal(fraction(r.moved, p.keys)))],
                1,
            )
        });
    }
    let all: Vec<String> = p.masters.iter().map(|m| m.address.clone()).collect();
    // Before, after as planned and after for real side by side, so that none hides another.
    let points = |shift: f64, f: &dyn Fn(usize) -> f64| -> Vec<(f64, f64)> {
        (0..all.len()).map(|i| (i as f64 + shift, f(i))).collect()
    };
    let mut right = vec![
        Series {
            markers_only: true,
            ..Series::line(
                "before".into(),
                points(-0.15, &|i| p.masters[i].keys_before as f64),
                2,
            )
        },
        Series {
            markers_only: true,
            dashed: true,
            ..Series::line(
                "after (plan)".into(),
                points(0.0, &|i| p.masters[i].keys_after as f64),
                3,
            )
        },
    ];
    if let Some(r) = real {
        right.push(Series {
            markers_only: true,
            ..Series::line(
                "after (real)".into(),
                points(0.15, &|i| {
                    r.keys_after.get(&all[i]).copied().unwrap_or(0) as f64
                }),
                4,
            )
        });
    }
    let title = format!("{} live keys: {label}", p.keys);
    report::svg_panels(
        &dir.join(format!("{name}.svg")),
        &title,
        vec![
            Panel {
                chart: Chart {
                    title: "Keys moved over the ideal (1.0 is best)",
                    x_label: "scheme",
                    y_label: "moved fraction / ideal fraction",
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
    )
}
