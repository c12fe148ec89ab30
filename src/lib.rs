//! ringslot: Redis Cluster hash slots and the consistent-hash ring, side by side, as a Redis
//! module. The engine (`engine`) is plain Rust; the module layer (`module`) adapts it to Redis.
//!
//! This file only registers the module: its data type, its configurations, and in `init` its
//! commands, created from the command table [`module::table`].

pub mod engine;
pub mod module;

use module::ringtype::RING_TYPE;
use module::{DEFAULT_VNODES, MAX_POINTS, MAX_SAMPLE};
use redis_module::configuration::ConfigurationFlags;
use redis_module::{redis_module, Context, RedisString, Status};

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    module::table::register(ctx)
}

redis_module! {
    name: "ringslot",
    version: 1,
    allocator: (module::ModuleAlloc, module::ModuleAlloc),
    data_types: [RING_TYPE],
    init: init,
    configurations: [
        i64: [
            ["default-vnodes", &DEFAULT_VNODES, 160, 1, engine::topology::MAX_VNODES as i64, ConfigurationFlags::DEFAULT, None],
            ["max-points", &MAX_POINTS, 10_000_000, 1, 100_000_000, ConfigurationFlags::DEFAULT, None],
            ["max-sample", &MAX_SAMPLE, 1_000_000, 1, 1_000_000_000, ConfigurationFlags::DEFAULT, None],
        ],
        string: [],
        bool: [],
        enum: [],
        module_args_as_configuration: true,
    ]
}
