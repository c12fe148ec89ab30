//! The prediction with the module on every master: the plan from `RING.MIRROR` and
//! `RING.PLAN` on the seed, the rings and modulo from every key, evaluated on its master by
//! `RING.MOVES ... SLOTS` on a copy of the mirror (a key with a TTL, deleted at the end), so
//! that the key names stay on the servers.

use super::change::MasterChange;
use super::options::Options;
use super::prediction::{Gathered, Mode};
use super::sizing::size_moved_slots;
use super::sums::{RingSums, Sums};
use crate::cluster::connection::{args, NodeConnection};
use crate::cluster::error::Code;
use crate::cluster::link::{Access, Link};
use crate::cluster::pacing::Holds;
use crate::cluster::reads::{slot_counts, tags};
use crate::cluster::snapshot::check_unchanged;
use crate::cluster::topology::{LiveCluster, Master};
use crate::cluster::INTERRUPTED;
use crate::reply::ring::read_plan;
use anyhow::{anyhow, bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

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
            let removed = link.connect().and_then(|mut con| con.run(&["DEL", &key]));
            self.log.push(match removed {
                Ok(_) => format!("DEL {key} on {}", link.address),
                Err(e) => format!(
                    "could not delete {key} on {} ({e}): its TTL removes it",
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
        let mut moves = args(&["RING.MOVES", key]);
        moves.extend(change.args());
        moves.extend(args(&["SLOTS", &a.to_string(), &b.to_string()]));
        let mut attempt = 0;
        let reply = loop {
            attempt += 1;
            match holds.time(&m.address, || con.run(&moves)) {
                Ok(reply) => break reply,
                Err(e) => {
                    let retry = matches!(e.code, Code::SlotOpen | Code::Loading);
                    if attempt >= 3 || !retry {
                        let hint = if matches!(e.code, Code::SlotElsewhere | Code::Moved) {
                            ": the slots left this master while the prediction ran; run again \
                             when the cluster is stable"
                        } else {
                            ""
                        };
                        bail!(
                            "{flavour}: slots {a}-{b} of {} failed{hint}: {e}",
                            m.address
                        );
                    }
                    std::thread::sleep(Duration::from_secs(1));
                    con = m.link.connect()?;
                }
            }
        };
        sums.add(&Sums::of_reply(&reply)?);
        bar.inc(1);
    }
    Ok(sums)
}

/// `RING.MIRROR key COMPAT flavour` and `EXPIRE key ttl` in one `MULTI`/`EXEC`, so that a run
/// killed between them cannot leave a copy without a TTL.
fn mirror_with_ttl(con: &mut NodeConnection, key: &str, flavour: &str, ttl: &str) -> Result<()> {
    let at = con.address().to_string();
    // RING.MIRROR refreshes a ring that exists: the key must be new, and stay new until the
    // mirror is made (WATCH: EXEC does nothing if another client wrote it meanwhile).
    con.run(&["WATCH", key])?;
    let exists = con.run(&["EXISTS", key])?;
    if crate::reply::int(&exists)? != 0 {
        let _ = con.run(&["UNWATCH"]);
        bail!("{at}: the key {key} exists; the benchmark changes no key it did not create");
    }
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("RING.MIRROR")
        .arg(key)
        .arg("COMPAT")
        .arg(flavour)
        .cmd("EXPIRE")
        .arg(key)
        .arg(ttl);
    let made: Option<(redis::Value, i64)> =
        con.pipeline(&pipe, &format!("MULTI RING.MIRROR {key} EXPIRE"))?;
    if made.is_none() {
        bail!("{at}: another client wrote {key} while the benchmark made it");
    }
    Ok(())
}

/// Predicts `change` with the module on every master (see the module docs).
pub(crate) fn predict_module(
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
    let mut run = ModuleRun::new(topo, opts)?;
    let plan_key = run.mirror_on_entry("plan", "native")?;
    let mut plan_args = args(&["RING.PLAN", &plan_key]);
    plan_args.extend(change.args());
    let mut con = run.entry.link.connect()?;
    let plan = read_plan(&holds.time(&run.entry.address, || con.run(&plan_args))?)?;
    run.copies.remove();
    steps.push((
        "the plan (RING.MIRROR + RING.PLAN)".to_string(),
        mark.elapsed().as_secs_f64(),
    ));
    // The rings and modulo, one flavour at a time, masters in parallel.
    let per_flavour: u64 = run
        .serving
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
    for flavour in opts.flavours.iter().map(|f| f.name()) {
        let mark = Instant::now();
        bar.set_message(format!("cluster: {flavour}"));
        let pass = Pass {
            flavour,
            change,
            opts,
            counts: &counts,
            bar: &bar,
            holds,
        };
        let per_master = run.evaluate(&pass)?;
        let mut total = Sums::default();
        for (address, sums) in per_master {
            master_keys.entry(address).or_insert(sums.members);
            total.add(&sums);
        }
        rings.push(RingSums {
            flavour: flavour.to_string(),
            sums: total,
        });
        steps.push((
            format!("{flavour} ring and modulo: every key, on its master"),
            mark.elapsed().as_secs_f64(),
        ));
    }
    bar.finish_and_clear();
    let mark = Instant::now();
    let (sizes, sizes_note, big_keys) =
        size_moved_slots(topo, &plan, &counts, opts, holds, access.user())?;
    steps.push((
        "the bytes of the moved slots' keys (GETKEYSINSLOT, DUMP, MEMORY USAGE)".to_string(),
        mark.elapsed().as_secs_f64(),
    ));
    check_unchanged(access, topo)?;
    let ideal = rings.first().map_or(0.0, |r| r.sums.ideal);
    run.copies.remove();
    Ok(Gathered {
        mode: Mode::Module,
        entry: run.entry.address.clone(),
        plan,
        sizes,
        master_keys,
        rings,
        ideal,
        steps,
        writes: std::mem::take(&mut run.copies.log),
        notes: sizes_note.into_iter().collect(),
        slot_load: None,
        big_keys,
    })
}

/// The masters a run with the module works on, and the ring copies it makes there.
struct ModuleRun<'a> {
    /// The master the mirrors are made on (see [`ModuleRun::new`]).
    entry: &'a Master,
    /// The masters that serve slots: each evaluates its own keys.
    serving: Vec<&'a Master>,
    copies: Copies,
    /// The copies' TTL, seconds.
    ttl: u64,
    /// A hash tag for every slot, and this process's id: the copies' names.
    tags: Vec<String>,
    run_id: u32,
}

impl<'a> ModuleRun<'a> {
    /// The run on `topo`. Mirrors are made on the seed, so that the plan is what `redis-cli
    /// --cluster rebalance <seed>` does (redis-cli breaks ties of balance by the order it loads
    /// masters in from its entry node, which `RING.MIRROR` follows); a seed that serves no slot
    /// cannot hold one, and the first master that serves slots stands in. Error: no master
    /// serves a slot.
    fn new(topo: &'a LiveCluster, opts: &Options) -> Result<ModuleRun<'a>> {
        let serving: Vec<&Master> = topo
            .masters
            .iter()
            .filter(|m| !m.slots.is_empty())
            .collect();
        let entry = topo
            .seed
            .and_then(|i| topo.masters.get(i))
            .filter(|m| !m.slots.is_empty())
            .or_else(|| serving.first().copied())
            .ok_or_else(|| anyhow!("no master serves a slot"))?;
        Ok(ModuleRun {
            entry,
            serving,
            copies: Copies::default(),
            ttl: opts.ttl_secs.max(1),
            tags: tags(),
            run_id: std::process::id(),
        })
    }

    /// The name of the copy for `what` on `m`: under a tag of its first slot, so that it
    /// lives on `m`.
    fn copy_key(&self, m: &Master, what: &str) -> String {
        let first = m.slots.first().copied().unwrap_or(0);
        let tag = self.tags.get(usize::from(first)).map_or("", String::as_str);
        format!("{tag}ringslot:{}:{what}", self.run_id)
    }

    /// Makes a mirror of the cluster of `flavour` on the entry master, with a TTL; its key.
    fn mirror_on_entry(&mut self, what: &str, flavour: &str) -> Result<String> {
        let key = self.copy_key(self.entry, what);
        let mut con = self.entry.link.connect()?;
        mirror_with_ttl(&mut con, &key, flavour, &self.ttl.to_string())?;
        self.copies
            .made(&self.entry.link, &key, "RING.MIRROR + EXPIRE");
        Ok(key)
    }

    /// One flavour's pass: a mirror on the entry master, copied byte for byte to the others
    /// (`DUMP` and `RESTORE`: every master evaluates the same ring, with the same node order,
    /// which modulo and ketama's ties depend on), then every master's keys evaluated on its
    /// copy ([`evaluate_master`]), masters in parallel; the copies deleted. Per master, its
    /// sums.
    fn evaluate(&mut self, pass: &Pass) -> Result<Vec<(String, Sums)>> {
        let flavour = pass.flavour;
        let key = self.mirror_on_entry(flavour, flavour)?;
        let payload = self.entry.link.connect()?.run(&["DUMP", &key])?;
        let payload = crate::reply::bytes(&payload)?;
        let ttl_ms = self.ttl.saturating_mul(1000).to_string();
        for m in self
            .serving
            .iter()
            .filter(|m| m.address != self.entry.address)
        {
            let key = self.copy_key(m, flavour);
            // RESTORE refuses a key that exists (BUSYKEY): only a copy it made is deleted.
            m.link.connect()?.run(&[
                b"RESTORE".as_slice(),
                key.as_bytes(),
                ttl_ms.as_bytes(),
                &payload,
            ])?;
            self.copies.made(&m.link, &key, "RESTORE (with a TTL)");
        }
        let results: Vec<Result<Sums>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .serving
                .iter()
                .map(|&m| {
                    let key = self.copy_key(m, flavour);
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
        self.copies.remove();
        self.serving
            .iter()
            .zip(results)
            .map(|(m, r)| Ok((m.address.clone(), r?)))
            .collect()
    }
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
