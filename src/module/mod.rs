//! The Redis side of ringslot: the command table, argument parsing, the command handlers,
//! replies, the data type, command docs, and the module-wide settings (configurations and the
//! allocator).
//!
//! - [`table`]: every command's row (its facts and handler), walked by `init`;
//! - [`call`]: one call (arguments, the ring at its key, dispatch);
//! - [`commands`]: the handlers, but [`moves`] (`RING.MOVES`); [`args`]: their option
//!   parsing; [`errors`]: every error reply; [`reply`]: reply trees;
//! - [`ringtype`]: the `ringslot1` data type (RDB, AOF, copy, memory, digest);
//! - [`cmdinfo`]: a command's facts and its `COMMAND INFO` / `DOCS`;
//! - [`config`]: the `ringslot.*` configurations; [`keys`]: the keyspace walks of `KEYS` and
//!   `SLOTS`; [`live`]: the live cluster (`CLUSTER NODES`, slot checks, keys in a slot);
//! - [`background`]: the job runner (evaluations past the inline limit on a worker thread);
//!   [`stats`]: `INFO ringslot`; [`server`]: which server this is (Redis or Valkey, read
//!   at load) and the module options declared to it.

pub mod args;
pub mod background;
pub mod call;
pub mod cmdinfo;
pub mod commands;
pub mod config;
pub mod errors;
pub mod keys;
pub mod live;
pub mod moves;
pub mod reply;
pub mod ringtype;
pub mod server;
pub mod stats;
pub mod table;

use redis_module::alloc::RedisAlloc;
use std::alloc::{GlobalAlloc, Layout, System};

/// The global allocator: Redis' allocator once the module API is initialised (so that
/// `INFO memory` and `maxmemory` see the module's memory), the system allocator before that.
///
/// Why not `RedisAlloc` alone: the crate is also an rlib, and every binary that links it
/// (`tests/engine_*.rs`, benches, `cargo test` of this crate) would then abort on its first
/// allocation, since no Redis provides `RedisModule_Alloc` there. Inside redis-server the
/// function pointers are set by `RedisModule_Init` at the very start of `RedisModule_OnLoad`,
/// before this library allocates anything, and are never unset, so every block is freed by
/// the allocator that gave it.
pub struct ModuleAlloc;

fn redis_alloc_ready() -> bool {
    // SAFETY: a plain read of a function-pointer static that is written once by
    // `RedisModule_Init` on Redis' main thread before any module code runs.
    let alloc = unsafe { redis_module::raw::RedisModule_Alloc };
    alloc.is_some()
}

// SAFETY: delegates to two sound allocators, choosing by a condition that does not change
// between the allocation of a block and its release (see `ModuleAlloc`).
unsafe impl GlobalAlloc for ModuleAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if redis_alloc_ready() {
            RedisAlloc.alloc(layout)
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if redis_alloc_ready() {
            RedisAlloc.dealloc(ptr, layout)
        } else {
            System.dealloc(ptr, layout)
        }
    }
}
