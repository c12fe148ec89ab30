//! `RING.MOVES`: what a change of a ring key's nodes would cost, under the ring, the slot table
//! and modulo or any schemes named, over sample members or the real keys of the database or
//! of this cluster node's slots. Its members' source is built once, with the caller's rights,
//! and the what-if runs inline or in the background ([`background::run`]) by its estimated
//! work ([`cost::what_if`]).

use super::args::{self, Members};
use super::background::{self, Job, Source, Work};
use super::call::Call;
use super::config::{self, INLINE_LIMIT, MAX_SAMPLE};
use super::errors::CommandError;
use super::keys::{self, KeyWalk};
use super::live;
use super::reply::Reply;
use crate::engine::cost;
use crate::engine::{Scheme, WhatIf};

/// `RING.MOVES key ADD [WEIGHT w] node [node ...] | DEL node [node ...] | REBALANCE [THRESHOLD
/// t] [WEIGHT node=w ...] [SAMPLE n | KEYS pattern | SLOTS start end] [SCHEMES name ...]` ->
/// the what-if map ([`schemes_reply`]; without `SCHEMES`, of the ring,
/// the slot table and modulo). Changes nothing. Errors: a missing key (naming it), a change
/// the ring refuses.
///
/// Work up to `ringslot.inline-limit` (estimated by [`cost::what_if`]: the points the change
/// moves, what the schemes build, and the members, or the keys of the database a `KEYS` walk
/// visits) runs inline; more runs in the background ([`background`]), except where the client
/// cannot be blocked (`MULTI`, scripts), where it is refused.
pub fn moves(call: &Call) -> Result<(), CommandError> {
    let rest = call.rest(2, 1, usize::MAX)?;
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
        config::check_maglev_size(&params)?;
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
            let (size, big) = live::own_slots(call, start, end)?;
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
        let w = topo.what_if(&change, members, &schemes, &params, limits)?;
        Ok(schemes_reply(&w))
    });
    background::run(
        call,
        Job {
            command: "RING.MOVES",
            source,
            work,
        },
        units,
        &what,
    )
}

/// The map of `RING.MOVES`: `members`, `ideal`, then one map per scheme evaluated, in order:
/// `moved`, `between_old`, `fraction`, `standard_error`, then `space` (the exact moved share
/// of the key space) for the ring and Maglev, `slots_moved` for the slot table. Fractions are
/// nil when no member was evaluated (a walk that matched nothing).
fn schemes_reply(w: &WhatIf) -> Reply<'static> {
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
