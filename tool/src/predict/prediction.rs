//! What a prediction is, whichever way it ran: the plan's moves with their keys and bytes,
//! the masters before and after, each scheme's moved keys, the duration and memory of each
//! migration method (`assemble` builds it from what a way gathered).

use super::big_keys::BigKey;
use super::by_weight::{compare, WeightComparison, WeightInputs};
use super::capacity::{capacity, Capacity, PlanMoves};
use super::change::MasterChange;
use super::duration::{ClusterTiming, Counts, PerKeyModel, Range, PIPELINE};
use super::estimate::{dump_bytes, memory_bytes, Estimate, Sizes, SlotSize};
use super::method::{self, Method, MethodCost};
use super::nodes::NodeReads;
use super::options::Options;
use super::steps::{RebalanceStep, StepCost};
use super::sums::{rings_as_map, RingSums};
use crate::cluster::budget::{MoveSize, DEFAULT_BATCH};
use crate::cluster::pacing::{Holds, MasterHold, Probe};
use crate::cluster::topology::LiveCluster;
use anyhow::{bail, Result};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// How the prediction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// With the module on every master (`--with-module`).
    Module,
    /// Read-only: nothing loaded, nothing written (the default).
    ReadOnly,
}

/// One master before and after the change, under the slot scheme.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MasterRow {
    /// `ip:port`.
    pub address: String,
    /// Slots served and live keys now.
    pub slots_before: usize,
    pub keys_before: u64,
    /// Slots served and live keys once the plan is carried out.
    pub slots_after: usize,
    pub keys_after: u64,
    /// Bytes leaving it and arriving on it.
    pub bytes_out: Estimate,
    pub bytes_in: Estimate,
}

/// What a prediction found. Its JSON form (`ringslot predict --json`) has these fields.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    /// With the module or read-only.
    pub mode: Mode,
    /// The node the plan is `redis-cli --cluster rebalance`'s run against.
    pub entry: String,
    /// The masters before and after: the cluster's, then the ones that join.
    pub masters: Vec<MasterRow>,
    /// The steps of redis-cli's rebalance, in its order, with what each carries.
    pub plan: Vec<StepCost>,
    /// The owner of each of the 16384 slots now and after the plan.
    #[serde(skip)]
    pub owner_before: Vec<Option<String>>,
    #[serde(skip)]
    pub owner_after: Vec<Option<String>>,
    /// Per flavour, the sums over every master (in JSON, an object keyed by flavour).
    #[serde(serialize_with = "rings_as_map")]
    pub rings: Vec<RingSums>,
    /// Live keys.
    pub keys: u64,
    /// Keys the slot plan moves, and those between masters that serve slots before and after
    /// and that the change does not name.
    pub keys_moved: u64,
    pub keys_between_old: u64,
    /// The `DUMP` bytes of the keys the plan moves (what `MIGRATE` sends), and their `MEMORY
    /// USAGE` (what they take on their targets).
    pub bytes: Estimate,
    pub memory: Estimate,
    /// Mean `DUMP` bytes of the keys measured (for the rings' rows, which move other keys).
    pub mean_bytes: f64,
    /// The share of keys a perfect scheme moves (0 to 1).
    pub ideal: f64,
    /// The per-key rebalance's duration, seconds: the middle of [`Prediction::duration_range`].
    pub duration: f64,
    /// Its range, from the round trips and config writes counted (`counts`) and the timing
    /// measured on the cluster (`timing`), by its server family's [`PerKeyModel`].
    pub duration_range: Range,
    pub counts: Counts,
    pub timing: ClusterTiming,
    /// How long the prediction took, in seconds.
    pub seconds: f64,
    /// The time of each step, in seconds (in JSON, an object keyed by step).
    #[serde(serialize_with = "as_map")]
    pub steps: Vec<(String, f64)>,
    /// Per master: the longest of the run's commands took (seconds, a round trip; a
    /// `RING.MOVES` in the background waits without holding the server) and the keys it read
    /// there.
    pub holds: Vec<MasterHold>,
    /// Per master that answered `PING`: the round trips of another client's `PING` every 10 ms
    /// meanwhile (a master that refused it is absent: not measured).
    pub waits: BTreeMap<String, Probe>,
    /// Keys a slot measured (`None`: every key).
    pub sample: Option<u64>,
    /// The method the slots will move by (per key unless `--atomic`), and what each method
    /// the cluster offers costs (per key always; atomic where every master is Valkey 9).
    pub method: Method,
    /// What each method costs: duration and each master's memory.
    pub methods: Vec<MethodCost>,
    /// Why the memory of the methods is not known (a master refused `INFO`), if so.
    pub memory_note: Option<String>,
    /// What to do about it (grant `+info`, make the user on a joining master), if known.
    #[serde(skip)]
    pub memory_hint: Option<&'static str>,
    /// What the run wrote and removed on the cluster, in order: nothing read-only; the ring
    /// copies of the way with the module.
    pub writes: Vec<String>,
    /// What the run could not do or measure, and what that means (a `PING`, `INFO` or
    /// `CLIENT NO-TOUCH` refused, ...): never shown as a measured 0.
    pub notes: Vec<String>,
    /// The commands that carry out the plan, in order, and what goes with them.
    pub commands: Vec<String>,
    pub command_notes: Vec<String>,
    /// With `--by`: the plan by weight beside redis-cli's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_weight: Option<WeightComparison>,
    /// The big keys met among the keys sized (the moving slots', or every slot's with `--by
    /// bytes|memory|keys`), and the plans that would move each.
    pub big_keys: Vec<BigKey>,
    /// Every node's memory against its limit under each plan and method (`None` when no node's
    /// memory could be read).
    pub capacity: Option<Capacity>,
    /// What the operator should know before running either plan, the worst first: the nodes
    /// a plan would take past their limits, the masters full now, the big keys a plan moves,
    /// the replicas (typed: the report says them in words).
    pub risks: Vec<super::risk::Risk>,
}

