//! `apply --max-latency MS`: the run paced by what a client feels. A probe on every master of
//! the plan (a `PING` every [`PROBE_EVERY`] on a connection of its own,
//! [`crate::cluster::pacing::Prober`]) measures the round trip another client sees: it waits
//! behind a `MIGRATE` (which blocks both its masters while it runs) and behind each `CLUSTER
//! SETSLOT` (answered after a save of `nodes.conf`). The server's own `LATENCY HISTOGRAM` and
//! `INFO latencystats` time each command's execution, not the wait behind another command,
//! and `LATENCY LATEST` needs a monitor threshold the tool must not set: hence a probe.
//!
//! [`Pacer`] turns the probe's round trips into the batch caps and the pause before each
//! `MIGRATE` (and each slot), as TCP's congestion control turns acknowledgements into a window
//! (RFC 5681). Its unit is a window of [`WINDOW`] round trips of a master. It starts small and
//! doubles its batch after each full window with at most one round trip over the budget on
//! every master (slow start); three over it in a window (its p99 over the budget) halve the
//! batch at once, down to one key, then double a pause (up to [`MAX_PAUSE`]); once past slow
//! start, a quiet window grows the batch by a quarter, or halves the pause first; a window
//! between the two changes nothing. Counting round trips over the budget, not comparing a
//! window's p99 with a fraction of it, lets background noise (a host's scheduling, which no
//! pace cures) count only as far as it reaches the budget. The batch never exceeds `--batch-keys` and
//! `--batch-bytes`. A single key bigger than the budget allows is the big keys' rule (moved
//! alone, said first): its wait is not paced, and the window after it starts afresh.
//!
//! Below [`MIN_MAX_LATENCY`] the budget is refused: there the scheduler decides a round trip's
//! p99, not the run (a loopback `PING`'s idle p99 is well under 1 ms on a quiet host; on this
//! project's 2-vCPU machine with a dozen servers running it was 0.6 to 6 ms between runs,
//! which is the floor such a host sets).

use super::{ApplyOptions, Event};
use crate::cluster::link::Link;
use crate::cluster::pacing::{Latencies, Probe, Prober};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The smallest `--max-latency` the tool takes: 1 ms.
pub(crate) const MIN_MAX_LATENCY: Duration = Duration::from_millis(1);

/// The probe's interval: a `PING` every 2 ms on each master (500 a second, a few microseconds
/// of each server's time), so that a window of [`WINDOW`] round trips takes about 0.4 s.
pub(crate) const PROBE_EVERY: Duration = Duration::from_millis(2);

/// The round trips of a master a decision waits for: 200 (about 0.4 s). Its p99 is over the
/// budget once more than 2 of them are ([`SLOWER_AT`]).
pub(crate) const WINDOW: usize = 200;

/// Round trips over the budget in a window that slow the run at once: 3, more than 1% of
/// [`WINDOW`] (the window's p99 is then over the budget, however it ends).
const SLOWER_AT: usize = WINDOW / 100 + 1;

/// Round trips over the budget a full window may hold and still speed the run up: 1, half a
/// percent (a margin below the p99, so that background noise alone does not grow the batch).
const FASTER_AT_MOST: usize = WINDOW / 200;

/// The longest pause before a `MIGRATE`: 200 ms.
pub(crate) const MAX_PAUSE: Duration = Duration::from_millis(200);

/// The keys a paced run's batch starts with (at most `--batch-keys`): 10.
const FIRST_KEYS: u32 = 10;
/// The bytes a paced run's batch starts with (at most `--batch-bytes`): 64 KiB.
const FIRST_BYTES: u64 = 64 << 10;

/// The smallest byte cap: 4 KiB (a batch carries one key at least, whatever its size).
const MIN_BYTES: u64 = 4 << 10;

/// The pause's first step when a batch of one key is still too much: 1 ms.
const FIRST_PAUSE: Duration = Duration::from_millis(1);

/// What a [`Pacer`] decided from a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// A master's p99 went over the budget: the batch halved, or (at one key) the pause grown.
    Slower,
    /// A full window with at most one round trip over the budget on every master: the pause
    /// shortened, or the batch grown.
    Faster,
}

