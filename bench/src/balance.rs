//! `balance`: how evenly each scheme spreads the hash space over N equal nodes, as the number
//! of virtual nodes grows, measured on the server with `RING.CREATE`, `RING.ADD`, `RING.INFO`
//! (peak-to-mean) and `RING.NODES` (every node's exact share).
//!
//! One set of node names is one draw of a random ring, so every configuration is measured
//! over several name sets and reported as their mean with the lowest and highest draw: set
//! `k` (from 0) names its N nodes with the numbers `kN+1 ..= kN+N` of the name template.

use crate::common::{self, Global, Target};
use crate::report::{self, fixed, Chart, Panel, Series, Table};
use crate::scenario::node_name;
use crate::scratch::Scratch;
use crate::server::{field, float, items, query};
use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use ringslot_engine::{Flavour, Scheme};
use ringslot_harness::redis::Connection;
use ringslot_tool::reply::ring::RingInfo;
use std::path::Path;

/// The ring key the balance runs use (re-created for every configuration).
pub const BALANCE_KEY: &str = "ringslot-bench:balance";

/// One configuration's balance over the name sets.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub nodes: usize,
    /// `native`, `ketama`, `groupcache` or `slot table`.
    pub scheme: String,
    /// Virtual nodes per node (ketama: its fixed 160; the slot table: none).
    pub vnodes: Option<u32>,
    pub points: u64,
    /// Largest share / mean share, as `RING.INFO` reports it: the mean over the name sets,
    /// and the lowest and highest set.
    pub peak_to_mean: f64,
    pub peak_to_mean_low: f64,
    pub peak_to_mean_high: f64,
    /// Smallest, largest share and their standard deviation, each divided by the mean share
    /// `1/N` (so 1.0 is a perfectly fair node), averaged over the name sets.
    pub min: f64,
    pub max: f64,
    pub stddev: f64,
    /// How many name sets were measured.
    pub sets: usize,
    /// For a sampled scheme, what a perfectly balanced scheme reads over as many members
    /// (`RING.BALANCE`'s `balanced_peak_to_mean`, mean over the name sets); NaN otherwise.
    pub balanced: f64,
}

/// Min, max and population standard deviation of `shares`, each divided by their mean.
pub fn spread(shares: &[f64]) -> (f64, f64, f64) {
    let n = shares.len() as f64;
    let mean = shares.iter().sum::<f64>() / n;
    let var = shares.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n;
    let min = shares.iter().copied().fold(f64::MAX, f64::min);
    let max = shares.iter().copied().fold(f64::MIN, f64::max);
    (min / mean, max / mean, var.sqrt() / mean)
}

/// One draw: peak-to-mean, then min, max and standard deviation of the shares over the mean.
type Draw = (f64, f64, f64, f64);

/// The row of a configuration from its draws (one per name set).
fn summarise(nodes: usize, scheme: &str, vnodes: Option<u32>, points: u64, draws: &[Draw]) -> Row {
    let n = draws.len().max(1) as f64;
    let mean = |f: fn(&Draw) -> f64| draws.iter().map(f).sum::<f64>() / n;
    Row {
        nodes,
        scheme: scheme.to_string(),
        vnodes,
        points,
        peak_to_mean: mean(|d| d.0),
        peak_to_mean_low: draws.iter().map(|d| d.0).fold(f64::MAX, f64::min),
        peak_to_mean_high: draws.iter().map(|d| d.0).fold(f64::MIN, f64::max),
        min: mean(|d| d.1),
        max: mean(|d| d.2),
        stddev: mean(|d| d.3),
        sets: draws.len(),
        balanced: f64::NAN,
    }
}

/// `ringslot-bench balance`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    node_names: common::NodeNames,
    /// Node counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10,100")]
    nodes: Vec<usize>,
    /// Virtual nodes per node, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,5,10,20,50,100,160,200,500,1000"
    )]
    vnodes: Vec<u32>,
    /// Flavours, comma-separated (ketama has fixed points: one row per node count).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "native,groupcache,ketama,native-fnv",
        value_parser = common::flavour
    )]
    flavours: Vec<Flavour>,
    /// Other schemes (comma-separated: jump, rendezvous, maglev, multiprobe, bounded, or all;
    /// `none` for none), from RING.BALANCE on a native ring of 160 points with the same names.
    #[arg(long, value_delimiter = ',', default_value = "none", value_parser = common::other_schemes)]
    schemes: Vec<Vec<Scheme>>,
    /// Sample members of RING.BALANCE for the sampled schemes (jump, rendezvous, multi-probe,
    /// bounded loads): at 100 nodes, 10000 members read about 1.27 under perfect balance,
    /// 1M about 1.03.
    #[arg(long, default_value_t = 1_000_000)]
    scheme_sample: u64,
    /// Sets of node names each configuration is measured over (set k uses the node numbers
    /// kN+1..kN+N of --names); the table and chart give their mean, lowest and highest.
    #[arg(long, default_value_t = 8)]
    name_sets: usize,
    /// Stem of the output files.
    #[arg(long, default_value = "balance")]
    name: String,
}

