//! One handler per RING.* command: parse the arguments, call the engine, reply. Each does all
//! its fallible work first and replies last, so an error is always the whole reply (see
//! [`super::call::dispatch`], which also turns a panic into `ERR internal error`).
//!
//! `RING.MOVES` has a file of its own (`moves.rs`).
//!
//! Writes that change a ring are replicated verbatim (which also counts them as dirty for
//! `SAVE`) and fire a keyspace notification of class `d` (module) named `ring.create`,
//! `ring.add`, `ring.del`, `ring.assign` or `ring.unassign`. A `RING.ADD` that creates its
//! ring is replicated after a `RING.CREATE key VNODES n` naming the VNODES it used, so that a
//! replica or an AOF replay with another `ringslot.default-vnodes` builds the same ring (Redis
//! wraps the two in MULTI/EXEC). `RING.MIRROR` is replicated as its effect.

use super::args;
use super::background::{self, Job, Source, Work};
use super::call::Call;
use super::config::{self, DEFAULT_VNODES, MAX_SAMPLE};
use super::errors::CommandError;
use super::live;
use super::reply::Reply;
use super::ringtype::rebuild_commands;
use crate::engine::cluster::{mirror as mirror_of, MirrorOptions};
use crate::engine::cost;
use crate::engine::{key_slot, slot_runs, Flavour, Limits, Topology};
use redis_module::{ContextFlags, NotifyEvent, RedisValue};
use std::sync::atomic::Ordering;

/// `ringslot.max-points` and `ringslot.max-nodes`, except for commands replayed from the AOF,
/// sent by a master, or replayed by Valkey's atomic slot migration on its target (the
/// slot-import client), which were accepted once already and must rebuild the same ring
/// whatever this server's settings. Valkey 9.1.2 flags the slot-import client `REPLICATED`
/// too; its own flag is read besides, in case a Valkey stops doing so.
fn limits(call: &Call) -> Limits {
    if call
        .flags()
        .intersects(ContextFlags::REPLICATED | ContextFlags::LOADING)
        || super::server::is_slot_import_client(&call.context())
    {
        Limits::NONE
    } else {
        config::limits()
    }
}

/// `RING.CREATE key [COMPAT native|ketama|groupcache|native-fnv] [VNODES n] [HASHTAG]` ->
/// `OK`.
pub fn create(call: &Call) -> Result<(), CommandError> {
    let opts = args::parse_create(&call.rest(2, 0, usize::MAX)?)?;
    let key = call.write_ring()?;
    if !key.is_empty() {
        let name = call.key_name()?;
        return Err(CommandError::KeyExists(name.as_slice().to_vec()));
    }
    key.create(Topology::new(opts.flavour, opts.vnodes, opts.hashtag)?)?;
    call.propagate("ring.create")?;
    call.reply(&Reply::Ok);
    Ok(())
}

/// `RING.ADD key [WEIGHT w] node [node ...]` -> nodes newly added. Creates the implicit ring
/// ([`Topology::implicit`], `ringslot.default-vnodes`) when the key is missing.
pub fn add(call: &Call) -> Result<(), CommandError> {
    let parsed = args::parse_add(&call.rest(2, 1, usize::MAX)?)?;
    let limit = limits(call);
    let key = call.write_ring()?;
    let (added, changed) = match key.ring() {
        Some(mut ring) => ring.add(&parsed.nodes, parsed.weight, limit)?,
        None => {
            let vnodes = DEFAULT_VNODES.load(Ordering::Relaxed);
            let mut ring = Topology::implicit(vnodes)?;
            let outcome = ring.add(&parsed.nodes, parsed.weight, limit)?;
            key.create(ring)?;
            // The replica's or the AOF's own default-vnodes may differ: say what this one
            // used.
            let vnodes = vnodes.to_string();
            let name = call.key_name()?;
            let create: [&[u8]; 3] = [name.as_slice(), b"VNODES", vnodes.as_bytes()];
            call.context().replicate("RING.CREATE", &create[..]);
            outcome
        }
    };
    if changed {
        call.propagate("ring.add")?;
    }
    call.reply(&Reply::count(added));
    Ok(())
}

/// `RING.DEL key node [node ...]` -> nodes removed.
pub fn del(call: &Call) -> Result<(), CommandError> {
    let nodes = call.rest(2, 1, usize::MAX)?;
    let key = call.write_ring()?;
    let removed = key.ring().map_or(0, |mut ring| ring.del(&nodes));
    if removed > 0 {
        call.propagate("ring.del")?;
    }
    call.reply(&Reply::count(removed));
    Ok(())
}

