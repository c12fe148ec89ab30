//! A plan by weight (`--by bytes|memory|keys`) beside redis-cli's plan by slot counts, on the
//! same keys: the engine's [`ringslot_engine::by_weight`] planner given every slot's measured
//! weight, the masters' capacities (each master's `maxmemory` where every master that takes
//! slots has one, so that they end at even fill ratios; else 1 each; `--weight` for joining
//! masters overrides, 0 for leaving ones), `--tolerance`, and the slots it must leave where
//! they are (a big key past `--max-hold`); then both plans' moves, what they move and what
//! they leave on each master, by bytes and by keys.

use super::change::MasterChange;
use super::estimate::{Estimate, Sizes, SlotSize};
use super::method::MethodCost;
use super::options::WeightBy;
use super::steps::StepCost;
use crate::plan::{owned_ranges, SlotMove, SlotPlan, PLAN_VERSION};
use ringslot_engine::by_weight::{plan_by_weight, WeightProblem};
use ringslot_engine::SLOT_COUNT;
use serde::Serialize;
use std::collections::BTreeMap;

/// The two plans side by side: the plan by weight as the plan file carries it (its fields
/// first in the JSON), and what each plan moves and leaves.
#[derive(Debug, Clone, Serialize)]
pub struct WeightComparison {
    /// The plan by weight: what `ringslot apply` carries out.
    #[serde(flatten)]
    pub plan: SlotPlan,
    /// The masters, in the prediction's order, with their capacities (relative: 1 a master,
    /// `--weight`, 0 for leaving ones, a master's `maxmemory` in MiB where they follow it; a
    /// fraction of that where a share was cut to a master's room).
    pub masters: Vec<String>,
    pub capacities: Vec<f64>,
    /// Per master, its target in the weight (`total x capacity / sum of capacities`).
    pub targets: Vec<f64>,
    /// redis-cli's plan (even slot counts), then the plan by weight.
    pub plans: Vec<PlanFigures>,
    /// Slots heavier than every master's upper bound (a hash tag bigger than a share): the
    /// master holding one alone is the best achievable.
    pub oversized: Vec<u16>,
    /// Whether the plan by weight is within the tolerance.
    pub within: bool,
    /// The tolerance the planner aimed at, a fraction: `--tolerance` less two standard errors
    /// of a master's bytes where slots were sized from samples (at least half of it); the
    /// tolerance itself when every key was sized.
    pub aimed_tolerance: f64,
    /// Whether the capacities follow the masters' `maxmemory` (even fill ratios) rather than
    /// 1 each.
    pub by_maxmemory: bool,
    /// Masters whose share was cut so that the memory the plan sends them fits their room
    /// ([`WeightInputs::room`]).
    pub capped: Vec<String>,
    /// Slots left where they are because a key in them is too big to move (`--max-hold`),
    /// and how even the plan would leave the masters (peak-to-mean by the weight) without
    /// that, against with it.
    pub pinned: Vec<u16>,
    pub pinned_cost: Option<(f64, f64)>,
    /// The plan's moves as steps between two masters (in the plan's order), with what they
    /// carry: what its memory walk follows.
    #[serde(skip)]
    pub steps: Vec<StepCost>,
    /// What each migration method costs under it (filled with the prediction's methods).
    pub methods: Vec<MethodCost>,
}

/// What a plan by weight is made from.
pub struct WeightInputs<'a> {
    /// What it evens, and how far from its share each master may end (a fraction).
    pub by: WeightBy,
    pub tolerance: f64,
    /// Every master before and after, in the prediction's order.
    pub masters: &'a [String],
    /// The slots' owners before, and after redis-cli's plan.
    pub owner_before: &'a [Option<String>],
    pub owner_after: &'a [Option<String>],
    /// Every slot's sizes (measured, or `--bytes-sample`), and with `--by load|network` its
    /// load.
    pub sizes: &'a Sizes,
    pub slot_load: Option<&'a [u64]>,
    /// The change (`--weight`, leaving masters).
    pub change: &'a MasterChange,
    /// Each master's `maxmemory` by address (0 or absent: none known).
    pub maxmemory: &'a BTreeMap<String, f64>,
    /// Slots that must stay where they are.
    pub pinned: &'a [u16],
    /// Per master, the memory it may still take (by address; absent: nothing holds it): the
    /// memory model's room ([`crate::cluster::budget::Budget::room`]).
    pub room: &'a BTreeMap<String, f64>,
    /// By memory: per master (by address), what its `used_memory` holds besides its keys'
    /// memory (the server's own, its buffers, its replication backlog), which no move takes
    /// away; counted in its load as a slot of its own that stays, so that the plan evens
    /// `used_memory` over `maxmemory`, what fills a node, rather than its keys' memory alone.
    /// Empty: none counted.
    pub base: &'a BTreeMap<String, f64>,
    /// Per master (by address), its `used_memory` over `maxmemory` now (absent: unknown): the
    /// moves of the fullest go first.
    pub fill: &'a BTreeMap<String, f64>,
    /// The cluster's server (`redis 7.0.15`, ...): by memory, a slot weighs what its master
    /// frees when it leaves (its keys' memory, and its tables where the server frees them,
    /// [`crate::cluster::budget::slot_freed`]), and a master's room is held to what a slot
    /// costs where it lands ([`crate::cluster::budget::TARGET_GROWTH`],
    /// [`crate::cluster::budget::slot_overhead`]), as the memory model counts them.
    pub server: &'a str,
    /// Whether a master is full (at or past its limit less the headroom): the plan then aims
    /// at half the tolerance, so that the full masters end at their share rather than at the
    /// tolerance's edge above it.
    pub relieve: bool,
}

