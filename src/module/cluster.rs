//! ringslot on a real Redis Cluster: the live slot map as this node sees it (`CLUSTER NODES`,
//! called from the module), `RING.MIRROR` (a ring whose nodes and slot table are the live
//! cluster's), `RING.PLAN` (the slots a change would move, as `redis-cli --cluster
//! rebalance` would), and the checks of `RING.MOVES ... SLOTS`.

use super::args::{self, parse_create};
use super::call::{Call, CommandError};
use super::config;
use super::keys::SLOT_READ_WHOLE;
use super::reply::Reply;
use super::ringtype::rebuild_commands;
use crate::engine::cluster::{parse_cluster_nodes, ClusterNode};
use crate::engine::{slot_runs, Topology, SLOT_COUNT};
use redis_module::{Context, ContextFlags, NotifyEvent, RedisValue};
use std::collections::HashSet;

/// The nodes of the cluster as the node of `context` sees them (`CLUSTER NODES`).
pub fn nodes_seen(context: &Context) -> Result<Vec<ClusterNode>, CommandError> {
    let text = match context.call("CLUSTER", &["NODES"][..])? {
        RedisValue::BulkString(s) | RedisValue::SimpleString(s) => s,
        RedisValue::StringBuffer(b) => String::from_utf8_lossy(&b).into_owned(),
        other => {
            return Err(CommandError::Text(format!(
                "ERR unexpected CLUSTER NODES reply: {other:?}"
            )))
        }
    };
    Ok(parse_cluster_nodes(&text)?)
}

/// The nodes of the cluster as this node sees them. Error: not a cluster-enabled server.
pub fn live_nodes(call: &Call, what: &str) -> Result<Vec<ClusterNode>, CommandError> {
    if !call.flags().contains(ContextFlags::CLUSTER) {
        return Err(CommandError::Text(format!(
            "ERR {what} needs a cluster node (cluster-enabled yes)"
        )));
    }
    nodes_seen(&call.context())
}

/// Checks that the node marked `myself` in `nodes` serves every slot of `start..=end` and
/// that none of them is migrating or importing. Errors name the first slot that fails and,
/// for a slot served elsewhere, who serves it.
pub fn check_slots(nodes: &[ClusterNode], start: u16, end: u16) -> Result<(), CommandError> {
    let me = nodes
        .iter()
        .find(|n| n.has("myself"))
        .ok_or_else(|| CommandError::Text("ERR this node is not in CLUSTER NODES".into()))?;
    for slot in start..=end {
        if !me.serves(slot) {
            let owner = nodes
                .iter()
                .find(|n| n.serves(slot))
                .map_or_else(|| "no node".to_string(), |n| n.address.clone());
            return Err(CommandError::Text(format!(
                "ERR slot {slot} is served by {owner}, not by this node ({})",
                me.address
            )));
        }
    }
    let open = |list: &[(u16, String)]| {
        list.iter()
            .find(|(s, _)| (start..=end).contains(s))
            .map(|(s, _)| *s)
    };
    if let Some(slot) = open(&me.migrating) {
        return Err(CommandError::Text(format!(
            "ERR slot {slot} is migrating to another node: evaluate it when the migration ends"
        )));
    }
    if let Some(slot) = open(&me.importing) {
        return Err(CommandError::Text(format!(
            "ERR slot {slot} is importing from another node: evaluate it when the migration ends"
        )));
    }
    Ok(())
}

/// The key count of `slot` on the node of `context` (`CLUSTER COUNTKEYSINSLOT`).
pub fn keys_in_slot(context: &Context, slot: u16) -> Result<u64, CommandError> {
    match context.call("CLUSTER", &["COUNTKEYSINSLOT", &slot.to_string()][..])? {
        RedisValue::Integer(n) => Ok(u64::try_from(n).unwrap_or(0)),
        other => Err(CommandError::Text(format!(
            "ERR unexpected CLUSTER COUNTKEYSINSLOT reply: {other:?}"
        ))),
    }
}

/// Checks that this node serves every slot of `start..=end` and none is migrating or
/// importing ([`check_slots`]), and returns how many keys it holds there and whether a slot
/// holds more than [`SLOT_READ_WHOLE`] (its keys are then found by a walk of the database).
pub fn own_slots(call: &Call, start: u16, end: u16) -> Result<(u64, bool), CommandError> {
    check_slots(&live_nodes(call, "RING.MOVES ... SLOTS")?, start, end)?;
    let context = call.context();
    let (mut keys, mut big) = (0u64, false);
    for slot in start..=end {
        let n = keys_in_slot(&context, slot)?;
        keys += n;
        big |= n > SLOT_READ_WHOLE;
    }
    Ok((keys, big))
}

