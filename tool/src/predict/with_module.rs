//! The prediction of a change of masters (see the module docs of `cluster`): what both ways
//! share (the plan's moves with their keys and bytes, the masters before and after, the
//! duration), and the way with the module: the plan from `RING.MIRROR` and `RING.PLAN` on the
//! seed, the rings and modulo from every key, evaluated on its master by `RING.MOVES ...
//! SLOTS`, the bytes of the moved slots read with `CLUSTER GETKEYSINSLOT`.

use super::live::{
    connect, info_at, node_facts, read_topology, run, s, slot_counts, tags, Holds, Limiter,
    LiveCluster, Master, Prober,
};
use super::method::{self, Method, MethodCost};
use super::model::FITTED;
use super::sizing::{dump_bytes, memory_bytes, Estimate, Sizer, Sizes};
use super::{MasterChange, Options, Outcome, INTERRUPTED};
use anyhow::{anyhow, bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use ringslot_harness::client::error_text;
use ringslot_harness::redis::{self, Connection, ConnectionInfo, IntoConnectionInfo, Value};
use ringslot_harness::reply::{array as items, field, float, int};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// One move of the plan.
#[derive(Debug, Clone)]
pub(super) struct PlanStep {
    pub(super) from: Option<String>,
    pub(super) to: Option<String>,
    pub(super) slots: Vec<u16>,
}

pub(super) fn opt_text(v: &Value) -> Option<String> {
    match v {
        Value::Nil => None,
        other => ringslot_harness::reply::text(other).ok(),
    }
}

/// Parses the reply of `RING.PLAN`.
pub(super) fn parse_plan(reply: &Value) -> Result<Vec<PlanStep>> {
    let mut moves = Vec::new();
    for m in items(reply)? {
        let mut slots = Vec::new();
        for range in items(field(m, "ranges")?)? {
            let r = items(range)?;
            let (Some(a), Some(b)) = (r.first(), r.get(1)) else {
                bail!("RING.PLAN: a range of fewer than two ends");
            };
            let (a, b) = (u16::try_from(int(a)?)?, u16::try_from(int(b)?)?);
            slots.extend(a..=b);
        }
        moves.push(PlanStep {
            from: opt_text(field(m, "from")?),
            to: opt_text(field(m, "to")?),
            slots,
        });
    }
    Ok(moves)
}

/// Sums of the `RING.MOVES` replies of one flavour.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Sums {
    pub(super) members: u64,
    pub(super) ring_moved: u64,
    pub(super) ring_between: u64,
    pub(super) slots_moved: u64,
    pub(super) modulo_moved: u64,
    pub(super) modulo_between: u64,
    pub(super) ideal: f64,
}

impl Sums {
    pub(super) fn add(&mut self, o: &Sums) {
        self.members += o.members;
        self.ring_moved += o.ring_moved;
        self.ring_between += o.ring_between;
        self.slots_moved += o.slots_moved;
        self.modulo_moved += o.modulo_moved;
        self.modulo_between += o.modulo_between;
        self.ideal = o.ideal;
    }

    fn of(reply: &Value) -> Result<Sums> {
        let section = |name: &str, what: &str| -> Result<u64> {
            Ok(int(field(field(reply, name)?, what)?)? as u64)
        };
        Ok(Sums {
            members: int(field(reply, "members")?)? as u64,
            ring_moved: section("ring", "moved")?,
            ring_between: section("ring", "between_old")?,
            slots_moved: section("slots", "moved")?,
            modulo_moved: section("modulo", "moved")?,
            modulo_between: section("modulo", "between_old")?,
            ideal: float(field(reply, "ideal")?)?,
        })
    }
}

/// Keys one `RING.MOVES ... SLOTS` call reads at most, unless one slot holds more: about 5 ms
/// of one master's main thread inline (at 1M keys, chunks of 256 slots held 15600 keys and
/// each call held its master 18-56 ms on a busy 2-core machine, by the master's `SLOWLOG`).
pub const CHUNK_KEYS: u64 = 8192;

