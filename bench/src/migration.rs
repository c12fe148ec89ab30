//! `migration`: what each change of a scenario costs under every scheme, measured on the
//! server. Add and remove steps are evaluated with `RING.MOVES` (what-if) and then applied
//! with `RING.ADD` / `RING.DEL`. `RING.MOVES` has no re-weight form, so a re-weight step reads
//! every member's owner with `RING.MGET` before and after `RING.ADD key WEIGHT w node`, and
//! the slot table's from `RING.SLOTS` before and after (each member's slot from `RING.SLOT`).

use crate::report::{self, fixed, Chart, Series, Table};
use crate::scenario::{Scenario, Step};
use crate::server::{field, float, int, items, run, text};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use ringslot_harness::redis::{self, Connection, Value};
use std::collections::HashMap;
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

    /// `RING.CREATE key [COMPAT f] [VNODES n]`.
    pub fn create_args(&self) -> Vec<String> {
        let mut args = vec!["RING.CREATE".to_string(), self.key()];
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
    /// Nothing written; `RING.MOVES ... SAMPLE count`. Re-weight steps look up
    /// `prefix0 .. prefix{count-1}` with `RING.MGET`.
    Sample { prefix: String, count: u64 },
}

impl Members {
    fn prefix(&self) -> &str {
        match self {
            Members::Keys { prefix, .. } | Members::Sample { prefix, .. } => prefix,
        }
    }

