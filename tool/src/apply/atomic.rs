//! `ringslot apply --atomic`: the plan's moves carried out by Valkey 9's atomic slot migration
//! instead of key by key. Consecutive moves between the same two masters become one job,
//! `CLUSTER MIGRATESLOTS SLOTSRANGE a b [c d ...] NODE <target>` sent to the source, whose
//! progress `CLUSTER GETSLOTMIGRATIONS` on the source shows (valkey-io/valkey
//! `src/cluster_migrateslots.c`: a job ends `success`, `failed` or `cancelled`). A job runs in
//! the servers, not in the tool: it outlives a killed or interrupted run, which says so (Ctrl-C
//! does not cancel it: `CLUSTER CANCELSLOTMIGRATIONS` on the source does), and a resumed run
//! reads the jobs first and waits for the plan's own before it starts another.

use super::door::Write as ClusterWrite;
use super::{claims, Applied, ApplyOptions, Event, Prepared, Stop};
use crate::cluster::migrations::{self, job_slots, Job};
use crate::cluster::pacing::Limiter;
use crate::cluster::topology::nodes_on;
use crate::cluster::INTERRUPTED;
use crate::plan::SlotMove;
use crate::predict::method::ranges;
use anyhow::{anyhow, bail, Result};
use std::collections::BTreeSet;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The plan's moves from `first` on, as groups of consecutive moves between the same two
/// masters: each group is one job.
fn groups(moves: &[SlotMove], first: usize) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, m) in moves.iter().enumerate().skip(first) {
        match out.last_mut() {
            Some(g)
                if moves
                    .get(g.start)
                    .is_some_and(|p| p.from == m.from && p.to == m.to) =>
            {
                g.end = i + 1
            }
            _ => out.push(i..i + 1),
        }
    }
    out
}

/// Why `--atomic` does not go on from a run with `--parallel` stopped midway.
const UNEVEN: &str = "a run with --parallel stopped with its lanes at different moves, from \
    where --atomic (one job after another, in the plan's order) does not go on: finish the plan \
    without --atomic";

/// The most a job may run before the tool stops waiting for it (it goes on in the servers):
/// an hour, unless `--atomic-wait` says otherwise.
pub(crate) const DEFAULT_ATOMIC_WAIT: Duration = Duration::from_secs(3600);

