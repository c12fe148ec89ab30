//! The read-only prediction: nothing loaded on the cluster, nothing written to it. The plan is
//! the engine's, from the seed's `CLUSTER NODES` (the masters in the order `redis-cli
//! --cluster` loads them from the seed, so that ties break as its rebalance breaks them); the
//! keys are read with `SCAN` on each master, masters in parallel, at most
//! `--max-keys-per-sec` keys a second each, and hashed here under every scheme; the keys of
//! the slots the plan moves are measured ([`super::sizing`]) on the way.
//!
//! What it does to the data: `SCAN`, `DUMP`, `MEMORY USAGE` and `CLUSTER NODES` are reads.
//! Like every read, they make Redis reclaim a key whose TTL has passed when they meet it
//! (which is also what `MIGRATE` would do to it). On Redis 7.0, `DUMP` also updates the key's
//! access time (LRU or LFU) as a `GET` would; on 7.2 and later the connection is made with
//! `CLIENT NO-TOUCH on`, so that it does not.

use super::big_keys::BigKey;
use super::change::MasterChange;
use super::estimate::Sizes;
use super::options::{Options, WeightBy};
use super::prediction::{Gathered, Mode};
use super::sizing::{sizes_note, Sizer, Unreadable};
use super::steps::RebalanceStep;
use super::sums::{RingSums, Sums};
use crate::cluster::link::Access;
use crate::cluster::pacing::Holds;
use crate::cluster::reads::scan_master;
use crate::cluster::snapshot::check_unchanged;
use crate::cluster::topology::{LiveCluster, Master};
use anyhow::{anyhow, bail, Result};
use ringslot_engine::cluster::{mirror, MirrorOptions};
use ringslot_engine::{key_slot, Change, Limits, Scheme, SchemeParams, Topology, SLOT_COUNT};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// Names hashed together (each flavour's what-if builds its change once per batch).
const BATCH: usize = 65536;

/// What one master's pass found.
struct MasterPass {
    keys: u64,
    sums: Vec<Sums>,
    sizes: Sizes,
    unreadable: Unreadable,
    /// Why the reads updated the keys' access time, if they did.
    touched: Option<String>,
    /// Whether the sizes came by script ([`super::sizing::Sizer::by_script`]).
    by_script: Option<bool>,
    /// The big keys met.
    big_keys: Vec<BigKey>,
}

/// Predicts `change` read-only (see the module docs).
pub(crate) fn predict_readonly(
    access: &Access,
    topo: &LiveCluster,
    change: &MasterChange,
    opts: &Options,
    holds: &Holds,
) -> Result<Gathered> {
    let mark = Instant::now();
    // --by load: the slots' loads first, so that a server without CLUSTER SLOT-STATS refuses
    // before any key is read.
    let slot_load = match opts.by {
        Some(WeightBy::Load) => Some(slot_loads(topo, "load", &["cpu-usec"])?),
        Some(WeightBy::Network) => Some(slot_loads(
            topo,
            "network",
            &["network-bytes-in", "network-bytes-out"],
        )?),
        _ => None,
    };
    let mirrors = mirrors_of(topo, opts)?;
    let engine_change = change.change();
    let first = &mirrors
        .first()
        .ok_or_else(|| anyhow!("no flavour to evaluate"))?
        .1;
    let plan: Vec<RebalanceStep<String>> = first
        .plan(&engine_change, Limits::NONE)
        .map_err(|e| anyhow!("the plan: {e}"))?
        .into_iter()
        .map(|m| m.named(|n| Some(String::from_utf8_lossy(&n).into_owned())))
        .collect();
    let moved = sized_slots(&plan, opts);
    let mut steps = vec![(
        "the plan (the engine, from CLUSTER NODES)".to_string(),
        mark.elapsed().as_secs_f64(),
    )];
    let mark = Instant::now();
    let read = read_masters(topo, &mirrors, &engine_change, &moved, opts, holds)?;
    read.unreadable.check(access.user())?;
    let mut notes: Vec<String> = sizes_note(&read.ways, opts.sizes_by).into_iter().collect();
    if !read.touched.is_empty() {
        // The masters by the reason each gave, each reason said once.
        let mut by_why: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (address, why) in &read.touched {
            by_why.entry(why).or_default().push(address);
        }
        let on: Vec<String> = by_why
            .iter()
            .map(|(why, at)| format!("{} ({why})", at.join(", ")))
            .collect();
        notes.push(format!(
            "CLIENT NO-TOUCH could not be set on {}: the reads of the moving keys (DUMP, \
             MEMORY USAGE) updated their access time as a GET would, which LRU and LFU \
             eviction see (Redis 7.0 has no CLIENT NO-TOUCH; elsewhere grant +client|no-touch)",
            on.join("; ")
        ));
    }
    steps.push((
        "every key read (SCAN) and hashed here; the moved slots' keys measured (DUMP, MEMORY \
         USAGE)"
            .to_string(),
        mark.elapsed().as_secs_f64(),
    ));
    check_unchanged(access, topo)?;
    let ideal = first
        .what_if(
            &engine_change,
            std::iter::empty::<&[u8]>(),
            &[Scheme::Slots],
            &SchemeParams::default(),
            Limits::NONE,
        )
        .map(|w| w.ideal)
        .unwrap_or(0.0);
    Ok(Gathered {
        slot_load,
        mode: Mode::ReadOnly,
        entry: topo.entry(),
        plan,
        sizes: read.sizes,
        master_keys: read.master_keys,
        rings: read.rings,
        ideal,
        steps,
        writes: Vec::new(),
        notes,
        big_keys: read.big_keys,
    })
}

