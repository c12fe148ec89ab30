//! The prediction with the module on every master: the plan from `RING.MIRROR` and
//! `RING.PLAN` on the seed, the rings and modulo from every key, evaluated on its master by
//! `RING.MOVES ... SLOTS` on a copy of the mirror (a key with a TTL, deleted at the end), so
//! that the key names stay on the servers.

use super::change::MasterChange;
use super::live::{
    check_unchanged, run, s, slot_counts, tags, Holds, LiveCluster, Master, INTERRUPTED,
};
use super::options::Options;
use super::plan::PlanStep;
use super::prediction::{Gathered, Mode, Sums};
use super::sizing::size_moved_slots;
use crate::client::error_text;
use crate::link::{Access, Link};
use crate::replies::{read_plan, Moves};
use anyhow::{anyhow, bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use redis::{Connection, Value};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Reads the reply of `RING.PLAN` into the plan's moves.
fn parse_plan(reply: &Value) -> Result<Vec<PlanStep>> {
    Ok(read_plan(reply)?
        .into_iter()
        .map(|m| PlanStep {
            from: m.from,
            to: m.to,
            slots: m.slots,
        })
        .collect())
}

impl Sums {
    /// The sums of one `RING.MOVES ... SLOTS` reply (ring, slots and modulo).
    fn of(reply: &Value) -> Result<Sums> {
        let m = Moves::read(reply)?;
        let (ring, slots, modulo) = (m.scheme("ring")?, m.scheme("slots")?, m.scheme("modulo")?);
        Ok(Sums {
            members: m.members,
            ring_moved: ring.moved,
            ring_between: ring.between_old,
            slots_moved: slots.moved,
            modulo_moved: modulo.moved,
            modulo_between: modulo.between_old,
            ideal: m.ideal,
        })
    }
}

/// Keys one `RING.MOVES ... SLOTS` call reads at most, unless one slot holds more (which the
/// module then evaluates in the background, in slices): inline, a call holds its master for
/// its keys, about 1-5 µs each (at 1M keys, calls of 15600 keys held a master 18-56 ms by its
/// `SLOWLOG`, of 8192 keys up to about 25 ms, of 2048 keys 11.1-11.7 ms on a busy machine), so
/// 1024 keys keep a call near 5 ms, under 10 ms with room for the machine's noise.
pub const CHUNK_KEYS: u64 = 1024;

/// The runs of `slots` (ascending) cut into chunks of at most `chunk` slots and, but for a
/// single slot that holds more, at most [`CHUNK_KEYS`] keys by `counts` (keys per slot).
fn chunks(slots: &[u16], chunk: u16, counts: &[u64]) -> Vec<(u16, u16)> {
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

/// The ring copies a run made, deleted when dropped (also on error), and the account of what
/// it wrote and removed, for the report.
#[derive(Default)]
struct Copies {
    keys: Vec<(Link, String)>,
    log: Vec<String>,
}

impl Copies {
    /// Notes the copy `key` made on `link`'s node.
    fn made(&mut self, link: &Link, key: &str, how: &str) {
        self.keys.push((link.clone(), key.to_string()));
        self.log.push(format!("{how} {key} on {}", link.address));
    }

    fn remove(&mut self) {
        for (link, key) in self.keys.drain(..) {
            let removed = link
                .connect()
                .and_then(|mut con| run(&mut con, &link.address, &s(&["DEL", &key])));
            self.log.push(match removed {
                Ok(_) => format!("DEL {key} on {}", link.address),
                Err(e) => format!(
                    "could not delete {key} on {} ({e:#}): its TTL removes it",
                    link.address
                ),
            });
        }
    }
}

impl Drop for Copies {
    fn drop(&mut self) {
        self.remove();
    }
}

/// One flavour's pass over the masters: what each master's evaluation needs.
struct Pass<'a> {
    flavour: &'a str,
    change: &'a MasterChange,
    opts: &'a Options,
    /// Keys per slot (`CLUSTER COUNTKEYSINSLOT`), to size the chunks.
    counts: &'a [u64],
    bar: &'a ProgressBar,
    holds: &'a Holds,
}

/// Evaluates the pass's change over one master's keys with the ring copy at `key` (a mirror
/// of the pass's flavour, under a tag of the master's first slot): `RING.MOVES ... SLOTS`
/// over its chunks. A chunk whose slot is migrating is retried (three times, a second
/// apart); a chunk whose slots left the master fails the run.
fn evaluate_master(p: &Pass, m: &Master, key: &str) -> Result<Sums> {
    let Pass {
        flavour,
        change,
        opts,
        counts,
        bar,
        holds,
    } = *p;
    let mut con = m.link.connect()?;
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
                    con = m.link.connect()?;
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
fn mirror_with_ttl(
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

/// Predicts `change` with the module on every master (see the module docs).
pub fn predict_module(
    access: &Access,
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
        format!("{}ringslot:{run_id}:{flavour}", tags[usize::from(first)])
    };
    let mut copies = Copies::default();
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
    let mut con = first.link.connect()?;
    mirror_with_ttl(&mut con, &first.address, &plan_key, "native", &ttl)?;
    copies.made(&first.link, &plan_key, "RING.MIRROR + EXPIRE");
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
        let mut con = first.link.connect()?;
        mirror_with_ttl(&mut con, &first.address, &key, flavour, &ttl)?;
        copies.made(&first.link, &key, "RING.MIRROR + EXPIRE");
        let payload: Vec<u8> = redis::cmd("DUMP")
            .arg(&key)
            .query(&mut con)
            .map_err(|e| anyhow!("{}: DUMP {key}: {}", first.address, error_text(&e)))?;
        for m in serving.iter().filter(|m| m.address != first.address) {
            let key = copy_key(m, flavour);
            let mut con = m.link.connect()?;
            // RESTORE refuses a key that exists (BUSYKEY): only a copy it made is deleted.
            redis::cmd("RESTORE")
                .arg(&key)
                .arg(opts.ttl_secs.max(1) * 1000)
                .arg(&payload)
                .query::<()>(&mut con)
                .map_err(|e| anyhow!("{}: RESTORE {key}: {}", m.address, error_text(&e)))?;
            copies.made(&m.link, &key, "RESTORE (with a TTL)");
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
    let (sizes, sizes_note) = size_moved_slots(topo, &plan, &counts, opts, holds, access.user())?;
    steps.push((
        "the bytes of the moved slots' keys (GETKEYSINSLOT, DUMP, MEMORY USAGE)".to_string(),
        mark.elapsed().as_secs_f64(),
    ));
    check_unchanged(access, topo)?;
    let ideal = rings.first().map_or(0.0, |(_, s)| s.ideal);
    copies.remove();
    Ok(Gathered {
        mode: Mode::Module,
        entry,
        plan,
        sizes,
        master_keys,
        rings,
        ideal,
        steps,
        writes: std::mem::take(&mut copies.log),
        notes: sizes_note.into_iter().collect(),
        slot_load: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
