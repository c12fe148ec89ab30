//! One function per RING.* command: parse the arguments, call the engine, build the reply.
//!
//! Every handler runs inside [`guarded`], so a panic becomes `ERR internal error` (and a
//! log line) instead of aborting redis-server. Writes that change a ring are replicated
//! verbatim (which also counts them as dirty for `SAVE`) and fire a keyspace notification of
//! class `d` (module) named `ring.create`, `ring.add`, `ring.del` or `ring.assign`. A
//! `RING.ADD` that creates its ring is replicated after a `RING.CREATE key VNODES n` naming
//! the VNODES it used, so that a replica or an AOF replay with another
//! `ringslot.default-vnodes` builds the same ring (Redis wraps the two in MULTI/EXEC).

use super::args::{self, ArgError, Members};
use super::reply::Reply;
use super::ringtype::RING_TYPE;
use super::{config_u64, DEFAULT_VNODES, MAX_POINTS, MAX_SAMPLE};
use crate::engine::{EngineError, Flavour, Topology};
use redis_module::key::{RedisKey, RedisKeyWritable};
use redis_module::{
    Context, ContextFlags, NotifyEvent, RedisError, RedisResult, RedisString, RedisValue,
};
use std::panic::{catch_unwind, AssertUnwindSafe};

type Handler = fn(&Context, &[RedisString]) -> RedisResult;

/// Runs `f`, returning the message of a panic instead of unwinding into Redis.
pub(crate) fn run_caught<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    })
}

/// Runs `handler`, turning a panic into `ERR internal error` and a warning in the log.
fn guarded(ctx: &Context, name: &str, args: Vec<RedisString>, handler: Handler) -> RedisResult {
    run_caught(|| handler(ctx, &args)).unwrap_or_else(|why| {
        ctx.log_warning(&format!(
            "ringslot: {name} failed with an internal error: {why}"
        ));
        Err(RedisError::Str(INTERNAL_ERROR))
    })
}

/// The reply to a command that panicked.
pub const INTERNAL_ERROR: &str = "ERR internal error";

pub(crate) fn arg_error(e: ArgError) -> RedisError {
    RedisError::String(e.to_string())
}

fn engine_error(e: EngineError) -> RedisError {
    RedisError::String(format!("ERR {e}"))
}

/// The key and the arguments after it, as bytes; `WrongArity` with fewer than `min` in all
/// (Redis checks arity first; this keeps the handler safe on its own).
fn split(args: &[RedisString], min: usize) -> Result<(&RedisString, Vec<&[u8]>), RedisError> {
    match args {
        [_, key, rest @ ..] if args.len() >= min => {
            Ok((key, rest.iter().map(RedisString::as_slice).collect()))
        }
        _ => Err(RedisError::WrongArity),
    }
}

/// The ring at a read-only key: `None` when missing, `WRONGTYPE` for another type.
fn read(key: &RedisKey) -> Result<Option<&Topology>, RedisError> {
    key.get_value::<Topology>(&RING_TYPE)
        .map_err(|_| RedisError::WrongType)
}

/// The ring at a writable key: `None` when missing, `WRONGTYPE` for another type.
fn write(key: &RedisKeyWritable) -> Result<Option<&mut Topology>, RedisError> {
    key.get_value::<Topology>(&RING_TYPE)
        .map_err(|_| RedisError::WrongType)
}

/// `ringslot.max-points`, except for commands replayed from the AOF or sent by a master,
/// which were accepted once already and must rebuild the same ring whatever this server's
/// setting.
fn max_points(ctx: &Context) -> u64 {
    if ctx
        .get_flags()
        .intersects(ContextFlags::REPLICATED | ContextFlags::LOADING)
    {
        u64::MAX
    } else {
        config_u64(&MAX_POINTS)
    }
}

/// Replicates the command as called, counts it dirty and notifies keyspace listeners.
fn propagate(ctx: &Context, event: &str, key: &RedisString) {
    ctx.replicate_verbatim();
    ctx.notify_keyspace_event(NotifyEvent::MODULE, event, key);
}

