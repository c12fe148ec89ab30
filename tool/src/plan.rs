//! The plan file: a plan by weight as `ringslot predict --by ... --json` writes it (the
//! object `prediction.by_weight`, whose other fields compare it with redis-cli's plan) and as
//! `ringslot apply` reads it back: one type both ways ([`SlotPlan`]), its format numbered
//! ([`PLAN_VERSION`], checked on read as cargo checks a `Cargo.lock`'s `version`), its fields
//! listed in docs/cluster.md ("The plan file"; `tests/docs.rs` checks the list against this
//! type). It depends on no other room of the tool but for the memory model's view of a move
//! ([`crate::cluster::budget::MoveSize`], [`SlotPlan::sizes`]), so that `predict` and `apply`
//! weigh a plan's moves alike: `predict` writes it, `apply` reads it.

use anyhow::{anyhow, bail, Context, Result};
use ringslot_engine::SLOT_COUNT;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The format of the plan files this ringslot writes and reads. A plan without a `version` was
/// written before formats were numbered, in format 1. A new format (a field whose meaning
/// changes, or one that `apply` must not ignore) takes the next number; this ringslot refuses
/// a plan of a later format rather than carry out what it cannot read.
///
/// Format 2 records the plan's [`Lane`]s and lets `apply --parallel` carry out moves of
/// different lanes at once: a run stopped midway may leave each lane at another move, which
/// `apply` of format 1 would refuse as out of order. A format 1 plan is read with its lanes
/// derived from its moves.
pub const PLAN_VERSION: u32 = 2;

fn first_version() -> u32 {
    1
}

/// A plan by weight: the slot map it starts from and its moves, in the order they are carried
/// out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotPlan {
    /// The plan file's format ([`PLAN_VERSION`]).
    #[serde(default = "first_version")]
    pub version: u32,
    /// What the plan evens (`bytes`, `memory`, `keys`, `load`, `network`, `slots`).
    pub by: WeightBy,
    /// How far from its share each master may end, a fraction (0.05: 5%).
    pub tolerance: f64,
    /// The owner of every slot when the plan was made, as ascending ranges of one owner each:
    /// what `ringslot apply` checks the cluster against before it moves anything.
    pub start: Vec<OwnedRange>,
    /// The node id of each master of the cluster when the plan was made, by address (a
    /// joining master not added yet has none; empty in a plan made before ids were recorded):
    /// `ringslot apply` refuses a plan whose masters are other nodes now.
    #[serde(default)]
    pub ids: BTreeMap<String, String>,
    /// The moves, slot by slot, in the order `ringslot apply` carries them out one at a time;
    /// each slot at most once.
    pub moves: Vec<SlotMove>,
    /// The moves of each source and target pair, in the order of the moves ([`lanes_of`]):
    /// what `ringslot apply --parallel` carries out side by side. Absent in a format 1 plan,
    /// where it is derived on read.
    #[serde(default)]
    pub lanes: Vec<Lane>,
}

/// A lane of a plan: its moves from one master to another, in the plan's order. A lane's
/// moves are carried out one after another; moves of lanes with no master in common may go at
/// once (`ringslot apply --parallel`), and a run stopped midway leaves each lane at a move of
/// its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lane {
    /// The source and the target (`ip:port`).
    pub from: String,
    pub to: String,
    /// Its slots, in the plan's order.
    pub slots: Vec<u16>,
}

/// The lanes of `moves`: one per (source, target) pair, in the order of their first move, each
/// with its slots in the order of the moves.
pub fn lanes_of(moves: &[SlotMove]) -> Vec<Lane> {
    let mut lanes: Vec<Lane> = Vec::new();
    for m in moves {
        match lanes.iter_mut().find(|l| l.from == m.from && l.to == m.to) {
            Some(lane) => lane.slots.push(m.slot),
            None => lanes.push(Lane {
                from: m.from.clone(),
                to: m.to.clone(),
                slots: vec![m.slot],
            }),
        }
    }
    lanes
}