/// What one plan moves and leaves.
#[derive(Debug, Clone, Serialize)]
pub struct PlanFigures {
    /// "slots (redis-cli --cluster rebalance)" or "bytes", "memory", "keys".
    pub name: String,
    /// Slots, keys and bytes (`DUMP`, estimated where sampled) moved, and the weight moved.
    pub slots_moved: u64,
    pub keys_moved: u64,
    pub bytes_moved: f64,
    pub weight_moved: f64,
    /// Per master (as [`WeightComparison::masters`]): slots, keys, bytes and weight after.
    pub slots_after: Vec<u64>,
    pub keys_after: Vec<u64>,
    pub bytes_after: Vec<f64>,
    /// Per master, the half-width of the 95% interval of its bytes after (two standard
    /// errors, from the slots sized by a sample of their keys, `--bytes-sample`): its bytes
    /// after lie within `bytes_after ± bytes_after_error`. All 0 when every key was sized.
    pub bytes_after_error: Vec<f64>,
    pub weight_after: Vec<f64>,
    /// The largest load over its target among the masters with a capacity, by bytes and by
    /// keys (1: every master at its share).
    pub peak_to_mean_bytes: f64,
    pub peak_to_mean_keys: f64,
    /// Whether every master ends within the tolerance of its target in the weight.
    pub within: bool,
}

/// A slot's keys, `DUMP` bytes and memory, estimated from its measured keys where sampled
/// (and its big keys' estimates).
fn slot_figures(s: &SlotSize) -> (f64, f64, f64) {
    (s.keys as f64, s.dump_total(), s.memory_total())
}

/// The planner's moves in the order they are carried out: first the slots holding big keys,
/// the biggest first (`big`: per slot, its big keys' memory), while their targets are
/// emptiest (a big key's payload is on top of all its target holds then); then the others
/// grouped by (source, target), as one `MIGRATE` run of redis-cli or one atomic slot migration
/// job carries them, the groups fullest source first (`fill`: each master's `used_memory` over
/// `maxmemory`, by index; the order of their first move where equal or unknown), so that on a
/// cluster near its limits the fullest master is relieved first, each group's slots ascending.
/// Each slot moves once, straight from its owner to its final master, so the order does not
/// change where they end.
fn grouped<'a>(
    moves: &'a [ringslot_engine::by_weight::WeightMove],
    fill: &[f64],
    big: &dyn Fn(usize) -> f64,
) -> Vec<&'a ringslot_engine::by_weight::WeightMove> {
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for m in moves {
        if !pairs.contains(&(m.from, m.to)) {
            pairs.push((m.from, m.to));
        }
    }
    let fill_of = |i: usize| fill.get(i).copied().unwrap_or(0.0);
    // A stable sort: pairs of equal fill keep the order of their first move.
    pairs.sort_by(|a, b| fill_of(b.0).total_cmp(&fill_of(a.0)));
    let mut out: Vec<&ringslot_engine::by_weight::WeightMove> = moves.iter().collect();
    out.sort_by(|a, b| {
        let pair = |m: &ringslot_engine::by_weight::WeightMove| {
            pairs
                .iter()
                .position(|&p| p == (m.from, m.to))
                .unwrap_or(usize::MAX)
        };
        let (big_a, big_b) = (big(a.slot), big(b.slot));
        (big_a <= 0.0)
            .cmp(&(big_b <= 0.0))
            .then(big_b.total_cmp(&big_a))
            .then(pair(a).cmp(&pair(b)))
            .then(a.slot.cmp(&b.slot))
    });
    out
}

/// Each master's capacity under `change`: 1, `--weight` for joining masters, 0 for leaving;
/// where every master that takes slots has a `maxmemory` (and no `--weight` is given), its
/// `maxmemory` instead, so that the masters end at even fill ratios: in units of
/// [`CAPACITY_GRAIN`] of the largest (whole MiB would round a node of 18.5 MiB down by 3%).
/// Also whether it did the latter, and the MiB a unit is then (1 otherwise).
fn capacities(
    masters: &[String],
    change: &MasterChange,
    maxmemory: &BTreeMap<String, f64>,
) -> (Vec<u32>, bool, f64) {
    let leaving = |m: &String| matches!(change, MasterChange::Del { nodes } if nodes.contains(m));
    let weighted = matches!(
        change,
        MasterChange::Add {
            weight: Some(_),
            ..
        }
    );
    let limit = |m: &String| maxmemory.get(m).copied().unwrap_or(0.0);
    let by_maxmemory = !weighted
        && masters
            .iter()
            .filter(|m| !leaving(m))
            .all(|m| limit(m) > 0.0);
    let largest = masters.iter().map(limit).fold(0.0, f64::max);
    let mib_a_unit = if by_maxmemory && largest > 0.0 {
        largest / 1048576.0 / CAPACITY_GRAIN
    } else {
        1.0
    };
    let capacities = masters
        .iter()
        .map(|m| match change {
            _ if leaving(m) => 0,
            _ if by_maxmemory => (limit(m) / largest * CAPACITY_GRAIN)
                .round()
                .clamp(1.0, CAPACITY_GRAIN) as u32,
            MasterChange::Add { nodes, weight } if nodes.contains(m) => weight.unwrap_or(1),
            _ => 1,
        })
        .collect();
    (capacities, by_maxmemory, mib_a_unit)
}

