//! Typed readers of the module's replies that several programs read (the tool, the benchmark
//! program, the tests): one reader per reply shape, under RESP2 or RESP3, so that a field is
//! named in one place. Each reader fails with a [`ReplyError`] naming what it missed.

use super::{array, field, fields, float, int, text, ReplyError, Result};
use redis::Value;
use ringslot_engine::RebalanceStep;

/// One scheme's part of a `RING.MOVES` reply (the module's `schemes_reply`): the moved
/// members and, where the reply has them, the other fields (`None` when absent or nil).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchemeMoves {
    /// The scheme, as the reply names it (`ring`, `slots`, `modulo`, `jump`, ...).
    pub scheme: String,
    /// Members whose owner changes.
    pub moved: u64,
    /// Those of them moving between nodes there before and after.
    pub between_old: u64,
    /// `moved / members`; `None` when no member was evaluated.
    pub fraction: Option<f64>,
    /// The sampling error of `fraction` (`SAMPLE` members only).
    pub standard_error: Option<f64>,
    /// The exact moved share of the hash space (rings, Maglev).
    pub space: Option<f64>,
    /// Hash slots that change owner (the slot table).
    pub slots_moved: Option<u64>,
    /// With `WEIGH BYTES`: the moved members' bytes, their share, and the most loaded node's
    /// bytes over the mean after the change.
    pub moved_bytes: Option<u64>,
    pub bytes_fraction: Option<f64>,
    pub bytes_peak_to_mean_after: Option<f64>,
    /// With `WEIGH HITS`: the moved members' hits, their share, and the peak-to-mean after.
    pub moved_hits: Option<u64>,
    pub hits_fraction: Option<f64>,
    pub hits_peak_to_mean_after: Option<f64>,
    /// With `WEIGH`: the most loaded node's members over the mean after the change.
    pub keys_peak_to_mean_after: Option<f64>,
}

/// A `RING.MOVES` reply: the members evaluated (and weighed), the ideal share, and each
/// scheme's part in reply order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Moves {
    /// Members evaluated.
    pub members: u64,
    /// With `WEIGH BYTES` / `WEIGH HITS`: their bytes and hits.
    pub bytes: Option<u64>,
    pub hits: Option<u64>,
    /// The share of members a perfect scheme moves (0 to 1).
    pub ideal: f64,
    /// Each scheme evaluated, in reply order.
    pub schemes: Vec<SchemeMoves>,
}

/// A field that may be absent or nil.
fn optional<T>(v: &Value, name: &str, read: impl Fn(&Value) -> Result<T>) -> Result<Option<T>> {
    match field(v, name) {
        Err(_) | Ok(Value::Nil) => Ok(None),
        Ok(x) => read(x).map(Some),
    }
}

fn count(v: &Value) -> Result<u64> {
    let n = int(v)?;
    u64::try_from(n).map_err(|_| ReplyError(format!("expected a count, got {n}")))
}

impl Moves {
    /// Reads a `RING.MOVES` reply. Errors: not a map, or a count missing.
    pub fn read(v: &Value) -> Result<Moves> {
        let mut schemes = Vec::new();
        for (name, part) in fields(v)?.0 {
            if matches!(name.as_str(), "members" | "bytes" | "hits" | "ideal") {
                continue;
            }
            schemes.push(SchemeMoves {
                moved: count(field(part, "moved")?)?,
                between_old: count(field(part, "between_old")?)?,
                fraction: optional(part, "fraction", float)?,
                standard_error: optional(part, "standard_error", float)?,
                space: optional(part, "space", float)?,
                slots_moved: optional(part, "slots_moved", count)?,
                moved_bytes: optional(part, "moved_bytes", count)?,
                bytes_fraction: optional(part, "bytes_fraction", float)?,
                bytes_peak_to_mean_after: optional(part, "bytes_peak_to_mean_after", float)?,
                moved_hits: optional(part, "moved_hits", count)?,
                hits_fraction: optional(part, "hits_fraction", float)?,
                hits_peak_to_mean_after: optional(part, "hits_peak_to_mean_after", float)?,
                keys_peak_to_mean_after: optional(part, "keys_peak_to_mean_after", float)?,
                scheme: name,
            });
        }
        Ok(Moves {
            members: count(field(v, "members")?)?,
            bytes: optional(v, "bytes", count)?,
            hits: optional(v, "hits", count)?,
            ideal: float(field(v, "ideal")?)?,
            schemes,
        })
    }

    /// The part of scheme `name`. Error: the reply has none (the scheme was not asked for).
    pub fn scheme(&self, name: &str) -> Result<&SchemeMoves> {
        self.schemes
            .iter()
            .find(|s| s.scheme == name)
            .ok_or_else(|| ReplyError(format!("no scheme `{name}` in the RING.MOVES reply")))
    }
}

/// Reads a `RING.PLAN` reply (an array of moves, each `from`, `to`, `slots`, `ranges`).
/// Errors: a move without its fields, or a range that is not two slots.
pub fn read_plan(reply: &Value) -> Result<Vec<RebalanceStep<String>>> {
    let name = |v: &Value| match v {
        Value::Nil => Ok(None),
        other => text(other).map(Some),
    };
    let mut moves = Vec::new();
    for m in array(reply)? {
        let mut slots = Vec::new();
        for range in array(field(m, "ranges")?)? {
            let slot = |v: Option<&Value>| -> Result<u16> {
                let v = v.ok_or_else(|| ReplyError("a range of fewer than two ends".into()))?;
                u16::try_from(int(v)?).map_err(|_| ReplyError(format!("not a slot: {v:?}")))
            };
            let r = array(range)?;
            slots.extend(slot(r.first())?..=slot(r.get(1))?);
        }
        moves.push(RebalanceStep {
            from: name(field(m, "from")?)?,
            to: name(field(m, "to")?)?,
            slots,
        });
    }
    Ok(moves)
}