/// One slot of a plan by weight: moved from a master to another (`ip:port`), with what the
/// plan measured in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotMove {
    /// The slot (0 to 16383).
    pub slot: u16,
    /// The master that owns it when the plan starts, and the one that takes it.
    pub from: String,
    pub to: String,
    /// Its live keys, and their `DUMP` bytes (estimated where the prediction sampled).
    #[serde(default)]
    pub keys: u64,
    #[serde(default)]
    pub bytes: f64,
    /// Their memory (`MEMORY USAGE`, estimated where sampled), which `apply` checks each node's
    /// limit with; absent in a plan made before it was recorded, where `apply` counts `bytes`
    /// instead (and says so: `DUMP` bytes, being compressed, understate memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<f64>,
    /// The memory of its big keys (512 KiB or more by `MEMORY USAGE`), each of which a
    /// `MIGRATE` carries whole whatever `--batch-bytes` says: what `apply` counts as the batch
    /// on top of a node's memory for this move. Absent where it has none, and in plans made
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub big: Option<f64>,
}

impl SlotMove {
    /// The move as the memory model weighs it: its memory (its `DUMP` bytes in a plan made
    /// before it had one), its `DUMP` bytes and its biggest key.
    pub fn size(&self) -> crate::cluster::budget::MoveSize {
        crate::cluster::budget::MoveSize {
            slot: self.slot,
            from: self.from.clone(),
            to: self.to.clone(),
            memory: self.memory.unwrap_or(self.bytes).max(0.0),
            payload: self.bytes.max(0.0),
            big: self.big.unwrap_or(0.0),
            slots: if self.keys > 0 { 1.0 } else { 0.0 },
        }
    }
}

/// What a plan by weight evens (`--by`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum WeightBy {
    /// The keys' `DUMP` lengths: what `MIGRATE` sends, about what an RDB file holds.
    Bytes,
    /// The keys' `MEMORY USAGE ... SAMPLES 0`: what they take in the masters' memory.
    Memory,
    /// The keys themselves, one each.
    Keys,
    /// The CPU time the masters spent on each slot's commands (`CLUSTER SLOT-STATS`
    /// `cpu-usec`, counted since the server started or `CONFIG RESETSTAT`; Valkey 8 and Redis
    /// 8.2 and later, with `cluster-slot-stats-enabled yes`).
    Load,
    /// The bytes each slot's commands brought in and sent out (`CLUSTER SLOT-STATS`
    /// `network-bytes-in` plus `network-bytes-out`, counted as `cpu-usec` is; Valkey 8 and
    /// Redis 8.2 and later, with `cluster-slot-stats-enabled yes`).
    Network,
    /// Slot counts, as `redis-cli --cluster rebalance` evens them: the plan is redis-cli's own
    /// moves (its slots, grouped by source and target), so that `ringslot apply` carries out
    /// what redis-cli would, with its own checks, limits and resume rule (and the two movers
    /// compare on the same slots).
    Slots,
}

impl WeightBy {
    /// Its name, as `--by` takes it.
    pub fn name(self) -> &'static str {
        match self {
            WeightBy::Bytes => "bytes",
            WeightBy::Memory => "memory",
            WeightBy::Keys => "keys",
            WeightBy::Load => "load",
            WeightBy::Network => "network",
            WeightBy::Slots => "slots",
        }
    }
}

/// Slots `first..=last`, all owned by `owner` (`ip:port`; `None`: unassigned).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnedRange {
    pub first: u16,
    pub last: u16,
    pub owner: Option<String>,
}

