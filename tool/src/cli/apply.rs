//! `ringslot apply PLAN`: carries out a plan by weight on the live cluster (`tool/src/apply/`):
//! the only command of ringslot that writes to a cluster. It asks for a confirmation unless
//! `--yes`, shows its progress, and says at the end what it moved.

use super::{on_ctrl_c, ConnectionArgs};
use crate::apply::atomic::DEFAULT_ATOMIC_WAIT;
use crate::apply::{self, Applied, ApplyOptions, Event, Prepared};
use crate::cluster::finding::{refuse, stop, Finding};
use crate::plan::SlotPlan;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `ringslot apply`'s options.
#[derive(Args, Debug)]
pub struct ApplyArgs {
    /// The plan: the JSON `ringslot predict ... --by ... --json` printed.
    #[arg(value_name = "PLAN")]
    pub plan: PathBuf,
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// Print the commands the run would send, from where the cluster stands, and change
    /// nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for a confirmation.
    #[arg(long)]
    pub yes: bool,
    /// Keys a CLUSTER GETKEYSINSLOT asks for, and the most a MIGRATE carries.
    #[arg(long, default_value_t = apply::DEFAULT_BATCH_KEYS)]
    pub batch_keys: u32,
    /// The most bytes (MEMORY USAGE) a MIGRATE carries, one key at least: a MIGRATE blocks
    /// both nodes while it runs.
    #[arg(long, default_value_t = apply::DEFAULT_BATCH_BYTES)]
    pub batch_bytes: u64,
    /// The most bytes a second the run moves (MEMORY USAGE); 0: no limit.
    #[arg(long, default_value_t = 0)]
    pub max_bytes_per_sec: u64,
    /// When a key is already on the target with a different value, overwrite it with the
    /// source's (without it the run stops there; equal copies are always replaced).
    #[arg(long)]
    pub replace: bool,
    /// Pace the run by what clients feel: a PING every 2 ms on each master, and the batches
    /// and a pause before each MIGRATE adapted to keep its p99 within MS milliseconds (at least
    /// 1). The summary gives each master's round trips before and during the moves.
    #[arg(long, value_name = "MS")]
    pub max_latency: Option<f64>,
    /// Carry out up to N moves at once (1 to 64), each between two masters in no other move:
    /// the plan's lanes (the moves of one source and target pair) side by side, each lane in
    /// its order. Pays where the moves have disjoint pairs (3 masters to 6, not one master
    /// joining) and each master has a core of its own. With --atomic: up to N jobs at once,
    /// each a lane's moves. With --max-latency, one pacer for every lane.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub parallel: usize,
    /// Move the slots by Valkey 9's atomic slot migration (CLUSTER MIGRATESLOTS, one job per
    /// run of moves between the same two masters, with --parallel per lane) instead of key by
    /// key. Every master must be Valkey 9 or later (and a module loaded there must declare
    /// support for it).
    #[arg(long, conflicts_with_all = ["replace", "max_bytes_per_sec", "max_latency"])]
    pub atomic: bool,
    /// The part of each node's limit kept free, in percent (under 90): the run refuses,
    /// before its first write, a plan that would take a master or a replica past its maxmemory
    /// (or, without one, its host's RAM) less this, and stops before a batch that would (the
    /// slot left open, to go on when run again)
    #[arg(long, value_name = "PCT", default_value_t = crate::cluster::budget::DEFAULT_HEADROOM)]
    pub headroom: f64,
    /// With --atomic: the most seconds one job is waited for (it goes on in the servers; run
    /// again to wait again).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = DEFAULT_ATOMIC_WAIT.as_secs(),
        requires = "atomic"
    )]
    pub atomic_wait: u64,
}

