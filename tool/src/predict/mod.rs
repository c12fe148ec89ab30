//! `ringslot predict`: what a change of masters costs on a live Redis Cluster (masters
//! joining, leaving, or the rebalance pending after `redis-cli --cluster add-node`), in slots,
//! keys and bytes, per move and per master, with the duration and memory of each migration
//! method.
//!
//! Two ways to predict, from one seed address (the node `redis-cli --cluster rebalance` would
//! be run against):
//! - **read-only** (`read_only.rs`, the default): nothing is loaded and nothing is written.
//!   The plan is the engine's, from the seed's `CLUSTER NODES`; the keys are read with `SCAN` on
//!   each master (at most `--max-keys-per-sec` a second per master) and hashed here for the
//!   rings and modulo.
//! - **with the module** (`with_module.rs`): `RING.MIRROR` and `RING.PLAN` on the seed, and
//!   each master evaluates its own keys with `RING.MOVES ... SLOTS` on a copy of the mirror (a
//!   key with a TTL, deleted at the end): the key names stay on the servers.
//!
//! Both count live keys only (a key past its expiry is never migrated), and both measure the
//! bytes of the keys the slot plan moves the same way (`sizing.rs`): the length of each key's
//! `DUMP` payload (what `MIGRATE` sends) and `MEMORY USAGE key SAMPLES 0` (what it takes on
//! the target), every key, or `--bytes-sample N` keys a slot with a stated error. The
//! rebalance's duration is estimated from the round trips and config writes it makes, priced
//! with what the prediction measures on the cluster ([`duration`]), and per migration method
//! with each master's memory ([`method`]). [`report`] writes it for people, a section at a
//! time. The cluster is reached and read through [`crate::cluster`]; a plan by weight
//! (`--by`) is written as [`crate::plan::SlotPlan`], which `ringslot apply` carries out.

pub mod big_keys;
pub mod by_weight;
pub mod capacity;
pub mod change;
pub mod duration;
pub mod estimate;
pub mod method;
pub(crate) mod nodes;
pub mod options;
pub mod picture;
pub mod prediction;
pub(crate) mod read_only;
pub mod report;
pub mod risk;
pub mod risks;
pub(crate) mod runbook;
pub(crate) mod sizing;
pub mod steps;
pub mod sums;
pub(crate) mod with_module;

pub use change::MasterChange;
pub use options::{Options, SizesBy, WeightBy, DEFAULT_TOLERANCE};
pub use prediction::Prediction;
pub use with_module::CHUNK_KEYS;

use crate::cluster::link::{Access, Link};
use crate::cluster::pacing::{ping_round_trips, Holds, Probe, Prober};
use crate::cluster::permissions;
use crate::cluster::reads::{dump_stats, node_facts, without_module};
use crate::cluster::snapshot::read_checked;
use crate::cluster::snapshot::Parts;
use crate::cluster::topology::LiveCluster;
use anyhow::{anyhow, bail, Result};
use prediction::{add_methods, assemble};
use std::collections::BTreeMap;
use std::time::Instant;

