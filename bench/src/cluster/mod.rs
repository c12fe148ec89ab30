//! `cluster`: what a change of masters costs on a real Redis Cluster (masters joining, leaving,
//! or the rebalance pending after `redis-cli --cluster add-node`), in slots, keys and bytes,
//! per move and per master, predicted from the live cluster and, on a throw-away cluster,
//! checked against the real `redis-cli --cluster` run.
//!
//! Two ways to predict, from one seed address (the node `redis-cli --cluster rebalance` would
//! be run against):
//! - **read-only** ([`readonly`]; when a master lacks the module, or with `--no-module`):
//!   nothing is loaded and nothing is written. The plan is the engine's, from the seed's
//!   `CLUSTER NODES`; the keys are read with `SCAN` on each master (at most
//!   `--max-keys-per-sec` a second per master) and hashed here for the rings and modulo.
//! - **with the module** ([`predict`]): `RING.MIRROR` and `RING.PLAN` on the seed, and each
//!   master evaluates its own keys with `RING.MOVES ... SLOTS` on a copy of the mirror (a key
//!   with a TTL, deleted at the end): the key names stay on the servers.
//!
//! Both count live keys only (a key past its expiry is never migrated), and both measure the
//! bytes of the keys the slot plan moves the same way ([`sizing`]): the length of each key's
//! `DUMP` payload (what `MIGRATE` sends) and `MEMORY USAGE key SAMPLES 0` (what it takes on
//! the target), every key, or `--bytes-sample N` keys a slot with a stated error. The
//! rebalance's duration is estimated from slots, keys and bytes ([`model`]).
//!
//! With `--local N` (no `--url`), the program starts N masters on a fixed port block (stable
//! names, so that the ring rows are the same from run to run), loads keys, predicts, performs
//! the change for real ([`local`]) and compares ([`report`]).

pub(crate) mod live;
mod local;
mod method;
pub mod model;
mod predict;
mod readonly;
mod report;
mod sizing;

use crate::common::Global;
use anyhow::{bail, Context, Result};
use local::{Local, Real};
use predict::Prediction;
use ringslot_engine::change::DEFAULT_THRESHOLD;
use ringslot_engine::{Change, Flavour};
use ringslot_harness::Server;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