/// The batch caps and pause of a run paced to keep the probe's p99 within a budget (see the
/// module's doc for the rule). Pure: it is fed round trips ([`Pacer::observe`]) and asked
/// what to do ([`Pacer::adapt`]); the run sleeps.
#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    budget: Duration,
    max_keys: u32,
    max_bytes: u64,
    /// The keys a `GETKEYSINSLOT` asks for now, and the most a `MIGRATE` carries.
    pub keys: u32,
    /// The most `MEMORY USAGE` bytes a `MIGRATE` carries now (one key at least).
    pub bytes: u64,
    /// The pause before each `MIGRATE` and each slot now.
    pub pause: Duration,
    /// Doubling while true; cleared by the first [`Change::Slower`].
    slow_start: bool,
    /// Per master, the round trips since the last change.
    window: BTreeMap<String, Vec<Duration>>,
    /// The pauses slept so far.
    pub paused: Duration,
    /// The times it slowed down ([`Change::Slower`]).
    pub slower: u32,
    /// The times it sped up ([`Change::Faster`]).
    pub faster: u32,
}

impl Pacer {
    /// A pacer keeping each master's p99 within `budget`, its batch within `max_keys` (at
    /// least 1) and `max_bytes`.
    pub(crate) fn new(budget: Duration, max_keys: u32, max_bytes: u64) -> Pacer {
        let max_keys = max_keys.max(1);
        Pacer {
            budget,
            max_keys,
            max_bytes,
            keys: FIRST_KEYS.min(max_keys),
            bytes: FIRST_BYTES.min(max_bytes),
            pause: Duration::ZERO,
            slow_start: true,
            window: BTreeMap::new(),
            paused: Duration::ZERO,
            slower: 0,
            faster: 0,
        }
    }

    /// Adds `master`'s round trips `rtts`, taken since the last call.
    pub(crate) fn observe(&mut self, master: &str, rtts: &[Duration]) {
        self.window
            .entry(master.to_string())
            .or_default()
            .extend_from_slice(rtts);
    }

    /// Starts the window afresh (after a big key moved alone: its wait is not paced).
    pub(crate) fn forget(&mut self) {
        self.window.clear();
    }

    /// Decides from the window: slower as soon as a master has [`SLOWER_AT`] round trips over
    /// the budget (its p99 over a window of [`WINDOW`]); once some master has a full window,
    /// faster when none has more than [`FASTER_AT_MOST`] over it, else no change. Either way
    /// the window starts afresh.
    pub(crate) fn adapt(&mut self) -> Option<Change> {
        let over = |v: &Vec<Duration>| v.iter().filter(|r| **r > self.budget).count();
        let change = if self.window.values().any(|v| over(v) >= SLOWER_AT) {
            self.slow_down();
            Some(Change::Slower)
        } else if self.window.values().any(|v| v.len() >= WINDOW) {
            let quiet = self.window.values().all(|v| over(v) <= FASTER_AT_MOST);
            quiet.then(|| {
                self.speed_up();
                Change::Faster
            })
        } else {
            return None;
        };
        self.window.clear();
        change
    }

    /// Halves the batch (not under one key and [`MIN_BYTES`]), or, at one key, doubles the
    /// pause (from [`FIRST_PAUSE`], up to [`MAX_PAUSE`]).
    fn slow_down(&mut self) {
        self.slower += 1;
        self.slow_start = false;
        if self.keys > 1 {
            self.keys = (self.keys / 2).max(1);
            self.bytes = (self.bytes / 2).max(MIN_BYTES.min(self.max_bytes));
        } else {
            self.pause = (self.pause * 2).clamp(FIRST_PAUSE, MAX_PAUSE);
        }
    }

    /// Halves the pause first (under [`FIRST_PAUSE`]: none); then grows the batch: doubled in
    /// slow start, else by a quarter (one key at least); never past the caps.
    fn speed_up(&mut self) {
        self.faster += 1;
        if !self.pause.is_zero() {
            self.pause /= 2;
            if self.pause < FIRST_PAUSE {
                self.pause = Duration::ZERO;
            }
            return;
        }
        let (keys, bytes) = if self.slow_start {
            (self.keys.saturating_mul(2), self.bytes.saturating_mul(2))
        } else {
            (
                self.keys.saturating_add((self.keys / 4).max(1)),
                self.bytes.saturating_add((self.bytes / 4).max(1)),
            )
        };
        self.keys = keys.min(self.max_keys);
        self.bytes = bytes.min(self.max_bytes);
    }

