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
use super::background::{self, Job, Source, Work};
use super::call::{Call, CommandError};
use super::cluster;
use super::config::{self, DEFAULT_VNODES, INLINE_LIMIT, MAX_SAMPLE};
use super::keys::{self, KeyWalk};
use super::reply::Reply;
use crate::engine::cost;
use crate::engine::error::shown;
use crate::engine::{
    key_slot, sample_members, EngineError, Flavour, Limits, Scheme, SchemesWhatIf, Topology,
};
use redis_module::ContextFlags;
use std::sync::atomic::Ordering;

/// `ringslot.max-points` and `ringslot.max-nodes`, except for commands replayed from the AOF
/// or sent by a master, which were accepted once already and must rebuild the same ring
/// whatever this server's settings.
fn limits(call: &Call) -> Limits {
    if call
        .flags()
        .intersects(ContextFlags::REPLICATED | ContextFlags::LOADING)
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

/// Runs `work` over `source` for the call: on Redis' main thread when its estimated `work`
/// fits in `ringslot.inline-limit`, else in the background ([`background`]), except where the
/// client cannot be blocked (`MULTI`, scripts), where it is refused with an error that names
/// the limit and says what costs (`what`).
fn run_job(
    call: &Call,
    command: &'static str,
    units: u64,
    what: &str,
    source: Source,
    work: Work,
) -> Result<(), CommandError> {
    let inline = config::get(&INLINE_LIMIT);
    if units > inline {
        let blocked = ContextFlags::MULTI | ContextFlags::LUA | ContextFlags::DENY_BLOCKING;
        if call.flags().intersects(blocked) {
            return Err(CommandError::Text(format!(
                "ERR {what} is about {units} units of work, more than ringslot.inline-limit \
                 ({inline}), the most {command} does on Redis' main thread, and here (MULTI, a \
                 script) it cannot run in the background"
            )));
        }
        let job = Job {
            command,
            source,
            work,
        };
        // SAFETY: the live context of this call, on the main thread, which may block.
        return unsafe { background::start(call.context().ctx, job) };
    }
    let reply = match source {
        Source::Nothing => work(&mut std::iter::empty())?,
        Source::Sample { name, count } => work(&mut sample_members(&name, count))?,
        Source::Keys { walk, .. } => work(&mut walk_all(call, walk)?.into_iter())?,
    };
    call.reply(&reply);
    Ok(())
}

/// `RING.MOVES key ADD|DEL node [WEIGHT w] [SAMPLE n | KEYS pattern | SLOTS start end]
/// [SCHEMES name ...]` -> the what-if map ([`schemes_reply`]; without `SCHEMES`, of the ring,
/// the slot table and modulo). Changes nothing. Errors: a missing key (naming it), a change
/// the ring refuses.
///
/// Work up to `ringslot.inline-limit` (estimated by [`cost::what_if`]: the points the change
/// moves, what the schemes build, and the members, or the keys of the database a `KEYS` walk
/// visits) runs inline; more runs in the background ([`background`]), except where the client
/// cannot be blocked (`MULTI`, scripts), where it is refused.
pub fn moves(call: &Call) -> Result<(), CommandError> {
    let rest = call.rest(2, 2, usize::MAX)?;
    let parsed = args::parse_moves(&rest, config::get(&MAX_SAMPLE))?;
    let limits = config::limits();
    let ctx = call.context();
    let name = call.key_name()?;
    let topo = call.ring_snapshot()?;
    let schemes: Vec<Scheme> = parsed
        .schemes
        .clone()
        .unwrap_or_else(|| Scheme::DEFAULT.to_vec());
    let params = config::scheme_params();
    if schemes.contains(&Scheme::Maglev) {
        config::check_maglev_size(&params).map_err(CommandError::Text)?;
    }
    // The walk's rights are the caller's, checked before anything runs.
    let (source, counted, what) = match parsed.members {
        Members::Sample(n) => (
            Source::Sample {
                name: name.as_slice().to_vec(),
                count: n,
            },
            cost::Source::Sample(n),
            format!("SAMPLE {n}"),
        ),
        Members::Slots(start, end) => {
            // SAFETY: the live context of this call, on the main thread.
            let reader = unsafe { keys::caller(ctx.ctx) };
            reader.check_scan()?;
            let (size, big) = cluster::own_slots(call, start, end)?;
            // Slots too big to read at once are found by a walk of every key.
            // SAFETY: the live context of this call, on the main thread.
            let visited = size
                + if big {
                    unsafe { keys::db_size(ctx.ctx) }
                } else {
                    0
                };
            let walk = KeyWalk::slots(start, end, reader, name.as_slice());
            (
                Source::Keys {
                    walk,
                    limit: config::get(&MAX_SAMPLE),
                },
                cost::Source::Walk(visited),
                format!("SLOTS {start} {end} ({size} keys)"),
            )
        }
        Members::Keys(pattern) => {
            // SAFETY: the live context of this call, on the main thread.
            let reader = unsafe { keys::caller(ctx.ctx) };
            reader.check_scan()?;
            // SAFETY: as above.
            let size = unsafe { keys::db_size(ctx.ctx) };
            (
                Source::Keys {
                    walk: KeyWalk::new(pattern, reader)?,
                    limit: config::get(&MAX_SAMPLE),
                },
                cost::Source::Walk(size),
                format!("a walk of the database's {size} keys"),
            )
        }
    };
    let units = cost::what_if(&topo, &parsed.change, &schemes, &params, counted).units();
    if units > config::get(&INLINE_LIMIT) {
        // A change the ring refuses is an error now, not after a wait in the background.
        topo.check_change(&parsed.change, limits)?;
    }
    let what = match &parsed.schemes {
        Some(_) => format!("this what-if ({what} with those SCHEMES)"),
        None => format!("this what-if ({what})"),
    };
    let change = parsed.change;
    let work: Work = Box::new(move |members| {
        let w = topo.what_if_schemes(&change, members, &schemes, &params, limits)?;
        Ok(schemes_reply(&w))
    });
    run_job(call, "RING.MOVES", units, &what, source, work)
}

/// The map of `RING.MOVES`: `members`, `ideal`, then one map per scheme evaluated, in order:
/// `moved`, `between_old`, `fraction`, `standard_error`, then `space` (the exact moved share
/// of the key space) for the ring and Maglev, `slots_moved` for the slot table. Fractions are
/// nil when no member was evaluated (a walk that matched nothing).
fn schemes_reply(w: &SchemesWhatIf) -> Reply<'static> {
    let mut fields = vec![
        ("members", Reply::count(w.members)),
        ("ideal", Reply::Double(w.ideal)),
    ];
    let measured = |f: f64| {
        if w.members == 0 {
            Reply::Nil
        } else {
            Reply::Double(f)
        }
    };
    for r in &w.schemes {
        let mut m = vec![
            ("moved", Reply::count(r.moves.moved)),
            ("between_old", Reply::count(r.moves.between_old)),
            ("fraction", measured(r.moves.fraction)),
            ("standard_error", measured(r.moves.standard_error)),
        ];
        // The slot table's exact share is its slots_moved / 16384.
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
    config::check_maglev_size(&params).map_err(CommandError::Text)?;
    let topo = call.ring_snapshot()?;
    let units = cost::owners(&topo, &params).units();
    let what = format!(
        "RING.OWNERS on {} nodes (a Maglev table, multi-probe points)",
        topo.nodes().len()
    );
    let work: Work = Box::new(move |_| {
        let owners = topo.owners_under_all(&member, &params);
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
    run_job(call, "RING.OWNERS", units, &what, Source::Nothing, work)
}

/// `RING.BALANCE key [SAMPLE n]` -> a map of scheme -> map of `peak_to_mean` (the largest
/// node's share over its weight's share) and `exact` (true for the ring, the slot table,
/// Maglev and modulo, which are computed from their structure; false for jump, rendezvous,
/// multi-probe and bounded loads, estimated over the sample members, default 10000). Past
/// `ringslot.inline-limit` ([`cost::balance`]) in the background. Errors: a missing key, a
/// `ringslot.maglev-size` that is not a prime.
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
    let max_sample = config::get(&MAX_SAMPLE);
    if n > max_sample {
        return Err(EngineError::TooManyMembers {
            members: n,
            limit: max_sample,
        }
        .into());
    }
    let params = config::scheme_params();
    config::check_maglev_size(&params).map_err(CommandError::Text)?;
    let name = call.key_name()?;
    let topo = call.ring_snapshot()?;
    let units = cost::balance(&topo, &params, n).units();
    let what = format!(
        "RING.BALANCE on {} nodes with SAMPLE {n}",
        topo.nodes().len()
    );
    let work: Work = Box::new(move |members| {
        let balances = topo.balance_under_all(members, &params);
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
        Ok(Reply::Map(fields))
    });
    let source = Source::Sample {
        name: name.as_slice().to_vec(),
        count: n,
    };
    run_job(call, "RING.BALANCE", units, &what, source, work)
}
