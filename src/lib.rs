//! ringslot: Redis Cluster hash slots and the consistent-hash ring, side by side, as a Redis
//! module. The engine (`engine`) is plain Rust; the module layer (`module`) adapts it to Redis.
//!
//! This file only registers the module: its data type, its commands (flags and legacy key
//! positions; the hot read commands are created in `init` by [`module::hotpath`], and arity,
//! key specs and docs are set there by [`module::cmdinfo`]) and its configurations.

pub mod engine;
pub mod module;

use module::commands;
use module::ringtype::RING_TYPE;
use module::{DEFAULT_VNODES, MAX_POINTS, MAX_SAMPLE};
use redis_module::configuration::ConfigurationFlags;
use redis_module::{redis_module, Context, RedisString, Status};

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    if module::hotpath::register(ctx) == Status::Err {
        return Status::Err;
    }
    module::cmdinfo::set_command_infos(ctx)
}

redis_module! {
    name: "ringslot",
    version: 1,
    allocator: (module::ModuleAlloc, module::ModuleAlloc),
    data_types: [RING_TYPE],
    init: init,
    commands: [
        ["ring.create", commands::ring_create, "write deny-oom", 1, 1, 1, ""],
        ["ring.add", commands::ring_add, "write deny-oom", 1, 1, 1, ""],
        ["ring.del", commands::ring_del, "write deny-oom", 1, 1, 1, ""],
        ["ring.assign", commands::ring_assign, "write deny-oom", 1, 1, 1, ""],
        ["ring.slots", commands::ring_slots, "readonly", 1, 1, 1, ""],
        ["ring.nodes", commands::ring_nodes, "readonly", 1, 1, 1, ""],
        ["ring.info", commands::ring_info, "readonly", 1, 1, 1, ""],
        ["ring.moves", commands::ring_moves, "readonly", 1, 1, 1, ""],
    ],
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
