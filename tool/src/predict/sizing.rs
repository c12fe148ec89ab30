//! The bytes of the keys a slot plan moves: for each key, the length of its `DUMP` payload
//! (what `MIGRATE` sends: the value serialized as in an RDB file, its RDB version and a
//! CRC64) and `MEMORY USAGE key SAMPLES 0` (what it takes on the target, every element
//! counted), read from its master; every key, or the first `N` keys a slot with the rest
//! estimated from them, with the error of the estimate.
//!
//! A key that has expired meanwhile (`DUMP` replies nil) is not live, and is not counted: it
//! would not be migrated either.

use super::big_keys::{self, BigKey, KeyKind, BIG_KEY_MEMORY};
use super::estimate::Sizes;
use super::options::{Options, SizesBy};
use super::steps::RebalanceStep;
use crate::cluster::connection::NodeConnection;
use crate::cluster::error::{Code, NodeError};
use crate::cluster::pacing::{Holds, Limiter};
use crate::cluster::reads::scan_master;
use crate::cluster::topology::{LiveCluster, Master};
use crate::cluster::INTERRUPTED;
use anyhow::{anyhow, bail, Result};
use redis::Value;
use ringslot_engine::key_slot;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// Measures keys on one master: `DUMP` and `MEMORY USAGE` for the first `sample` keys of each
/// slot (all with `None`), and for the others a screen for big keys that also tells whether
/// they are still live (`MEMORY USAGE ... SAMPLES 5`, [`Sizer::screen`]). The names to size wait in a
/// buffer per slot, so that a script call sizes up to [`SCRIPT_KEYS`] keys of one slot however
/// the names arrive (a `SCAN` batch of 1000 names holds one or two of most slots); call
/// [`Sizer::finish`] at the end.
pub(crate) struct Sizer<'a> {
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
    /// Whether the sizes come by [`LENGTHS`] scripts (`None`: not tried yet; `Some(false)`:
    /// the user may not run them, `DUMP` then).
    pub by_script: Option<bool>,
    /// Names waiting to be sized, per slot, and how many in all.
    pending: BTreeMap<u16, Vec<Vec<u8>>>,
    pending_keys: usize,
    /// Big keys met ([`super::big_keys`]).
    big_seen: Vec<big_keys::Seen>,
    /// What the keys measured weigh, per kind: what a big key's `DUMP` bytes and hold are
    /// estimated from.
    kinds: big_keys::Kinds,
    /// The big keys, described by [`Sizer::finish`].
    pub big_keys: Vec<BigKey>,
}

/// Names [`Sizer`] keeps waiting at most before it sizes them all (a few hundred KiB of names).
const PENDING_MAX: usize = 65536;

/// Script calls (or `DUMP`s) sent in one pipeline at most.
const PIPELINE_CALLS: usize = 4;

/// Keys a walk met that the user may not read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Unreadable {
    /// How many.
    pub count: u64,
    /// The first [`Unreadable::EXAMPLES`] names.
    pub examples: Vec<Vec<u8>>,
}

impl Unreadable {
    /// How many names are kept as examples.
    pub(crate) const EXAMPLES: usize = 5;

