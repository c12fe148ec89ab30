//! One handler per RING.* command: parse the arguments, call the engine, reply. Each does all
//! its fallible work first and replies last, so an error is always the whole reply (see
//! [`super::call::dispatch`], which also turns a panic into `ERR internal error`).
//!
//! Writes that change a ring are replicated verbatim (which also counts them as dirty for
//! `SAVE`) and fire a keyspace notification of class `d` (module) named `ring.create`,
//! `ring.add`, `ring.del` or `ring.assign`. A `RING.ADD` that creates its ring is replicated
//! after a `RING.CREATE key VNODES n` naming the VNODES it used, so that a replica or an AOF
//! replay with another `ringslot.default-vnodes` builds the same ring (Redis wraps the two in
//! MULTI/EXEC).

use super::args::{self, Members};
use super::background::{self, Run, Source};
use super::call::{Call, CommandError};
use super::cluster;
use super::config::{self, DEFAULT_VNODES, INLINE_LIMIT, MAX_POINTS, MAX_SAMPLE};
use super::keys::{self, KeyWalk, Reader};
use super::reply::Reply;
use crate::engine::error::shown;
use crate::engine::scheme_whatif::scheme_cost;
use crate::engine::{
    key_slot, sample_members, EngineError, Flavour, Scheme, SchemesWhatIf, Topology, WhatIf,
};
use redis_module::ContextFlags;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// `ringslot.max-points`, except for commands replayed from the AOF or sent by a master,
/// which were accepted once already and must rebuild the same ring whatever this server's
/// setting.
fn max_points(call: &Call) -> u64 {
    if call
        .flags()
        .intersects(ContextFlags::REPLICATED | ContextFlags::LOADING)
    {
        u64::MAX
    } else {
        config::get(&MAX_POINTS)
    }
}