/// The units the largest master's `maxmemory` is, as a capacity: five significant digits,
/// and room below `u32` for the planner's finer grain ([`fit_rooms`] counts a thousandth).
const CAPACITY_GRAIN: f64 = 100_000.0;

/// The plan for `capacities`, each master's share cut where the memory the plan sends it would
/// pass its room (`room`, by address): its capacity scaled so that its target is its load now
/// plus its room in weight (at the weight-to-memory ratio of what the plan sent it), and the
/// plan made again, at most 8 times. Returns the capacities used, the plan, and the masters cut.
#[allow(clippy::too_many_arguments)]
fn fit_rooms(
    masters: &[String],
    capacities: Vec<u32>,
    weights: &[u64],
    owners: &[Option<usize>],
    pinned: &[bool],
    tolerance: f64,
    figures: &[(f64, f64, f64)],
    room: &BTreeMap<String, f64>,
) -> Option<(
    Vec<u32>,
    ringslot_engine::by_weight::WeightPlan,
    Vec<String>,
)> {
    // A finer grain than 1 a master, so that a share can be cut by a fraction.
    let mut capacities: Vec<u32> = capacities
        .into_iter()
        .map(|c| c.saturating_mul(1000))
        .collect();
    let mut capped: Vec<String> = Vec::new();
    for _ in 0..8 {
        let plan = plan_by_weight(&WeightProblem {
            weights,
            owners,
            capacities: &capacities,
            tolerance,
            pinned,
        })
        .ok()?;
        let (mut memory_in, mut weight_in) = (vec![0.0; masters.len()], vec![0.0; masters.len()]);
        for m in &plan.moves {
            if let Some(x) = memory_in.get_mut(m.to) {
                *x += figures.get(m.slot).map_or(0.0, |f| f.2);
            }
            if let Some(x) = weight_in.get_mut(m.to) {
                *x += m.weight as f64;
            }
        }
        let mut cut = false;
        for (i, name) in masters.iter().enumerate() {
            let Some(&room) = room.get(name) else {
                continue;
            };
            let room = room.max(0.0);
            if memory_in[i] <= room || capacities[i] <= 1 {
                continue;
            }
            let (before, target) = (
                plan.loads_before.get(i).copied().unwrap_or(0) as f64,
                plan.targets.get(i).copied().unwrap_or(0.0),
            );
            let room_in_weight = room * weight_in[i] / memory_in[i];
            let wanted = (before + room_in_weight) * 0.98;
            if target > 0.0 {
                let scaled = f64::from(capacities[i]) * (wanted / target).clamp(0.0, 1.0);
                capacities[i] = (scaled.floor() as u32).clamp(1, capacities[i] - 1);
                cut = true;
                if !capped.contains(name) {
                    capped.push(name.clone());
                }
            }
        }
        if !cut {
            return Some((capacities, plan, capped));
        }
    }
    let plan = plan_by_weight(&WeightProblem {
        weights,
        owners,
        capacities: &capacities,
        tolerance,
        pinned,
    })
    .ok()?;
    Some((capacities, plan, capped))
}

/// redis-cli's plan as a plan by weight of one a slot ([`WeightBy::Slots`]): a move for each
/// slot whose owner differs between `before` and `after` (the slots' owners, as master
/// indices), the masters' loads in slots, and their targets by `capacities`.
fn redis_cli_plan(
    before: &[Option<usize>],
    after: &[Option<usize>],
    capacities: &[u32],
    tolerance: f64,
) -> ringslot_engine::by_weight::WeightPlan {
    let masters = capacities.len();
    let load = |owners: &[Option<usize>]| {
        let mut load = vec![0u64; masters];
        for o in owners.iter().flatten() {
            if let Some(x) = load.get_mut(*o) {
                *x += 1;
            }
        }
        load
    };
    let moves: Vec<ringslot_engine::by_weight::WeightMove> = before
        .iter()
        .zip(after)
        .enumerate()
        .filter_map(|(slot, (b, a))| match (b, a) {
            (Some(from), Some(to)) if from != to => Some(ringslot_engine::by_weight::WeightMove {
                slot,
                from: *from,
                to: *to,
                weight: 1,
            }),
            _ => None,
        })
        .collect();
    let (loads_before, loads_after) = (load(before), load(after));
    let total: u64 = loads_before.iter().sum();
    let sum: f64 = capacities.iter().map(|&c| f64::from(c)).sum();
    let targets: Vec<f64> = capacities
        .iter()
        .map(|&c| {
            if sum > 0.0 {
                total as f64 * f64::from(c) / sum
            } else {
                0.0
            }
        })
        .collect();
    let distance = |(l, t): (&u64, &f64)| {
        if *t > 0.0 {
            (*l as f64 - t).abs() / t
        } else if *l > 0 {
            f64::INFINITY
        } else {
            0.0
        }
    };
    let deviation = loads_after
        .iter()
        .zip(&targets)
        .map(distance)
        .fold(0.0, f64::max);
    ringslot_engine::by_weight::WeightPlan {
        moved: moves.len() as u64,
        moves,
        loads_before,
        loads_after,
        best_targets: targets.clone(),
        targets,
        within: deviation <= tolerance,
        deviation,
        oversized: Vec::new(),
    }
}