/// `owners` (one per slot) as ascending ranges of one owner each.
pub fn owned_ranges(owners: &[Option<String>]) -> Vec<OwnedRange> {
    let mut ranges: Vec<OwnedRange> = Vec::new();
    for (slot, owner) in owners.iter().enumerate() {
        let Ok(slot) = u16::try_from(slot) else { break };
        match ranges.last_mut() {
            Some(r) if r.owner == *owner && r.last.checked_add(1) == Some(slot) => r.last = slot,
            _ => ranges.push(OwnedRange {
                first: slot,
                last: slot,
                owner: owner.clone(),
            }),
        }
    }
    ranges
}

impl SlotPlan {
    /// Reads a plan from the text of `ringslot predict --by ... --json` (or of its
    /// `prediction.by_weight` object alone) and checks it ([`SlotPlan::check`]). Errors: not
    /// JSON, no plan by weight in it (a prediction without `--by`), a format this ringslot
    /// does not read, a field missing or of the wrong type, or a plan that fails its check.
    pub fn from_json(text: &str) -> Result<SlotPlan> {
        let v: serde_json::Value = serde_json::from_str(text).context("the plan is not JSON")?;
        let object = v
            .get("prediction")
            .and_then(|p| p.get("by_weight"))
            .or_else(|| v.get("moves").map(|_| &v))
            .ok_or_else(|| {
                anyhow!(
                    "no plan by weight in it: make one with `ringslot predict ... --by bytes \
                     --json > plan.json`"
                )
            })?;
        let version = match object.get("version") {
            None => first_version(),
            Some(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| anyhow!("the plan's `version` is not a format number: {n}"))?,
        };
        if version == 0 || version > PLAN_VERSION {
            bail!(
                "the plan is in format {version}, and this ringslot reads format \
                 {PLAN_VERSION} and earlier: it was made by another version of ringslot; make \
                 the plan again with this one (or apply it with the version that made it)"
            );
        }
        let mut plan = SlotPlan::deserialize(object).map_err(|e| {
            if object.get("start").is_none() {
                anyhow!("the plan has no `start` (the slot map it starts from): make it again")
            } else {
                anyhow!("the plan: {e}")
            }
        })?;
        if plan.lanes.is_empty() {
            plan.lanes = lanes_of(&plan.moves);
        }
        plan.check()?;
        Ok(plan)
    }

    /// Checks what the type cannot say: the start map covers every slot once, and each move
    /// is of a slot (0 to 16383) not moved before, from the master that owned it, to another.
    pub fn check(&self) -> Result<()> {
        let mut covered = vec![false; SLOT_COUNT];
        for r in &self.start {
            if r.first > r.last || usize::from(r.last) >= SLOT_COUNT {
                bail!(
                    "the plan's start map has a range {}-{} that is not of slots (0 to 16383)",
                    r.first,
                    r.last
                );
            }
            for slot in r.first..=r.last {
                match covered.get_mut(usize::from(slot)) {
                    Some(seen @ false) => *seen = true,
                    _ => bail!("the plan's start map lists slot {slot} twice"),
                }
            }
        }
        if let Some(slot) = covered.iter().position(|c| !c) {
            bail!("the plan's start map lacks slot {slot}");
        }
        let start = self.start_owners();
        let mut seen = BTreeSet::new();
        for m in &self.moves {
            if usize::from(m.slot) >= SLOT_COUNT {
                bail!(
                    "the plan moves slot {}, which is not a slot (0 to 16383)",
                    m.slot
                );
            }
            if !seen.insert(m.slot) {
                bail!("the plan moves slot {} twice", m.slot);
            }
            if start.get(usize::from(m.slot)).cloned().flatten().as_deref() != Some(&m.from) {
                bail!(
                    "the plan moves slot {} from {}, which did not own it",
                    m.slot,
                    m.from
                );
            }
            if m.from == m.to {
                bail!("the plan moves slot {} from {} to itself", m.slot, m.from);
            }
        }
        let derived = lanes_of(&self.moves);
        if self.lanes != derived {
            let at = self
                .lanes
                .iter()
                .zip(&derived)
                .position(|(a, b)| a != b)
                .unwrap_or(self.lanes.len().min(derived.len()));
            let lane = self
                .lanes
                .get(at)
                .or(derived.get(at))
                .map(|l| format!(" ({} -> {})", l.from, l.to))
                .unwrap_or_default();
            bail!(
                "the plan's lane {}{lane} is not its moves between those masters, in their \
                 order (were the moves edited?): remove `lanes` from the file to have them \
                 derived from the moves, or make the plan again",
                at + 1
            );
        }
        Ok(())
    }

