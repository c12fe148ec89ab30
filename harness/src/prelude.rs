//! What the integration tests share: commands that must succeed or fail, the reply decoders of
//! [`crate::reply`] that panic with the reply in the message, snapshots of a ring, a seeded
//! PRNG, a server shared by the tests of one file, and the known-answer files.

pub use crate::client::{call as call_any, cmd, error_text, words};
pub use crate::server::{free_port, Server};
pub use known_answers::{from_hex, Rng};
use redis::{Connection, Value};
use std::collections::BTreeMap;

/// The engine's reader of known-answer files and its PRNG, shared with its own tests.
#[path = "../../engine/tests/common/known_answers.rs"]
mod known_answers;
use std::time::{Duration, Instant};

fn must<T>(r: crate::reply::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// Runs binary arguments; an error reply comes back as its full text (`ERR syntax error`).
pub fn call(con: &mut Connection, args: &[&[u8]]) -> Result<Value, String> {
    crate::client::call(con, args)
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
    must(crate::reply::int(v))
}

/// A double reply (RESP3 double or RESP2 bulk string).
pub fn float(v: &Value) -> f64 {
    must(crate::reply::float(v))
}

/// A string reply's bytes.
pub fn bytes(v: &Value) -> Vec<u8> {
    must(crate::reply::bytes(v))
}

/// A string reply as text.
pub fn text(v: &Value) -> String {
    must(crate::reply::text(v))
}

/// A string or nil.
pub fn opt_bytes(v: &Value) -> Option<Vec<u8>> {
    must(crate::reply::opt_bytes(v))
}

/// An array reply's elements.
pub fn array(v: &Value) -> Vec<Value> {
    must(crate::reply::array(v)).to_vec()
}

/// The fields of a map reply in reply order, and whether it was a RESP3 map.
pub fn fields(v: &Value) -> (Vec<(String, Value)>, bool) {
    let (fields, is_map) = must(crate::reply::fields(v));
    (
        fields.into_iter().map(|(k, v)| (k, v.clone())).collect(),
        is_map,
    )
}

/// The field `name` of a map reply.
pub fn field<'a>(v: &'a Value, name: &str) -> &'a Value {
    must(crate::reply::field(v, name))
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

/// The integer field `ringslot_<name>` of `INFO ringslot` (`background_runs`, ...).
pub fn ringslot_info(con: &mut Connection, name: &str) -> i64 {
    let info = text(&q(con, "INFO ringslot"));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("ringslot_{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO ringslot:\n{info}"))
}

/// How long a soak test runs: `short` rounds in `make test`, `long` when `RINGSLOT_SOAK` is
/// set (`make soak`).
pub fn soak(short: usize, long: usize) -> usize {
    if std::env::var_os("RINGSLOT_SOAK").is_some() {
        long
    } else {
        short
    }
}

/// Waits (at most 20 s) until the server is done with any AOF rewrite.
pub fn wait_aof_rewrite(con: &mut Connection) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = text(&q(con, "INFO persistence"));
        let busy = info.lines().any(|l| {
            l.starts_with("aof_rewrite_in_progress:1") || l.starts_with("aof_rewrite_scheduled:1")
        });
        if !busy {
            return;
        }
        assert!(Instant::now() < deadline, "AOF rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server shared by the tests of one file that run at the same time: started by the first,
/// stopped when the last one still holding it finishes (so no server outlives the tests).
pub fn shared_server() -> std::sync::Arc<Server> {
    use std::sync::{Arc, Mutex, Weak};
    static SHARED: Mutex<Weak<Server>> = Mutex::new(Weak::new());
    let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(server) = slot.upgrade() {
        return server;
    }
    let server = Arc::new(Server::start());
    *slot = Arc::downgrade(&server);
    server
}

/// The rows of a known-answer file under `engine/tests/vectors/` (verbatim copies of the
/// project's shared vectors, each naming its source in its comments), comment lines and
/// header dropped, each row split on tabs.
pub fn vectors(name: &str) -> Vec<Vec<String>> {
    known_answers::rows(
        &crate::server::workspace_root()
            .join("engine/tests/vectors")
            .join(name),
    )
}

/// Makes `replica` a replica of `master` (`REPLICAOF`) and waits (at most 20 s) until its link
/// is up; returns a connection to the replica.
pub fn connect_replica(master: &Server, replica: &Server) -> Connection {
    let mut con = replica.client();
    q(&mut con, &format!("REPLICAOF 127.0.0.1 {}", master.port));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = text(&q(&mut con, "INFO replication"));
        if info.contains("master_link_status:up") {
            return con;
        }
        assert!(Instant::now() < deadline, "replica did not sync:\n{info}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