/// `RING.MIRROR key [COMPAT name] [VNODES n] [HASHTAG]` -> a map of what changed. Makes the
/// ring at `key` mirror the live cluster: its nodes the masters that are not failing, named
/// `ip:port` as `CLUSTER SLOTS` names them, its slot table the live one (slots no such master
/// serves stay unassigned and are reported). A new mirror lists masters as `redis-cli
/// --cluster` run against this node loads them (this node first, then in its `CLUSTER NODES`
/// order) and takes the options; a refresh keeps the ring's configuration (options that differ
/// from it are an error), its nodes' order and weights, appends new masters and drops gone
/// ones, and keeps the key's TTL. Replicated as its effect (`DEL`, `RING.CREATE`, `RING.ADD`,
/// `RING.ASSIGN`, `RING.UNASSIGN`, and `PEXPIREAT` for a key with a TTL, in one
/// `MULTI`/`EXEC`), never as itself: a replica or the AOF sees another cluster. Errors: not a
/// cluster node; the ring would pass `ringslot.max-points` (checked before any point is made).
pub fn mirror(call: &Call) -> Result<(), CommandError> {
    let given = call.rest(2, 0, usize::MAX)?;
    let opts = parse_create(&given)?;
    let nodes = live_nodes(call, "RING.MIRROR")?;
    // The order `redis-cli --cluster` loads masters in from this node: this node first, then
    // the others as its CLUSTER NODES lists them (redis-cli.c, clusterManagerLoadInfoFromNode,
    // which leaves failing nodes out). A rebalance breaks ties of balance by that order, so
    // that RING.PLAN on this mirror is what `redis-cli --cluster rebalance <this node>` does.
    let mut masters: Vec<&ClusterNode> = Vec::new();
    for n in nodes.iter().filter(|n| n.is_master()) {
        // A node that rejoined at the same address can linger under its old id.
        if !masters.iter().any(|m| m.address == n.address) {
            masters.push(n);
        }
    }
    masters.sort_by_key(|n| !n.has("myself"));
    let key = call.write_ring()?;
    let old = key.ring().map(|ring| (*ring).clone());
    let created = old.is_none();
    let (flavour, vnodes, hashtag, mut list) = match &old {
        Some(t) => {
            let c = t.config();
            let differs = opts.flavour != c.flavour
                || opts.vnodes.is_some_and(|v| v != i64::from(c.vnodes))
                || opts.hashtag != c.hashtag;
            if !given.is_empty() && differs {
                return Err(CommandError::Text(format!(
                    "ERR the mirror exists with COMPAT {} VNODES {}{}: a refresh keeps its \
                     options (DEL the key to mirror with others)",
                    c.flavour.name(),
                    c.vnodes,
                    if c.hashtag { " HASHTAG" } else { "" }
                )));
            }
            let live: HashSet<&[u8]> = masters.iter().map(|m| m.address.as_bytes()).collect();
            let kept: Vec<(Vec<u8>, u32)> = t
                .nodes()
                .iter()
                .filter(|n| live.contains(n.name.as_slice()))
                .map(|n| (n.name.clone(), n.weight))
                .collect();
            (c.flavour, c.vnodes, c.hashtag, kept)
        }
        None => {
            let t = Topology::new(opts.flavour, opts.vnodes, opts.hashtag)?;
            let c = t.config();
            (c.flavour, c.vnodes, c.hashtag, Vec::new())
        }
    };
    let known: HashSet<Vec<u8>> = list.iter().map(|(n, _)| n.clone()).collect();
    let added: Vec<Vec<u8>> = masters
        .iter()
        .map(|m| m.address.as_bytes().to_vec())
        .filter(|a| !known.contains(a))
        .collect();
    list.extend(added.iter().map(|a| (a.clone(), 1)));
    let removed: Vec<Vec<u8>> = old.as_ref().map_or_else(Vec::new, |t| {
        t.nodes()
            .iter()
            .filter(|n| !masters.iter().any(|m| m.address.as_bytes() == n.name))
            .map(|n| n.name.clone())
            .collect()
    });
    let weights: Vec<u32> = list.iter().map(|(_, w)| *w).collect();
    Topology::check_planned_points(flavour, vnodes, &weights, config::limits())?;
    let index: Vec<usize> = masters
        .iter()
        .filter_map(|m| list.iter().position(|(n, _)| n == m.address.as_bytes()))
        .collect();
    let mut ranges: Vec<(u16, u16, usize)> = masters
        .iter()
        .zip(&index)
        .flat_map(|(m, &i)| m.slots.iter().map(move |&(a, b)| (a, b, i)))
        .collect();
    // In slot order, as a stored ring lists them (a slot served twice in a stale view is
    // refused as corrupt).
    ranges.sort_unstable();
    let mirror = Topology::from_parts(flavour, vnodes, hashtag, list, &ranges)?;
    let owner = |t: &Topology, s: u16| {
        t.slot_table()
            .owner(s)
            .and_then(|i| t.nodes().get(i))
            .map(|n| n.name.clone())
    };
    let unserved = mirror.slot_table().unassigned();
    let slots_changed = match &old {
        Some(t) => (0..SLOT_COUNT as u16)
            .filter(|&s| owner(t, s) != owner(&mirror, s))
            .count(),
        None => {
            SLOT_COUNT
                - unserved
                    .iter()
                    .map(|&(a, b)| usize::from(b - a) + 1)
                    .sum::<usize>()
        }
    };
    let name = call.key_name()?;
    let ctx = call.context();
    // The key's expiry, kept by the refresh, must reach the replicas too.
    let expires_at = match ctx.call("PEXPIRETIME", &[name.as_slice()][..]) {
        Ok(RedisValue::Integer(at)) if at > 0 => Some(at),
        _ => None,
    };
    let reply = Reply::Map(vec![
        ("created", Reply::Bool(created)),
        ("nodes", Reply::count(mirror.nodes().len())),
        (
            "added",
            Reply::Array(added.iter().map(|a| Reply::Bulk(a)).collect()),
        ),
        (
            "removed",
            Reply::Array(removed.iter().map(|r| Reply::Bulk(r)).collect()),
        ),
        ("slots_changed", Reply::count(slots_changed)),
        (
            "unserved",
            Reply::Array(
                unserved
                    .iter()
                    .map(|&(a, b)| Reply::Array(vec![Reply::Int(a.into()), Reply::Int(b.into())]))
                    .collect(),
            ),
        ),
    ]);
    // The effect, replicated: the ring rebuilt from nothing.
    let commands = rebuild_commands(&mirror);
    match old {
        Some(_) => {
            if let Some(mut ring) = key.ring() {
                *ring = mirror;
            }
        }
        None => key.create(mirror)?,
    }
    let del: [&[u8]; 1] = [name.as_slice()];
    ctx.replicate("DEL", &del[..]);
    for (command, rest) in commands {
        let mut argv: Vec<&[u8]> = vec![name.as_slice()];
        argv.extend(rest.iter().map(Vec::as_slice));
        ctx.replicate(command.to_str().unwrap_or_default(), &argv[..]);
    }
    if let Some(at) = expires_at {
        let at = at.to_string();
        let argv: [&[u8]; 2] = [name.as_slice(), at.as_bytes()];
        ctx.replicate("PEXPIREAT", &argv[..]);
    }
    ctx.notify_keyspace_event(NotifyEvent::MODULE, "ring.mirror", &name);
    call.reply(&reply);
    Ok(())
}