    /// The owner of every slot when the plan was made (16384 entries, by slot).
    pub fn start_owners(&self) -> Vec<Option<String>> {
        let mut owners = vec![None; SLOT_COUNT];
        for r in &self.start {
            for slot in r.first..=r.last {
                if let Some(o) = owners.get_mut(usize::from(slot)) {
                    o.clone_from(&r.owner);
                }
            }
        }
        owners
    }

    /// The lane of each move (an index into `lanes`), by move.
    pub fn lane_of_moves(&self) -> Vec<usize> {
        self.moves
            .iter()
            .map(|m| {
                self.lanes
                    .iter()
                    .position(|l| l.from == m.from && l.to == m.to)
                    .unwrap_or(usize::MAX)
            })
            .collect()
    }

    /// Every master the plan names (sources and targets), sorted.
    pub fn masters(&self) -> BTreeSet<String> {
        self.moves
            .iter()
            .flat_map(|m| [m.from.clone(), m.to.clone()])
            .collect()
    }

    /// Whether the plan drains the master at `address` by its move `upto` (exclusive): it
    /// takes no slot, and every slot it had when the plan was made is moved by then. Such a
    /// master may turn replica of one that took its slots (Redis 7.0 and later with
    /// `cluster-allow-replica-migration yes`), which is no failover, and full-syncs from it.
    pub fn drains(&self, address: &str, upto: usize) -> bool {
        if self.moves.iter().any(|m| m.to == address) {
            return false;
        }
        let moved: BTreeSet<u16> = self
            .moves
            .iter()
            .take(upto)
            .filter(|m| m.from == address)
            .map(|m| m.slot)
            .collect();
        self.start_owners()
            .iter()
            .enumerate()
            .filter(|(_, o)| o.as_deref() == Some(address))
            .all(|(slot, _)| u16::try_from(slot).is_ok_and(|s| moved.contains(&s)))
    }

    /// Its moves as the memory model weighs them, in order ([`SlotMove::size`]).
    pub fn sizes(&self) -> Vec<crate::cluster::budget::MoveSize> {
        self.moves.iter().map(SlotMove::size).collect()
    }

    /// The masters the whole plan drains ([`SlotPlan::drains`]).
    pub fn drained(&self) -> Vec<String> {
        self.masters()
            .into_iter()
            .filter(|a| self.drains(a, self.moves.len()))
            .collect()
    }
}

#[cfg(test)]
impl SlotPlan {
    /// A plan for unit tests: `moves` from `start` (every slot's owner, by slot), by bytes
    /// within 5%, its lanes derived from the moves, no node ids.
    pub(crate) fn for_test(start: &[Option<String>], moves: Vec<SlotMove>) -> SlotPlan {
        SlotPlan {
            version: PLAN_VERSION,
            by: WeightBy::Bytes,
            tolerance: 0.05,
            start: owned_ranges(start),
            ids: BTreeMap::new(),
            lanes: lanes_of(&moves),
            moves,
        }
    }
}