/// The runs of `slots` (ascending) cut into chunks of at most `chunk` slots and, but for a
/// single slot that holds more, at most [`CHUNK_KEYS`] keys by `counts` (keys per slot).
pub(super) fn chunks(slots: &[u16], chunk: u16, counts: &[u64]) -> Vec<(u16, u16)> {
    let count = |s: u16| counts.get(usize::from(s)).copied().unwrap_or(0);
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&start) = slots.get(i) {
        let (mut end, mut keys) = (start, count(start));
        let mut j = i + 1;
        while let Some(&next) = slots.get(j) {
            if next != end + 1 || next - start >= chunk || keys + count(next) > CHUNK_KEYS {
                break;
            }
            end = next;
            keys += count(next);
            j += 1;
        }
        out.push((start, end));
        i = j;
    }
    out
}

/// The ring copies a run made, deleted when dropped (also on error).
pub(super) struct Copies {
    pub(super) keys: Vec<(ConnectionInfo, String, String)>,
}

impl Copies {
    fn remove(&mut self) {
        for (info, at, key) in self.keys.drain(..) {
            if let Ok(mut con) = connect(&info) {
                let _ = run(&mut con, &at, &s(&["DEL", &key]));
            }
        }
    }
}

impl Drop for Copies {
    fn drop(&mut self) {
        self.remove();
    }
}

/// One flavour's pass over the masters: what each master's evaluation needs.
pub(super) struct Pass<'a> {
    pub(super) flavour: &'a str,
    pub(super) change: &'a MasterChange,
    pub(super) opts: &'a Options,
    /// Keys per slot (`CLUSTER COUNTKEYSINSLOT`), to size the chunks.
    pub(super) counts: &'a [u64],
    pub(super) bar: &'a ProgressBar,
    pub(super) holds: &'a Holds,
}

/// Evaluates the pass's change over one master's keys with the ring copy at `key` (a mirror
/// of the pass's flavour, under a tag of the master's first slot): `RING.MOVES ... SLOTS`
/// over its chunks. A chunk whose slot is migrating is retried (three times, a second
/// apart); a chunk whose slots left the master fails the run.
pub(super) fn evaluate_master(p: &Pass, m: &Master, key: &str) -> Result<Sums> {
    let Pass {
        flavour,
        change,
        opts,
        counts,
        bar,
        holds,
    } = *p;
    let mut con = connect(&m.info)?;
    let mut sums = Sums::default();
    for (a, b) in chunks(&m.slots, opts.chunk.max(1), counts) {
        if INTERRUPTED.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let mut args = s(&["RING.MOVES", key]);
        args.extend(change.args());
        args.extend(s(&["SLOTS", &a.to_string(), &b.to_string()]));
        let mut attempt = 0;
        let reply = loop {
            attempt += 1;
            match holds.time(&m.address, || run(&mut con, &m.address, &args)) {
                Ok(reply) => break reply,
                Err(e) => {
                    let text = e.to_string();
                    let retry = text.contains("is migrating")
                        || text.contains("is importing")
                        || text.contains("LOADING");
                    if attempt >= 3 || !retry {
                        let hint = if text.contains("is served by") || text.contains("MOVED") {
                            ": the slots left this master while the prediction ran; run again \
                             when the cluster is stable"
                        } else {
                            ""
                        };
                        bail!(
                            "{flavour}: slots {a}-{b} of {} failed{hint}: {text}",
                            m.address
                        );
                    }
                    std::thread::sleep(Duration::from_secs(1));
                    con = connect(&m.info)?;
                }
            }
        };
        sums.add(&Sums::of(&reply)?);
        bar.inc(1);
    }
    Ok(sums)
}

/// `RING.MIRROR key COMPAT flavour` and `EXPIRE key ttl` in one `MULTI`/`EXEC`, so that a run
/// killed between them cannot leave a copy without a TTL.
pub(super) fn mirror_with_ttl(
    con: &mut Connection,
    at: &str,
    key: &str,
    flavour: &str,
    ttl: &str,
) -> Result<()> {
    // RING.MIRROR refreshes a ring that exists: the key must be new, and stay new until the
    // mirror is made (WATCH: EXEC does nothing if another client wrote it meanwhile).
    let fail = |e: redis::RedisError| anyhow!("{at}: RING.MIRROR {key}: {}", error_text(&e));
    redis::cmd("WATCH")
        .arg(key)
        .query::<()>(con)
        .map_err(fail)?;
    if redis::cmd("EXISTS")
        .arg(key)
        .query::<i64>(con)
        .map_err(fail)?
        != 0
    {
        let _ = redis::cmd("UNWATCH").query::<()>(con);
        bail!("{at}: the key {key} exists; the benchmark changes no key it did not create");
    }
    let made: Option<(redis::Value, i64)> = redis::pipe()
        .atomic()
        .cmd("RING.MIRROR")
        .arg(key)
        .arg("COMPAT")
        .arg(flavour)
        .cmd("EXPIRE")
        .arg(key)
        .arg(ttl)
        .query(con)
        .map_err(fail)?;
    if made.is_none() {
        bail!("{at}: another client wrote {key} while the benchmark made it");
    }
    Ok(())
}

