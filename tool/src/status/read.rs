//! The reads of `ringslot status` (see the module docs of [`super`]): the seed's `CLUSTER
//! NODES`, then every master at once (a thread each) and its replicas.

use super::{
    peak_to_mean, shares, verdict, AtomicMigration, Balance, BigKeyStatus, FlaggedNode,
    MasterStatus, OpenSlot, ReplicaStatus, SlotStatus, Status, StatusOptions, STATUS_VERSION,
};
use crate::cluster::connection::NodeConnection;
use crate::cluster::link::Access;
use crate::cluster::memory::{server_of, ReplicaLink};
use crate::cluster::migrations;
use crate::cluster::pacing::{Holds, Limiter};
use crate::cluster::reads::{count_keys_in_slots, scan_master, slot_stats};
use crate::cluster::snapshot::{NodeRead, Parts, Snapshot};
use crate::cluster::topology::{slots_of, Master};
use crate::cluster::INTERRUPTED;
use crate::predict::big_keys::{kind_of, BIG_KEY_MEMORY};
use crate::predict::estimate::{memory_bytes, SlotSize};
use crate::predict::sizing::memory_estimates;
use anyhow::{anyhow, bail, Result};
use ringslot_engine::cluster::{myself, slot_owners, ClusterNode};
use ringslot_engine::key_slot;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Names one pipeline of `MEMORY USAGE` carries at most (its slots' `GETKEYSINSLOT` share one
/// pipeline before it).
const NAMES_A_PIPELINE: u64 = 2048;

/// What one master's reads found beside its [`MasterStatus`]: each slot's key count and sizes,
/// and the big keys of its sample.
struct MasterReads {
    status: MasterStatus,
    slots: SlotSizes,
    big_keys: Vec<BigKeyStatus>,
}

/// Reads how the cluster at the seed of `access` stands, as `opts` asks. A master that cannot
/// be read is reported so (`MasterStatus::unread`). Errors: the seed cannot be reached or read
/// (`CLUSTER NODES`, `INFO`), or Ctrl-C stopped a screen of every key.
pub fn read_status(access: &Access, opts: &StatusOptions) -> Result<Status> {
    // Bounded here too (the command line takes 1 to 1000): the work a slot asks for.
    let keys_per_slot = opts.keys_per_slot.clamp(1, 1000);
    let top = opts.top;
    let opts = &StatusOptions {
        keys_per_slot,
        ..opts.clone()
    };
    let started = Instant::now();
    let mut snapshot = Snapshot::read(access, Parts::STATUS)?;
    let nodes = snapshot.seed_view.clone();
    let seed_address = snapshot.seed.clone();
    let server = match snapshot.node(&seed_address).and_then(|n| n.memory.as_ref()) {
        Some(memory) => memory.server.clone(),
        None => server_of(&access.seed().connect()?.text(&["INFO", "server"])?),
    };
    let flagged: Vec<FlaggedNode> = nodes
        .iter()
        .filter_map(|n| {
            Some(FlaggedNode {
                address: n.address.clone(),
                flag: n.failing_flag()?.to_string(),
                master: n.has("master"),
            })
        })
        .collect();
    // Every master, those flagged failing too (not read: reported with their slots); each
    // read through the connection the snapshot read it on.
    let masters: Vec<ClusterNode> = nodes.iter().filter(|n| n.has("master")).cloned().collect();
    let mut cons: Vec<Result<NodeConnection>> = Vec::new();
    for m in &masters {
        let why = snapshot.node(&m.address).map(|n| n.unread.clone());
        cons.push(match why {
            Some(None) => snapshot.connection(&m.address),
            Some(Some(why)) => Err(anyhow!(why)),
            None => Err(anyhow!("no address")),
        });
    }
    let snapshot = &snapshot;
    let reads: Vec<Result<MasterReads>> = std::thread::scope(|scope| {
        let handles: Vec<_> = masters
            .iter()
            .zip(cons)
            .map(|(m, con)| scope.spawn(move || read_master(snapshot, m, con?, opts)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a reader thread panicked")))
            })
            .collect()
    });
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted: the screen of every key stopped; nothing is reported");
    }
    let mut read = Vec::new();
    let mut slots = Vec::new();
    let mut big_keys = Vec::new();
    for (node, r) in masters.iter().zip(reads) {
        // A master that cannot be read is reported, not fatal: that is when status is needed.
        let r = r.unwrap_or_else(|e| unread(node, &e));
        slots.extend(r.slots.iter().map(|(slot, size)| SlotStatus {
            slot: *slot,
            master: r.status.address.clone(),
            keys: size.keys,
            bytes: size.memory_total(),
        }));
        big_keys.extend(r.big_keys);
        read.push(r.status);
    }
    let mut masters = read;
    masters.sort_by(|a, b| {
        let first = |m: &MasterStatus| if m.slots > 0 { 0 } else { 1 };
        (first(a), &a.address).cmp(&(first(b), &b.address))
    });
    let balance = balance(&mut masters);
    let owners = slot_owners(&nodes);
    slots.sort_by(|a, b| b.bytes.total_cmp(&a.bytes).then(a.slot.cmp(&b.slot)));
    slots.truncate(top);
    big_keys.sort_by(|a, b| b.memory.total_cmp(&a.memory).then(a.key.cmp(&b.key)));
    big_keys.truncate(top);
    let mut status = Status {
        version: STATUS_VERSION,
        seed: seed_address,
        server,
        verdict: String::new(),
        findings: Vec::new(),
        keys_sized: 0,
        uncovered_slots: owners.iter().filter(|o| o.is_none()).count() as u64,
        masters,
        flagged,
        balance,
        biggest_slots: slots,
        big_keys,
        keys_per_slot,
        big_keys_screened: opts.screen.is_some(),
        seconds: 0.0,
        owners,
    };
    status.keys_sized = status.masters.iter().map(|m| m.sampled).sum();
    status.findings = verdict::findings(&status);
    status.verdict = verdict::verdict(&status);
    status.seconds = started.elapsed().as_secs_f64();
    Ok(status)
}