/// The moves of a plan by weight as steps between two masters, in the plan's order (its moves
/// come grouped by source and target), each with its slots' keys, bytes and memory.
fn steps_of(moves: &[SlotMove], figures: &[(f64, f64, f64)]) -> Vec<StepCost> {
    let mut steps: Vec<StepCost> = Vec::new();
    for m in moves {
        let (keys, bytes, memory) = figures
            .get(usize::from(m.slot))
            .copied()
            .unwrap_or_default();
        let same = steps
            .last()
            .is_some_and(|s| s.from.as_deref() == Some(&m.from) && s.to.as_deref() == Some(&m.to));
        if !same {
            steps.push(StepCost {
                from: Some(m.from.clone()),
                to: Some(m.to.clone()),
                slots: Vec::new(),
                keys: 0,
                bytes: Estimate::default(),
                memory: Estimate::default(),
            });
        }
        if let Some(s) = steps.last_mut() {
            s.slots.push(m.slot);
            s.keys += keys as u64;
            s.bytes.value += bytes;
            s.memory.value += memory;
        }
    }
    steps
}

/// The peak-to-mean of `plan`'s loads against the shares `asked` (as the table of plans
/// measures it), and that of the plan `problem` makes without its pinned slots: (free,
/// pinned). `None` when the engine refuses the problem.
fn pinned_cost(
    problem: &WeightProblem,
    plan: &ringslot_engine::by_weight::WeightPlan,
    asked: &[u32],
    base_pins: &[bool],
) -> Option<(f64, f64)> {
    let free = plan_by_weight(&WeightProblem {
        pinned: base_pins,
        ..*problem
    })
    .ok()?;
    let asked_total: f64 = asked.iter().map(|&c| f64::from(c)).sum();
    let spread = |p: &ringslot_engine::by_weight::WeightPlan| {
        let total: f64 = p.loads_after.iter().map(|&l| l as f64).sum();
        p.loads_after
            .iter()
            .zip(asked)
            .map(|(&l, &c)| (l as f64, total * f64::from(c) / asked_total))
            .filter(|&(_, t)| t > 0.0)
            .map(|(l, t)| l / t)
            .fold(0.0f64, f64::max)
    };
    Some((spread(&free), spread(plan)))
}

/// What a plan's figures are measured against: the masters' owners before, each slot's
/// (keys, bytes, memory), the weights the planner saw, the shares asked for (1000 a unit) and
/// the plan's targets and tolerance.
struct Evenness<'a> {
    masters: usize,
    owners: &'a [Option<usize>],
    figures: &'a [(f64, f64, f64)],
    /// Per slot, the variance of its `DUMP` bytes' estimate ([`SlotSize::dump_variance`]).
    dump_variance: &'a [f64],
    weights: &'a [u64],
    asked: &'a [u32],
    targets: &'a [f64],
    tolerance: f64,
}

impl Evenness<'_> {
    /// The figures of the plan `name` whose slots end with the owners `after`.
    fn figures(&self, name: String, after: &[Option<usize>]) -> PlanFigures {
        let n = self.masters;
        let capacity: f64 = self.asked.iter().map(|&c| f64::from(c)).sum();
        let (mut slots, mut keys, mut bytes, mut w) =
            (vec![0u64; n], vec![0u64; n], vec![0.0; n], vec![0.0; n]);
        let mut variance = vec![0.0; n];
        let (mut slots_moved, mut keys_moved, mut bytes_moved, mut weight_moved) =
            (0u64, 0u64, 0.0, 0.0);
        for (s, (o, f)) in after.iter().zip(self.figures).enumerate() {
            let Some(m) = *o else { continue };
            // A master's memory besides its keys (by memory) is no slot.
            if s < SLOT_COUNT {
                slots[m] += 1;
            }
            keys[m] += f.0 as u64;
            bytes[m] += f.1;
            variance[m] += self.dump_variance.get(s).copied().unwrap_or(0.0);
            // The weights the planner saw (whole units), so that `within` agrees with it.
            let slot_weight = self.weights.get(s).copied().unwrap_or(0) as f64;
            w[m] += slot_weight;
            if self.owners.get(s).copied().flatten() != Some(m) {
                slots_moved += 1;
                keys_moved += f.0 as u64;
                bytes_moved += f.1;
                weight_moved += slot_weight;
            }
        }
        let peak = |loads: &[f64]| {
            let total: f64 = loads.iter().sum();
            loads
                .iter()
                .zip(self.asked)
                .filter(|(_, &c)| c > 0)
                .map(|(&l, &c)| {
                    let target = total * f64::from(c) / capacity;
                    if target > 0.0 {
                        l / target
                    } else {
                        0.0
                    }
                })
                .fold(0.0f64, f64::max)
        };
        let tolerance = self.tolerance;
        let within = w
            .iter()
            .zip(self.targets)
            .all(|(&l, &t)| l <= t * (1.0 + tolerance) + 1e-9 && l >= t * (1.0 - tolerance) - 1e-9);
        PlanFigures {
            name,
            slots_moved,
            keys_moved,
            bytes_moved,
            weight_moved,
            peak_to_mean_bytes: peak(&bytes),
            peak_to_mean_keys: peak(&keys.iter().map(|&k| k as f64).collect::<Vec<_>>()),
            slots_after: slots,
            keys_after: keys,
            bytes_after: bytes,
            bytes_after_error: variance.iter().map(|v| 2.0 * v.sqrt()).collect(),
            weight_after: w,
            within,
        }
    }
}