/// How the prediction ran.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Mode {
    /// With the module on every master.
    Module,
    /// Read-only, and why (`--no-module`, or the masters without the module).
    ReadOnly(String),
}

/// One move of the plan with what it carries.
#[derive(Debug, Clone)]
pub(super) struct MoveCost {
    pub(super) from: Option<String>,
    pub(super) to: Option<String>,
    pub(super) slots: Vec<u16>,
    /// Live keys in those slots.
    pub(super) keys: u64,
    /// Their `DUMP` bytes (what `MIGRATE` sends).
    pub(super) bytes: Estimate,
    /// Their `MEMORY USAGE`.
    pub(super) memory: Estimate,
}

/// One master before and after the change, under the slot scheme.
#[derive(Debug, Clone, Default)]
pub(super) struct MasterRow {
    pub(super) address: String,
    pub(super) slots_before: usize,
    pub(super) keys_before: u64,
    pub(super) slots_after: usize,
    pub(super) keys_after: u64,
    /// Bytes leaving it and arriving on it.
    pub(super) bytes_out: Estimate,
    pub(super) bytes_in: Estimate,
}

/// What a prediction found.
#[derive(Debug, Clone)]
pub struct Prediction {
    pub(super) mode: Mode,
    /// The node the plan is `redis-cli --cluster rebalance`'s run against.
    pub(super) entry: String,
    pub(super) masters: Vec<MasterRow>,
    pub(super) plan: Vec<MoveCost>,
    pub(super) owner_before: Vec<Option<String>>,
    pub(super) owner_after: Vec<Option<String>>,
    /// Per flavour, the sums over every master.
    pub(super) rings: Vec<(String, Sums)>,
    /// Live keys.
    pub(super) keys: u64,
    /// Keys the slot plan moves, and those between masters that serve slots before and after
    /// and that the change does not name.
    pub(super) slots_moved: u64,
    pub(super) slots_between: u64,
    pub(super) bytes: Estimate,
    pub(super) memory: Estimate,
    /// Mean `DUMP` bytes of the keys measured (for the rings' rows, which move other keys).
    pub(super) mean_bytes: f64,
    pub(super) ideal: f64,
    /// The rebalance's duration, estimated ([`FITTED`]).
    pub(super) duration: f64,
    pub(super) seconds: f64,
    /// The time of each step, in seconds.
    pub(super) steps: Vec<(String, f64)>,
    /// Per master: the longest of the run's commands took (seconds, a round trip; a
    /// `RING.MOVES` in the background waits without holding the server) and the keys it read
    /// there.
    pub(super) holds: Vec<(String, f64, u64)>,
    /// Per master: the longest another client's `PING` waited meanwhile (seconds).
    pub(super) waits: BTreeMap<String, f64>,
    /// Keys a slot measured (`None`: every key).
    pub(super) sample: Option<u64>,
    /// The method the slots will move by (per key unless `--atomic`), and what each method
    /// the cluster offers costs (per key always; atomic where every master is Valkey 9).
    pub(super) method: Method,
    pub(super) methods: Vec<MethodCost>,
    /// Why the memory of the methods is not known (a master refused `INFO`), if so.
    pub(super) memory_note: Option<String>,
}

/// What either way gathers, for [`assemble`].
pub(super) struct Gathered {
    pub(super) mode: Mode,
    pub(super) entry: String,
    pub(super) plan: Vec<PlanStep>,
    /// Sizes of the slots the plan moves.
    pub(super) sizes: Sizes,
    /// Live keys per master before the change.
    pub(super) master_keys: HashMap<String, u64>,
    pub(super) rings: Vec<(String, Sums)>,
    pub(super) ideal: f64,
    pub(super) steps: Vec<(String, f64)>,
}

