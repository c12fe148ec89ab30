//! ringslot: Redis Cluster hash slots and the consistent-hash ring, side by side, as a Redis
//! module. The engine (`engine`) is plain Rust; the module layer (`module`) adapts it to Redis.
//!
//! This file only registers the module: its data type, and in `init` its configurations
//! ([`module::config`]) and its commands, created from the command table [`module::table`].

pub mod engine;
pub mod module;

use module::ringtype::RING_TYPE;
use redis_module::{redis_module, Context, RedisString, Status};

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    if let Err(e) = module::config::register(ctx, args) {
        ctx.log_warning(&format!("ringslot: {e}"));
        return Status::Err;
    }
    module::stats::register(ctx);
    module::background::register(ctx);
    module::table::register(ctx)
}

redis_module! {
    name: "ringslot",
    version: 1,
    allocator: (module::ModuleAlloc, module::ModuleAlloc),
    data_types: [RING_TYPE],
    init: init,
}