/// How far inside the tolerance a plan from samples aims, a fraction of a master's target:
/// the largest, over the masters with a share (`asked`), of two standard errors of a master's
/// weight over its target, a master taken to hold its share of every slot's variance
/// (`variance`: [`SlotSize::dump_variance`], or [`SlotSize::memory_variance`] by memory) and
/// of the slots' weights (`weights`). 0 when every key was sized.
fn sampling_margin(asked: &[u32], variance: &[f64], weights: &[f64]) -> f64 {
    let total_variance: f64 = variance.iter().sum();
    let total: f64 = weights.iter().sum();
    let shares: f64 = asked.iter().map(|&c| f64::from(c)).sum();
    if total_variance <= 0.0 || total <= 0.0 || shares <= 0.0 {
        return 0.0;
    }
    asked
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let share = f64::from(c) / shares;
            2.0 * (share * total_variance).sqrt() / (share * total)
        })
        .fold(0.0, f64::max)
}

/// The planner's `moves` as the plan file's, grouped by source and target in the order of
/// [`grouped`] (`fill`: each master's fill, by index), with each slot's figures (`figures`)
/// and its big keys' memory (`sizes`); `masters` names the planner's indices.
fn slot_moves(
    moves: &[ringslot_engine::by_weight::WeightMove],
    masters: &[String],
    figures: &[(f64, f64, f64)],
    sizes: &Sizes,
    fill: &[f64],
) -> Vec<SlotMove> {
    let name = |i: usize| masters.get(i).cloned().unwrap_or_default();
    let big = |slot: usize| {
        u16::try_from(slot)
            .ok()
            .and_then(|s| sizes.get(&s))
            .map_or(0.0, |s| s.big_memory)
    };
    grouped(moves, fill, &big)
        .into_iter()
        .map(|m| {
            let (keys, bytes, memory) = figures.get(m.slot).copied().unwrap_or_default();
            SlotMove {
                slot: u16::try_from(m.slot).unwrap_or(u16::MAX),
                from: name(m.from),
                to: name(m.to),
                keys: keys as u64,
                bytes,
                memory: Some(memory),
                big: u16::try_from(m.slot)
                    .ok()
                    .and_then(|s| sizes.get(&s))
                    .map(|s| s.big_memory)
                    .filter(|&b| b > 0.0),
            }
        })
        .collect()
}

/// Per slot, what a plan by weight is made from ([`slot_inputs`]).
struct SlotInputs {
    /// Keys, `DUMP` bytes and memory, sampled slots' means shrunk ([`super::estimate::shrunk`]).
    figures: Vec<(f64, f64, f64)>,
    /// The variance of the `DUMP` bytes' estimate, and of the weight's (memory's by memory).
    dump_variance: Vec<f64>,
    weight_variance: Vec<f64>,
}

/// Every slot's [`SlotInputs`] from `sizes`, for a plan by `by`. The planner picks slots by
/// the figures: sampled slots' means shrunk where they differ by noise only, so that it does
/// not favour the over-estimated; the variances are the raw estimates'.
fn slot_inputs(sizes: &Sizes, by: WeightBy) -> SlotInputs {
    let empty = SlotSize::default();
    let planned = super::estimate::shrunk(sizes);
    let per_slot = |of: &dyn Fn(&SlotSize) -> f64, from: &Sizes| -> Vec<f64> {
        (0..SLOT_COUNT)
            .map(|s| {
                let slot = u16::try_from(s).unwrap_or(u16::MAX);
                of(from.get(&slot).unwrap_or(&empty))
            })
            .collect()
    };
    let figures: Vec<(f64, f64, f64)> = (0..SLOT_COUNT)
        .map(|s| {
            let slot = u16::try_from(s).unwrap_or(u16::MAX);
            slot_figures(planned.get(&slot).unwrap_or(&empty))
        })
        .collect();
    let dump_variance = per_slot(&SlotSize::dump_variance, sizes);
    let weight_variance = match by {
        WeightBy::Memory => per_slot(&SlotSize::memory_variance, sizes),
        _ => dump_variance.clone(),
    };
    SlotInputs {
        figures,
        dump_variance,
        weight_variance,
    }
}

/// What a slot of figures `f` (keys, `DUMP` bytes, memory) frees on the master of `server`
/// that gives it, bytes, as the memory model counts it: its keys' memory and, for a slot with
/// keys, its tables ([`crate::cluster::budget::slot_freed`]).
fn freed(f: &(f64, f64, f64), server: &str) -> f64 {
    f.2 + if f.0 > 0.0 {
        crate::cluster::budget::slot_freed(server)
    } else {
        0.0
    }
}

