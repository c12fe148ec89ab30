//! `ringslot predict`: what a change of masters costs on a live Redis Cluster (masters
//! joining, leaving, or the rebalance pending after `redis-cli --cluster add-node`), in slots,
//! keys and bytes, per move and per master, with the duration and memory of each migration
//! method.
//!
//! Two ways to predict, from one seed address (the node `redis-cli --cluster rebalance` would
//! be run against):
//! - **read-only** ([`read_only`]; when a master lacks the module, or with `--no-module`):
//!   nothing is loaded and nothing is written. The plan is the engine's, from the seed's
//!   `CLUSTER NODES`; the keys are read with `SCAN` on each master (at most
//!   `--max-keys-per-sec` a second per master) and hashed here for the rings and modulo.
//! - **with the module** ([`with_module`]): `RING.MIRROR` and `RING.PLAN` on the seed, and
//!   each master evaluates its own keys with `RING.MOVES ... SLOTS` on a copy of the mirror (a
//!   key with a TTL, deleted at the end): the key names stay on the servers.
//!
//! Both count live keys only (a key past its expiry is never migrated), and both measure the
//! bytes of the keys the slot plan moves the same way ([`sizing`]): the length of each key's
//! `DUMP` payload (what `MIGRATE` sends) and `MEMORY USAGE key SAMPLES 0` (what it takes on
//! the target), every key, or `--bytes-sample N` keys a slot with a stated error. The
//! rebalance's duration is estimated from slots, keys and bytes ([`model`]), and per migration
//! method with each master's memory ([`method`]). [`report`] writes it for people.

pub mod change;
pub mod estimate;
pub mod live;
pub mod method;
pub mod model;
pub mod options;
pub mod plan;
pub mod prediction;
pub mod read_only;
pub mod real;
pub mod report;
pub mod sizing;
pub mod with_module;

pub use change::MasterChange;
pub use live::INTERRUPTED;
pub use options::Options;
pub use report::Outcome;

use anyhow::{anyhow, bail, Result};
use live::{node_facts, read_topology, Holds, Prober};
use prediction::{add_methods, assemble, Prediction};
use redis::{ConnectionInfo, IntoConnectionInfo};
use std::time::Instant;

/// Predicts `change` on the cluster behind `seed`: with the module when every master has it
/// (and not `--no-module`), else read-only.
pub fn predict(seed: &ConnectionInfo, change: &MasterChange, opts: &Options) -> Result<Prediction> {
    let started = Instant::now();
    eprintln!("cluster: reading the topology ...");
    let topo = read_topology(seed)?;
    let names: Vec<String> = topo.masters.iter().map(|m| m.address.clone()).collect();
    match change {
        MasterChange::Add { nodes, .. } => {
            if let Some(n) = nodes.iter().find(|n| names.contains(n)) {
                let empty = topo
                    .masters
                    .iter()
                    .any(|m| &m.address == n && m.slots.is_empty());
                let hint = if empty {
                    ": it serves no slot yet (add-node done?); predict the pending rebalance \
                     with --rebalance"
                } else {
                    ""
                };
                bail!("{n} is already a master of this cluster{hint}")
            }
        }
        MasterChange::Del { nodes } => {
            if let Some(n) = nodes.iter().find(|n| !names.contains(n)) {
                bail!(
                    "{n} is not a master of this cluster (masters: {})",
                    names.join(", ")
                )
            }
        }
        MasterChange::Rebalance { .. } => {}
    }
    if opts.atomic {
        // Before any key is read: --atomic needs every master to have atomic slot migration.
        for m in &topo.masters {
            let facts = node_facts(&m.info, &m.address).map_err(|e| {
                anyhow!(
                    "--atomic: cannot tell whether {} has atomic slot migration ({e:#}); INFO \
                     needs +info",
                    m.address
                )
            })?;
            if !facts.atomic {
                bail!(
                    "--atomic needs Valkey 9 or later on every master (CLUSTER MIGRATESLOTS): \
                     not on {}",
                    m.address
                );
            }
        }
    }
    let holds = Holds::default();
    let missing = topo.without_module()?;
    let prober = Prober::start(&topo.masters);
    let gathered = if opts.no_module || !missing.is_empty() {
        let why = if opts.no_module {
            "--no-module".to_string()
        } else {
            format!("the module is not loaded on {}", missing.join(", "))
        };
        eprintln!("cluster: predicting read-only ({why}) ...");
        read_only::predict_readonly(seed, &topo, change, opts, &holds, why)?
    } else {
        eprintln!("cluster: predicting with the module ...");
        with_module::predict_module(seed, &topo, change, opts, &holds)?
    };
    let waits = prober.finish();
    let mut prediction = assemble(&topo, change, gathered, &holds, waits, opts, started);
    add_methods(seed, &mut prediction, opts)?;
    Ok(prediction)
}

/// Predicts `change` on the cluster at `seed_url`.
pub fn predict_url(seed_url: &str, change: MasterChange, opts: &Options) -> Result<Outcome> {
    let seed = seed_url
        .into_connection_info()
        .map_err(|e| anyhow!("bad seed URL {seed_url}: {e}"))?;
    let prediction = predict(&seed, &change, opts)?;
    Ok(Outcome {
        prediction,
        read_only: None,
        real: None,
        change,
    })
}
