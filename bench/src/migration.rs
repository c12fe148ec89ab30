//! `migration`: what each change of a scenario costs under every scheme, measured on the
//! server. Every step (a join, a removal, a re-weight) is evaluated with `RING.MOVES` (what-if)
//! and then applied with `RING.ADD` / `RING.DEL`.

use crate::report::{self, fixed, Chart, Panel, Series, Table};
use crate::scenario::{Scenario, Step};
use crate::scratch::Scratch;
use crate::server::{field, float, int, run};
use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use ringslot_harness::redis::{Connection, Value};
use std::path::Path;

/// Prefix of every ring key the benchmark creates (kept apart from the members).
pub const RING_KEY_PREFIX: &str = "ringslot-bench:ring:";

/// One ring configuration: a flavour and its `VNODES` (`None`: the flavour's default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingConf {
    pub flavour: String,
    pub vnodes: Option<u32>,
}

impl RingConf {
    /// `ring vnodes=160`, `ketama`, `groupcache vnodes=50`, ...
    pub fn label(&self) -> String {
        let name = if self.flavour == "native" {
            "ring"
        } else {
            &self.flavour
        };
        match self.vnodes {
            Some(v) => format!("{name} vnodes={v}"),
            None if self.flavour == "groupcache" => format!("{name} vnodes=50"),
            None => name.to_string(),
        }
    }

    /// The ring's key on the server.
    pub fn key(&self) -> String {
        match self.vnodes {
            Some(v) => format!("{RING_KEY_PREFIX}{}:{v}", self.flavour),
            None => format!("{RING_KEY_PREFIX}{}", self.flavour),
        }
    }

    /// The options of its `RING.CREATE key`: `[COMPAT f] [VNODES n]`.
    pub fn create_options(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.flavour != "native" {
            args.extend(["COMPAT".to_string(), self.flavour.clone()]);
        }
        if let Some(v) = self.vnodes {
            args.extend(["VNODES".to_string(), v.to_string()]);
        }
        args
    }
}

/// The members evaluated.
#[derive(Debug, Clone)]
pub enum Members {
    /// `count` real keys `prefix0 .. prefix{count-1}` written into the server and evaluated
    /// with `RING.MOVES ... KEYS prefix*`.
    Keys { prefix: String, count: u64 },
    /// Nothing written; `RING.MOVES ... SAMPLE count`.
    Sample { count: u64 },
}

impl Members {
    /// The `KEYS pattern` or `SAMPLE n` arguments of `RING.MOVES`.
    fn moves_args(&self) -> [String; 2] {
        match self {
            Members::Keys { prefix, .. } => ["KEYS".into(), format!("{}*", glob_escape(prefix))],
            Members::Sample { count, .. } => ["SAMPLE".into(), count.to_string()],
        }
    }
}

/// `s` with the glob metacharacters `*?[]\` escaped.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What a migration run measures.
pub struct Options {
    pub rings: Vec<RingConf>,
    pub members: Members,
    /// Commands per pipeline when writing keys and looking up owners.
    pub batch: usize,
    /// Evaluate the keys that already match the members' pattern, read-only (a `--url`
    /// server), instead of writing them.
    pub reuse_keys: bool,
    /// Schemes beyond the rings, the slot table and modulo (`jump`, `rendezvous`, `maglev`,
    /// `multiprobe`, `bounded`), evaluated with `RING.MOVES ... SCHEMES` on the native ring of
    /// 160 points (bounded loads runs over it; the others use its nodes and weights only).
    pub schemes: Vec<String>,
}

/// One scheme's cost of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub step: usize,
    pub change: String,
    pub nodes_before: usize,
    pub nodes_after: usize,
    pub scheme: String,
    pub members: u64,
    pub moved: u64,
    pub between_old: u64,
    pub fraction: f64,
    pub ideal: f64,
    /// Exact moved fraction of the hash space (rings), or slots moved / 16384 (slot table).
    pub space: Option<f64>,
}

