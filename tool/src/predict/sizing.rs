//! The bytes of the keys a slot plan moves: for each key, the length of its `DUMP` payload
//! (what `MIGRATE` sends: the value serialized as in an RDB file, its RDB version and a
//! CRC64) and `MEMORY USAGE key SAMPLES 0` (what it takes on the target, every element
//! counted), read from its master; every key, or the first `N` keys a slot with the rest
//! estimated from them, with the error of the estimate.
//!
//! A key that has expired meanwhile (`DUMP` replies nil) is not live, and is not counted: it
//! would not be migrated either.

use super::estimate::Sizes;
use super::live::{scan_master, Holds, Limiter, LiveCluster, Master, INTERRUPTED};
use super::options::Options;
use super::plan::PlanStep;
use crate::client::error_text;
use anyhow::{anyhow, bail, Result};
use redis::{Connection, Value};
use ringslot_engine::key_slot;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// Measures keys on one master: `DUMP` and `MEMORY USAGE` for the first `sample` keys of each
/// slot (all with `None`), and for the others a check that they are live (`EXISTS`), unless
/// their names came from `SCAN` (which returns live keys only).
pub struct Sizer<'a> {
    /// The master whose keys these are.
    pub master: &'a Master,
    /// Keys a slot measured (`None`: every key).
    pub sample: Option<u64>,
    /// Where the run's longest commands are noted.
    pub holds: &'a Holds,
    /// The rate limit of the reads.
    pub limiter: Limiter,
    /// What was measured, per slot.
    pub sizes: Sizes,
    /// Keys the user may not read (`NOPERM` on `DUMP`): how many, and the first few names.
    pub unreadable: Unreadable,
}

/// Keys a walk met that the user may not read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unreadable {
    /// How many.
    pub count: u64,
    /// The first [`Unreadable::EXAMPLES`] names.
    pub examples: Vec<Vec<u8>>,
}

impl Unreadable {
    /// How many names are kept as examples.
    pub const EXAMPLES: usize = 5;

    /// Adds `other`'s keys.
    pub fn add(&mut self, other: Unreadable) {
        self.count += other.count;
        for e in other.examples {
            if self.examples.len() < Unreadable::EXAMPLES {
                self.examples.push(e);
            }
        }
    }

    fn note(&mut self, name: &[u8]) {
        self.count += 1;
        if self.examples.len() < Unreadable::EXAMPLES {
            self.examples.push(name.to_vec());
        }
    }

    /// Fails when any key could not be read, with the count, examples and the patterns they
    /// fall under (each name up to its first `:`, or whole): a plan whose bytes leave keys out
    /// would be wrong, so none is printed.
    pub fn check(&self, user: &str) -> Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let shown: Vec<String> = self
            .examples
            .iter()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect();
        let mut patterns: Vec<String> = shown
            .iter()
            .map(|n| match n.find(':') {
                Some(i) => format!("{}*", &n[..=i]),
                None => n.clone(),
            })
            .collect();
        patterns.sort();
        patterns.dedup();
        let keys: Vec<String> = patterns.iter().map(|p| format!("%R~{p}")).collect();
        bail!(
            "{} keys in the slots that move cannot be read by the user `{user}` (DUMP answered \
             NOPERM), e.g. {}: their bytes would be missing from the plan. Grant read access \
             on every node (ACL SETUSER {user} {}), or run as a user who may read them",
            self.count,
            shown.join(", "),
            keys.join(" ")
        )
    }
}

/// Whether a client error is an ACL refusal.
fn is_noperm(e: &redis::RedisError) -> bool {
    e.code() == Some("NOPERM")
}

