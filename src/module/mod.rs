//! The Redis side of ringslot: the command table, argument parsing, the command handlers,
//! replies, the data type, command docs, and the module-wide settings (configurations and the
//! allocator).
//!
//! - [`table`]: every command's facts and handler, walked by `init`;
//! - [`call`]: one call (arguments, the ring at its key, errors, dispatch);
//! - [`commands`]: the handlers; [`args`]: their option parsing; [`reply`]: reply trees;
//! - [`ringtype`]: the `ringslot1` data type (RDB, AOF, copy, memory, digest);
//! - [`cmdinfo`]: `COMMAND INFO` / `DOCS` for a table entry.

pub mod args;
pub mod call;
pub mod cmdinfo;
pub mod commands;
pub mod reply;
pub mod ringtype;
pub mod table;

use redis_module::alloc::RedisAlloc;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

/// `ringslot.default-vnodes`: VNODES of the rings `RING.ADD` creates (default 160).
pub static DEFAULT_VNODES: AtomicI64 = AtomicI64::new(160);
/// `ringslot.max-points`: the most points one ring may have (default 10000000).
pub static MAX_POINTS: AtomicI64 = AtomicI64::new(10_000_000);
/// `ringslot.max-sample`: the most members `RING.MOVES` evaluates (default 1000000).
pub static MAX_SAMPLE: AtomicI64 = AtomicI64::new(1_000_000);

/// The current value of an `i64` configuration as a `u64` (configurations are >= 1).
pub fn config_u64(config: &AtomicI64) -> u64 {
    u64::try_from(config.load(Ordering::Relaxed)).unwrap_or(0)
}

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
