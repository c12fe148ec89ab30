//! `spread`: the two properties of consistent hashing besides balance and monotonicity, as
//! Karger et al. define them ("Consistent Hashing and Random Trees", STOC 1997, section 2.2),
//! measured on the server.
//!
//! Items are members `key:0 ..`, buckets are nodes, and a *view* is a set of nodes a client
//! may believe in. Over a collection of views that together hold C nodes:
//! - the **spread** σ(i) of an item is the number of distinct nodes the views put it on;
//! - the **load** λ(b) of a node is the number of distinct items some view puts on it,
//!   reported divided by I/C (items per node), so that 1.0 is the least possible.
//!
//! Two kinds of views, since a slot table depends on its history, not only on its node set:
//! - **subsets**: random subsets of C nodes, each holding at least C/t of them (the paper's
//!   setting); the slot table of a view starts from the `redis-cli --cluster create` layout
//!   over all C nodes and drains the others (`RING.DEL`);
//! - **history**: the node sets after each step of one history of joins and leaves (the maps
//!   that clients holding stale tables use during a rebalance); the slot table follows the
//!   history with `RING.ADD` and `RING.DEL`.
//!
//! Ring owners come from `RING.MGET`, slot-table owners from `RING.SLOTS` and the members'
//! slots (`RING.SLOT`); modulo (`hash mod N` over the view's nodes in order, with the native
//! member hash) is computed with the engine's hash, as `RING.MOVES` computes it, since no
//! command answers it. Theorem 4.1 of the paper bounds spread and load by O(t log C) with high
//! probability for a ring with enough points per node; modulo's spread grows with the number
//! of distinct view sizes instead.

use crate::common::{self, Global, Target};
use crate::report::{self, fixed, Chart, Panel, Series, Table};
use crate::scenario::node_name;
use crate::scratch::Scratch;
use crate::server::{int, items, query, text};
use anyhow::{anyhow, bail, Result};
use plotters::prelude::SeriesLabelPosition;
use ringslot_engine::Flavour;
use ringslot_harness::prelude::Rng;
use ringslot_harness::redis::{self, Connection, Value};
use std::collections::HashMap;
use std::path::Path;

/// The ring key a spread run uses (re-created for every view).
const KEY: &str = "ringslot-bench:spread";

/// `ringslot-bench spread`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    node_names: common::NodeNames,
    /// C: the nodes all views hold together.
    #[arg(long, default_value_t = 20)]
    nodes: usize,
    /// Every view holds at least ceil(nodes / t) nodes.
    #[arg(long, default_value_t = 2)]
    t: usize,
    /// Random subset views.
    #[arg(long, default_value_t = 40)]
    views: usize,
    /// Join/leave steps of the history.
    #[arg(long, default_value_t = 40)]
    steps: usize,
    /// Members `key:0` .. evaluated.
    #[arg(long, default_value_t = 50_000)]
    members: usize,
    /// Ring flavours, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "native,ketama,groupcache,native-fnv",
        value_parser = common::flavour
    )]
    flavours: Vec<Flavour>,
    /// Seed of the random views.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stem of the output files.
    #[arg(long, default_value = "spread")]
    name: String,
}

/// Runs `spread` on `--url` or a server of its own and writes the table, CSV and chart.
pub fn run(g: &Global, a: &Args) -> Result<()> {
    let opts = Options {
        nodes: a.nodes,
        t: a.t,
        views: a.views,
        steps: a.steps,
        members: a.members,
        flavours: a.flavours.clone(),
        seed: a.seed,
        names: a.node_names.names.clone(),
    };
    let mut target = Target::open(g, false)?;
    let outcome = run_spread(&mut target.con, &target.scratch, &opts)?;
    let md = write_outputs(&g.out, &a.name, &outcome, &opts)?;
    println!("{md}");
    report::announce();
    Ok(())
}

