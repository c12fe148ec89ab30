//! Redis-style argument parsing for the RING.* commands: case-insensitive keywords, each
//! consuming its value, and errors that say what is wrong ([`ArgError`], in the error
//! catalogue). Everything here works on byte slices, so it is tested without a server.

use super::errors::{flavour_names, ArgError};
use crate::engine::change::DEFAULT_THRESHOLD;
use crate::engine::error::shown;
use crate::engine::topology::MAX_WEIGHT;
use crate::engine::{Change, EngineError, Flavour, Scheme, DEFAULT_SAMPLE};

/// `ERR syntax error, unknown option '<arg>' (<command> takes <takes>)`.
fn unknown(arg: &[u8], command: &str, takes: &str) -> ArgError {
    ArgError::Syntax(format!(
        "unknown option {} ({command} takes {takes})",
        shown(arg)
    ))
}

/// `ERR syntax error, <option> needs a value`.
fn needs_value(option: &str) -> ArgError {
    ArgError::Syntax(format!("{option} needs a value"))
}

/// Parses a signed 64-bit integer exactly as Redis' `string2ll` does: an optional `-`, then
/// decimal digits without a leading zero (`0` alone is fine), no sign `+`, no spaces, no `-0`.
pub fn parse_integer(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    match digits {
        [] => return None,
        [b'0'] => return (!negative).then_some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    // Accumulate negatively so that i64::MIN parses.
    let mut value: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(i64::from(b - b'0'))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

/// [`parse_integer`] with the core's error.
pub fn integer(bytes: &[u8]) -> Result<i64, ArgError> {
    parse_integer(bytes).ok_or(ArgError::NotInteger)
}

/// Whether `arg` is the keyword `word` (ASCII case-insensitive).
pub fn is_keyword(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// Options of `RING.CREATE key [COMPAT name] [VNODES n] [HASHTAG]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateOptions {
    /// The flavour (`native` unless `COMPAT`).
    pub flavour: Flavour,
    /// `VNODES`, unchecked (the engine checks its range and the flavour).
    pub vnodes: Option<i64>,
    /// `HASHTAG` was given.
    pub hashtag: bool,
}

/// Parses the options after the key of `RING.CREATE`. Options may come in any order; a
/// repeated option takes its last value, as in the core.
pub fn parse_create(opts: &[&[u8]]) -> Result<CreateOptions, ArgError> {
    let mut parsed = CreateOptions {
        flavour: Flavour::Native,
        vnodes: None,
        hashtag: false,
    };
    let mut rest = opts.iter();
    while let Some(&opt) = rest.next() {
        if is_keyword(opt, "COMPAT") {
            let name = rest.next().ok_or_else(|| {
                ArgError::Syntax(format!("COMPAT needs a value: one of {}", flavour_names()))
            })?;
            parsed.flavour = Flavour::from_name(name).ok_or(ArgError::UnknownCompat)?;
        } else if is_keyword(opt, "VNODES") {
            parsed.vnodes = Some(integer(rest.next().ok_or_else(|| needs_value("VNODES"))?)?);
        } else if is_keyword(opt, "HASHTAG") {
            parsed.hashtag = true;
        } else {
            return Err(unknown(
                opt,
                "RING.CREATE",
                "COMPAT name, VNODES n and HASHTAG",
            ));
        }
    }
    Ok(parsed)
}

/// Arguments of `RING.ADD key [WEIGHT w] node [node ...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddArgs<'a> {
    /// `WEIGHT`, unchecked (the engine checks its range).
    pub weight: Option<i64>,
    /// The nodes named, at least one.
    pub nodes: Vec<&'a [u8]>,
}

/// Parses the arguments after the key of `RING.ADD`. `WEIGHT w` comes first, as options do
/// in `ZADD`. Without it, an argument `WEIGHT` is refused rather than taken for a node (a
/// forgotten value, or options after the nodes); a node really named `WEIGHT` is added after
/// an explicit `WEIGHT w`.
pub fn parse_add<'a>(rest: &[&'a [u8]]) -> Result<AddArgs<'a>, ArgError> {
    match rest {
        [first, w, nodes @ ..] if is_keyword(first, "WEIGHT") => {
            let weight = Some(integer(w)?);
            if nodes.is_empty() {
                return Err(ArgError::Syntax(
                    "RING.ADD needs a node after WEIGHT w".into(),
                ));
            }
            Ok(AddArgs {
                weight,
                nodes: nodes.to_vec(),
            })
        }
        [first] if is_keyword(first, "WEIGHT") => Err(needs_value("WEIGHT")),
        [] => Err(ArgError::Syntax("RING.ADD needs a node".into())),
        nodes if nodes.iter().any(|n| is_keyword(n, "WEIGHT")) => Err(ArgError::Syntax(
            "WEIGHT w goes before the nodes (to add a node named WEIGHT, give WEIGHT w first)"
                .into(),
        )),
        nodes => Ok(AddArgs {
            weight: None,
            nodes: nodes.to_vec(),
        }),
    }
}

