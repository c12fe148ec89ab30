//! A plan by weight (`--by bytes|memory|keys`) beside redis-cli's plan by slot counts, on the
//! same keys: the engine's [`ringslot_engine::by_weight`] planner given every slot's measured
//! weight, the masters' capacities from the change (1 each, `--weight` for joining masters, 0
//! for leaving ones), and `--tolerance`; then both plans' moves, what they move and what they
//! leave on each master, by bytes and by keys.

use super::change::MasterChange;
use super::estimate::{Sizes, SlotSize};
use super::options::WeightBy;
use crate::plan::{owned_ranges, SlotMove, SlotPlan, PLAN_VERSION};
use ringslot_engine::by_weight::{plan_by_weight, WeightProblem};
use ringslot_engine::SLOT_COUNT;
use serde::Serialize;

/// The two plans side by side: the plan by weight as the plan file carries it (its fields
/// first in the JSON), and what each plan moves and leaves.
#[derive(Debug, Clone, Serialize)]
pub struct WeightComparison {
    /// The plan by weight: what `ringslot apply` carries out.
    #[serde(flatten)]
    pub plan: SlotPlan,
    /// The masters, in the prediction's order, with their capacities.
    pub masters: Vec<String>,
    pub capacities: Vec<u32>,
    /// Per master, its target in the weight (`total x capacity / sum of capacities`).
    pub targets: Vec<f64>,
    /// redis-cli's plan (even slot counts), then the plan by weight.
    pub plans: Vec<PlanFigures>,
    /// Slots heavier than every master's upper bound (a hash tag bigger than a share): the
    /// master holding one alone is the best achievable.
    pub oversized: Vec<u16>,
    /// Whether the plan by weight is within the tolerance.
    pub within: bool,
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
    pub weight_after: Vec<f64>,
    /// The largest load over its target among the masters with a capacity, by bytes and by
    /// keys (1: every master at its share).
    pub peak_to_mean_bytes: f64,
    pub peak_to_mean_keys: f64,
    /// Whether every master ends within the tolerance of its target in the weight.
    pub within: bool,
}

/// A slot's keys, `DUMP` bytes and memory, estimated from its measured keys where sampled.
fn slot_figures(s: &SlotSize) -> (f64, f64, f64) {
    let keys = s.keys as f64;
    if s.sampled == 0 {
        return (keys, 0.0, 0.0);
    }
    let scale = if s.sampled >= s.keys {
        1.0
    } else {
        keys / s.sampled as f64
    };
    (keys, s.dump * scale, s.memory * scale)
}

/// The planner's moves grouped by (source, target), the groups in the order of their first
/// move, each group's slots ascending: what one `MIGRATE` run of redis-cli or one atomic slot
/// migration job carries (each slot moves once, straight from its owner to its final master,
/// so the order of the moves does not change where they end).
fn grouped(
    moves: &[ringslot_engine::by_weight::WeightMove],
) -> Vec<&ringslot_engine::by_weight::WeightMove> {
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for m in moves {
        if !pairs.contains(&(m.from, m.to)) {
            pairs.push((m.from, m.to));
        }
    }
    let mut out: Vec<&ringslot_engine::by_weight::WeightMove> = moves.iter().collect();
    out.sort_by_key(|m| {
        (
            pairs
                .iter()
                .position(|&p| p == (m.from, m.to))
                .unwrap_or(usize::MAX),
            m.slot,
        )
    });
    out
}

/// Each master's capacity under `change`: 1, `--weight` for joining masters, 0 for leaving.
fn capacities(masters: &[String], change: &MasterChange) -> Vec<u32> {
    masters
        .iter()
        .map(|m| match change {
            MasterChange::Add { nodes, weight } if nodes.contains(m) => weight.unwrap_or(1),
            MasterChange::Del { nodes } if nodes.contains(m) => 0,
            _ => 1,
        })
        .collect()
}