#[cfg(test)]
impl SlotMove {
    /// A move for unit tests: `slot` from `from` to `to`, one key of one byte.
    pub(crate) fn for_test(slot: u16, from: &str, to: &str) -> SlotMove {
        SlotMove {
            slot,
            from: from.into(),
            to: to.into(),
            keys: 1,
            bytes: 1.0,
            memory: None,
            big: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "10.0.0.1:7000";
    const B: &str = "10.0.0.2:7000";
    const C: &str = "10.0.0.3:7000";

    fn json(moves: &str) -> String {
        format!(
            r#"{{"prediction": {{"by_weight": {{"by": "bytes", "tolerance": 0.05,
            "start": [{{"first": 0, "last": 8191, "owner": "{A}"}},
                      {{"first": 8192, "last": 16383, "owner": "{B}"}}],
            "moves": [{moves}]}}}}}}"#
        )
    }

    #[test]
    fn a_plan_reads_from_the_predictions_json_and_bad_plans_are_refused() {
        let p = SlotPlan::from_json(&json(&format!(
            r#"{{"slot": 0, "from": "{A}", "to": "{C}", "keys": 3, "bytes": 40.0}}"#
        )))
        .unwrap();
        assert_eq!(p.moves.len(), 1);
        assert_eq!(p.moves[0].keys, 3);
        assert_eq!(p.start_owners()[8192].as_deref(), Some(B));
        assert_eq!(p.version, 1, "a plan without a version is format 1");
        assert_eq!(
            p.lanes,
            vec![Lane {
                from: A.into(),
                to: C.into(),
                slots: vec![0]
            }],
            "a format 1 plan's lanes are derived from its moves"
        );
        let twice = format!(
            r#"{{"slot": 0, "from": "{A}", "to": "{C}"}}, {{"slot": 0, "from": "{A}", "to": "{B}"}}"#
        );
        let e = SlotPlan::from_json(&json(&twice)).unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
        let wrong = format!(r#"{{"slot": 0, "from": "{B}", "to": "{C}"}}"#);
        let e = SlotPlan::from_json(&json(&wrong)).unwrap_err().to_string();
        assert!(e.contains("did not own"), "{e}");
        let itself = format!(r#"{{"slot": 0, "from": "{A}", "to": "{A}"}}"#);
        assert!(SlotPlan::from_json(&json(&itself)).is_err());
        let e = SlotPlan::from_json(r#"{"prediction": {}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--by bytes"), "{e}");
        assert!(SlotPlan::from_json("not json").is_err());
    }

    #[test]
    fn the_plan_is_written_and_read_as_one_type_and_a_later_format_is_refused() {
        let plan = SlotPlan {
            version: PLAN_VERSION,
            by: WeightBy::Bytes,
            tolerance: 0.05,
            start: owned_ranges(
                &(0..SLOT_COUNT)
                    .map(|s| Some(if s < 100 { A } else { B }.to_string()))
                    .collect::<Vec<_>>(),
            ),
            ids: [(A.to_string(), "a".repeat(40))].into_iter().collect(),
            moves: vec![SlotMove {
                slot: 5,
                from: A.into(),
                to: C.into(),
                keys: 2,
                bytes: 300.0,
                memory: None,
                big: None,
            }],
            lanes: vec![Lane {
                from: A.into(),
                to: C.into(),
                slots: vec![5],
            }],
        };
        let text = serde_json::to_string(&plan).unwrap();
        assert!(text.starts_with(r#"{"version":2,"by":"bytes""#), "{text}");
        assert_eq!(SlotPlan::from_json(&text).unwrap(), plan);
        let later = text.replace(r#""version":2"#, r#""version":3"#);
        let e = SlotPlan::from_json(&later).unwrap_err().to_string();
        assert!(
            e.contains("format 3") && e.contains("reads format 2"),
            "{e}"
        );
        // Lanes that are not the moves' (an edited file) are refused.
        let edited = text.replace(r#""slots":[5]"#, r#""slots":[6]"#);
        let e = SlotPlan::from_json(&edited).unwrap_err().to_string();
        assert!(e.contains("lanes"), "{e}");
        let missing = text.replace(r#""tolerance":0.05,"#, "");
        let e = SlotPlan::from_json(&missing).unwrap_err().to_string();
        assert!(e.contains("tolerance"), "{e}");
    }
}