/// Each flavour's mirror of the cluster (its name and ring), made here by the engine from the
/// seed's `CLUSTER NODES`, as `RING.MIRROR` makes it.
fn mirrors_of(topo: &LiveCluster, opts: &Options) -> Result<Vec<(String, Topology)>> {
    opts.flavours
        .iter()
        .map(|&flavour| {
            let options = MirrorOptions {
                flavour,
                vnodes: None,
                hashtag: false,
                given: true,
            };
            let made = mirror(None, &topo.nodes, &options, Limits::NONE)
                .map_err(|e| anyhow!("the mirror of the cluster: {e}"))?;
            Ok((flavour.name().to_string(), made.topology))
        })
        .collect()
}

/// Per slot, whether its keys are sized: the slots the plan moves, or every slot for a plan
/// by bytes, memory, keys or slots (whose figures give every master's bytes after).
fn sized_slots(plan: &[RebalanceStep<String>], opts: &Options) -> Vec<bool> {
    let sizes_all = matches!(
        opts.by,
        Some(WeightBy::Bytes | WeightBy::Memory | WeightBy::Keys | WeightBy::Slots)
    );
    let mut moved = vec![sizes_all; SLOT_COUNT];
    for m in plan {
        for &slot in &m.slots {
            if let Some(x) = moved.get_mut(usize::from(slot)) {
                *x = true;
            }
        }
    }
    moved
}

/// What the masters' passes found, together.
struct Read {
    rings: Vec<RingSums>,
    master_keys: HashMap<String, u64>,
    sizes: Sizes,
    unreadable: Unreadable,
    /// Masters whose reads updated the keys' access time: (address, why).
    touched: Vec<(String, String)>,
    /// How each master's sizes came ([`MasterPass::by_script`]).
    ways: Vec<Option<bool>>,
    big_keys: Vec<BigKey>,
}

/// Every master that serves slots read by [`pass`], masters in parallel.
fn read_masters(
    topo: &LiveCluster,
    mirrors: &[(String, Topology)],
    change: &Change,
    moved: &[bool],
    opts: &Options,
    holds: &Holds,
) -> Result<Read> {
    let serving: Vec<&Master> = topo
        .masters
        .iter()
        .filter(|m| !m.slots.is_empty())
        .collect();
    let results: Vec<Result<MasterPass>> = std::thread::scope(|scope| {
        let handles: Vec<_> = serving
            .iter()
            .map(|&m| scope.spawn(move || pass(m, mirrors, change, moved, opts, holds)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a reading thread panicked")))
            })
            .collect()
    });
    let mut read = Read {
        rings: mirrors
            .iter()
            .map(|(f, _)| RingSums {
                flavour: f.clone(),
                sums: Sums::default(),
            })
            .collect(),
        master_keys: HashMap::new(),
        sizes: Sizes::new(),
        unreadable: Unreadable::default(),
        touched: Vec::new(),
        ways: Vec::new(),
        big_keys: Vec::new(),
    };
    for (m, r) in serving.iter().zip(results) {
        let p = r?;
        read.master_keys.insert(m.address.clone(), p.keys);
        for (total, s) in read.rings.iter_mut().zip(&p.sums) {
            total.sums.add(s);
        }
        read.sizes.extend(p.sizes);
        read.unreadable.add(p.unreadable);
        read.ways.push(p.by_script);
        read.big_keys.extend(p.big_keys);
        if let Some(why) = p.touched {
            read.touched.push((m.address.clone(), why));
        }
    }
    Ok(read)
}

