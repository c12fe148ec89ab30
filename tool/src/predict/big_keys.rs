//! Big keys: found while the moving keys are sized, and never serialized to be measured. A key
//! is big when `MEMORY USAGE key SAMPLES 5` (O(1) for a string, 5 elements of a collection)
//! says it takes [`BIG_KEY_MEMORY`] or more: its `DUMP` alone would ask its master for about 10
//! ms of work, and the design rule of the tool's reads is that no read-only command asks a
//! master for more than that because of one key. It is then described by commands that do no
//! work on its elements: `TYPE`, `OBJECT ENCODING`, and its O(1) length (`STRLEN`, `HLEN`,
//! `LLEN`, `SCARD`, `ZCARD`, `XLEN`).
//!
//! What moving it holds its masters for is estimated from the keys of the same type and
//! encoding measured on its master: its `DUMP` bytes are its length times their `DUMP` bytes
//! per element (per byte of memory where they have no length), and serializing them takes
//! the master's own rate, timed on the largest key of its kind measured (a `DUMP` of at most
//! about 10 ms: measured keys are under the bound). Where no key of its kind was measured, its
//! `DUMP` bytes are taken as its memory and its rate as the slower of [`DEFAULT_SECONDS_PER_BYTE`]
//! and the rate timed on the largest key of any kind: an upper bound (a hash of 400000 fields
//! serialized 0.5 bytes a byte of memory in `make bench-big-keys`), not a guess that could pass
//! the bound unseen. `MIGRATE` holds the source [`MIGRATE_OVER_DUMP`] times that (it
//! serializes, sends, and waits for the target's `RESTORE`), and the target's `RESTORE`
//! [`RESTORE_OVER_MIGRATE`] times the source's hold. Measured by `make bench-big-keys` on
//! Redis 7.0.15, 2 vCPUs: a hash of 400000 fields (15.8 MB of `DUMP`) took 316 ms to
//! serialize, its `MIGRATE` held the source 929 ms and its `RESTORE-ASKING` the target 303 ms;
//! a string of 48 MiB: 588, 790 and 86 ms (the trial: 811 ms of `DUMP` for a 45 MB
//! hash, 794-920 ms of `MIGRATE`, 266-287 ms of `RESTORE`).

use crate::cluster::connection::NodeConnection;
use crate::cluster::error::NodeError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A key's kind, as the sizes' script reads it: `TYPE`, `OBJECT ENCODING`, and its O(1)
/// length (elements; bytes for a string).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct KeyKind {
    pub kind: String,
    pub encoding: String,
    pub length: u64,
}

/// The memory (`MEMORY USAGE key SAMPLES 5`, bytes) from which a key is big: 512 KiB, about 10
/// ms of `DUMP` at the trial's 18 ns a byte.
pub const BIG_KEY_MEMORY: u64 = 512 * 1024;

/// Seconds to serialize a byte of `DUMP` where the cluster's own rate could not be timed: the
/// trial's (811 ms for 45 MB).
pub const DEFAULT_SECONDS_PER_BYTE: f64 = 18e-9;

/// A `MIGRATE`'s hold of its source over the `DUMP` of the same key: it serializes the key,
/// sends it, and waits for the target to restore it (`make bench-big-keys`, Redis 7.0.15: 929
/// ms against 316 for a hash of 400000 fields, 790 against 588 for a string of 48 MiB; the
/// larger ratio is taken).
pub const MIGRATE_OVER_DUMP: f64 = 3.0;

/// The target's `RESTORE` over the source's `MIGRATE` (the same runs: 303 ms against 929 for
/// the hash, 86 against 790 for the string; the trial: 266-287 against 794-920).
pub const RESTORE_OVER_MIGRATE: f64 = 0.33;

/// The smallest `DUMP` (bytes) whose time is taken as the master's rate: a smaller one is
/// mostly the round trip.
const TIMED_DUMP_MIN: f64 = 64.0 * 1024.0;