/// The prediction from what a way gathered on `topo`.
pub(super) fn assemble(
    topo: &LiveCluster,
    change: &MasterChange,
    g: Gathered,
    holds: &Holds,
    waits: BTreeMap<String, f64>,
    opts: &Options,
    started: Instant,
) -> Prediction {
    let owner_before: Vec<Option<String>> = topo
        .owner
        .iter()
        .map(|o| o.map(|i| topo.masters[i].address.clone()))
        .collect();
    let mut owner_after = owner_before.clone();
    for mv in &g.plan {
        for &slot in &mv.slots {
            if let Some(o) = owner_after.get_mut(usize::from(slot)) {
                *o = mv.to.clone();
            }
        }
    }
    let serves =
        |owners: &[Option<String>], a: &str| owners.iter().any(|o| o.as_deref() == Some(a));
    // Old masters: serving before and after, not named by the change.
    let old = |a: &Option<String>| {
        a.as_deref().is_some_and(|a| {
            serves(&owner_before, a)
                && serves(&owner_after, a)
                && !change.named().iter().any(|n| n == a)
        })
    };
    let empty = super::sizing::SlotSize::default();
    let size_of = |slot: &u16| g.sizes.get(slot).unwrap_or(&empty);
    let plan: Vec<MoveCost> = g
        .plan
        .iter()
        .map(|m| {
            let sizes: Vec<_> = m.slots.iter().map(size_of).collect();
            MoveCost {
                from: m.from.clone(),
                to: m.to.clone(),
                slots: m.slots.clone(),
                keys: sizes.iter().map(|s| s.keys).sum(),
                bytes: dump_bytes(&sizes),
                memory: memory_bytes(&sizes),
            }
        })
        .collect();
    let (mut slots_moved, mut slots_between) = (0, 0);
    for m in &plan {
        slots_moved += m.keys;
        if old(&m.from) && old(&m.to) {
            slots_between += m.keys;
        }
    }
    let moved_slots: Vec<_> = g
        .plan
        .iter()
        .flat_map(|m| m.slots.iter())
        .map(size_of)
        .collect();
    let bytes = dump_bytes(&moved_slots);
    let memory = memory_bytes(&moved_slots);
    let (measured, measured_bytes) = g
        .sizes
        .values()
        .fold((0u64, 0f64), |(n, b), s| (n + s.sampled, b + s.dump));
    let mean_bytes = if measured == 0 {
        0.0
    } else {
        measured_bytes / measured as f64
    };
    // The masters: those of the cluster, then the ones that join.
    let mut addresses: Vec<String> = topo.masters.iter().map(|m| m.address.clone()).collect();
    for m in &plan {
        for a in [&m.from, &m.to].into_iter().flatten() {
            if !addresses.contains(a) {
                addresses.push(a.clone());
            }
        }
    }
    if let MasterChange::Add { nodes, .. } = change {
        for n in nodes {
            if !addresses.contains(n) {
                addresses.push(n.clone());
            }
        }
    }
    let masters: Vec<MasterRow> = addresses
        .iter()
        .map(|a| {
            let count = |owners: &[Option<String>]| {
                owners
                    .iter()
                    .filter(|o| o.as_deref() == Some(a.as_str()))
                    .count()
            };
            let keys_before = g.master_keys.get(a).copied().unwrap_or(0);
            let out: Vec<&MoveCost> = plan
                .iter()
                .filter(|m| m.from.as_deref() == Some(a))
                .collect();
            let inn: Vec<&MoveCost> = plan.iter().filter(|m| m.to.as_deref() == Some(a)).collect();
            let keys_out: u64 = out.iter().map(|m| m.keys).sum();
            let keys_in: u64 = inn.iter().map(|m| m.keys).sum();
            let sizes_of = |moves: &[&MoveCost]| -> Vec<&super::sizing::SlotSize> {
                moves
                    .iter()
                    .flat_map(|m| m.slots.iter())
                    .map(size_of)
                    .collect()
            };
            MasterRow {
                address: a.clone(),
                slots_before: count(&owner_before),
                keys_before,
                slots_after: count(&owner_after),
                keys_after: (keys_before + keys_in).saturating_sub(keys_out),
                bytes_out: dump_bytes(&sizes_of(&out)),
                bytes_in: dump_bytes(&sizes_of(&inn)),
            }
        })
        .collect();
    let slots_planned: u64 = plan.iter().map(|m| m.slots.len() as u64).sum();
    Prediction {
        mode: g.mode,
        entry: g.entry,
        masters,
        duration: FITTED.seconds(slots_planned, slots_moved),
        plan,
        owner_before,
        owner_after,
        rings: g.rings,
        keys: g.master_keys.values().sum(),
        slots_moved,
        slots_between,
        bytes,
        memory,
        mean_bytes,
        ideal: g.ideal,
        seconds: started.elapsed().as_secs_f64(),
        steps: g.steps,
        holds: holds.list(),
        waits,
        sample: opts.bytes_sample,
        method: Method::PerKey,
        methods: Vec::new(),
        memory_note: None,
    }
}