/// The comparison for `by`: `masters` (every master before and after), the slots' owners
/// before and after redis-cli's plan, their sizes (every slot measured, or `--bytes-sample`),
/// each slot's load (`--by load`), and the change. `None` when no master may take slots, or
/// `--by load` without loads.
pub fn compare(
    by: WeightBy,
    tolerance: f64,
    masters: &[String],
    (owner_before, owner_after): (&[Option<String>], &[Option<String>]),
    sizes: &Sizes,
    slot_load: Option<&[u64]>,
    change: &MasterChange,
) -> Option<WeightComparison> {
    let index = |o: &Option<String>| o.as_ref().and_then(|a| masters.iter().position(|m| m == a));
    let owners: Vec<Option<usize>> = owner_before.iter().map(index).collect();
    let empty = SlotSize::default();
    let figures: Vec<(f64, f64, f64)> = (0..SLOT_COUNT)
        .map(|s| {
            let slot = u16::try_from(s).unwrap_or(u16::MAX);
            slot_figures(sizes.get(&slot).unwrap_or(&empty))
        })
        .collect();
    let weight = |f: &(f64, f64, f64)| match by {
        WeightBy::Keys => f.0,
        WeightBy::Bytes => f.1,
        WeightBy::Memory => f.2,
        WeightBy::Load | WeightBy::Network => 0.0,
    };
    let weights: Vec<u64> = match (by, slot_load) {
        (WeightBy::Load | WeightBy::Network, Some(load)) => (0..SLOT_COUNT)
            .map(|s| load.get(s).copied().unwrap_or(0))
            .collect(),
        (WeightBy::Load | WeightBy::Network, None) => return None,
        _ => figures.iter().map(|f| weight(f).round() as u64).collect(),
    };
    let capacities = capacities(masters, change);
    let plan = plan_by_weight(&WeightProblem {
        weights: &weights,
        owners: &owners,
        capacities: &capacities,
        tolerance,
    })
    .ok()?;
    let mut owner_weight: Vec<Option<usize>> = owners.clone();
    for m in &plan.moves {
        if let Some(o) = owner_weight.get_mut(m.slot) {
            *o = Some(m.to);
        }
    }
    let owners_cli: Vec<Option<usize>> = owner_after.iter().map(index).collect();
    let capacity: f64 = capacities.iter().map(|&c| f64::from(c)).sum();
    let figures_of = |name: String, after: &[Option<usize>]| -> PlanFigures {
        let n = masters.len();
        let (mut slots, mut keys, mut bytes, mut w) =
            (vec![0u64; n], vec![0u64; n], vec![0.0; n], vec![0.0; n]);
        let (mut slots_moved, mut keys_moved, mut bytes_moved, mut weight_moved) =
            (0u64, 0u64, 0.0, 0.0);
        for (s, (o, f)) in after.iter().zip(&figures).enumerate() {
            let Some(m) = *o else { continue };
            slots[m] += 1;
            keys[m] += f.0 as u64;
            bytes[m] += f.1;
            // The weights the planner saw (whole units), so that `within` agrees with it.
            let slot_weight = weights.get(s).copied().unwrap_or(0) as f64;
            w[m] += slot_weight;
            if owners.get(s).copied().flatten() != Some(m) {
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
                .zip(&capacities)
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
        let within = w
            .iter()
            .zip(&plan.targets)
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
            weight_after: w,
            within,
        }
    };
    let plans = vec![
        figures_of("slots (redis-cli --cluster rebalance)".into(), &owners_cli),
        figures_of(by.name().into(), &owner_weight),
    ];
    let name = |i: usize| masters.get(i).cloned().unwrap_or_default();
    Some(WeightComparison {
        plan: SlotPlan {
            version: PLAN_VERSION,
            by,
            tolerance,
            start: owned_ranges(owner_before),
            ids: Default::default(),
            moves: grouped(&plan.moves)
                .into_iter()
                .map(|m| {
                    let (keys, bytes, _) = figures.get(m.slot).copied().unwrap_or_default();
                    SlotMove {
                        slot: u16::try_from(m.slot).unwrap_or(u16::MAX),
                        from: name(m.from),
                        to: name(m.to),
                        keys: keys as u64,
                        bytes,
                    }
                })
                .collect(),
        },
        masters: masters.to_vec(),
        capacities,
        targets: plan.targets.clone(),
        plans,
        oversized: plan
            .oversized
            .iter()
            .filter_map(|&s| u16::try_from(s).ok())
            .collect(),
        within: plan.within,
    })
}
