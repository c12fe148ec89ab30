//! Helpers shared by the `tests/module_*.rs` integration tests: sending RING.* commands with
//! binary arguments, reading RESP2/RESP3 replies, and snapshots of a ring for before/after
//! comparisons. (The server itself comes from `tests/support`.)
#![allow(dead_code)]

use redis::{Connection, Value};
use std::collections::BTreeMap;

/// A command from raw arguments (binary-safe).
pub fn cmd(args: &[&[u8]]) -> redis::Cmd {
    let (name, rest) = args.split_first().expect("a command name");
    let mut c = redis::cmd(std::str::from_utf8(name).expect("ASCII command name"));
    for a in rest {
        c.arg(*a);
    }
    c
}

/// Runs `args`; an error reply comes back as its full text (`ERR syntax error`).
pub fn call(con: &mut Connection, args: &[&[u8]]) -> Result<Value, String> {
    cmd(args)
        .query::<Value>(con)
        .map_err(|e| match (e.code(), e.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            (Some(code), None) => code.to_string(),
            _ => e.to_string(),
        })
}

/// Splits a command line on spaces (for arguments without spaces).
pub fn words(line: &str) -> Vec<&[u8]> {
    line.split(' ')
        .filter(|w| !w.is_empty())
        .map(str::as_bytes)
        .collect()
}

/// Runs a space-separated command line that must succeed.
pub fn q(con: &mut Connection, line: &str) -> Value {
    call(con, &words(line)).unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// Runs a space-separated command line that must fail; returns the error text.
pub fn e(con: &mut Connection, line: &str) -> String {
    match call(con, &words(line)) {
        Ok(v) => panic!("{line}: expected an error, got {v:?}"),
        Err(text) => text,
    }
}

/// Runs binary arguments that must fail; returns the error text.
pub fn e_raw(con: &mut Connection, args: &[&[u8]]) -> String {
    match call(con, args) {
        Ok(v) => panic!("{args:?}: expected an error, got {v:?}"),
        Err(text) => text,
    }
}

/// Asserts the server still answers `PING`.
pub fn assert_pong(con: &mut Connection) {
    assert_eq!(q(con, "PING"), Value::SimpleString("PONG".into()));
}

/// An integer reply.
pub fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("expected an integer, got {other:?}"),
    }
}

/// A float reply: a RESP3 double or a RESP2 bulk string holding one.
pub fn float(v: &Value) -> f64 {
    match v {
        Value::Double(f) => *f,
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("expected a float, got {b:?}")),
        other => panic!("expected a float, got {other:?}"),
    }
}

/// A bulk-string reply's bytes.
pub fn bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        Value::SimpleString(s) => s.as_bytes().to_vec(),
        Value::VerbatimString { text, .. } => text.as_bytes().to_vec(),
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

/// A bulk-string reply as text.
pub fn text(v: &Value) -> String {
    String::from_utf8(bytes(v)).expect("UTF-8")
}

/// A bulk string or nil.
pub fn opt_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::Nil => None,
        other => Some(bytes(other)),
    }
}

/// An array reply's elements.
pub fn array(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        other => panic!("expected an array, got {other:?}"),
    }
}

/// The fields of a map reply, in reply order: a RESP3 map, or a RESP2 flat array of
/// field/value pairs. Also returns whether it was a real RESP3 map.
pub fn fields(v: &Value) -> (Vec<(String, Value)>, bool) {
    match v {
        Value::Map(pairs) => (
            pairs.iter().map(|(k, v)| (text(k), v.clone())).collect(),
            true,
        ),
        Value::Array(flat) => {
            assert!(flat.len() % 2 == 0, "odd flat map: {flat:?}");
            (
                flat.chunks(2)
                    .map(|p| (text(&p[0]), p[1].clone()))
                    .collect(),
                false,
            )
        }
        other => panic!("expected a map, got {other:?}"),
    }
}

/// A map reply as a field -> value map.
pub fn map(v: &Value) -> BTreeMap<String, Value> {
    fields(v).0.into_iter().collect()
}

/// The field names of a map reply, in the order the reply gives them.
pub fn names(v: &Value) -> Vec<String> {
    fields(v).0.into_iter().map(|(name, _)| name).collect()
}

/// `RING.NODES` and `RING.SLOTS` of `key`, for comparing a ring before and after a call.
pub fn snapshot(con: &mut Connection, key: &[u8]) -> (Value, Value) {
    (
        call(con, &[b"RING.NODES", key]).expect("RING.NODES"),
        call(con, &[b"RING.SLOTS", key]).expect("RING.SLOTS"),
    )
}

/// `RING.SLOTS` as `(start, end, node)` triples.
pub fn slot_ranges(con: &mut Connection, key: &[u8]) -> Vec<(i64, i64, Vec<u8>)> {
    array(&call(con, &[b"RING.SLOTS", key]).expect("RING.SLOTS"))
        .iter()
        .map(|r| {
            let r = array(r);
            assert_eq!(r.len(), 3, "range {r:?}");
            (int(&r[0]), int(&r[1]), bytes(&r[2]))
        })
        .collect()
}

/// The owner of `slot` according to `RING.SLOTS` ranges.
pub fn owner_in(ranges: &[(i64, i64, Vec<u8>)], slot: i64) -> Option<Vec<u8>> {
    ranges
        .iter()
        .find(|(s, e, _)| *s <= slot && slot <= *e)
        .map(|(_, _, n)| n.clone())
}

/// `RING.NODES` as `(node, weight, points, slots)` in reply order.
pub fn node_rows(con: &mut Connection, key: &[u8]) -> Vec<(Vec<u8>, i64, i64, i64)> {
    array(&call(con, &[b"RING.NODES", key]).expect("RING.NODES"))
        .iter()
        .map(|n| {
            let m = map(n);
            (
                bytes(&m["node"]),
                int(&m["weight"]),
                int(&m["points"]),
                int(&m["slots"]),
            )
        })
        .collect()
}

/// A small deterministic PRNG (xorshift64*), so failures replay.
pub struct Rng(u64);

impl Rng {
    /// Seeded generator (seed 0 is replaced).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// One element of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Waits until the server is done with any AOF rewrite.
pub fn wait_aof_rewrite(con: &mut Connection) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let info = bytes(&q(con, "INFO persistence"));
        let info = String::from_utf8_lossy(&info);
        let busy = info.lines().any(|l| {
            l.starts_with("aof_rewrite_in_progress:1") || l.starts_with("aof_rewrite_scheduled:1")
        });
        if !busy {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "AOF rewrite did not finish"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A server shared by the tests of one file that run at the same time: started by the first,
/// stopped when the last one still holding it finishes (so no server outlives the tests).
pub fn shared_server() -> std::sync::Arc<crate::support::Server> {
    use std::sync::{Arc, Mutex, Weak};
    static SHARED: Mutex<Weak<crate::support::Server>> = Mutex::new(Weak::new());
    let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(server) = slot.upgrade() {
        return server;
    }
    let server = Arc::new(crate::support::Server::start());
    *slot = Arc::downgrade(&server);
    server
}

/// `RING.INFO` without `memory_bytes` (an allocation figure, which a reload or a replica
/// may round differently): the fields that must survive persistence and replication.
pub fn info_state(con: &mut Connection, key: &[u8]) -> Vec<(String, Value)> {
    let reply = call(con, &[b"RING.INFO", key]).expect("RING.INFO");
    if reply == Value::Nil {
        return Vec::new();
    }
    fields(&reply)
        .0
        .into_iter()
        .filter(|(k, _)| k != "memory_bytes")
        .collect()
}