    fn count(&self) -> u64 {
        match self {
            Members::Keys { count, .. } | Members::Sample { count, .. } => *count,
        }
    }

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
    /// Leave the keys and rings on the server at the end.
    pub keep: bool,
    /// Accept keys that already match the members' pattern (a `--url` server).
    pub reuse_keys: bool,
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
/// `opts.rings` order, then `slot table` and `modulo`, from the first ring's replies).
pub fn run_scenario(con: &mut Connection, scenario: &Scenario, opts: &Options) -> Result<Vec<Row>> {
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
        run(con, &["DEL", &ring.key()])?;
        run(con, &ring.create_args())?;
        let mut add = vec!["RING.ADD".to_string(), ring.key()];
        add.extend(scenario.start.iter().cloned());
        run(con, &add)?;
    }
    let wrote = match &opts.members {
        Members::Keys { prefix, count } => {
            let existing = members_matching(con, &opts.rings[base], &opts.members)?;
            if existing > 0 && !opts.reuse_keys {
                bail!(
                    "{existing} keys matching `{prefix}*` already exist on the server; the \
                     benchmark would overwrite them. Pick another --key-prefix, or pass \
                     --reuse-keys"
                );
            }
            write_keys(con, prefix, *count, opts.batch)?;
            let seen = members_matching(con, &opts.rings[base], &opts.members)?;
            if seen != *count {
                bail!(
                    "{seen} keys match `{prefix}*` but {count} were written: other keys share \
                     the prefix; pick another --key-prefix"
                );
            }
            true
        }
        Members::Sample { .. } => false,
    };
    let result = measure(con, scenario, opts, base);
    if !opts.keep {
        for ring in &opts.rings {
            run(con, &["DEL", &ring.key()])?;
        }
        if wrote {
            delete_keys(con, opts.members.prefix(), opts.members.count(), opts.batch)?;
        }
    }
    result
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

fn write_keys(con: &mut Connection, prefix: &str, count: u64, batch: usize) -> Result<()> {
    let progress = bar(count, "writing keys");
    let mut i = 0u64;
    while i < count {
        let end = (i + batch as u64).min(count);
        let mut pipe = redis::pipe();
        for k in i..end {
            pipe.cmd("SET")
                .arg(format!("{prefix}{k}"))
                .arg("v")
                .ignore();
        }
        pipe.query::<()>(con).context("writing the member keys")?;
        progress.inc(end - i);
        i = end;
    }
    progress.finish_and_clear();
    Ok(())
}

fn delete_keys(con: &mut Connection, prefix: &str, count: u64, batch: usize) -> Result<()> {
    let mut i = 0u64;
    while i < count {
        let end = (i + batch as u64).min(count);
        let mut c = redis::cmd("UNLINK");
        for k in i..end {
            c.arg(format!("{prefix}{k}"));
        }
        c.query::<()>(con).context("deleting the member keys")?;
        i = end;
    }
    Ok(())
}

fn measure(
    con: &mut Connection,
    scenario: &Scenario,
    opts: &Options,
    base: usize,
) -> Result<Vec<Row>> {
    let mut weights: Vec<(String, u32)> = scenario.start.iter().map(|n| (n.clone(), 1)).collect();
    let mut rows = Vec::new();
    let progress = bar(
        (scenario.steps.len() * opts.rings.len()) as u64,
        "measuring steps",
    );
    // Each member's hash slot, looked up once (members never change), for re-weight steps.
    let mut member_slots: Option<Vec<u16>> = None;
    for (step_no, step) in scenario.steps.iter().enumerate() {
        let step_no = step_no + 1;
        let nodes_before = weights.len();
        let nodes_after = match step {
            Step::Add { .. } => nodes_before + 1,
            Step::Del { .. } => nodes_before - 1,
            Step::Weight { .. } => nodes_before,
        };
        let row = |scheme: String, members, moved, between_old, fraction, ideal, space| Row {
            step: step_no,
            change: step.describe(),
            nodes_before,
            nodes_after,
            scheme,
            members,
            moved,
            between_old,
            fraction,
            ideal,
            space,
        };
        match step {
            Step::Add { .. } | Step::Del { .. } => {
                let mut extra = Vec::new();
                for (i, ring) in opts.rings.iter().enumerate() {
                    let mut args = vec!["RING.MOVES".to_string(), ring.key()];
                    match step {
                        Step::Add { node, weight } => args.extend([
                            "ADD".into(),
                            node.clone(),
                            "WEIGHT".into(),
                            weight.to_string(),
                        ]),
                        Step::Del { node } => args.extend(["DEL".into(), node.clone()]),
                        Step::Weight { .. } => unreachable!(),
                    }
                    args.extend(opts.members.moves_args());
                    let reply = run(con, &args)?;
                    let members = int(field(&reply, "members")?)? as u64;
                    let ideal = float(field(&reply, "ideal")?)?;
                    let (moved, between_old, fraction) = scheme_row(&reply, "ring")?;
                    let space = float(field(field(&reply, "ring")?, "space")?)?;
                    rows.push(row(
                        ring.label(),
                        members,
                        moved,
                        between_old,
                        fraction,
                        ideal,
                        Some(space),
                    ));
                    if i == base {
                        let (m, b, f) = scheme_row(&reply, "slots")?;
                        let slots_moved = int(field(field(&reply, "slots")?, "slots_moved")?)?;
                        extra.push(row(
                            "slot table".into(),
                            members,
                            m,
                            b,
                            f,
                            ideal,
                            Some(slots_moved as f64 / 16384.0),
                        ));
                        let (m, b, f) = scheme_row(&reply, "modulo")?;
                        extra.push(row("modulo".into(), members, m, b, f, ideal, None));
                    }
                    apply(con, &ring.key(), step)?;
                    progress.inc(1);
                }
                rows.extend(extra);
            }
            Step::Weight { node, weight } => {
                let members: Vec<String> = (0..opts.members.count())
                    .map(|i| format!("{}{i}", opts.members.prefix()))
                    .collect();
                let ideal = weight_ideal(&weights, node, *weight);
                let mut extra = Vec::new();
                for (i, ring) in opts.rings.iter().enumerate() {
                    let key = ring.key();
                    let before = owners(con, &key, &members, opts.batch)?;
                    let slots_before = if i == base {
                        Some(slot_owners(con, &key)?)
                    } else {
                        None
                    };
                    apply(con, &key, step)?;
                    let after = owners(con, &key, &members, opts.batch)?;
                    let (moved, between_old) = count_moves(&before, &after, node);
                    let n = members.len() as u64;
                    rows.push(row(
                        ring.label(),
                        n,
                        moved,
                        between_old,
                        ratio(moved, n),
                        ideal,
                        None,
                    ));
                    if let Some(slots_before) = slots_before {
                        let slots_after = slot_owners(con, &key)?;
                        if member_slots.is_none() {
                            member_slots = Some(slots_of(con, &key, &members, opts.batch)?);
                        }
                        let ms = member_slots.as_ref().expect("just set");
                        let pick = |table: &[Option<String>]| -> Vec<Option<String>> {
                            ms.iter().map(|&s| table[usize::from(s)].clone()).collect()
                        };
                        let (m, b) = count_moves(&pick(&slots_before), &pick(&slots_after), node);
                        let slots_moved = slots_before
                            .iter()
                            .zip(&slots_after)
                            .filter(|(x, y)| x != y)
                            .count();
                        extra.push(row(
                            "slot table".into(),
                            n,
                            m,
                            b,
                            ratio(m, n),
                            ideal,
                            Some(slots_moved as f64 / 16384.0),
                        ));
                        // Modulo ignores weights: the node list, hence every owner, is unchanged.
                        extra.push(row("modulo".into(), n, 0, 0, 0.0, ideal, None));
                    }
                    progress.inc(1);
                }
                rows.extend(extra);
            }
        }
        match step {
            Step::Add { node, weight } => weights.push((node.clone(), *weight)),
            Step::Del { node } => weights.retain(|(n, _)| n != node),
            Step::Weight { node, weight } => {
                if let Some(w) = weights.iter_mut().find(|(n, _)| n == node) {
                    w.1 = *weight;
                }
            }
        }
    }
    progress.finish_and_clear();
    Ok(rows)
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// The fraction a perfect scheme moves when `node`'s weight becomes `weight`: the change of its
/// share of the total weight (members move only to it, or only away from it).
pub fn weight_ideal(weights: &[(String, u32)], node: &str, weight: u32) -> f64 {
    let total: f64 = weights.iter().map(|(_, w)| f64::from(*w)).sum();
    let old = weights
        .iter()
        .find(|(n, _)| n == node)
        .map_or(0.0, |(_, w)| f64::from(*w));
    let new_total = total - old + f64::from(weight);
    (f64::from(weight) / new_total - old / total).abs()
}

/// Members whose owner changed, and those among them that moved between two nodes other than
/// the re-weighted one (moves a perfect scheme never makes).
pub fn count_moves(before: &[Option<String>], after: &[Option<String>], node: &str) -> (u64, u64) {
    let mut moved = 0;
    let mut between_old = 0;
    for (b, a) in before.iter().zip(after) {
        if b != a {
            moved += 1;
            if b.as_deref() != Some(node) && a.as_deref() != Some(node) {
                between_old += 1;
            }
        }
    }
    (moved, between_old)
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

/// The owner of every member on the ring at `key`, by pipelined `RING.MGET`s.
fn owners(
    con: &mut Connection,
    key: &str,
    members: &[String],
    batch: usize,
) -> Result<Vec<Option<String>>> {
    let mut out = Vec::with_capacity(members.len());
    // Several MGETs of `batch` members per round trip.
    for round in members.chunks(batch * 10) {
        let mut pipe = redis::pipe();
        for chunk in round.chunks(batch) {
            pipe.cmd("RING.MGET").arg(key).arg(chunk);
        }
        let replies: Vec<Value> = pipe.query(con).context("RING.MGET")?;
        for r in &replies {
            out.extend(items(r)?.iter().map(text));
        }
    }
    if out.len() != members.len() {
        bail!(
            "RING.MGET replied {} owners for {} members",
            out.len(),
            members.len()
        );
    }
    Ok(out)
}

/// The owner of each of the 16384 slots of the ring's slot table, from `RING.SLOTS`.
fn slot_owners(con: &mut Connection, key: &str) -> Result<Vec<Option<String>>> {
    let mut table = vec![None; 16384];
    for range in items(&run(con, &["RING.SLOTS", key])?)? {
        let r = items(range)?;
        if r.len() < 3 {
            bail!("RING.SLOTS range {range:?} is not [start, end, node]");
        }
        let (start, end) = (int(&r[0])? as usize, int(&r[1])? as usize);
        for slot in table.iter_mut().take(end + 1).skip(start) {
            *slot = text(&r[2]);
        }
    }
    Ok(table)
}

/// Each member's hash slot, from pipelined `RING.SLOT`s.
fn slots_of(con: &mut Connection, key: &str, members: &[String], batch: usize) -> Result<Vec<u16>> {
    let mut out = Vec::with_capacity(members.len());
    for chunk in members.chunks(batch) {
        let mut pipe = redis::pipe();
        for m in chunk {
            pipe.cmd("RING.SLOT").arg(key).arg(m);
        }
        let replies: Vec<Value> = pipe.query(con).context("RING.SLOT")?;
        for r in &replies {
            out.push(int(&items(r)?[0])? as u16);
        }
    }
    Ok(out)
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
    /// The largest moved fraction / ideal fraction of any step that should move something.
    worst: f64,
}

impl Totals {
    fn of(rows: &[&Row]) -> Totals {
        Totals {
            moved: rows.iter().map(|r| r.moved).sum(),
            ideal: rows.iter().map(|r| r.ideal * r.members as f64).sum(),
            between: rows.iter().map(|r| r.between_old).sum(),
            worst: rows
                .iter()
                .filter(|r| r.ideal > 0.0)
                .map(|r| r.fraction / r.ideal)
                .fold(0.0, f64::max),
        }
    }
}

/// One row per scheme over the whole scenario: total moved against the total a perfect scheme
/// moves, the moves between surviving nodes, and the worst step.
pub fn summary(rows: &[Row]) -> Table {
    let mut t = Table::new(&[
        "scheme",
        "moved",
        "ideal_moves",
        "moved/ideal",
        "between_old",
        "worst step fraction/ideal",
    ]);
    let mut order: Vec<&str> = Vec::new();
    let mut by: HashMap<&str, Vec<&Row>> = HashMap::new();
    for r in rows {
        if !by.contains_key(r.scheme.as_str()) {
            order.push(&r.scheme);
        }
        by.entry(&r.scheme).or_default().push(r);
    }
    for s in order {
        let Totals {
            moved,
            ideal,
            between,
            worst,
        } = Totals::of(&by[s]);
        t.push(vec![
            s.to_string(),
            moved.to_string(),
            fixed(ideal, 0),
            fixed(
                if ideal > 0.0 {
                    moved as f64 / ideal
                } else {
                    0.0
                },
                3,
            ),
            between.to_string(),
            fixed(worst, 2),
        ]);
    }
    t
}

/// Writes `name.md`, `name.csv` and `name.svg` (moved fraction per step and scheme, with the
/// ideal) into `dir`; returns the Markdown printed on stdout.
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
    let mut schemes: Vec<&str> = Vec::new();
    for r in rows {
        if !schemes.contains(&r.scheme.as_str()) {
            schemes.push(&r.scheme);
        }
    }
    // The ideal first, so that a scheme on it (the slot table) is drawn over it, visibly.
    let mut series = vec![Series {
        label: "ideal (a perfect scheme)".into(),
        points: rows
            .iter()
            .filter(|r| r.scheme == schemes[0])
            .map(|r| ((r.step - 1) as f64, r.ideal))
            .collect(),
        colour: None,
        markers_only: false,
        dashed: false,
    }];
    for (i, s) in schemes.iter().enumerate() {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.scheme == *s).collect();
        // The legend carries the whole-scenario figures, so the chart alone says which scheme
        // moves fewer members, how far its worst step strays, and which moves members between
        // surviving nodes.
        let Totals {
            moved,
            ideal,
            between,
            worst,
        } = Totals::of(&mine);
        let mut label = if ideal > 0.0 {
            format!(
                "{s}: total {:.2}x ideal, worst step {worst:.2}x",
                moved as f64 / ideal
            )
        } else {
            s.to_string()
        };
        if between > 0 {
            label.push_str(&format!(", {between} between old nodes"));
        }
        series.push(report::Series {
            label,
            points: mine
                .iter()
                .map(|r| ((r.step - 1) as f64, r.fraction))
                .collect(),
            colour: Some(i),
            markers_only: false,
            dashed: false,
        });
    }
    let chart = Chart {
        title,
        x_label: "step",
        y_label: "fraction of members moved (black: ideal)",
        x_log: false,
        y_log: false,
        // Step i is plotted at x = i - 1, where its label sits.
        x_names,
        legend: plotters::prelude::SeriesLabelPosition::MiddleRight,
    };
    report::svg(&dir.join(format!("{name}.svg")), &chart, &series)?;
    Ok(md)
}
