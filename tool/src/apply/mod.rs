//! `ringslot apply PLAN`: the only part of ringslot that writes to a cluster. It carries out a
//! plan by weight (`ringslot predict --by ... --json`, read as [`crate::plan::SlotPlan`]) on
//! the live cluster, slot by slot, the way `redis-cli --cluster rebalance` moves a slot
//! (`clusterManagerMoveSlot` in redis-cli.c and valkey-cli.c): the verbs of [`verbs`] open the
//! slot (`CLUSTER SETSLOT s IMPORTING <source>` on the target, `MIGRATING <target>` on the
//! source), move its keys (`GETKEYSINSLOT` and `MIGRATE ... KEYS` in batches capped in keys
//! and bytes: a `MIGRATE` blocks both nodes while it runs) and close it (`SETSLOT s NODE
//! <target>` on the target, the source and every other master); or, with `--atomic`, Valkey
//! 9's atomic slot migration ([`atomic`]). Every write goes through one door
//! ([`door::Masters::write`]).
//!
//! Its files: prepare.rs (the cluster read and checked against the plan before anything is
//! written), position.rs (where the cluster stands in the plan), health.rs (the checks between
//! slots, each stop a [`crate::cluster::finding::Finding`]), watch.rs (the run's watch: the
//! snapshot refreshed for those checks, and every node's memory), limits.rs (the memory model
//! applied to the run: before it, and before each batch), verbs.rs (a slot's move), door.rs
//! (the writes), atomic.rs (`--atomic`), dry_run.rs (`--dry-run`), pace.rs (`--max-latency`:
//! the moves paced by a probe of every master), lanes.rs (`--parallel`: moves between
//! disjoint pairs of masters at once); this file holds the run. A [`Prepared`] run has three
//! parts beside its plan and position: the door (its masters' connections), the watch
//! ([`watch::Watch`]) and the pacing ([`pace::Pacing`]).
//!
//! Safe by construction: it starts only from a state a run of the plan reaches (each lane of the
//! plan at a move of its own, [`position::position`]); it checks the cluster between slots
//! (`cluster_state:ok`, no node flagged `fail?`/`fail`, each master of the plan still a master with
//! the same id) and stops on a failover; an interrupted run (Ctrl-C, a killed process, a
//! failed node) is finished by running the same command again, which re-opens the slot where it was
//! and goes on; a key already on the target (`BUSYKEY`) is replaced only when both copies' `DUMP`
//! payloads are equal, else the run stops unless `--replace`. It writes nothing but the slot moves:
//! no key is created, changed or deleted except by `MIGRATE`.

pub(crate) mod atomic;
pub(crate) mod door;
mod dry_run;
mod health;
pub(crate) mod lanes;
mod limits;
mod pace;
pub(crate) mod position;
mod prepare;
mod verbs;
mod watch;

pub(crate) use prepare::prepare_settled;

use crate::cluster::finding::stop;
use crate::cluster::link::Access;
use crate::cluster::pacing::Limiter;
use crate::cluster::permissions::{check, Need, APPLY_NEEDS, ATOMIC_NEEDS};
use crate::cluster::INTERRUPTED;
use crate::plan::{SlotMove, SlotPlan};
use anyhow::{bail, Result};
use door::Masters;
use pace::Pacing;
pub(crate) use pace::PacingReport;
use position::Position;
use ringslot_engine::cluster::{myself, ClusterNode};
use std::sync::atomic::Ordering;
use std::time::Instant;
use watch::Watch;

