//! `RING.MOVES`: what a change of a ring key's nodes would cost, under the ring, the slot table
//! and modulo or any schemes named, over sample members or the real keys of the database or
//! of this cluster node's slots. Its members' source is built once, with the caller's rights,
//! and the what-if runs inline or in the background ([`background::run`]) by its estimated
//! work ([`cost::what_if`]).

use super::args::{self, Members, WeighBy};
use super::background::{self, Job, Source, Work};
use super::call::Call;
use super::config::{self, INLINE_LIMIT, MAX_SAMPLE};
use super::errors::CommandError;
use super::keys::{self, KeyWalk, Weigh};
use super::live;
use super::reply::Reply;
use crate::engine::cost;
use crate::engine::{Scheme, WhatIf};
use redis_module::{Context, RedisValue};

/// What a weighed key costs a walk, in keys: a `MEMORY USAGE` call and an LFU read besides the
/// key's own reads made `RING.MOVES ... KEYS` over 200000 keys take 2.1 to 3.3 times as long
/// (release build, 2026-12-01), rounded up.
const WEIGHED_KEY_COST: u64 = 4;

/// `RING.MOVES key ADD [WEIGHT w] node [node ...] | DEL node [node ...] | REBALANCE [THRESHOLD
/// t] [WEIGHT node=w ...] [SAMPLE n | KEYS pattern | SLOTS start end] [SCHEMES name ...]
/// [WEIGH BYTES|HITS ...]` -> the what-if map ([`schemes_reply`]; without `SCHEMES`, of the
/// ring, the slot table and modulo). Changes nothing. `WEIGH` (with `KEYS` or `SLOTS`) weighs
/// each key by its memory (`MEMORY USAGE`) and by its accesses (its LFU counter, see
/// [`crate::engine::lfu_accesses`]). Errors: a missing key (naming it), a change the ring
/// refuses, `WEIGH HITS` on a server without an LFU `maxmemory-policy`.
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
    let weigh = Weigh {
        bytes: parsed.weigh.bytes,
        hits: if parsed.weigh.hits {
            Some(lfu_log_factor(&ctx)?)
        } else {
            None
        },
    };
    // A weighed key costs a walk several plain ones.
    let per_key = if weigh.any() { WEIGHED_KEY_COST } else { 1 };
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
            let walk = KeyWalk::slots(start, end, reader, name.as_slice()).weighing(weigh);
            (
                Source::Keys {
                    walk: Box::new(walk),
                    limit: config::get(&MAX_SAMPLE),
                },
                cost::Source::Walk(visited.saturating_mul(per_key)),
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
                    walk: Box::new(KeyWalk::new(pattern, reader)?.weighing(weigh)),
                    limit: config::get(&MAX_SAMPLE),
                },
                cost::Source::Walk(size.saturating_mul(per_key)),
                format!("a walk of the database's {size} keys"),
            )
        }
    };
    let units = cost::what_if(&topo, &parsed.change, &schemes, &params, counted).units();
    let walks = !matches!(counted, cost::Source::Sample(_));
    if units > config::get(&INLINE_LIMIT) || walks {
        // A change the ring refuses is an error now, not after a wait in the background.
        topo.check_change(&parsed.change, limits)?;
    }
    let what = match &parsed.schemes {
        Some(_) => format!("this what-if ({what} with those SCHEMES)"),
        None => format!("this what-if ({what})"),
    };
    let change = parsed.change;
    let weighed = parsed.weigh;
    let sampled = matches!(counted, cost::Source::Sample(_));
    let work: Work = Box::new(move |members| {
        // Loads after the change are kept only when something is weighed.
        let w = if weighed.any() {
            topo.what_if_weighed(&change, members, &schemes, &params, limits)?
        } else {
            topo.what_if(&change, members.map(|(m, _)| m), &schemes, &params, limits)?
        };
        Ok(schemes_reply(&w, weighed, sampled))
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

/// The `lfu-log-factor` of this server, after checking that it keeps LFU counters. Errors:
/// a `maxmemory-policy` that is not an LFU one ([`CommandError::NoLfu`]).
fn lfu_log_factor(ctx: &Context) -> Result<u64, CommandError> {
    let policy = config_value(ctx, "maxmemory-policy")?;
    if !policy.ends_with("-lfu") {
        return Err(CommandError::NoLfu);
    }
    let factor = config_value(ctx, "lfu-log-factor")?;
    factor
        .parse()
        .map_err(|_| CommandError::Redis(format!("ERR lfu-log-factor is {factor}")))
}

/// The value of the server setting `name` (`CONFIG GET name`).
fn config_value(ctx: &Context, name: &str) -> Result<String, CommandError> {
    let text = |v: &RedisValue| match v {
        RedisValue::BulkString(s) | RedisValue::SimpleString(s) => Some(s.clone()),
        RedisValue::StringBuffer(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    };
    let value = match ctx.call("CONFIG", &["GET", name][..])? {
        RedisValue::Array(items) => items.get(1).and_then(text),
        RedisValue::Map(map) => map.values().next().and_then(text),
        _ => None,
    };
    value.ok_or_else(|| CommandError::Redis(format!("ERR CONFIG GET {name} answered nothing")))
}

/// The map of `RING.MOVES`: `members` (and with `WEIGH`, their `bytes` and `hits`), `ideal`,
/// then one map per scheme evaluated, in order: `moved`, `between_old`, `fraction`,
/// `standard_error` (over `SAMPLE` members only: a sampling error, which an exact count of real
/// keys under `KEYS` or `SLOTS` has not), then `space` (the exact moved share of the key space) for the ring and
/// Maglev, `slots_moved` for the slot table; with `WEIGH BYTES`, `moved_bytes`,
/// `bytes_fraction` and `bytes_peak_to_mean_after`; with `WEIGH HITS`, `moved_hits`,
/// `hits_fraction` and `hits_peak_to_mean_after`; with either, `keys_peak_to_mean_after`
/// (each node's load after the change over its fair share by weight, the largest; see
/// [`crate::engine::Loads`]). Fractions are nil when no member was evaluated (a walk that
/// matched nothing) or nothing weighed.
fn schemes_reply(w: &WhatIf, weighed: WeighBy, sampled: bool) -> Reply<'static> {
    let mut fields = vec![("members", Reply::count(w.members))];
    if weighed.bytes {
        fields.push(("bytes", Reply::count(w.bytes)));
    }
    if weighed.hits {
        fields.push(("hits", Reply::count(w.hits)));
    }
    fields.push(("ideal", Reply::Double(w.ideal)));
    let share = |part: u64, of: u64| {
        if of == 0 {
            Reply::Nil
        } else {
            Reply::Double(part as f64 / of as f64)
        }
    };
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
        ];
        if sampled {
            m.push(("standard_error", measured(r.moves.standard_error)));
        }
        // The slot table's exact share is its slots_moved / 16384.
        if let (Some(space), false) = (r.space, r.scheme == Scheme::Slots) {
            m.push(("space", Reply::Double(space)));
        }
        if let Some(slots) = r.slots_moved {
            m.push(("slots_moved", Reply::count(slots)));
        }
        let peaks = r.loads.as_ref().map_or([0.0; 3], |l| l.peak_to_mean);
        let [keys_peak, bytes_peak, hits_peak] = peaks;
        if weighed.bytes {
            m.push(("moved_bytes", Reply::count(r.moves.moved_bytes)));
            m.push(("bytes_fraction", share(r.moves.moved_bytes, w.bytes)));
        }
        if weighed.hits {
            m.push(("moved_hits", Reply::count(r.moves.moved_hits)));
            m.push(("hits_fraction", share(r.moves.moved_hits, w.hits)));
        }
        if weighed.any() {
            m.push(("keys_peak_to_mean_after", measured(keys_peak)));
        }
        let weighs = |total: u64, peak: f64| {
            if total == 0 {
                Reply::Nil
            } else {
                Reply::Double(peak)
            }
        };
        if weighed.bytes {
            m.push(("bytes_peak_to_mean_after", weighs(w.bytes, bytes_peak)));
        }
        if weighed.hits {
            m.push(("hits_peak_to_mean_after", weighs(w.hits, hits_peak)));
        }
        fields.push((r.scheme.name(), Reply::Map(m)));
    }
    Reply::Map(fields)
}
