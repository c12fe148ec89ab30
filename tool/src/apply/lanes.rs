//! `ringslot apply --parallel N`: up to N moves at once, each between two masters that are in
//! no other move. A `MIGRATE` blocks its source and its target while it runs (the source
//! serialises the keys, the target restores them), and nothing else: moves between disjoint
//! pairs of masters run side by side, each on a core of its own where each master has one.
//!
//! The plan's lanes ([`crate::plan::Lane`]: the moves of one source and target pair) are
//! carried out each in its order, by up to N workers. Each worker is a [`Prepared`] of its own
//! ([`Prepared::worker`]): its own connection to every master, so that its commands queue only
//! behind its own; it runs a move exactly as a run one move at a time does
//! ([`Prepared::checked`]: the health check before it, the limits' checks before each batch,
//! the same verbs). The limits are one watch shared by the workers (the run's memory figures
//! count every lane's bytes); `--max-bytes-per-sec` is shared out evenly among them, and
//! `--max-latency`'s probe and pacer ([`super::pace`]) are one, shared (a master over the budget
//! slows every lane).
//!
//! Which move starts next ([`next_ready`]): the moves an earlier run left half done first (to
//! close: killed before every master was told; open: killed while its keys moved), so that no other
//! move starts on their masters before them; then the first move of the plan, in its order, whose
//! two masters are in no move under way, and that no earlier move left waits for: the earlier moves
//! of its lane, and, on a master kept in order ([`kept_in_order`]: it both gives and takes slots in
//! the plan, or the plan drains it), every earlier move of that master. A master that only gives
//! (or only takes) ends where the plan puts it whatever the order its moves take, and passes
//! through nothing beyond: its memory only falls (or rises) move after move, so the walk of the
//! limits in the plan's order ([`super::limits::Limits::check_plan`]) covers any order but for
//! the batch on top of each move, which a parallel run also judges on top of such a master's
//! highest memory ([`crate::cluster::budget::Budget::any_order`]). With N = 1 this is the plan's
//! order.
//!
//! Closing a slot tells every other master (`SETSLOT ... NODE`, sent to all at once by the
//! move's worker over its own connections): a master in another lane's move answers it after
//! the `MIGRATE` it is carrying out, which `--batch-bytes` bounds (1 MiB, about 10 ms on a
//! 1 Gbit/s link). Nothing else waits on another lane.
//!
//! Stopped midway (an error, Ctrl-C, a kill), the run lets the moves under way end (Ctrl-C,
//! an error in another lane) or leaves each lane at a move of its own (a kill): the resume
//! rule is per lane ([`super::position`]), and the same command goes on.