/// What a slot of figures `f` costs the master of `server` that takes it, bytes: its keys'
/// memory grown by [`crate::cluster::budget::TARGET_GROWTH`] and, for a slot with keys, its
/// tables ([`crate::cluster::budget::slot_overhead`]).
fn landed(f: &(f64, f64, f64), server: &str) -> f64 {
    f.2 * crate::cluster::budget::TARGET_GROWTH
        + if f.0 > 0.0 {
            crate::cluster::budget::slot_overhead(server)
        } else {
            0.0
        }
}

/// A slot's weight by `by` from its figures (keys, `DUMP` bytes, memory); 0 by load or
/// network (those come from the slots' stats), 1 by slots.
fn weight_of(by: WeightBy, f: &(f64, f64, f64)) -> f64 {
    match by {
        WeightBy::Keys => f.0,
        WeightBy::Bytes => f.1,
        WeightBy::Memory => f.2,
        WeightBy::Load | WeightBy::Network => 0.0,
        WeightBy::Slots => 1.0,
    }
}

/// What [`fit_aimed`] fits a plan from: as [`fit_rooms`] takes them, and each slot's variance
/// of the weight.
struct Fit<'a> {
    /// Whether a master is full ([`WeightInputs::relieve`]).
    relieve: bool,
    masters: &'a [String],
    weights: &'a [u64],
    owners: &'a [Option<usize>],
    pinned: &'a [bool],
    figures: &'a [(f64, f64, f64)],
    room: &'a BTreeMap<String, f64>,
    variance: &'a [f64],
}

/// A plan fitted to the rooms: the capacities used (1000 a unit), the plan, the masters whose
/// share was cut, and the tolerance aimed at.
type Fitted = (
    Vec<u32>,
    ringslot_engine::by_weight::WeightPlan,
    Vec<String>,
    f64,
);

/// The plan by `by` fitted to the rooms ([`fit_rooms`]), aimed inside `tolerance` by the
/// sampling error where slots were sized from samples ([`sampling_margin`] a priori, then
/// [`plan_margin`] of the plan made, when larger), never below half of it: (capacities used,
/// plan, masters cut, the tolerance aimed at). `None` as [`fit_rooms`].
fn fit_aimed(
    fit: &Fit,
    capacities: Vec<u32>,
    asked: &[u32],
    tolerance: f64,
    by: WeightBy,
) -> Option<Fitted> {
    let totals: Vec<f64> = fit.figures.iter().map(|f| weight_of(by, f)).collect();
    let margin = match by {
        WeightBy::Bytes | WeightBy::Memory => sampling_margin(asked, fit.variance, &totals),
        _ => 0.0,
    };
    // Relieving full masters, the plan aims at half the tolerance: a planner that moves as
    // little as it can stops at its edge, which leaves the sources a tolerance above their
    // share.
    let margin = if fit.relieve {
        margin.max(tolerance / 2.0)
    } else {
        margin
    };
    let plan_at = |aimed: f64| {
        fit_rooms(
            fit.masters,
            capacities.clone(),
            fit.weights,
            fit.owners,
            fit.pinned,
            aimed,
            fit.figures,
            fit.room,
        )
        .map(|(c, p, cut)| (c, p, cut, aimed))
    };
    let first = plan_at((tolerance - margin).max(tolerance / 2.0))?;
    // The margin takes each master to hold its share of every slot's variance; the plan's own
    // masters may hold more (the slots it moves): aimed again by theirs.
    let needed = plan_margin(&first.1, fit.owners, fit.variance);
    if margin > 0.0 && needed > margin && !fit.relieve {
        plan_at((tolerance - needed).max(tolerance / 2.0))
    } else {
        Some(first)
    }
}

/// The largest, over the masters with a target, of two standard errors of a master's weight
/// after `plan` (from the owners `owners` and its moves; `variance` per slot, as
/// [`sampling_margin`]) over its target.
fn plan_margin(
    plan: &ringslot_engine::by_weight::WeightPlan,
    owners: &[Option<usize>],
    variance: &[f64],
) -> f64 {
    let after = after_moves(owners, plan);
    let mut per = vec![0.0; plan.targets.len()];
    for (o, v) in after.iter().zip(variance) {
        if let Some(x) = o.and_then(|m| per.get_mut(m)) {
            *x += v;
        }
    }
    per.iter()
        .zip(&plan.targets)
        .filter(|(_, &t)| t > 0.0)
        .map(|(v, t)| 2.0 * v.sqrt() / t)
        .fold(0.0, f64::max)
}

/// Index `s` as a hash slot: `None` past the 16384 (the masters' own memory, by memory).
fn slot_of(s: usize) -> Option<u16> {
    u16::try_from(s)
        .ok()
        .filter(|&s| usize::from(s) < SLOT_COUNT)
}

/// Each slot's owner (an index into the masters) once `plan` is done, from `owners` before.
fn after_moves(
    owners: &[Option<usize>],
    plan: &ringslot_engine::by_weight::WeightPlan,
) -> Vec<Option<usize>> {
    let mut after: Vec<Option<usize>> = owners.to_vec();
    for m in &plan.moves {
        if let Some(o) = after.get_mut(m.slot) {
            *o = Some(m.to);
        }
    }
    after
}

