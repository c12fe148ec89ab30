//! `migration`: what each change of a scenario costs under every scheme, measured on the
//! server. Every step (a join, a removal, a re-weight) is evaluated with `RING.MOVES` (what-if)
//! and then applied with `RING.ADD` / `RING.DEL`.

use crate::common::{self, Global, Target};
use crate::report::{self, fixed, Chart, Panel, Series, Table};
use crate::scenario::{self, Scenario, Step};
use crate::scratch::Scratch;
use crate::server::{int, query};
use anyhow::{bail, Context, Result};
use ringslot_engine::{Flavour, Scheme};
use ringslot_harness::redis::Connection;
use ringslot_tool::reply::ring::Moves;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Prefix of every ring key the benchmark creates (kept apart from the members).
pub const RING_KEY_PREFIX: &str = "ringslot-bench:ring:";

/// `ringslot-bench migration`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    node_names: common::NodeNames,
    /// Start with FROM nodes and add one at a time up to TO (default 4..8 when no other
    /// scenario flag is given).
    #[arg(long, value_name = "FROM..TO")]
    grow: Option<String>,
    /// Remove the most recently added nodes one at a time from FROM down to TO (after --grow,
    /// --reweight and --lose when combined).
    #[arg(long, value_name = "FROM..TO")]
    shrink: Option<String>,
    /// Change a node's weight (NODE is a name or a node number), e.g. `--reweight 1=3`.
    #[arg(long, value_name = "NODE=W")]
    reweight: Vec<String>,
    /// Lose a node (NODE is a name or a node number), e.g. `--lose 2`.
    #[arg(long, value_name = "NODE")]
    lose: Vec<String>,
    /// Nodes to start with when neither --grow nor --shrink is given.
    #[arg(long, default_value_t = 4)]
    start: usize,
    /// A scenario file (see bench/scenario-example.txt); replaces the flags above.
    #[arg(long, conflicts_with_all = ["grow", "shrink", "reweight", "lose"])]
    scenario: Option<PathBuf>,
    /// Real keys written into the server and evaluated with RING.MOVES ... KEYS.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Write nothing; evaluate with RING.MOVES ... SAMPLE N instead.
    #[arg(long, value_name = "N")]
    sample: Option<u64>,
    /// Prefix of the member keys (`key:` gives key:0, key:1, ...).
    #[arg(long, default_value = "key:")]
    key_prefix: String,
    /// VNODES of the native rings, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10,100,160,1000")]
    vnodes: Vec<u32>,
    /// Also measure these flavours at their default points (comma-separated; `none` for
    /// none).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ketama,groupcache,native-fnv",
        value_parser = common::flavours_or_none
    )]
    compat: Vec<Vec<Flavour>>,
    /// Other schemes, evaluated on the same nodes, weights and members (comma-separated:
    /// jump, rendezvous, maglev, multiprobe, bounded, or all; `none` for none).
    #[arg(long, value_delimiter = ',', default_value = "none", value_parser = common::other_schemes)]
    schemes: Vec<Vec<Scheme>>,
    /// VNODES of the groupcache ring [default: the module's, 50].
    #[arg(long)]
    groupcache_vnodes: Option<u32>,
    /// Commands per pipeline (SET, RING.MGET of this many members, RING.SLOT).
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Leave the member keys and the rings on the server (--url) until their TTL (an hour).
    #[arg(long)]
    keep: bool,
    /// Evaluate the keys that already match the member prefix (--url) as they are, read-only,
    /// instead of writing --keys new ones.
    #[arg(long)]
    reuse_keys: bool,
    /// Stem of the output files.
    #[arg(long, default_value = "migration")]
    name: String,
}

/// Runs `migration` on `--url` or a server of its own: builds the scenario and the rings,
/// measures every step (see [`run_scenario`]), and writes the table, CSV and chart.
pub fn run(g: &Global, a: &Args) -> Result<()> {
    let scenario = match &a.scenario {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("read {}", path.display()))?;
            scenario::parse(&text, &a.node_names.names)
                .with_context(|| path.display().to_string())?
        }
        None => {
            let grow = a.grow.as_deref().map(scenario::parse_range).transpose()?;
            let shrink = a.shrink.as_deref().map(scenario::parse_range).transpose()?;
            let reweight = a
                .reweight
                .iter()
                .map(|s| scenario::parse_reweight(s))
                .collect::<Result<Vec<_>>>()?;
            let nothing =
                grow.is_none() && shrink.is_none() && reweight.is_empty() && a.lose.is_empty();
            let grow = if nothing { Some((4, 8)) } else { grow };
            scenario::from_flags(
                &a.node_names.names,
                a.start,
                grow,
                shrink,
                &reweight,
                &a.lose,
            )?
        }
    };
    let mut rings: Vec<RingConf> = a
        .vnodes
        .iter()
        .map(|&v| RingConf {
            flavour: Flavour::Native,
            vnodes: Some(v),
        })
        .collect();
    for &f in a.compat.iter().flatten() {
        rings.push(RingConf {
            flavour: f,
            vnodes: if f == Flavour::Groupcache {
                a.groupcache_vnodes
            } else {
                None
            },
        });
    }
    let members = match a.sample {
        Some(n) => Members::Sample { count: n },
        None => Members::Keys {
            prefix: a.key_prefix.clone(),
            count: a.keys,
        },
    };
    let count = match &members {
        Members::Keys { count, .. } => format!("{count} real keys"),
        Members::Sample { count, .. } => format!("SAMPLE {count}"),
    };
    let opts = Options {
        rings,
        members,
        batch: a.batch.max(1),
        reuse_keys: a.reuse_keys,
        schemes: common::schemes_of(&a.schemes),
    };
    let mut target = Target::open(g, a.keep)?;
    let started = Instant::now();
    let rows = run_scenario(&mut target.con, &target.scratch, &scenario, &opts)?;
    let title = format!(
        "Migration cost: {} nodes, {} changes, {count}",
        scenario.start.len(),
        scenario.steps.len()
    );
    let md = write_outputs(&g.out, &a.name, &rows, &title)?;
    println!("{md}");
    eprintln!("measured in {:.1} s", started.elapsed().as_secs_f64());
    crate::report::announce();
    Ok(())
}