/// One big key, as `predict` describes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BigKey {
    /// The key (invalid UTF-8 shown with replacement characters).
    pub key: String,
    /// Its hash slot, and the master that holds it.
    pub slot: u16,
    pub master: String,
    /// `TYPE` and `OBJECT ENCODING`.
    #[serde(rename = "type")]
    pub kind: String,
    pub encoding: String,
    /// Its elements (`HLEN`, `LLEN`, `SCARD`, `ZCARD`, `XLEN`), or its bytes for a string
    /// (`STRLEN`); 0 for a type without an O(1) length (a module's).
    pub length: u64,
    /// `MEMORY USAGE key SAMPLES 5`, bytes. The 5 elements are the first the key's iterator
    /// meets, not a random sample: a collection whose first elements are smaller (or larger)
    /// than the rest is misjudged in proportion.
    pub memory: f64,
    /// Its `DUMP` bytes, estimated (see the module docs).
    pub dump: f64,
    /// Whether its estimates come from keys of its type and encoding measured on its master,
    /// its holds timed on one of them (else its `DUMP` bytes are its memory, an upper bound,
    /// or its holds are timed on a key of another kind and no faster than 18 ns a byte).
    pub of_its_kind: bool,
    /// How long its `MIGRATE` would hold the source, and its `RESTORE` the target, seconds.
    pub hold_source: f64,
    pub hold_target: f64,
    /// The plans that move it ("redis-cli", "by bytes", ...).
    pub moved_by: Vec<String>,
}

/// A big key a sizer met: its name, slot, `MEMORY USAGE ... SAMPLES 5`, and its kind where the
/// sizes' script read it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Seen {
    pub name: Vec<u8>,
    pub slot: u16,
    pub memory: f64,
    pub kind: Option<KeyKind>,
}

/// What the keys measured on one master weigh, per type and encoding and in all: a big key's
/// `DUMP` bytes are estimated from the keys of its kind (per element where they have elements,
/// else per byte of memory), and its hold from the largest of them, timed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Kinds {
    by_kind: BTreeMap<(String, String), Weighed>,
    all: Weighed,
}

/// Keys measured: how many, their elements, `DUMP` bytes and memory, and the largest.
#[derive(Debug, Clone, Default)]
struct Weighed {
    keys: u64,
    elements: u64,
    dump: f64,
    memory: f64,
    largest: Option<(Vec<u8>, f64)>,
}

impl Weighed {
    fn add(&mut self, name: &[u8], dump: f64, memory: f64, elements: u64) {
        self.keys += 1;
        self.elements += elements;
        self.dump += dump;
        self.memory += memory;
        if self.largest.as_ref().is_none_or(|(_, d)| dump > *d) {
            self.largest = Some((name.to_vec(), dump));
        }
    }
}

impl Kinds {
    /// Notes a key measured: its `DUMP` bytes, memory, and kind where read.
    pub(crate) fn note(&mut self, name: &[u8], dump: f64, memory: f64, kind: Option<&KeyKind>) {
        self.all.add(name, dump, memory, 0);
        if let Some(k) = kind {
            self.by_kind
                .entry((k.kind.clone(), k.encoding.clone()))
                .or_default()
                .add(name, dump, memory, k.length);
        }
    }

    /// The estimated `DUMP` bytes of a key of `kind` and `memory`, the key whose timed `DUMP`
    /// gives its rate, and whether that key is of its kind (see the module docs).
    fn estimate(&self, kind: &KeyKind, memory: f64) -> (f64, Option<&(Vec<u8>, f64)>, bool) {
        let same = self
            .by_kind
            .get(&(kind.kind.clone(), kind.encoding.clone()))
            .filter(|w| w.keys > 0 && w.dump > 0.0);
        match same {
            Some(w) => {
                let dump = if w.elements > 0 && kind.length > 0 {
                    kind.length as f64 * w.dump / w.elements as f64
                } else if w.memory > 0.0 {
                    memory * w.dump / w.memory
                } else {
                    memory
                };
                // Timed on the largest key of its kind where that is big enough to time; else
                // on the largest of any kind, whose rate is then no more than a floor's worth
                // (the caller takes the default rate where it is higher).
                match w.largest.as_ref().filter(|(_, d)| *d >= TIMED_DUMP_MIN) {
                    Some(timed) => (dump, Some(timed), true),
                    None => (dump, self.all.largest.as_ref(), false),
                }
            }
            None => (memory, self.all.largest.as_ref(), false),
        }
    }
}