fn bulk(bytes: &[u8]) -> RedisValue {
    RedisValue::StringBuffer(bytes.to_vec())
}

fn count(n: impl TryInto<i64>) -> RedisValue {
    RedisValue::Integer(n.try_into().unwrap_or(i64::MAX))
}

/// A RESP3 map (a flat array under RESP2), fields in the order given.
fn map(entries: Vec<(&'static str, Reply)>) -> Reply {
    Reply::Map(entries)
}

/// Sends `reply` now (it is complete) and tells the crate's wrapper that nothing is left to
/// send.
fn send(ctx: &Context, reply: Reply) -> RedisResult {
    reply.send(ctx);
    Ok(RedisValue::NoReply)
}

/// `RING.CREATE key [COMPAT native|ketama|groupcache] [VNODES n] [HASHTAG]` -> `OK`.
pub fn ring_create(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, "RING.CREATE", args, create)
}

fn create(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key_name, rest) = split(args, 2)?;
    let opts = args::parse_create(&rest).map_err(arg_error)?;
    let key = ctx.open_key_writable(key_name);
    if write(&key)?.is_some() || !key.is_empty() {
        return Err(RedisError::Str("ERR key already exists"));
    }
    let topo = Topology::new(opts.flavour, opts.vnodes, opts.hashtag).map_err(engine_error)?;
    key.set_value(&RING_TYPE, topo)?;
    propagate(ctx, "ring.create", key_name);
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// `RING.ADD key [WEIGHT w] node [node ...]` -> nodes newly added. Creates a native ring
/// with `ringslot.default-vnodes` when the key is missing.
pub fn ring_add(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, "RING.ADD", args, add)
}

fn add(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key_name, rest) = split(args, 3)?;
    let parsed = args::parse_add(&rest).map_err(arg_error)?;
    let limit = max_points(ctx);
    let key = ctx.open_key_writable(key_name);
    let (added, changed, created_vnodes) = match write(&key)? {
        Some(topo) => {
            let (added, changed) = topo
                .add(&parsed.nodes, parsed.weight, limit)
                .map_err(engine_error)?;
            (added, changed, None)
        }
        None => {
            let vnodes = DEFAULT_VNODES.load(std::sync::atomic::Ordering::Relaxed);
            let mut topo =
                Topology::new(Flavour::Native, Some(vnodes), false).map_err(engine_error)?;
            let (added, changed) = topo
                .add(&parsed.nodes, parsed.weight, limit)
                .map_err(engine_error)?;
            key.set_value(&RING_TYPE, topo)?;
            (added, changed, Some(vnodes))
        }
    };
    if let Some(vnodes) = created_vnodes {
        // The replica's or the AOF's own default-vnodes may differ: say what this one used.
        let vnodes = vnodes.to_string();
        let create: [&[u8]; 3] = [key_name.as_slice(), b"VNODES", vnodes.as_bytes()];
        ctx.replicate("RING.CREATE", &create[..]);
    }
    if changed {
        propagate(ctx, "ring.add", key_name);
    }
    Ok(count(added))
}

/// `RING.DEL key node [node ...]` -> nodes removed.
pub fn ring_del(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, "RING.DEL", args, del)
}

fn del(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key_name, nodes) = split(args, 3)?;
    let key = ctx.open_key_writable(key_name);
    let removed = match write(&key)? {
        Some(topo) => topo.del(&nodes),
        None => 0,
    };
    if removed > 0 {
        propagate(ctx, "ring.del", key_name);
    }
    Ok(count(removed))
}

/// `RING.ASSIGN key start end node` -> `OK`.
pub fn ring_assign(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, "RING.ASSIGN", args, assign)
}

