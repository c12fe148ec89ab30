//! How the slots of a plan will move, and what that costs: the duration and each master's
//! `used_memory` at its peak and at the end, under each migration method (the memory as the
//! plan's walk through the one memory model has it, [`crate::cluster::budget::Budget::walk`]).
//! Which slots and keys move does not depend on the method (the CLIs build the same table);
//! the costs do.
//!
//! - **Per key** (`redis-cli --cluster rebalance`, any server): slot by slot, `MIGRATE` of
//!   `--cluster-pipeline` keys at a time, each key deleted on the source as it lands on the
//!   target. The duration is [`super::duration`]'s; memory moves a key at a time, so a
//!   source shrinks and a target grows step by step.
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
pub use crate::cluster::budget::Method;
use crate::cluster::budget::Walk;

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

/// One master's memory under a method, in bytes of `used_memory`: its row of the plan's walk
/// through the memory model ([`crate::cluster::budget::NodeWalk`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MemoryRow {
    /// The master (`ip:port`).
    pub address: String,
    /// Now, before the change.
    pub now: f64,
    /// At its fullest moment on the way (a batch in flight included where it grows).
    pub peak: f64,
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
    /// Each master's memory, in the prediction's order (a master whose memory could not be
    /// read starts at 0).
    pub memory: Vec<MemoryRow>,
}

/// The slot runs of `slots` (ascending) as `(start, end)` ranges, for `SLOTSRANGE`.
pub fn ranges(slots: &[u16]) -> Vec<(u16, u16)> {
    let mut sorted = slots.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    ringslot_engine::slot_runs(&sorted)
}

/// The cost of moving `plan` (its moves in order) by `method`: its duration
/// (`per_key_seconds`, the per-key estimate of the fitted model of slots and keys; atomic,
/// [`ATOMIC`]'s) and each of `masters`' memory as `walk` (the plan walked by that method
/// through the memory model) has it; no rows without a walk.
pub fn cost(
    plan: &[StepCost],
    masters: &[String],
    walk: Option<&Walk>,
    method: Method,
    per_key_seconds: f64,
) -> MethodCost {
    let memory = walk.map_or_else(Vec::new, |w| {
        masters
            .iter()
            .filter_map(|a| {
                let n = w.node(a)?;
                Some(MemoryRow {
                    address: a.clone(),
                    now: n.now,
                    peak: n.fullest,
                    end: n.end,
                })
            })
            .collect()
    });
    let bytes: f64 = plan.iter().map(|m| m.bytes.value).sum();
    MethodCost {
        method,
        seconds: match method {
            Method::PerKey => per_key_seconds,
            Method::Atomic => ATOMIC.seconds(plan.len(), bytes),
        },
        jobs: plan.len(),
        memory,
    }
}

#[cfg(test)]
mod tests {
    use super::super::estimate::Estimate;
    use super::*;
    use crate::cluster::budget::{Budget, MoveSize};
    use crate::cluster::memory::memory_of;

    fn step(from: &str, to: &str, slots: std::ops::Range<u16>, bytes: f64) -> StepCost {
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
            memory: exact(bytes),
        }
    }

    #[test]
    fn a_methods_duration_is_its_model_and_its_memory_the_walks() {
        // Two masters give 50 and 80 DUMP bytes to a new one.
        let plan = [step("a", "c", 0..10, 50.0), step("b", "c", 10..20, 80.0)];
        let per_key = cost(&plan, &[], None, Method::PerKey, 3.0);
        assert_eq!((per_key.seconds, per_key.jobs), (3.0, 2));
        assert!(per_key.memory.is_empty());
        let atomic = cost(&plan, &[], None, Method::Atomic, 3.0);
        let expected = 2.0 * ATOMIC.per_job + 130.0 / ATOMIC.bytes_per_second;
        assert!((atomic.seconds - expected).abs() < 1e-12);
        // The rows are the walk's, in the order asked; a master the walk lacks has none.
        let mut budget = Budget::new(0.1);
        for (a, used) in [("a:1", 1000.0), ("c:1", 10.0)] {
            budget.add_master(memory_of(a, &format!("used_memory:{used}\r\n"), ""));
        }
        let moves = [MoveSize {
            slot: 1,
            from: "a:1".into(),
            to: "c:1".into(),
            memory: 100.0,
            payload: 50.0,
            big: 0.0,
            slots: 0.0,
        }];
        let walk = budget.walk(&moves, 1e9, Method::PerKey, &[]);
        let masters = ["c:1".to_string(), "a:1".to_string(), "x:1".to_string()];
        let c = cost(&plan, &masters, Some(&walk), Method::PerKey, 3.0);
        let rows: Vec<(&str, f64, f64, f64)> = c
            .memory
            .iter()
            .map(|r| (r.address.as_str(), r.now, r.peak, r.end))
            .collect();
        // c: 10 + 107 at the end (a target grows by 1.07 times what it takes), two payloads
        // of 100 in flight at its fullest; a: never above now.
        let r = |x: f64| (x * 1e6).round() / 1e6;
        let rows: Vec<(&str, f64, f64, f64)> = rows
            .into_iter()
            .map(|(a, n, p, e)| (a, r(n), r(p), r(e)))
            .collect();
        assert_eq!(
            rows,
            vec![("c:1", 10.0, 317.0, 117.0), ("a:1", 1000.0, 1000.0, 900.0)]
        );
        assert_eq!(ranges(&[0, 1, 2, 7, 9, 10]), vec![(0, 2), (7, 7), (9, 10)]);
        assert_eq!(
            ranges(&[9, 0, 2, 1, 10, 7, 7]),
            vec![(0, 2), (7, 7), (9, 10)]
        );
    }
}
