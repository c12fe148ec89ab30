//! How the slots of a plan will move, and what that costs: the duration and each master's
//! `used_memory` at its peak and at the end, under each migration method. Which slots and keys
//! move does not depend on the method (the CLIs build the same table); the costs do.
//!
//! - **Per key** (`redis-cli --cluster rebalance`, any server): slot by slot, `MIGRATE` of
//!   `--cluster-pipeline` keys at a time, each key deleted on the source as it lands on the
//!   target. The duration is [`super::duration`]'s; memory moves a key at a time, so a
//!   source shrinks and a target grows step by step: each master's peak is the highest level
//!   of that walk through the plan's moves in their order.
//! - **Atomic** (Valkey 9's `CLUSTER MIGRATESLOTS`, as `valkey-cli --cluster rebalance
//!   --cluster-use-atomic-slot-migration` runs it, valkey-io/valkey#2755: one job per move of
//!   the plan, its slots as ranges, one job after another, each polled every 100 ms): the
//!   source forks, its child sends the moving slots' keys as commands through the source's
//!   output buffer to the target, writes made meanwhile follow, writes pause briefly at the
//!   handoff, and the source deletes the slots afterwards (the trim). So the target grows by
//!   the job's keys (plus the writes buffered meanwhile, none on an idle cluster), while the
//!   source keeps all of its copy until the trim, plus the fork's copy-on-write (reported
//!   afterwards as `cow_size` by `CLUSTER GETSLOTMIGRATIONS`; pages the parent writes while
//!   the child runs, next to none on an idle cluster) and at most the job's payload waiting
//!   in its output buffer. The duration is [`ATOMIC`]'s: a fixed cost a job (the fork, the
//!   connection, the handoff) and the job's bytes at a throughput.

use super::steps::StepCost;

/// The way slots move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// `MIGRATE`, key batch by key batch, as `redis-cli --cluster rebalance` does.
    PerKey,
    /// Valkey 9's atomic slot migration, as `valkey-cli --cluster-use-atomic-slot-migration`.
    Atomic,
}

impl Method {
    /// A short name: `per key`, `atomic`.
    pub fn short(self) -> &'static str {
        match self {
            Method::PerKey => "per key",
            Method::Atomic => "atomic",
        }
    }

    /// The name shown in reports.
    pub fn label(self) -> &'static str {
        match self {
            Method::PerKey => "per key (MIGRATE, as redis-cli --cluster rebalance)",
            Method::Atomic => {
                "atomic (CLUSTER MIGRATESLOTS, as valkey-cli --cluster-use-atomic-slot-migration)"
            }
        }
    }
}

/// The atomic method's duration: `seconds = per_job x jobs + bytes / bytes_per_second`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AtomicModel {
    /// Seconds a job costs besides its bytes (fork, connection, handoff, the 100 ms polls).
    pub per_job: f64,
    /// `DUMP` bytes a second the snapshot moves.
    pub bytes_per_second: f64,
}

/// Fitted on 2026-12-02 by least squares to the four atomic runs of `make
/// bench-cluster-atomic` on Valkey 9.1.2 (loopback, 2 vCPUs; 3 or 4 jobs, 13 to 349 MB): -17%
/// to +12% on them, and -16% to +15% on the same four run again (the published ones,
/// BENCHMARKS.md "Per key against atomic").
pub const ATOMIC: AtomicModel = AtomicModel {
    per_job: 0.140,
    bytes_per_second: 152e6,
};

impl AtomicModel {
    /// Seconds for `jobs` jobs carrying `bytes` `DUMP` bytes in all.
    pub fn seconds(&self, jobs: usize, bytes: f64) -> f64 {
        self.per_job * jobs as f64 + bytes / self.bytes_per_second
    }
}

/// One master's memory under a method, in bytes of `used_memory`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MemoryRow {
    /// The master (`ip:port`).
    pub address: String,
    /// Now, before the change.
    pub now: f64,
    /// The highest it reaches while the slots move (atomic: with the target keeping up, as it
    /// did on loopback).
    pub peak: f64,
    /// Atomic: the highest if the target falls behind, so that a job's whole payload waits in
    /// the source's output buffer until it is sent; per key, the same as `peak`.
    pub worst: f64,
    /// When the change is done.
    pub end: f64,
}

/// What one method costs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MethodCost {
    /// The method.
    pub method: Method,
    /// The estimated duration of the moves, in seconds.
    pub seconds: f64,
    /// Migration jobs (atomic: one `CLUSTER MIGRATESLOTS` a move; per key: the moves).
    pub jobs: usize,
    /// Each master's memory, in the order of `used`.
    pub memory: Vec<MemoryRow>,
}

/// The slot runs of `slots` (ascending) as `(start, end)` ranges, for `SLOTSRANGE`.
pub fn ranges(slots: &[u16]) -> Vec<(u16, u16)> {
    let mut sorted = slots.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    ringslot_engine::slot_runs(&sorted)
}