/// The masters' shares and the cluster's peak-to-mean, by slots, keys and bytes, over the
/// masters that were read (one that was not has shares of 0).
fn balance(masters: &mut [MasterStatus]) -> Balance {
    let read: Vec<&mut MasterStatus> = masters.iter_mut().filter(|m| m.unread.is_empty()).collect();
    let slots: Vec<f64> = read.iter().map(|m| m.slots as f64).collect();
    let keys: Vec<f64> = read.iter().map(|m| m.keys as f64).collect();
    let bytes: Vec<f64> = read.iter().map(|m| m.bytes.value).collect();
    for (m, ((s, k), b)) in read.into_iter().zip(
        shares(&slots)
            .into_iter()
            .zip(shares(&keys))
            .zip(shares(&bytes)),
    ) {
        m.slots_share = s;
        m.keys_share = k;
        m.bytes_share = b;
    }
    Balance {
        slots: peak_to_mean(&slots),
        keys: peak_to_mean(&keys),
        bytes: peak_to_mean(&bytes),
    }
}

/// Everything `status` reads of master `node` beside what `snapshot` read of it and its
/// replicas (its view, memory, replication, atomic jobs), through `con`: its key count, its
/// slots' key counts and sizes, its big keys.
fn read_master(
    snapshot: &Snapshot,
    node: &ClusterNode,
    mut con: NodeConnection,
    opts: &StatusOptions,
) -> Result<MasterReads> {
    let read = snapshot
        .node(&node.address)
        .ok_or_else(|| anyhow!("not read"))?;
    let memory = read
        .memory
        .clone()
        .ok_or_else(|| anyhow!("its memory not read"))?;
    // A node lists its own open slots only, on its `myself` line.
    let me = read.view.as_deref().and_then(myself);
    let open = |list: Option<&Vec<(u16, String)>>| -> Vec<OpenSlot> {
        list.into_iter()
            .flatten()
            .map(|(slot, id)| OpenSlot {
                slot: *slot,
                peer: snapshot.address_of(id),
            })
            .collect()
    };
    let migrating = open(me.map(|n| &n.migrating));
    let importing = open(me.map(|n| &n.importing));
    let keys = match con.run(&["DBSIZE"])? {
        redis::Value::Int(n) => u64::try_from(n).unwrap_or(0),
        _ => 0,
    };
    let served = slots_of(node);
    let counts: Vec<(u16, u64)> = match slot_stats(&mut con) {
        Some(stats) => served
            .iter()
            .map(|s| (*s, stats.get(s).copied().unwrap_or(0)))
            .collect(),
        None => count_keys_in_slots(&mut con, &served)?,
    };
    let atomic_migrations = atomic_migrations(snapshot, &read.jobs);
    let (mut slots, mut seen) = sample(&mut con, &counts, opts)?;
    if let Some(rate) = opts.screen {
        let master = Master {
            address: node.address.clone(),
            slots: served.clone(),
            link: read.link.clone(),
        };
        screen(&mut con, &master, rate, &mut slots, &mut seen)?;
    }
    // Only the biggest are described (two or three round trips each).
    seen.sort_by(|a, b| b.2.total_cmp(&a.2));
    seen.truncate(opts.top);
    let mut big_keys = Vec::new();
    for (name, slot, memory) in seen {
        if let Some(kind) = kind_of(&mut con, &name)? {
            big_keys.push(BigKeyStatus {
                key: String::from_utf8_lossy(&name).into_owned(),
                slot,
                master: node.address.clone(),
                kind: kind.kind,
                length: kind.length,
                memory,
            });
        }
    }
    let listed = read.replica_links();
    let replicas = snapshot
        .replicas_of(&node.address)
        .map(|r| replica(r, &listed))
        .collect();
    let sizes: Vec<&SlotSize> = slots.iter().map(|(_, s)| s).collect();
    let status = MasterStatus {
        address: node.address.clone(),
        id: node.id.clone(),
        slots: served.len() as u64,
        keys,
        keys_in_slots: counts.iter().map(|(_, n)| n).sum(),
        bytes: memory_bytes(&sizes),
        sampled: sizes.iter().map(|s| s.sampled + s.big).sum(),
        used_memory: memory.used,
        maxmemory: memory.maxmemory,
        policy: memory.policy.name().to_string(),
        evicted_keys: memory.evicted_keys,
        memory: Some(memory.clone()),
        replicas,
        migrating,
        importing,
        atomic_migrations,
        unread: String::new(),
        slots_share: 1.0,
        keys_share: 1.0,
        bytes_share: 1.0,
    };
    Ok(MasterReads {
        status,
        slots,
        big_keys,
    })
}