fn assign(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key_name, rest) = split(args, 5)?;
    let [start, end, node] = rest.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let start = args::integer(start).map_err(arg_error)?;
    let end = args::integer(end).map_err(arg_error)?;
    let key = ctx.open_key_writable(key_name);
    match write(&key)? {
        Some(topo) => {
            let before = topo.slot_table().ranges();
            topo.assign(start, end, node).map_err(engine_error)?;
            if topo.slot_table().ranges() != before {
                propagate(ctx, "ring.assign", key_name);
            }
        }
        None => {
            // No ring, no node: report the range or the node as an existing empty ring would.
            let mut empty = Topology::new(Flavour::Native, None, false).map_err(engine_error)?;
            empty.assign(start, end, node).map_err(engine_error)?;
        }
    }
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// `RING.SLOTS key` -> `[[start, end, node], ...]` in slot order.
pub fn ring_slots(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, "RING.SLOTS", args, slots)
}

fn slots(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key_name, rest) = split(args, 2)?;
    if !rest.is_empty() {
        return Err(RedisError::WrongArity);
    }
    let key = ctx.open_key(key_name);
    let ranges = read(&key)?.map(Topology::slot_ranges).unwrap_or_default();
    Ok(RedisValue::Array(
        ranges
            .into_iter()
            .map(|(start, end, node)| RedisValue::Array(vec![count(start), count(end), bulk(node)]))
            .collect(),
    ))
}

/// `RING.NODES key` -> one map per node, in insertion order.
pub fn ring_nodes(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, "RING.NODES", args, nodes)
}

fn nodes(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key_name, rest) = split(args, 2)?;
    if !rest.is_empty() {
        return Err(RedisError::WrongArity);
    }
    let key = ctx.open_key(key_name);
    let stats = read(&key)?.map(Topology::node_stats).unwrap_or_default();
    let reply = Reply::Array(
        stats
            .into_iter()
            .map(|n| {
                map(vec![
                    ("node", bulk(n.name).into()),
                    ("weight", count(n.weight).into()),
                    ("points", count(n.points).into()),
                    ("ring_share", RedisValue::Float(n.ring_share).into()),
                    ("slots", count(n.slots).into()),
                    ("slot_share", RedisValue::Float(n.slot_share).into()),
                ])
            })
            .collect(),
    );
    send(ctx, reply)
}

/// `RING.INFO key` -> a map of the ring's configuration and balance; nil when missing.
pub fn ring_info(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, "RING.INFO", args, info)
}

fn info(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key_name, rest) = split(args, 2)?;
    if !rest.is_empty() {
        return Err(RedisError::WrongArity);
    }
    let key = ctx.open_key(key_name);
    let Some(topo) = read(&key)? else {
        return Ok(RedisValue::Null);
    };
    let info = topo.info();
    let reply = map(vec![
        (
            "compat",
            RedisValue::BulkString(info.flavour.name().to_string()).into(),
        ),
        ("vnodes", count(info.vnodes).into()),
        ("hashtag", RedisValue::Bool(info.hashtag).into()),
        ("nodes", count(info.nodes).into()),
        ("points", count(info.points).into()),
        (
            "ring_peak_to_mean",
            RedisValue::Float(info.ring_peak_to_mean).into(),
        ),
        (
            "slot_peak_to_mean",
            RedisValue::Float(info.slot_peak_to_mean).into(),
        ),
        ("memory_bytes", count(info.memory_bytes).into()),
    ]);
    send(ctx, reply)
}

/// `RING.MOVES key ADD|DEL node [WEIGHT w] [SAMPLE n | KEYS pattern]` -> the what-if map.
/// Changes nothing. A missing key is evaluated as the empty ring `RING.ADD` would create.
pub fn ring_moves(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, "RING.MOVES", args, moves)
}

