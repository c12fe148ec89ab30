//! Redis-style argument parsing for the RING.* commands: case-insensitive keywords, each
//! consuming its value, and the core's error texts. Everything here works on byte slices, so
//! it is tested without a server; `commands.rs` turns [`ArgError`] into the error reply.

use crate::engine::{Change, EngineError, Flavour, DEFAULT_SAMPLE};
use std::fmt;

/// Why the arguments of a command were refused. `Display` is the whole error reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// An unknown option, a missing option value, or options that do not go together.
    Syntax,
    /// A number that does not parse as a 64-bit integer (Redis' `string2ll` rules).
    NotInteger,
    /// A number outside its option's range.
    OutOfRange {
        /// The option, as the user types it (`COUNT`, `SAMPLE`).
        option: &'static str,
        /// Smallest value accepted.
        min: i64,
        /// Largest value accepted (`i64::MAX`: no upper bound).
        max: i64,
    },
    /// `COMPAT` names no flavour.
    UnknownCompat,
    /// The engine refused a value (weight, vnodes, sample size).
    Engine(EngineError),
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::Syntax => f.write_str("ERR syntax error"),
            ArgError::NotInteger => f.write_str("ERR value is not an integer or out of range"),
            ArgError::OutOfRange { option, min, max } if *max == i64::MAX => {
                write!(f, "ERR {option} must be {min} or more")
            }
            ArgError::OutOfRange { option, min, max } => {
                write!(f, "ERR {option} must be between {min} and {max}")
            }
            ArgError::UnknownCompat => {
                let names: Vec<&str> = Flavour::ALL.iter().map(|f| f.name()).collect();
                write!(f, "ERR COMPAT must be one of {}", names.join(", "))
            }
            ArgError::Engine(e) => write!(f, "ERR {e}"),
        }
    }
}

impl From<EngineError> for ArgError {
    fn from(e: EngineError) -> Self {
        ArgError::Engine(e)
    }
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
            let name = rest.next().ok_or(ArgError::Syntax)?;
            parsed.flavour = Flavour::from_name(name).ok_or(ArgError::UnknownCompat)?;
        } else if is_keyword(opt, "VNODES") {
            let n = rest.next().ok_or(ArgError::Syntax)?;
            parsed.vnodes = Some(integer(n)?);
        } else if is_keyword(opt, "HASHTAG") {
            parsed.hashtag = true;
        } else {
            return Err(ArgError::Syntax);
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

/// Parses the arguments after the key of `RING.ADD`. A first argument `WEIGHT` is the option
/// when more arguments follow it (add a node called `weight` with `WEIGHT 1 weight`).
pub fn parse_add<'a>(rest: &[&'a [u8]]) -> Result<AddArgs<'a>, ArgError> {
    match rest {
        [first, ..] if is_keyword(first, "WEIGHT") && rest.len() > 1 => match rest {
            [_, w, nodes @ ..] if !nodes.is_empty() => Ok(AddArgs {
                weight: Some(integer(w)?),
                nodes: nodes.to_vec(),
            }),
            _ => Err(ArgError::Syntax),
        },
        [] => Err(ArgError::Syntax),
        nodes => Ok(AddArgs {
            weight: None,
            nodes: nodes.to_vec(),
        }),
    }
}

/// Parses the options after the member of `RING.GET`: nothing, or `COUNT n` with `n >= 1`.
/// Returns the count (`None`: a single owner is asked for).
pub fn parse_get(opts: &[&[u8]]) -> Result<Option<usize>, ArgError> {
    match opts {
        [] => Ok(None),
        [kw, n] if is_keyword(kw, "COUNT") => {
            let n = integer(n)?;
            if n < 1 {
                return Err(ArgError::OutOfRange {
                    option: "COUNT",
                    min: 1,
                    max: i64::MAX,
                });
            }
            Ok(Some(usize::try_from(n).unwrap_or(usize::MAX)))
        }
        _ => Err(ArgError::Syntax),
    }
}

/// What `RING.MOVES` evaluates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Members<'a> {
    /// `SAMPLE n` (or the default): the members `key:0 .. key:n-1`.
    Sample(u64),
    /// `KEYS pattern`: the keys of the current database matching the glob.
    Keys(&'a [u8]),
}

/// Arguments of `RING.MOVES key ADD|DEL node [WEIGHT w] [SAMPLE n | KEYS pattern]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovesArgs<'a> {
    /// The change to evaluate.
    pub change: Change,
    /// The members to evaluate it over.
    pub members: Members<'a>,
}