/// A `RING.INFO` reply.
#[derive(Debug, Clone, PartialEq)]
pub struct RingInfo {
    /// The flavour (`native`, `ketama`, ...).
    pub compat: String,
    /// Points per unit of weight.
    pub vnodes: u64,
    /// Whether members hash by their `{hash tag}`.
    pub hashtag: bool,
    /// Nodes and points.
    pub nodes: u64,
    pub points: u64,
    /// The most loaded node's share of the ring, and of the slots, over its fair share.
    pub ring_peak_to_mean: f64,
    pub slot_peak_to_mean: f64,
    /// The ring's memory, bytes.
    pub memory_bytes: u64,
}

impl RingInfo {
    /// Reads a `RING.INFO` reply. Errors: a field missing.
    pub fn read(v: &Value) -> Result<RingInfo> {
        let flag = |x: &Value| match x {
            Value::Boolean(b) => Ok(*b),
            other => Ok(int(other)? != 0),
        };
        Ok(RingInfo {
            compat: text(field(v, "compat")?)?,
            vnodes: count(field(v, "vnodes")?)?,
            hashtag: flag(field(v, "hashtag")?)?,
            nodes: count(field(v, "nodes")?)?,
            points: count(field(v, "points")?)?,
            ring_peak_to_mean: float(field(v, "ring_peak_to_mean")?)?,
            slot_peak_to_mean: float(field(v, "slot_peak_to_mean")?)?,
            memory_bytes: count(field(v, "memory_bytes")?)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_moves_reply_reads_under_resp2_and_resp3() {
        // The README session's RING.MOVES reply, cut to the ring and the slots: RESP3 maps and
        // doubles, then the same as RESP2 flat arrays with doubles as strings.
        let resp3 = Value::Map(vec![
            (bulk("members"), Value::Int(100000)),
            (bulk("ideal"), Value::Double(0.2)),
            (
                bulk("ring"),
                Value::Map(vec![
                    (bulk("moved"), Value::Int(19009)),
                    (bulk("between_old"), Value::Int(0)),
                    (bulk("fraction"), Value::Double(0.19009)),
                    (bulk("standard_error"), Value::Double(0.0012)),
                    (bulk("space"), Value::Double(0.189)),
                ]),
            ),
            (
                bulk("slots"),
                Value::Map(vec![
                    (bulk("moved"), Value::Int(19981)),
                    (bulk("between_old"), Value::Int(0)),
                    (bulk("fraction"), Value::Nil),
                    (bulk("slots_moved"), Value::Int(3280)),
                ]),
            ),
        ]);
        let resp2 = Value::Array(vec![
            bulk("members"),
            Value::Int(100000),
            bulk("ideal"),
            bulk("0.2"),
            bulk("ring"),
            Value::Array(vec![
                bulk("moved"),
                Value::Int(19009),
                bulk("between_old"),
                Value::Int(0),
                bulk("fraction"),
                bulk("0.19009"),
                bulk("standard_error"),
                bulk("0.0012"),
                bulk("space"),
                bulk("0.189"),
            ]),
            bulk("slots"),
            Value::Array(vec![
                bulk("moved"),
                Value::Int(19981),
                bulk("between_old"),
                Value::Int(0),
                bulk("fraction"),
                Value::Nil,
                bulk("slots_moved"),
                Value::Int(3280),
            ]),
        ]);
        for v in [&resp3, &resp2] {
            let m = Moves::read(v).unwrap();
            assert_eq!((m.members, m.ideal, m.bytes), (100000, 0.2, None));
            assert_eq!(m.schemes.len(), 2);
            let ring = m.scheme("ring").unwrap();
            assert_eq!((ring.moved, ring.space), (19009, Some(0.189)));
            let slots = m.scheme("slots").unwrap();
            assert_eq!((slots.slots_moved, slots.fraction), (Some(3280), None));
            assert!(m.scheme("modulo").is_err());
        }
        assert!(Moves::read(&Value::Int(1)).is_err());
    }

    #[test]
    fn a_plan_reply_is_read_into_slots() {
        // A RING.PLAN reply under RESP2: flat field/value arrays.
        let range = |a, b| Value::Array(vec![Value::Int(a), Value::Int(b)]);
        let reply = Value::Array(vec![Value::Array(vec![
            bulk("from"),
            Value::Nil,
            bulk("to"),
            bulk("10.0.0.4:6379"),
            bulk("slots"),
            Value::Int(5),
            bulk("ranges"),
            Value::Array(vec![range(0, 2), range(10, 11)]),
        ])]);
        let plan = read_plan(&reply).unwrap();
        assert_eq!(
            plan,
            vec![RebalanceStep {
                from: None,
                to: Some("10.0.0.4:6379".into()),
                slots: vec![0, 1, 2, 10, 11]
            }]
        );
        let bad = Value::Array(vec![Value::Array(vec![
            bulk("from"),
            Value::Nil,
            bulk("to"),
            Value::Nil,
            bulk("ranges"),
            Value::Array(vec![Value::Array(vec![Value::Int(70000), Value::Int(1)])]),
        ])]);
        assert!(read_plan(&bad).is_err());
    }
}