    /// Adds `other`'s keys.
    pub(crate) fn add(&mut self, other: Unreadable) {
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
    pub(crate) fn check(&self, user: &str) -> Result<()> {
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

impl<'a> Sizer<'a> {
    /// A sizer of `master`'s keys as `opts` say (`--bytes-sample`, `--max-keys-per-sec`,
    /// `--sizes-by`).
    pub(crate) fn new(master: &'a Master, opts: &Options, holds: &'a Holds) -> Self {
        Sizer {
            master,
            sample: opts.bytes_sample,
            holds,
            limiter: Limiter::new(opts.max_keys_per_sec),
            sizes: Sizes::new(),
            unreadable: Unreadable::default(),
            by_script: (opts.sizes_by == SizesBy::Dump).then_some(false),
            pending: BTreeMap::new(),
            pending_keys: 0,
            big_seen: Vec::new(),
            kinds: big_keys::Kinds::default(),
            big_keys: Vec::new(),
        }
    }

    /// Measures `names` (keys of this master in slots the plan moves); `live` says the names
    /// came from `SCAN` (live when read). The names to size join their slot's buffer, sized
    /// when it holds [`SCRIPT_KEYS`] names or the buffers [`PENDING_MAX`]; the others (past
    /// the sample) are screened now ([`Sizer::screen`]).
    pub(crate) fn measure(
        &mut self,
        con: &mut NodeConnection,
        names: &[Vec<u8>],
        live: bool,
    ) -> Result<()> {
        let mut past_sample: Vec<&Vec<u8>> = Vec::new();
        let mut full: Vec<u16> = Vec::new();
        for name in names {
            let slot = key_slot(name);
            let sampled = self.sizes.get(&slot).map_or(0, |s| s.sampled);
            let waiting = self.pending.get(&slot).map_or(0, Vec::len) as u64;
            if self.sample.is_none_or(|n| sampled + waiting < n) {
                let buffer = self.pending.entry(slot).or_default();
                buffer.push(name.clone());
                self.pending_keys += 1;
                if buffer.len() == SCRIPT_KEYS {
                    full.push(slot);
                }
            } else {
                past_sample.push(name);
            }
        }
        // Names from SCAN were counted where they were read.
        if !live {
            self.holds.read(&self.master.address, names.len() as u64);
            self.limiter.take(past_sample.len() as u64);
        }
        self.screen(con, &past_sample)?;
        if self.pending_keys >= PENDING_MAX {
            self.flush(con, None)
        } else if !full.is_empty() {
            self.flush(con, Some(&full))
        } else {
            Ok(())
        }
    }

    /// The keys past the sample of their slot: each one's `MEMORY USAGE ... SAMPLES 5` (O(1):
    /// five elements of a collection, scaled), one pipeline. A key gone meanwhile is not
    /// counted; one of [`BIG_KEY_MEMORY`] or more is a big key (described by
    /// [`Sizer::finish`]), so that a sample never hides one; the others are counted, their
    /// bytes estimated from the sample.
    fn screen(&mut self, con: &mut NodeConnection, names: &[&Vec<u8>]) -> Result<()> {
        if names.is_empty() {
            return Ok(());
        }
        let at = &self.master.address;
        let memory = self.holds.time(at, || {
            memory_estimates(con, names.iter().map(|n| n.as_slice()))
        })?;
        for (name, memory) in names.iter().zip(memory) {
            match memory {
                None => {}
                Some(m) if m >= BIG_KEY_MEMORY => self.big_seen.push(big_keys::Seen {
                    name: name.to_vec(),
                    slot: key_slot(name),
                    memory: m as f64,
                    kind: None,
                }),
                Some(_) => self.sizes.entry(key_slot(name)).or_default().keys += 1,
            }
        }
        Ok(())
    }

    /// Sizes every name still waiting, then estimates the big keys met and describes them
    /// ([`big_keys::describe`]). Call once, after the last [`Sizer::measure`].
    pub(crate) fn finish(&mut self, con: &mut NodeConnection) -> Result<()> {
        self.flush(con, None)?;
        let seen = std::mem::take(&mut self.big_seen);
        // Not timed as one hold: its commands are several, each bounded (TYPE, OBJECT, a
        // length, and a DUMP under the big-key bound a kind).
        self.big_keys = big_keys::describe(con, seen, &self.kinds)?;
        for k in &self.big_keys {
            let entry = self.sizes.entry(k.slot).or_default();
            entry.keys += 1;
            entry.big += 1;
            entry.big_dump += k.dump;
            entry.big_memory += k.memory;
        }
        Ok(())
    }

    /// Sizes the names waiting in `slots` (`None`: every slot), a pipeline of up to
    /// [`PIPELINE_CALLS`] calls at a time.
    fn flush(&mut self, con: &mut NodeConnection, slots: Option<&[u16]>) -> Result<()> {
        let mut names: Vec<Vec<u8>> = Vec::new();
        match slots {
            Some(slots) => {
                for slot in slots {
                    names.extend(self.pending.remove(slot).unwrap_or_default());
                }
            }
            None => {
                for (_, buffer) in std::mem::take(&mut self.pending) {
                    names.extend(buffer);
                }
            }
        }
        self.pending_keys = self.pending_keys.saturating_sub(names.len());
        // Names of one slot are adjacent: a script call's keys are one slot's. A call that
        // stopped at its byte budget leaves the rest of its names for another round.
        while !names.is_empty() {
            let mut rest: &[Vec<u8>] = &names;
            let mut again: Vec<Vec<u8>> = Vec::new();
            while !rest.is_empty() {
                let (consumed, sized, left) = self.size(con, rest)?;
                self.limiter.take(sized as u64);
                self.holds.read(&self.master.address, sized as u64);
                again.extend(left);
                rest = rest.get(consumed..).unwrap_or_default();
            }
            names = again;
        }
        Ok(())
    }

    /// Sizes a first part of `names` (grouped by slot) in one pipeline: how many names it
    /// consumed, how many of them it sized, and those it left for another round (a script
    /// call's names after its byte budget ran out).
    fn size(
        &mut self,
        con: &mut NodeConnection,
        names: &[Vec<u8>],
    ) -> Result<(usize, usize, Vec<Vec<u8>>)> {
        let at = self.master.address.clone();
        let by_script = self.by_script != Some(false);
        let outcome = self.holds.time(&at, || {
            if by_script {
                size_by_script(con, names)
            } else {
                let part = names.get(..names.len().min(DUMP_KEYS)).unwrap_or(names);
                size_by_dump(con, part).map(|sizes| vec![(part.len(), sizes)])
            }
        });
        let calls = match outcome {
            Ok(found) => {
                if by_script {
                    self.by_script = Some(true);
                }
                found
            }
            // A user who may not run scripts (or a server without them): the DUMP way from
            // now on.
            Err(e) if by_script && matches!(e.code, Code::NoPermCommand | Code::UnknownCommand) => {
                self.by_script = Some(false);
                return Ok((0, 0, Vec::new()));
            }
            // Keys the user may not read: counted key by key (a rare path: the run fails at
            // the end with their count, before any plan is printed).
            Err(e) if e.is(&Code::NoPermKey) => {
                // Only the names this pipeline covered, at most.
                let covered = if by_script {
                    PIPELINE_CALLS * SCRIPT_KEYS
                } else {
                    DUMP_KEYS
                };
                let part = names.get(..names.len().min(covered)).unwrap_or(names);
                for name in part {
                    match con.run(&[b"DUMP".as_slice(), name]) {
                        Err(e) if e.is(&Code::NoPermKey) => self.unreadable.note(name),
                        Err(e) => bail!(e),
                        Ok(_) => {}
                    }
                }
                return Ok((part.len(), part.len(), Vec::new()));
            }
            Err(e) => bail!("{at}: the moving keys' sizes: {}", e.text),
        };
        let (mut consumed, mut sized, mut left) = (0, 0, Vec::new());
        for (n, sizes) in calls {
            let part = names.get(consumed..consumed + n).unwrap_or_default();
            consumed += n;
            sized += sizes.len();
            left.extend(part.iter().skip(sizes.len()).cloned());
            for (name, size) in part.iter().zip(sizes) {
                let (d, memory) = match size {
                    KeySize::Gone => continue, // gone meanwhile: not live, not moved
                    KeySize::Big { memory, kind } => {
                        self.big_seen.push(big_keys::Seen {
                            name: name.clone(),
                            slot: key_slot(name),
                            memory,
                            kind,
                        });
                        continue;
                    }
                    KeySize::Measured { dump, memory, kind } => {
                        self.kinds.note(name, dump, memory, kind.as_ref());
                        (dump, memory)
                    }
                };
                let entry = self.sizes.entry(key_slot(name)).or_default();
                entry.keys += 1;
                entry.sampled += 1;
                entry.dump += d;
                entry.dump_sq += d * d;
                entry.memory += memory;
                entry.memory_sq += memory * memory;
            }
        }
        Ok((consumed, sized, left))
    }
}

/// How the moving keys' sizes were read, over the masters' sizers (and `--sizes-by`), for the
/// report (`None` when no key was sized).
pub(crate) fn sizes_note(ways: &[Option<bool>], sizes_by: SizesBy) -> Option<String> {
    let scripts = ways.iter().filter(|w| **w == Some(true)).count();
    let dumps = ways.iter().filter(|w| **w == Some(false)).count();
    match (scripts, dumps) {
        (0, 0) => None,
        (_, _) if sizes_by == SizesBy::Dump => Some(
            "the moving keys' sizes were read by DUMP (--sizes-by dump), their payloads \
             carried to the tool to be measured"
                .into(),
        ),
        (_, 0) => Some(
            "the moving keys' sizes were read by read-only scripts (EVAL_RO: each key's DUMP \
             length and MEMORY USAGE, the payloads left on the servers)"
                .into(),
        ),
        _ => Some(format!(
            "the moving keys' sizes were read by DUMP on {dumps} master(s), their payloads \
             carried to the tool to be measured (the user may not run EVAL_RO there; +eval_ro \
             makes it faster)"
        )),
    }
}

/// The script that gives a batch of keys' sizes without their payloads: for each key (its
/// `KEYS`, all of one hash slot), five values: first `MEMORY USAGE ... SAMPLES 5` (O(1) for a
/// string, 5 elements of a collection): -2 and that estimate for a key of `ARGV[2]` bytes or
/// more (a big key, never serialized here), else the length of its `DUMP` payload and its
/// `MEMORY USAGE ... SAMPLES 0`; -1 and -1 for a key that is gone; then its `TYPE`, its `OBJECT
/// ENCODING` and its O(1) length (`STRLEN`, `HLEN`, `LLEN`, `SCARD`, `ZCARD`, `XLEN`; 0
/// otherwise); until the payloads serialized reach `ARGV[1]` bytes: the keys after that are
/// left for another call (at least one key is always sized). Read-only (`EVAL_RO`); it
/// serializes each value under the bound on the server, as `DUMP` does.
pub(crate) const LENGTHS: &str = "local out = {} \
    local total = 0 \
    local budget = tonumber(ARGV[1]) \
    local big = tonumber(ARGV[2]) \
    local lengths = {string = 'STRLEN', hash = 'HLEN', list = 'LLEN', set = 'SCARD', \
      zset = 'ZCARD', stream = 'XLEN'} \
    for _, k in ipairs(KEYS) do \
      if total >= budget then break end \
      local m = redis.call('MEMORY', 'USAGE', k, 'SAMPLES', '5') \
      local d = nil \
      if not m then \
        out[#out + 1] = -1 \
        out[#out + 1] = -1 \
      elseif m >= big then \
        out[#out + 1] = -2 \
        out[#out + 1] = m \
      else \
        d = redis.call('DUMP', k) \
        if d then \
          total = total + #d \
          out[#out + 1] = #d \
          out[#out + 1] = redis.call('MEMORY', 'USAGE', k, 'SAMPLES', '0') \
        else \
          out[#out + 1] = -1 \
          out[#out + 1] = -1 \
        end \
      end \
      if m and (d or m >= big) then \
        local t = redis.call('TYPE', k)['ok'] \
        out[#out + 1] = t \
        out[#out + 1] = redis.call('OBJECT', 'ENCODING', k) or '' \
        local c = lengths[t] \
        if c then out[#out + 1] = redis.call(c, k) else out[#out + 1] = 0 end \
      else \
        out[#out + 1] = '' \
        out[#out + 1] = '' \
        out[#out + 1] = 0 \
      end \
    end \
    return out";

/// What sizing found of one key (its kind where the script read it).
#[derive(Debug, Clone, PartialEq)]
enum KeySize {
    /// Gone meanwhile (expired or deleted): not live, not moved.
    Gone,
    /// A big key ([`BIG_KEY_MEMORY`]): its `MEMORY USAGE ... SAMPLES 5`, never serialized.
    Big { memory: f64, kind: Option<KeyKind> },
    /// Its `DUMP` length and `MEMORY USAGE ... SAMPLES 0`.
    Measured {
        dump: f64,
        memory: f64,
        kind: Option<KeyKind>,
    },
}

/// Keys a [`LENGTHS`] call sizes at most, and the bytes of payload after which it stops: a
/// call serializes at most 100 values and about 128 KiB (measured: 100 values of 4 KiB, 410
/// KiB, took 4.2 ms on Redis 7.0.15; about 10 ns a byte), plus the last key's.
pub(crate) const SCRIPT_KEYS: usize = 100;
pub(crate) const SCRIPT_BYTES: u64 = 128 * 1024;

/// Sizes (`DUMP` length and memory; `None` for a key gone) of a first part of `names`
/// (grouped by slot) by [`LENGTHS`] scripts: up to [`PIPELINE_CALLS`] calls of up to
/// [`SCRIPT_KEYS`] names of one slot, in one pipeline. Per call, the names it covered and the
/// sizes of its first names (fewer when it stopped at its byte budget; at least one).
fn size_by_script(con: &mut NodeConnection, names: &[Vec<u8>]) -> Result<Calls, NodeError> {
    let mut pipe = redis::pipe();
    let mut calls: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < names.len() && calls.len() < PIPELINE_CALLS {
        let slot = key_slot(&names[i]);
        let mut n = 0;
        while i + n < names.len() && n < SCRIPT_KEYS && key_slot(&names[i + n]) == slot {
            n += 1;
        }
        pipe.cmd("EVAL_RO").arg(LENGTHS).arg(n);
        for name in &names[i..i + n] {
            pipe.arg(name.as_slice());
        }
        pipe.arg(SCRIPT_BYTES).arg(BIG_KEY_MEMORY);
        calls.push(n);
        i += n;
    }
    let replies: Vec<Value> = con.pipeline(&pipe, "EVAL_RO")?;
    let mut out = Vec::with_capacity(calls.len());
    let odd = |text: String| NodeError {
        node: con.address().to_string(),
        command: "EVAL_RO".into(),
        code: Code::Other("reply".into()),
        text,
    };
    for (n, reply) in calls.into_iter().zip(replies) {
        let values = crate::reply::array(&reply).map_err(|e| odd(e.to_string()))?;
        let sizes: Vec<KeySize> = values
            .chunks_exact(5)
            .take(n)
            .map(|v| {
                let int = |x: &Value| crate::reply::int(x).unwrap_or(-1);
                let text = |x: &Value| crate::reply::text(x).unwrap_or_default();
                let kind = Some(KeyKind {
                    kind: text(&v[2]),
                    encoding: text(&v[3]),
                    length: u64::try_from(int(&v[4])).unwrap_or(0),
                })
                .filter(|k| !k.kind.is_empty());
                let memory = int(&v[1]).max(0) as f64;
                match int(&v[0]) {
                    -2 => KeySize::Big { memory, kind },
                    d if d >= 0 => KeySize::Measured {
                        dump: d as f64,
                        memory,
                        kind,
                    },
                    _ => KeySize::Gone,
                }
            })
            .collect();
        if sizes.is_empty() && n > 0 {
            return Err(odd("the sizes' script sized no key".into()));
        }
        out.push((n, sizes));
    }
    Ok(out)
}

/// Per call of a pipeline: the names it covered, and the sizes of its first names.
type Calls = Vec<(usize, Vec<KeySize>)>;

/// Each of `names`' `MEMORY USAGE ... SAMPLES 5` (O(1): five elements of a collection,
/// scaled), in one pipeline; `None` for a key gone. What tells a big key before it is read.
pub(crate) fn memory_estimates<'n>(
    con: &mut NodeConnection,
    names: impl Iterator<Item = &'n [u8]>,
) -> Result<Vec<Option<u64>>, NodeError> {
    let mut pipe = redis::pipe();
    for name in names {
        pipe.cmd("MEMORY")
            .arg("USAGE")
            .arg(name)
            .arg("SAMPLES")
            .arg(5);
    }
    con.pipeline(&pipe, "MEMORY USAGE")
}

/// Keys a pipeline of `DUMP`s (and `MEMORY USAGE`) carries at most.
const DUMP_KEYS: usize = 128;

/// [`size_by_script`] by `DUMP` (its payload measured here) and `MEMORY USAGE`, every name:
/// first `MEMORY USAGE ... SAMPLES 5` of each (big keys are not serialized), then `DUMP` and
/// `MEMORY USAGE ... SAMPLES 0` of the others.
fn size_by_dump(con: &mut NodeConnection, names: &[Vec<u8>]) -> Result<Vec<KeySize>, NodeError> {
    let estimates = memory_estimates(con, names.iter().map(Vec::as_slice))?;
    let mut pipe = redis::pipe();
    for (name, estimate) in names.iter().zip(&estimates) {
        if estimate.is_some_and(|m| m < BIG_KEY_MEMORY) {
            pipe.cmd("DUMP").arg(name.as_slice());
            pipe.cmd("MEMORY")
                .arg("USAGE")
                .arg(name.as_slice())
                .arg("SAMPLES")
                .arg(0);
        }
    }
    let replies: Vec<Value> = con.pipeline(&pipe, "DUMP")?;
    let mut replies = replies.into_iter();
    let mut sizes = Vec::with_capacity(names.len());
    for estimate in estimates {
        sizes.push(match estimate {
            None => KeySize::Gone,
            Some(m) if m >= BIG_KEY_MEMORY => KeySize::Big {
                memory: m as f64,
                kind: None,
            },
            Some(_) => {
                let (dump, memory) = (replies.next(), replies.next());
                match dump {
                    Some(Value::BulkString(payload)) => KeySize::Measured {
                        dump: payload.len() as f64,
                        memory: match memory {
                            Some(Value::Int(n)) => n.max(0) as f64,
                            _ => 0.0,
                        },
                        kind: None,
                    },
                    _ => KeySize::Gone,
                }
            }
        });
    }
    Ok(sizes)
}

/// Measures the keys of the slots `plan` moves, on their masters (see the module docs):
/// names by `CLUSTER GETKEYSINSLOT` for a slot of at most [`GETKEYS_MAX`] keys (by `counts`),
/// else by a `SCAN` of the master that keeps those slots' keys; masters in parallel. Error:
/// keys the user (`user`, for the message) may not read ([`Unreadable::check`]). Returns the
/// sizes, how they were read (for the report), and the big keys met.
pub(crate) fn size_moved_slots(
    topo: &LiveCluster,
    plan: &[RebalanceStep<String>],
    counts: &[u64],
    opts: &Options,
    holds: &Holds,
    user: &str,
) -> Result<(Sizes, Option<String>, Vec<BigKey>)> {
    let mut by_master: BTreeMap<usize, Vec<u16>> = BTreeMap::new();
    for m in plan {
        for &slot in &m.slots {
            if let Some(Some(i)) = topo.owner.get(usize::from(slot)) {
                by_master.entry(*i).or_default().push(slot);
            }
        }
    }
    let results: Vec<Result<Sizer>> = std::thread::scope(|scope| {
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
    let (mut all, mut unreadable, mut ways) = (Sizes::new(), Unreadable::default(), Vec::new());
    let mut big_keys = Vec::new();
    for r in results {
        let sizer = r?;
        all.extend(sizer.sizes);
        unreadable.add(sizer.unreadable);
        ways.push(sizer.by_script);
        big_keys.extend(sizer.big_keys);
    }
    unreadable.check(user)?;
    Ok((all, sizes_note(&ways, opts.sizes_by), big_keys))
}

/// The most keys `CLUSTER GETKEYSINSLOT` is asked for at once (it has no cursor, and holds the
/// master for about 4 ms per 16384 keys); bigger slots are found by `SCAN`.
pub(crate) const GETKEYS_MAX: u64 = 16384;

/// [`size_moved_slots`] on one master: its sizer, finished.
fn size_master<'a>(
    m: &'a Master,
    slots: &[u16],
    counts: &[u64],
    opts: &Options,
    holds: &'a Holds,
) -> Result<Sizer<'a>> {
    let mut con = m.link.connect()?;
    let mut sizer = Sizer::new(m, opts, holds);
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
        let mut getkeys = redis::cmd("CLUSTER");
        getkeys.arg("GETKEYSINSLOT").arg(slot).arg(count);
        let names: Vec<Vec<u8>> = holds.time(&m.address, || con.query(&getkeys))?;
        for part in names.chunks(1000) {
            sizer.measure(&mut con, part, false)?;
        }
    }
    if !big.is_empty() {
        big.sort_unstable();
        scan_master(m, &mut con, holds, |con, names| {
            // Every name SCAN returned was read: counted and rate-limited as such.
            holds.read(&m.address, names.len() as u64);
            sizer.limiter.take(names.len() as u64);
            let kept: Vec<Vec<u8>> = names
                .into_iter()
                .filter(|n| big.binary_search(&ringslot_engine::key_slot(n)).is_ok())
                .collect();
            sizer.measure(con, &kept, true)
        })?;
    }
    sizer.finish(&mut con)?;
    Ok(sizer)
}