/// The atomic slot migrations not over, `jobs` as a master lists them, each peer named by its
/// address where `snapshot` knows it.
fn atomic_migrations(snapshot: &Snapshot, jobs: &[migrations::Job]) -> Vec<AtomicMigration> {
    let text = |job: &migrations::Job, name: &str| job.get(name).cloned().unwrap_or_default();
    jobs.iter()
        .map(|j| {
            let peer = if text(j, "operation").eq_ignore_ascii_case("import") {
                text(j, "source_node")
            } else {
                text(j, "target_node")
            };
            AtomicMigration {
                operation: text(j, "operation"),
                slots: text(j, "slot_ranges"),
                state: text(j, "state"),
                peer: snapshot.address_of(&peer),
            }
        })
        .collect()
}

/// A big key of the sample: its name, slot and `MEMORY USAGE ... SAMPLES 5`.
type Seen = (Vec<u8>, u16, f64);

/// Each slot's key count and sizes, by slot.
type SlotSizes = Vec<(u16, SlotSize)>;

/// The sizes of the slots `counts` (slot, keys) from `opts.keys_per_slot` keys of each with
/// keys (`CLUSTER GETKEYSINSLOT`, then `MEMORY USAGE ... SAMPLES 5` of each name), and the big
/// keys met. A key gone between the two reads is not counted as sampled. A big key met counts
/// as a sampled key (its slot's other keys are scaled from the sample it is part of), unless
/// every key is screened (`opts.screen`), where each big key counts whole and alone.
fn sample(
    con: &mut NodeConnection,
    counts: &[(u16, u64)],
    opts: &StatusOptions,
) -> Result<(SlotSizes, Vec<Seen>)> {
    let keys_per_slot = opts.keys_per_slot;
    let mut sizes: BTreeMap<u16, SlotSize> = counts
        .iter()
        .map(|&(slot, keys)| {
            (
                slot,
                SlotSize {
                    keys,
                    ..SlotSize::default()
                },
            )
        })
        .collect();
    let mut seen = Vec::new();
    let with_keys: Vec<u16> = counts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, _)| *s)
        .collect();
    let slots_a_pipeline = (NAMES_A_PIPELINE / keys_per_slot.max(1)).max(1) as usize;
    for part in with_keys.chunks(slots_a_pipeline) {
        let mut pipe = redis::pipe();
        for slot in part {
            pipe.cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(*slot)
                .arg(keys_per_slot);
        }
        let names: Vec<Vec<Vec<u8>>> = con.pipeline(&pipe, "CLUSTER GETKEYSINSLOT")?;
        let flat: Vec<(u16, &Vec<u8>)> = part
            .iter()
            .zip(&names)
            .flat_map(|(slot, names)| names.iter().map(move |n| (*slot, n)))
            .collect();
        let memory = memory_estimates(con, flat.iter().map(|(_, n)| n.as_slice()))?;
        for ((slot, name), m) in flat.iter().zip(memory) {
            let (Some(m), Some(size)) = (m, sizes.get_mut(slot)) else {
                continue;
            };
            let m = m as f64;
            let big = m >= BIG_KEY_MEMORY as f64;
            if big {
                seen.push(((*name).clone(), *slot, m));
            }
            if big && opts.screen.is_some() {
                size.big += 1;
                size.big_memory += m;
            } else {
                size.sampled += 1;
                size.memory += m;
                size.memory_sq += m * m;
            }
        }
    }
    Ok((sizes.into_iter().collect(), seen))
}