/// What either way gathers, for [`assemble`].
pub(crate) struct Gathered {
    /// How it ran.
    pub mode: Mode,
    /// The node the plan is `redis-cli --cluster rebalance`'s run against.
    pub entry: String,
    /// The steps of redis-cli's rebalance.
    pub plan: Vec<RebalanceStep<String>>,
    /// Sizes of the slots the plan moves.
    pub sizes: Sizes,
    /// Live keys per master before the change.
    pub master_keys: HashMap<String, u64>,
    /// Per flavour, the sums over every master.
    pub rings: Vec<RingSums>,
    /// The share of keys a perfect scheme moves.
    pub ideal: f64,
    /// Each step and its seconds.
    pub steps: Vec<(String, f64)>,
    /// What the run wrote and removed on the cluster, in order (nothing read-only).
    pub writes: Vec<String>,
    /// What the run could not do, and what it means for the figures or the cluster.
    pub notes: Vec<String>,
    /// With `--by load`: each slot's `cpu-usec` by `CLUSTER SLOT-STATS` (16384 entries).
    pub slot_load: Option<Vec<u64>>,
    /// The big keys met among the keys sized.
    pub big_keys: Vec<BigKey>,
}

/// The prediction from what a way gathered on `topo`.
// Each argument is a separate measurement of the run; a struct of them would only rename them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn assemble(
    topo: &LiveCluster,
    change: &MasterChange,
    g: Gathered,
    holds: &Holds,
    waits: BTreeMap<String, Probe>,
    opts: &Options,
    started: Instant,
    timing: ClusterTiming,
    reads: &NodeReads,
) -> Prediction {
    let owner_before = topo.owners();
    let owner_after = owners_after(&owner_before, &g.plan);
    let plan = step_costs(&g.plan, &g.sizes);
    let (keys_moved, keys_between_old) = keys_moved(&plan, change, &owner_before, &owner_after);
    let moved_slots: Vec<&SlotSize> = g
        .plan
        .iter()
        .flat_map(|m| m.slots.iter())
        .map(|s| size_of(&g.sizes, s))
        .collect();
    let (measured, measured_bytes) = g
        .sizes
        .values()
        .fold((0u64, 0f64), |(n, b), s| (n + s.sampled, b + s.dump));
    let addresses = master_addresses(topo, &plan, change);
    let masters = master_rows(&addresses, &plan, &g, &owner_before, &owner_after);
    let counts = Counts::of(
        moved_slots.iter().map(|s| s.keys),
        addresses.len() as u64,
        PIPELINE,
    );
    let duration_range = PerKeyModel::of(&timing).estimate(&counts, &timing);
    // The slots of keys whose move would hold a master past --max-hold stay where they are;
    // but not on a master that leaves, whose every slot must move.
    let pinned = pinned_slots(&g.big_keys, change, opts);
    let maxmemory = reads.maxmemory();
    // What each master may still take by the one memory model, a default batch in flight;
    // the plan made is then walked as apply walks it, and where a target would not fit (a big
    // key on top of what it holds by then), its room is cut by the excess and the plan made
    // again ([`fitted`]).
    let budget = reads.budget(opts.headroom);
    let fit_budget = reads.budget(opts.headroom + PLAN_MARGIN);
    let room: BTreeMap<String, f64> = addresses
        .iter()
        .filter_map(|a| Some((a.clone(), fit_budget.room(a, DEFAULT_BATCH)?)))
        .collect();
    let fill: BTreeMap<String, f64> = addresses
        .iter()
        .filter_map(|a| {
            let m = budget.memory(a)?;
            (m.maxmemory > 0.0).then(|| (a.clone(), m.used / m.maxmemory))
        })
        .collect();
    // By memory, what each master's used_memory holds besides what its slots free when they
    // leave, which stays put; what the keys a master takes cost it beyond that (a target keeps
    // more than its source frees: tables, buckets, its replication backlog) is settled by
    // [`fitted`] against the memory model's walk of the plan made.
    let server = budget
        .masters()
        .next()
        .map_or(String::new(), |m| m.server.clone());
    let base = memory_base(&budget, &addresses, &owner_before, &g.sizes, &server);
    let method = if opts.atomic {
        Method::Atomic
    } else {
        Method::PerKey
    };
    let by_weight = opts.by.and_then(|by| {
        let settle = by == crate::plan::WeightBy::Memory;
        let mut c = fitted(&fit_budget, method, room, base, settle, |room, base| {
            compare(&WeightInputs {
                by,
                tolerance: opts.tolerance,
                masters: &addresses,
                owner_before: &owner_before,
                owner_after: &owner_after,
                sizes: &g.sizes,
                slot_load: g.slot_load.as_deref(),
                change,
                maxmemory: &maxmemory,
                pinned: &pinned,
                room,
                base,
                fill: &fill,
                server: &server,
                relieve: addresses.iter().any(|a| {
                    budget
                        .standing(a)
                        .is_some_and(|j| j.fit != crate::cluster::budget::Fit::Fits)
                }),
            })
        })?;
        c.plan.ids = topo
            .nodes
            .iter()
            .filter(|n| n.has("master"))
            .map(|n| (n.address.clone(), n.id.clone()))
            .collect();
        Some(c)
    });
    let mut big_keys = g.big_keys;
    mark_moved(
        &mut big_keys,
        &owner_before,
        &owner_after,
        by_weight.as_ref(),
    );
    Prediction {
        by_weight,
        mode: g.mode,
        entry: g.entry,
        masters,
        duration: duration_range.mid,
        duration_range,
        counts,
        timing,
        plan,
        owner_before,
        owner_after,
        rings: g.rings,
        keys: g.master_keys.values().sum(),
        keys_moved,
        keys_between_old,
        bytes: dump_bytes(&moved_slots),
        memory: memory_bytes(&moved_slots),
        mean_bytes: if measured == 0 {
            0.0
        } else {
            measured_bytes / measured as f64
        },
        ideal: g.ideal,
        seconds: started.elapsed().as_secs_f64(),
        steps: g.steps,
        holds: holds.list(),
        waits,
        sample: opts.bytes_sample,
        method: Method::PerKey,
        methods: Vec::new(),
        memory_note: None,
        memory_hint: None,
        writes: g.writes,
        notes: g.notes,
        commands: Vec::new(),
        command_notes: Vec::new(),
        big_keys,
        capacity: None,
        risks: Vec::new(),
    }
}