/// The cost of moving `plan` (its moves in order) by `method`, from each master's
/// `used_memory` now (`used`: address and bytes, every master of the plan). `per_key_seconds`
/// is the per-key duration estimate (the fitted model of slots and keys). A master the plan
/// names but `used` does not starts at 0.
pub fn cost(
    plan: &[StepCost],
    used: &[(String, f64)],
    method: Method,
    per_key_seconds: f64,
) -> MethodCost {
    // Each master's row, `end` following its level through the moves.
    let mut rows: Vec<MemoryRow> = used
        .iter()
        .map(|(address, bytes)| MemoryRow {
            address: address.clone(),
            now: *bytes,
            peak: *bytes,
            worst: *bytes,
            end: *bytes,
        })
        .collect();
    let mut index = |address: &str| -> usize {
        match rows.iter().position(|r| r.address == address) {
            Some(i) => i,
            None => {
                rows.push(MemoryRow {
                    address: address.to_string(),
                    now: 0.0,
                    peak: 0.0,
                    worst: 0.0,
                    end: 0.0,
                });
                rows.len() - 1
            }
        }
    };
    let mut moves = Vec::with_capacity(plan.len());
    for m in plan {
        let from = m.from.as_deref().map(&mut index);
        let to = m.to.as_deref().map(&mut index);
        moves.push((from, to, m.memory.value, m.bytes.value));
    }
    for (from, to, memory, bytes) in moves {
        // Atomic: the source keeps its copy until the trim (its level stays through the job);
        // if the target falls behind, the job's payload waits in its output buffer meanwhile.
        // Per key, keys leave the source as they reach the target.
        if let (Method::Atomic, Some(f)) = (method, from) {
            let source = &mut rows[f];
            source.worst = source.worst.max(source.end + bytes);
        }
        if let Some(t) = to {
            let target = &mut rows[t];
            target.end += memory;
            target.peak = target.peak.max(target.end);
            target.worst = target.worst.max(target.end);
        }
        if let Some(f) = from {
            rows[f].end -= memory;
        }
    }
    for row in &mut rows {
        row.end = row.end.max(0.0);
    }
    let bytes: f64 = plan.iter().map(|m| m.bytes.value).sum();
    MethodCost {
        method,
        seconds: match method {
            Method::PerKey => per_key_seconds,
            Method::Atomic => ATOMIC.seconds(plan.len(), bytes),
        },
        jobs: plan.len(),
        memory: rows,
    }
}

#[cfg(test)]
mod tests {
    use super::super::estimate::Estimate;
    use super::*;

    fn step(
        from: &str,
        to: &str,
        slots: std::ops::Range<u16>,
        bytes: f64,
        memory: f64,
    ) -> StepCost {
        let exact = |value| Estimate {
            value,
            error: 0.0,
            exact: true,
        };
        StepCost {
            from: Some(from.into()),
            to: Some(to.into()),
            slots: slots.collect(),
            keys: 0,
            bytes: exact(bytes),
            memory: exact(memory),
        }
    }

    #[test]
    fn per_key_moves_memory_step_by_step_and_atomic_keeps_the_source_until_the_trim() {
        // Two masters give 100 and 200 bytes of memory (DUMP 50 and 80) to a new one.
        let plan = [
            step("a", "c", 0..10, 50.0, 100.0),
            step("b", "c", 10..20, 80.0, 200.0),
        ];
        let used = [
            ("a".into(), 1000.0),
            ("b".into(), 1000.0),
            ("c".into(), 10.0),
        ];
        let per_key = cost(&plan, &used, Method::PerKey, 3.0);
        let row = |c: &MethodCost, a: &str| {
            let r = c.memory.iter().find(|r| r.address == a).unwrap();
            (r.now, r.peak, r.worst, r.end)
        };
        assert_eq!(per_key.seconds, 3.0);
        assert_eq!(row(&per_key, "a"), (1000.0, 1000.0, 1000.0, 900.0));
        assert_eq!(row(&per_key, "b"), (1000.0, 1000.0, 1000.0, 800.0));
        assert_eq!(row(&per_key, "c"), (10.0, 310.0, 310.0, 310.0));
        let atomic = cost(&plan, &used, Method::Atomic, 3.0);
        assert_eq!(row(&atomic, "a"), (1000.0, 1000.0, 1050.0, 900.0));
        assert_eq!(row(&atomic, "b"), (1000.0, 1000.0, 1080.0, 800.0));
        assert_eq!(row(&atomic, "c"), (10.0, 310.0, 310.0, 310.0));
        assert_eq!(atomic.jobs, 2);
        let expected = 2.0 * ATOMIC.per_job + 130.0 / ATOMIC.bytes_per_second;
        assert!((atomic.seconds - expected).abs() < 1e-12);
        assert_eq!(ranges(&[0, 1, 2, 7, 9, 10]), vec![(0, 2), (7, 7), (9, 10)]);
        assert_eq!(
            ranges(&[9, 0, 2, 1, 10, 7, 7]),
            vec![(0, 2), (7, 7), (9, 10)]
        );
    }
}