/// What a spread run measures.
#[derive(Debug, Clone)]
pub struct Options {
    /// C: the nodes all views together hold.
    pub nodes: usize,
    /// Every view holds at least `ceil(nodes / t)` nodes.
    pub t: usize,
    /// Subset views.
    pub views: usize,
    /// Steps of the history (its views are the node sets before and after each step).
    pub steps: usize,
    /// Items: members `key:0 .. key:members-1`.
    pub members: usize,
    /// Ring flavours measured besides the slot table and modulo.
    pub flavours: Vec<Flavour>,
    /// Seed of the views' random choices.
    pub seed: u64,
    /// Node name template (`{}`: the node's number).
    pub names: String,
}

/// Spread and load of one scheme over one collection of views.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `subsets` or `history`.
    pub kind: String,
    pub scheme: String,
    pub views: usize,
    /// C: the nodes the views hold together.
    pub nodes: usize,
    /// The smallest view.
    pub smallest: usize,
    pub spread_mean: f64,
    pub spread_p99: u32,
    pub spread_max: u32,
    /// max λ / (I / C).
    pub load_max: f64,
    /// mean λ / (I / C), which equals the mean spread.
    pub load_mean: f64,
}

/// The spread of every item and the load of every bucket, from `owners[v][i]`: the bucket
/// (`0..buckets`) view `v` puts item `i` on (`None`: the view puts it nowhere).
pub fn spread_load(owners: &[Vec<Option<usize>>], buckets: usize) -> (Vec<u32>, Vec<u64>) {
    let items = owners.iter().map(Vec::len).max().unwrap_or(0);
    let mut sigma = vec![0u32; items];
    let mut lambda = vec![0u64; buckets];
    let mut seen: Vec<usize> = Vec::new();
    for (i, s) in sigma.iter_mut().enumerate() {
        seen.clear();
        seen.extend(owners.iter().filter_map(|v| v.get(i).copied().flatten()));
        seen.sort_unstable();
        seen.dedup();
        *s = seen.len() as u32;
        for &b in &seen {
            if let Some(l) = lambda.get_mut(b) {
                *l += 1;
            }
        }
    }
    (sigma, lambda)
}