/// Parses the arguments after the key of `RING.MOVES`. `WEIGHT` (default 1) goes with `ADD`
/// only; `SAMPLE` and `KEYS` exclude each other. `SAMPLE` must be `1..=max_sample`; above
/// `max_sample` the error names `ringslot.max-sample`.
pub fn parse_moves<'a>(rest: &[&'a [u8]], max_sample: u64) -> Result<MovesArgs<'a>, ArgError> {
    let (adding, node, mut opts) = match rest {
        [op, node, opts @ ..] if is_keyword(op, "ADD") => (true, *node, opts.iter()),
        [op, node, opts @ ..] if is_keyword(op, "DEL") => (false, *node, opts.iter()),
        _ => return Err(ArgError::Syntax),
    };
    let mut weight: Option<i64> = None;
    let mut members: Option<Members<'a>> = None;
    while let Some(&opt) = opts.next() {
        if is_keyword(opt, "WEIGHT") && adding {
            weight = Some(integer(opts.next().ok_or(ArgError::Syntax)?)?);
        } else if is_keyword(opt, "SAMPLE") && !matches!(members, Some(Members::Keys(_))) {
            let n = integer(opts.next().ok_or(ArgError::Syntax)?)?;
            if n < 1 {
                return Err(ArgError::OutOfRange {
                    option: "SAMPLE",
                    min: 1,
                    max: i64::try_from(max_sample).unwrap_or(i64::MAX),
                });
            }
            let n = n.unsigned_abs();
            if n > max_sample {
                return Err(EngineError::TooManyMembers {
                    members: n,
                    limit: max_sample,
                }
                .into());
            }
            members = Some(Members::Sample(n));
        } else if is_keyword(opt, "KEYS") && !matches!(members, Some(Members::Sample(_))) {
            members = Some(Members::Keys(opts.next().ok_or(ArgError::Syntax)?));
        } else {
            return Err(ArgError::Syntax);
        }
    }
    let node = node.to_vec();
    let change = if adding {
        Change::Add {
            node,
            weight: weight.unwrap_or(1),
        }
    } else {
        Change::Del { node }
    };
    let members = members.unwrap_or(Members::Sample(DEFAULT_SAMPLE.min(max_sample)));
    Ok(MovesArgs { change, members })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(args: &[&'static str]) -> Vec<&'static [u8]> {
        args.iter().map(|a| a.as_bytes()).collect()
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
    fn error_texts_are_the_cores() {
        assert_eq!(ArgError::Syntax.to_string(), "ERR syntax error");
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
    }

    #[test]
    fn create_options() {
        let o = parse_create(&v(&["compat", "KETAMA", "hashtag"])).unwrap();
        assert_eq!(o.flavour, Flavour::Ketama);
        assert!(o.hashtag);
        assert_eq!(o.vnodes, None);
        let o = parse_create(&v(&["VNODES", "10", "vnodes", "20"])).unwrap();
        assert_eq!(o.vnodes, Some(20));
        assert_eq!(parse_create(&v(&["VNODES"])), Err(ArgError::Syntax));
        assert_eq!(
            parse_create(&v(&["VNODES", "x"])),
            Err(ArgError::NotInteger)
        );
        assert_eq!(
            parse_create(&v(&["COMPAT", "x"])),
            Err(ArgError::UnknownCompat)
        );
        assert_eq!(parse_create(&v(&["FOO"])), Err(ArgError::Syntax));
    }

    #[test]
    fn add_arguments() {
        let a = parse_add(&v(&["a", "b"])).unwrap();
        assert_eq!((a.weight, a.nodes.len()), (None, 2));
        let a = parse_add(&v(&["weight", "3", "a"])).unwrap();
        assert_eq!((a.weight, a.nodes), (Some(3), vec![&b"a"[..]]));
        // A lone `WEIGHT` is a node name.
        assert_eq!(
            parse_add(&v(&["WEIGHT"])).unwrap().nodes,
            vec![&b"WEIGHT"[..]]
        );
        assert_eq!(parse_add(&v(&["WEIGHT", "3"])), Err(ArgError::Syntax));
        assert_eq!(
            parse_add(&v(&["WEIGHT", "x", "a"])),
            Err(ArgError::NotInteger)
        );
        assert_eq!(parse_add(&v(&[])), Err(ArgError::Syntax));
    }

    #[test]
    fn get_options() {
        assert_eq!(parse_get(&v(&[])), Ok(None));
        assert_eq!(parse_get(&v(&["count", "3"])), Ok(Some(3)));
        assert!(matches!(
            parse_get(&v(&["COUNT", "0"])),
            Err(ArgError::OutOfRange { .. })
        ));
        assert_eq!(parse_get(&v(&["COUNT"])), Err(ArgError::Syntax));
        assert_eq!(parse_get(&v(&["COUNT", "1", "x"])), Err(ArgError::Syntax));
        assert_eq!(parse_get(&v(&["LIMIT", "1"])), Err(ArgError::Syntax));
    }

    #[test]
    fn moves_arguments() {
        let m = parse_moves(&v(&["add", "n", "WEIGHT", "2", "SAMPLE", "10"]), 100).unwrap();
        assert_eq!(
            m.change,
            Change::Add {
                node: b"n".to_vec(),
                weight: 2
            }
        );
        assert_eq!(m.members, Members::Sample(10));
        let m = parse_moves(&v(&["DEL", "n", "KEYS", "user:*"]), 100).unwrap();
        assert_eq!(
            m.change,
            Change::Del {
                node: b"n".to_vec()
            }
        );
        assert_eq!(m.members, Members::Keys(b"user:*"));
        let m = parse_moves(&v(&["ADD", "n"]), 1_000_000).unwrap();
        assert_eq!(m.members, Members::Sample(DEFAULT_SAMPLE));
        assert_eq!(
            parse_moves(&v(&["DEL", "n", "WEIGHT", "2"]), 100),
            Err(ArgError::Syntax)
        );
        assert_eq!(
            parse_moves(&v(&["ADD", "n", "SAMPLE", "1", "KEYS", "*"]), 100),
            Err(ArgError::Syntax)
        );
        assert_eq!(parse_moves(&v(&["MOVE", "n"]), 100), Err(ArgError::Syntax));
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
    }
}