/// Parses the options after the member of `RING.GET`: nothing, or `COUNT n` with `n >= 1`;
/// a repeated `COUNT` takes its last value, as the core's options do. Returns the count
/// (`None`: a single owner is asked for).
pub fn parse_get(opts: &[&[u8]]) -> Result<Option<usize>, ArgError> {
    let mut count = None;
    let mut rest = opts.iter();
    while let Some(&opt) = rest.next() {
        if !is_keyword(opt, "COUNT") {
            return Err(unknown(opt, "RING.GET", "COUNT n"));
        }
        let n = integer(rest.next().ok_or_else(|| needs_value("COUNT"))?)?;
        if n < 1 {
            return Err(ArgError::OutOfRange {
                option: "COUNT",
                min: 1,
                max: i64::MAX,
            });
        }
        count = Some(usize::try_from(n).unwrap_or(usize::MAX));
    }
    Ok(count)
}

/// The sample of `RING.BALANCE` when none is given.
pub const BALANCE_SAMPLE: u64 = 10_000;

/// Parses the options after the key of `RING.BALANCE`: nothing, or `SAMPLE n` with
/// `1 <= n <= max_sample`; a repeated `SAMPLE` takes its last value. Returns the sample size.
pub fn parse_balance(opts: &[&[u8]], max_sample: u64) -> Result<u64, ArgError> {
    let mut n = BALANCE_SAMPLE;
    let mut rest = opts.iter();
    while let Some(&opt) = rest.next() {
        if !is_keyword(opt, "SAMPLE") {
            return Err(unknown(opt, "RING.BALANCE", "SAMPLE n"));
        }
        n = sample_size(
            rest.next().ok_or_else(|| needs_value("SAMPLE"))?,
            max_sample,
        )?;
    }
    within_max_sample(n, max_sample)
}

/// `n` members, when `ringslot.max-sample` allows that many (else an error naming it).
fn within_max_sample(n: u64, max_sample: u64) -> Result<u64, ArgError> {
    if n > max_sample {
        return Err(EngineError::TooManyMembers {
            members: n,
            limit: max_sample,
        }
        .into());
    }
    Ok(n)
}

/// A `SAMPLE` value: `1..=max_sample` (past it the error names `ringslot.max-sample`).
fn sample_size(value: &[u8], max_sample: u64) -> Result<u64, ArgError> {
    let n = integer(value)?;
    if n < 1 {
        return Err(ArgError::OutOfRange {
            option: "SAMPLE",
            min: 1,
            max: i64::try_from(max_sample).unwrap_or(i64::MAX),
        });
    }
    within_max_sample(n.unsigned_abs(), max_sample)
}

/// What `RING.MOVES` evaluates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Members<'a> {
    /// `SAMPLE n` (or the default): the sample members of the ring (see
    /// [`crate::engine::sample`]).
    Sample(u64),
    /// `KEYS pattern`: the keys of the current database matching the glob.
    Keys(&'a [u8]),
    /// `SLOTS start end`: this cluster node's keys in slots `start..=end`.
    Slots(u16, u16),
}

/// Arguments of `RING.MOVES key <change> [SAMPLE n | KEYS pattern | SLOTS start end] [SCHEMES
/// name ...]` (the change as [`parse_change`] takes it).
#[derive(Debug, Clone, PartialEq)]
pub struct MovesArgs<'a> {
    /// The change to evaluate.
    pub change: Change,
    /// The members to evaluate it over.
    pub members: Members<'a>,
    /// The schemes of `SCHEMES name ...`, in the order named; `None` without the option (the
    /// reply of ring, slots and modulo).
    pub schemes: Option<Vec<Scheme>>,
    /// `WEIGH BYTES | HITS` (one or both): what each key weighs beside its count.
    pub weigh: WeighBy,
}

/// What a weighted what-if weighs each key by (`WEIGH BYTES HITS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WeighBy {
    /// `BYTES`: the key's memory, as `MEMORY USAGE` counts it.
    pub bytes: bool,
    /// `HITS`: the key's accesses, estimated from its LFU counter.
    pub hits: bool,
}

impl WeighBy {
    /// Whether anything is weighed.
    pub fn any(self) -> bool {
        self.bytes || self.hits
    }
}

/// The option keywords that end the node list of a change (in every command that takes a
/// change, so that a list means the same in `RING.PLAN` and `RING.MOVES`); a node named like
/// one is given with `NODES n`.
const CHANGE_KEYWORDS: [&str; 8] = [
    "WEIGHT",
    "NODES",
    "THRESHOLD",
    "SAMPLE",
    "KEYS",
    "SLOTS",
    "SCHEMES",
    "WEIGH",
];

/// Whether `arg` is one of [`CHANGE_KEYWORDS`].
fn ends_node_list(arg: &[u8]) -> bool {
    CHANGE_KEYWORDS.iter().any(|k| is_keyword(arg, k))
}