/// Each slot's owner once redis-cli's `plan` is done, from `owner_before`.
fn owners_after(
    owner_before: &[Option<String>],
    plan: &[RebalanceStep<String>],
) -> Vec<Option<String>> {
    let mut owner_after = owner_before.to_vec();
    for mv in plan {
        for &slot in &mv.slots {
            if let Some(o) = owner_after.get_mut(usize::from(slot)) {
                o.clone_from(&mv.to);
            }
        }
    }
    owner_after
}

/// The slots that stay where they are: those of big keys whose move would hold their master
/// past `--max-hold`, but not on a master that leaves (every slot of it must move); none with
/// `--move-big-keys`. Ascending, once each.
fn pinned_slots(big_keys: &[BigKey], change: &MasterChange, opts: &Options) -> Vec<u16> {
    if opts.move_big_keys {
        return Vec::new();
    }
    let leaving: &[String] = match change {
        MasterChange::Del { nodes } => nodes,
        _ => &[],
    };
    let mut p: Vec<u16> = big_keys
        .iter()
        .filter(|k| k.hold_source > opts.max_hold && !leaving.contains(&k.master))
        .map(|k| k.slot)
        .collect();
    p.sort_unstable();
    p.dedup();
    p
}

/// Each master's `used_memory` less what its slots free when they leave (their keys' memory
/// and, for a slot with keys, its tables on `server`), bytes, never below 0: what stays put
/// whatever a plan moves. Masters whose memory is unread are left out.
fn memory_base(
    budget: &crate::cluster::budget::Budget,
    addresses: &[String],
    owner_before: &[Option<String>],
    sizes: &BTreeMap<u16, SlotSize>,
    server: &str,
) -> BTreeMap<String, f64> {
    let slot_freed = crate::cluster::budget::slot_freed(server);
    let mut freed_by: BTreeMap<&str, f64> = BTreeMap::new();
    for (slot, owner) in owner_before.iter().enumerate() {
        let (Some(owner), Ok(slot)) = (owner, u16::try_from(slot)) else {
            continue;
        };
        let size = size_of(sizes, &slot);
        *freed_by.entry(owner.as_str()).or_default() +=
            size.memory_total() + if size.keys > 0 { slot_freed } else { 0.0 };
    }
    addresses
        .iter()
        .filter_map(|a| {
            let used = budget.memory(a)?.used;
            let freed = freed_by.get(a.as_str()).copied().unwrap_or(0.0);
            Some((a.clone(), (used - freed).max(0.0)))
        })
        .collect()
}