impl Sizer<'_> {
    /// Measures `names` (keys of this master in slots the plan moves); `live` says the names
    /// came from `SCAN` and need no check. One pipeline per call.
    pub fn measure(&mut self, con: &mut Connection, names: &[Vec<u8>], live: bool) -> Result<()> {
        #[derive(Clone, Copy)]
        enum Ask {
            Size,
            Exists,
            Nothing,
        }
        let mut asks = Vec::with_capacity(names.len());
        let mut pipe = redis::pipe();
        // Keys of each slot's sample asked in this pipeline.
        let mut asking: BTreeMap<u16, u64> = BTreeMap::new();
        for name in names {
            let slot = key_slot(name);
            let sampled = self.sizes.get(&slot).map_or(0, |s| s.sampled);
            let now = asking.entry(slot).or_default();
            let ask = if self.sample.is_none_or(|n| sampled + *now < n) {
                *now += 1;
                pipe.cmd("DUMP").arg(name);
                pipe.cmd("MEMORY")
                    .arg("USAGE")
                    .arg(name)
                    .arg("SAMPLES")
                    .arg(0);
                Ask::Size
            } else if live {
                Ask::Nothing
            } else {
                pipe.cmd("EXISTS").arg(name);
                Ask::Exists
            };
            asks.push(ask);
        }
        let at = &self.master.address;
        let replies: Vec<Value> = if asks.iter().all(|a| matches!(a, Ask::Nothing)) {
            Vec::new()
        } else {
            match self.holds.time(at, || pipe.query(con)) {
                Ok(replies) => replies,
                // Keys the user may not read: counted key by key (a rare path: the run fails
                // at the end with their count, before any plan is printed).
                Err(e) if is_noperm(&e) => {
                    for name in names {
                        match redis::cmd("DUMP").arg(name).query::<Value>(con) {
                            Err(e) if is_noperm(&e) => self.unreadable.note(name),
                            Err(e) => bail!("{at}: DUMP: {}", error_text(&e)),
                            Ok(_) => {}
                        }
                    }
                    return Ok(());
                }
                Err(e) => bail!("{at}: DUMP / MEMORY USAGE: {}", error_text(&e)),
            }
        };
        self.holds.read(at, names.len() as u64);
        self.limiter.take(names.len() as u64);
        let mut replies = replies.into_iter();
        for (name, ask) in names.iter().zip(asks) {
            let entry = self.sizes.entry(key_slot(name)).or_default();
            match ask {
                Ask::Size => {
                    let dump = replies.next();
                    let memory = replies.next();
                    let Some(Value::BulkString(payload)) = dump else {
                        continue;
                    };
                    let memory = match memory {
                        Some(Value::Int(n)) => n.max(0) as f64,
                        _ => 0.0,
                    };
                    let d = payload.len() as f64;
                    entry.keys += 1;
                    entry.sampled += 1;
                    entry.dump += d;
                    entry.dump_sq += d * d;
                    entry.memory += memory;
                    entry.memory_sq += memory * memory;
                }
                Ask::Exists => {
                    if matches!(replies.next(), Some(Value::Int(1))) {
                        entry.keys += 1;
                    }
                }
                Ask::Nothing => entry.keys += 1,
            }
        }
        Ok(())
    }
}

/// Measures the keys of the slots `plan` moves, on their masters (see the module docs):
/// names by `CLUSTER GETKEYSINSLOT` for a slot of at most [`GETKEYS_MAX`] keys (by `counts`),
/// else by a `SCAN` of the master that keeps those slots' keys; masters in parallel. Error:
/// keys the user (`user`, for the message) may not read ([`Unreadable::check`]).
pub fn size_moved_slots(
    topo: &LiveCluster,
    plan: &[PlanStep],
    counts: &[u64],
    opts: &Options,
    holds: &Holds,
    user: &str,
) -> Result<Sizes> {
    let mut by_master: BTreeMap<usize, Vec<u16>> = BTreeMap::new();
    for m in plan {
        for &slot in &m.slots {
            if let Some(Some(i)) = topo.owner.get(usize::from(slot)) {
                by_master.entry(*i).or_default().push(slot);
            }
        }
    }
    let results: Vec<Result<(Sizes, Unreadable)>> = std::thread::scope(|scope| {
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
    let (mut all, mut unreadable) = (Sizes::new(), Unreadable::default());
    for r in results {
        let (sizes, u) = r?;
        all.extend(sizes);
        unreadable.add(u);
    }
    unreadable.check(user)?;
    Ok(all)
}

/// The most keys `CLUSTER GETKEYSINSLOT` is asked for at once (it has no cursor, and holds the
/// master for about 4 ms per 16384 keys); bigger slots are found by `SCAN`.
pub const GETKEYS_MAX: u64 = 16384;

/// [`size_moved_slots`] on one master.
fn size_master(
    m: &Master,
    slots: &[u16],
    counts: &[u64],
    opts: &Options,
    holds: &Holds,
) -> Result<(Sizes, Unreadable)> {
    let mut con = m.link.connect()?;
    let mut sizer = Sizer {
        master: m,
        sample: opts.bytes_sample,
        holds,
        limiter: Limiter::new(opts.max_keys_per_sec),
        sizes: Sizes::new(),
        unreadable: Unreadable::default(),
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
    Ok((sizer.sizes, sizer.unreadable))
}