/// `RING.PLAN key ADD|DEL node [WEIGHT w]` -> the moves of the slot table the change would
/// make, in order, as `redis-cli --cluster rebalance --cluster-use-empty-masters` makes them
/// (each "Moving N slots from A to B"): one map per move with `from`, `to` (nil for
/// unassigned slots), `slots` (how many) and `ranges` (`[start, end]` runs). Changes nothing.
/// Error: a missing key (naming it), a change the ring refuses.
pub fn plan(call: &Call) -> Result<(), CommandError> {
    let change = args::parse_plan(&call.rest(2, 2, usize::MAX)?)?;
    let limits = config::limits();
    call.read_existing_ring(|ring| {
        let moves = ring.plan(&change, limits)?;
        fn node(n: &Option<Vec<u8>>) -> Reply<'_> {
            n.as_deref().map_or(Reply::Nil, Reply::Bulk)
        }
        let reply = Reply::Array(
            moves
                .iter()
                .map(|m| {
                    Reply::Map(vec![
                        ("from", node(&m.from)),
                        ("to", node(&m.to)),
                        ("slots", Reply::count(m.slots.len())),
                        (
                            "ranges",
                            Reply::Array(
                                slot_runs(&m.slots)
                                    .into_iter()
                                    .map(|(a, b)| {
                                        Reply::Array(vec![
                                            Reply::Int(a.into()),
                                            Reply::Int(b.into()),
                                        ])
                                    })
                                    .collect(),
                            ),
                        ),
                    ])
                })
                .collect(),
        );
        call.reply(&reply);
        Ok(())
    })
}