/// How the keys of a slot travel.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ApplyOptions {
    /// Keys a `GETKEYSINSLOT` asks for, and the most a `MIGRATE` carries.
    pub batch_keys: u32,
    /// The most `MEMORY USAGE` bytes a `MIGRATE` carries (one key at least, whatever its size).
    pub batch_bytes: u64,
    /// The most bytes a second the run moves (by `MEMORY USAGE`); 0: no limit.
    pub max_bytes_per_sec: u64,
    /// Replace a key the target already holds even when its copy differs from the source's.
    pub replace: bool,
    /// The part of each node's limit (`maxmemory`, else its host's RAM) the run keeps free, a
    /// fraction (`--headroom` / 100).
    pub headroom: f64,
    /// The budget of another client's round trip to each master, its p99 (`--max-latency`):
    /// the run paces its batches and pauses to keep within it ([`pace`]); `None`: unpaced.
    pub max_latency: Option<std::time::Duration>,
    /// The most moves carried out at once, each between two masters in no other move
    /// (`--parallel`, [`lanes`]); 1: one after another.
    pub parallel: usize,
}

/// Keys `GETKEYSINSLOT` asks for unless `--batch-keys` says otherwise (as many as one
/// `MIGRATE` carries).
pub(crate) const DEFAULT_BATCH_KEYS: u32 = 100;
/// Bytes a `MIGRATE` carries at most unless `--batch-bytes` says otherwise: 1 MiB, ~10 ms on a
/// 1 Gbit/s link, far below any `cluster-node-timeout`.
pub(crate) const DEFAULT_BATCH_BYTES: u64 = 1 << 20;

impl ApplyOptions {
    /// Refuses options that cannot be meant: a batch of 0 keys.
    pub(crate) fn check(&self) -> Result<()> {
        if self.batch_keys == 0 {
            bail!("--batch-keys needs at least 1 key");
        }
        if !(1..=lanes::MAX_PARALLEL).contains(&self.parallel) {
            bail!(
                "--parallel is from 1 to {} moves at once (got {})",
                lanes::MAX_PARALLEL,
                self.parallel
            );
        }
        if let Some(budget) = self.max_latency {
            if budget < pace::MIN_MAX_LATENCY {
                bail!(
                    "--max-latency is at least {} ms (got {} ms): below it, on a busy host, \
                     the scheduler decides a round trip's p99, not the run",
                    pace::MIN_MAX_LATENCY.as_secs_f64() * 1000.0,
                    budget.as_secs_f64() * 1000.0
                );
            }
        }
        if !self.headroom.is_finite() || !(0.0..0.9).contains(&self.headroom) {
            bail!(
                "--headroom is a percentage, from 0 to under 90 (got {})",
                self.headroom * 100.0
            );
        }
        Ok(())
    }
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            batch_keys: DEFAULT_BATCH_KEYS,
            batch_bytes: DEFAULT_BATCH_BYTES,
            max_bytes_per_sec: 0,
            replace: false,
            headroom: crate::cluster::budget::DEFAULT_HEADROOM / 100.0,
            max_latency: None,
            parallel: 1,
        }
    }
}

/// What the run does as it goes, for a progress display.
#[derive(Debug)]
pub(crate) enum Event<'a> {
    /// The move `index` (from 0) of `total` is done: its slot is the target's on every master.
    /// `keys` and `bytes` are what this run moved of it (`MEMORY USAGE` key by key; the plan's
    /// `DUMP` bytes for an atomic job).
    Slot {
        index: usize,
        total: usize,
        mv: &'a SlotMove,
        keys: u64,
        bytes: u64,
    },
    /// Something the operator should see as it happens: a big key moved alone, a wait for a
    /// replica.
    Notice(String),
    /// The masters' fill as last read: (address, `used_memory`, `maxmemory`) of each with a
    /// `maxmemory`, at most every [`FILL_EVERY`].
    Fill(Vec<(String, f64, f64)>),
}

