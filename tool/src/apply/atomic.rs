//! `ringslot apply --atomic`: the plan's moves carried out by Valkey 9's atomic slot migration
//! instead of key by key. Moves between the same two masters become one job,
//! `CLUSTER MIGRATESLOTS SLOTSRANGE a b [c d ...] NODE <target>` sent to the source, whose
//! progress `CLUSTER GETSLOTMIGRATIONS` on the source shows (valkey-io/valkey
//! `src/cluster_migrateslots.c`: a job ends `success`, `failed` or `cancelled`). A job runs in
//! the servers, not in the tool: it outlives a killed or interrupted run, which says so (Ctrl-C
//! does not cancel it: `CLUSTER CANCELSLOTMIGRATIONS` on the source does), and a resumed run
//! reads the jobs on every master first and waits for the plan's own before it starts another
//! (a new job must not land on a target still importing).
//!
//! One job at a time, the jobs are the runs of consecutive moves between the same two masters,
//! in the plan's order. With `--parallel N`, up to N jobs run at once, each between two masters
//! in no other job, scheduled as the key-by-key moves are ([`super::lanes`]): a job is a lane's
//! moves ([`lane_jobs`]), cut where a move of another lane on a master kept in order comes
//! between. Each master is in one job at a time, as a node forks one child for its exports
//! (an export also waits behind a `BGSAVE` or an AOF rewrite there).

use super::door::Write as ClusterWrite;
use super::lanes::{kept_in_order, Carry};
use super::{claims, Applied, ApplyOptions, Event, Prepared};
use crate::cluster::finding::Finding;
use crate::cluster::finding::{refuse, stop};
use crate::cluster::migrations::{self, job_slots, Job};
use crate::cluster::pacing::Limiter;
use crate::cluster::topology::nodes_on;
use crate::cluster::INTERRUPTED;
use crate::plan::SlotMove;
use crate::predict::method::ranges;
use anyhow::{anyhow, bail, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The moves not `done` (by index), as jobs run one after another: the runs of consecutive
/// moves between the same two masters, each a list of move indices, ascending.
fn groups(moves: &[SlotMove], done: &[bool]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let pair = |i: usize| moves.get(i).map(|m| (m.from.as_str(), m.to.as_str()));
    for i in (0..moves.len()).filter(|&i| !done.get(i).copied().unwrap_or(true)) {
        match out.last_mut() {
            Some(g) if g.first().and_then(|&f| pair(f)) == pair(i) => g.push(i),
            _ => out.push(vec![i]),
        }
    }
    out
}

/// The moves not `done` (by index), as jobs run side by side (`--parallel`): each lane's
/// moves (one source and one target), one job until a move of another lane that shares with
/// it a master of `kept` ([`kept_in_order`]) comes between them in the plan's order; each a
/// list of move indices, ascending, the jobs by their first move. Such a job carried out at
/// its first move keeps the plan's order on every kept master.
fn lane_jobs(moves: &[SlotMove], done: &[bool], kept: &BTreeSet<&str>) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    // The job each lane adds to, by (source, target): its index in `out`.
    let mut open: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (i, m) in moves.iter().enumerate() {
        if done.get(i).copied().unwrap_or(true) {
            continue;
        }
        let lane = (m.from.as_str(), m.to.as_str());
        let on_kept = |(a, b): (&str, &str)| {
            [a, b]
                .iter()
                .any(|x| kept.contains(x) && (*x == lane.0 || *x == lane.1))
        };
        open.retain(|&other, _| other == lane || !on_kept(other));
        match open.get(&lane).and_then(|&j| out.get_mut(j)) {
            Some(job) => job.push(i),
            None => {
                open.insert(lane, out.len());
                out.push(vec![i]);
            }
        }
    }
    out
}

/// The most a job may run before the tool stops waiting for it (it goes on in the servers):
/// an hour, unless `--atomic-wait` says otherwise.
pub(crate) const DEFAULT_ATOMIC_WAIT: Duration = Duration::from_secs(3600);