/// Predicts `change` on the cluster the seed of `access` belongs to: read-only, or with the
/// module when `opts.with_module` (which every master must have loaded). Errors, before any
/// key is read: options or a change that cannot be meant ([`Options::check`],
/// [`MasterChange::check`], removing every master, a replica or an unknown node named as a
/// master, a joining master already in the cluster), an unhealthy cluster, a node that does
/// not answer within the timeout.
pub fn predict(access: &Access, change: &MasterChange, opts: &Options) -> Result<Prediction> {
    opts.check()?;
    let mut opts = opts.clone();
    change.check()?;
    let started = Instant::now();
    let needs: Vec<permissions::Need> = if opts.with_module {
        permissions::READ_ONLY
            .iter()
            .chain(permissions::WITH_MODULE)
            .copied()
            .collect()
    } else {
        permissions::READ_ONLY.to_vec()
    };
    // The seed's rights first (it is asked for the topology), then every master's.
    let seed = access.seed();
    permissions::check(&[&seed], &needs, access.user())?;
    eprintln!("ringslot: reading the topology ...");
    let (mut snapshot, topo) = read_checked(access)?;
    check_against(change, &topo)?;
    let links: Vec<&Link> = topo.masters.iter().map(|m| &m.link).collect();
    let granted = permissions::check(&links, &needs, access.user())?;
    if opts.atomic {
        // Before any key is read: --atomic needs every master to have atomic slot migration.
        for m in &topo.masters {
            let facts = node_facts(&m.link).map_err(|e| {
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
    if opts.with_module {
        let missing = without_module(&topo)?;
        if !missing.is_empty() {
            bail!(
                "--with-module: the module is not loaded on {} (predict read-only without it)",
                missing.join(", ")
            );
        }
    }
    let sampled = auto_sample(&mut opts, &topo);
    let opts = &opts;
    // The cluster's round trips and DUMP's server time, for the duration (duration.rs): the
    // round trips before the keys are read, which load the masters.
    let rtts = ping_round_trips(&topo.masters, 200, std::time::Duration::ZERO);
    let spaced = ping_round_trips(&topo.masters, 20, std::time::Duration::from_millis(2));
    let dumps_before = dump_stats(&topo.masters);
    let holds = Holds::default();
    let prober = Prober::start(&topo.masters);
    let gathered = if opts.with_module {
        eprintln!(
            "ringslot: predicting with the module (ring copies with a TTL, deleted after) ..."
        );
        with_module::predict_module(access, &topo, change, opts, &holds)
    } else {
        eprintln!("ringslot: predicting read-only ...");
        read_only::predict_readonly(access, &topo, change, opts, &holds)
    };
    let waits = prober.finish();
    let dumps_after = dump_stats(&topo.masters);
    // Again after the reads: a round trip taken while a master was briefly busy (seen: 0.7 ms
    // right after a million keys were loaded, 0.01-0.08 ms otherwise) would weigh on every
    // round trip of the estimate; the lower of the two is kept.
    let rtts_after = ping_round_trips(&topo.masters, 200, std::time::Duration::ZERO);
    let rtts = lower_of(rtts, rtts_after);
    let mut timing = timing_of(&rtts, &spaced, &dumps_before, &dumps_after);
    timing.server = seed
        .connect()
        .and_then(|mut con| con.text(&["INFO", "server"]))
        .ok()
        .map(|info| duration::ServerKind::of_info(&info));
    let gathered = gathered?;
    // Every master's and replica's memory and limit, before the plan by weight is made (its
    // shares follow the masters' maxmemory).
    let mut asked: Vec<String> = topo.masters.iter().map(|m| m.address.clone()).collect();
    if let MasterChange::Add { nodes, .. } = change {
        for n in nodes {
            if !asked.contains(n) {
                asked.push(n.clone());
            }
        }
    }
    let listed: Vec<String> = snapshot.nodes.keys().cloned().collect();
    snapshot.refresh(Parts::MEMORY, &listed)?;
    let reads = nodes::read_nodes(access, &snapshot, &topo, &asked);
    let mut prediction = assemble(
        &topo, change, gathered, &holds, waits, opts, started, timing, &reads,
    );
    prediction.notes.extend(granted.notes);
    prediction.notes.extend(sampled);
    let (commands, notes) = runbook::runbook(change, &topo, access, &seed.address, opts.atomic);
    prediction.commands = commands;
    prediction.command_notes = notes;
    add_methods(&mut prediction, opts, &reads)?;
    // The risks read the whole prediction: made last.
    let risks = prediction
        .capacity
        .as_ref()
        .map(|capacity| risks::risks(&prediction, capacity, opts, &reads));
    prediction.risks = risks.unwrap_or_default();
    Ok(prediction)
}

/// Without `--bytes-sample`: the keys a slot to measure, set in `opts` from the keys the
/// cluster holds (every master's `INFO keyspace`, `db0`; a master that refuses `INFO` counts
/// 0, and then every key is measured) by [`Options::sampled_for`]; when that is a sample,
/// what the report says of it (also said on stderr at once).
fn auto_sample(opts: &mut Options, topo: &LiveCluster) -> Option<String> {
    if !opts.auto_sample {
        return None;
    }
    let keys: u64 = topo
        .masters
        .iter()
        .filter_map(|m| m.link.connect().ok()?.text(&["INFO", "keyspace"]).ok())
        .map(|info| keyspace_keys(&info))
        .sum();
    opts.bytes_sample = opts.sampled_for(keys);
    let n = opts.bytes_sample?;
    let note = format!(
        "the cluster holds {keys} keys, past {}: the bytes of {n} keys a slot were measured \
         and the rest estimated, with the error stated (every key is still screened for big \
         keys); --bytes-sample all measures every key",
        options::AUTO_SAMPLE_PAST
    );
    eprintln!("ringslot: {note}");
    Some(note)
}

/// The keys of `db0` in an `INFO keyspace` reply (`db0:keys=N,expires=...`); 0 without it.
fn keyspace_keys(info: &str) -> u64 {
    crate::reply::info_field(info, "db0")
        .and_then(|v| {
            v.split(',')
                .find_map(|kv| kv.strip_prefix("keys=").map(str::to_string))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Per master, the probe of the lower median of `a` and `b` (a master in one only kept).
fn lower_of(a: BTreeMap<String, Probe>, mut b: BTreeMap<String, Probe>) -> BTreeMap<String, Probe> {
    let mut out = BTreeMap::new();
    for (address, p) in a {
        let q = b.remove(&address);
        let lower = match q {
            Some(q) if q.median < p.median => q,
            _ => p,
        };
        out.insert(address, lower);
    }
    out.extend(b);
    out
}

/// The cluster's timing from the masters' `PING` round trips (back to back, and 2 ms apart)
/// and the `DUMP` statistics before and after the prediction's reads.
fn timing_of(
    rtts: &BTreeMap<String, Probe>,
    spaced: &BTreeMap<String, Probe>,
    before: &BTreeMap<String, (u64, u64)>,
    after: &BTreeMap<String, (u64, u64)>,
) -> duration::ClusterTiming {
    let median_of = |probes: &BTreeMap<String, Probe>| {
        let mut medians: Vec<f64> = probes.values().map(|p| p.median).collect();
        medians.sort_by(f64::total_cmp);
        medians.get(medians.len() / 2).copied()
    };
    let rtt = median_of(rtts);
    let rtt_spaced = median_of(spaced);
    let (mut calls, mut usec) = (0u64, 0u64);
    for (a, (c1, u1)) in after {
        if let Some((c0, u0)) = before.get(a) {
            calls += c1.saturating_sub(*c0);
            usec += u1.saturating_sub(*u0);
        }
    }
    duration::ClusterTiming {
        rtt,
        rtt_spaced,
        dump_per_key: (calls > 0).then(|| usec as f64 / 1e6 / calls as f64),
        server: None,
    }
}

/// Refuses a change the cluster cannot make: a joining master that is already one (or a
/// replica), a leaving one that is not a master of it (a replica, or unknown), every master
/// leaving.
fn check_against(change: &MasterChange, topo: &LiveCluster) -> Result<()> {
    let names: Vec<String> = topo.masters.iter().map(|m| m.address.clone()).collect();
    let replica_of = |n: &str| -> Option<String> {
        let node = topo
            .nodes
            .iter()
            .find(|x| x.address == n && x.has("slave"))?;
        let master = topo
            .nodes
            .iter()
            .find(|x| Some(&x.id) == node.master.as_ref());
        Some(master.map_or_else(|| "another master".to_string(), |m| m.address.clone()))
    };
    match change {
        MasterChange::Add { nodes, .. } => {
            for n in nodes {
                if let Some(master) = replica_of(n) {
                    bail!("{n} is a replica of {master} in this cluster, not a new master");
                }
                if names.contains(n) {
                    let empty = topo
                        .masters
                        .iter()
                        .any(|m| &m.address == n && m.slots.is_empty());
                    let hint = if empty {
                        ": it serves no slot yet (add-node done?); predict the pending \
                         rebalance with --rebalance"
                    } else {
                        ""
                    };
                    bail!("{n} is already a master of this cluster{hint}")
                }
            }
        }
        MasterChange::Del { nodes } => {
            for n in nodes {
                if let Some(master) = replica_of(n) {
                    bail!(
                        "{n} is a replica (of {master}), not a master: it holds no slots to \
                         drain (redis-cli --cluster del-node removes it)"
                    );
                }
                if !names.contains(n) {
                    bail!(
                        "{n} is not a master of this cluster (masters: {})",
                        names.join(", ")
                    )
                }
            }
            let staying = topo
                .masters
                .iter()
                .filter(|m| !nodes.contains(&m.address) && !m.slots.is_empty())
                .count();
            if staying == 0 {
                bail!(
                    "every master that serves slots would leave: the slots would have no owner \
                     (name fewer masters, or add new ones first)"
                );
            }
        }
        MasterChange::Rebalance { .. } => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_of_db0_from_info_keyspace() {
        // Redis 7.0.15's INFO keyspace.
        let info = "# Keyspace\r\ndb0:keys=1000000,expires=0,avg_ttl=0\r\n";
        assert_eq!(keyspace_keys(info), 1_000_000);
        assert_eq!(keyspace_keys("# Keyspace\r\n"), 0);
    }
}
