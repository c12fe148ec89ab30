//! Replies as a tree, sent with the module API in the order given: maps keep their fields in
//! the order the command reference lists them (`RING.INFO`: `compat`, `vnodes`, `hashtag`,
//! ...), under RESP3 as maps and under RESP2 as flat field/value arrays. Strings are borrowed
//! from the ring, so a reply copies nothing before Redis does.

use redis_module::raw;
use std::os::raw::{c_char, c_int, c_long, c_longlong};

/// A reply tree. Build all of it before sending, so that an error never follows half a reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply<'a> {
    /// A bulk string.
    Bulk(&'a [u8]),
    /// A bulk string the reply owns.
    Text(String),
    /// A binary bulk string the reply owns (a reply made off the main thread, which cannot
    /// borrow from the ring).
    Bytes(Vec<u8>),
    /// An integer.
    Int(i64),
    /// A double: a RESP3 double; under RESP2 a bulk string of the shortest decimal text that
    /// reads back to the same double (`0.2`, not Redis 7.0's `0.20000000000000001`).
    Double(f64),
    /// A boolean (RESP3 boolean; RESP2 integer 0 or 1).
    Bool(bool),
    /// Nil.
    Nil,
    /// The simple string `OK`.
    Ok,
    /// An array.
    Array(Vec<Reply<'a>>),
    /// A map, fields in the order given.
    Map(Vec<(&'static str, Reply<'a>)>),
}

impl Reply<'_> {
    /// An integer reply from any count (saturating at `i64::MAX`).
    pub fn count(n: impl TryInto<i64>) -> Reply<'static> {
        Reply::Int(n.try_into().unwrap_or(i64::MAX))
    }

    /// Whether sending it depends on the client's protocol: only a double does (Redis itself
    /// turns maps, booleans and nil into their RESP2 forms), so the others are sent without
    /// asking the context's flags (`RM_GetContextFlags` costs about 140 instructions, a
    /// seventh of what a one-node `RING.GET` adds to a missing key's, by callgrind).
    pub fn depends_on_protocol(&self) -> bool {
        match self {
            Reply::Double(_) => true,
            Reply::Array(items) => items.iter().any(Reply::depends_on_protocol),
            Reply::Map(fields) => fields.iter().any(|(_, v)| v.depends_on_protocol()),
            _ => false,
        }
    }

    /// Sends `items` as an array, as [`Reply::Array`] does, without a vector to hold them.
    pub fn send_array(items: &[Reply], ctx: *mut raw::RedisModuleCtx, resp3: bool) {
        raw::reply_with_array(ctx, c_long::try_from(items.len()).unwrap_or(c_long::MAX));
        for item in items {
            item.send(ctx, resp3);
        }
    }

    /// Sends the reply to the client of `ctx` (`resp3`: the client speaks RESP3).
    pub fn send(&self, ctx: *mut raw::RedisModuleCtx, resp3: bool) {
        let len = |n: usize| c_long::try_from(n).unwrap_or(c_long::MAX);
        match self {
            Reply::Bulk(bytes) => {
                raw::reply_with_string_buffer(ctx, bytes.as_ptr().cast::<c_char>(), bytes.len());
            }
            Reply::Text(text) => {
                raw::reply_with_string_buffer(ctx, text.as_ptr().cast::<c_char>(), text.len());
            }
            Reply::Bytes(bytes) => {
                raw::reply_with_string_buffer(ctx, bytes.as_ptr().cast::<c_char>(), bytes.len());
            }
            Reply::Int(n) => {
                raw::reply_with_long_long(ctx, c_longlong::from(*n));
            }
            Reply::Double(f) if resp3 => {
                raw::reply_with_double(ctx, *f);
            }
            Reply::Double(f) => {
                // Rust's `Display` of an f64 is the shortest text that parses back to it.
                let text = f.to_string();
                raw::reply_with_string_buffer(ctx, text.as_ptr().cast::<c_char>(), text.len());
            }
            Reply::Bool(b) => {
                raw::reply_with_bool(ctx, c_int::from(*b));
            }
            Reply::Nil => {
                raw::reply_with_null(ctx);
            }
            Reply::Ok => {
                raw::reply_with_simple_string(ctx, c"OK".as_ptr());
            }
            Reply::Array(items) => Reply::send_array(items, ctx, resp3),
            Reply::Map(fields) => {
                raw::reply_with_map(ctx, len(fields.len()));
                for (field, value) in fields {
                    raw::reply_with_string_buffer(
                        ctx,
                        field.as_ptr().cast::<c_char>(),
                        field.len(),
                    );
                    value.send(ctx, resp3);
                }
            }
        }
    }
}