/// Marks each big key with the plans that move it: `redis-cli` where its slot changes owner
/// from `owner_before` to `owner_after`, `by <weight>` where the plan by weight moves it.
fn mark_moved(
    big_keys: &mut [BigKey],
    owner_before: &[Option<String>],
    owner_after: &[Option<String>],
    by_weight: Option<&WeightComparison>,
) {
    for k in big_keys {
        let slot = usize::from(k.slot);
        if owner_before.get(slot) != owner_after.get(slot) {
            k.moved_by.push("redis-cli".to_string());
        }
        if let Some(c) = by_weight {
            if c.plan.moves.iter().any(|m| m.slot == k.slot) {
                k.moved_by.push(format!("by {}", c.plan.by.name()));
            }
        }
    }
}

/// How many times [`fitted`] cuts a room and plans again at most.
const FIT_TRIES: usize = 8;

/// The part of each limit a plan by weight keeps free besides the headroom, for what the walk
/// cannot see: the clients' writes while it runs, and the estimates' error. `apply` holds the
/// nodes to the headroom alone, so that it does not stop a plan that fits for want of it.
pub const PLAN_MARGIN: f64 = 0.02;

/// How many times [`fitted`] settles a plan by memory's ends against the walk at most, and the
/// bytes within which a master's end counts as settled.
const SETTLE_TRIES: usize = 3;
const SETTLED: f64 = 64.0 * 1024.0;