/// Runs `balance` on `--url` or a server of its own and writes the table, CSV and chart.
pub fn run(g: &Global, a: &Args) -> Result<()> {
    if a.nodes.is_empty() || a.nodes.contains(&0) {
        bail!("--nodes needs node counts >= 1");
    }
    if a.name_sets == 0 {
        bail!("--name-sets needs at least 1");
    }
    let schemes = common::schemes_of(&a.schemes);
    let opts = Options {
        node_counts: &a.nodes,
        vnodes: &a.vnodes,
        flavours: &a.flavours,
        template: &a.node_names.names,
        sets: a.name_sets,
        schemes: &schemes,
        scheme_sample: a.scheme_sample,
    };
    let mut target = Target::open(g, false)?;
    let rows = run_balance(&mut target.con, &target.scratch, &opts)?;
    let counts: Vec<String> = a.nodes.iter().map(usize::to_string).collect();
    // The node names change the native ring's points: say which ones were used.
    let title = format!(
        "Balance: peak-to-mean share, {} equal nodes named {}",
        counts.join(" and "),
        a.node_names.names.replace("{}", "N")
    );
    let md = write_outputs(&g.out, &a.name, &rows, &title)?;
    println!("{md}");
    report::announce();
    Ok(())
}

/// What a balance run measures.
pub struct Options<'a> {
    /// Node counts.
    pub node_counts: &'a [usize],
    /// VNODES of every flavour but ketama.
    pub vnodes: &'a [u32],
    /// Ring flavours.
    pub flavours: &'a [Flavour],
    /// The node-name template (`{}`: the node's number).
    pub template: &'a str,
    /// Name sets per configuration.
    pub sets: usize,
    /// Other schemes, from `RING.BALANCE`.
    pub schemes: &'a [Scheme],
    /// Its `SAMPLE` for them.
    pub scheme_sample: u64,
}