/// How often a run says the masters' fill.
pub(crate) const FILL_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// What a run moved.
#[derive(Debug, Default, Clone)]
pub(crate) struct Applied {
    /// Moves carried out by this run, and their keys and bytes (`MEMORY USAGE` key by key;
    /// the plan's `DUMP` bytes for an atomic job, which moves a slot whole).
    pub slots: usize,
    pub keys: u64,
    pub bytes: u64,
    /// Keys the target already held as equal copies (their `DUMP` payloads equal), replaced.
    pub equal_copies: Vec<String>,
    /// Keys the target held with a different value, replaced by the source's (`--replace`).
    pub replaced: Vec<String>,
    /// The masters whose `evicted_keys` grew during the run, by how many, and whether the run
    /// brought them keys (a client's writes may evict too; the run stops at the first growth
    /// it sees on a master it brings keys to, and goes on where it only takes keys off one).
    pub evicted: Vec<(String, u64, bool)>,
    /// After the run, each master with a `maxmemory`: (address, `used_memory`, `maxmemory`),
    /// bytes.
    pub fill: Vec<(String, f64, f64)>,
    /// Seconds the run took.
    pub seconds: f64,
    /// With `--max-latency`: what pacing did, and what the probe saw.
    pub pacing: Option<pace::PacingReport>,
    /// The most moves that were under way at once (`--parallel`; 1 for a run one move at
    /// a time).
    pub most_at_once: usize,
}

impl Applied {
    /// Counts a move done (`keys`, `bytes`).
    fn add(&mut self, keys: u64, bytes: u64) {
        self.slots += 1;
        self.keys += keys;
        self.bytes += bytes;
    }
}

/// The cluster read and checked against the plan, ready to run.
pub(crate) struct Prepared {
    pub plan: SlotPlan,
    /// Where the cluster stands in the plan.
    pub position: Position,
    /// The door: a connection to every master of the plan, and the slot verbs that write
    /// through it ([`verbs`], [`door`]).
    masters: Masters,
    access: Access,
    /// The watch: the cluster's health between slots and every node's memory
    /// ([`watch::Watch`]).
    watch: Watch,
    /// With `--max-latency`: the probe and pacer, shared by the workers of a parallel run
    /// (one batch cap and pause for every lane: a master over the budget slows them all).
    pacing: Pacing,
}

/// Whether the node whose own view is `view` serves `slot`.
fn claims(view: &[ClusterNode], slot: u16) -> bool {
    myself(view).is_some_and(|n| n.serves(slot))
}

impl Prepared {
    /// Probes every command the run needs on every master ([`APPLY_NEEDS`], and
    /// [`ATOMIC_NEEDS`] with `atomic`) before anything is written. Error: every refusal at
    /// once, with the `ACL SETUSER` rule that grants them.
    pub(crate) fn check_permissions(&self, atomic: bool) -> Result<()> {
        let links: Vec<&crate::cluster::link::Link> =
            self.masters.nodes.values().map(|n| &n.link).collect();
        // --atomic finishes a key-by-key move left half done that way: it needs both.
        let mut needs: Vec<Need> = APPLY_NEEDS.to_vec();
        if atomic {
            needs.extend_from_slice(ATOMIC_NEEDS);
        }
        check(&links, &needs, self.access.user()).map(|_| ())
    }

