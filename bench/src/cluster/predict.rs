//! The prediction of a change of masters (see the module docs of `cluster`): the plan from a
//! mirror, the slot scheme's keys from the per-slot counts, and the rings and modulo from
//! every key, evaluated on its master.

use super::live::{connect, read_topology, run, s, slot_counts, tags, Master};
use super::{MasterChange, Options, Outcome, INTERRUPTED};
use anyhow::{anyhow, bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use ringslot_harness::client::error_text;
use ringslot_harness::redis::{self, Connection, ConnectionInfo, IntoConnectionInfo, Value};
use ringslot_harness::reply::{array as items, field, float, int};
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
    fn add(&mut self, o: &Sums) {
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

/// Keys one `RING.MOVES ... SLOTS` call reads at most, unless one slot holds more: well under
/// `ringslot.max-sample` (1M), and about 0.1-0.2 s of one master's main thread inline.
pub const CHUNK_KEYS: u64 = 100_000;

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

/// Evaluates `change` over one master's keys: a mirror copy of `flavour` under a tag of its
/// first slot, then `RING.MOVES ... SLOTS` over its chunks. A chunk whose slot is migrating is
/// retried (three times, a second apart); a chunk whose slots left the master fails the run.
pub(super) fn evaluate_master(
    m: &Master,
    flavour: &str,
    change: &MasterChange,
    opts: &Options,
    counts: &[u64],
    key: &str,
    bar: &ProgressBar,
) -> Result<Sums> {
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
            match run(&mut con, &m.address, &args) {
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

/// What a prediction found.
#[derive(Debug, Clone)]
pub struct Prediction {
    pub(super) masters: Vec<(String, usize)>,
    pub(super) counts: Vec<u64>,
    pub(super) plan: Vec<PlanStep>,
    /// The master the mirrors were made on: the plan is `redis-cli --cluster rebalance`'s
    /// run against it.
    pub(super) entry: String,
    pub(super) owner_before: Vec<Option<String>>,
    pub(super) owner_after: Vec<Option<String>>,
    /// Per flavour, the sums over every master.
    pub(super) rings: Vec<(String, Sums)>,
    pub(super) slots_moved: u64,
    pub(super) slots_between: u64,
    pub(super) keys: u64,
    pub(super) ideal: f64,
    pub(super) seconds: f64,
    /// The time of each step, in seconds.
    pub(super) steps: Vec<(String, f64)>,
}

/// Predicts `change` on the cluster behind `seed` (see the module docs).
pub(super) fn predict(
    seed: &ConnectionInfo,
    change: &MasterChange,
    opts: &Options,
) -> Result<Prediction> {
    let started = Instant::now();
    eprintln!("cluster: reading the topology ...");
    let topo = read_topology(seed, true)?;
    let names: Vec<String> = topo.masters.iter().map(|m| m.address.clone()).collect();
    match change {
        MasterChange::Add { node, .. } if names.contains(node) => {
            bail!("{node} is already a master of this cluster")
        }
        MasterChange::Del { node } if !names.contains(node) => {
            bail!(
                "{node} is not a master of this cluster (masters: {})",
                names.join(", ")
            )
        }
        _ => {}
    }
    eprintln!(
        "cluster: {} masters; counting the keys of 16384 slots ...",
        names.len()
    );
    let counts = slot_counts(&topo)?;
    let keys: u64 = counts.iter().sum();
    let mut steps = vec![(
        "topology, module check and per-slot key counts".to_string(),
        started.elapsed().as_secs_f64(),
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
    let plan = parse_plan(&run(&mut con, &first.address, &plan_args)?)?;
    copies.remove();
    let owner_before: Vec<Option<String>> = topo
        .owner
        .iter()
        .map(|o| o.map(|i| topo.masters[i].address.clone()))
        .collect();
    let mut owner_after = owner_before.clone();
    let (mut slots_moved, mut slots_between) = (0u64, 0u64);
    let survives = |n: &Option<String>| {
        n.as_deref()
            .is_some_and(|n| names.iter().any(|m| m == n) && n != change.node())
    };
    for mv in &plan {
        let keys: u64 = mv.slots.iter().map(|&s| counts[usize::from(s)]).sum();
        slots_moved += keys;
        if survives(&mv.from) && survives(&mv.to) {
            slots_between += keys;
        }
        for &slot in &mv.slots {
            owner_after[usize::from(slot)] = mv.to.clone();
        }
    }

    steps.push((
        "the plan (RING.MIRROR + RING.PLAN) and the slot scheme's sums".to_string(),
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
    for flavour in opts.flavours.iter().map(|f| f.name()) {
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
        let results: Vec<Result<Sums>> = std::thread::scope(|scope| {
            let handles: Vec<_> = serving
                .iter()
                .map(|m| {
                    let key = copy_key(m, flavour);
                    let bar = bar.clone();
                    let counts = &counts;
                    scope.spawn(move || {
                        evaluate_master(m, flavour, change, opts, counts, &key, &bar)
                    })
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
        for r in results {
            total.add(&r?);
        }
        rings.push((flavour.to_string(), total));
        steps.push((
            format!("{flavour} ring and modulo: every key, on its master"),
            mark.elapsed().as_secs_f64(),
        ));
    }
    bar.finish_and_clear();
    // The keys evaluated must be the keys counted, and nothing may have moved meanwhile.
    let after = read_topology(seed, false)?;
    let unchanged = after.masters.len() == topo.masters.len()
        && after
            .masters
            .iter()
            .zip(&topo.masters)
            .all(|(a, b)| a.address == b.address && a.slots == b.slots);
    if !unchanged {
        bail!("the cluster's slot table changed while the prediction ran: run again");
    }
    let ideal = rings.first().map_or(0.0, |(_, s)| s.ideal);
    Ok(Prediction {
        masters: topo
            .masters
            .iter()
            .map(|m| (m.address.clone(), m.slots.len()))
            .collect(),
        counts,
        plan,
        entry,
        owner_before,
        owner_after,
        rings,
        slots_moved,
        slots_between,
        keys,
        ideal,
        seconds: started.elapsed().as_secs_f64(),
        steps,
    })
}

/// Predicts `change` on the cluster at `seed_url`.
pub fn predict_url(seed_url: &str, change: MasterChange, opts: &Options) -> Result<Outcome> {
    let seed = seed_url
        .into_connection_info()
        .map_err(|e| anyhow!("bad seed URL {seed_url}: {e}"))?;
    let prediction = predict(&seed, &change, opts)?;
    Ok(Outcome {
        prediction,
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
