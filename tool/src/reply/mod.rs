//! One decoder of the replies ringslot sends, under RESP2 or RESP3: integers, doubles (RESP3
//! doubles, or RESP2 bulk strings holding one), strings, arrays, and maps (RESP3 maps, or
//! RESP2 flat field/value arrays). Every function returns an error naming what it got.
//! [`ring`] reads the module's own replies (`RING.MOVES`, `RING.PLAN`, `RING.INFO`) with it.

pub mod ring;

use redis::Value;
use std::fmt;

/// A reply that is not of the expected shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyError(pub String);

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReplyError {}

/// A decoded value or the reason it could not be decoded.
pub type Result<T> = std::result::Result<T, ReplyError>;

fn expected<T>(what: &str, got: &Value) -> Result<T> {
    Err(ReplyError(format!("expected {what}, got {got:?}")))
}

/// A string reply's bytes (bulk, simple, verbatim or `OK`).
pub fn bytes(v: &Value) -> Result<Vec<u8>> {
    match v {
        Value::BulkString(b) => Ok(b.clone()),
        Value::SimpleString(s) => Ok(s.as_bytes().to_vec()),
        Value::VerbatimString { text, .. } => Ok(text.as_bytes().to_vec()),
        Value::Okay => Ok(b"OK".to_vec()),
        other => expected("a string", other),
    }
}

/// A string reply as text (invalid UTF-8 shown with replacement characters).
pub fn text(v: &Value) -> Result<String> {
    Ok(String::from_utf8_lossy(&bytes(v)?).into_owned())
}

/// A string reply, or `None` for nil.
pub fn opt_bytes(v: &Value) -> Result<Option<Vec<u8>>> {
    match v {
        Value::Nil => Ok(None),
        other => bytes(other).map(Some),
    }
}

/// An integer reply (or a string holding one).
pub fn int(v: &Value) -> Result<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        other => text(other)
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or_else(|| expected("an integer", other), Ok),
    }
}

/// A double reply: a RESP3 double, or a RESP2 bulk string (or integer) holding one.
pub fn float(v: &Value) -> Result<f64> {
    match v {
        Value::Double(f) => Ok(*f),
        Value::Int(i) => Ok(*i as f64),
        other => text(other)
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or_else(|| expected("a double", other), Ok),
    }
}

/// An array reply's items (a RESP3 set too).
pub fn array(v: &Value) -> Result<&[Value]> {
    match v {
        Value::Array(items) | Value::Set(items) => Ok(items),
        other => expected("an array", other),
    }
}

/// The fields of a map reply in reply order, and whether it was a RESP3 map (rather than a
/// RESP2 flat array of field/value pairs).
pub fn fields(v: &Value) -> Result<(Vec<(String, &Value)>, bool)> {
    match v {
        Value::Map(pairs) => Ok((
            pairs
                .iter()
                .map(|(k, v)| Ok((text(k)?, v)))
                .collect::<Result<_>>()?,
            true,
        )),
        Value::Array(flat) if flat.len() % 2 == 0 => Ok((
            flat.chunks(2)
                .map(|p| Ok((text(&p[0])?, &p[1])))
                .collect::<Result<_>>()?,
            false,
        )),
        other => expected("a map", other),
    }
}

/// The field `name` of a map reply.
pub fn field<'a>(v: &'a Value, name: &str) -> Result<&'a Value> {
    fields(v)?
        .0
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .ok_or_else(|| ReplyError(format!("no field `{name}` in {v:?}")))
}

/// The value of field `name` in an `INFO` text (`name:value` lines), trimmed.
pub fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
        .map(str::to_string)
}

/// Whether an `INFO server` text is Valkey 9 or later's (`server_name:valkey`,
/// `valkey_version`): a server with atomic slot migration.
pub fn is_valkey_9(info: &str) -> bool {
    info_field(info, "server_name").as_deref() == Some("valkey")
        && info_field(info, "valkey_version")
            .and_then(|v| v.split('.').next()?.parse::<u32>().ok())
            .is_some_and(|major| major >= 9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_decode_from_resp2_and_resp3() {
        let k = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let resp2 = Value::Array(vec![k("a"), Value::Int(1), k("b"), k("0.5")]);
        let resp3 = Value::Map(vec![(k("a"), Value::Int(1)), (k("b"), Value::Double(0.5))]);
        for (v, is_map) in [(&resp2, false), (&resp3, true)] {
            assert_eq!(fields(v).unwrap().1, is_map);
            assert_eq!(int(field(v, "a").unwrap()), Ok(1));
            assert_eq!(float(field(v, "b").unwrap()), Ok(0.5));
            assert!(field(v, "c").is_err());
        }
        assert!(fields(&Value::Array(vec![k("odd")])).is_err());
        assert!(int(&k("x")).is_err());
    }
}