    /// Takes the memory of the plan's masters and their replicas as the snapshot read it before the
    /// run ([`prepare`]), watched from then on ([`Watch::read_limits`]), and walks the moves to go
    /// against their limits less `opts.headroom` as `predict` walks a plan
    /// ([`limits::Limits::check_plan`], atomic with `atomic`); the run then watches them
    /// ([`limits::Limits`]). `Some`: the first moment of the plan that would not fit (a node, its
    /// memory then and its limit, the slot); the caller refuses to run. Reads only. A replica that
    /// cannot be read is said through `on` and not watched. Error: a master that cannot be read.
    pub(crate) fn check_limits(
        &mut self,
        opts: &ApplyOptions,
        atomic: bool,
        on: &mut dyn FnMut(Event),
    ) -> Result<Option<crate::cluster::budget::Judgement>> {
        let limits = self
            .watch
            .read_limits(&self.masters.links(), opts.headroom)?;
        for why in limits.unread {
            on(Event::Notice(format!(
                "{why}: its memory is not watched (its master's view of its link and lag is)"
            )));
        }
        let mut to_go: Vec<SlotMove> = Vec::new();
        for (i, done) in self.position.done.clone().into_iter().enumerate() {
            let Some(mut m) = self.plan.moves.get(i).cloned().filter(|_| !done) else {
                continue;
            };
            // A move left open has moved part of its keys, which the target's memory holds
            // now: only what its source still holds is to come.
            if self.position.open.contains(&i) {
                let left = self.keys_left(&m)?.max(0) as f64;
                let part = if m.keys > 0 {
                    (left / m.keys as f64).min(1.0)
                } else {
                    1.0
                };
                m.bytes *= part;
                m.memory = m.memory.map(|x| x * part);
            }
            to_go.push(m);
        }
        let drained = self.plan.drained();
        // Side by side, the moves of a master not kept in order may go in any order.
        let kept = lanes::kept_in_order(&self.plan);
        let judged = self.watch.limits().and_then(|limits| {
            limits.check_plan(
                &to_go,
                if atomic { 0 } else { opts.batch_bytes },
                atomic,
                &drained,
                (opts.parallel > 1 && !atomic).then_some(&kept),
            )
        });
        Ok(judged)
    }

    /// The keys of `m`'s slot its source still holds (`CLUSTER COUNTKEYSINSLOT`). Error: the
    /// source does not answer.
    pub(crate) fn keys_left(&mut self, m: &SlotMove) -> Result<i64> {
        let slot = m.slot.to_string();
        let left = self
            .masters
            .node(&m.from)?
            .con
            .run(&["CLUSTER", "COUNTKEYSINSLOT", &slot])?;
        Ok(crate::reply::int(&left)?)
    }

    /// The moves this run carries out: those not done, in the plan's order.
    pub(crate) fn remaining(&self) -> Vec<&SlotMove> {
        self.plan
            .moves
            .iter()
            .zip(&self.position.done)
            .filter(|(_, done)| !**done)
            .map(|(m, _)| m)
            .collect()
    }

    /// Carries out the plan from its position, reporting each slot to `on`. Errors name the
    /// slot, the nodes and the server's reply, and say what was left open; Ctrl-C
    /// (`INTERRUPTED`) stops it once the slot under way is moved and closed. Running it again
    /// goes on.
    pub(crate) fn run(
        &mut self,
        opts: &ApplyOptions,
        on: &mut dyn FnMut(Event),
    ) -> Result<Applied> {
        if let Some(why) = self.atomic_running()? {
            return stop(
                why,
                "an atomic slot migration runs (run with --atomic to wait for it and go on that \
                 way, or wait for it to end)"
                    .into(),
            );
        }
        if let Some(mut limits) = self.watch.limits() {
            limits.mark_start()?;
        }
        let began = Instant::now();
        let mut applied = if opts.parallel > 1 {
            self.run_lanes(opts, on)?
        } else {
            self.run_in_order(opts, on)?
        };
        applied.most_at_once = applied.most_at_once.max(1);
        self.watch.settle(&self.plan, &mut applied, on)?;
        applied.seconds = began.elapsed().as_secs_f64();
        Ok(applied)
    }