/// `RING.ASSIGN key start end node` -> `OK`.
pub fn assign(call: &Call) -> Result<(), CommandError> {
    let rest = call.rest(2, 3, 3)?;
    let [start, end, node] = rest.as_slice() else {
        return Err(CommandError::WrongArity);
    };
    let (start, end) = (args::integer(start)?, args::integer(end)?);
    let key = call.write_ring()?;
    match key.ring() {
        Some(mut ring) => {
            if ring.assign(start, end, node)? {
                call.propagate("ring.assign")?;
            }
        }
        // No ring, no node: report the range or the node as an existing empty ring would.
        None => {
            Topology::new(Flavour::Native, None, false)?.assign(start, end, node)?;
        }
    }
    call.reply(&Reply::Ok);
    Ok(())
}

/// `RING.UNASSIGN key start end` -> `OK`: slots `start..end` no longer have an owner, as
/// `CLUSTER DELSLOTSRANGE` leaves them.
pub fn unassign(call: &Call) -> Result<(), CommandError> {
    let rest = call.rest(2, 2, 2)?;
    let [start, end] = rest.as_slice() else {
        return Err(CommandError::WrongArity);
    };
    let (start, end) = (args::integer(start)?, args::integer(end)?);
    let key = call.write_ring()?;
    match key.ring() {
        Some(mut ring) => {
            if ring.unassign(start, end)? {
                call.propagate("ring.unassign")?;
            }
        }
        // No ring: report a bad range as an existing empty ring would; nothing to unassign.
        None => {
            Topology::new(Flavour::Native, None, false)?.unassign(start, end)?;
        }
    }
    call.reply(&Reply::Ok);
    Ok(())
}

/// `RING.GET key member [COUNT n]` -> the owner (bulk, or nil on an empty ring); with
/// `COUNT`, an array of up to n distinct nodes clockwise from the member, the owner first.
pub fn get(call: &Call) -> Result<(), CommandError> {
    let member = call.arg(2)?;
    let count = if call.len() > 3 {
        args::parse_get(&call.args_from(3))?
    } else {
        None
    };
    call.read_ring(|ring| {
        match count {
            None => call.reply(
                &ring
                    .and_then(|t| t.owner(member))
                    .map_or(Reply::Nil, Reply::Bulk),
            ),
            Some(n) => {
                let list = ring.map(|t| t.preference_list(member, n));
                call.reply(&Reply::Array(
                    list.unwrap_or_default()
                        .into_iter()
                        .map(Reply::Bulk)
                        .collect(),
                ));
            }
        }
        Ok(())
    })
}

/// `RING.MGET key member [member ...]` -> one owner (or nil) per member.
pub fn mget(call: &Call) -> Result<(), CommandError> {
    let members = call.rest(2, 1, usize::MAX)?;
    call.read_ring(|ring| {
        let owners = members
            .iter()
            .map(|m| {
                ring.and_then(|t| t.owner(m))
                    .map_or(Reply::Nil, Reply::Bulk)
            })
            .collect();
        call.reply(&Reply::Array(owners));
        Ok(())
    })
}

/// `RING.SLOT key member` -> `[slot, node-or-nil]`: the member's hash slot and its owner in
/// the ring's slot table.
pub fn slot(call: &Call) -> Result<(), CommandError> {
    // No vector for the arguments or the reply: a heap allocation and its free cost a
    // RING.SLOT about 600 instructions, more than the slot lookup (callgrind).
    if call.len() != 3 {
        return Err(CommandError::WrongArity);
    }
    let member = call.arg(2)?;
    call.read_ring(|ring| {
        let (slot, owner) = match ring {
            Some(t) => t.slot(member),
            None => (key_slot(member), None),
        };
        call.reply_array(&[
            Reply::Int(i64::from(slot)),
            owner.map_or(Reply::Nil, Reply::Bulk),
        ]);
        Ok(())
    })
}

/// Replies an array of `rows` of the ring at the key (empty for a missing key); the command
/// takes no argument after the key.
fn reply_rows(
    call: &Call,
    rows: impl for<'t> FnOnce(&'t Topology) -> Vec<Reply<'t>>,
) -> Result<(), CommandError> {
    call.rest(2, 0, 0)?;
    call.read_ring(|ring| {
        call.reply(&Reply::Array(ring.map(rows).unwrap_or_default()));
        Ok(())
    })
}

