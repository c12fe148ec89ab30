//! `cluster`: what a change of masters costs on a real Redis Cluster, predicted exactly from
//! the live cluster and, on a throw-away cluster, checked against the real rebalance.
//!
//! The prediction, from one seed address:
//! 1. The topology: the seed's `CLUSTER NODES`, refused while a slot is migrating or
//!    importing, a node is failing or the nodes disagree; every master must have loaded the
//!    module (a ring key cannot migrate to a master without it).
//! 2. Per-slot key counts (`CLUSTER COUNTKEYSINSLOT` on each slot's master, one plain
//!    connection per master: a cluster client would follow `MOVED` and count a node twice).
//! 3. The plan: `RING.MIRROR` of the live cluster, then `RING.PLAN` of the change (the slot
//!    moves `redis-cli --cluster rebalance --cluster-use-empty-masters` makes). Keys the slot
//!    scheme moves = the sum of the counts of the moved slots: exact, no key read.
//! 4. The ring schemes (native, ketama, groupcache at their defaults) and modulo: each master
//!    evaluates its own keys with `RING.MOVES <its mirror copy> <change> SLOTS a b` over its
//!    slots in chunks, masters in parallel; one flavour at a time, so that the only extra key
//!    in a master's slots is the copy being evaluated, which `SLOTS` leaves out. Copies carry
//!    a TTL, so that a run that dies leaves nothing behind for long, and are deleted at the
//!    end. The topology is read again at the end: a change meanwhile fails the run.
//!
//! With `--local N`, the program starts N masters on free loopback ports, loads the keys,
//! predicts, then performs the change for real (`redis-cli --cluster add-node` + `rebalance
//! --cluster-use-empty-masters`, or a weight-0 rebalance + `del-node`) and counts the keys that
//! really moved from per-slot counts (and a full `SCAN` of every master before and after when
//! the keyspace is small).

//! The files: [`live`] reads and checks the live cluster, [`predict`] predicts a change from
//! it, [`local`] makes a throw-away cluster and the change for real, [`report`] writes the
//! results.

mod live;
mod local;
mod predict;
mod report;

use crate::common::Global;
use anyhow::{bail, Context, Result};
use local::Real;
use predict::Prediction;
use ringslot_engine::Flavour;
use ringslot_harness::Server;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

/// `ringslot-bench cluster`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Without --url: masters of the throw-away cluster.
    #[arg(long, default_value_t = 3)]
    local: usize,
    /// Without --url: keys loaded (`key:0` ...).
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Without --url: the last master leaves (drained, then removed) instead of one joining.
    #[arg(long)]
    remove: bool,
    /// With --url: the master that joins, as `ip:port`.
    #[arg(long, value_name = "IP:PORT", conflicts_with = "del")]
    add: Option<String>,
    /// With --add: its weight (redis-cli --cluster-weight; default 1).
    #[arg(long, requires = "add")]
    weight: Option<u32>,
    /// With --url: the master that leaves, as `ip:port`.
    #[arg(long, value_name = "IP:PORT")]
    del: Option<String>,
    /// Ring flavours evaluated, comma-separated (modulo comes with them).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "native,ketama,groupcache",
        value_parser = crate::common::flavour
    )]
    flavours: Vec<Flavour>,
    /// Slots per RING.MOVES ... SLOTS call (the work each call holds a master for).
    #[arg(long, default_value_t = 256)]
    chunk: u16,
    /// Seconds the ring copies live on the masters if the run dies.
    #[arg(long, default_value_t = 600)]
    ttl: u64,
    /// Without --url: also SCAN every master before and after, up to this many keys.
    #[arg(long, default_value_t = 200_000)]
    scan_limit: u64,
    /// Without --url: redis-cli's --cluster-pipeline for the real rebalance.
    #[arg(long, default_value_t = 10)]
    pipeline: u32,
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
    let opts = Options {
        flavours: a.flavours.clone(),
        chunk: a.chunk,
        ttl_secs: a.ttl,
        scan_limit: a.scan_limit,
        pipeline: a.pipeline,
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
        eprintln!("ringslot-bench: interrupted; removing the ring copies");
    })
    .context("install the Ctrl-C handler")?;
    let outcome = match &g.url {
        Some(url) => {
            let change = match (&a.add, &a.del) {
                (Some(node), None) => MasterChange::Add {
                    node: node.clone(),
                    weight: a.weight,
                },
                (None, Some(node)) => MasterChange::Del { node: node.clone() },
                _ => bail!(
                    "with --url, name the change: --add ip:port [--weight w] or --del ip:port"
                ),
            };
            predict::predict_url(url, change, &opts)?
        }
        None => {
            if a.add.is_some() || a.del.is_some() {
                bail!("--add and --del name a change on a live cluster (--url); a local run adds a master, or removes one with --remove");
            }
            let module = g.module_path()?;
            let binary = g.redis_server.clone();
            let builder = move || Server::builder().binary(&binary).module(&module);
            local::local(a.local, a.keys, a.remove, &builder, &opts)?
        }
    };
    let md = report::write_outputs(&g.out, &a.name, &outcome)?;
    println!("{md}");
    eprintln!("wrote {}/{}.{{md,csv,svg}}", g.out.display(), a.name);
    Ok(())
}

/// Set by Ctrl-C: workers stop at the next chunk, and the run cleans up.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Processes started by a local run (their pids), killed by a Ctrl-C handler.
pub static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// The change of masters to predict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MasterChange {
    /// A master `node` (`ip:port`) joins with `weight` (redis-cli's default 1).
    Add { node: String, weight: Option<u32> },
    /// The master `node` (`ip:port`) is drained and leaves.
    Del { node: String },
}

impl MasterChange {
    /// The change as `RING.MOVES` / `RING.PLAN` arguments.
    fn args(&self) -> Vec<String> {
        match self {
            MasterChange::Add { node, weight } => {
                let mut a = vec!["ADD".to_string(), node.clone()];
                if let Some(w) = weight {
                    a.extend(["WEIGHT".to_string(), w.to_string()]);
                }
                a
            }
            MasterChange::Del { node } => vec!["DEL".to_string(), node.clone()],
        }
    }

    /// The node the change names.
    fn node(&self) -> &str {
        match self {
            MasterChange::Add { node, .. } | MasterChange::Del { node } => node,
        }
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
}

/// The result of a run, for the report.
pub struct Outcome {
    prediction: Prediction,
    real: Option<Real>,
    change: MasterChange,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_as_ring_plan_takes_it() {
        let add = MasterChange::Add {
            node: "10.0.0.4:6379".into(),
            weight: Some(2),
        };
        assert_eq!(add.args(), vec!["ADD", "10.0.0.4:6379", "WEIGHT", "2"]);
        assert_eq!(add.node(), "10.0.0.4:6379");
        let del = MasterChange::Del {
            node: "10.0.0.1:6379".into(),
        };
        assert_eq!(del.args(), vec!["DEL", "10.0.0.1:6379"]);
    }
}