/// The plan `plan` makes from the masters' rooms (`room`) and, by memory, what their memory
/// holds besides their slots (`base`), both by address, walked through `budget` (the headroom
/// and [`PLAN_MARGIN`] kept) as `apply` walks it (`method`, its default batches).
///
/// With `settle` (by memory), each master's end by the walk (what taking keys costs a target
/// beyond what its sources free, its backlog filling) is fed back into its `base` and the
/// plan made again, at most [`SETTLE_TRIES`] times or until every end is within [`SETTLED`]
/// of the planner's: so that the plan evens the `used_memory` the masters will end with.
/// Then, where a master the plan sends keys to (or one of its replicas) would not fit at some
/// move, that master's room is cut by the excess and a batch and the plan made again, at most
/// [`FIT_TRIES`] times. The last plan made (the report says where it does not fit, and apply
/// refuses it).
fn fitted(
    budget: &crate::cluster::budget::Budget,
    method: Method,
    mut room: BTreeMap<String, f64>,
    mut base: BTreeMap<String, f64>,
    settle: bool,
    plan: impl Fn(&BTreeMap<String, f64>, &BTreeMap<String, f64>) -> Option<WeightComparison>,
) -> Option<WeightComparison> {
    let walk_of = |made: &WeightComparison| {
        budget.walk(
            &made.plan.sizes(),
            crate::cluster::budget::default_batch(method),
            method,
            &made.plan.drained(),
        )
    };
    let mut made = plan(&room, &base)?;
    for _ in 0..SETTLE_TRIES {
        if !settle {
            break;
        }
        let walk = walk_of(&made);
        let Some(after) = made.plans.last().map(|p| p.weight_after.clone()) else {
            break;
        };
        let drained = made.plan.drained();
        let mut worst = 0.0f64;
        for (m, planned) in made.masters.iter().zip(&after) {
            // A drained master ends a replica, outside the plan's shares.
            let (Some(n), Some(b), false) = (walk.node(m), base.get_mut(m), drained.contains(m))
            else {
                continue;
            };
            let off = n.end - planned;
            worst = worst.max(off.abs());
            *b = (*b + off).max(0.0);
        }
        if worst < SETTLED {
            break;
        }
        made = plan(&room, &base)?;
    }
    for _ in 0..FIT_TRIES {
        let walk = walk_of(&made);
        let Some(j) = walk.first else {
            break;
        };
        let master = j.replica_of.clone().unwrap_or_else(|| j.node.clone());
        let into: f64 = made
            .plan
            .moves
            .iter()
            .filter(|m| m.to == master)
            .map(|m| m.memory.unwrap_or(m.bytes))
            .sum();
        if into <= 0.0 {
            // Not a target's: no share to cut (a source's host, a drained master's copy).
            break;
        }
        let excess = (j.would_reach - j.within()).max(0.0) + DEFAULT_BATCH;
        let cut = room.get(&master).copied().unwrap_or(into).min(into) - excess;
        room.insert(master, cut.max(0.0));
        made = plan(&room, &base)?;
    }
    Some(made)
}

/// The sizes measured in `slot` (none: an empty slot's).
fn size_of<'a>(sizes: &'a Sizes, slot: &u16) -> &'a SlotSize {
    static EMPTY: SlotSize = SlotSize {
        keys: 0,
        sampled: 0,
        dump: 0.0,
        dump_sq: 0.0,
        memory: 0.0,
        memory_sq: 0.0,
        big: 0,
        big_dump: 0.0,
        big_memory: 0.0,
    };
    sizes.get(slot).unwrap_or(&EMPTY)
}

