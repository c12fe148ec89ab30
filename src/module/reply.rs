//! Replies whose maps keep their fields in the order the command reference lists them
//! (`RING.INFO`: `compat`, `vnodes`, `hashtag`, ...). The crate's `RedisValue::OrderedMap` is a
//! `BTreeMap` and would sort the fields by name; under RESP2, where a map is a flat array,
//! redis-cli shows that order as it is.

use redis_module::{raw, Context, RedisValue};
use std::os::raw::{c_char, c_long};

/// A reply tree: leaves are the crate's values (sent as the crate sends them), arrays and maps
/// are sent in the order given.
pub enum Reply {
    /// A value without maps inside (integer, double, bulk string, boolean, nil, ...).
    Leaf(RedisValue),
    /// An array of replies.
    Array(Vec<Reply>),
    /// A RESP3 map (a flat array of field, value, ... under RESP2), fields in the order given.
    Map(Vec<(&'static str, Reply)>),
}

impl Reply {
    /// Sends the reply to the client of `ctx`. Build the whole tree before sending, so that
    /// an error can never follow half a reply.
    pub fn send(self, ctx: &Context) {
        match self {
            Reply::Leaf(value) => {
                ctx.reply(Ok(value));
            }
            Reply::Array(items) => {
                raw::reply_with_array(ctx.ctx, c_long::try_from(items.len()).unwrap_or(0));
                for item in items {
                    item.send(ctx);
                }
            }
            Reply::Map(fields) => {
                raw::reply_with_map(ctx.ctx, c_long::try_from(fields.len()).unwrap_or(0));
                for (field, value) in fields {
                    raw::reply_with_string_buffer(
                        ctx.ctx,
                        field.as_ptr().cast::<c_char>(),
                        field.len(),
                    );
                    value.send(ctx);
                }
            }
        }
    }
}

impl From<RedisValue> for Reply {
    fn from(value: RedisValue) -> Reply {
        Reply::Leaf(value)
    }
}