/// Fills in the methods of `p` (see [`Prediction::methods`]) from what each master of the
/// plan says of itself ([`node_facts`]): `used_memory` now, and whether it has atomic slot
/// migration. A master that cannot be asked (a joining one not reachable yet, or `INFO`
/// refused) starts at 0 bytes, and the report says why. Error: `--atomic` on a cluster where
/// a master has no atomic slot migration.
fn add_methods(seed: &ConnectionInfo, p: &mut Prediction, opts: &Options) -> Result<()> {
    let mut used = Vec::new();
    let (mut without_atomic, mut unknown) = (Vec::new(), Vec::new());
    for m in &p.masters {
        match info_at(seed, &m.address).and_then(|info| node_facts(&info, &m.address)) {
            Ok(facts) => {
                used.push((m.address.clone(), facts.used_memory));
                if !facts.atomic {
                    without_atomic.push(m.address.clone());
                }
            }
            Err(e) => {
                used.push((m.address.clone(), 0.0));
                unknown.push(m.address.clone());
                p.memory_note.get_or_insert_with(|| format!("{e:#}"));
            }
        }
    }
    if opts.atomic && !without_atomic.is_empty() {
        bail!(
            "--atomic needs Valkey 9 or later on every master (CLUSTER MIGRATESLOTS): not on {}",
            without_atomic.join(", ")
        );
    }
    p.method = if opts.atomic {
        Method::Atomic
    } else {
        Method::PerKey
    };
    p.methods = vec![method::cost(&p.plan, &used, Method::PerKey, p.duration)];
    // A master that could not be asked is taken to have it when the others all do (a master
    // joining a Valkey 9 cluster, say), and the report says which could not be asked.
    if without_atomic.is_empty() && unknown.len() < p.masters.len() {
        p.methods
            .push(method::cost(&p.plan, &used, Method::Atomic, p.duration));
    }
    Ok(())
}

/// Measures the keys of the slots `plan` moves, on their masters (see [`super::sizing`]):
/// names by `CLUSTER GETKEYSINSLOT` for a slot of at most [`GETKEYS_MAX`] keys (by `counts`),
/// else by a `SCAN` of the master that keeps those slots' keys; masters in parallel.
pub(super) fn size_moved_slots(
    topo: &LiveCluster,
    plan: &[PlanStep],
    counts: &[u64],
    opts: &Options,
    holds: &Holds,
) -> Result<Sizes> {
    let mut by_master: BTreeMap<usize, Vec<u16>> = BTreeMap::new();
    for m in plan {
        for &slot in &m.slots {
            if let Some(Some(i)) = topo.owner.get(usize::from(slot)) {
                by_master.entry(*i).or_default().push(slot);
            }
        }
    }
    let results: Vec<Result<Sizes>> = std::thread::scope(|scope| {
        let handles: Vec<_> = by_master
            .iter()
            .map(|(&i, slots)| {
                let m = &topo.masters[i];
                scope.spawn(move || size_master(m, slots, counts, opts, holds))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a sizing thread panicked")))
            })
            .collect()
    });
    let mut all = Sizes::new();
    for r in results {
        all.extend(r?);
    }
    Ok(all)
}

/// The most keys `CLUSTER GETKEYSINSLOT` is asked for at once (it has no cursor, and holds the
/// master for about 4 ms per 16384 keys); bigger slots are found by `SCAN`.
pub(super) const GETKEYS_MAX: u64 = 16384;