/// Each step of `plan` with the keys, bytes and memory of its slots.
fn step_costs(plan: &[RebalanceStep<String>], sizes: &Sizes) -> Vec<StepCost> {
    plan.iter()
        .map(|m| {
            let slots: Vec<&SlotSize> = m.slots.iter().map(|s| size_of(sizes, s)).collect();
            StepCost {
                from: m.from.clone(),
                to: m.to.clone(),
                slots: m.slots.clone(),
                keys: slots.iter().map(|s| s.keys).sum(),
                bytes: dump_bytes(&slots),
                memory: memory_bytes(&slots),
            }
        })
        .collect()
}

/// The keys `plan` moves, and those of them between old masters: serving before and after,
/// not named by the change.
fn keys_moved(
    plan: &[StepCost],
    change: &MasterChange,
    owner_before: &[Option<String>],
    owner_after: &[Option<String>],
) -> (u64, u64) {
    let serves =
        |owners: &[Option<String>], a: &str| owners.iter().any(|o| o.as_deref() == Some(a));
    let old = |a: &Option<String>| {
        a.as_deref().is_some_and(|a| {
            serves(owner_before, a)
                && serves(owner_after, a)
                && !change.named().iter().any(|n| n == a)
        })
    };
    let (mut moved, mut between_old) = (0, 0);
    for m in plan {
        moved += m.keys;
        if old(&m.from) && old(&m.to) {
            between_old += m.keys;
        }
    }
    (moved, between_old)
}

/// The masters before and after: those of the cluster, then the ones that join.
fn master_addresses(topo: &LiveCluster, plan: &[StepCost], change: &MasterChange) -> Vec<String> {
    let mut addresses: Vec<String> = topo.masters.iter().map(|m| m.address.clone()).collect();
    let joining = match change {
        MasterChange::Add { nodes, .. } => nodes.as_slice(),
        _ => &[],
    };
    let named = plan
        .iter()
        .flat_map(|m| [&m.from, &m.to])
        .flatten()
        .chain(joining);
    for a in named {
        if !addresses.contains(a) {
            addresses.push(a.clone());
        }
    }
    addresses
}

/// Each master's row: slots and keys before and after, bytes out and in.
fn master_rows(
    addresses: &[String],
    plan: &[StepCost],
    g: &Gathered,
    owner_before: &[Option<String>],
    owner_after: &[Option<String>],
) -> Vec<MasterRow> {
    addresses
        .iter()
        .map(|a| {
            let count = |owners: &[Option<String>]| {
                owners
                    .iter()
                    .filter(|o| o.as_deref() == Some(a.as_str()))
                    .count()
            };
            let keys_before = g.master_keys.get(a).copied().unwrap_or(0);
            let out: Vec<&StepCost> = plan
                .iter()
                .filter(|m| m.from.as_deref() == Some(a))
                .collect();
            let inn: Vec<&StepCost> = plan.iter().filter(|m| m.to.as_deref() == Some(a)).collect();
            let keys_out: u64 = out.iter().map(|m| m.keys).sum();
            let keys_in: u64 = inn.iter().map(|m| m.keys).sum();
            let sizes_of = |moves: &[&StepCost]| -> Vec<&SlotSize> {
                moves
                    .iter()
                    .flat_map(|m| m.slots.iter())
                    .map(|s| size_of(&g.sizes, s))
                    .collect()
            };
            MasterRow {
                address: a.clone(),
                slots_before: count(owner_before),
                keys_before,
                slots_after: count(owner_after),
                keys_after: (keys_before + keys_in).saturating_sub(keys_out),
                bytes_out: dump_bytes(&sizes_of(&out)),
                bytes_in: dump_bytes(&sizes_of(&inn)),
            }
        })
        .collect()
}

