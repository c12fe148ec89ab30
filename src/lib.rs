//! ringslot: Redis Cluster hash slots and the consistent-hash ring, side by side, as a Redis
//! module. The engine (the `ringslot-engine` crate, re-exported as `engine`) is plain Rust; the
//! module layer (`module`) adapts it to Redis.
//!
//! This file only registers the module: its data type, and in `init` its configurations
//! ([`module::config`]) and its commands, created from the command table [`module::table`].

pub mod module;

/// The placement engine (the `ringslot-engine` crate), which the module adapts to Redis.
pub use ringslot_engine as engine;

use module::ringtype::RING_TYPE;
use redis_module::{redis_module, Context, RedisString, Status};

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    // The type's load checks every read: Redis then reports a short or corrupt payload to it
    // (which refuses the value) instead of stopping the server. On Valkey 9 the module also
    // declares atomic slot migration, which it would otherwise switch off for the whole
    // cluster (module::server).
    let kind = module::server::detect(ctx);
    if module::server::declare_options(ctx, kind) {
        ctx.log_notice("declared support for atomic slot migration (Valkey)");
    }
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