/// The syntax of a change, for messages.
const CHANGE_SYNTAX: &str = "ADD [WEIGHT w] node [node ...], DEL node [node ...] or REBALANCE \
                             [THRESHOLD t] [WEIGHT node=w ...]";

/// A finite float, as `--cluster-threshold` takes it.
fn float(bytes: &[u8]) -> Result<f64, ArgError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|f| f.is_finite())
        .ok_or(ArgError::NotFloat)
}

/// One `node=w` of `REBALANCE WEIGHT` (split at the last `=`, as a weight has none; `w` an
/// integer `0..=MAX_WEIGHT`, 0 draining the node).
fn node_weight(item: &[u8]) -> Result<(Vec<u8>, u32), ArgError> {
    let bad = || {
        ArgError::Syntax(format!(
            "REBALANCE WEIGHT takes node=w items (w an integer, 0 to drain the node), not {}",
            shown(item)
        ))
    };
    let at = item.iter().rposition(|&b| b == b'=').ok_or_else(bad)?;
    let (name, w) = (
        item.get(..at).ok_or_else(bad)?,
        item.get(at + 1..).ok_or_else(bad)?,
    );
    if name.is_empty() {
        return Err(bad());
    }
    let w = parse_integer(w).ok_or_else(bad)?;
    let w = u32::try_from(w)
        .ok()
        .filter(|&w| w <= MAX_WEIGHT)
        .ok_or(ArgError::OutOfRange {
            option: "WEIGHT",
            min: 0,
            max: i64::from(MAX_WEIGHT),
        })?;
    Ok((name.to_vec(), w))
}