/// Reads the plan, checks the cluster against it, and carries it out (or, `--dry-run`, prints
/// the commands it would send).
pub fn run(a: &ApplyArgs) -> Result<()> {
    let opts = ApplyOptions {
        batch_keys: a.batch_keys,
        batch_bytes: a.batch_bytes,
        max_bytes_per_sec: a.max_bytes_per_sec,
        replace: a.replace,
        headroom: a.headroom / 100.0,
        max_latency: a.max_latency.map(latency).transpose()?,
        parallel: a.parallel,
    };
    opts.check()?;
    let text = std::fs::read_to_string(&a.plan)
        .with_context(|| format!("cannot read the plan {}", a.plan.display()))?;
    let plan =
        SlotPlan::from_json(&text).with_context(|| format!("the plan {}", a.plan.display()))?;
    let access = a.connection.access()?;
    let mut prepared = apply::prepare_settled(&access, plan)?;
    prepared.check_permissions(a.atomic)?;
    let crossing = prepared.check_limits(&opts, a.atomic, &mut |e| {
        if let Event::Notice(text) = e {
            eprintln!("ringslot: {text}");
        }
    })?;
    if prepared.remaining().iter().any(|m| m.memory.is_none()) {
        eprintln!(
            "ringslot: the plan has no memory figures (made by an older ringslot): each node's \
             limit is checked with the moves' DUMP bytes instead, which compress; the watch \
             while it runs reads the nodes' own memory"
        );
    }
    let total = prepared.plan.moves.len();
    let remaining = prepared.remaining();
    let (keys, bytes): (u64, f64) = remaining.iter().fold((0u64, 0.0), |(k, b), m| {
        (k.saturating_add(m.keys), b + m.bytes)
    });
    let (to_go, done) = (remaining.len(), prepared.position.done_count());
    if a.dry_run {
        dry_run(&prepared, a, &opts, (keys, bytes));
        if let Some(c) = &crossing {
            println!("# the run would refuse to start: {c}");
        }
        return Ok(());
    }
    if let Some(judgement) = crossing {
        return stop(
            Finding::Memory { judgement },
            format!(
                "refused before any write (nothing was changed; make room there, CONFIG SET \
                 maxmemory on the node and its replicas, or make a plan that fits: ringslot \
                 predict ... --by memory plans within each master's maxmemory less --headroom, \
                 {}% here)",
                a.headroom
            ),
        );
    }
    if to_go == 0 && prepared.position.to_close.is_empty() {
        eprintln!("ringslot: every move of the plan is done ({total} slots); nothing to do");
        return Ok(());
    }
    eprintln!(
        "ringslot: {done} of {total} moves done; this run moves {to_go} slots, {keys} keys, \
         {:.1} MiB by DUMP when planned{}.",
        bytes / 1048576.0,
        match prepared.position.open.len() {
            0 => String::new(),
            1 => " (one is open: it goes on where it stopped)".to_string(),
            n =>
                format!(" ({n} are open, each in a lane of its own: each goes on where it stopped)"),
        }
    );
    if !a.yes {
        confirm()?;
    }
    on_ctrl_c(if a.atomic {
        "interrupted; no new atomic job starts, and the jobs under way go on in the servers \
         (CLUSTER CANCELSLOTMIGRATIONS on their sources would cancel them; the same command \
         waits for them and goes on)"
    } else {
        "interrupted; stopping once the slot under way is moved and closed (Ctrl-C again \
         exits at once, leaving it open)"
    })?;
    let mut progress = Progress::new(bytes, a.atomic);
    let outcome = if a.atomic {
        prepared.run_atomic(Duration::from_secs(a.atomic_wait), a.parallel, &mut |e| {
            progress.on(e)
        })
    } else {
        prepared.run(&opts, &mut |e| progress.on(e))
    };
    progress.bar.finish_and_clear();
    summary(&outcome?, a.atomic);
    Ok(())
}

/// `--max-latency MS` as a duration. Error: not a finite, positive number of milliseconds.
fn latency(ms: f64) -> Result<Duration> {
    if !ms.is_finite() || ms <= 0.0 {
        bail!("--max-latency takes milliseconds, a positive number (got {ms})");
    }
    Duration::try_from_secs_f64(ms / 1000.0)
        .map_err(|_| anyhow::anyhow!("--max-latency {ms} ms is too long to be a budget"))
}