impl Prepared {
    /// The moves not `done` as the jobs of a run with `parallel` jobs at once at most.
    fn jobs(&self, done: &[bool], parallel: usize) -> Vec<Vec<usize>> {
        let moves = &self.plan.moves;
        if parallel > 1 {
            lane_jobs(moves, done, &kept_in_order(&self.plan))
        } else {
            groups(moves, done)
        }
    }

    /// The `CLUSTER MIGRATESLOTS` commands `--atomic` would send (with `parallel` jobs at
    /// once at most), one line each.
    pub(crate) fn atomic_commands(&self, parallel: usize) -> Vec<String> {
        let moves = &self.plan.moves;
        let mut lines = Vec::new();
        let half: Vec<usize> = self
            .position
            .to_close
            .iter()
            .chain(&self.position.open)
            .copied()
            .collect();
        if !half.is_empty() {
            lines.push(format!(
                "# move {} is half done key by key: it is finished that way first (`ringslot \
                 apply --dry-run` without --atomic lists its commands)",
                half.iter()
                    .map(|i| (i + 1).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let mut done = self.position.done.clone();
        for i in half {
            if let Some(d) = done.get_mut(i) {
                *d = true;
            }
        }
        let jobs = self.jobs(&done, parallel);
        lines.extend(jobs.into_iter().filter_map(|job| {
            let m = moves.get(*job.first()?)?;
            let mut slots: Vec<u16> = job
                .iter()
                .filter_map(|&i| moves.get(i))
                .map(|p| p.slot)
                .collect();
            slots.sort_unstable();
            let spec: Vec<String> = ranges(&slots)
                .iter()
                .map(|(a, b)| format!("{a} {b}"))
                .collect();
            Some(format!(
                "{}: CLUSTER MIGRATESLOTS SLOTSRANGE {} NODE {}   # {} slots to {}; then \
                     CLUSTER GETSLOTMIGRATIONS every 100 ms until the job ends",
                m.from,
                spec.join(" "),
                self.masters.id(&m.to),
                slots.len(),
                m.to
            ))
        }));
        lines
    }

    /// An atomic slot migration running on a master (a server without them: none), as the
    /// reason a key-by-key run must not start. Error: the jobs cannot be read (NOPERM: the
    /// user lacks `+cluster|getslotmigrations`).
    pub(crate) fn atomic_running(&mut self) -> Result<Option<Finding>> {
        for (address, n) in self.masters.nodes.iter_mut() {
            if let Some(job) = migrations::running(&mut n.con)? {
                let field = |name: &str| job.get(name).cloned().unwrap_or_else(|| "?".into());
                let peer = if field("operation").eq_ignore_ascii_case("import") {
                    field("source_node")
                } else {
                    field("target_node")
                };
                return Ok(Some(Finding::AtomicJob {
                    node: address.clone(),
                    name: field("name"),
                    operation: field("operation"),
                    slots: field("slot_ranges"),
                    state: field("state"),
                    peer,
                }));
            }
        }
        Ok(None)
    }

    /// Why `--atomic` cannot run here (a master that is not Valkey 9 or later), if so.
    pub(crate) fn atomic_refusal(&mut self) -> Result<Option<Finding>> {
        for (address, n) in self.masters.nodes.iter_mut() {
            let info = n.con.text(&["INFO", "server"])?;
            if !crate::reply::is_valkey_9(&info) {
                return Ok(Some(Finding::NoAtomicMigration {
                    node: address.clone(),
                }));
            }
        }
        Ok(None)
    }

    /// Carries out the plan from its position by atomic slot migration (see the module docs),
    /// up to `parallel` jobs at once; `wait`: the most one job is waited for. The plan's jobs
    /// an earlier run left running are waited for first, then the moves it left half done key
    /// by key finished that way. Each job's moves are reported to `on` when it succeeds.
    pub(crate) fn run_atomic(
        &mut self,
        wait: Duration,
        parallel: usize,
        on: &mut dyn FnMut(Event),
    ) -> Result<Applied> {
        let began = Instant::now();
        let mut applied = Applied::default();
        if let Some(why) = self.atomic_refusal()? {
            return Err(why.into());
        }
        if let Some(mut limits) = self.watch.limits() {
            limits.mark_start()?;
        }
        self.await_earlier_jobs(wait, on)?;
        self.finish_half_done(&mut applied, on)?;
        let jobs = self.jobs(&self.position.done, parallel);
        let n = parallel.min(jobs.len()).max(1);
        if n > 1 {
            on(Event::Notice(format!(
                "{n} atomic jobs at once at most, each between two masters in no other job ({} \
                 jobs)",
                jobs.len()
            )));
            let side = self.run_units(n, jobs, Carry::Atomic(wait), on)?;
            applied.slots += side.slots;
            applied.keys += side.keys;
            applied.bytes += side.bytes;
            applied.most_at_once = side.most_at_once;
        } else {
            self.jobs_in_order(jobs, wait, &mut applied, on)?;
        }
        self.watch.settle(&self.plan, &mut applied, on)?;
        applied.seconds = began.elapsed().as_secs_f64();
        Ok(applied)
    }

    /// The jobs of `jobs` (each a list of move indices), one after another in their order,
    /// each reported to `on` when it succeeds. Ctrl-C stops it before a job starts.
    fn jobs_in_order(
        &mut self,
        jobs: Vec<Vec<usize>>,
        wait: Duration,
        applied: &mut Applied,
        on: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let total = self.plan.moves.len();
        for job in jobs {
            let first = job.first().copied().unwrap_or_default();
            if INTERRUPTED.load(Ordering::SeqCst) {
                bail!(
                    "interrupted (Ctrl-C) before the atomic migration of move {} of {total}; \
                     no job was started for it: run the same command again to go on",
                    first + 1
                );
            }
            let moved = self.atomic_job(&job, wait)?;
            for (&index, &m) in job.iter().zip(&moved) {
                self.done(index, m, applied, on);
            }
        }
        Ok(())
    }

    /// One job: the moves `job` (by index, one source and one target) by atomic slot
    /// migration, their memory judged as a whole first (an atomic job moves its slots whole;
    /// the source keeps its copy until the job's trim). Returns each move's keys and bytes as
    /// planned, `None` for a move whose slot its target already served (an earlier run's job
    /// moved it). Error: a limit the job would cross (no job started), or the job's own.
    pub(super) fn atomic_job(
        &mut self,
        job: &[usize],
        wait: Duration,
    ) -> Result<Vec<Option<(u64, u64)>>> {
        let moves: Vec<SlotMove> = job
            .iter()
            .filter_map(|&i| self.plan.moves.get(i).cloned())
            .collect();
        let first = job.first().copied().unwrap_or_default();
        if let Some(mut limits) = self.watch.limits() {
            if let Some(judgement) = limits.before_job(&moves)? {
                return stop(
                    Finding::Memory { judgement },
                    format!(
                        "stopped before the atomic migration of move {} of {} (no job was \
                         started for it; make room there, CONFIG SET maxmemory on the node \
                         and its replicas, then run the same command again)",
                        first + 1,
                        self.plan.moves.len()
                    ),
                );
            }
        }
        let moved = self.migrate_group(first, &moves, wait)?;
        Ok(moves
            .iter()
            .map(|m| moved.contains(&m.slot).then_some((m.keys, m.bytes as u64)))
            .collect())
    }

    /// The plan's own jobs that an earlier run (killed or interrupted) left running, on every
    /// master, waited for before any other starts (a new job must not land on a target still
    /// importing); the moves whose slots their targets then claim are marked done. Error: a
    /// running job that is not the plan's (it must end first), or one that does not end in
    /// `wait`.
    fn await_earlier_jobs(&mut self, wait: Duration, on: &mut dyn FnMut(Event)) -> Result<()> {
        let sources: Vec<String> = self.masters.nodes.keys().cloned().collect();
        let exports = |job: &Job| {
            !migrations::finished(job)
                && job
                    .get("operation")
                    .is_some_and(|o| o.eq_ignore_ascii_case("export"))
        };
        for at in sources {
            // A job is listed on its target too, as an import: it is waited for on its source.
            let running: Vec<Job> = migrations::list(&mut self.masters.node(&at)?.con)?
                .into_iter()
                .filter(exports)
                .collect();
            for job in running {
                self.await_earlier_job(&at, &job, wait, on)?;
            }
        }
        Ok(())
    }

    /// The job `job`, running on the source at `at`, waited for if it is the plan's own (see
    /// [`Prepared::await_earlier_jobs`]).
    fn await_earlier_job(
        &mut self,
        at: &str,
        job: &Job,
        wait: Duration,
        on: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let to_id = job.get("target_node").cloned().unwrap_or_default();
        // Every move of the plan between the two masters, done or not: a job caught while its
        // target already serves the slots (the source not yet told) is the plan's too.
        let mine: Vec<usize> = (0..self.plan.moves.len())
            .filter(|&i| {
                self.plan
                    .moves
                    .get(i)
                    .is_some_and(|m| m.from == at && self.masters.id(&m.to) == to_id)
            })
            .collect();
        let wanted: BTreeSet<u16> = mine
            .iter()
            .filter_map(|&i| self.plan.moves.get(i))
            .map(|m| m.slot)
            .collect();
        let name = self.plans_own_job(at, job, &to_id, &wanted)?;
        let failure = self.wait_job(at, &name, wait)?;
        let Some(to) = mine
            .first()
            .and_then(|&i| self.plan.moves.get(i))
            .map(|m| m.to.clone())
        else {
            return Ok(());
        };
        let view = nodes_on(&mut self.masters.node(&to)?.con)?;
        let mut moved = 0;
        for i in mine {
            let done = self.position.done.get(i).copied().unwrap_or(true);
            if !done
                && self
                    .plan
                    .moves
                    .get(i)
                    .is_some_and(|m| claims(&view, m.slot))
            {
                self.position.mark_done(i);
                moved += 1;
            }
        }
        on(Event::Notice(format!(
            "the atomic slot migration {name} of an earlier run ended on {at}{}: {moved} \
             slots of the plan moved to {to}",
            failure.map(|f| format!(" ({f})")).unwrap_or_default()
        )));
        Ok(())
    }

    /// The moves an earlier key-by-key run left half done (killed in them: to close, then
    /// open; at most one a lane, no two on one master) are finished that way first.
    fn finish_half_done(&mut self, applied: &mut Applied, on: &mut dyn FnMut(Event)) -> Result<()> {
        let opts = ApplyOptions::default();
        let mut limiter = Limiter::new(0);
        let half: Vec<usize> = self
            .position
            .to_close
            .iter()
            .chain(&self.position.open)
            .copied()
            .collect();
        let total = self.plan.moves.len();
        for index in half {
            let Some(m) = self.plan.moves.get(index).cloned() else {
                continue;
            };
            let closing = self.position.done.get(index).copied().unwrap_or(false);
            let (keys, bytes) = self.checked(&m, &opts, &mut limiter, applied, on)?;
            self.position.mark_done(index);
            if !closing {
                applied.add(keys, bytes);
                on(Event::Slot {
                    index,
                    total,
                    mv: &m,
                    keys,
                    bytes,
                });
            }
        }
        Ok(())
    }

    /// Moves the slots of `group` (the plan's moves from `start` on, one source and one
    /// target) by atomic slot migration. A job of the plan's already running (a run killed or
    /// interrupted while it ran) is waited for, not started again; any other running job stops
    /// the run. Then the target's view, read after the jobs, tells which of the group's slots
    /// are still to move (a job that ended since the run began has given it its slots).
    /// Returns the slots moved by the jobs this call started.
    fn migrate_group(
        &mut self,
        start: usize,
        group: &[SlotMove],
        wait: Duration,
    ) -> Result<BTreeSet<u16>> {
        let mut moved = BTreeSet::new();
        let Some(m) = group.first() else {
            return Ok(moved);
        };
        let mut slots: Vec<u16> = group.iter().map(|p| p.slot).collect();
        slots.sort_unstable();
        let wanted: BTreeSet<u16> = slots.iter().copied().collect();
        if let Some(why) = self.health(start)? {
            return stop(
                why,
                format!(
                    "the apply stopped before the atomic migration of {} slots {} -> {} (no job \
                     was started for them; slots already moved stay moved; run the same command \
                     again once `redis-cli --cluster check` is clean, and after a failover, \
                     where the plan's masters changed, make a new plan)",
                    slots.len(),
                    m.from,
                    m.to
                ),
            );
        }
        let to_id = self.masters.id(&m.to);
        let at = m.from.clone();
        let mut passes = 0;
        let mut failure: Option<String> = None;
        loop {
            passes += 1;
            let running = migrations::running(&mut self.masters.node(&at)?.con)?;
            if let Some(job) = running {
                let name = self.plans_own_job(&at, &job, &to_id, &wanted)?;
                failure = self.wait_job(&at, &name, wait)?;
                continue;
            }
            let view = nodes_on(&mut self.masters.node(&m.to)?.con)?;
            let left: Vec<u16> = slots
                .iter()
                .copied()
                .filter(|&slot| !claims(&view, slot))
                .collect();
            if left.is_empty() {
                return Ok(moved);
            }
            if let Some(why) = failure.take() {
                bail!(
                    "{why}; slots {} stay on {at} (the others of the group moved). Run the \
                     same command again to try again",
                    ranges(&left)
                        .iter()
                        .map(|(a, b)| if a == b {
                            a.to_string()
                        } else {
                            format!("{a}-{b}")
                        })
                        .collect::<Vec<_>>()
                        .join(" ")
                );
            }
            if passes > 3 {
                bail!(
                    "{} still does not serve slots {:?} after their atomic migration \
                     succeeded: check CLUSTER GETSLOTMIGRATIONS on {at}",
                    m.to,
                    ranges(&left)
                );
            }
            if INTERRUPTED.load(Ordering::SeqCst) {
                bail!(
                    "interrupted (Ctrl-C) before the atomic migration of {} slots {at} -> {}; \
                     no job was started for them: run the same command again to go on",
                    left.len(),
                    m.to
                );
            }
            let name = self.start_job(&at, &m.to, &to_id, &left)?;
            moved.extend(left.iter().copied());
            failure = self.wait_job(&at, &name, wait)?;
        }
    }

    /// The name of `job`, running on the source at `at`, when it is the plan's own: an export
    /// to the target (`to_id`) of some of the group's slots (`wanted`). Error: another job,
    /// which must end first.
    fn plans_own_job(
        &self,
        at: &str,
        job: &Job,
        to_id: &str,
        wanted: &BTreeSet<u16>,
    ) -> Result<String> {
        let ours = job
            .get("operation")
            .is_some_and(|o| o.eq_ignore_ascii_case("export"))
            && job.get("target_node").is_none_or(|t| *t == to_id)
            && !job_slots(job).is_empty()
            && job_slots(job).is_subset(wanted);
        if !ours {
            refuse!(
                "{at} runs an atomic slot migration that is not this plan's next ({} of slots \
                 {}, {}): wait for it to end (CLUSTER GETSLOTMIGRATIONS)",
                job.get("name").map(String::as_str).unwrap_or("?"),
                job.get("slot_ranges").map(String::as_str).unwrap_or("?"),
                job.get("state").map(String::as_str).unwrap_or("?"),
            );
        }
        let name = job.get("name").cloned().unwrap_or_default();
        let _ = writeln!(
            std::io::stderr(),
            "ringslot: the atomic slot migration {name} of this plan still runs on {at}: \
             waiting for it"
        );
        Ok(name)
    }

    /// Starts `CLUSTER MIGRATESLOTS` of `slots` (ascending) from the source at `at` to the
    /// master at `to` (`to_id`); returns the job's name.
    fn start_job(&mut self, at: &str, to: &str, to_id: &str, slots: &[u16]) -> Result<String> {
        let before: BTreeSet<String> = migrations::list(&mut self.masters.node(at)?.con)?
            .into_iter()
            .filter_map(|j| j.get("name").cloned())
            .collect();
        let ranges = ranges(slots);
        self.masters
            .write(
                at,
                &ClusterWrite::MigrateSlots {
                    ranges: &ranges,
                    to: to_id,
                },
            )
            .map_err(|e| anyhow!("{e} (the slots stay where they were)"))?;
        let name = migrations::list(&mut self.masters.node(at)?.con)?
            .into_iter()
            .filter_map(|j| j.get("name").cloned())
            .find(|n| !before.contains(n))
            .ok_or_else(|| {
                anyhow!("{at}: CLUSTER MIGRATESLOTS answered OK but lists no new job")
            })?;
        let _ = writeln!(
            std::io::stderr(),
            "ringslot: atomic slot migration {name} started on {at}: {} slots to {to}",
            slots.len()
        );
        Ok(name)
    }

    /// Polls the job `name` on the source at `at` every 100 ms until it ends, at most `wait`:
    /// `None` on success, else how it ended (failed, cancelled, no longer listed). Ctrl-C or
    /// the wait running out: an error that says the job still runs.
    fn wait_job(&mut self, at: &str, name: &str, wait: Duration) -> Result<Option<String>> {
        let deadline = Instant::now() + wait;
        let goes_on = |why: &str| {
            anyhow!(
                "{why}: the atomic slot migration {name} goes on in the servers (the tool does \
                 not cancel it; CLUSTER CANCELSLOTMIGRATIONS on {at} would). Run the same \
                 command again to wait for it and go on"
            )
        };
        loop {
            let job = migrations::list(&mut self.masters.node(at)?.con)?
                .into_iter()
                .find(|j| j.get("name").map(String::as_str) == Some(name));
            // How it ended is judged by the caller from the target's view: a job that failed
            // late may have moved its slots, and one no longer listed (a short migration log)
            // may have too.
            let Some(job) = job else {
                return Ok(Some(format!(
                    "the atomic slot migration {name} on {at} is no longer listed"
                )));
            };
            match job.get("state").map(String::as_str) {
                Some("success") => return Ok(None),
                Some(state @ ("failed" | "cancelled")) => {
                    return Ok(Some(format!(
                        "the atomic slot migration {name} on {at} {state}: {}",
                        job.get("message")
                            .map(String::as_str)
                            .unwrap_or("no message")
                    )))
                }
                _ => {}
            }
            if INTERRUPTED.load(Ordering::SeqCst) {
                return Err(goes_on("interrupted (Ctrl-C)"));
            }
            if Instant::now() > deadline {
                return Err(goes_on(&format!(
                    "it ran longer than --atomic-wait ({} s)",
                    wait.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::lanes::next_ready;
    use super::*;
    use proptest::prelude::*;

    fn mv(slot: u16, from: &str, to: &str) -> SlotMove {
        SlotMove::for_test(slot, from, to)
    }

    #[test]
    fn consecutive_moves_between_two_masters_are_one_job() {
        let moves = [
            mv(5, "a", "d"),
            mv(3, "a", "d"),
            mv(4, "a", "d"),
            mv(9, "b", "d"),
            mv(1, "a", "d"),
        ];
        let none = [false; 5];
        assert_eq!(groups(&moves, &none), vec![vec![0, 1, 2], vec![3], vec![4]]);
        let first_two = [true, true, false, false, false];
        assert_eq!(groups(&moves, &first_two), vec![vec![2], vec![3], vec![4]]);
        // A parallel run left move 3 done: the moves on either side of it are one job.
        let third = [false, false, false, true, false];
        assert_eq!(groups(&moves, &third), vec![vec![0, 1, 2, 4]]);
        assert_eq!(
            ranges(&[12, 3, 4, 5, 9, 11]),
            vec![(3, 5), (9, 9), (11, 12)]
        );
        let job: Job = [("slot_ranges".to_string(), "3-5 9".to_string())]
            .into_iter()
            .collect();
        assert_eq!(job_slots(&job), [3, 4, 5, 9].into_iter().collect());
    }

    #[test]
    fn side_by_side_a_job_is_a_lanes_moves_cut_where_a_kept_master_comes_between() {
        let moves = [
            mv(1, "a", "d"),
            mv(2, "b", "e"),
            mv(3, "a", "d"),
            mv(4, "b", "e"),
            mv(5, "a", "d"),
        ];
        let none: BTreeSet<&str> = BTreeSet::new();
        let fresh = [false; 5];
        // No master kept in order: each lane is one job, however its moves interleave.
        assert_eq!(
            lane_jobs(&moves, &fresh, &none),
            vec![vec![0, 2, 4], vec![1, 3]]
        );
        // One after another, the runs of consecutive moves are the jobs.
        assert_eq!(groups(&moves, &fresh).len(), 5);
        // d gives slot 9 to b between a's moves to it: a -> d is cut there (its moves after
        // slot 9's go after it), b -> e is not (d is none of its masters).
        let kept_moves = [
            mv(1, "a", "d"),
            mv(2, "b", "e"),
            mv(9, "d", "b"),
            mv(3, "a", "d"),
            mv(4, "b", "e"),
        ];
        let kept: BTreeSet<&str> = ["d", "b"].into_iter().collect();
        assert_eq!(
            lane_jobs(&kept_moves, &[false; 5], &kept),
            vec![vec![0], vec![1], vec![2], vec![3], vec![4]]
        );
        let only_d: BTreeSet<&str> = ["d"].into_iter().collect();
        assert_eq!(
            lane_jobs(&kept_moves, &[false; 5], &only_d),
            vec![vec![0], vec![1, 4], vec![2], vec![3]]
        );
        // Moves done are left out.
        assert_eq!(
            lane_jobs(&moves, &[true, false, false, true, false], &none),
            vec![vec![1], vec![2, 4]]
        );
    }

    /// A plan over slots 0 to 39 owned by masters "m0" to "m4" (`owners`, by slot; every
    /// other slot m0's), moving each slot of `moves` (slot, target) once, in that order, to a
    /// target other than its owner.
    fn random_plan(owners: &[u8], moves: &[(usize, u8)]) -> crate::plan::SlotPlan {
        let name = |m: u8| format!("m{m}");
        let start: Vec<Option<String>> = (0..ringslot_engine::SLOT_COUNT)
            .map(|s| Some(name(owners.get(s).copied().unwrap_or(0))))
            .collect();
        let mut seen = BTreeSet::new();
        let moves: Vec<SlotMove> = moves
            .iter()
            .filter(|&&(slot, to)| owners.get(slot) != Some(&to) && seen.insert(slot))
            .map(|&(slot, to)| mv(slot as u16, &name(owners[slot]), &name(to)))
            .collect();
        crate::plan::SlotPlan::for_test(&start, moves)
    }

    proptest! {
        /// Jobs side by side, from any prefix of the plan done, each ending in any order: every
        /// move not done is in one job of one source and one target; no master is in two jobs
        /// at once; and two moves of one lane, or of one master kept in the plan's order
        /// ([`kept_in_order`]), are in one job or in jobs that run one after the other in the
        /// plan's order. No schedule stalls.
        #[test]
        fn jobs_side_by_side_keep_each_master_in_one_job_and_the_plans_order(
            owners in prop::collection::vec(0u8..5, 40),
            moves in prop::collection::vec((0usize..40, 0u8..5), 0..30),
            workers in 1usize..4,
            done_share in 0.0f64..1.0,
            ends in prop::collection::vec(any::<prop::sample::Index>(), 40),
        ) {
            let plan = random_plan(&owners, &moves);
            let total = plan.moves.len();
            let done: Vec<bool> = (0..total).map(|i| (i as f64) < done_share * total as f64).collect();
            let kept = kept_in_order(&plan);
            let jobs = lane_jobs(&plan.moves, &done, &kept);
            // Every move not done is in exactly one job, of one pair, ascending.
            let mut job_of = vec![usize::MAX; total];
            for (k, job) in jobs.iter().enumerate() {
                prop_assert!(job.windows(2).all(|w| w[0] < w[1]));
                let pair = |i: usize| (plan.moves[i].from.clone(), plan.moves[i].to.clone());
                prop_assert!(job.iter().all(|&i| pair(i) == pair(job[0])));
                for &i in job {
                    prop_assert_eq!(job_of[i], usize::MAX);
                    job_of[i] = k;
                }
            }
            for i in 0..total {
                prop_assert_eq!(job_of[i] == usize::MAX, done[i]);
            }
            // Run them: up to `workers` at once, the one to end picked by `ends`.
            let lane_of = plan.lane_of_moves();
            let firsts: BTreeMap<usize, usize> =
                jobs.iter().enumerate().map(|(k, j)| (j[0], k)).collect();
            let mut waiting: Vec<usize> = firsts.keys().copied().collect();
            let mut under_way: BTreeSet<usize> = BTreeSet::new();
            let (mut started, mut ended) = (vec![0usize; jobs.len()], vec![0usize; jobs.len()]);
            let mut clock = 0;
            let mut turn = 0;
            while !waiting.is_empty() || !under_way.is_empty() {
                while under_way.len() < workers {
                    let Some(at) = next_ready(&plan, &lane_of, &kept, &waiting, &under_way) else {
                        break;
                    };
                    let first = waiting.remove(at);
                    clock += 1;
                    started[firsts[&first]] = clock;
                    under_way.insert(first);
                }
                prop_assert!(!under_way.is_empty(), "stalled with {:?}", waiting);
                // No master in two jobs under way.
                let mut busy = BTreeSet::new();
                for &f in &under_way {
                    prop_assert!(busy.insert(plan.moves[f].from.clone()));
                    prop_assert!(busy.insert(plan.moves[f].to.clone()));
                }
                let pick = ends[turn % ends.len()].index(under_way.len());
                turn += 1;
                let first = under_way.iter().copied().nth(pick).unwrap_or_default();
                under_way.remove(&first);
                clock += 1;
                ended[firsts[&first]] = clock;
            }
            // The plan's order where it binds.
            for i in (0..total).filter(|&i| !done[i]) {
                for j in (i + 1..total).filter(|&j| !done[j]) {
                    let (a, b) = (&plan.moves[i], &plan.moves[j]);
                    let shared_kept = [&a.from, &a.to]
                        .iter()
                        .any(|x| kept.contains(x.as_str()) && (**x == b.from || **x == b.to));
                    if lane_of[i] == lane_of[j] || shared_kept {
                        let (ji, jj) = (job_of[i], job_of[j]);
                        prop_assert!(
                            ji == jj || ended[ji] < started[jj],
                            "moves {} and {} out of order: {:?}", i, j, jobs
                        );
                    }
                }
            }
        }
    }
}