/// `RING.CREATE key [COMPAT native|ketama|groupcache|native-fnv] [VNODES n] [HASHTAG]` ->
/// `OK`.
pub fn create(call: &Call) -> Result<(), CommandError> {
    let opts = args::parse_create(&call.rest(2, 0, usize::MAX)?)?;
    let key = call.write_ring()?;
    if !key.is_empty() {
        let name = call.key_name()?;
        return Err(CommandError::Text(format!(
            "ERR key {} already exists",
            shown(name.as_slice())
        )));
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
    let limit = max_points(call);
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
    let rest = call.rest(2, 1, 1)?;
    let member = rest.first().copied().unwrap_or_default();
    call.read_ring(|ring| {
        let (slot, owner) = match ring {
            Some(t) => t.slot(member),
            None => (key_slot(member), None),
        };
        call.reply(&Reply::Array(vec![
            Reply::Int(i64::from(slot)),
            owner.map_or(Reply::Nil, Reply::Bulk),
        ]));
        Ok(())
    })
}

/// `RING.SLOTS key` -> `[[start, end, node], ...]` in slot order.
pub fn slots(call: &Call) -> Result<(), CommandError> {
    call.rest(2, 0, 0)?;
    call.read_ring(|ring| {
        let ranges = ring.map(Topology::slot_ranges).unwrap_or_default();
        call.reply(&Reply::Array(
            ranges
                .into_iter()
                .map(|(start, end, node)| {
                    Reply::Array(vec![
                        Reply::Int(i64::from(start)),
                        Reply::Int(i64::from(end)),
                        Reply::Bulk(node),
                    ])
                })
                .collect(),
        ));
        Ok(())
    })
}

/// `RING.NODES key` -> one map per node, in insertion order.
pub fn nodes(call: &Call) -> Result<(), CommandError> {
    call.rest(2, 0, 0)?;
    call.read_ring(|ring| {
        let stats = ring.map(Topology::node_stats).unwrap_or_default();
        call.reply(&Reply::Array(
            stats
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
                .collect(),
        ));
        Ok(())
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

/// The keys `walk` finds, walked to its end on the main thread (see [`super::keys`]): at most
/// `ringslot.max-sample` of them, else `TooManyMatches`.
fn walk_all(call: &Call, mut walk: KeyWalk) -> Result<Vec<Vec<u8>>, CommandError> {
    let ctx = call.context();
    let limit = config::get(&MAX_SAMPLE);
    let mut found = Vec::new();
    while !walk.is_done() {
        // SAFETY: the live context of this call, on the main thread; the whole walk happens
        // within this call.
        unsafe { walk.step(ctx.ctx, 1000, &mut found)? };
        if found.len() as u64 > limit {
            return Err(EngineError::TooManyMatches { limit }.into());
        }
    }
    Ok(found)
}

/// `RING.MOVES key ADD|DEL node [WEIGHT w] [SAMPLE n | KEYS pattern | SLOTS start end]` ->
/// the what-if map.
/// Changes nothing. A missing key is evaluated as the implicit ring `RING.ADD` would create.
///
/// Work up to `ringslot.inline-limit` (sample members, or the keys of the database a `KEYS`
/// walk visits) runs inline; more runs in the background ([`background`]), except where the
/// client cannot be blocked (`MULTI`, scripts), where it is refused.
pub fn moves(call: &Call) -> Result<(), CommandError> {
    let rest = call.rest(2, 2, usize::MAX)?;
    let parsed = args::parse_moves(&rest, config::get(&MAX_SAMPLE))?;
    let max_points = config::get(&MAX_POINTS);
    let inline = config::get(&INLINE_LIMIT);
    let ctx = call.context();
    let flags = call.flags();
    let name = call.key_name()?;
    // The walk's rights are the caller's, checked before anything runs.
    let plan = match parsed.members {
        Members::Sample(n) => Plan::Sample(n),
        Members::Slots(start, end) => {
            // SAFETY: the live context of this call, on the main thread.
            let reader = unsafe { keys::caller(ctx.ctx) };
            reader.check_scan()?;
            let size = cluster::own_slots(call, start, end)?;
            Plan::Slots {
                start,
                end,
                reader,
                size,
            }
        }
        Members::Keys(pattern) => {
            // SAFETY: the live context of this call, on the main thread.
            let reader = unsafe { keys::caller(ctx.ctx) };
            reader.check_scan()?;
            // SAFETY: as above.
            let size = unsafe { keys::db_size(ctx.ctx) };
            Plan::Keys {
                pattern,
                reader,
                size,
            }
        }
    };
    let (work, what) = match &plan {
        Plan::Sample(n) => (*n, format!("SAMPLE {n} is")),
        Plan::Keys { size, .. } => (*size, format!("the database holds {size} keys,")),
        Plan::Slots { size, .. } => (*size, format!("the slots hold {size} keys,")),
    };
    // Schemes beyond ring, slots and modulo cost more per member (rendezvous scores every
    // node): the work counts in what ring + slots + modulo cost.
    let schemes = match &parsed.schemes {
        Some(list) => Some((
            list.clone(),
            config::scheme_params().map_err(CommandError::Text)?,
        )),
        None => None,
    };
    let (work, what) = match &schemes {
        None => (work, what),
        Some((list, params)) => {
            let nodes = call.read_ring_or_implicit(|ring| Ok(ring.nodes().len()))?;
            let cost: u64 = list.iter().map(|&s| scheme_cost(s, nodes, params)).sum();
            let factor = cost.div_ceil(3).max(1);
            (
                work.saturating_mul(factor),
                format!("{what} with those SCHEMES (x{factor})"),
            )
        }
    };
    if work > inline {
        let blocked = ContextFlags::MULTI | ContextFlags::LUA | ContextFlags::DENY_BLOCKING;
        if flags.intersects(blocked) {
            return Err(CommandError::Text(format!(
                "ERR {what} more than ringslot.inline-limit ({inline}), the most RING.MOVES does \
                 on Redis' main thread, and here (MULTI, a script) it cannot run in the background"
            )));
        }
        let topo = match call.ring_snapshot()? {
            Some(topo) => topo,
            None => Arc::new(Topology::implicit(DEFAULT_VNODES.load(Ordering::Relaxed))?),
        };
        let source = match plan {
            Plan::Sample(count) => Source::Sample {
                name: name.as_slice().to_vec(),
                count,
            },
            Plan::Keys {
                pattern, reader, ..
            } => Source::Keys {
                walk: KeyWalk::new(pattern, reader)?,
                limit: config::get(&MAX_SAMPLE),
            },
            Plan::Slots {
                start, end, reader, ..
            } => Source::Keys {
                walk: KeyWalk::slots(
                    start,
                    end,
                    reader,
                    name.as_slice(),
                    config::get(&MAX_SAMPLE).saturating_add(1),
                ),
                limit: config::get(&MAX_SAMPLE),
            },
        };
        let run = Run {
            topo,
            change: parsed.change,
            source,
            max_points,
            schemes,
        };
        // SAFETY: the live context of this call, on the main thread, which may block.
        return unsafe { background::start(ctx.ctx, run) };
    }
    let keys = match plan {
        Plan::Keys {
            pattern, reader, ..
        } => Some(walk_all(call, KeyWalk::new(pattern, reader)?)?),
        Plan::Slots {
            start, end, reader, ..
        } => Some(walk_all(
            call,
            KeyWalk::slots(
                start,
                end,
                reader,
                name.as_slice(),
                config::get(&MAX_SAMPLE).saturating_add(1),
            ),
        )?),
        Plan::Sample(_) => None,
    };
    let result = call.read_ring_or_implicit(|ring| {
        let change = &parsed.change;
        Ok(match (parsed.members, &keys) {
            (Members::Sample(n), _) => {
                let members = sample_members(name.as_slice(), n);
                evaluate(ring, change, members, schemes.as_ref(), max_points)?
            }
            (Members::Keys(_) | Members::Slots(..), keys) => evaluate(
                ring,
                change,
                keys.iter().flatten(),
                schemes.as_ref(),
                max_points,
            )?,
        })
    })?;
    call.reply(&result.reply());
    Ok(())
}

/// Evaluates `change` over `members`: the default what-if, or the one of `schemes`.
fn evaluate<I, M>(
    ring: &Topology,
    change: &crate::engine::Change,
    members: I,
    schemes: Option<&(Vec<Scheme>, crate::engine::SchemeParams)>,
    max_points: u64,
) -> Result<Answer, EngineError>
where
    I: IntoIterator<Item = M>,
    M: AsRef<[u8]>,
{
    Ok(match schemes {
        None => Answer::Default(ring.what_if(change, members, max_points)?),
        Some((list, params)) => {
            Answer::Schemes(ring.what_if_schemes(change, members, list, params, max_points)?)
        }
    })
}

/// What `RING.MOVES` answers: the default map (ring, slots, modulo), or the map of the
/// schemes named with `SCHEMES`.
pub(crate) enum Answer {
    Default(WhatIf),
    Schemes(SchemesWhatIf),
}

impl Answer {
    /// The reply.
    pub(crate) fn reply(&self) -> Reply<'static> {
        match self {
            Answer::Default(w) => what_if_reply(w),
            Answer::Schemes(w) => schemes_reply(w),
        }
    }
}

/// The map of `RING.MOVES ... SCHEMES`: `members`, `ideal`, then one map per scheme named, in
/// order: `moved`, `between_old`, `fraction`, `standard_error`, then `space` (the exact moved
/// share of the key space) for the ring and Maglev, `slots_moved` for the slot table: the
/// default reply's fields for ring, slots and modulo.
fn schemes_reply(w: &SchemesWhatIf) -> Reply<'static> {
    let mut fields = vec![
        ("members", Reply::count(w.members)),
        ("ideal", Reply::Double(w.ideal)),
    ];
    for r in &w.schemes {
        let mut m = vec![
            ("moved", Reply::count(r.moves.moved)),
            ("between_old", Reply::count(r.moves.between_old)),
            ("fraction", Reply::Double(r.moves.fraction)),
            ("standard_error", Reply::Double(r.moves.standard_error)),
        ];
        // The slot table's exact share is its slots_moved / 16384, as in the default reply.
        if let (Some(space), false) = (r.space, r.scheme == Scheme::Slots) {
            m.push(("space", Reply::Double(space)));
        }
        if let Some(slots) = r.slots_moved {
            m.push(("slots_moved", Reply::count(slots)));
        }
        fields.push((r.scheme.name(), Reply::Map(m)));
    }
    Reply::Map(fields)
}

/// `RING.OWNERS key member` -> a map of scheme -> owner (nil on an empty ring): where the
/// member lands under every scheme at once, on the ring key's nodes and weights (bounded loads
/// with no other member placed is the ring). A missing key is the ring `RING.ADD` would make.
/// Builds a Maglev table for the call (`ringslot.maglev-size` entries).
pub fn owners(call: &Call) -> Result<(), CommandError> {
    let rest = call.rest(2, 1, 1)?;
    let [member] = rest.as_slice() else {
        return Err(CommandError::WrongArity);
    };
    let params = config::scheme_params().map_err(CommandError::Text)?;
    call.read_ring_or_implicit(|ring| {
        let owners = ring.owners_under_all(member, &params);
        let fields = owners
            .into_iter()
            .map(|(s, o)| {
                let node = o.and_then(|i| ring.nodes().get(i));
                (s.name(), node.map_or(Reply::Nil, |n| Reply::Bulk(&n.name)))
            })
            .collect();
        call.reply(&Reply::Map(fields));
        Ok(())
    })
}

/// `RING.BALANCE key [SAMPLE n]` -> a map of scheme -> map of `peak_to_mean` (the largest
/// node's share over its weight's share) and `exact` (true for the ring, the slot table,
/// Maglev and modulo, which are computed from their structure; false for jump, rendezvous,
/// multi-probe and bounded loads, estimated over the sample members, default 10000). The work
/// (sample x the schemes' cost) must fit in `ringslot.inline-limit`.
pub fn balance(call: &Call) -> Result<(), CommandError> {
    let rest = call.rest(2, 0, 2)?;
    let n = match rest.as_slice() {
        [] => 10_000,
        [opt, value] if opt.eq_ignore_ascii_case(b"SAMPLE") => {
            let n = args::integer(value)?;
            if n < 1 {
                return Err(CommandError::Text("ERR SAMPLE must be 1 or more".into()));
            }
            n.unsigned_abs()
        }
        [opt, ..] => {
            return Err(CommandError::Text(format!(
                "ERR syntax error, unknown option {} (RING.BALANCE takes SAMPLE n)",
                shown(opt)
            )))
        }
    };
    let params = config::scheme_params().map_err(CommandError::Text)?;
    let inline = config::get(&INLINE_LIMIT);
    let name = call.key_name()?;
    call.read_ring_or_implicit(|ring| {
        let nodes = ring.nodes().len();
        let cost: u64 = [
            Scheme::Jump,
            Scheme::Rendezvous,
            Scheme::MultiProbe,
            Scheme::Bounded,
        ]
        .iter()
        .map(|&s| scheme_cost(s, nodes, &params))
        .sum();
        let work = n.saturating_mul(cost.div_ceil(3).max(1));
        if work > inline {
            return Err(CommandError::Text(format!(
                "ERR SAMPLE {n} over {nodes} nodes is {work} units of work, more than \
                 ringslot.inline-limit ({inline}): use a smaller SAMPLE"
            )));
        }
        let balances = ring.balance_under_all(sample_members(name.as_slice(), n), &params);
        let fields = balances
            .iter()
            .map(|b| {
                (
                    b.scheme.name(),
                    Reply::Map(vec![
                        ("peak_to_mean", Reply::Double(b.peak_to_mean)),
                        ("exact", Reply::Bool(b.exact)),
                    ]),
                )
            })
            .collect();
        call.reply(&Reply::Map(fields));
        Ok(())
    })
}

/// What a `RING.MOVES` evaluates, as planned on the main thread.
enum Plan<'a> {
    /// `SAMPLE n`.
    Sample(u64),
    /// `KEYS pattern`, walked with `reader`'s rights over a database of `size` keys.
    Keys {
        pattern: &'a [u8],
        reader: Reader,
        size: u64,
    },
    /// `SLOTS start end`: this cluster node's `size` keys there, with `reader`'s rights.
    Slots {
        start: u16,
        end: u16,
        reader: Reader,
        size: u64,
    },
}

/// The map `RING.MOVES` replies.
pub(crate) fn what_if_reply(result: &WhatIf) -> Reply<'static> {
    Reply::Map(vec![
        ("members", Reply::count(result.members)),
        ("ideal", Reply::Double(result.ideal)),
        (
            "ring",
            Reply::Map(vec![
                ("moved", Reply::count(result.ring.moved)),
                ("between_old", Reply::count(result.ring.between_old)),
                ("fraction", Reply::Double(result.ring.fraction)),
                ("standard_error", Reply::Double(result.ring.standard_error)),
                ("space", Reply::Double(result.ring_space)),
            ]),
        ),
        (
            "slots",
            Reply::Map(vec![
                ("moved", Reply::count(result.slots.moved)),
                ("between_old", Reply::count(result.slots.between_old)),
                ("fraction", Reply::Double(result.slots.fraction)),
                ("standard_error", Reply::Double(result.slots.standard_error)),
                ("slots_moved", Reply::count(result.slots_moved)),
            ]),
        ),
        (
            "modulo",
            Reply::Map(vec![
                ("moved", Reply::count(result.modulo.moved)),
                ("between_old", Reply::count(result.modulo.between_old)),
                ("fraction", Reply::Double(result.modulo.fraction)),
                (
                    "standard_error",
                    Reply::Double(result.modulo.standard_error),
                ),
            ]),
        ),
    ])
}