impl Prepared {
    /// The `CLUSTER MIGRATESLOTS` commands `--atomic` would send, one line each.
    pub(crate) fn atomic_commands(&self) -> Vec<String> {
        let moves = &self.plan.moves;
        let mut lines = Vec::new();
        let Some((done, close_last, next_open)) = self.position.prefix() else {
            return vec![format!("# {UNEVEN}")];
        };
        if close_last || next_open {
            lines.push(format!(
                "# move {} is half done key by key: it is finished that way first (`ringslot \
                 apply --dry-run` without --atomic lists its commands)",
                if next_open { done + 1 } else { done }
            ));
        }
        let first = done + usize::from(next_open);
        lines.extend(groups(moves, first).into_iter().filter_map(|g| {
            let m = moves.get(g.start)?;
            let mut slots: Vec<u16> = moves.get(g)?.iter().map(|p| p.slot).collect();
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
    pub(crate) fn atomic_running(&mut self) -> Result<Option<Stop>> {
        for (address, n) in self.masters.nodes.iter_mut() {
            if let Some(job) = migrations::running(&mut n.con)? {
                let field = |name: &str| job.get(name).cloned().unwrap_or_else(|| "?".into());
                return Ok(Some(Stop::AtomicMigration {
                    node: address.clone(),
                    job: field("name"),
                    slots: field("slot_ranges"),
                }));
            }
        }
        Ok(None)
    }

    /// Why `--atomic` cannot run here (a master that is not Valkey 9 or later), if so.
    pub(crate) fn atomic_refusal(&mut self) -> Result<Option<Stop>> {
        for (address, n) in self.masters.nodes.iter_mut() {
            let info = n.con.text(&["INFO", "server"])?;
            if !crate::reply::is_valkey_9(&info) {
                return Ok(Some(Stop::NoAtomicMigration {
                    node: address.clone(),
                }));
            }
        }
        Ok(None)
    }

    /// Carries out the plan from its position by atomic slot migration (see the module docs);
    /// `wait`: the most one job is waited for. Each job's moves are reported to `on` when it
    /// succeeds.
    pub(crate) fn run_atomic(
        &mut self,
        wait: Duration,
        on: &mut dyn FnMut(Event),
    ) -> Result<Applied> {
        let began = Instant::now();
        let mut applied = Applied::default();
        let moves = self.plan.moves.clone();
        let total = moves.len();
        if let Some(why) = self.atomic_refusal()? {
            bail!("{why}");
        }
        if let Some(mut limits) = self.limits() {
            limits.mark_start()?;
        }
        self.finish_half_done(&moves, &mut applied, on)?;
        let first = self.position.done_count();
        for g in groups(&moves, first) {
            if INTERRUPTED.load(Ordering::SeqCst) {
                bail!(
                    "interrupted (Ctrl-C) before the atomic migration of move {} of {total}; \
                     no job was started for it: run the same command again to go on",
                    g.start + 1
                );
            }
            let group = moves.get(g.clone()).unwrap_or_default();
            if let Some(mut limits) = self.limits() {
                // An atomic job moves its slots whole (the source keeps its copy until the
                // job's trim): its memory is judged as a whole before it starts.
                if let Some(crossing) = limits.before_job(group, 0)? {
                    bail!(
                        "stopped before the atomic migration of move {} of {total} (no job was \
                         started for it): {crossing}. Make room there (CONFIG SET maxmemory on \
                         the node and its replicas), then run the same command again",
                        g.start + 1
                    );
                }
            }
            self.migrate_group(g.start, group, wait)?;
            for (i, mv) in group.iter().enumerate() {
                let bytes = mv.bytes as u64;
                applied.add(mv.keys, bytes);
                on(Event::Slot {
                    index: g.start + i,
                    total,
                    mv,
                    keys: mv.keys,
                    bytes,
                });
            }
            for i in g {
                self.position.mark_done(i);
            }
        }
        self.settle(&mut applied, on)?;
        applied.seconds = began.elapsed().as_secs_f64();
        Ok(applied)
    }

    /// A key-by-key move left half done (a run of `apply` without `--atomic` killed in it) is
    /// finished that way first: closed, or its keys moved and closed.
    fn finish_half_done(
        &mut self,
        moves: &[SlotMove],
        applied: &mut Applied,
        on: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let opts = ApplyOptions::default();
        let mut limiter = Limiter::new(0);
        let Some((done, close_last, next_open)) = self.position.prefix() else {
            bail!("{UNEVEN}");
        };
        if close_last {
            if let Some(i) = done.checked_sub(1) {
                if let Some(m) = moves.get(i) {
                    self.checked(m, &opts, &mut limiter, applied, on)?;
                }
                self.position.mark_done(i);
            }
        }
        if next_open {
            if let Some(m) = moves.get(done) {
                let (keys, bytes) = self.checked(m, &opts, &mut limiter, applied, on)?;
                applied.add(keys, bytes);
                self.position.mark_done(done);
                on(Event::Slot {
                    index: done,
                    total: moves.len(),
                    mv: m,
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
    fn migrate_group(&mut self, start: usize, group: &[SlotMove], wait: Duration) -> Result<()> {
        let Some(m) = group.first() else {
            return Ok(());
        };
        let mut slots: Vec<u16> = group.iter().map(|p| p.slot).collect();
        slots.sort_unstable();
        let wanted: BTreeSet<u16> = slots.iter().copied().collect();
        if let Some(why) = self.health(start)? {
            bail!(
                "the apply stopped before the atomic migration of {} slots {} -> {}: {why}. \
                 Slots already moved stay moved; after a failover, make a new plan",
                slots.len(),
                m.from,
                m.to
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
                return Ok(());
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
            bail!(
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
    use super::*;

    fn mv(slot: u16, from: &str, to: &str) -> SlotMove {
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

    #[test]
    fn consecutive_moves_between_two_masters_are_one_job() {
        let moves = [
            mv(5, "a", "d"),
            mv(3, "a", "d"),
            mv(4, "a", "d"),
            mv(9, "b", "d"),
            mv(1, "a", "d"),
        ];
        assert_eq!(groups(&moves, 0), vec![0..3, 3..4, 4..5]);
        assert_eq!(groups(&moves, 2), vec![2..3, 3..4, 4..5]);
        assert_eq!(
            ranges(&[12, 3, 4, 5, 9, 11]),
            vec![(3, 5), (9, 9), (11, 12)]
        );
        let job: Job = [("slot_ranges".to_string(), "3-5 9".to_string())]
            .into_iter()
            .collect();
        assert_eq!(job_slots(&job), [3, 4, 5, 9].into_iter().collect());
    }
}