/// The row of one scheme from its owners (see [`spread_load`]).
fn summarise(
    kind: &str,
    scheme: &str,
    views: &[Vec<usize>],
    owners: &[Vec<Option<usize>>],
    buckets: usize,
) -> Row {
    let (sigma, lambda) = spread_load(owners, buckets);
    let items = sigma.len().max(1) as f64;
    let per_bucket = items / buckets.max(1) as f64;
    let mut sorted = sigma.clone();
    sorted.sort_unstable();
    let p99 = sorted
        .get(((sorted.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(0);
    Row {
        kind: kind.to_string(),
        scheme: scheme.to_string(),
        views: views.len(),
        nodes: buckets,
        smallest: views.iter().map(Vec::len).min().unwrap_or(0),
        spread_mean: sigma.iter().map(|&s| f64::from(s)).sum::<f64>() / items,
        spread_p99: p99,
        spread_max: sorted.last().copied().unwrap_or(0),
        load_max: lambda.iter().copied().max().unwrap_or(0) as f64 / per_bucket,
        load_mean: lambda.iter().sum::<u64>() as f64 / buckets.max(1) as f64 / per_bucket,
    }
}

/// `views` random subsets of `0..c`, each of at least `ceil(c / t)` nodes; the first is every
/// node, so that the views hold all C together. Each subset is ascending.
pub fn subset_views(c: usize, t: usize, views: usize, rng: &mut Rng) -> Vec<Vec<usize>> {
    let least = c.div_ceil(t.max(1)).max(1);
    let mut out = vec![(0..c).collect::<Vec<usize>>()];
    while out.len() < views {
        let size = least + rng.below(c - least + 1);
        let mut all: Vec<usize> = (0..c).collect();
        // A partial Fisher-Yates shuffle picks `size` of them.
        for k in 0..size {
            let j = k + rng.below(c - k);
            all.swap(k, j);
        }
        let mut view = all[..size].to_vec();
        view.sort_unstable();
        out.push(view);
    }
    out
}

/// One step of a history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Join(usize),
    Leave(usize),
}

/// A history of `steps` joins and leaves over nodes `0..c`: it starts with the first
/// `ceil(3c/4)` nodes, and each step has a node that is out join or a node that is in leave,
/// at random, keeping at least `ceil(c / t)` nodes. Returns the node sets before and after
/// every step (ascending) and the steps.
pub fn history_views(
    c: usize,
    t: usize,
    steps: usize,
    rng: &mut Rng,
) -> (Vec<Vec<usize>>, Vec<Step>) {
    let least = c.div_ceil(t.max(1)).max(1);
    let mut present: Vec<usize> = (0..(3 * c).div_ceil(4).max(least)).collect();
    let mut views = vec![present.clone()];
    let mut history = Vec::new();
    for _ in 0..steps {
        let absent: Vec<usize> = (0..c).filter(|n| !present.contains(n)).collect();
        let join = if absent.is_empty() {
            false
        } else if present.len() <= least {
            true
        } else {
            rng.below(2) == 0
        };
        if join {
            let n = *rng.pick(&absent);
            present.push(n);
            present.sort_unstable();
            history.push(Step::Join(n));
        } else {
            let n = present.remove(rng.below(present.len()));
            history.push(Step::Leave(n));
        }
        views.push(present.clone());
    }
    (views, history)
}

/// The owners of `members` on a fresh ring of `flavour` over `view`'s nodes (`RING.MGET`),
/// as node numbers.
fn ring_owners(
    con: &mut Connection,
    scratch: &Scratch,
    flavour: Flavour,
    view: &[usize],
    names: &[String],
    members: &[String],
) -> Result<Vec<Option<usize>>> {
    scratch.ring(
        con,
        KEY,
        &["COMPAT".to_string(), flavour.name().to_string()],
    )?;
    let mut add = vec!["RING.ADD".to_string(), KEY.to_string()];
    add.extend(view.iter().map(|&n| names[n].clone()));
    query(con, &add)?;
    mget(con, names, members)
}

/// `RING.MGET` of `members` on the ring at [`KEY`], in batches, as node numbers.
fn mget(con: &mut Connection, names: &[String], members: &[String]) -> Result<Vec<Option<usize>>> {
    let number: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let mut out = Vec::with_capacity(members.len());
    for batch in members.chunks(1000) {
        let mut args = vec!["RING.MGET".to_string(), KEY.to_string()];
        args.extend(batch.iter().cloned());
        let reply = query(con, &args)?;
        for owner in items(&reply)? {
            out.push(text(owner).and_then(|o| number.get(o.as_str()).copied()));
        }
    }
    Ok(out)
}

/// The slot table of the ring at [`KEY`] (`RING.SLOTS`), as a node number per slot.
fn slot_table(con: &mut Connection, names: &[String]) -> Result<Vec<Option<usize>>> {
    let number: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let mut table = vec![None; 16384];
    for range in items(&query(con, &["RING.SLOTS", KEY])?)? {
        let r = items(range)?;
        let (Some(a), Some(b), Some(n)) = (r.first(), r.get(1), r.get(2)) else {
            bail!("RING.SLOTS: a range of fewer than three fields");
        };
        let owner = text(n).and_then(|n| number.get(n.as_str()).copied());
        for slot in usize::try_from(int(a)?)?..=usize::try_from(int(b)?)? {
            if let Some(s) = table.get_mut(slot) {
                *s = owner;
            }
        }
    }
    Ok(table)
}

/// The hash slot of every member (`RING.SLOT` on the ring at [`KEY`], pipelined).
fn member_slots(con: &mut Connection, members: &[String]) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(members.len());
    for batch in members.chunks(1000) {
        let mut pipe = redis::pipe();
        for m in batch {
            pipe.cmd("RING.SLOT").arg(KEY).arg(m);
        }
        let replies: Vec<Value> = pipe.query(con).map_err(|e| anyhow!("RING.SLOT: {e}"))?;
        for r in &replies {
            let slot = items(r)?.first().map(int).transpose()?.unwrap_or(0);
            out.push(usize::try_from(slot)?);
        }
    }
    Ok(out)
}

/// What a spread run found.
pub struct Outcome {
    pub rows: Vec<Row>,
    /// Per slot, the distinct owners it had over the history.
    pub slot_owners: Vec<u32>,
    /// Steps of the history.
    pub steps: Vec<Step>,
}

/// Measures every scheme over both kinds of views (see the module docs).
pub fn run_spread(con: &mut Connection, scratch: &Scratch, opts: &Options) -> Result<Outcome> {
    let c = opts.nodes;
    if c < 2 || opts.t < 1 || opts.members == 0 || opts.views < 1 {
        bail!("spread needs at least 2 nodes, t >= 1, 1 view and 1 member");
    }
    let names: Vec<String> = (1..=c).map(|i| node_name(&opts.names, i)).collect();
    let members: Vec<String> = (0..opts.members).map(|i| format!("key:{i}")).collect();
    let mut rng = Rng::new(opts.seed);
    let subsets = subset_views(c, opts.t, opts.views, &mut rng);
    let (history, steps) = history_views(c, opts.t, opts.steps, &mut rng);
    let total = (subsets.len() + history.len()) * (opts.flavours.len() + 1);
    let bar = common::bar(total as u64, "views");
    let mut rows = Vec::new();
    for (kind, views) in [("subsets", &subsets), ("history", &history)] {
        for &flavour in &opts.flavours {
            bar.set_message(format!("{kind}: {}", flavour.name()));
            let mut owners = Vec::with_capacity(views.len());
            for view in views.iter() {
                owners.push(ring_owners(con, scratch, flavour, view, &names, &members)?);
                bar.inc(1);
            }
            rows.push(summarise(kind, flavour.name(), views, &owners, c));
        }
        // Modulo: the native member hash mod the view's size, over its nodes in order.
        let hashes: Vec<u64> = members
            .iter()
            .map(|m| Flavour::Native.member_hash(m.as_bytes()))
            .collect();
        let owners: Vec<Vec<Option<usize>>> = views
            .iter()
            .map(|v| {
                hashes
                    .iter()
                    .map(|h| v.get((h % v.len() as u64) as usize).copied())
                    .collect()
            })
            .collect();
        rows.push(summarise(kind, "modulo", views, &owners, c));
    }

    // The slot table: subsets drain the others from the create layout over all nodes.
    bar.set_message("slot table");
    scratch.ring(con, KEY, &[])?;
    let mut add = vec!["RING.ADD".to_string(), KEY.to_string()];
    add.extend(names.iter().cloned());
    query(con, &add)?;
    let slots = member_slots(con, &members)?;
    let owners_of = |table: &[Option<usize>]| -> Vec<Option<usize>> {
        slots
            .iter()
            .map(|&s| table.get(s).copied().flatten())
            .collect()
    };
    let mut owners = Vec::new();
    for view in &subsets {
        scratch.ring(con, KEY, &[])?;
        query(con, &add)?;
        let mut del = vec!["RING.DEL".to_string(), KEY.to_string()];
        del.extend(
            (0..c)
                .filter(|n| !view.contains(n))
                .map(|n| names[n].clone()),
        );
        if del.len() > 2 {
            query(con, &del)?;
        }
        owners.push(owners_of(&slot_table(con, &names)?));
        bar.inc(1);
    }
    rows.push(summarise("subsets", "slot table", &subsets, &owners, c));
    // The history: one ring follows it.
    scratch.ring(con, KEY, &[])?;
    let mut first = vec!["RING.ADD".to_string(), KEY.to_string()];
    first.extend(history[0].iter().map(|&n| names[n].clone()));
    query(con, &first)?;
    let mut tables = vec![slot_table(con, &names)?];
    for step in &steps {
        match *step {
            Step::Join(n) => query(con, &["RING.ADD", KEY, &names[n]])?,
            Step::Leave(n) => query(con, &["RING.DEL", KEY, &names[n]])?,
        };
        tables.push(slot_table(con, &names)?);
        bar.inc(1);
    }
    let owners: Vec<Vec<Option<usize>>> = tables.iter().map(|t| owners_of(t)).collect();
    rows.push(summarise("history", "slot table", &history, &owners, c));
    let slot_owners: Vec<u32> = (0..16384)
        .map(|s| {
            let mut o: Vec<usize> = tables.iter().filter_map(|t| t[s]).collect();
            o.sort_unstable();
            o.dedup();
            o.len() as u32
        })
        .collect();
    scratch.delete(con, KEY)?;
    bar.finish_and_clear();
    // Order: subsets then history, schemes in the order measured.
    rows.sort_by_key(|r| r.kind != "subsets");
    Ok(Outcome {
        rows,
        slot_owners,
        steps,
    })
}

/// The table of a run.
pub fn table(rows: &[Row]) -> Table {
    let mut t = Table::new(&[
        "views",
        "scheme",
        "view_count",
        "nodes",
        "smallest_view",
        "spread_mean",
        "spread_p99",
        "spread_max",
        "load_max",
        "load_mean",
    ]);
    for r in rows {
        t.push(vec![
            r.kind.clone(),
            r.scheme.clone(),
            r.views.to_string(),
            r.nodes.to_string(),
            r.smallest.to_string(),
            fixed(r.spread_mean, 3),
            r.spread_p99.to_string(),
            r.spread_max.to_string(),
            fixed(r.load_max, 3),
            fixed(r.load_mean, 3),
        ]);
    }
    t
}

/// `(start, end, owners)` runs of slots with the same count of distinct owners.
fn owner_runs(slot_owners: &[u32]) -> Vec<(usize, usize, u32)> {
    let mut runs: Vec<(usize, usize, u32)> = Vec::new();
    for (s, &o) in slot_owners.iter().enumerate() {
        match runs.last_mut() {
            Some(last) if last.2 == o && last.1 + 1 == s => last.1 = s,
            _ => runs.push((s, s, o)),
        }
    }
    runs
}

/// Writes `name.md`, `name.csv` and `name.svg`; returns the Markdown.
pub fn write_outputs(dir: &Path, name: &str, outcome: &Outcome, opts: &Options) -> Result<String> {
    let t = table(&outcome.rows);
    let c = opts.nodes as f64;
    let bound = opts.t as f64 * c.log2();
    let most = outcome.slot_owners.iter().copied().max().unwrap_or(0);
    let runs = owner_runs(&outcome.slot_owners);
    let top: Vec<String> = runs
        .iter()
        .filter(|r| r.2 == most)
        .take(8)
        .map(|&(a, b, _)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    let mut histogram: Vec<(u32, usize)> = Vec::new();
    for &o in &outcome.slot_owners {
        match histogram.iter_mut().find(|h| h.0 == o) {
            Some(h) => h.1 += 1,
            None => histogram.push((o, 1)),
        }
    }
    histogram.sort_unstable();
    let hist: Vec<String> = histogram
        .iter()
        .map(|(o, n)| format!("{n} slots had {o}"))
        .collect();
    let joins = outcome
        .steps
        .iter()
        .filter(|s| matches!(s, Step::Join(_)))
        .count();
    let md = format!(
        "# Spread and load (Karger et al. 1997)\n\n\
         {} members `key:0` ..; C = {} nodes named {}; every view holds at least C/t = {} \
         nodes (t = {}). Subsets: {} random subsets (the first is every node). History: the \
         node sets before and after each of {} steps ({} joins, {} leaves) from the first {} \
         nodes. Spread: distinct nodes a member is put on over the views (mean, 99th \
         percentile, max); load: distinct members a node is given over the views, divided by \
         members/C (max and mean; the mean equals the mean spread).\n\n{}\n\
         For comparison, the paper's bound O(t log C) at t = {}, C = {}: t log2 C = {:.1} \
         (up to its constant). Modulo's spread has no such bound: it grows with the number of \
         distinct view sizes.\n\n\
         Slot table over the history: {}. The slots that changed owner most ({} owners): {}.\n",
        opts.members,
        opts.nodes,
        opts.names.replace("{}", "N"),
        opts.nodes.div_ceil(opts.t.max(1)),
        opts.t,
        opts.views,
        outcome.steps.len(),
        joins,
        outcome.steps.len() - joins,
        (3 * opts.nodes).div_ceil(4),
        t.markdown(),
        opts.t,
        opts.nodes,
        bound,
        hist.join(", "),
        most,
        top.join(", ")
    );
    report::write(dir, &format!("{name}.md"), &md)?;
    report::write(dir, &format!("{name}.csv"), &t.csv())?;
    // The chart: mean and max spread per scheme for both kinds; distinct owners per slot.
    let schemes: Vec<String> = {
        let mut s: Vec<String> = Vec::new();
        for r in &outcome.rows {
            if !s.contains(&r.scheme) {
                s.push(r.scheme.clone());
            }
        }
        s
    };
    let at = |scheme: &str| schemes.iter().position(|s| s == scheme).unwrap_or(0) as f64;
    let mut left = Vec::new();
    for (k, kind) in ["subsets", "history"].iter().enumerate() {
        let rows: Vec<&Row> = outcome.rows.iter().filter(|r| r.kind == *kind).collect();
        let shift = if k == 0 { -0.1 } else { 0.1 };
        left.push(Series {
            markers_only: true,
            dashed: k == 1,
            ..Series::line(
                format!("{kind}: mean spread"),
                rows.iter()
                    .map(|r| (at(&r.scheme) + shift, r.spread_mean))
                    .collect(),
                2 * k,
            )
        });
        left.push(Series {
            markers_only: true,
            dashed: k == 1,
            ..Series::line(
                format!("{kind}: max spread"),
                rows.iter()
                    .map(|r| (at(&r.scheme) + shift, f64::from(r.spread_max)))
                    .collect(),
                2 * k + 1,
            )
        });
    }
    let groups: Vec<(f64, f64)> = outcome
        .slot_owners
        .chunks(64)
        .enumerate()
        .map(|(g, chunk)| {
            (
                (g * 64) as f64,
                f64::from(chunk.iter().copied().max().unwrap_or(0)),
            )
        })
        .collect();
    report::svg_panels(
        &dir.join(format!("{name}.svg")),
        &format!(
            "Spread: on how many different nodes one key lands when {} clients each see a \
             different part of {} nodes (lower is better)",
            opts.views, opts.nodes
        ),
        vec![
            Panel {
                chart: Chart {
                    title:
                        "distinct nodes per key, over random subsets and over a join/leave history",
                    x_label: "scheme",
                    y_label: "distinct nodes per key (lower is better)",
                    x_log: false,
                    y_log: false,
                    x_names: schemes.clone(),
                    legend: SeriesLabelPosition::UpperLeft,
                },
                series: left,
                width: 1,
            },
            Panel {
                chart: Chart {
                    title: "Slot table over the history: distinct owners per slot",
                    x_label: "slot (max over 64)",
                    y_label: "distinct owners",
                    x_log: false,
                    y_log: false,
                    x_names: Vec::new(),
                    legend: SeriesLabelPosition::UpperRight,
                },
                series: vec![Series::line(
                    "slot table".into(),
                    groups,
                    report::scheme_colour("slot table"),
                )],
                width: 1,
            },
        ],
    )?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modulo_by_hand() {
        // Items with hashes 0..5; view 1 = nodes [0, 1] (h mod 2), view 2 = [0, 1, 2] (h mod 3).
        // Owners: view 1 0 1 0 1 0 1; view 2 0 1 2 0 1 2. Spread: items 0 and 1 stay (1),
        // items 2..5 have two owners. Load: node 0 gets {0, 2, 4} and {0, 3}: 4 items; node 1
        // {1, 3, 5} and {1, 4}: 4; node 2 {2, 5}: 2. Sum of spreads = sum of loads = 10.
        let owners: Vec<Vec<Option<usize>>> = [2u64, 3]
            .iter()
            .map(|&n| (0..6u64).map(|h| Some((h % n) as usize)).collect())
            .collect();
        let (sigma, lambda) = spread_load(&owners, 3);
        assert_eq!(sigma, vec![1, 1, 2, 2, 2, 2]);
        assert_eq!(lambda, vec![4, 4, 2]);
        let views = vec![vec![0, 1], vec![0, 1, 2]];
        let row = summarise("subsets", "modulo", &views, &owners, 3);
        assert!((row.spread_mean - 10.0 / 6.0).abs() < 1e-12);
        assert_eq!((row.spread_p99, row.spread_max, row.smallest), (2, 2, 2));
        // I/C = 2 items per node: max load 4 / 2, mean (10 / 3) / 2.
        assert!((row.load_max - 2.0).abs() < 1e-12);
        assert!((row.load_mean - 10.0 / 6.0).abs() < 1e-12);
    }

    #[test]
    fn a_ring_by_hand() {
        // A circle of 40: node A's point at 10, B's at 20, C's at 30; items at 5, 15, 25, 35,
        // each owned by the first point at or after it, wrapping. Views {A,B,C}, {A,B}, {B,C}:
        // item 5 -> A, A, B; 15 -> B, B, B; 25 -> C, A, C; 35 -> A, A, B.
        let points = [(10u64, 0usize), (20, 1), (30, 2)];
        let owner = |view: &[usize], h: u64| {
            let mut pts: Vec<(u64, usize)> = points
                .iter()
                .copied()
                .filter(|p| view.contains(&p.1))
                .collect();
            pts.sort_unstable();
            pts.iter().find(|p| p.0 >= h).or(pts.first()).map(|p| p.1)
        };
        let views = [vec![0, 1, 2], vec![0, 1], vec![1, 2]];
        let owners: Vec<Vec<Option<usize>>> = views
            .iter()
            .map(|v| [5u64, 15, 25, 35].iter().map(|&h| owner(v, h)).collect())
            .collect();
        assert_eq!(owners[1], vec![Some(0), Some(1), Some(0), Some(0)]);
        let (sigma, lambda) = spread_load(&owners, 3);
        assert_eq!(sigma, vec![2, 1, 2, 2]);
        // A: {5, 25, 35}; B: {5, 15, 35}; C: {25}.
        assert_eq!(lambda, vec![3, 3, 1]);
    }

    #[test]
    fn views_respect_their_least_size() {
        let mut rng = Rng::new(7);
        let subsets = subset_views(10, 2, 20, &mut rng);
        assert_eq!(subsets.len(), 20);
        assert_eq!(subsets[0], (0..10).collect::<Vec<_>>());
        assert!(subsets
            .iter()
            .all(|v| v.len() >= 5 && v.windows(2).all(|w| w[0] < w[1])));
        let (history, steps) = history_views(10, 2, 30, &mut rng);
        assert_eq!(history.len(), 31);
        assert_eq!(steps.len(), 30);
        assert!(history.iter().all(|v| v.len() >= 5 && v.len() <= 10));
        for (w, step) in history.windows(2).zip(&steps) {
            match *step {
                Step::Join(n) => assert!(!w[0].contains(&n) && w[1].contains(&n)),
                Step::Leave(n) => assert!(w[0].contains(&n) && !w[1].contains(&n)),
            }
        }
    }
}