/// The moves of one scheme in a `RING.MOVES` reply.
fn scheme_row(reply: &Value, name: &str) -> Result<(u64, u64, f64)> {
    let m = field(reply, name)?;
    Ok((
        int(field(m, "moved")?)? as u64,
        int(field(m, "between_old")?)? as u64,
        float(field(m, "fraction")?)?,
    ))
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg:>24} [{bar:40}] {pos}/{len} {elapsed}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// Runs `scenario` on the server behind `con`; returns one row per step and scheme (rings in
/// `opts.rings` order, then `slot table` and `modulo`, from the first ring's replies). Changes
/// no key it did not create (`scratch` makes and deletes the rest): with `reuse_keys` the keys
/// that match the members' prefix are evaluated as they are, read-only; otherwise none may
/// exist, and the members are written with a TTL, to be deleted with the rings when the run
/// ends, on every exit path.
pub fn run_scenario(
    con: &mut Connection,
    scratch: &Scratch,
    scenario: &Scenario,
    opts: &Options,
) -> Result<Vec<Row>> {
    if opts.rings.is_empty() {
        bail!("no ring configuration to measure");
    }
    // The slot table and modulo do not depend on VNODES; take them from a native ring.
    let base = opts
        .rings
        .iter()
        .position(|r| r.flavour == "native")
        .unwrap_or(0);
    for ring in &opts.rings {
        scratch.ring(con, &ring.key(), &ring.create_options())?;
        let mut add = vec!["RING.ADD".to_string(), ring.key()];
        add.extend(scenario.start.iter().cloned());
        run(con, &add)?;
    }
    if let Members::Keys { prefix, count } = &opts.members {
        let existing = members_matching(con, &opts.rings[base], &opts.members)?;
        if opts.reuse_keys {
            if existing == 0 {
                bail!("no key matches `{prefix}*`: nothing to evaluate with --reuse-keys");
            }
        } else {
            if existing > 0 {
                bail!(
                    "{existing} keys matching `{prefix}*` already exist on the server; the \
                     benchmark changes no key it did not create. Pick another --key-prefix, or \
                     pass --reuse-keys to evaluate those keys as they are (read-only)"
                );
            }
            let names: Vec<String> = (0..*count).map(|k| format!("{prefix}{k}")).collect();
            let progress = bar(*count, "writing keys");
            let made = scratch.write_new(con, &names, opts.batch)?;
            progress.finish_and_clear();
            let seen = members_matching(con, &opts.rings[base], &opts.members)?;
            if made != *count || seen != *count {
                bail!(
                    "{seen} keys match `{prefix}*` and {made} of {count} were written: another \
                     client writes keys of that prefix; pick another --key-prefix"
                );
            }
        }
    }
    measure(con, scenario, opts, base)
}

/// Members matching the pattern, as `RING.MOVES ... KEYS` counts them.
fn members_matching(con: &mut Connection, ring: &RingConf, members: &Members) -> Result<u64> {
    let [kw, pattern] = members.moves_args();
    let probe = "ringslot-bench:probe-node";
    let reply = run(
        con,
        &["RING.MOVES", &ring.key(), "ADD", probe, &kw, &pattern],
    )?;
    Ok(int(field(&reply, "members")?)? as u64)
}

fn measure(
    con: &mut Connection,
    scenario: &Scenario,
    opts: &Options,
    base: usize,
) -> Result<Vec<Row>> {
    let mut nodes = scenario.start.len();
    let mut rows = Vec::new();
    let progress = bar(
        (scenario.steps.len() * opts.rings.len()) as u64,
        "measuring steps",
    );
    for (step_no, step) in scenario.steps.iter().enumerate() {
        let step_no = step_no + 1;
        let nodes_before = nodes;
        nodes = match step {
            Step::Add { .. } => nodes + 1,
            Step::Del { .. } => nodes - 1,
            Step::Weight { .. } => nodes,
        };
        let row = |scheme: String, reply: &Value, moves: &str, space: Option<f64>| -> Result<Row> {
            let members = int(field(reply, "members")?)? as u64;
            let (moved, between_old, fraction) = scheme_row(reply, moves)?;
            Ok(Row {
                step: step_no,
                change: step.describe(),
                nodes_before,
                nodes_after: nodes,
                scheme,
                members,
                moved,
                between_old,
                fraction,
                ideal: float(field(reply, "ideal")?)?,
                space,
            })
        };
        // The change as RING.MOVES takes it: a join and a re-weight are both `ADD node WEIGHT
        // w`, as the RING.ADD that makes them.
        let change: Vec<String> = match step {
            Step::Add { node, weight } | Step::Weight { node, weight } => vec![
                "ADD".into(),
                node.clone(),
                "WEIGHT".into(),
                weight.to_string(),
            ],
            Step::Del { node } => vec!["DEL".into(), node.clone()],
        };
        let mut extra = Vec::new();
        let scheme_ring = opts
            .rings
            .iter()
            .position(|r| r.flavour == "native" && r.vnodes == Some(160))
            .unwrap_or(base);
        for (i, ring) in opts.rings.iter().enumerate() {
            if i == scheme_ring && !opts.schemes.is_empty() {
                let mut args = vec!["RING.MOVES".to_string(), ring.key()];
                args.extend(change.iter().cloned());
                args.extend(opts.members.moves_args());
                args.push("SCHEMES".into());
                args.extend(opts.schemes.iter().cloned());
                let reply = run(con, &args)?;
                let factor = run(con, &["CONFIG", "GET", "ringslot.balance-factor"])?;
                let factor = crate::server::items(&factor)?
                    .get(1)
                    .and_then(crate::server::text)
                    .unwrap_or_else(|| "?".into());
                for s in &opts.schemes {
                    let space = field(field(&reply, s)?, "space")
                        .ok()
                        .map(float)
                        .transpose()?;
                    let label = match s.as_str() {
                        "bounded" => format!("bounded {factor}% over {}", ring.label()),
                        other => other.to_string(),
                    };
                    extra.push(row(label, &reply, s, space)?);
                }
            }
            let mut args = vec!["RING.MOVES".to_string(), ring.key()];
            args.extend(change.iter().cloned());
            args.extend(opts.members.moves_args());
            let reply = run(con, &args)?;
            let space = float(field(field(&reply, "ring")?, "space")?)?;
            rows.push(row(ring.label(), &reply, "ring", Some(space))?);
            // The slot table and modulo do not depend on the ring's flavour or VNODES.
            if i == base {
                let slots_moved = int(field(field(&reply, "slots")?, "slots_moved")?)?;
                let space = slots_moved as f64 / 16384.0;
                extra.push(row("slot table".into(), &reply, "slots", Some(space))?);
                extra.push(row("modulo".into(), &reply, "modulo", None)?);
            }
            apply(con, &ring.key(), step)?;
            progress.inc(1);
        }
        rows.extend(extra);
    }
    progress.finish_and_clear();
    Ok(rows)
}