/// The keys of the current database matching the glob `pattern`, found with `SCAN cursor
/// MATCH pattern COUNT 1000` (so that `KEYS`' full list is never built): at most `limit` of
/// them, else `TooManyMatches` as soon as one more turns up. No other client runs and the
/// keyspace is not resized within one command, so SCAN returns each key once. As on any read,
/// expired keys it meets are deleted (and the deletion replicated); `KEYS` on Redis 7.0 only
/// skipped them.
fn matching_keys(ctx: &Context, pattern: &[u8], limit: u64) -> Result<Vec<Vec<u8>>, RedisError> {
    let unexpected = || RedisError::Str("ERR internal error: unexpected SCAN reply");
    let mut keys = Vec::new();
    let mut cursor = b"0".to_vec();
    loop {
        let args: [&[u8]; 5] = [&cursor, b"MATCH", pattern, b"COUNT", b"1000"];
        let RedisValue::Array(reply) = ctx.call("SCAN", &args[..])? else {
            return Err(unexpected());
        };
        let mut reply = reply.into_iter();
        let (Some(next), Some(RedisValue::Array(batch))) = (reply.next(), reply.next()) else {
            return Err(unexpected());
        };
        for item in batch {
            keys.push(match item {
                RedisValue::SimpleString(s) | RedisValue::BulkString(s) => s.into_bytes(),
                RedisValue::StringBuffer(b) => b,
                _ => return Err(unexpected()),
            });
        }
        if keys.len() as u64 > limit {
            return Err(engine_error(EngineError::TooManyMatches { limit }));
        }
        cursor = match next {
            RedisValue::SimpleString(s) | RedisValue::BulkString(s) => s.into_bytes(),
            RedisValue::StringBuffer(b) => b,
            _ => return Err(unexpected()),
        };
        if cursor == b"0" {
            return Ok(keys);
        }
    }
}

fn moves(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key_name, rest) = split(args, 4)?;
    let max_sample = config_u64(&MAX_SAMPLE);
    let max_points = config_u64(&MAX_POINTS);
    let parsed = args::parse_moves(&rest, max_sample).map_err(arg_error)?;
    let key = ctx.open_key(key_name);
    let fallback;
    let topo = match read(&key)? {
        Some(topo) => topo,
        None => {
            let vnodes = DEFAULT_VNODES.load(std::sync::atomic::Ordering::Relaxed);
            fallback = Topology::new(Flavour::Native, Some(vnodes), false).map_err(engine_error)?;
            &fallback
        }
    };
    let result = match parsed.members {
        Members::Sample(n) => {
            let prefix = key_name.as_slice();
            let members = (0..n).map(|i| {
                let mut m = Vec::with_capacity(prefix.len() + 21);
                m.extend_from_slice(prefix);
                m.push(b':');
                m.extend_from_slice(i.to_string().as_bytes());
                m
            });
            topo.what_if(&parsed.change, members, max_points)
        }
        Members::Keys(pattern) => {
            let keys = matching_keys(ctx, pattern, max_sample)?;
            topo.what_if(&parsed.change, keys, max_points)
        }
    }
    .map_err(engine_error)?;
    let float = |f: f64| Reply::from(RedisValue::Float(f));
    let reply = map(vec![
        ("members", count(result.members).into()),
        ("ideal", float(result.ideal)),
        (
            "ring",
            map(vec![
                ("moved", count(result.ring.moved).into()),
                ("between_old", count(result.ring.between_old).into()),
                ("fraction", float(result.ring.fraction)),
                ("space", float(result.ring_space)),
            ]),
        ),
        (
            "slots",
            map(vec![
                ("moved", count(result.slots.moved).into()),
                ("between_old", count(result.slots.between_old).into()),
                ("fraction", float(result.slots.fraction)),
                ("slots_moved", count(result.slots_moved).into()),
            ]),
        ),
        (
            "modulo",
            map(vec![
                ("moved", count(result.modulo.moved).into()),
                ("between_old", count(result.modulo.between_old).into()),
                ("fraction", float(result.modulo.fraction)),
            ]),
        ),
    ]);
    send(ctx, reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_caught_with_its_message() {
        assert_eq!(run_caught(|| 7), Ok(7));
        assert_eq!(
            run_caught(|| -> i32 { panic!("boom") }),
            Err("boom".to_string())
        );
        let index = 3;
        let caught = run_caught(|| [1, 2][index]);
        assert!(caught.unwrap_err().contains("index out of bounds"));
    }
}