/// Each slot's weight by `by`, from its figures (keys, `DUMP` bytes, memory) or, by load or
/// network, from `slot_load`: by memory, what it frees on the master of `server` that gives
/// it ([`freed`]). `None` by load or network without loads.
fn slot_weights(
    by: WeightBy,
    slot_load: Option<&[u64]>,
    figures: &[(f64, f64, f64)],
    server: &str,
) -> Option<Vec<u64>> {
    Some(match (by, slot_load) {
        (WeightBy::Load | WeightBy::Network, Some(load)) => (0..SLOT_COUNT)
            .map(|s| load.get(s).copied().unwrap_or(0))
            .collect(),
        (WeightBy::Load | WeightBy::Network, None) => return None,
        (WeightBy::Memory, _) => figures
            .iter()
            .map(|f| freed(f, server).round() as u64)
            .collect(),
        _ => figures
            .iter()
            .map(|f| weight_of(by, f).round() as u64)
            .collect(),
    })
}

/// The plan by `by` and what it was fitted with: (capacities, plan, masters cut, the
/// tolerance aimed at). By slots, redis-cli's own ([`redis_cli_plan`], from the owners it
/// leaves, `owners_cli`), its capacities 1000 a unit of `capacities`; otherwise
/// [`fit_aimed`] to the memory model's rooms, what a master takes counted as it lands on the
/// master of `server` ([`landed`]; the masters' own memory, slots past the 16384, as it is).
/// `None` as [`fit_aimed`].
fn planned(
    fit: &Fit,
    by: WeightBy,
    capacities: Vec<u32>,
    asked: &[u32],
    tolerance: f64,
    owners_cli: &[Option<usize>],
    server: &str,
) -> Option<Fitted> {
    if by == WeightBy::Slots {
        let capacities: Vec<u32> = capacities.iter().map(|c| c.saturating_mul(1000)).collect();
        let plan = redis_cli_plan(fit.owners, owners_cli, &capacities, tolerance);
        return Some((capacities, plan, Vec::new(), tolerance));
    }
    let held: Vec<(f64, f64, f64)> = fit
        .figures
        .iter()
        .enumerate()
        .map(|(s, f)| {
            let memory = if s < SLOT_COUNT {
                landed(f, server)
            } else {
                f.2
            };
            (f.0, f.1, memory)
        })
        .collect();
    let fit = Fit {
        figures: &held,
        ..*fit
    };
    fit_aimed(&fit, capacities, asked, tolerance, by)
}