/// Screens every key of `master` for big keys, as `predict` does: `SCAN` (1000 names a
/// call) and `MEMORY USAGE ... SAMPLES 5` of each, `rate` keys a second (0: no limit). A big
/// key the sample did not meet is added to its slot's big keys (`slots`, whose estimate then
/// counts it whole) and to `seen`. Error: Ctrl-C, or a read refused.
fn screen(
    con: &mut NodeConnection,
    master: &Master,
    rate: u64,
    slots: &mut SlotSizes,
    seen: &mut Vec<Seen>,
) -> Result<()> {
    let holds = Holds::default();
    let mut limiter = Limiter::new(rate);
    // SCAN may return a key twice (while the table rehashes): each is counted once.
    let mut known: BTreeSet<Vec<u8>> = seen.iter().map(|(name, _, _)| name.clone()).collect();
    scan_master(master, con, &holds, |con, names| {
        limiter.take(names.len() as u64);
        let memory = memory_estimates(con, names.iter().map(Vec::as_slice))?;
        for (name, m) in names.iter().zip(memory) {
            let Some(m) = m.map(|m| m as f64) else {
                continue;
            };
            if m < BIG_KEY_MEMORY as f64 || !known.insert(name.clone()) {
                continue;
            }
            let slot = key_slot(name);
            if let Some((_, size)) = slots.iter_mut().find(|(s, _)| *s == slot) {
                size.big += 1;
                size.big_memory += m;
            }
            seen.push((name.clone(), slot, m));
        }
        Ok(())
    })
}

/// What is known of master `node` that could not be read: its slots (from the seed's view)
/// and why.
fn unread(node: &ClusterNode, e: &anyhow::Error) -> MasterReads {
    MasterReads {
        status: MasterStatus {
            address: node.address.clone(),
            id: node.id.clone(),
            slots: slots_of(node).len() as u64,
            keys: 0,
            keys_in_slots: 0,
            bytes: Default::default(),
            sampled: 0,
            used_memory: 0.0,
            maxmemory: 0.0,
            policy: String::new(),
            evicted_keys: 0,
            memory: None,
            replicas: Vec::new(),
            migrating: Vec::new(),
            importing: Vec::new(),
            atomic_migrations: Vec::new(),
            unread: format!("{e:#}"),
            slots_share: 0.0,
            keys_share: 0.0,
            bytes_share: 0.0,
        },
        slots: Vec::new(),
        big_keys: Vec::new(),
    }
}

/// Replica `r` (as the snapshot read it) of a master whose `INFO replication` lists
/// `listed`: its link (its own `master_link_status`) and its lag as the master reports it.
fn replica(r: &NodeRead, listed: &[ReplicaLink]) -> ReplicaStatus {
    let lag_bytes = listed
        .iter()
        .find(|l| l.address == r.node.address)
        .map(|l| l.lag_bytes);
    ReplicaStatus {
        address: r.node.address.clone(),
        link: r.master_link().unwrap_or_default(),
        lag_bytes,
        unread: r.unread.clone().unwrap_or_default(),
    }
}
