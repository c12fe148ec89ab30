//! `compat`: what one node joining and one leaving costs under the placements fleets really
//! run (nginx, HAProxy, Envoy, mcrouter, Predis, redis-rb, go-redis, pymemcache,
//! python-memcached, libmemcached / twemproxy),
//! beside Redis Cluster's slots and `hash mod N`, at several fleet sizes, measured on the
//! server with `RING.MOVES` (the keys `key:0 ..` of `--sample`, and the exact share of the hash
//! space that changes owner where there is one) and `RING.INFO` (balance).
//!
//! The node that leaves is the one in the middle of the node list, as a server taken out of a
//! proxy's configuration is: where a placement keys points by position (HAProxy without `id`),
//! the servers after it are renumbered and their keys move too (`between old` counts them).

use crate::common::{Global, Target};
use crate::report::{self, fixed, Table};
use crate::server::query;
use anyhow::{bail, Result};
use ringslot_engine::Flavour;
use ringslot_tool::reply::ring::{Moves, RingInfo};

/// The ring key a compat run uses (re-created for every placement and size).
const KEY: &str = "ringslot-bench:compat";

/// `ringslot-bench compat`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Fleet sizes (nodes of equal weight).
    #[arg(long, value_delimiter = ',', default_value = "4,10,100")]
    nodes: Vec<usize>,
    /// Members `key:0` .. evaluated by each what-if.
    #[arg(long, default_value_t = 200_000)]
    sample: u64,
    /// Placements (COMPAT names), comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "nginx,haproxy,envoy-ring,envoy-maglev,predis,predis-ketama,redis-rb,\
                         go-redis-ring,pymemcache,python-memcached,mcrouter-ch3,ketama,native"
    )]
    compat: Vec<String>,
    /// Report name (`<out>/<name>.md`).
    #[arg(long, default_value = "compat")]
    name: String,
}

/// The node names of a fleet of `n`: `10.0.x.y:6379` (every placement takes them; redis-rb
/// hashes them as `redis://10.0.x.y:6379/0`, Predis as written).
fn names(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.0.{}.{}:6379", i / 250, i % 250 + 1))
        .collect()
}

/// One placement at one size: join and leave of one node.
struct Row {
    compat: String,
    nodes: usize,
    join: (f64, f64, Option<f64>),
    leave: (f64, f64, Option<f64>),
    slots: (f64, f64),
    modulo: (f64, f64),
    peak_to_mean: f64,
}

/// `(moved fraction, between-old fraction, exact space)` of `scheme` in a RING.MOVES reply.
fn part(m: &Moves, scheme: &str) -> Result<(f64, f64, Option<f64>)> {
    let Some(s) = m.schemes.iter().find(|s| s.scheme == scheme) else {
        bail!("RING.MOVES gave no {scheme}");
    };
    let members = m.members.max(1) as f64;
    Ok((
        s.moved as f64 / members,
        s.between_old as f64 / members,
        s.space,
    ))
}

/// `ringslot-bench compat`.
pub fn run(g: &Global, a: &Args) -> Result<()> {
    if a.nodes.is_empty() || a.nodes.iter().any(|&n| n < 2) {
        bail!("--nodes needs fleet sizes of 2 or more");
    }
    for c in &a.compat {
        if Flavour::from_name(c.as_bytes()).is_none() {
            bail!("--compat: no placement named {c}");
        }
    }
    let mut target = Target::open(g, false)?;
    let con = &mut target.con;
    let mut rows = Vec::new();
    let progress = crate::common::bar((a.compat.len() * a.nodes.len()) as u64, "placements");
    for compat in &a.compat {
        for &n in &a.nodes {
            let fleet = names(n);
            target
                .scratch
                .ring(con, KEY, &["COMPAT".to_string(), compat.clone()])?;
            let mut add = vec!["RING.ADD".to_string(), KEY.to_string()];
            add.extend(fleet.iter().cloned());
            query(con, &add)?;
            let info = RingInfo::read(&query(con, &["RING.INFO", KEY])?)?;
            let moves = |con: &mut _, change: &[&str]| -> Result<Moves> {
                let mut cmd = vec!["RING.MOVES", KEY];
                cmd.extend_from_slice(change);
                let sample = a.sample.to_string();
                cmd.extend([
                    "SAMPLE",
                    sample.as_str(),
                    "SCHEMES",
                    "ring",
                    "slots",
                    "modulo",
                ]);
                Ok(Moves::read(&query(con, &cmd)?)?)
            };
            let joined = moves(con, &["ADD", "10.9.9.9:6379"])?;
            let middle = fleet.get(n / 2).cloned().unwrap_or_default();
            let left = moves(con, &["DEL", middle.as_str()])?;
            let slots = part(&joined, "slots")?;
            let modulo = part(&joined, "modulo")?;
            rows.push(Row {
                compat: compat.clone(),
                nodes: n,
                join: part(&joined, "ring")?,
                leave: part(&left, "ring")?,
                slots: (slots.0, part(&left, "slots")?.0),
                modulo: (modulo.0, part(&left, "modulo")?.0),
                peak_to_mean: info.ring_peak_to_mean,
            });
            target.scratch.delete(con, KEY)?;
            progress.inc(1);
        }
    }
    progress.finish_and_clear();
    let md = markdown(&rows, a.sample);
    report::write(&g.out, &format!("{}.csv", a.name), &table(&rows).csv())?;
    g.publish(&a.name, &md)
}

fn pct(x: f64) -> String {
    fixed(100.0 * x, 1)
}

fn table(rows: &[Row]) -> Table {
    let mut t = Table::new(&[
        "placement",
        "nodes",
        "join: moved %",
        "ideal %",
        "join: between old %",
        "leave: moved %",
        "ideal %",
        "leave: between old %",
        "peak-to-mean",
    ]);
    for r in rows {
        let n = r.nodes as f64;
        t.push(vec![
            r.compat.clone(),
            r.nodes.to_string(),
            pct(r.join.2.unwrap_or(r.join.0)),
            pct(1.0 / (n + 1.0)),
            pct(r.join.1),
            pct(r.leave.2.unwrap_or(r.leave.0)),
            pct(1.0 / n),
            pct(r.leave.1),
            fixed(r.peak_to_mean, 3),
        ]);
    }
    // Redis Cluster's slots and hash mod N, once per size (the same whatever the ring).
    let mut seen = Vec::new();
    for r in rows {
        if seen.contains(&r.nodes) {
            continue;
        }
        seen.push(r.nodes);
        let n = r.nodes as f64;
        for (name, (join, leave)) in [("Redis Cluster slots", r.slots), ("hash mod N", r.modulo)] {
            t.push(vec![
                name.to_string(),
                r.nodes.to_string(),
                pct(join),
                pct(1.0 / (n + 1.0)),
                "-".to_string(),
                pct(leave),
                pct(1.0 / n),
                "-".to_string(),
                "-".to_string(),
            ]);
        }
    }
    t
}

fn markdown(rows: &[Row], sample: u64) -> String {
    format!(
        "# What a change costs under the placements fleets run\n\n\
         One node of weight 1 joining, and the node in the middle of the list leaving, from \
         fleets of equal nodes named `10.0.x.y:6379`. Moved: the exact share of the hash \
         space that changes owner (rings), else of {sample} keys `key:0 ..`; between old: \
         keys moving between two nodes there before and after (a consistent placement moves \
         none); peak-to-mean: the busiest node's exact share of the ring over the mean. Redis \
         Cluster's slots are moved as `redis-cli --cluster rebalance` moves them. Made by \
         `ringslot-bench compat`.\n\n{}",
        table(rows).markdown()
    )
}