/// One ring configuration: a flavour and its `VNODES` (`None`: the flavour's default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingConf {
    pub flavour: Flavour,
    pub vnodes: Option<u32>,
}

impl RingConf {
    /// `ring vnodes=160`, `ketama`, `groupcache vnodes=50`, ...
    pub fn label(&self) -> String {
        let name = if self.flavour == Flavour::Native {
            "ring"
        } else {
            self.flavour.name()
        };
        match self.vnodes {
            Some(v) => format!("{name} vnodes={v}"),
            None if self.flavour == Flavour::Groupcache => format!("{name} vnodes=50"),
            None => name.to_string(),
        }
    }

    /// The ring's key on the server.
    pub fn key(&self) -> String {
        match self.vnodes {
            Some(v) => format!("{RING_KEY_PREFIX}{}:{v}", self.flavour.name()),
            None => format!("{RING_KEY_PREFIX}{}", self.flavour.name()),
        }
    }

    /// The options of its `RING.CREATE key`: `[COMPAT f] [VNODES n]`.
    pub fn create_options(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.flavour != Flavour::Native {
            args.extend(["COMPAT".to_string(), self.flavour.name().to_string()]);
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
    pub schemes: Vec<Scheme>,
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
        .position(|r| r.flavour == Flavour::Native)
        .unwrap_or(0);
    for ring in &opts.rings {
        scratch.ring(con, &ring.key(), &ring.create_options())?;
        let mut add = vec!["RING.ADD".to_string(), ring.key()];
        add.extend(scenario.start.iter().cloned());
        query(con, &add)?;
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
            let progress = common::bar(*count, "writing keys");
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
    let reply = query(
        con,
        &["RING.MOVES", &ring.key(), "ADD", probe, &kw, &pattern],
    )?;
    Ok(Moves::read(&reply)?.members)
}

fn measure(
    con: &mut Connection,
    scenario: &Scenario,
    opts: &Options,
    base: usize,
) -> Result<Vec<Row>> {
    let mut nodes = scenario.start.len();
    let mut rows = Vec::new();
    let progress = common::bar(
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
        let row = |scheme: String, reply: &Moves, moves: &str, space: Option<f64>| -> Result<Row> {
            let part = reply.scheme(moves)?;
            Ok(Row {
                step: step_no,
                change: step.describe(),
                nodes_before,
                nodes_after: nodes,
                scheme,
                members: reply.members,
                moved: part.moved,
                between_old: part.between_old,
                fraction: part.fraction.unwrap_or(0.0),
                ideal: reply.ideal,
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
            .position(|r| r.flavour == Flavour::Native && r.vnodes == Some(160))
            .unwrap_or(base);
        for (i, ring) in opts.rings.iter().enumerate() {
            if i == scheme_ring && !opts.schemes.is_empty() {
                let mut args = vec!["RING.MOVES".to_string(), ring.key()];
                args.extend(change.iter().cloned());
                args.extend(opts.members.moves_args());
                args.push("SCHEMES".into());
                args.extend(opts.schemes.iter().map(|s| s.name().to_string()));
                let reply = Moves::read(&query(con, &args)?)?;
                let factor = query(con, &["CONFIG", "GET", "ringslot.balance-factor"])?;
                let factor = crate::server::items(&factor)?
                    .get(1)
                    .and_then(crate::server::text)
                    .unwrap_or_else(|| "?".into());
                for s in opts.schemes.iter().map(|s| s.name()) {
                    let space = reply.scheme(s)?.space;
                    let label = match s {
                        "bounded" => format!("bounded {factor}% over {}", ring.label()),
                        other => other.to_string(),
                    };
                    extra.push(row(label, &reply, s, space)?);
                }
            }
            let mut args = vec!["RING.MOVES".to_string(), ring.key()];
            args.extend(change.iter().cloned());
            args.extend(opts.members.moves_args());
            let reply = Moves::read(&query(con, &args)?)?;
            let space = reply.scheme("ring")?.space;
            rows.push(row(ring.label(), &reply, "ring", space)?);
            // The slot table and modulo do not depend on the ring's flavour or VNODES.
            if i == base {
                let slots_moved = reply.scheme("slots")?.slots_moved.unwrap_or(0);
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
    let got = int(&query(con, &args)?)?;
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
    for s in schemes(rows) {
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
        let series = Series::line(label, points, report::scheme_colour(s));
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
            legend: report::free_corner(&main),
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
                legend: report::free_corner(&modulo),
            },
            series: modulo,
            width: 1,
        });
    }
    report::svg_panels(&dir.join(format!("{name}.svg")), title, panels)?;
    Ok(md)
}