/// `RING.SLOTS key` -> `[[start, end, node], ...]` in slot order.
pub fn slots(call: &Call) -> Result<(), CommandError> {
    reply_rows(call, |ring| {
        ring.slot_ranges()
            .into_iter()
            .map(|(start, end, node)| {
                Reply::Array(vec![
                    Reply::Int(i64::from(start)),
                    Reply::Int(i64::from(end)),
                    Reply::Bulk(node),
                ])
            })
            .collect()
    })
}

/// `RING.NODES key` -> one map per node, in insertion order.
pub fn nodes(call: &Call) -> Result<(), CommandError> {
    reply_rows(call, |ring| {
        ring.node_stats()
            .into_iter()
            .map(|n| {
                Reply::Map(vec![
                    ("node", Reply::Bulk(n.name)),
                    ("weight", Reply::count(n.weight)),
                    ("points", Reply::count(n.points)),
                    ("ring_share", Reply::Double(n.ring_share)),
                    ("slots", Reply::count(n.slots)),
                    ("slot_share", Reply::Double(n.slot_share)),
                ])
            })
            .collect()
    })
}

/// `RING.INFO key` -> a map of the ring's configuration and balance; nil when missing.
pub fn info(call: &Call) -> Result<(), CommandError> {
    call.rest(2, 0, 0)?;
    call.read_ring(|ring| {
        let Some(ring) = ring else {
            call.reply(&Reply::Nil);
            return Ok(());
        };
        let info = ring.info();
        call.reply(&Reply::Map(vec![
            ("compat", Reply::Bulk(info.flavour.name().as_bytes())),
            ("vnodes", Reply::count(info.vnodes)),
            ("hashtag", Reply::Bool(info.hashtag)),
            ("nodes", Reply::count(info.nodes)),
            ("points", Reply::count(info.points)),
            ("ring_peak_to_mean", Reply::Double(info.ring_peak_to_mean)),
            ("slot_peak_to_mean", Reply::Double(info.slot_peak_to_mean)),
            ("memory_bytes", Reply::count(info.memory_bytes)),
        ]));
        Ok(())
    })
}

/// `RING.OWNERS key member` -> a map of scheme -> owner (nil on an empty ring): where the
/// member lands under every scheme at once, on the ring key's nodes and weights (bounded loads
/// with no other member placed is the ring). Builds a Maglev table and the multi-probe points
/// for the call: past `ringslot.inline-limit` ([`cost::owners`]) in the background. Errors: a
/// missing key, a `ringslot.maglev-size` that is not a prime.
pub fn owners(call: &Call) -> Result<(), CommandError> {
    let rest = call.rest(2, 1, 1)?;
    let [member] = rest.as_slice() else {
        return Err(CommandError::WrongArity);
    };
    let member = member.to_vec();
    let params = config::scheme_params();
    config::check_maglev_size(&params)?;
    let topo = call.ring_snapshot()?;
    let units = cost::owners(&topo, &params).units();
    let what = format!(
        "RING.OWNERS on {} nodes (a Maglev table, multi-probe points)",
        topo.nodes().len()
    );
    let work: Work = Box::new(move |_| {
        let owners = topo.owners(&member, &params);
        let fields = owners
            .into_iter()
            .map(|(s, o)| {
                let node = o.and_then(|i| topo.nodes().get(i));
                (
                    s.name(),
                    node.map_or(Reply::Nil, |n| Reply::Bytes(n.name.clone())),
                )
            })
            .collect();
        Ok(Reply::Map(fields))
    });
    let job = Job {
        command: "RING.OWNERS",
        source: Source::Nothing,
        work,
    };
    background::run(call, job, units, &what)
}