/// `ringslot-bench cluster`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// With --url: masters that join, as ip:port (comma-separated or repeated): each one
    /// `add-node`d, then one rebalance.
    #[arg(long, value_name = "IP:PORT", value_delimiter = ',')]
    add: Vec<String>,
    /// With --add: the joining masters' weight (redis-cli --cluster-weight; default 1).
    #[arg(long, requires = "add")]
    weight: Option<u32>,
    /// With --url: masters that leave (comma-separated or repeated): drained in one rebalance
    /// (weight 0 each), then `del-node`d.
    #[arg(
        long,
        value_name = "IP:PORT",
        value_delimiter = ',',
        conflicts_with = "add"
    )]
    del: Vec<String>,
    /// With --url: the rebalance pending now (after `add-node`: the masters without slots
    /// join), as `redis-cli --cluster rebalance <seed> --cluster-use-empty-masters` makes it.
    #[arg(long, conflicts_with_all = ["add", "del"])]
    rebalance: bool,
    /// redis-cli's --cluster-threshold for a pending rebalance, in percent.
    #[arg(long, default_value_t = DEFAULT_THRESHOLD)]
    threshold: f64,
    /// Without --url: masters of the throw-away cluster [default: 3].
    #[arg(long)]
    local: Option<usize>,
    /// Without --url: masters that join in one rebalance [default: 1].
    #[arg(long, conflicts_with = "leave")]
    join: Option<usize>,
    /// Without --url: the last masters leave (drained in one rebalance, then removed).
    #[arg(long)]
    leave: Option<usize>,
    /// Without --url: the joining masters are `add-node`d before the prediction, which then
    /// predicts the pending rebalance.
    #[arg(long, conflicts_with = "leave")]
    pending: bool,
    /// Without --url: keys loaded (`key:0` ..., values of 16 to 1024 bytes) [default: 1000000].
    #[arg(long)]
    keys: Option<u64>,
    /// Without --url: keys of one hot hash tag (`{hot}:0` ..., 4 KiB values) [default: 0].
    #[arg(long)]
    hot_keys: Option<u64>,
    /// Without --url: the first port of the masters (the others follow; joining masters
    /// last) [default: 30001].
    #[arg(long)]
    base_port: Option<u16>,
    /// Predict read-only even when every master has the module.
    #[arg(long, conflicts_with = "both_modes")]
    no_module: bool,
    /// Without --url: predict both ways, with the module and read-only, and compare.
    #[arg(long)]
    both_modes: bool,
    /// Keys a second read from each master (SCAN, DUMP); 0: no limit.
    #[arg(long, default_value_t = 200_000)]
    max_keys_per_sec: u64,
    /// Measure the bytes of this many keys a slot (the rest estimated, with the error
    /// stated) instead of every key the plan moves.
    #[arg(long, value_name = "N")]
    bytes_sample: Option<u64>,
    /// Ring flavours evaluated, comma-separated (modulo comes with them).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "native,ketama,groupcache",
        value_parser = crate::common::flavour
    )]
    flavours: Vec<Flavour>,
    /// With the module: slots per RING.MOVES ... SLOTS call (the work each call holds a
    /// master for).
    #[arg(long, default_value_t = 256)]
    chunk: u16,
    /// With the module: seconds the ring copies live on the masters if the run dies.
    #[arg(long, default_value_t = 600)]
    ttl: u64,
    /// Without --url: also SCAN every master before and after, up to this many keys, to
    /// count the keys and bytes that really moved key by key.
    #[arg(long, default_value_t = 200_000)]
    scan_limit: u64,
    /// Without --url: redis-cli's --cluster-pipeline for the real rebalance.
    #[arg(long, default_value_t = 10)]
    pipeline: u32,
    /// The slots will move by Valkey 9's atomic slot migration (CLUSTER MIGRATESLOTS, as
    /// `valkey-cli --cluster rebalance --cluster-use-atomic-slot-migration` runs it): the
    /// report's verdict is for that method. Needs Valkey 9 or later on every master. Without
    /// --url, the change is made that way (one MIGRATESLOTS a move of the plan, polled every
    /// 100 ms) instead of by redis-cli.
    #[arg(long)]
    atomic: bool,
    /// Stem of the output files.
    #[arg(long, default_value = "cluster")]
    name: String,
}