/// [`size_moved_slots`] on one master.
fn size_master(
    m: &Master,
    slots: &[u16],
    counts: &[u64],
    opts: &Options,
    holds: &Holds,
) -> Result<Sizes> {
    let mut con = connect(&m.info)?;
    let mut sizer = Sizer {
        master: m,
        sample: opts.bytes_sample,
        holds,
        limiter: Limiter::new(opts.max_keys_per_sec),
        sizes: Sizes::new(),
    };
    let mut big: Vec<u16> = Vec::new();
    for &slot in slots {
        if INTERRUPTED.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let count = counts.get(usize::from(slot)).copied().unwrap_or(0);
        if count == 0 {
            continue;
        }
        if count > GETKEYS_MAX {
            big.push(slot);
            continue;
        }
        let names: Vec<Vec<u8>> = holds
            .time(&m.address, || {
                redis::cmd("CLUSTER")
                    .arg("GETKEYSINSLOT")
                    .arg(slot)
                    .arg(count)
                    .query(&mut con)
            })
            .map_err(|e| anyhow!("{}: CLUSTER GETKEYSINSLOT {slot}: {e}", m.address))?;
        for part in names.chunks(1000) {
            sizer.measure(&mut con, part, false)?;
        }
    }
    if !big.is_empty() {
        big.sort_unstable();
        scan_master(m, &mut con, holds, |con, names| {
            let kept: Vec<Vec<u8>> = names
                .into_iter()
                .filter(|n| big.binary_search(&ringslot_engine::key_slot(n)).is_ok())
                .collect();
            sizer.measure(con, &kept, true)
        })?;
    }
    Ok(sizer.sizes)
}

