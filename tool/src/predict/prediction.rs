//! What a prediction is, whichever way it ran: the plan's moves with their keys and bytes,
//! the masters before and after, each scheme's moved keys, the duration and memory of each
//! migration method (`assemble` builds it from what a way gathered).

use super::by_weight::{compare, WeightComparison};
use super::change::MasterChange;
use super::duration::{ClusterTiming, Counts, PerKeyModel, Range, PIPELINE};
use super::estimate::{dump_bytes, memory_bytes, Estimate, Sizes, SlotSize};
use super::method::{self, Method, MethodCost};
use super::options::Options;
use super::steps::{RebalanceStep, StepCost};
use super::sums::{rings_as_map, RingSums};
use crate::cluster::error::{node_error, Code};
use crate::cluster::link::Access;
use crate::cluster::pacing::{Holds, MasterHold, Probe};
use crate::cluster::reads::node_facts;
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
) -> Prediction {
    let owner_before = topo.owners();
    let mut owner_after = owner_before.clone();
    for mv in &g.plan {
        for &slot in &mv.slots {
            if let Some(o) = owner_after.get_mut(usize::from(slot)) {
                o.clone_from(&mv.to);
            }
        }
    }
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
    let by_weight = opts.by.and_then(|by| {
        let mut c = compare(
            by,
            opts.tolerance,
            &addresses,
            (&owner_before, &owner_after),
            &g.sizes,
            g.slot_load.as_deref(),
            change,
        )?;
        c.plan.ids = topo
            .nodes
            .iter()
            .filter(|n| n.has("master"))
            .map(|n| (n.address.clone(), n.id.clone()))
            .collect();
        Some(c)
    });
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
    }
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

/// Fills in the methods of `p` (see [`Prediction::methods`]) from what each master of the
/// plan says of itself ([`node_facts`]): `used_memory` now, and whether it has atomic slot
/// migration. A master of `topo` is reached by its link; a joining one, which the cluster does
/// not list yet, as the seed is, at its address. A master that cannot be asked (a joining one
/// not reachable yet, or `INFO` refused) starts at 0 bytes, and the report says why. Error:
/// `--atomic` on a cluster where a master has no atomic slot migration.
pub(crate) fn add_methods(
    access: &Access,
    topo: &LiveCluster,
    p: &mut Prediction,
    opts: &Options,
) -> Result<()> {
    let mut used = Vec::new();
    let (mut without_atomic, mut unknown) = (Vec::new(), Vec::new());
    for m in &p.masters {
        let link = match topo.masters.iter().find(|t| t.address == m.address) {
            Some(t) => Ok(t.link.clone()),
            None => access.at(&m.address),
        };
        let facts = link.and_then(|link| node_facts(&link).map_err(anyhow::Error::from));
        match facts {
            Ok(facts) => {
                used.push((m.address.clone(), facts.used_memory));
                if !facts.atomic {
                    without_atomic.push(m.address.clone());
                }
            }
            Err(e) => {
                used.push((m.address.clone(), 0.0));
                unknown.push(m.address.clone());
                if p.memory_note.is_none() {
                    p.memory_note = Some(format!("{e:#}"));
                    // The cause as the error gives it: a refused INFO, or a node the user
                    // cannot log in to (a joining master where the ACL user was not made).
                    p.memory_hint = match node_error(&e).map(|e| &e.code) {
                        Some(Code::NoPermCommand) => Some("`INFO` needs `+info`."),
                        Some(Code::Auth) => Some(
                            "The user could not log in there: make it on every node, the \
                             joining ones too.",
                        ),
                        _ => None,
                    };
                }
            }
        }
    }
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
    p.methods = vec![method::cost(&p.plan, &used, Method::PerKey, p.duration)];
    // A master that could not be asked is taken to have it when the others all do (a master
    // joining a Valkey 9 cluster, say), and the report says which could not be asked.
    if without_atomic.is_empty() && unknown.len() < p.masters.len() {
        p.methods
            .push(method::cost(&p.plan, &used, Method::Atomic, p.duration));
    }
    Ok(())
}

/// `(name, value)` pairs as a JSON object.
fn as_map<S: serde::Serializer, T: Serialize>(
    pairs: &[(String, T)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}