/// Runs `cluster`: a prediction on the live cluster at `--url`, or a local run (predicted,
/// then made for real), and writes the report.
pub fn run(g: &Global, a: &Args) -> Result<()> {
    if a.chunk == 0 {
        bail!("--chunk needs at least 1 slot");
    }
    if a.bytes_sample == Some(0) {
        bail!("--bytes-sample needs at least 1 key a slot");
    }
    if a.flavours.is_empty() {
        bail!("--flavours needs at least one flavour");
    }
    let opts = Options {
        flavours: a.flavours.clone(),
        chunk: a.chunk,
        ttl_secs: a.ttl,
        scan_limit: a.scan_limit,
        pipeline: a.pipeline,
        no_module: a.no_module,
        max_keys_per_sec: a.max_keys_per_sec,
        bytes_sample: a.bytes_sample,
        atomic: a.atomic,
    };
    // Ctrl-C: the workers stop at their next chunk and the ring copies are deleted; the
    // servers of a local run are killed at once. A second Ctrl-C exits.
    ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(130);
        }
        let pids: Vec<String> = CHILDREN
            .lock()
            .map(|c| c.iter().map(u32::to_string).collect())
            .unwrap_or_default();
        if !pids.is_empty() {
            eprintln!("ringslot-bench: interrupted; stopping the servers of the local cluster");
            let _ = std::process::Command::new("kill")
                .arg("-9")
                .args(&pids)
                .status();
            std::process::exit(130);
        }
        eprintln!("ringslot-bench: interrupted; removing what the run made");
    })
    .context("install the Ctrl-C handler")?;
    let outcome = match &g.url {
        Some(url) => {
            let local_only = [
                ("--local", a.local.is_some()),
                ("--join", a.join.is_some()),
                ("--leave", a.leave.is_some()),
                ("--pending", a.pending),
                ("--keys", a.keys.is_some()),
                ("--hot-keys", a.hot_keys.is_some()),
                ("--base-port", a.base_port.is_some()),
                ("--both-modes", a.both_modes),
            ];
            if let Some((flag, _)) = local_only.iter().find(|(_, given)| *given) {
                bail!("{flag} is for a throw-away cluster (without --url)");
            }
            let change = if !a.add.is_empty() {
                MasterChange::Add {
                    nodes: a.add.clone(),
                    weight: a.weight,
                }
            } else if !a.del.is_empty() {
                MasterChange::Del {
                    nodes: a.del.clone(),
                }
            } else if a.rebalance {
                MasterChange::Rebalance {
                    threshold: a.threshold,
                }
            } else {
                bail!(
                    "with --url, name the change: --add ip:port[,ip:port...] [--weight w], \
                     --del ip:port[,ip:port...] or --rebalance (the one pending after add-node)"
                )
            };
            predict::predict_url(url, change, &opts)?
        }
        None => {
            if !a.add.is_empty() || !a.del.is_empty() || a.rebalance {
                bail!(
                    "--add, --del and --rebalance name a change on a live cluster (--url); a \
                     local run takes --join K, --leave K or --join K --pending"
                );
            }
            let module = g.module_path()?;
            let binary = g.redis_server.clone();
            let builder = move || Server::builder().binary(&binary).module(&module);
            let masters = a.local.unwrap_or(3);
            let (join, leave) = match (a.join, a.leave) {
                (_, Some(k)) => (0, k),
                (Some(k), None) => (k, 0),
                (None, None) => (1, 0),
            };
            let plan = Local {
                masters,
                join,
                leave,
                pending: a.pending,
                threshold: a.threshold,
                keys: a.keys.unwrap_or(1_000_000),
                hot_keys: a.hot_keys.unwrap_or(0),
                base_port: a.base_port.unwrap_or(30001),
                both_modes: a.both_modes,
            };
            local::local(&plan, &builder, &opts)?
        }
    };
    let md = report::write_outputs(&g.out, &a.name, &outcome, &opts)?;
    println!("{md}");
    crate::report::announce();
    Ok(())
}

/// Set by Ctrl-C: workers stop at the next chunk, and the run cleans up.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Processes started by a local run (their pids), killed by a Ctrl-C handler.
pub static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// The change of masters to predict.
#[derive(Debug, Clone, PartialEq)]
pub enum MasterChange {
    /// Masters (`ip:port`) join with `weight` (redis-cli's default 1): each `add-node`d, then
    /// one rebalance.
    Add {
        nodes: Vec<String>,
        weight: Option<u32>,
    },
    /// Masters (`ip:port`) are drained in one rebalance and leave.
    Del { nodes: Vec<String> },
    /// The rebalance pending now, with redis-cli's `--cluster-threshold`.
    Rebalance { threshold: f64 },
}

impl MasterChange {
    /// The change as `RING.MOVES` / `RING.PLAN` take it (node lists in the count form, which
    /// no node name can end early).
    fn args(&self) -> Vec<String> {
        let nodes = |list: &[String]| {
            let mut a = vec!["NODES".to_string(), list.len().to_string()];
            a.extend(list.iter().cloned());
            a
        };
        match self {
            MasterChange::Add {
                nodes: list,
                weight,
            } => {
                let mut a = vec!["ADD".to_string()];
                if let Some(w) = weight {
                    a.extend(["WEIGHT".to_string(), w.to_string()]);
                }
                a.extend(nodes(list));
                a
            }
            MasterChange::Del { nodes: list } => {
                let mut a = vec!["DEL".to_string()];
                a.extend(nodes(list));
                a
            }
            MasterChange::Rebalance { threshold } => {
                vec![
                    "REBALANCE".to_string(),
                    "THRESHOLD".to_string(),
                    threshold.to_string(),
                ]
            }
        }
    }