/// Fills in the methods of `p` (see [`Prediction::methods`]), for redis-cli's plan and the
/// plan by weight, from what each node said of itself (`reads`): its memory, and whether it
/// has atomic slot migration; each plan walked by each method through the one memory model
/// ([`capacity`]), which gives each master's memory under each method and each node's
/// judgement. A master that could not be read starts at 0 bytes, held to nothing, and the
/// report says why. Error: `--atomic` on a cluster where a master has no atomic slot
/// migration.
pub(crate) fn add_methods(p: &mut Prediction, opts: &Options, reads: &NodeReads) -> Result<()> {
    let without_atomic: Vec<String> = reads
        .atomic
        .iter()
        .filter(|(_, &atomic)| !atomic)
        .map(|(a, _)| a.clone())
        .collect();
    p.memory_note.clone_from(&reads.note);
    p.memory_hint = reads.hint;
    if opts.atomic && !without_atomic.is_empty() {
        bail!(
            "--atomic needs Valkey 9 or later on every master (CLUSTER MIGRATESLOTS): not on {}",
            without_atomic.join(", ")
        );
    }
    p.method = if opts.atomic {
        Method::Atomic
    } else {
        Method::PerKey
    };
    // A master that could not be asked is taken to have atomic migration when the others all
    // do (a master joining a Valkey 9 cluster, say), and the report says which could not be.
    let atomic = without_atomic.is_empty() && !reads.atomic.is_empty();
    let methods: Vec<Method> = if atomic {
        vec![Method::PerKey, Method::Atomic]
    } else {
        vec![Method::PerKey]
    };
    let mut plans = vec![redis_cli_moves(p)];
    let weight_name = p
        .by_weight
        .as_ref()
        .map(|c| format!("by {}", c.plan.by.name()));
    if let (Some(c), Some(name)) = (&p.by_weight, &weight_name) {
        plans.push(PlanMoves::of_plan(name, &c.plan));
    }
    let capacity = capacity(&reads.budget(opts.headroom), &plans, &methods);
    let masters: Vec<String> = p.masters.iter().map(|m| m.address.clone()).collect();
    let known = !reads.masters.is_empty();
    let costs = |name: &str, steps: &[StepCost], seconds: f64| -> Vec<MethodCost> {
        methods
            .iter()
            .map(|&method| {
                let walk = capacity.walk(name, method).filter(|_| known);
                method::cost(steps, &masters, walk, method, seconds)
            })
            .collect()
    };
    p.methods = costs("redis-cli", &p.plan, p.duration);
    if let (Some(c), Some(name)) = (p.by_weight.as_mut(), &weight_name) {
        c.methods = costs(name, &c.steps, p.duration);
    }
    p.capacity = known.then_some(capacity);
    Ok(())
}

/// redis-cli's plan as the memory model weighs it: a move a step of it (its slots' memory,
/// `DUMP` bytes and biggest key together), in its order; the masters it drains.
fn redis_cli_moves(p: &Prediction) -> PlanMoves {
    let big = |slots: &[u16]| {
        p.big_keys
            .iter()
            .filter(|k| slots.contains(&k.slot))
            .map(|k| k.memory)
            .fold(0.0, f64::max)
    };
    let moves = p
        .plan
        .iter()
        .filter_map(|s| {
            Some(MoveSize {
                slot: s.slots.last().copied()?,
                from: s.from.clone()?,
                to: s.to.clone()?,
                memory: s.memory.value.max(0.0),
                payload: s.bytes.value.max(0.0),
                big: big(&s.slots),
                // Those with keys, at most: a slot without keys costs its target nothing.
                slots: (s.slots.len() as f64).min(s.keys as f64),
            })
        })
        .collect();
    let drained = p
        .masters
        .iter()
        .filter(|m| m.slots_before > 0 && m.slots_after == 0)
        .map(|m| m.address.clone())
        .collect();
    PlanMoves {
        plan: "redis-cli".to_string(),
        moves,
        drained,
    }
}

/// `(name, value)` pairs as a JSON object.
fn as_map<S: serde::Serializer, T: Serialize>(
    pairs: &[(String, T)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}
