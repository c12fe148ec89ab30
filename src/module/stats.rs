//! Module-wide counters and the `INFO ringslot` section: the rings and points in the keyspace,
//! and the background what-ifs (running, keys evaluated, the last run's duration).

use redis_module::raw;
use std::ffi::CString;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Ring keys in the keyspace (all databases).
pub static RINGS: AtomicI64 = AtomicI64::new(0);
/// Points of all ring keys.
pub static POINTS: AtomicI64 = AtomicI64::new(0);
/// Background `RING.MOVES` runs in progress.
pub static RUNNING: AtomicI64 = AtomicI64::new(0);
/// Members (sample members or keys) evaluated by the runs in progress so far.
pub static RUNNING_EVALUATED: AtomicU64 = AtomicU64::new(0);
/// Members evaluated by every background run since the module loaded.
pub static TOTAL_EVALUATED: AtomicU64 = AtomicU64::new(0);
/// Background runs finished (completed, failed or cancelled) since the module loaded.
pub static RUNS_DONE: AtomicU64 = AtomicU64::new(0);
/// Background runs cancelled (the client left, or the server shuts down).
pub static RUNS_CANCELLED: AtomicU64 = AtomicU64::new(0);
/// Duration of the last finished background run, in milliseconds.
pub static LAST_RUN_MS: AtomicU64 = AtomicU64::new(0);
/// Members the last finished background run evaluated.
pub static LAST_RUN_EVALUATED: AtomicU64 = AtomicU64::new(0);

/// Adds `n` (which may be negative) to a counter.
pub fn add(counter: &AtomicI64, n: i64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// Adds the fields of `INFO ringslot`.
///
/// # Safety
/// Called by Redis with a live info context.
unsafe extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: i32) {
    let (Some(section), Some(field)) = (
        raw::RedisModule_InfoAddSection,
        raw::RedisModule_InfoAddFieldLongLong,
    ) else {
        return;
    };
    // The module's own section: `INFO ringslot` shows it as `# ringslot`.
    section(ctx, c"".as_ptr().cast_mut());
    let u = |c: &AtomicU64| i64::try_from(c.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
    let i = |c: &AtomicI64| c.load(Ordering::Relaxed);
    let fields: [(&str, i64); 9] = [
        ("rings", i(&RINGS)),
        ("ring_points", i(&POINTS)),
        ("background_runs", i(&RUNNING)),
        ("background_evaluated", u(&RUNNING_EVALUATED)),
        ("total_evaluated", u(&TOTAL_EVALUATED)),
        ("runs_done", u(&RUNS_DONE)),
        ("runs_cancelled", u(&RUNS_CANCELLED)),
        ("last_run_ms", u(&LAST_RUN_MS)),
        ("last_run_evaluated", u(&LAST_RUN_EVALUATED)),
    ];
    for (name, value) in fields {
        if let Ok(name) = CString::new(name) {
            field(ctx, name.as_ptr(), value);
        }
    }
}

/// Registers the `INFO ringslot` section (replacing the crate's empty default).
pub fn register(ctx: &redis_module::Context) {
    // SAFETY: a plain read of a function-pointer static set by RedisModule_Init; called in
    // OnLoad.
    if let Some(register) = unsafe { raw::RedisModule_RegisterInfoFunc } {
        unsafe { register(ctx.ctx, Some(info)) };
    }
}