/// `RING.BALANCE key [SAMPLE n]` -> a map of scheme -> map of `peak_to_mean` (the largest
/// node's share over its weight's share; nil for a ring without nodes), `exact` (true for the ring, the slot table,
/// Maglev and modulo, which are computed from their structure; false for jump, rendezvous,
/// multi-probe and bounded loads, estimated over the sample members, default 10000) and
/// `balanced_peak_to_mean`: for an estimate, what a perfectly balanced scheme shows over as
/// many members (a sampled peak-to-mean is biased upward; see
/// [`crate::engine::balanced_peak_to_mean`]), nil for an exact figure. Past
/// `ringslot.inline-limit` ([`cost::balance`]) in the background. Errors: a missing key, a
/// `ringslot.maglev-size` that is not a prime.
pub fn balance(call: &Call) -> Result<(), CommandError> {
    let n = args::parse_balance(&call.rest(2, 0, usize::MAX)?, config::get(&MAX_SAMPLE))?;
    let params = config::scheme_params();
    config::check_maglev_size(&params)?;
    let name = call.key_name()?;
    let topo = call.ring_snapshot()?;
    let units = cost::balance(&topo, &params, n).units();
    let what = format!(
        "RING.BALANCE on {} nodes with SAMPLE {n}",
        topo.nodes().len()
    );
    // A ring without nodes has no share to compare: its peak-to-mean is nil, not 0.
    let empty = topo.nodes().is_empty();
    let work: Work = Box::new(move |members| {
        let balances = topo.balance(members.map(|(m, _)| m), &params);
        let fields = balances
            .iter()
            .map(|b| {
                let peak = if empty {
                    Reply::Nil
                } else {
                    Reply::Double(b.peak_to_mean)
                };
                (
                    b.scheme.name(),
                    Reply::Map(vec![
                        ("peak_to_mean", peak),
                        ("exact", Reply::Bool(b.exact)),
                        (
                            "balanced_peak_to_mean",
                            b.balanced.map_or(Reply::Nil, Reply::Double),
                        ),
                    ]),
                )
            })
            .collect();
        Ok(Reply::Map(fields))
    });
    let source = Source::Sample {
        name: name.as_slice().to_vec(),
        count: n,
    };
    let job = Job {
        command: "RING.BALANCE",
        source,
        work,
    };
    background::run(call, job, units, &what)
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
/// cluster node; options that differ from an existing mirror's; the ring would pass
/// `ringslot.max-points` or `ringslot.max-nodes` (checked before any point is made).
pub fn mirror(call: &Call) -> Result<(), CommandError> {
    let given = call.rest(2, 0, usize::MAX)?;
    let opts = args::parse_create(&given)?;
    let nodes = live::live_nodes(call, "RING.MIRROR")?;
    let key = call.write_ring()?;
    let old = key.ring().map(|ring| (*ring).clone());
    let options = MirrorOptions {
        flavour: opts.flavour,
        vnodes: opts.vnodes,
        hashtag: opts.hashtag,
        given: !given.is_empty(),
    };
    let m = mirror_of(old.as_ref(), &nodes, &options, config::limits())?;
    let name = call.key_name()?;
    let ctx = call.context();
    // The key's expiry, kept by the refresh, must reach the replicas too.
    let expires_at = match ctx.call("PEXPIRETIME", &[name.as_slice()][..]) {
        Ok(RedisValue::Integer(at)) if at > 0 => Some(at),
        _ => None,
    };
    let reply = Reply::Map(vec![
        ("created", Reply::Bool(m.created)),
        ("nodes", Reply::count(m.topology.nodes().len())),
        (
            "added",
            Reply::Array(m.added.iter().map(|a| Reply::Bulk(a)).collect()),
        ),
        (
            "removed",
            Reply::Array(m.removed.iter().map(|r| Reply::Bulk(r)).collect()),
        ),
        ("slots_changed", Reply::count(m.slots_changed)),
        (
            "unserved",
            Reply::Array(
                m.unserved
                    .iter()
                    .map(|&(a, b)| Reply::Array(vec![Reply::Int(a.into()), Reply::Int(b.into())]))
                    .collect(),
            ),
        ),
    ]);
    // The effect, replicated: the ring rebuilt from nothing.
    let commands = rebuild_commands(&m.topology);
    match old {
        Some(_) => {
            if let Some(mut ring) = key.ring() {
                *ring = m.topology;
            }
        }
        None => key.create(m.topology)?,
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

/// `RING.PLAN key ADD [WEIGHT w] node [node ...] | DEL node [node ...] | REBALANCE [THRESHOLD
/// t] [WEIGHT node=w ...]` -> the moves of the slot table the change would make (for
/// `REBALANCE`, the rebalance pending on the table now, after `add-node`), in order, as
/// `redis-cli --cluster rebalance --cluster-use-empty-masters` makes them
/// (each "Moving N slots from A to B"): one map per move with `from`, `to` (nil for
/// unassigned slots), `slots` (how many) and `ranges` (`[start, end]` runs). Changes nothing.
/// Error: a missing key (naming it), a change the ring refuses.
pub fn plan(call: &Call) -> Result<(), CommandError> {
    let change = args::parse_plan(&call.rest(2, 1, usize::MAX)?)?;
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