/// `--dry-run`: the commands the run would send from where the cluster stands; `planned`:
/// the keys and `DUMP` bytes of the moves to go, as the plan measured them.
fn dry_run(prepared: &Prepared, a: &ApplyArgs, opts: &ApplyOptions, planned: (u64, f64)) {
    let (keys, bytes) = planned;
    let to_go = prepared.remaining().len();
    println!(
        "# ringslot apply --dry-run: {} of {} moves done; {to_go} to go ({keys} keys, {:.1} \
         MiB by DUMP when planned). Nothing was changed.",
        prepared.position.done_count(),
        prepared.plan.moves.len(),
        bytes / 1048576.0
    );
    if let Some(ms) = a.max_latency {
        println!(
            "# paced by --max-latency {ms}: each MIGRATE below carries at most what the clients' \
             latency allows (from at most 10 keys), with pauses between them; the commands are \
             the same"
        );
    }
    if a.parallel > 1 && a.atomic {
        println!(
            "# with --parallel {}: up to {0} atomic jobs at once, each between two masters in no \
             other job; each job below is a lane's moves (cut where a master kept in the plan's \
             order takes part in another lane's move between them)",
            a.parallel
        );
    } else if a.parallel > 1 {
        let lanes = &prepared.plan.lanes;
        println!(
            "# with --parallel {}: up to {} moves at once, each between two masters in no other \
             move; the plan's {} lanes (source -> target: moves) each in the order below: {}; \
             the commands are the same",
            a.parallel,
            a.parallel.min(lanes.len()),
            lanes.len(),
            lanes
                .iter()
                .map(|l| format!("{} -> {}: {}", l.from, l.to, l.slots.len()))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let lines = if a.atomic {
        prepared.atomic_commands(a.parallel)
    } else {
        prepared.commands(opts)
    };
    for line in &lines {
        println!("{line}");
    }
    if to_go == 0 {
        println!("# end of the dry run: no move to go");
    } else {
        println!(
            "# end of the dry run: {to_go} moves to go; run without --dry-run to carry them out"
        );
    }
}

/// Asks on the terminal for `yes`. Error: no terminal (give `--yes`), or another answer.
fn confirm() -> Result<()> {
    if !std::io::stdin().is_terminal() {
        refuse!("apply writes to the cluster: give --yes to run without a prompt (or --dry-run)");
    }
    eprint!("Type yes to move them: ");
    std::io::stderr().flush().ok();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if answer.trim() != "yes" {
        refuse!("not confirmed; nothing was changed");
    }
    Ok(())
}

/// The run's progress: a bar of the planned bytes on a terminal, else a line a slot; and the
/// masters' fill as it goes.
struct Progress {
    bar: indicatif::ProgressBar,
    tty: bool,
    atomic: bool,
    started: Instant,
    keys: u64,
    slots: usize,
    /// `, fullest master 91.2%` once a fill was told (the bar's message).
    fullest: String,
}

impl Progress {
    /// The progress of a run of `bytes` planned bytes.
    fn new(bytes: f64, atomic: bool) -> Progress {
        let tty = std::io::stderr().is_terminal();
        let bar = indicatif::ProgressBar::new(bytes.max(1.0) as u64);
        bar.set_message("0 slots, 0 keys");
        if tty {
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:30} {bytes}/{total_bytes} planned, {msg}, {eta} left",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
        } else {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        Progress {
            bar,
            tty,
            atomic,
            started: Instant::now(),
            keys: 0,
            slots: 0,
            fullest: String::new(),
        }
    }

    /// Says `text` above the bar, or as a line.
    fn say(&self, text: &str) {
        if self.tty {
            self.bar.println(format!("ringslot: {text}"));
        } else {
            let _ = writeln!(std::io::stderr(), "ringslot: {text}");
        }
    }

    /// The masters' fill (address, `used_memory`, `maxmemory`): the fullest in the bar's
    /// message on a terminal, else every master on a line.
    fn fill(&mut self, fill: &[(String, f64, f64)]) {
        let pct = |u: f64, m: f64| 100.0 * u / m;
        if let Some((a, u, m)) = fill
            .iter()
            .max_by(|x, y| pct(x.1, x.2).total_cmp(&pct(y.1, y.2)))
        {
            self.fullest = format!(", fullest master {a} at {:.1}%", pct(*u, *m));
        }
        if !self.tty {
            let masters: Vec<String> = fill
                .iter()
                .map(|(a, u, m)| format!("{a} {:.1}%", pct(*u, *m)))
                .collect();
            self.say(&format!(
                "used_memory over maxmemory: {}",
                masters.join(", ")
            ));
        }
    }

    /// Notes `event`.
    fn on(&mut self, event: Event) {
        let (index, total, mv, keys, bytes) = match event {
            Event::Slot {
                index,
                total,
                mv,
                keys,
                bytes,
            } => (index, total, mv, keys, bytes),
            Event::Notice(text) => {
                self.say(&text);
                return;
            }
            Event::Fill(fill) => {
                self.fill(&fill);
                return;
            }
        };
        self.keys += keys;
        self.slots += 1;
        self.bar.inc(mv.bytes as u64);
        self.bar.set_message(format!(
            "{} slots, {} keys{}",
            self.slots, self.keys, self.fullest
        ));
        if self.tty {
            return;
        }
        let share = self.bar.position() as f64 / self.bar.length().unwrap_or(1).max(1) as f64;
        let elapsed = self.started.elapsed().as_secs_f64();
        let left = if share > 0.0 {
            elapsed * (1.0 - share) / share
        } else {
            0.0
        };
        // One write a line (stderr is unbuffered: a `writeln!` of its pieces made 17 system
        // calls a slot); a closed stderr (`| head`) must not end the run.
        let line = format!(
            "ringslot: moved slot {} {} -> {}: {keys} keys, {bytes} bytes by {} (move {} of \
             {total}, {} moved by this run, ~{left:.0} s left)\n",
            mv.slot,
            mv.from,
            mv.to,
            if self.atomic {
                "DUMP, as planned"
            } else {
                "MEMORY USAGE"
            },
            index + 1,
            self.slots
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
}

/// What the run moved, and the keys it replaced on their targets.
fn summary(applied: &Applied, atomic: bool) {
    eprintln!(
        "ringslot: done: {} slots, {} keys, {:.1} MiB ({}) moved in {:.1} s; every move of the \
         plan is done",
        applied.slots,
        applied.keys,
        applied.bytes as f64 / 1048576.0,
        if atomic {
            "by DUMP, as planned"
        } else {
            "by MEMORY USAGE"
        },
        applied.seconds
    );
    if applied.most_at_once > 1 {
        eprintln!(
            "ringslot: up to {} {} were under way at once",
            applied.most_at_once,
            if atomic { "atomic jobs" } else { "moves" }
        );
    }
    if !applied.equal_copies.is_empty() {
        eprintln!(
            "ringslot: {} keys were already on their target as equal copies (an earlier \
             interrupted MIGRATE) and were replaced: {:?}",
            applied.equal_copies.len(),
            applied.equal_copies.iter().take(10).collect::<Vec<_>>()
        );
    }
    if applied.fill.len() > 1 {
        let ratios: Vec<f64> = applied.fill.iter().map(|(_, u, m)| u / m).collect();
        let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
        let peak = ratios.iter().fold(0.0f64, |a, &r| a.max(r));
        eprintln!(
            "ringslot: used_memory over maxmemory after the run: {}; peak-to-mean {:.3} (the \
             plan evens its weight; used_memory also counts each node's own overhead)",
            applied
                .fill
                .iter()
                .map(|(a, u, m)| format!("{a} {:.1}%", 100.0 * u / m))
                .collect::<Vec<_>>()
                .join(", "),
            if mean > 0.0 { peak / mean } else { 0.0 }
        );
    }
    for (node, keys, received) in &applied.evicted {
        if *received {
            eprintln!(
                "ringslot: {node} evicted {keys} keys during the run (its evicted_keys grew): a \
                 client's writes past its maxmemory, since the run stops before its own batches \
                 would cross it"
            );
        } else {
            eprintln!(
                "ringslot: {node} evicted {keys} keys during the run (its evicted_keys grew): \
                 the run only took keys off it; it was past its maxmemory under an eviction \
                 policy, where every command evicts until it is under"
            );
        }
    }
    if let Some(p) = &applied.pacing {
        pacing_summary(p, applied.most_at_once);
    }
    if !applied.replaced.is_empty() {
        eprintln!(
            "ringslot: --replace overwrote {} keys that differed on their target: {:?}",
            applied.replaced.len(),
            applied.replaced.iter().take(10).collect::<Vec<_>>()
        );
    }
}

/// What `--max-latency` did: each master's `PING` round trips before and during the moves, and
/// what pacing cost (`lanes`: the most moves under way at once, whose pauses add up).
fn pacing_summary(p: &crate::apply::PacingReport, lanes: usize) {
    let ms = |s: f64| s * 1000.0;
    let budget = ms(p.budget.as_secs_f64());
    for (address, during) in &p.during {
        let idle = p.idle.get(address).map_or("not measured".to_string(), |i| {
            format!("p99 {:.2}", ms(i.p99))
        });
        eprintln!(
            "ringslot: PING to {address} during the moves: p50 {:.2} ms, p99 {:.2} ms, max \
             {:.2} ms over {} round trips (before the run: {idle}; budget {budget:.1} ms{})",
            ms(during.median),
            ms(during.p99),
            ms(during.longest),
            during.samples,
            if ms(during.p99) > budget {
                ": over it"
            } else {
                ""
            }
        );
    }
    eprintln!(
        "ringslot: pacing cost {:.1} s of pauses{} and {} MIGRATEs where --batch-keys and \
         --batch-bytes alone would send about {}; it slowed {} times and sped up {} times, \
         ending at {} keys / {} bytes a MIGRATE and a pause of {} ms",
        p.paused.as_secs_f64(),
        if lanes > 1 {
            " (each lane's, added up)"
        } else {
            ""
        },
        p.migrates,
        p.unpaced_migrates,
        p.slower,
        p.faster,
        p.keys,
        p.bytes,
        p.pause.as_millis()
    );
}