/// Describes the big keys a sizer met on the master at `con` (`seen`), from what the keys
/// measured there weigh (`kinds`): their kind (read here where the sizes' script did not),
/// their estimated `DUMP` bytes, and their holds at the master's own serializing rate, timed on
/// the largest key measured of the same kind (or of any). A key gone meanwhile is left out.
/// Error: the node does not answer, or refuses `TYPE` or `OBJECT`.
pub(crate) fn describe(
    con: &mut NodeConnection,
    seen: Vec<Seen>,
    kinds: &Kinds,
) -> Result<Vec<BigKey>, NodeError> {
    let mut rates: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
    let mut keys = Vec::new();
    for s in seen {
        let kind = match s.kind {
            Some(k) => k,
            None => match kind_of(con, &s.name)? {
                Some(k) => k,
                None => continue,
            },
        };
        let (dump, timed, of_its_kind) = kinds.estimate(&kind, s.memory);
        let timed_rate = match timed {
            Some(r) => match rates.get(&r.0) {
                Some(&rate) => rate,
                None => {
                    let rate = seconds_per_byte(con, Some(r))?;
                    rates.insert(r.0.clone(), rate);
                    rate
                }
            },
            None => DEFAULT_SECONDS_PER_BYTE,
        };
        let rate = if of_its_kind {
            timed_rate
        } else {
            timed_rate.max(DEFAULT_SECONDS_PER_BYTE)
        };
        let hold_source = dump * rate * MIGRATE_OVER_DUMP;
        keys.push(BigKey {
            key: String::from_utf8_lossy(&s.name).into_owned(),
            slot: s.slot,
            master: con.address().to_string(),
            kind: kind.kind,
            encoding: kind.encoding,
            length: kind.length,
            memory: s.memory,
            dump,
            of_its_kind,
            hold_source,
            hold_target: hold_source * RESTORE_OVER_MIGRATE,
            moved_by: Vec::new(),
        });
    }
    Ok(keys)
}

/// A key's `TYPE`, `OBJECT ENCODING` and O(1) length (`None`: gone).
pub(crate) fn kind_of(con: &mut NodeConnection, name: &[u8]) -> Result<Option<KeyKind>, NodeError> {
    let mut pipe = redis::pipe();
    pipe.cmd("TYPE").arg(name);
    pipe.cmd("OBJECT").arg("ENCODING").arg(name);
    let (kind, encoding): (redis::Value, redis::Value) =
        con.pipeline(&pipe, "TYPE, OBJECT ENCODING")?;
    let text = |v: &redis::Value| crate::reply::text(v).unwrap_or_default();
    let kind = text(&kind);
    if kind == "none" || kind.is_empty() {
        return Ok(None);
    }
    let length = match length_command(&kind) {
        Some(command) => {
            let reply = con.run(&[command.as_bytes(), name])?;
            crate::reply::int(&reply).map_or(0, |n| u64::try_from(n).unwrap_or(0))
        }
        None => 0,
    };
    Ok(Some(KeyKind {
        kind,
        encoding: text(&encoding),
        length,
    }))
}

/// The O(1) length command of a `TYPE`.
fn length_command(kind: &str) -> Option<&'static str> {
    match kind {
        "string" => Some("STRLEN"),
        "hash" => Some("HLEN"),
        "list" => Some("LLEN"),
        "set" => Some("SCARD"),
        "zset" => Some("ZCARD"),
        "stream" => Some("XLEN"),
        _ => None,
    }
}

/// Seconds the master at `con` takes to serialize a byte of `DUMP`: the best of three `DUMP`s
/// of `reference` less the best of three `PING`s, over its bytes, where it is
/// [`TIMED_DUMP_MIN`] or more (each `DUMP` at most about 10 ms: the reference was measured
/// under the big keys' bound); else [`DEFAULT_SECONDS_PER_BYTE`].
fn seconds_per_byte(
    con: &mut NodeConnection,
    reference: Option<&(Vec<u8>, f64)>,
) -> Result<f64, NodeError> {
    let Some((name, bytes)) = reference.filter(|(_, b)| *b >= TIMED_DUMP_MIN) else {
        return Ok(DEFAULT_SECONDS_PER_BYTE);
    };
    fn best(args: &[&[u8]], con: &mut NodeConnection) -> Result<Duration, NodeError> {
        let mut least = Duration::MAX;
        for _ in 0..3 {
            let started = Instant::now();
            con.run(args)?;
            least = least.min(started.elapsed());
        }
        Ok(least)
    }
    let dump = best(&[b"DUMP", name], con)?;
    let ping = best(&[b"PING"], con)?;
    let rate = dump.saturating_sub(ping).as_secs_f64() / bytes;
    Ok(if rate > 0.0 {
        rate
    } else {
        DEFAULT_SECONDS_PER_BYTE
    })
}