/// One master's keys: read, counted, measured where the plan moves them, and hashed under
/// each flavour's mirror a batch at a time.
fn pass(
    m: &Master,
    mirrors: &[(String, Topology)],
    change: &Change,
    moved: &[bool],
    opts: &Options,
    holds: &Holds,
) -> Result<MasterPass> {
    let mut con = m.link.connect()?;
    // Reads that do not update the keys' access time, where the server can (Redis 7.2 and
    // later, Valkey): else DUMP and MEMORY USAGE touch them as a GET would, and the report
    // says so.
    let touched = con.run(&["CLIENT", "NO-TOUCH", "on"]).err().map(|e| e.text);
    let mut sizer = Sizer::new(m, opts, holds);
    let mut sums = vec![Sums::default(); mirrors.len()];
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let mut keys = 0u64;
    let params = SchemeParams::default();
    let schemes = [Scheme::Ring, Scheme::Slots, Scheme::Modulo];
    let hash = |batch: &mut Vec<Vec<u8>>, sums: &mut [Sums]| -> Result<()> {
        for ((_, topo), total) in mirrors.iter().zip(sums.iter_mut()) {
            let w = topo
                .what_if(change, batch.iter(), &schemes, &params, Limits::NONE)
                .map_err(|e| anyhow!("the what-if: {e}"))?;
            total.add(&Sums::of_what_if(&w));
        }
        batch.clear();
        Ok(())
    };
    scan_master(m, &mut con, holds, |con, names| {
        keys += names.len() as u64;
        holds.read(&m.address, names.len() as u64);
        sizer.limiter.take(names.len() as u64);
        let moving: Vec<Vec<u8>> = names
            .iter()
            .filter(|n| moved.get(usize::from(key_slot(n))) == Some(&true))
            .cloned()
            .collect();
        sizer.measure(con, &moving, true)?;
        batch.extend(names);
        if batch.len() >= BATCH {
            hash(&mut batch, &mut sums)?;
        }
        Ok(())
    })?;
    sizer.finish(&mut con)?;
    hash(&mut batch, &mut sums)?;
    Ok(MasterPass {
        keys,
        sums,
        sizes: sizer.sizes,
        unreadable: sizer.unreadable,
        touched,
        by_script: sizer.by_script,
        big_keys: std::mem::take(&mut sizer.big_keys),
    })
}

/// Each slot's load for `--by <by>`: the sum of the `metrics` (`cpu-usec`, or
/// `network-bytes-in` and `network-bytes-out`) from its master's `CLUSTER SLOT-STATS
/// SLOTSRANGE 0 16383` (16384 entries, 0 for a slot no master serves). Errors: a master
/// without the command (before Valkey 8 and Redis 8.2), or without the metrics, or with every
/// slot's load 0 (`cluster-slot-stats-enabled` off, or no traffic since the counters started).
fn slot_loads(topo: &LiveCluster, by: &str, metrics: &[&str]) -> Result<Vec<u64>> {
    let mut load = vec![0u64; SLOT_COUNT];
    for m in topo.masters.iter().filter(|m| !m.slots.is_empty()) {
        let last = (SLOT_COUNT - 1).to_string();
        let reply = m
            .link
            .connect()?
            .run(&["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "0", &last])
            .map_err(|e| {
                anyhow!(
                    "--by {by}: {}: CLUSTER SLOT-STATS: {} (it needs Valkey 8 or Redis 8.2 and \
                     later, and +cluster|slot-stats)",
                    m.address,
                    e.text
                )
            })?;
        let rows = crate::reply::array(&reply).map_err(|e| anyhow!("{}: {e}", m.address))?;
        let mut mine = vec![false; SLOT_COUNT];
        for &s in &m.slots {
            if let Some(x) = mine.get_mut(usize::from(s)) {
                *x = true;
            }
        }
        let mut seen_metric = false;
        for row in rows {
            let fields = crate::reply::array(row).unwrap_or_default();
            let Some(slot) = fields
                .first()
                .and_then(|v| crate::reply::int(v).ok())
                .and_then(|s| usize::try_from(s).ok())
            else {
                continue;
            };
            if mine.get(slot) != Some(&true) {
                continue;
            }
            // The stats: a map (RESP3) or a flat list of names and values (RESP2).
            let stats = fields
                .get(1)
                .and_then(|v| crate::reply::fields(v).ok())
                .map(|(f, _)| f)
                .unwrap_or_default();
            for (name, value) in stats {
                if metrics.contains(&name.as_str()) {
                    seen_metric = true;
                    if let (Some(x), Ok(v)) = (load.get_mut(slot), crate::reply::int(value)) {
                        *x = x.saturating_add(u64::try_from(v).unwrap_or(0));
                    }
                }
            }
        }
        if !seen_metric {
            bail!(
                "--by {by}: {} gives no {} in CLUSTER SLOT-STATS: set \
                 cluster-slot-stats-enabled yes on every master, let traffic run, then predict",
                m.address,
                metrics.join(" or ")
            );
        }
    }
    if load.iter().all(|&x| x == 0) {
        bail!(
            "--by {by}: every slot's {} is 0: set cluster-slot-stats-enabled yes on every \
             master and let traffic run (the counters start with the server or CONFIG RESETSTAT)",
            metrics.join(" + ")
        );
    }
    Ok(load)
}