/// Every live key name of master `m`, a `SCAN` batch at a time (about 1000 names), handed to
/// `visit` with the connection.
pub(super) fn scan_master(
    m: &Master,
    con: &mut Connection,
    holds: &Holds,
    mut visit: impl FnMut(&mut Connection, Vec<Vec<u8>>) -> Result<()>,
) -> Result<()> {
    let mut cursor: u64 = 0;
    loop {
        if INTERRUPTED.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let (next, names): (u64, Vec<Vec<u8>>) = holds
            .time(&m.address, || {
                redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(1000)
                    .query(con)
            })
            .map_err(|e| anyhow!("{}: SCAN: {e}", m.address))?;
        visit(con, names)?;
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

/// Predicts `change` with the module on every master (see the module docs of `cluster`).
pub(super) fn predict_module(
    seed: &ConnectionInfo,
    topo: &LiveCluster,
    change: &MasterChange,
    opts: &Options,
    holds: &Holds,
) -> Result<Gathered> {
    let mark = Instant::now();
    let counts = slot_counts(topo)?;
    let mut steps = vec![(
        "per-slot key counts (CLUSTER SLOT-STATS, or COUNTKEYSINSLOT where the server has \
         none)"
            .to_string(),
        mark.elapsed().as_secs_f64(),
    )];
    let mark = Instant::now();
    let tags = tags();
    let run_id = std::process::id();
    let copy_key = |m: &Master, flavour: &str| -> String {
        let first = m.slots.first().copied().unwrap_or(0);
        format!(
            "{}ringslot-bench:{run_id}:{flavour}",
            tags[usize::from(first)]
        )
    };
    let mut copies = Copies { keys: Vec::new() };
    let ttl = opts.ttl_secs.max(1).to_string();
    let serving: Vec<&Master> = topo
        .masters
        .iter()
        .filter(|m| !m.slots.is_empty())
        .collect();
    // Mirrors are made on the seed, so that the plan is what `redis-cli --cluster rebalance
    // <seed>` does (redis-cli breaks ties of balance by the order it loads masters in from its
    // entry node, which RING.MIRROR follows); a seed that serves no slot cannot hold one, and
    // the first master that serves slots stands in.
    let entry_index = topo
        .seed
        .filter(|&i| !topo.masters[i].slots.is_empty())
        .or_else(|| topo.masters.iter().position(|m| !m.slots.is_empty()));
    let Some(first) = entry_index.map(|i| &topo.masters[i]) else {
        bail!("no master serves a slot");
    };
    let entry = first.address.clone();

    // The plan, from a mirror on the entry master.
    let plan_key = copy_key(first, "plan");
    let mut con = connect(&first.info)?;
    mirror_with_ttl(&mut con, &first.address, &plan_key, "native", &ttl)?;
    copies
        .keys
        .push((first.info.clone(), first.address.clone(), plan_key.clone()));
    let mut plan_args = s(&["RING.PLAN", &plan_key]);
    plan_args.extend(change.args());
    let plan =
        parse_plan(&holds.time(&first.address, || run(&mut con, &first.address, &plan_args))?)?;
    copies.remove();
    steps.push((
        "the plan (RING.MIRROR + RING.PLAN)".to_string(),
        mark.elapsed().as_secs_f64(),
    ));
    // The rings and modulo, one flavour at a time, masters in parallel.
    let per_flavour: u64 = serving
        .iter()
        .map(|m| chunks(&m.slots, opts.chunk.max(1), &counts).len() as u64)
        .sum();
    let bar = ProgressBar::new(per_flavour * opts.flavours.len() as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} chunks, {elapsed} elapsed, ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut rings = Vec::new();
    let mut master_keys: HashMap<String, u64> = HashMap::new();
    for (k, flavour) in opts.flavours.iter().map(|f| f.name()).enumerate() {
        let mark = Instant::now();
        bar.set_message(format!("cluster: {flavour}"));
        // One mirror, on the entry master, copied byte for byte to the others (DUMP and
        // RESTORE): every master evaluates the same ring, with the same node order (which
        // modulo and ketama's ties depend on).
        let key = copy_key(first, flavour);
        let mut con = connect(&first.info)?;
        mirror_with_ttl(&mut con, &first.address, &key, flavour, &ttl)?;
        copies
            .keys
            .push((first.info.clone(), first.address.clone(), key.clone()));
        let payload: Vec<u8> = redis::cmd("DUMP")
            .arg(&key)
            .query(&mut con)
            .map_err(|e| anyhow!("{}: DUMP {key}: {e}", first.address))?;
        for m in serving.iter().filter(|m| m.address != first.address) {
            let key = copy_key(m, flavour);
            let mut con = connect(&m.info)?;
            // RESTORE refuses a key that exists (BUSYKEY): only a copy it made is deleted.
            redis::cmd("RESTORE")
                .arg(&key)
                .arg(opts.ttl_secs.max(1) * 1000)
                .arg(&payload)
                .query::<()>(&mut con)
                .map_err(|e| anyhow!("{}: RESTORE {key}: {}", m.address, error_text(&e)))?;
            copies
                .keys
                .push((m.info.clone(), m.address.clone(), key.clone()));
        }
        let pass = Pass {
            flavour,
            change,
            opts,
            counts: &counts,
            bar: &bar,
            holds,
        };
        let results: Vec<Result<Sums>> = std::thread::scope(|scope| {
            let handles: Vec<_> = serving
                .iter()
                .map(|m| {
                    let key = copy_key(m, flavour);
                    let pass = &pass;
                    scope.spawn(move || evaluate_master(pass, m, &key))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("a worker thread panicked")))
                })
                .collect()
        });
        copies.remove();
        let mut total = Sums::default();
        for (m, r) in serving.iter().zip(results) {
            let sums = r?;
            if k == 0 {
                master_keys.insert(m.address.clone(), sums.members);
            }
            total.add(&sums);
        }
        rings.push((flavour.to_string(), total));
        steps.push((
            format!("{flavour} ring and modulo: every key, on its master"),
            mark.elapsed().as_secs_f64(),
        ));
    }
    bar.finish_and_clear();
    let mark = Instant::now();
    let sizes = size_moved_slots(topo, &plan, &counts, opts, holds)?;
    steps.push((
        "the bytes of the moved slots' keys (GETKEYSINSLOT, DUMP, MEMORY USAGE)".to_string(),
        mark.elapsed().as_secs_f64(),
    ));
    check_unchanged(seed, topo)?;
    let ideal = rings.first().map_or(0.0, |(_, s)| s.ideal);
    Ok(Gathered {
        mode: Mode::Module,
        entry,
        plan,
        sizes,
        master_keys,
        rings,
        ideal,
        steps,
    })
}

/// Fails when the masters or the slot table changed since `topo` was read: the keys evaluated
/// must be the keys counted.
pub(super) fn check_unchanged(seed: &ConnectionInfo, topo: &LiveCluster) -> Result<()> {
    let after = read_topology(seed)?;
    let unchanged = after.masters.len() == topo.masters.len()
        && after
            .masters
            .iter()
            .zip(&topo.masters)
            .all(|(a, b)| a.address == b.address && a.slots == b.slots);
    if !unchanged {
        bail!("the cluster's slot table changed while the prediction ran: run again");
    }
    Ok(())
}