    /// The change for the engine.
    fn change(&self) -> Change {
        let bytes = |list: &[String]| list.iter().map(|n| n.as_bytes().to_vec()).collect();
        match self {
            MasterChange::Add { nodes, weight } => Change::Add {
                nodes: bytes(nodes),
                weight: weight.map(i64::from),
            },
            MasterChange::Del { nodes } => Change::Del {
                nodes: bytes(nodes),
            },
            MasterChange::Rebalance { threshold } => Change::Rebalance {
                threshold: *threshold,
                weights: Vec::new(),
            },
        }
    }

    /// The masters the change names (none for a rebalance).
    fn named(&self) -> &[String] {
        match self {
            MasterChange::Add { nodes, .. } | MasterChange::Del { nodes } => nodes,
            MasterChange::Rebalance { .. } => &[],
        }
    }

    /// The change as a title says it.
    fn label(&self) -> String {
        match self {
            MasterChange::Add { nodes, weight } => {
                let w = weight.map_or(String::new(), |w| format!(" (weight {w})"));
                format!("{} joining{w}: {}", plural(nodes.len()), nodes.join(", "))
            }
            MasterChange::Del { nodes } => {
                format!("{} leaving: {}", plural(nodes.len()), nodes.join(", "))
            }
            MasterChange::Rebalance { threshold } => {
                format!("the pending rebalance (threshold {threshold}%)")
            }
        }
    }
}

/// "1 master", "3 masters".
fn plural(n: usize) -> String {
    if n == 1 {
        "1 master".to_string()
    } else {
        format!("{n} masters")
    }
}

/// What a cluster run does.
#[derive(Debug, Clone)]
pub struct Options {
    /// Ring flavours evaluated besides the slot scheme (modulo comes with the first).
    pub flavours: Vec<Flavour>,
    /// Slots per `RING.MOVES ... SLOTS` call.
    pub chunk: u16,
    /// Seconds the ring copies live if the run dies.
    pub ttl_secs: u64,
    /// With --local: `SCAN` every master before and after when the keys are at most this.
    pub scan_limit: u64,
    /// redis-cli's `--cluster-pipeline` for the real rebalance.
    pub pipeline: u32,
    /// Predict read-only even when the module is everywhere.
    pub no_module: bool,
    /// Keys a second read from each master; 0: no limit.
    pub max_keys_per_sec: u64,
    /// Keys a slot whose bytes are measured (`None`: every key the plan moves).
    pub bytes_sample: Option<u64>,
    /// The slots will move by Valkey 9's atomic slot migration (with --local: the change is
    /// made that way, as valkey-cli --cluster-use-atomic-slot-migration makes it).
    pub atomic: bool,
}

/// The result of a run, for the report.
pub struct Outcome {
    prediction: Prediction,
    /// The read-only prediction of the same change, when both ways ran.
    read_only: Option<Prediction>,
    real: Option<Real>,
    change: MasterChange,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_as_ring_plan_takes_it() {
        let add = MasterChange::Add {
            nodes: vec!["10.0.0.4:6379".into(), "10.0.0.5:6379".into()],
            weight: Some(2),
        };
        assert_eq!(
            add.args(),
            vec![
                "ADD",
                "WEIGHT",
                "2",
                "NODES",
                "2",
                "10.0.0.4:6379",
                "10.0.0.5:6379"
            ]
        );
        assert_eq!(add.named().len(), 2);
        assert_eq!(
            add.change(),
            Change::Add {
                nodes: vec![b"10.0.0.4:6379".to_vec(), b"10.0.0.5:6379".to_vec()],
                weight: Some(2)
            }
        );
        let del = MasterChange::Del {
            nodes: vec!["10.0.0.1:6379".into()],
        };
        assert_eq!(del.args(), vec!["DEL", "NODES", "1", "10.0.0.1:6379"]);
        assert_eq!(del.label(), "1 master leaving: 10.0.0.1:6379");
        let pending = MasterChange::Rebalance { threshold: 2.0 };
        assert_eq!(pending.args(), vec!["REBALANCE", "THRESHOLD", "2"]);
        assert!(pending.named().is_empty());
    }
}