    /// The pause to sleep now, counted in [`Pacer::paused`].
    pub(crate) fn take_pause(&mut self) -> Duration {
        self.paused += self.pause;
        self.pause
    }
}

/// How long the probe runs before the first move, to learn what clients see without the run.
const IDLE_FOR: Duration = Duration::from_millis(300);

/// A paced run's probe and pacer, live: started before the first move, read before each
/// `MIGRATE` and each slot ([`Paced::next_pause`]).
pub(crate) struct Paced {
    prober: Prober,
    pacer: Pacer,
    idle: BTreeMap<String, Probe>,
    /// Per master, the round trips from the first move on (a bounded histogram).
    during: BTreeMap<String, Latencies>,
    migrates: u64,
    unpaced_migrates: u64,
}

/// What pacing did, for the run's summary and its JSON-free report: per master (address), the
/// probe's round trips before the run (idle, [`IDLE_FOR`]) and during the moves.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PacingReport {
    /// The budget, `--max-latency`.
    pub budget: Duration,
    /// Per master, the probe's round trips for 0.3 s before the first move.
    pub idle: BTreeMap<String, Probe>,
    /// Per master, the probe's round trips from the first move to the last.
    pub during: BTreeMap<String, Probe>,
    /// The pauses slept in all.
    pub paused: Duration,
    /// The times the pacer slowed down and sped up.
    pub slower: u32,
    pub faster: u32,
    /// The `MIGRATE`s sent, and about how many `--batch-keys` and `--batch-bytes` alone would
    /// have sent for the same slots (per slot, its keys over `--batch-keys` or its bytes over
    /// `--batch-bytes`, whichever is more, rounded up: a lower bound).
    pub migrates: u64,
    pub unpaced_migrates: u64,
    /// The batch caps and the pause at the end.
    pub keys: u32,
    pub bytes: u64,
    pub pause: Duration,
}

impl Paced {
    /// Starts probing `masters` (address, link) every [`PROBE_EVERY`] and, for [`IDLE_FOR`]
    /// before any move, learns what clients see without the run.
    pub(crate) fn start(
        masters: &[(String, Link)],
        budget: Duration,
        max_keys: u32,
        max_bytes: u64,
    ) -> Paced {
        let mut prober = Prober::start_every(masters, PROBE_EVERY);
        std::thread::sleep(IDLE_FOR);
        let idle = prober
            .take_new()
            .into_iter()
            .filter_map(|(a, rtts)| Some((a, Probe::of(&rtts)?)))
            .collect();
        Paced {
            prober,
            pacer: Pacer::new(budget, max_keys, max_bytes),
            idle,
            during: BTreeMap::new(),
            migrates: 0,
            unpaced_migrates: 0,
        }
    }

    /// Each master's probe before the run (masters that did not answer `PING` left out).
    pub(crate) fn idle(&self) -> &BTreeMap<String, Probe> {
        &self.idle
    }

    /// Reads the round trips since the last step and adapts: the pause to sleep now (the
    /// caller sleeps it, the pacer unlocked).
    pub(crate) fn next_pause(&mut self) -> Duration {
        self.read_probe();
        self.pacer.adapt();
        self.pacer.take_pause()
    }

    /// The batch caps now (keys, bytes), without reading the probe.
    pub(crate) fn caps(&self) -> (u32, u64) {
        (self.pacer.keys, self.pacer.bytes)
    }

    /// The round trips since the last read, into the pacer's window and the run's figures.
    fn read_probe(&mut self) {
        for (address, rtts) in self.prober.take_new() {
            self.pacer.observe(&address, &rtts);
            self.during.entry(address).or_default().add(&rtts);
        }
    }

    /// Drops the round trips so far from the pacer's window (after a big key moved alone);
    /// the run's figures keep them.
    pub(crate) fn forget(&mut self) {
        self.read_probe();
        self.pacer.forget();
    }

    /// Counts a `MIGRATE` sent.
    pub(crate) fn migrated(&mut self) {
        self.migrates += 1;
    }