use super::health::drains;
use super::pace::Pacing;
use super::{Applied, ApplyOptions, Event, Prepared};
use crate::cluster::finding::is_refused;
use crate::cluster::pacing::Limiter;
use crate::cluster::INTERRUPTED;
use crate::plan::SlotPlan;
use anyhow::{anyhow, bail, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::mpsc;

/// The most moves `--parallel` carries out at once.
pub(crate) const MAX_PARALLEL: usize = 64;

/// What a worker tells the run.
enum Report {
    /// Something the operator should see (a big key, a wait for a replica).
    Notice(String),
    /// The unit that began at move `first` ended: each of its moves' (keys, bytes) moved by
    /// this run (`None`: an earlier run moved it), or why it stopped.
    Done {
        worker: usize,
        first: usize,
        result: Result<Vec<Option<(u64, u64)>>>,
    },
}

/// How a worker carries out its units (each a list of the plan's moves, by index, ascending).
#[derive(Clone, Copy)]
pub(super) enum Carry {
    /// Key by key, a unit a move, with these options and this share of
    /// `--max-bytes-per-sec` (bytes a second; 0: no limit).
    Keys(ApplyOptions, u64),
    /// By atomic slot migration, a unit a job ([`super::atomic`]), each waited for at most
    /// this long.
    Atomic(std::time::Duration),
}

/// The masters whose moves keep the plan's order under `--parallel`: those that both give and
/// take slots in `plan` (their memory falls and rises), and those it drains ([`drains`]: the
/// memory check judges a drained master as the replica of the master that takes its last
/// slot, which the plan's order decides).
pub(crate) fn kept_in_order(plan: &SlotPlan) -> BTreeSet<&str> {
    let giving: BTreeSet<&str> = plan.moves.iter().map(|m| m.from.as_str()).collect();
    let taking: BTreeSet<&str> = plan.moves.iter().map(|m| m.to.as_str()).collect();
    giving
        .iter()
        .filter(|a| taking.contains(*a) || drains(plan, a, plan.moves.len()))
        .copied()
        .collect()
}

/// The position in `waiting` (the moves not started, by index, in the order they are to start)
/// of the first that may start now: its two masters are in no move of `under_way`, and no
/// move of `waiting` or `under_way` with a lower index is of its lane (`lane_of`, by move) or
/// shares with it a master of `kept` ([`kept_in_order`]). `None`: none may start until a move
/// under way ends. With nothing under way, the move of the lowest index may always start.
pub(crate) fn next_ready(
    plan: &SlotPlan,
    lane_of: &[usize],
    kept: &BTreeSet<&str>,
    waiting: &[usize],
    under_way: &BTreeSet<usize>,
) -> Option<usize> {
    let masters = |i: usize| plan.moves.get(i).map(|m| [m.from.as_str(), m.to.as_str()]);
    let busy: BTreeSet<&str> = under_way
        .iter()
        .filter_map(|&i| masters(i))
        .flatten()
        .collect();
    // The lowest index left of each lane, and of each kept master.
    let mut lane_first: BTreeMap<usize, usize> = BTreeMap::new();
    let mut kept_first: BTreeMap<&str, usize> = BTreeMap::new();
    for &k in waiting.iter().chain(under_way) {
        if let Some(&lane) = lane_of.get(k) {
            let first = lane_first.entry(lane).or_insert(k);
            *first = (*first).min(k);
        }
        for a in masters(k).into_iter().flatten() {
            if kept.contains(a) {
                let first = kept_first.entry(a).or_insert(k);
                *first = (*first).min(k);
            }
        }
    }
    waiting.iter().position(|&j| {
        let Some(pair) = masters(j) else {
            return false;
        };
        let first_of_lane = lane_of
            .get(j)
            .is_none_or(|lane| lane_first.get(lane) == Some(&j));
        !pair.iter().any(|a| busy.contains(a))
            && first_of_lane
            && pair
                .iter()
                .filter(|a| kept.contains(*a))
                .all(|a| kept_first.get(a) == Some(&j))
    })
}

impl Prepared {
    /// Another worker for a parallel run: the plan and the position as they are, its own
    /// connections to the seed and every master, the limits and the pacer (`--max-latency`)
    /// shared. Error: a node that cannot be reached.
    fn worker(&self) -> Result<Prepared> {
        Ok(Prepared {
            plan: self.plan.clone(),
            position: self.position.clone(),
            masters: self.masters.reconnect()?,
            access: self.access.clone(),
            watch: self.watch.worker(&self.access)?,
            pacing: self.pacing.clone(),
        })
    }

    /// The moves left, up to `opts.parallel` at once ([`next_ready`]), key by key: the moves
    /// left half done first ([`super::Position::pending`]), each move a unit of
    /// [`Prepared::run_units`]. `--max-bytes-per-sec` is shared out evenly among the workers;
    /// `--max-latency`'s pacer is one, shared by them.
    pub(super) fn run_lanes(
        &mut self,
        opts: &ApplyOptions,
        on: &mut dyn FnMut(Event),
    ) -> Result<Applied> {
        let n = opts.parallel.min(self.plan.lanes.len()).max(1);
        let rate = match opts.max_bytes_per_sec {
            0 => 0,
            r => (r / n as u64).max(1),
        };
        on(Event::Notice(format!(
            "{n} moves at once at most, each between two masters in no other move ({} lanes)",
            self.plan.lanes.len()
        )));
        if let Some(budget) = opts.max_latency {
            self.pacing = Pacing::start(&self.masters.links(), budget, opts, on);
        }
        let units = self.position.pending().into_iter().map(|i| vec![i]);
        let mut applied = self.run_units(n, units.collect(), Carry::Keys(*opts, rate), on)?;
        applied.pacing = self.pacing.finish();
        Ok(applied)
    }

    /// Carries out `units` (each a list of the plan's moves, by index, ascending, of one
    /// source and one target; scheduled by their first move, [`next_ready`], in the order
    /// given among those ready), up to `n` at once, each by a worker ([`Prepared::worker`],
    /// [`work`]) in a thread of its own; what they said and moved reported to `on` as it
    /// comes. An error in a unit stops new units from starting; the units under way end, and
    /// the first error is returned (with how many others failed). Ctrl-C (`INTERRUPTED`) stops
    /// it the same way once the moves to close are closed.
    pub(super) fn run_units(
        &mut self,
        n: usize,
        units: Vec<Vec<usize>>,
        carry: Carry,
        on: &mut dyn FnMut(Event),
    ) -> Result<Applied> {
        let plan = self.plan.clone();
        let lane_of = plan.lane_of_moves();
        let kept = kept_in_order(&plan);
        let workers = (0..n)
            .map(|_| self.worker())
            .collect::<Result<Vec<Prepared>>>()?;
        let mut applied = Applied::default();
        let mut failures: Vec<anyhow::Error> = Vec::new();
        let mut waiting: Vec<usize> = units.iter().filter_map(|u| u.first().copied()).collect();
        let units: BTreeMap<usize, Vec<usize>> = units
            .into_iter()
            .filter_map(|u| Some((*u.first()?, u)))
            .collect();
        std::thread::scope(|scope| {
            let (report_tx, report_rx) = mpsc::channel::<Report>();
            let mut jobs = Vec::new();
            let mut handles = Vec::new();
            for (w, worker) in workers.into_iter().enumerate() {
                let (job_tx, job_rx) = mpsc::channel::<Vec<usize>>();
                jobs.push(job_tx);
                let report = report_tx.clone();
                handles.push(scope.spawn(move || work(w, worker, &job_rx, &report, carry)));
            }
            drop(report_tx);
            let mut idle: Vec<usize> = (0..n).rev().collect();
            let mut under_way = BTreeSet::new();
            loop {
                // Stopping, only the moves to close still start (each is its lane's last).
                let stopping = !failures.is_empty() || INTERRUPTED.load(Ordering::SeqCst);
                while !idle.is_empty() {
                    let Some(at) = next_ready(&plan, &lane_of, &kept, &waiting, &under_way) else {
                        break;
                    };
                    let first = waiting.get(at).copied().unwrap_or_default();
                    if stopping && !self.position.to_close.contains(&first) {
                        break;
                    }
                    waiting.remove(at);
                    let unit = units.get(&first).cloned().unwrap_or_default();
                    let sent = idle
                        .pop()
                        .and_then(|w| jobs.get(w))
                        .is_some_and(|job| job.send(unit).is_ok());
                    if !sent {
                        failures.push(anyhow!("a worker of the run ended"));
                        break;
                    }
                    under_way.insert(first);
                    applied.most_at_once = applied.most_at_once.max(under_way.len());
                }
                if under_way.is_empty() {
                    break;
                }
                match report_rx.recv() {
                    Ok(Report::Notice(text)) => on(Event::Notice(text)),
                    Ok(Report::Done {
                        worker,
                        first,
                        result,
                    }) => {
                        under_way.remove(&first);
                        idle.push(worker);
                        match result {
                            Ok(moved) => {
                                let unit = units.get(&first).map(Vec::as_slice).unwrap_or(&[]);
                                for (&index, &m) in unit.iter().zip(&moved) {
                                    self.done(index, m, &mut applied, on);
                                }
                            }
                            Err(e) => failures.push(e),
                        }
                    }
                    Err(_) => {
                        failures.push(anyhow!("every worker of the run ended"));
                        break;
                    }
                }
            }
            drop(jobs);
            for handle in handles {
                match handle.join() {
                    Ok(moved) => {
                        applied.equal_copies.extend(moved.equal_copies);
                        applied.replaced.extend(moved.replaced);
                    }
                    Err(_) => failures.push(anyhow!("a worker panicked")),
                }
            }
        });
        // Every unit's reason is said: an atomic job stopped waiting for (Ctrl-C, the wait
        // running out) goes on in the servers, and its name and source are in its reason.
        let mut failures = failures.into_iter();
        if let Some(first) = failures.next() {
            let rest: Vec<anyhow::Error> = failures.collect();
            let others: Vec<String> = rest.iter().map(|e| format!("{e:#}")).collect();
            if !others.is_empty() {
                let text = format!(
                    "{} other moves or jobs under way stopped too: {}",
                    others.len(),
                    others.join("; ")
                );
                // A safety rule's finding stays one, whichever lane met it: the first such,
                // with every lane's reason said.
                let at = if is_refused(&first) {
                    first
                } else if let Some(i) = rest.iter().position(is_refused) {
                    let mut rest = rest;
                    let refused = rest.swap_remove(i);
                    return Err(refused.context(format!("{first:#}; {text}")));
                } else {
                    first
                };
                return Err(at.context(text));
            }
            return Err(first);
        }
        if !waiting.is_empty() {
            let left: usize = waiting
                .iter()
                .filter_map(|f| units.get(f))
                .map(Vec::len)
                .sum();
            bail!(
                "{} with {left} moves to go; the slots moved stay moved: run the same command \
                 again to go on",
                if INTERRUPTED.load(Ordering::SeqCst) {
                    "interrupted"
                } else {
                    "stopped"
                },
            );
        }
        Ok(applied)
    }

    /// Records move `index` done (`moved`: its keys and bytes, `None` when an earlier run
    /// moved them) and reports it, unless it was only closed or moved by an earlier run.
    pub(super) fn done(
        &mut self,
        index: usize,
        moved: Option<(u64, u64)>,
        applied: &mut Applied,
        on: &mut dyn FnMut(Event),
    ) {
        let closing = self.position.done.get(index).copied().unwrap_or(false);
        self.position.mark_done(index);
        let total = self.plan.moves.len();
        if let (false, Some((keys, bytes)), Some(mv)) = (closing, moved, self.plan.moves.get(index))
        {
            applied.add(keys, bytes);
            on(Event::Slot {
                index,
                total,
                mv,
                keys,
                bytes,
            });
            self.watch
                .tell_fill(&self.plan, &self.position.done, false, on);
        }
    }
}

/// A worker's life: carries out each unit `jobs` sends, as `carry` says (key by key: each move
/// as a run one move at a time would, [`Prepared::checked`]; atomic: one job,
/// [`Prepared::atomic_job`]), and reports each to `report`, until `jobs` closes; what it said
/// goes to `report` as it comes. A panic in a unit is reported as its error. What it replaced
/// on the targets.
fn work(
    w: usize,
    mut worker: Prepared,
    jobs: &mpsc::Receiver<Vec<usize>>,
    report: &mpsc::Sender<Report>,
    carry: Carry,
) -> Applied {
    let mut limiter = Limiter::new(match carry {
        Carry::Keys(_, rate) => rate,
        Carry::Atomic(_) => 0,
    });
    let mut moved = Applied::default();
    while let Ok(unit) = jobs.recv() {
        let mut said = |e: Event| {
            if let Event::Notice(text) = e {
                let _ = report.send(Report::Notice(text));
            }
        };
        let first = unit.first().copied().unwrap_or_default();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match carry {
            Carry::Keys(opts, _) => {
                let m = worker
                    .plan
                    .moves
                    .get(first)
                    .cloned()
                    .ok_or_else(|| anyhow!("the plan has no move {}", first + 1))?;
                let km = worker.checked(&m, &opts, &mut limiter, &mut moved, &mut said)?;
                Ok(vec![Some(km)])
            }
            Carry::Atomic(wait) => worker.atomic_job(&unit, wait),
        }))
        .unwrap_or_else(|_| Err(anyhow!("a worker panicked at move {}", first + 1)));
        let done = Report::Done {
            worker: w,
            first,
            result,
        };
        if report.send(done).is_err() {
            break;
        }
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{owned_ranges, SlotMove};
    use ringslot_engine::SLOT_COUNT;

    const A: &str = "10.0.0.1:7000";
    const B: &str = "10.0.0.2:7000";
    const C: &str = "10.0.0.3:7000";
    const D: &str = "10.0.0.4:7000";

    /// A plan of `moves` (slot, from, to), A and B owning every slot at its start.
    fn plan(moves: &[(u16, &str, &str)]) -> SlotPlan {
        let start: Vec<Option<String>> = (0..SLOT_COUNT)
            .map(|s| Some(if s < 8192 { A } else { B }.to_string()))
            .collect();
        let moves = moves
            .iter()
            .map(|&(slot, from, to)| SlotMove::for_test(slot, from, to))
            .collect();
        SlotPlan::for_test(&start, moves)
    }

    /// The rounds a run with `n` workers goes through when every move takes as long: the moves
    /// started together, by index.
    fn rounds(plan: &SlotPlan, n: usize) -> Vec<Vec<usize>> {
        let lane_of = plan.lane_of_moves();
        let kept = kept_in_order(plan);
        let mut waiting: Vec<usize> = (0..plan.moves.len()).collect();
        let mut out = Vec::new();
        while !waiting.is_empty() {
            let mut under_way = BTreeSet::new();
            while under_way.len() < n {
                let Some(at) = next_ready(plan, &lane_of, &kept, &waiting, &under_way) else {
                    break;
                };
                under_way.insert(waiting.remove(at));
            }
            assert!(!under_way.is_empty(), "no move could start: {waiting:?}");
            out.push(under_way.into_iter().collect());
        }
        out
    }

    #[test]
    fn disjoint_pairs_move_at_once_and_a_master_is_in_one_move_at_a_time() {
        // 2 masters to 4, the plan's lanes one after another (as predict groups them).
        let p = plan(&[
            (0, A, C),
            (1, A, C),
            (2, A, D),
            (8192, B, C),
            (8193, B, D),
            (8194, B, D),
        ]);
        let r = rounds(&p, 2);
        // Every round's moves have no master in common.
        for round in &r {
            let mut seen = BTreeSet::new();
            for &i in round {
                assert!(seen.insert(p.moves[i].from.clone()), "{r:?}");
                assert!(seen.insert(p.moves[i].to.clone()), "{r:?}");
            }
        }
        // A -> C runs beside B -> D: fewer rounds than moves.
        assert_eq!(r[0], vec![0, 4], "{r:?}");
        assert!(r.len() < p.moves.len(), "{r:?}");
        // Each lane in its order.
        let when = |i: usize| r.iter().position(|x| x.contains(&i)).unwrap();
        assert!(when(0) < when(1) && when(4) < when(5), "{r:?}");
        // One worker: the plan's order.
        assert_eq!(rounds(&p, 1), (0..6).map(|i| vec![i]).collect::<Vec<_>>());
    }

    #[test]
    fn a_master_that_gives_and_takes_or_is_drained_keeps_the_plans_order() {
        // Only giving or only taking: no master kept in order.
        let p = plan(&[(0, A, C), (8192, B, D), (8193, B, C), (1, A, D)]);
        assert!(kept_in_order(&p).is_empty());
        // C takes slot 1 from A, then gives slot 100 to D.
        let mut start = p.start_owners();
        start[100] = Some(C.to_string());
        let mut q = plan(&[(0, A, B), (1, A, C), (100, C, D)]);
        q.start = owned_ranges(&start);
        assert_eq!(kept_in_order(&q), [C].into_iter().collect());
        // C -> D (another lane, its masters free) waits for A -> C: C's moves keep the plan's
        // order (without the rule it would start beside A -> B).
        assert_eq!(rounds(&q, 3), vec![vec![0], vec![1], vec![2]]);
        // A owns slots 0 and 1 only and the plan drains it: its last slot's target is the
        // plan's (D), although A -> D is another lane whose masters are free while A -> C waits
        // for C.
        let start: Vec<Option<String>> = (0..SLOT_COUNT)
            .map(|s| Some(if s < 2 { A } else { B }.to_string()))
            .collect();
        let mut d = plan(&[(8192, B, C), (0, A, C), (1, A, D)]);
        d.start = owned_ranges(&start);
        assert_eq!(kept_in_order(&d), [A].into_iter().collect());
        assert_eq!(rounds(&d, 2), vec![vec![0], vec![1], vec![2]]);
    }
}