/// Parses the change at the start of `rest` (of `RING.MOVES` and `RING.PLAN`), with the
/// caller's options after it, which `other` parses: it gets each option and the rest of the
/// arguments, and returns whether it took the option. `takes` lists the caller's options for
/// messages (", SAMPLE n, ..." or empty).
///
/// - `ADD [WEIGHT w] node [node ...]`: the node list ends at the first option keyword
///   ([`CHANGE_KEYWORDS`], any case) or at the end; `NODES n` before the names takes exactly
///   `n` names, whatever they spell. `WEIGHT w` may also come after the nodes (`ADD node
///   WEIGHT w`, the first syntax), but only once.
/// - `DEL node [node ...]` (or `DEL NODES n ...`).
/// - `REBALANCE [THRESHOLD t] [WEIGHT node=w ...]`: redis-cli's `--cluster-threshold` and
///   `--cluster-weight` (integer weights).
fn parse_change<'a>(
    rest: &[&'a [u8]],
    command: &str,
    takes: &str,
    mut other: impl FnMut(&'a [u8], &mut std::slice::Iter<'_, &'a [u8]>) -> Result<bool, ArgError>,
) -> Result<Change, ArgError> {
    let Some((&op, args)) = rest.split_first() else {
        return Err(ArgError::Syntax(format!("the change is {CHANGE_SYNTAX}")));
    };
    let kind = ["ADD", "DEL", "REBALANCE"]
        .into_iter()
        .find(|k| is_keyword(op, k))
        .ok_or_else(|| {
            ArgError::Syntax(format!("the change is {CHANGE_SYNTAX}, not {}", shown(op)))
        })?;
    let mut opts = args.iter();
    let mut weight: Option<i64> = None;
    let mut nodes: Vec<Vec<u8>> = Vec::new();
    let mut threshold: Option<f64> = None;
    let mut weights: Vec<(Vec<u8>, u32)> = Vec::new();
    if kind != "REBALANCE" {
        // ADD's leading WEIGHT w.
        if kind == "ADD"
            && opts
                .as_slice()
                .first()
                .is_some_and(|a| is_keyword(a, "WEIGHT"))
        {
            opts.next();
            weight = Some(integer(opts.next().ok_or_else(|| needs_value("WEIGHT"))?)?);
        }
        if opts
            .as_slice()
            .first()
            .is_some_and(|a| is_keyword(a, "NODES"))
        {
            opts.next();
            let n = integer(opts.next().ok_or_else(|| needs_value("NODES"))?)?;
            let left = opts.as_slice().len();
            let n = usize::try_from(n)
                .ok()
                .filter(|&n| n >= 1 && n <= left)
                .ok_or_else(|| {
                    ArgError::Syntax(format!(
                        "NODES n takes 1 to {left} names here (the arguments after it)"
                    ))
                })?;
            nodes.extend(opts.by_ref().take(n).map(|a| a.to_vec()));
        } else {
            while let Some(&a) = opts.as_slice().first() {
                if ends_node_list(a) {
                    break;
                }
                nodes.push(a.to_vec());
                opts.next();
            }
        }
        if nodes.is_empty() {
            return Err(ArgError::Syntax(format!(
                "{kind} needs one or more nodes (a node named like an option is given with \
                 NODES n name ...)"
            )));
        }
    }
    while let Some(&opt) = opts.next() {
        if is_keyword(opt, "WEIGHT") && kind == "ADD" {
            if weight.is_some() {
                return Err(ArgError::Syntax("WEIGHT is given twice".into()));
            }
            weight = Some(integer(opts.next().ok_or_else(|| needs_value("WEIGHT"))?)?);
        } else if is_keyword(opt, "WEIGHT") && kind == "DEL" {
            return Err(ArgError::Syntax(
                "WEIGHT goes with ADD only (DEL removes the nodes)".into(),
            ));
        } else if is_keyword(opt, "WEIGHT") && kind == "REBALANCE" {
            let before = weights.len();
            while let Some(&item) = opts.as_slice().first() {
                if ends_node_list(item) && !item.contains(&b'=') {
                    break;
                }
                weights.push(node_weight(item)?);
                opts.next();
            }
            if weights.len() == before {
                return Err(needs_value("WEIGHT"));
            }
        } else if is_keyword(opt, "THRESHOLD") && kind == "REBALANCE" {
            threshold = Some(float(opts.next().ok_or_else(|| needs_value("THRESHOLD"))?)?);
        } else if !other(opt, &mut opts)? {
            let own = match kind {
                "ADD" => "WEIGHT w",
                "DEL" => "",
                _ => "THRESHOLD t, WEIGHT node=w ...",
            };
            let list = format!("{own}{takes}");
            let list = list.trim_start_matches(", ");
            if list.is_empty() {
                return Err(ArgError::Syntax(format!(
                    "unknown option {} ({command} takes nothing after DEL node [node ...]; \
                     a node named like an option is given with NODES n name ...)",
                    shown(opt)
                )));
            }
            return Err(unknown(opt, command, list));
        }
    }
    Ok(match kind {
        "ADD" => Change::Add { nodes, weight },
        "DEL" => Change::Del { nodes },
        _ => Change::Rebalance {
            threshold: threshold.unwrap_or(DEFAULT_THRESHOLD),
            weights,
        },
    })
}

/// Parses the arguments after the key of `RING.PLAN`: the change alone.
pub fn parse_plan(rest: &[&[u8]]) -> Result<Change, ArgError> {
    parse_change(rest, "RING.PLAN", "", |_, _| Ok(false))
}

/// A slot number, `0..=16383`.
fn slot(bytes: &[u8]) -> Result<u16, ArgError> {
    let n = integer(bytes)?;
    u16::try_from(n)
        .ok()
        .filter(|&s| usize::from(s) < crate::engine::SLOT_COUNT)
        .ok_or(ArgError::OutOfRange {
            option: "SLOTS",
            min: 0,
            max: crate::engine::SLOT_COUNT as i64 - 1,
        })
}

/// Parses the arguments after the key of `RING.MOVES`. `WEIGHT` goes with `ADD` only (on a
/// node of the ring it evaluates a re-weight); `SAMPLE`, `KEYS` and `SLOTS` exclude each
/// other. `SAMPLE` must be `1..=max_sample`; above `max_sample` the error names
/// `ringslot.max-sample`, and so does the default sample when it is larger than the limit.
pub fn parse_moves<'a>(rest: &[&'a [u8]], max_sample: u64) -> Result<MovesArgs<'a>, ArgError> {
    let mut members: Option<Members<'a>> = None;
    let mut schemes: Option<Vec<Scheme>> = None;
    let mut weigh = WeighBy::default();
    let exclusive = || ArgError::Syntax("SAMPLE, KEYS and SLOTS exclude each other".into());
    let change = parse_change(
        rest,
        "RING.MOVES",
        ", SAMPLE n, KEYS pattern, SLOTS start end, SCHEMES name ... and WEIGH BYTES|HITS",
        |opt, opts| {
            if is_keyword(opt, "WEIGH") {
                let mut any = false;
                while let Some(&what) = opts.as_slice().first() {
                    if is_keyword(what, "BYTES") {
                        weigh.bytes = true;
                    } else if is_keyword(what, "HITS") {
                        weigh.hits = true;
                    } else {
                        break;
                    }
                    any = true;
                    opts.next();
                }
                if !any {
                    return Err(ArgError::Syntax("WEIGH needs BYTES, HITS or both".into()));
                }
                return Ok(true);
            }
            if is_keyword(opt, "SCHEMES") {
                let mut list: Vec<Scheme> = Vec::new();
                while let Some(&name) = opts.as_slice().first() {
                    // `slots` is a scheme and `SLOTS start end` an option: followed by a
                    // number it is the option (no scheme is named by a number).
                    let option_follows = opts
                        .as_slice()
                        .get(1)
                        .is_some_and(|next| parse_integer(next).is_some());
                    if is_keyword(name, "SLOTS") && option_follows {
                        break;
                    }
                    if is_keyword(name, "ALL") {
                        list.extend(Scheme::ALL);
                    } else if let Some(s) = Scheme::from_name(name) {
                        list.push(s);
                    } else {
                        break;
                    }
                    opts.next();
                }
                if list.is_empty() {
                    let names: Vec<&str> = Scheme::ALL.iter().map(|s| s.name()).collect();
                    return Err(ArgError::Syntax(format!(
                        "SCHEMES needs one or more of {} (or ALL)",
                        names.join(", ")
                    )));
                }
                let mut unique: Vec<Scheme> = Vec::new();
                for s in list {
                    if !unique.contains(&s) {
                        unique.push(s);
                    }
                }
                schemes = Some(unique);
                return Ok(true);
            }
            let source = if is_keyword(opt, "SAMPLE") {
                let value = opts.next().ok_or_else(|| needs_value("SAMPLE"))?;
                Members::Sample(sample_size(value, max_sample)?)
            } else if is_keyword(opt, "KEYS") {
                let pattern = opts
                    .next()
                    .ok_or_else(|| ArgError::Syntax("KEYS needs a pattern".into()))?;
                Members::Keys(pattern)
            } else if is_keyword(opt, "SLOTS") {
                let needs = || ArgError::Syntax("SLOTS needs a start and an end slot".into());
                let start = slot(opts.next().ok_or_else(needs)?)?;
                let end = slot(opts.next().ok_or_else(needs)?)?;
                if start > end {
                    return Err(ArgError::Syntax(format!(
                        "SLOTS {start} {end}: the start must not come after the end"
                    )));
                }
                Members::Slots(start, end)
            } else {
                return Ok(false);
            };
            if members
                .as_ref()
                .is_some_and(|m| std::mem::discriminant(m) != std::mem::discriminant(&source))
            {
                return Err(exclusive());
            }
            members = Some(source);
            Ok(true)
        },
    )?;
    let members = match members {
        Some(m) => m,
        None if DEFAULT_SAMPLE > max_sample => {
            return Err(ArgError::DefaultSample { limit: max_sample })
        }
        None => Members::Sample(DEFAULT_SAMPLE),
    };
    if weigh.any() && matches!(members, Members::Sample(_)) {
        return Err(ArgError::Syntax(
            "WEIGH needs real keys (KEYS pattern or SLOTS start end): sample members have no \
             bytes or hits"
                .into(),
        ));
    }
    Ok(MovesArgs {
        change,
        members,
        schemes,
        weigh,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(args: &[&'static str]) -> Vec<&'static [u8]> {
        args.iter().map(|a| a.as_bytes()).collect()
    }

    fn syntax(hint: &str) -> Result<(), String> {
        Err(format!("ERR syntax error, {hint}"))
    }

    fn text<T>(r: Result<T, ArgError>) -> Result<(), String> {
        r.map(|_| ()).map_err(|e| e.to_string())
    }

    #[test]
    fn integers_follow_string2ll() {
        assert_eq!(parse_integer(b"0"), Some(0));
        assert_eq!(parse_integer(b"42"), Some(42));
        assert_eq!(parse_integer(b"-7"), Some(-7));
        assert_eq!(parse_integer(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_integer(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b"01",
            b"-0",
            b" 1",
            b"1 ",
            b"1.5",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"abc",
            b"\xff",
        ] {
            assert_eq!(parse_integer(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn error_texts() {
        assert_eq!(
            ArgError::NotInteger.to_string(),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            ArgError::OutOfRange {
                option: "SAMPLE",
                min: 1,
                max: 10
            }
            .to_string(),
            "ERR SAMPLE must be between 1 and 10"
        );
        assert_eq!(
            ArgError::OutOfRange {
                option: "COUNT",
                min: 1,
                max: i64::MAX
            }
            .to_string(),
            "ERR COUNT must be 1 or more"
        );
        assert_eq!(
            ArgError::UnknownCompat.to_string(),
            "ERR COMPAT must be one of native, ketama, groupcache, native-fnv, nginx, predis, predis-ketama, redis-rb, haproxy, haproxy-crc32, envoy-ring, envoy-redis, python-memcached, go-redis-ring, mcrouter-ch3, envoy-maglev, pymemcache"
        );
    }

    #[test]
    fn create_options() {
        let o = parse_create(&v(&["compat", "KETAMA", "hashtag"])).unwrap();
        assert_eq!(o.flavour, Flavour::Ketama);
        assert!(o.hashtag);
        assert_eq!(o.vnodes, None);
        let o = parse_create(&v(&["VNODES", "10", "vnodes", "20"])).unwrap();
        assert_eq!(o.vnodes, Some(20));
        assert_eq!(
            text(parse_create(&v(&["VNODES"]))),
            syntax("VNODES needs a value")
        );
        assert_eq!(
            text(parse_create(&v(&["COMPAT"]))),
            syntax("COMPAT needs a value: one of native, ketama, groupcache, native-fnv, nginx, predis, predis-ketama, redis-rb, haproxy, haproxy-crc32, envoy-ring, envoy-redis, python-memcached, go-redis-ring, mcrouter-ch3, envoy-maglev, pymemcache")
        );
        assert_eq!(
            parse_create(&v(&["VNODES", "x"])),
            Err(ArgError::NotInteger)
        );
        assert_eq!(
            parse_create(&v(&["COMPAT", "x"])),
            Err(ArgError::UnknownCompat)
        );
        assert_eq!(
            text(parse_create(&v(&["FOO"]))),
            syntax("unknown option 'FOO' (RING.CREATE takes COMPAT name, VNODES n and HASHTAG)")
        );
    }

    #[test]
    fn add_arguments() {
        let a = parse_add(&v(&["a", "b"])).unwrap();
        assert_eq!((a.weight, a.nodes.len()), (None, 2));
        let a = parse_add(&v(&["weight", "3", "a"])).unwrap();
        assert_eq!((a.weight, a.nodes), (Some(3), vec![&b"a"[..]]));
        // A node named like the keyword, after an explicit WEIGHT.
        let a = parse_add(&v(&["WEIGHT", "1", "WEIGHT"])).unwrap();
        assert_eq!(a.nodes, vec![&b"WEIGHT"[..]]);
        // A forgotten value is not a node.
        assert_eq!(
            text(parse_add(&v(&["WEIGHT"]))),
            syntax("WEIGHT needs a value")
        );
        let late = syntax(
            "WEIGHT w goes before the nodes (to add a node named WEIGHT, give WEIGHT w first)",
        );
        assert_eq!(text(parse_add(&v(&["a", "WEIGHT", "2"]))), late);
        assert_eq!(text(parse_add(&v(&["a", "weight"]))), late);
        assert_eq!(
            text(parse_add(&v(&["WEIGHT", "3"]))),
            syntax("RING.ADD needs a node after WEIGHT w")
        );
        assert_eq!(
            parse_add(&v(&["WEIGHT", "x", "a"])),
            Err(ArgError::NotInteger)
        );
        assert_eq!(text(parse_add(&v(&[]))), syntax("RING.ADD needs a node"));
    }

    #[test]
    fn get_options() {
        assert_eq!(parse_get(&v(&[])), Ok(None));
        assert_eq!(parse_get(&v(&["count", "3"])), Ok(Some(3)));
        // A repeated option takes its last value, as the core's do.
        assert_eq!(parse_get(&v(&["COUNT", "1", "COUNT", "2"])), Ok(Some(2)));
        assert!(matches!(
            parse_get(&v(&["COUNT", "0"])),
            Err(ArgError::OutOfRange { .. })
        ));
        assert_eq!(
            text(parse_get(&v(&["COUNT"]))),
            syntax("COUNT needs a value")
        );
        assert_eq!(
            text(parse_get(&v(&["COUNT", "1", "x"]))),
            syntax("unknown option 'x' (RING.GET takes COUNT n)")
        );
        assert_eq!(
            text(parse_get(&v(&["LIMIT", "1"]))),
            syntax("unknown option 'LIMIT' (RING.GET takes COUNT n)")
        );
    }

    #[test]
    fn balance_options() {
        assert_eq!(parse_balance(&v(&[]), 100_000), Ok(BALANCE_SAMPLE));
        assert_eq!(parse_balance(&v(&["sample", "7"]), 100), Ok(7));
        assert_eq!(
            parse_balance(&v(&["SAMPLE", "7", "SAMPLE", "9"]), 100),
            Ok(9)
        );
        assert_eq!(
            text(parse_balance(&v(&["SAMPLE", "0"]), 100)),
            Err("ERR SAMPLE must be between 1 and 100".into())
        );
        assert_eq!(
            text(parse_balance(&v(&["SAMPLE", "101"]), 100)),
            Err("ERR 101 members to evaluate, more than ringslot.max-sample (100)".into())
        );
        assert_eq!(
            text(parse_balance(&v(&[]), 100)),
            Err("ERR 10000 members to evaluate, more than ringslot.max-sample (100)".into())
        );
        assert_eq!(
            text(parse_balance(&v(&["SAMPLE"]), 100)),
            syntax("SAMPLE needs a value")
        );
        assert_eq!(
            text(parse_balance(&v(&["COUNT", "5"]), 100)),
            syntax("unknown option 'COUNT' (RING.BALANCE takes SAMPLE n)")
        );
    }

    #[test]
    fn moves_arguments() {
        let m = parse_moves(&v(&["add", "n", "WEIGHT", "2", "SAMPLE", "10"]), 100).unwrap();
        assert_eq!(
            m.change,
            Change::Add {
                nodes: vec![b"n".to_vec()],
                weight: Some(2)
            }
        );
        assert_eq!(m.members, Members::Sample(10));
        let m = parse_moves(&v(&["DEL", "n", "KEYS", "user:*"]), 100).unwrap();
        assert_eq!(
            m.change,
            Change::Del {
                nodes: vec![b"n".to_vec()]
            }
        );
        assert_eq!(m.members, Members::Keys(b"user:*"));
        let m = parse_moves(&v(&["ADD", "n"]), 1_000_000).unwrap();
        assert_eq!(m.members, Members::Sample(DEFAULT_SAMPLE));
        assert_eq!(
            text(parse_moves(&v(&["DEL", "n", "WEIGHT", "2"]), 100)),
            syntax("WEIGHT goes with ADD only (DEL removes the nodes)")
        );
        for order in [["SAMPLE", "1", "KEYS", "*"], ["KEYS", "*", "SAMPLE", "1"]] {
            let mut args = vec!["ADD", "n"];
            args.extend(order);
            assert_eq!(
                text(parse_moves(&v(&args), 100)),
                syntax("SAMPLE, KEYS and SLOTS exclude each other")
            );
        }
        assert_eq!(
            text(parse_moves(&v(&["MOVE", "n"]), 100)),
            syntax("the change is ADD [WEIGHT w] node [node ...], DEL node [node ...] or REBALANCE [THRESHOLD t] [WEIGHT node=w ...], not 'MOVE'")
        );
        assert_eq!(
            text(parse_moves(&v(&["ADD", "n", "SAMPLE", "5", "FOO", "1"]), 100)),
            syntax("unknown option 'FOO' (RING.MOVES takes WEIGHT w, SAMPLE n, KEYS pattern, SLOTS start end, SCHEMES name ... and WEIGH BYTES|HITS)")
        );
        // WEIGH takes BYTES, HITS or both, in any case and order, with real keys only.
        let m = parse_moves(
            &v(&["ADD", "n", "KEYS", "*", "WEIGH", "hits", "BYTES"]),
            100,
        )
        .unwrap();
        assert_eq!(
            m.weigh,
            WeighBy {
                bytes: true,
                hits: true
            }
        );
        assert_eq!(
            m.change,
            Change::Add {
                nodes: nodes(&["n"]),
                weight: None
            }
        );
        let m = parse_moves(&v(&["DEL", "n", "WEIGH", "BYTES", "SLOTS", "0", "9"]), 100).unwrap();
        assert_eq!(
            (m.weigh, m.members),
            (
                WeighBy {
                    bytes: true,
                    hits: false
                },
                Members::Slots(0, 9)
            )
        );
        assert_eq!(
            text(parse_moves(&v(&["ADD", "n", "KEYS", "*", "WEIGH"]), 100)),
            syntax("WEIGH needs BYTES, HITS or both")
        );
        assert!(
            text(parse_moves(&v(&["ADD", "n", "WEIGH", "BYTES"]), 1_000_000))
                .unwrap_err()
                .contains("WEIGH needs real keys")
        );
        assert_eq!(
            text(parse_moves(&v(&["ADD", "n", "KEYS"]), 100)),
            syntax("KEYS needs a pattern")
        );
        assert_eq!(
            parse_moves(&v(&["ADD", "n", "SAMPLE", "101"]), 100),
            Err(ArgError::Engine(EngineError::TooManyMembers {
                members: 101,
                limit: 100
            }))
        );
        assert!(matches!(
            parse_moves(&v(&["ADD", "n", "SAMPLE", "0"]), 100),
            Err(ArgError::OutOfRange {
                option: "SAMPLE",
                ..
            })
        ));
        // SCHEMES slots, then SLOTS start end.
        let m = parse_moves(
            &v(&["DEL", "n", "SCHEMES", "ring", "slots", "SLOTS", "0", "9"]),
            100,
        )
        .unwrap();
        assert_eq!(m.schemes, Some(vec![Scheme::Ring, Scheme::Slots]));
        assert_eq!(m.members, Members::Slots(0, 9));
        let m = parse_moves(&v(&["REBALANCE", "SCHEMES", "slots"]), 1_000_000).unwrap();
        assert_eq!(
            m.change,
            Change::Rebalance {
                threshold: DEFAULT_THRESHOLD,
                weights: Vec::new()
            }
        );
        // The default sample is never cut silently.
        assert_eq!(
            text(parse_moves(&v(&["ADD", "n"]), 10)),
            Err(
                "ERR the default SAMPLE 100000 is more than ringslot.max-sample (10): give \
                 SAMPLE n (at most 10) or KEYS pattern"
                    .to_string()
            )
        );
    }

    fn nodes(names: &[&str]) -> Vec<Vec<u8>> {
        names.iter().map(|n| n.as_bytes().to_vec()).collect()
    }

    #[test]
    fn several_nodes_and_where_their_list_ends() {
        let plan = |args: &[&'static str]| parse_plan(&v(args));
        let add = |names: &[&str], weight| {
            Ok(Change::Add {
                nodes: nodes(names),
                weight,
            })
        };
        // RING.ADD's order, and the first syntax (WEIGHT after the node).
        assert_eq!(
            plan(&["ADD", "WEIGHT", "2", "a", "b"]),
            add(&["a", "b"], Some(2))
        );
        assert_eq!(plan(&["ADD", "a", "WEIGHT", "2"]), add(&["a"], Some(2)));
        assert_eq!(plan(&["add", "a", "b", "c"]), add(&["a", "b", "c"], None));
        assert_eq!(
            plan(&["ADD", "a", "b", "weight", "3"]),
            add(&["a", "b"], Some(3))
        );
        // The list ends at the first option keyword, in any case; NODES n takes names that
        // spell one.
        assert_eq!(
            parse_moves(&v(&["ADD", "a", "b", "Sample", "5"]), 100).map(|m| m.change),
            add(&["a", "b"], None)
        );
        assert_eq!(
            plan(&["ADD", "NODES", "2", "WEIGHT", "keys"]),
            add(&["WEIGHT", "keys"], None)
        );
        assert_eq!(
            text(plan(&["ADD", "WEIGHT", "3", "NODES", "1", "nodes", "x"])),
            syntax("unknown option 'x' (RING.PLAN takes WEIGHT w)")
        );
        assert_eq!(
            parse_moves(&v(&["DEL", "NODES", "1", "SAMPLE", "SAMPLE", "7"]), 100)
                .map(|m| (m.change, m.members)),
            Ok((
                Change::Del {
                    nodes: nodes(&["SAMPLE"])
                },
                Members::Sample(7)
            ))
        );
        assert_eq!(
            plan(&["DEL", "a", "b"]),
            Ok(Change::Del {
                nodes: nodes(&["a", "b"])
            })
        );
        // Refusals.
        let hint = "a node named like an option is given with NODES n name ...";
        assert_eq!(
            text(plan(&["ADD"])),
            syntax(&format!("ADD needs one or more nodes ({hint})"))
        );
        assert_eq!(
            text(plan(&["ADD", "WEIGHT", "2"])),
            syntax(&format!("ADD needs one or more nodes ({hint})"))
        );
        assert_eq!(
            text(plan(&["DEL", "keys"])),
            syntax(&format!("DEL needs one or more nodes ({hint})"))
        );
        assert_eq!(
            text(plan(&["ADD", "WEIGHT", "2", "a", "WEIGHT", "3"])),
            syntax("WEIGHT is given twice")
        );
        assert_eq!(
            text(plan(&["ADD", "NODES", "3", "a", "b"])),
            syntax("NODES n takes 1 to 2 names here (the arguments after it)")
        );
        assert_eq!(
            text(plan(&["ADD", "NODES", "0", "a"])),
            syntax("NODES n takes 1 to 1 names here (the arguments after it)")
        );
        assert_eq!(
            text(plan(&["ADD", "NODES", "x", "a"])),
            Err("ERR value is not an integer or out of range".into())
        );
        assert_eq!(
            text(plan(&["DEL", "a", "SAMPLE", "1"])),
            syntax(&format!(
                "unknown option 'SAMPLE' (RING.PLAN takes nothing after DEL node [node ...]; {hint})"
            ))
        );
    }

    #[test]
    fn the_pending_rebalance() {
        let plan = |args: &[&'static str]| parse_plan(&v(args));
        assert_eq!(
            plan(&["REBALANCE"]),
            Ok(Change::Rebalance {
                threshold: DEFAULT_THRESHOLD,
                weights: Vec::new()
            })
        );
        assert_eq!(
            plan(&[
                "rebalance",
                "THRESHOLD",
                "0.5",
                "WEIGHT",
                "a=0",
                "x=y=3",
                "WEIGHT",
                "b=2"
            ]),
            Ok(Change::Rebalance {
                threshold: 0.5,
                weights: vec![(b"a".to_vec(), 0), (b"x=y".to_vec(), 3), (b"b".to_vec(), 2)]
            })
        );
        assert_eq!(
            text(plan(&["REBALANCE", "THRESHOLD", "two"])),
            Err("ERR value is not a valid float".into())
        );
        assert_eq!(
            text(plan(&["REBALANCE", "THRESHOLD", "inf"])),
            Err("ERR value is not a valid float".into())
        );
        assert_eq!(
            text(plan(&["REBALANCE", "WEIGHT"])),
            syntax("WEIGHT needs a value")
        );
        assert_eq!(
            text(plan(&["REBALANCE", "WEIGHT", "a"])),
            syntax(
                "REBALANCE WEIGHT takes node=w items (w an integer, 0 to drain the node), not 'a'"
            )
        );
        assert_eq!(
            text(plan(&["REBALANCE", "WEIGHT", "=1"])),
            syntax(
                "REBALANCE WEIGHT takes node=w items (w an integer, 0 to drain the node), not '=1'"
            )
        );
        assert_eq!(
            text(plan(&["REBALANCE", "WEIGHT", "a=-1"])),
            Err("ERR WEIGHT must be between 0 and 1000000".into())
        );
        assert_eq!(
            text(plan(&["REBALANCE", "a"])),
            syntax("unknown option 'a' (RING.PLAN takes THRESHOLD t, WEIGHT node=w ...)")
        );
    }
}