    /// Counts a slot moved (`keys`, `bytes` by `MEMORY USAGE`): the `MIGRATE`s the caps
    /// `max_keys` and `max_bytes` alone would have sent for it, at least.
    pub(crate) fn slot_moved(&mut self, keys: u64, bytes: u64, max_keys: u32, max_bytes: u64) {
        let by_keys = keys.div_ceil(u64::from(max_keys.max(1)));
        let by_bytes = bytes.div_ceil(max_bytes.max(1));
        self.unpaced_migrates += by_keys.max(by_bytes);
    }

    /// Stops the probe: what pacing did.
    pub(crate) fn finish(mut self) -> PacingReport {
        self.read_probe();
        let p = &self.pacer;
        let report = PacingReport {
            budget: p.budget,
            paused: p.paused,
            slower: p.slower,
            faster: p.faster,
            keys: p.keys,
            bytes: p.bytes,
            pause: p.pause,
            migrates: self.migrates,
            unpaced_migrates: self.unpaced_migrates,
            idle: self.idle,
            during: self
                .during
                .iter()
                .filter_map(|(a, l)| Some((a.clone(), l.probe()?)))
                .collect(),
        };
        // The probing threads joined (what they took since the last read is not needed).
        let _ = self.prober.finish();
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn window(pacer: &mut Pacer, master: &str, quick: usize, slow: usize, slow_rtt: Duration) {
        pacer.observe(master, &vec![MS / 10; quick]);
        pacer.observe(master, &vec![slow_rtt; slow]);
    }

    #[test]
    fn it_starts_small_and_doubles_while_every_master_is_quiet() {
        let mut p = Pacer::new(4 * MS, 100, 1 << 20);
        assert_eq!((p.keys, p.bytes, p.pause), (10, 64 << 10, Duration::ZERO));
        // Not a full window yet: nothing decided.
        window(&mut p, "a:1", WINDOW - 1, 0, MS);
        assert_eq!(p.adapt(), None);
        // A full window, one round trip over the budget at most: doubled.
        window(&mut p, "a:1", 0, 1, 5 * MS);
        assert_eq!(p.adapt(), Some(Change::Faster));
        assert_eq!((p.keys, p.bytes), (20, 128 << 10));
        // Every master must be quiet: two over the budget on one holds (no change), and the
        // window starts afresh.
        window(&mut p, "a:1", WINDOW, 0, MS);
        window(&mut p, "b:2", 98, 2, 5 * MS);
        assert_eq!(p.adapt(), None);
        window(&mut p, "b:2", 0, 2, 5 * MS);
        assert_eq!(p.adapt(), None, "the window after a decision starts afresh");
        // Never past --batch-keys and --batch-bytes.
        p.forget();
        for _ in 0..10 {
            window(&mut p, "a:1", WINDOW, 0, MS);
            p.adapt();
        }
        assert_eq!((p.keys, p.bytes), (100, 1 << 20));
    }

    #[test]
    fn three_round_trips_over_the_budget_halve_the_batch_then_grow_a_pause() {
        let mut p = Pacer::new(4 * MS, 100, 1 << 20);
        // Two slow round trips among few are not yet a p99 over the budget.
        window(&mut p, "a:1", 10, 2, 5 * MS);
        assert_eq!(p.adapt(), None);
        // Three are, whatever the window's size: halved at once.
        window(&mut p, "a:1", 0, 1, 5 * MS);
        assert_eq!(p.adapt(), Some(Change::Slower));
        assert_eq!((p.keys, p.bytes), (5, 32 << 10));
        // A round trip at the budget is within it.
        window(&mut p, "a:1", 0, 3, 4 * MS);
        assert_eq!(p.adapt(), None);
        for _ in 0..3 {
            window(&mut p, "a:1", 0, 3, 5 * MS);
            p.adapt();
        }
        assert_eq!((p.keys, p.bytes, p.pause), (1, 8 << 10, FIRST_PAUSE));
        // At one key the pause doubles, up to its cap.
        for _ in 0..20 {
            window(&mut p, "a:1", 0, 3, 5 * MS);
            p.adapt();
        }
        assert_eq!(p.pause, MAX_PAUSE);
        assert_eq!(p.take_pause(), MAX_PAUSE);
        assert_eq!(p.paused, MAX_PAUSE);
    }

    #[test]
    fn past_slow_start_a_quiet_window_shortens_the_pause_then_grows_by_a_quarter() {
        let mut p = Pacer::new(4 * MS, 100, 1 << 20);
        for _ in 0..5 {
            window(&mut p, "a:1", 0, 3, 5 * MS);
            p.adapt();
        }
        assert_eq!((p.keys, p.pause), (1, 2 * MS));
        let quiet = |p: &mut Pacer| {
            window(p, "a:1", WINDOW, 0, MS);
            p.adapt()
        };
        assert_eq!(quiet(&mut p), Some(Change::Faster));
        assert_eq!((p.keys, p.pause), (1, MS));
        quiet(&mut p);
        assert_eq!((p.keys, p.pause), (1, Duration::ZERO));
        quiet(&mut p);
        assert_eq!(p.keys, 2, "one key at least");
        for _ in 0..4 {
            quiet(&mut p);
        }
        // 2 -> 3 -> 4 -> 5 -> 6: additive, not doubling.
        assert_eq!(p.keys, 6);
        assert_eq!((p.slower, p.faster), (5, 7));
    }

    #[test]
    fn caps_below_the_first_batch_hold_from_the_start() {
        let p = Pacer::new(4 * MS, 3, 1000);
        assert_eq!((p.keys, p.bytes), (3, 1000));
        let mut p = Pacer::new(4 * MS, 0, 1000);
        assert_eq!(p.keys, 1);
        window(&mut p, "a:1", 0, 3, 5 * MS);
        p.adapt();
        assert_eq!(
            (p.keys, p.bytes),
            (1, 1000),
            "never under --batch-bytes' own cap"
        );
    }
}

/// The pacing of a run: none (unpaced), or with `--max-latency` the probe and pacer, shared
/// by the workers of a parallel run ([`Pacing::clone`] shares them).
#[derive(Clone, Default)]
pub(crate) struct Pacing(Option<Arc<Mutex<Paced>>>);

impl Pacing {
    /// Starts the probe of `masters` (address, link) and its pacer (`--max-latency`
    /// `budget`, the caps of `opts` at most); says through `on` what clients see without the
    /// run, and when that is already over the budget (the run then goes as slowly as the
    /// pacer allows).
    pub(crate) fn start(
        masters: &[(String, Link)],
        budget: Duration,
        opts: &ApplyOptions,
        on: &mut dyn FnMut(Event),
    ) -> Pacing {
        let paced = Paced::start(masters, budget, opts.batch_keys, opts.batch_bytes);
        let ms = |s: f64| s * 1000.0;
        let idle: Vec<String> = paced
            .idle()
            .iter()
            .map(|(a, p)| format!("{a} {:.2}", ms(p.p99)))
            .collect();
        let worst = paced.idle().values().map(|p| p.p99).fold(0.0f64, f64::max);
        on(Event::Notice(format!(
            "paced to keep a PING's p99 within {:.1} ms on every master (a probe every {} ms); \
             before the run, p99 in ms: {}{}",
            ms(budget.as_secs_f64()),
            PROBE_EVERY.as_millis(),
            if idle.is_empty() {
                "not measured (no master answered PING)".to_string()
            } else {
                idle.join(", ")
            },
            if worst > budget.as_secs_f64() {
                format!(
                    "; that is already over the budget: the run goes as slowly as pacing \
                     allows (one key a MIGRATE, pauses up to {} ms)",
                    MAX_PAUSE.as_millis()
                )
            } else {
                String::new()
            }
        )));
        Pacing(Some(Arc::new(Mutex::new(paced))))
    }

    /// Whether the run is paced.
    pub(crate) fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// The probe and pacer, locked; unpaced, `None`. A worker that panicked holding them left
    /// them as they were.
    pub(crate) fn lock(&self) -> Option<MutexGuard<'_, Paced>> {
        self.0
            .as_ref()
            .map(|p| p.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Reads the probe, adapts the batch caps and sleeps the pause (the pacer unlocked
    /// meanwhile). Unpaced: nothing.
    pub(crate) fn pause(&self) {
        let pause = self.lock().map(|mut p| p.next_pause());
        if let Some(pause) = pause.filter(|p| !p.is_zero()) {
            std::thread::sleep(pause);
        }
    }

    /// Stops the probe (once no worker holds it): what pacing did; unpaced, `None`.
    pub(crate) fn finish(&mut self) -> Option<PacingReport> {
        let shared = self.0.take()?;
        let paced = Arc::try_unwrap(shared).ok()?;
        Some(
            paced
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .finish(),
        )
    }
}
