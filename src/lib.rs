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
    // (which refuses the value) instead of stopping the server.
    // SAFETY: a plain read of a function-pointer static set by RedisModule_Init; called in
    // OnLoad with its context.
    if let Some(set_options) = unsafe { redis_module::raw::RedisModule_SetModuleOptions } {
        unsafe {
            set_options(
                ctx.ctx,
                redis_module::raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS as i32,
            )
        };
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