/// Applies a step to the ring at `key` and checks the reply.
fn apply(con: &mut Connection, key: &str, step: &Step) -> Result<()> {
    let (args, want): (Vec<String>, i64) = match step {
        // RING.ADD answers how many nodes are new: 1 for a join, 0 for a re-weight.
        Step::Add { node, weight } | Step::Weight { node, weight } => (
            vec![
                "RING.ADD".into(),
                key.into(),
                "WEIGHT".into(),
                weight.to_string(),
                node.clone(),
            ],
            i64::from(matches!(step, Step::Add { .. })),
        ),
        Step::Del { node } => (vec!["RING.DEL".into(), key.into(), node.clone()], 1),
    };
    let got = int(&run(con, &args)?)?;
    if got != want {
        bail!("`{}` replied {got}, expected {want}", args.join(" "));
    }
    Ok(())
}

/// The per-step table (one row per step and scheme).
pub fn table(rows: &[Row]) -> Table {
    let mut t = Table::new(&[
        "step",
        "change",
        "nodes",
        "scheme",
        "members",
        "moved",
        "between_old",
        "fraction",
        "ideal",
        "fraction/ideal",
        "hash_space_fraction",
    ]);
    for r in rows {
        t.push(vec![
            r.step.to_string(),
            r.change.clone(),
            format!("{}->{}", r.nodes_before, r.nodes_after),
            r.scheme.clone(),
            r.members.to_string(),
            r.moved.to_string(),
            r.between_old.to_string(),
            fixed(r.fraction, 4),
            fixed(r.ideal, 4),
            if r.ideal > 0.0 {
                fixed(r.fraction / r.ideal, 2)
            } else {
                "-".into()
            },
            r.space.map_or("-".into(), |s| fixed(s, 4)),
        ]);
    }
    t
}

/// One scheme's figures over a whole scenario.
struct Totals {
    /// Members moved, summed over the steps.
    moved: u64,
    /// Members a perfect scheme would have moved, summed over the steps.
    ideal: f64,
    /// Members moved between two surviving nodes, summed over the steps.
    between: u64,
    /// Mean and largest `|moved fraction / ideal fraction - 1|` over the steps that should
    /// move something: how far the scheme strays from the ideal, either way (moving fewer
    /// members than the ideal means the new node got less than its share: imbalance, not a
    /// saving).
    mean_off: f64,
    worst_off: f64,
}

impl Totals {
    fn of(rows: &[&Row]) -> Totals {
        let off: Vec<f64> = rows
            .iter()
            .filter(|r| r.ideal > 0.0)
            .map(|r| (r.fraction / r.ideal - 1.0).abs())
            .collect();
        Totals {
            moved: rows.iter().map(|r| r.moved).sum(),
            ideal: rows.iter().map(|r| r.ideal * r.members as f64).sum(),
            between: rows.iter().map(|r| r.between_old).sum(),
            mean_off: off.iter().sum::<f64>() / off.len().max(1) as f64,
            worst_off: off.iter().copied().fold(0.0, f64::max),
        }
    }
}