/// Measures every flavour at every VNODES (ketama: once, its counts are fixed) for every node
/// count over the name sets, plus the slot table once per node count, on rings `scratch` makes.
pub fn run_balance(con: &mut Connection, scratch: &Scratch, opts: &Options) -> Result<Vec<Row>> {
    let Options {
        node_counts,
        vnodes,
        flavours,
        template,
        sets,
        schemes,
        scheme_sample,
    } = *opts;
    let per_count: usize = flavours
        .iter()
        .map(|&f| {
            if f == Flavour::Ketama {
                1
            } else {
                vnodes.len()
            }
        })
        .sum();
    let progress = ProgressBar::new((per_count * node_counts.len() * sets) as u64);
    progress.set_style(
        ProgressStyle::with_template("{msg:>24} [{bar:40}] {pos}/{len} {elapsed}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    progress.set_message("measuring rings");
    let mut rows = Vec::new();
    for &n in node_counts {
        // The slot table depends on the node names only: read it with the first configuration.
        let mut slot_draws: Vec<Draw> = Vec::new();
        let mut first_config = true;
        for &flavour in flavours {
            let configs: Vec<Option<u32>> = if flavour == Flavour::Ketama {
                vec![None]
            } else {
                vnodes.iter().map(|&v| Some(v)).collect()
            };
            for v in configs {
                let mut draws = Vec::new();
                let (mut scheme, mut points, mut shown_vnodes) = (flavour.name().to_string(), 0, v);
                for set in 0..sets {
                    let names: Vec<String> =
                        (1..=n).map(|i| node_name(template, set * n + i)).collect();
                    let mut create = Vec::new();
                    if flavour != Flavour::Native {
                        create.extend(["COMPAT".to_string(), flavour.name().to_string()]);
                    }
                    if let Some(v) = v {
                        create.extend(["VNODES".to_string(), v.to_string()]);
                    }
                    scratch.ring(con, BALANCE_KEY, &create)?;
                    let mut add = vec!["RING.ADD".to_string(), BALANCE_KEY.to_string()];
                    add.extend(names.iter().cloned());
                    query(con, &add)?;
                    let info = RingInfo::read(&query(con, &["RING.INFO", BALANCE_KEY])?)?;
                    let nodes = query(con, &["RING.NODES", BALANCE_KEY])?;
                    let nodes = items(&nodes)?;
                    if nodes.len() != n {
                        bail!("RING.NODES listed {} nodes, {n} were added", nodes.len());
                    }
                    let shares = |name: &str| {
                        nodes
                            .iter()
                            .map(|m| float(field(m, name)?))
                            .collect::<Result<Vec<f64>, _>>()
                    };
                    let (min, max, stddev) = spread(&shares("ring_share")?);
                    draws.push((info.ring_peak_to_mean, min, max, stddev));
                    scheme = info.compat.clone();
                    points = info.points;
                    shown_vnodes = Some(v.unwrap_or(info.vnodes as u32));
                    if first_config {
                        let (min, max, stddev) = spread(&shares("slot_share")?);
                        slot_draws.push((info.slot_peak_to_mean, min, max, stddev));
                    }
                    progress.inc(1);
                }
                first_config = false;
                rows.push(summarise(n, &scheme, shown_vnodes, points, &draws));
            }
        }
        if !slot_draws.is_empty() {
            rows.push(summarise(n, "slot table", None, 16384, &slot_draws));
        }
        // Other schemes on the same names: RING.BALANCE of a native ring of 160 points (its
        // nodes and weights; bounded loads over its points), over `scheme_sample` members.
        let mut scheme_draws: Vec<Vec<Draw>> = vec![Vec::new(); schemes.len()];
        let mut balanced: Vec<Vec<f64>> = vec![Vec::new(); schemes.len()];
        for set in 0..if schemes.is_empty() { 0 } else { sets } {
            let names: Vec<String> = (1..=n).map(|i| node_name(template, set * n + i)).collect();
            scratch.ring(con, BALANCE_KEY, &["VNODES".to_string(), "160".to_string()])?;
            let mut add = vec!["RING.ADD".to_string(), BALANCE_KEY.to_string()];
            add.extend(names.iter().cloned());
            query(con, &add)?;
            let sample = scheme_sample.to_string();
            let reply = query(con, &["RING.BALANCE", BALANCE_KEY, "SAMPLE", &sample])?;
            for ((s, draws), perfect) in schemes
                .iter()
                .zip(scheme_draws.iter_mut())
                .zip(balanced.iter_mut())
            {
                let mine = field(&reply, s.name())?;
                let p2m = float(field(mine, "peak_to_mean")?)?;
                draws.push((p2m, f64::NAN, f64::NAN, f64::NAN));
                if let Ok(b) = field(mine, "balanced_peak_to_mean").and_then(float) {
                    perfect.push(b);
                }
            }
        }
        for ((s, draws), perfect) in schemes.iter().zip(&scheme_draws).zip(&balanced) {
            let mut row = summarise(n, s.name(), None, 0, draws);
            if !perfect.is_empty() {
                row.balanced = perfect.iter().sum::<f64>() / perfect.len() as f64;
            }
            rows.push(row);
        }
    }
    scratch.delete(con, BALANCE_KEY)?;
    progress.finish_and_clear();
    Ok(rows)
}

/// `x` to 4 decimals, `-` when it was not measured (NaN: the other schemes' rows have their
/// peak-to-mean only).
fn shown(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        fixed(x, 4)
    }
}

/// The balance table: one row per node count, scheme and VNODES.
pub fn table(rows: &[Row]) -> Table {
    let mut t = Table::new(&[
        "nodes",
        "scheme",
        "vnodes",
        "points",
        "peak_to_mean",
        "lowest",
        "highest",
        "min_share/mean",
        "max_share/mean",
        "stddev/mean",
        "name_sets",
        "perfect_at_sample",
    ]);
    for r in rows {
        t.push(vec![
            r.nodes.to_string(),
            r.scheme.clone(),
            r.vnodes.map_or("-".into(), |v| v.to_string()),
            r.points.to_string(),
            fixed(r.peak_to_mean, 4),
            fixed(r.peak_to_mean_low, 4),
            fixed(r.peak_to_mean_high, 4),
            shown(r.min),
            shown(r.max),
            shown(r.stddev),
            r.sets.to_string(),
            shown(r.balanced),
        ]);
    }
    t
}

/// Writes `name.md`, `name.csv` and `name.svg` (mean peak-to-mean against VNODES, log-log,
/// with a bar from the lowest to the highest name set) into `dir`; returns the Markdown
/// printed on stdout.
pub fn write_outputs(dir: &Path, name: &str, rows: &[Row], title: &str) -> Result<String> {
    let t = table(rows);
    let md = format!("### {title}\n\n{}", t.markdown());
    report::write(dir, &format!("{name}.md"), &md)?;
    report::write(dir, &format!("{name}.csv"), &t.csv())?;
    let vmin = rows.iter().filter_map(|r| r.vnodes).min().unwrap_or(1) as f64;
    let vmax = rows.iter().filter_map(|r| r.vnodes).max().unwrap_or(1000) as f64;
    if vmin == vmax {
        scheme_chart(dir, name, rows, title)?;
        return Ok(md);
    }
    let mut series = Vec::new();
    let mut keys: Vec<(usize, String)> = Vec::new();
    for r in rows {
        let k = (r.nodes, r.scheme.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    // One colour per scheme; the first node count solid with dots, the others dashed with
    // triangles, so that 10 and 100 nodes of one scheme read as a pair.
    let mut schemes: Vec<&str> = Vec::new();
    let mut counts: Vec<usize> = Vec::new();
    for (n, scheme) in &keys {
        if !schemes.contains(&scheme.as_str()) {
            schemes.push(scheme);
        }
        if !counts.contains(n) {
            counts.push(*n);
        }
    }
    // Legend grouped by scheme.
    let by_scheme = |k: &(usize, String)| schemes.iter().position(|s| *s == k.1);
    let mut ordered = keys.clone();
    ordered.sort_by_key(|k| by_scheme(k));
    for (n, scheme) in &ordered {
        // The same colour for a scheme in every chart, whichever schemes it shows.
        let colour = report::scheme_colour(scheme);
        let dashed = counts.first() != Some(n);
        let mine: Vec<&Row> = rows
            .iter()
            .filter(|r| r.nodes == *n && r.scheme == *scheme)
            .collect();
        let flat = mine.iter().all(|r| r.vnodes.is_none()) && scheme != "ketama";
        let (points, errors, markers_only) = if flat {
            // Independent of VNODES: a flat line across the chart.
            let y = mine[0].peak_to_mean;
            (vec![(vmin, y), (vmax, y)], Vec::new(), false)
        } else {
            let x = |r: &Row| f64::from(r.vnodes.unwrap_or(1));
            let pts: Vec<(f64, f64)> = mine.iter().map(|r| (x(r), r.peak_to_mean)).collect();
            let errors = mine
                .iter()
                .map(|r| (r.peak_to_mean_low, r.peak_to_mean_high))
                .collect();
            let single = pts.len() == 1;
            (pts, errors, single)
        };
        let label = match scheme.as_str() {
            "native" => format!("ring (native), {n} nodes"),
            "ketama" => format!("ketama (fixed 160 points), {n} nodes"),
            "slot table" => format!("slot table, {n} nodes"),
            other => format!("{other}, {n} nodes"),
        };
        series.push(Series {
            label,
            points,
            colour: Some(colour),
            markers_only,
            dashed,
            errors,
        });
    }
    let sets = rows.first().map_or(1, |r| r.sets);
    let subtitle = format!("mean over {sets} sets of node names; bars: the lowest and highest set");
    let chart = Chart {
        title: &subtitle,
        x_label: "virtual nodes per node (log)",
        y_label: "peak-to-mean share (log; lower is better, 1.0 = perfect)",
        x_log: true,
        y_log: true,
        x_names: Vec::new(),
        legend: plotters::prelude::SeriesLabelPosition::UpperRight,
    };
    // The decision range on its own panel: 1.0 to 1.5 on a linear axis, from 50 virtual
    // nodes on (what a deployment uses), where the log axis squeezes it into its bottom.
    let zoom: Vec<Series> = series
        .iter()
        .filter_map(|s| {
            // A flat series (the slot table) spans the zoom's whole width.
            let flat = s.points.len() == 2
                && s.points.first().map(|p| p.1) == s.points.last().map(|p| p.1)
                && s.errors.is_empty();
            let points: Vec<(f64, f64)> = if flat {
                s.points
                    .first()
                    .map(|p| vec![(50.0f64.max(vmin), p.1), (vmax, p.1)])
                    .unwrap_or_default()
            } else {
                s.points.clone()
            };
            let keep: Vec<usize> = (0..points.len())
                .filter(|&i| points.get(i).is_some_and(|p| p.0 >= 50.0 && p.1 <= 1.5))
                .collect();
            (!keep.is_empty()).then(|| Series {
                label: s.label.clone(),
                points: keep
                    .iter()
                    .filter_map(|&i| points.get(i).copied())
                    .collect(),
                colour: s.colour,
                markers_only: s.markers_only || keep.len() == 1,
                dashed: s.dashed,
                errors: Vec::new(),
            })
        })
        .collect();
    let mut zoomed = Vec::new();
    if !zoom.is_empty() && vmax >= 50.0 {
        let mut zoom = zoom;
        let (lo, hi) = (50.0f64.max(vmin), vmax);
        zoom.insert(0, Series::reference("1.0 = perfect", 1.0, lo, hi));
        zoomed.push(Panel {
            chart: Chart {
                title: "from 50 points a node, 1.0-1.5 (linear; above 1.5 left out)",
                x_label: "virtual nodes per node (log)",
                y_label: "peak-to-mean share (lower is better)",
                x_log: true,
                y_log: false,
                x_names: Vec::new(),
                legend: plotters::prelude::SeriesLabelPosition::UpperRight,
            },
            series: zoom,
            width: 1,
        });
    }
    let panel = Panel {
        chart,
        series,
        width: 1,
    };
    let mut panels = vec![panel];
    panels.extend(zoomed);
    report::svg_panels(&dir.join(format!("{name}.svg")), title, panels)?;
    Ok(md)
}

/// The chart of a run at one VNODES (the schemes side by side): one x position per scheme,
/// each node count's mean peak-to-mean as a marker with its lowest and highest name set, and
/// beside the sampled schemes what a perfectly balanced scheme reads over as many members
/// (black), with 1.0 drawn; a linear axis over the data's range.
fn scheme_chart(dir: &Path, name: &str, rows: &[Row], title: &str) -> Result<()> {
    let mut schemes: Vec<String> = Vec::new();
    let mut counts: Vec<usize> = Vec::new();
    for r in rows {
        if !schemes.contains(&r.scheme) {
            schemes.push(r.scheme.clone());
        }
        if !counts.contains(&r.nodes) {
            counts.push(r.nodes);
        }
    }
    let x_of = |r: &Row| schemes.iter().position(|s| *s == r.scheme).unwrap_or(0) as f64;
    let mut series = Vec::new();
    for (i, &n) in counts.iter().enumerate() {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.nodes == n).collect();
        // Side by side: the first node count a little left, the next a little right.
        let shift = (i as f64 - (counts.len() as f64 - 1.0) / 2.0) * 0.15;
        series.push(Series {
            label: format!("{n} nodes"),
            points: mine
                .iter()
                .map(|r| (x_of(r) + shift, r.peak_to_mean))
                .collect(),
            // Node counts in neutral colours (grey, dark navy): the schemes are the x axis.
            colour: Some(if i == 0 { 7 } else { 14 }),
            markers_only: true,
            dashed: i > 0,
            errors: mine
                .iter()
                .map(|r| (r.peak_to_mean_low, r.peak_to_mean_high))
                .collect(),
        });
        let perfect: Vec<(f64, f64)> = mine
            .iter()
            .filter(|r| !r.balanced.is_nan())
            .map(|r| (x_of(r) + shift + 0.07, r.balanced))
            .collect();
        if !perfect.is_empty() {
            series.push(Series {
                label: format!("a perfect scheme at this sample, {n} nodes"),
                points: perfect,
                colour: None,
                markers_only: true,
                dashed: i > 0,
                errors: Vec::new(),
            });
        }
    }
    let last = schemes.len().saturating_sub(1) as f64;
    series.push(Series::reference(
        "1.0: perfectly even",
        1.0,
        -0.4,
        last + 0.4,
    ));
    let names: Vec<String> = schemes
        .iter()
        .map(|s| match s.as_str() {
            "native" => "ring (native)".to_string(),
            other => other.to_string(),
        })
        .collect();
    let sets = rows.first().map_or(1, |r| r.sets);
    let subtitle = format!(
        "lower is better; mean over {sets} sets of node names, bars: the lowest and highest set"
    );
    let chart = Chart {
        title: &subtitle,
        x_label: "scheme",
        y_label: "peak-to-mean share (1.0 = perfectly even)",
        x_log: false,
        y_log: false,
        x_names: names,
        legend: plotters::prelude::SeriesLabelPosition::UpperMiddle,
    };
    let panel = Panel {
        chart,
        series,
        width: 1,
    };
    report::svg_panels(&dir.join(format!("{name}.svg")), title, vec![panel])
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn spread_of_known_shares() {
        // Shares 0.1, 0.2, 0.3, 0.4: mean 0.25, population variance 0.0125.
        let (min, max, sd) = spread(&[0.1, 0.2, 0.3, 0.4]);
        assert!((min - 0.4).abs() < 1e-12);
        assert!((max - 1.6).abs() < 1e-12);
        assert!((sd - 0.0125f64.sqrt() / 0.25).abs() < 1e-12);
    }
}