    /// The moves left, one after another ([`Position::pending`]): the moves an earlier run left
    /// half done first (to close, then open), then the others in the plan's order. Ctrl-C
    /// stops it before a move that is not a close.
    fn run_in_order(&mut self, opts: &ApplyOptions, on: &mut dyn FnMut(Event)) -> Result<Applied> {
        let mut applied = Applied::default();
        if let Some(budget) = opts.max_latency {
            self.pacing = Pacing::start(&self.masters.links(), budget, opts, on);
        }
        let mut limiter = Limiter::new(opts.max_bytes_per_sec);
        let total = self.plan.moves.len();
        let moves = self.plan.moves.clone();
        for index in self.position.pending() {
            let Some(m) = moves.get(index) else { continue };
            let closing = self.position.done.get(index).copied().unwrap_or(false);
            if INTERRUPTED.load(Ordering::SeqCst) && !closing {
                bail!(
                    "interrupted before slot {} (move {} of {total}); the slots moved stay \
                     moved: run the same command again to go on",
                    m.slot,
                    index + 1
                );
            }
            let (keys, bytes) = self.checked(m, opts, &mut limiter, &mut applied, on)?;
            self.position.mark_done(index);
            if closing {
                continue;
            }
            applied.add(keys, bytes);
            on(Event::Slot {
                index,
                total,
                mv: m,
                keys,
                bytes,
            });
            self.watch
                .tell_fill(&self.plan, &self.position.done, false, on);
        }
        applied.pacing = self.pacing.finish();
        Ok(applied)
    }

    /// One move between two health checks; an error says why and what was left.
    fn checked(
        &mut self,
        m: &SlotMove,
        opts: &ApplyOptions,
        limiter: &mut Limiter,
        applied: &mut Applied,
        on: &mut dyn FnMut(Event),
    ) -> Result<(u64, u64)> {
        let next = self
            .plan
            .moves
            .iter()
            .position(|p| p.slot == m.slot)
            .unwrap_or(0);
        if let Some(why) = self.health(next)? {
            return stop(
                why,
                format!(
                    "the apply stopped at slot {} ({} -> {}), which it did not touch this time \
                     (slots already moved stay moved; run the same command again once \
                     `redis-cli --cluster check` is clean, and after a failover, where the \
                     plan's masters changed, make a new plan)",
                    m.slot, m.from, m.to
                ),
            );
        }
        self.watch.wait_for_replicas(&[&m.from, &m.to], on)?;
        // Paced: the pause before the slot's SETSLOTs (each answered after a save).
        self.pacing.pause();
        match self.move_slot(m, opts, limiter, applied, on) {
            Ok(moved) => Ok(moved),
            Err(e) => {
                // A failed command may be the first sign of a failover: say so if it is (every
                // master and the seed's view read again).
                self.watch.check_all_next();
                if let Ok(Some(why)) = self.health(next) {
                    return stop(
                        why,
                        format!(
                            "slot {} ({} -> {}): {e:#}; the cluster changed (the slot is left \
                             open; once `redis-cli --cluster check` is clean, make a new plan)",
                            m.slot, m.from, m.to
                        ),
                    );
                }
                // A safety rule's stop (differing copies, a node's limit) stays one: what was
                // left is said before it.
                Err(e.context(format!(
                    "slot {} ({} -> {}; the slot may be left open, importing on {}, migrating \
                     on {}: run the same command again to go on from there)",
                    m.slot, m.from, m.to, m.to, m.from
                )))
            }
        }
    }

    /// The `MIGRATE` arguments after the keys' host, port, db and timeout: `AUTH2 user
    /// password` (or `AUTH password` for the default user) when the tool logs in with a
    /// password, since the target asks the same of `MIGRATE`'s connection. `redact` hides the
    /// password (for `--dry-run`).
    fn auth(&self, redact: bool) -> Vec<String> {
        let Some(password) = self.access.password() else {
            return Vec::new();
        };
        let password = if redact { "<password>" } else { password };
        match self.access.user() {
            "default" => vec!["AUTH".into(), password.into()],
            user => vec!["AUTH2".into(), user.into(), password.into()],
        }
    }

    /// `MIGRATE`'s timeout, milliseconds: half the tool's wait for a reply (it bounds each of
    /// its I/O steps, not the whole command; the batch caps bound the whole).
    fn migrate_timeout_ms(&self) -> u128 {
        (self.access.timeout.as_millis() / 2).max(1)
    }
}