/// Predicts `change` on the cluster behind `seed`: with the module when every master has it
/// (and not `--no-module`), else read-only.
pub(super) fn predict(
    seed: &ConnectionInfo,
    change: &MasterChange,
    opts: &Options,
) -> Result<Prediction> {
    let started = Instant::now();
    eprintln!("cluster: reading the topology ...");
    let topo = read_topology(seed)?;
    let names: Vec<String> = topo.masters.iter().map(|m| m.address.clone()).collect();
    match change {
        MasterChange::Add { nodes, .. } => {
            if let Some(n) = nodes.iter().find(|n| names.contains(n)) {
                let empty = topo
                    .masters
                    .iter()
                    .any(|m| &m.address == n && m.slots.is_empty());
                let hint = if empty {
                    ": it serves no slot yet (add-node done?); predict the pending rebalance \
                     with --rebalance"
                } else {
                    ""
                };
                bail!("{n} is already a master of this cluster{hint}")
            }
        }
        MasterChange::Del { nodes } => {
            if let Some(n) = nodes.iter().find(|n| !names.contains(n)) {
                bail!(
                    "{n} is not a master of this cluster (masters: {})",
                    names.join(", ")
                )
            }
        }
        MasterChange::Rebalance { .. } => {}
    }
    if opts.atomic {
        // Before any key is read: --atomic needs every master to have atomic slot migration.
        for m in &topo.masters {
            let facts = node_facts(&m.info, &m.address).map_err(|e| {
                anyhow!(
                    "--atomic: cannot tell whether {} has atomic slot migration ({e:#}); INFO \
                     needs +info",
                    m.address
                )
            })?;
            if !facts.atomic {
                bail!(
                    "--atomic needs Valkey 9 or later on every master (CLUSTER MIGRATESLOTS): \
                     not on {}",
                    m.address
                );
            }
        }
    }
    let holds = Holds::default();
    let missing = topo.without_module()?;
    let prober = Prober::start(&topo.masters);
    let gathered = if opts.no_module || !missing.is_empty() {
        let why = if opts.no_module {
            "--no-module".to_string()
        } else {
            format!("the module is not loaded on {}", missing.join(", "))
        };
        eprintln!("cluster: predicting read-only ({why}) ...");
        super::readonly::predict_readonly(seed, &topo, change, opts, &holds, why)?
    } else {
        eprintln!("cluster: predicting with the module ...");
        predict_module(seed, &topo, change, opts, &holds)?
    };
    let waits = prober.finish();
    let mut prediction = assemble(&topo, change, gathered, &holds, waits, opts, started);
    add_methods(seed, &mut prediction, opts)?;
    Ok(prediction)
}

/// Predicts `change` on the cluster at `seed_url`.
pub fn predict_url(seed_url: &str, change: MasterChange, opts: &Options) -> Result<Outcome> {
    let seed = seed_url
        .into_connection_info()
        .map_err(|e| anyhow!("bad seed URL {seed_url}: {e}"))?;
    let prediction = predict(&seed, &change, opts)?;
    Ok(Outcome {
        prediction,
        read_only: None,
        real: None,
        change,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringslot_harness::redis::Value;

    #[test]
    fn chunks_follow_runs_slot_limits_and_key_counts() {
        // Slots 0-9 and 20-21; ten keys a slot, but 150000 in slot 5.
        let slots: Vec<u16> = (0..10).chain(20..22).collect();
        let mut counts = vec![10u64; 32];
        counts[5] = 150_000;
        assert_eq!(
            chunks(&slots, 3, &counts),
            vec![(0, 2), (3, 4), (5, 5), (6, 8), (9, 9), (20, 21)]
        );
        // Without the big slot, chunks of 100 slots take whole runs.
        counts[5] = 10;
        assert_eq!(chunks(&slots, 100, &counts), vec![(0, 9), (20, 21)]);
        assert!(chunks(&[], 4, &counts).is_empty());
    }

    #[test]
    fn a_plan_reply_is_read_into_slots() {
        // A RING.PLAN reply under RESP2: flat field/value arrays.
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let range = |a, b| Value::Array(vec![Value::Int(a), Value::Int(b)]);
        let reply = Value::Array(vec![Value::Array(vec![
            bulk("from"),
            Value::Nil,
            bulk("to"),
            bulk("10.0.0.4:6379"),
            bulk("slots"),
            Value::Int(5),
            bulk("ranges"),
            Value::Array(vec![range(0, 2), range(10, 11)]),
        ])]);
        let plan = parse_plan(&reply).unwrap();
        assert_eq!(plan.len(), 1);
        assert_eq!(plan[0].from, None);
        assert_eq!(plan[0].to.as_deref(), Some("10.0.0.4:6379"));
        assert_eq!(plan[0].slots, vec![0, 1, 2, 10, 11]);
    }
}