/// The comparison made from `inputs` (see [`WeightInputs`]). `None` when no master may take
/// slots, or `--by load` without loads.
pub fn compare(inputs: &WeightInputs) -> Option<WeightComparison> {
    let WeightInputs {
        by,
        tolerance,
        masters,
        owner_before,
        owner_after,
        sizes,
        slot_load,
        change,
        maxmemory,
        pinned: pinned_slots,
        room,
        base,
        fill,
        server,
        relieve,
    } = *inputs;
    let index = |o: &Option<String>| o.as_ref().and_then(|a| masters.iter().position(|m| m == a));
    let owners: Vec<Option<usize>> = owner_before.iter().map(index).collect();
    let SlotInputs {
        mut figures,
        mut dump_variance,
        mut weight_variance,
    } = slot_inputs(sizes, by);
    let weights = slot_weights(by, slot_load, &figures, server)?;
    // redis-cli's plan evens slot counts by --weight only, whatever the masters' maxmemory.
    let no_limits = BTreeMap::new();
    let limits = if by == WeightBy::Slots {
        &no_limits
    } else {
        maxmemory
    };
    let (capacities, by_maxmemory, mib_a_unit) = capacities(masters, change, limits);
    let mut pinned: Vec<bool> = (0..SLOT_COUNT)
        .map(|s| u16::try_from(s).is_ok_and(|s| pinned_slots.contains(&s)))
        .collect();
    let mut owners = owners;
    let mut owners_cli: Vec<Option<usize>> = owner_after.iter().map(index).collect();
    let mut weights = weights;
    // By memory, each master's memory besides its keys: a slot of its own past the 16384,
    // pinned to it (no plan moves it; nothing outside this file sees its index).
    if by == WeightBy::Memory {
        for (i, m) in masters.iter().enumerate() {
            let b = base.get(m).copied().unwrap_or(0.0).max(0.0);
            weights.push(b.round() as u64);
            owners.push(Some(i));
            owners_cli.push(Some(i));
            pinned.push(true);
            figures.push((0.0, 0.0, b));
            dump_variance.push(0.0);
            weight_variance.push(0.0);
        }
    }
    let base_pins: Vec<bool> = (0..pinned.len()).map(|s| s >= SLOT_COUNT).collect();
    // The shares asked for (1000 a unit, as fit_rooms counts), which the figures' peak-to-mean
    // is taken against: a share cut to a master's room is not what even means.
    let asked: Vec<u32> = capacities.iter().map(|c| c.saturating_mul(1000)).collect();
    if by == WeightBy::Slots {
        pinned.clone_from(&base_pins);
    }
    let fit = Fit {
        relieve,
        masters,
        weights: &weights,
        owners: &owners,
        pinned: &pinned,
        figures: &figures,
        room,
        variance: &weight_variance,
    };
    let (capacities, plan, capped, aimed) =
        planned(&fit, by, capacities, &asked, tolerance, &owners_cli, server)?;
    let pinned_slots: &[u16] = if by == WeightBy::Slots {
        &[]
    } else {
        pinned_slots
    };
    let problem = WeightProblem {
        weights: &weights,
        owners: &owners,
        capacities: &capacities,
        tolerance,
        pinned: &pinned,
    };
    // What leaving the big keys' slots where they are costs: the plan's evenness without it.
    let pinned_cost = if pinned_slots.is_empty() {
        None
    } else {
        pinned_cost(&problem, &plan, &asked, &base_pins)
    };
    let owner_weight = after_moves(&owners, &plan);
    let evenness = Evenness {
        masters: masters.len(),
        owners: &owners,
        figures: &figures,
        dump_variance: &dump_variance,
        weights: &weights,
        asked: &asked,
        targets: &plan.targets,
        tolerance,
    };
    let figures_of = |name: String, after: &[Option<usize>]| evenness.figures(name, after);
    let plans = vec![
        figures_of("slots (redis-cli --cluster rebalance)".into(), &owners_cli),
        figures_of(by.name().into(), &owner_weight),
    ];
    let fill: Vec<f64> = masters
        .iter()
        .map(|m| fill.get(m).copied().unwrap_or(0.0))
        .collect();
    let moves = slot_moves(&plan.moves, masters, &figures, sizes, &fill);
    // Aimed inside --tolerance, the plan is judged at --tolerance (the planner's own verdict
    // is for the tolerance it aimed at).
    let within = match plans.last() {
        Some(p) if aimed < tolerance => p.within,
        _ => plan.within,
    };
    Some(WeightComparison {
        steps: steps_of(&moves, &figures),
        plan: SlotPlan {
            version: PLAN_VERSION,
            by,
            tolerance,
            start: owned_ranges(owner_before),
            ids: Default::default(),
            lanes: crate::plan::lanes_of(&moves),
            moves,
        },
        by_maxmemory,
        capped,
        pinned: pinned_slots.to_vec(),
        pinned_cost,
        methods: Vec::new(),
        masters: masters.to_vec(),
        capacities: capacities
            .iter()
            .map(|&c| f64::from(c) / 1000.0 * mib_a_unit)
            .collect(),
        targets: plan.targets.clone(),
        plans,
        // The masters' own memory (slots past the 16384) is no slot.
        oversized: plan.oversized.iter().filter_map(|&s| slot_of(s)).collect(),
        within,
        aimed_tolerance: aimed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_masters_bytes_after_carry_the_error_of_its_sampled_slots() {
        // Three slots: slot 0 sized whole, slots 1 and 2 by a sample of their keys (100 keys,
        // 4 sized: 10, 20, 30, 40 bytes, estimate.rs's example), owned by masters 0, 0, 1;
        // after the plan, slot 1 is master 1's.
        let sampled = SlotSize {
            keys: 100,
            sampled: 4,
            dump: 100.0,
            dump_sq: 3000.0,
            ..SlotSize::default()
        };
        let whole = SlotSize {
            keys: 2,
            sampled: 2,
            dump: 30.0,
            dump_sq: 500.0,
            ..SlotSize::default()
        };
        let slots = [whole, sampled, sampled];
        let figures: Vec<(f64, f64, f64)> = slots.iter().map(slot_figures).collect();
        let variance: Vec<f64> = slots.iter().map(SlotSize::dump_variance).collect();
        let one = 100.0 * 100.0 * (500.0 / 3.0) / 4.0 * (1.0 - 4.0 / 100.0);
        assert!((variance[1] - one).abs() < 1e-6);
        let evenness = Evenness {
            masters: 2,
            owners: &[Some(0), Some(0), Some(1)],
            figures: &figures,
            dump_variance: &variance,
            weights: &[30, 2500, 2500],
            asked: &[1000, 1000],
            targets: &[2515.0, 2515.0],
            tolerance: 0.05,
        };
        let f = evenness.figures("bytes".into(), &[Some(0), Some(1), Some(1)]);
        assert_eq!(f.bytes_after, vec![30.0, 5000.0]);
        // Master 0 holds only the slot sized whole; master 1, two sampled slots.
        assert_eq!(f.bytes_after_error[0], 0.0);
        assert!((f.bytes_after_error[1] - 2.0 * (2.0 * one).sqrt()).abs() < 1e-6);
    }

    #[test]
    fn a_plan_from_samples_aims_inside_the_tolerance_by_the_sampling_error() {
        // Two masters of equal shares, 5030 bytes in all, a variance of 2 x 40000: each
        // master's half carries a standard error of 200 over a target of 2515.
        let figures = [30.0, 2500.0, 2500.0];
        let margin = sampling_margin(&[1000, 1000], &[0.0, 40_000.0, 40_000.0], &figures);
        assert!((margin - 2.0 * 200.0 / 2515.0).abs() < 1e-9, "{margin}");
        // Every key sized: no margin.
        assert_eq!(sampling_margin(&[1000, 1000], &[0.0; 3], &figures), 0.0);
        // A leaving master (share 0) is not aimed at.
        let one = sampling_margin(&[1000, 0], &[0.0, 40_000.0, 40_000.0], &figures);
        assert!(
            (one - 2.0 * (80_000.0f64).sqrt() / 5030.0).abs() < 1e-9,
            "{one}"
        );
    }
}