/// The schemes of `rows`, in order of first appearance.
fn schemes(rows: &[Row]) -> Vec<&str> {
    let mut schemes: Vec<&str> = Vec::new();
    for r in rows {
        if !schemes.contains(&r.scheme.as_str()) {
            schemes.push(&r.scheme);
        }
    }
    schemes
}

/// One row per scheme over the whole scenario: total moved against the total a perfect scheme
/// moves, the moves between surviving nodes, and how far its steps stray from the ideal.
pub fn summary(rows: &[Row]) -> Table {
    let mut t = Table::new(&[
        "scheme",
        "moved",
        "ideal_moves",
        "moved/ideal",
        "between_old",
        "mean_step_off",
        "worst_step_off",
    ]);
    for s in schemes(rows) {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.scheme == s).collect();
        let t_ = Totals::of(&mine);
        t.push(vec![
            s.to_string(),
            t_.moved.to_string(),
            fixed(t_.ideal, 0),
            fixed(
                if t_.ideal > 0.0 {
                    t_.moved as f64 / t_.ideal
                } else {
                    0.0
                },
                3,
            ),
            t_.between.to_string(),
            fixed(t_.mean_off, 3),
            fixed(t_.worst_off, 3),
        ]);
    }
    t
}

/// Writes `name.md`, `name.csv` and `name.svg` into `dir`; returns the Markdown printed on
/// stdout. The chart plots each step's moved fraction divided by the ideal fraction, with 1.0
/// (a perfect scheme) drawn as the target: above it a scheme moved more members than needed,
/// below it the changed node got less than its share. Modulo, which moves several times the
/// ideal, has a panel of its own so that it does not flatten the others.
pub fn write_outputs(dir: &Path, name: &str, rows: &[Row], title: &str) -> Result<String> {
    let per_step = table(rows);
    let totals = summary(rows);
    let md = format!(
        "### {title}\n\nPer step:\n\n{}\nWhole scenario:\n\n{}",
        per_step.markdown(),
        totals.markdown()
    );
    report::write(dir, &format!("{name}.md"), &md)?;
    report::write(dir, &format!("{name}.csv"), &per_step.csv())?;
    let steps: Vec<(usize, String)> = {
        let mut v: Vec<(usize, String)> = rows.iter().map(|r| (r.step, r.change.clone())).collect();
        v.dedup();
        v
    };
    // Long scenarios get bare step numbers (the table names the changes).
    let x_names: Vec<String> = steps
        .iter()
        .map(|(i, c)| {
            if steps.len() > 6 {
                i.to_string()
            } else {
                format!("{i}: {c}")
            }
        })
        .collect();
    let last = steps.len().saturating_sub(1) as f64;
    let target = || Series::reference("1.0 = ideal", 1.0, 0.0, last);
    let (mut main, mut modulo) = (vec![target()], vec![target()]);
    for (i, s) in schemes(rows).into_iter().enumerate() {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.scheme == s).collect();
        let t = Totals::of(&mine);
        let points: Vec<(f64, f64)> = mine
            .iter()
            .filter(|r| r.ideal > 0.0)
            .map(|r| ((r.step - 1) as f64, r.fraction / r.ideal))
            .collect();
        let label = if s == "modulo" {
            // Its own narrow panel: the range says it all.
            let (lo, hi) = points
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
            format!("{s}: {lo:.1}x to {hi:.1}x the ideal")
        } else {
            let mut label = format!(
                "{s}: off by {:.0}% on average, {:.0}% at worst",
                t.mean_off * 100.0,
                t.worst_off * 100.0
            );
            if t.between > 0 {
                label.push_str(&format!(", {} between old nodes", t.between));
            }
            label
        };
        let series = Series::line(label, points, i);
        if s == "modulo" {
            modulo.push(series);
        } else {
            main.push(series);
        }
    }
    let y_label = "moved fraction / ideal fraction (1.0 is best)";
    let mut panels = vec![Panel {
        chart: Chart {
            title: "above 1: moved more than needed; below 1: the node got less than its share",
            x_label: "step",
            y_label,
            x_log: false,
            y_log: false,
            // Step i is plotted at x = i - 1, where its label sits.
            x_names: x_names.clone(),
            legend: plotters::prelude::SeriesLabelPosition::LowerRight,
        },
        series: main,
        width: 3,
    }];
    if modulo.len() > 1 {
        panels.push(Panel {
            chart: Chart {
                title: "hash mod N, on its own scale",
                x_label: "step",
                y_label,
                x_log: false,
                y_log: false,
                x_names: steps.iter().map(|(i, _)| i.to_string()).collect(),
                legend: plotters::prelude::SeriesLabelPosition::UpperLeft,
            },
            series: modulo,
            width: 1,
        });
    }
    report::svg_panels(&dir.join(format!("{name}.svg")), title, panels)?;
    Ok(md)
}
