//! `RING.MOVES` in the background: the calling client is blocked (`RedisModule_BlockClient`),
//! a worker thread evaluates a snapshot of the ring taken when the command was called, and
//! the reply is the same map an inline evaluation gives.
//!
//! - Sample members are made and evaluated on the worker alone.
//! - Keys are read from the keyspace in slices of [`SLICE`] keys with the server lock held
//!   (a thread-safe context, `RedisModule_Scan`), then hashed and counted with the lock free,
//!   so that other clients wait at most one slice. Memory per run is one slice of names,
//!   whatever the number of keys.
//! - A client that disconnects cancels its run (the worker stops at its next slice), as does
//!   a server that shuts down; `ringslot.max-background` runs may go at once.
//! - A write to the ring meanwhile copies the ring first (see [`super::ringtype::RingValue`]),
//!   so it changes nothing in the result; `DEL`, `DEBUG RELOAD` or `FLUSHALL` of the database
//!   meanwhile are safe too (the keys walked are then those of the database as it changes).

use super::call::{reply_error, CommandError, RawCtx};
use super::commands::Answer;
use super::config::{self, MAX_BACKGROUND};
use super::keys::KeyWalk;
use super::stats;
use crate::engine::{sample_members, Change, EngineError, Scheme, SchemeParams, Topology};
use redis_module::raw;
use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Keys read from the keyspace per hold of the server lock (about 0.2-0.5 ms).
pub const SLICE: u64 = 1024;

/// Where a background run's members come from.
pub enum Source {
    /// `SAMPLE count` over the ring called `name`.
    Sample {
        /// The ring key's name.
        name: Vec<u8>,
        /// How many members.
        count: u64,
    },
    /// The keys a walk finds; more than `limit` matches is an error.
    Keys {
        /// The walk, with the caller's rights.
        walk: KeyWalk,
        /// `ringslot.max-sample`.
        limit: u64,
    },
}

/// One background what-if.
pub struct Run {
    /// The ring as it was when the command was called.
    pub topo: Arc<Topology>,
    /// The change to evaluate.
    pub change: Change,
    /// The members.
    pub source: Source,
    /// `ringslot.max-points`.
    pub max_points: u64,
    /// The schemes of `SCHEMES`, with their parameters; `None`: ring, slots and modulo.
    pub schemes: Option<(Vec<Scheme>, SchemeParams)>,
}

/// What a run shares with the callbacks that may cancel it.
#[derive(Default)]
struct RunState {
    cancelled: AtomicBool,
    evaluated: AtomicU64,
}

impl RunState {
    fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Counts `n` more members evaluated.
    fn progress(&self, n: u64) {
        self.evaluated.fetch_add(n, Ordering::Relaxed);
        stats::RUNNING_EVALUATED.fetch_add(n, Ordering::Relaxed);
    }
}

/// The runs in progress, by blocked client (its address), for the disconnect callback and
/// shutdown.
static RUNS: Mutex<Vec<(usize, Arc<RunState>)>> = Mutex::new(Vec::new());

fn runs() -> std::sync::MutexGuard<'static, Vec<(usize, Arc<RunState>)>> {
    RUNS.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the worker hands to the reply callback.
enum Outcome {
    Done(Answer),
    Failed(CommandError),
    Cancelled,
}

/// The pointers a worker needs, sent to its thread.
struct Handles {
    bc: *mut raw::RedisModuleBlockedClient,
    /// The thread-safe context of `bc`, made on the main thread (null when this Redis has
    /// none).
    tsc: RawCtx,
}

// SAFETY: a blocked client handle and its thread-safe context are meant to be used from
// another thread (that is what `RedisModule_ThreadSafeContextLock` and
// `RedisModule_UnblockClient` are for); the worker is their only user until it unblocks it.
unsafe impl Send for Handles {}

/// Starts `run` for the client of `ctx`: blocks it and spawns the worker. Errors:
/// `ringslot.max-background` runs already going, or a client that cannot be blocked.
///
/// # Safety
/// `ctx` must be the live context of a command call on the main thread, in a context where
/// blocking is allowed.
pub unsafe fn start(ctx: RawCtx, run: Run) -> Result<(), CommandError> {
    let max = i64::try_from(config::get(&MAX_BACKGROUND)).unwrap_or(i64::MAX);
    let reserved = stats::RUNNING.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
        (n < max).then_some(n + 1)
    });
    if reserved.is_err() {
        return Err(CommandError::Text(format!(
            "ERR {max} RING.MOVES already run in the background, the most ringslot.max-background \
             allows: try again when one ends"
        )));
    }
    let release = || stats::add(&stats::RUNNING, -1);
    let (Some(block), Some(on_disconnect_set)) = (
        raw::RedisModule_BlockClient,
        raw::RedisModule_SetDisconnectCallback,
    ) else {
        release();
        return Err(CommandError::Text(
            "ERR this Redis cannot block clients".into(),
        ));
    };
    let bc = block(ctx, Some(reply), None, Some(free_outcome), 0);
    if bc.is_null() {
        release();
        return Err(CommandError::Text(
            "ERR this client cannot be blocked".into(),
        ));
    }
    on_disconnect_set(bc, Some(disconnected));
    // Made here, on the main thread: RedisModule_GetThreadSafeContext reads the blocked
    // client, which a disconnect frees on the main thread.
    let tsc = raw::RedisModule_GetThreadSafeContext
        .map(|get| get(bc))
        .unwrap_or(std::ptr::null_mut());
    let state = Arc::new(RunState::default());
    runs().push((bc as usize, Arc::clone(&state)));
    let handles = Handles { bc, tsc };
    let spawned = std::thread::Builder::new()
        .name("ringslot-moves".into())
        .spawn(move || work(handles, run, state));
    if spawned.is_err() {
        free_context(tsc);
        // Nothing will unblock the client: say why now.
        let outcome = Outcome::Failed(CommandError::Text(
            "ERR could not start a background thread".into(),
        ));
        finish(bc, outcome, 0, Instant::now());
    }
    Ok(())
}

/// The worker: evaluates, then hands the outcome to the main thread.
fn work(handles: Handles, run: Run, state: Arc<RunState>) {
    let started = Instant::now();
    let Handles { bc, tsc } = handles;
    let outcome = super::call::run_caught(|| evaluate(run, tsc, &state)).unwrap_or_else(|why| {
        Outcome::Failed(CommandError::Text(format!(
            "ERR internal error in a background RING.MOVES: {why}"
        )))
    });
    free_context(tsc);
    finish(
        bc,
        outcome,
        state.evaluated.load(Ordering::Relaxed),
        started,
    );
}

/// Frees a run's thread-safe context (null: nothing to free), once, after its last use.
fn free_context(tsc: RawCtx) {
    if tsc.is_null() {
        return;
    }
    // SAFETY: made by RedisModule_GetThreadSafeContext in `start`; each run frees it once.
    if let Some(free) = unsafe { raw::RedisModule_FreeThreadSafeContext } {
        unsafe { free(tsc) };
    }
}

/// Holds the server lock through a thread-safe context; unlocks on drop, so that even an
/// unwind out of the locked section leaves Redis running.
struct ServerLock(RawCtx);

impl ServerLock {
    /// Takes the lock.
    ///
    /// # Safety
    /// `tsc` must be a live thread-safe context, used from a thread other than the main one.
    unsafe fn take(tsc: RawCtx) -> ServerLock {
        if let Some(lock) = raw::RedisModule_ThreadSafeContextLock {
            lock(tsc);
        }
        ServerLock(tsc)
    }
}

impl Drop for ServerLock {
    fn drop(&mut self) {
        // SAFETY: the context locked in `take`, still live.
        if let Some(unlock) = unsafe { raw::RedisModule_ThreadSafeContextUnlock } {
            unsafe { unlock(self.0) };
        }
    }
}

/// Records the end of a run and unblocks its client with `outcome`.
fn finish(
    bc: *mut raw::RedisModuleBlockedClient,
    outcome: Outcome,
    evaluated: u64,
    started: Instant,
) {
    if matches!(outcome, Outcome::Cancelled) {
        stats::RUNS_CANCELLED.fetch_add(1, Ordering::Relaxed);
    }
    stats::RUNNING_EVALUATED.fetch_sub(evaluated, Ordering::Relaxed);
    stats::TOTAL_EVALUATED.fetch_add(evaluated, Ordering::Relaxed);
    stats::LAST_RUN_EVALUATED.store(evaluated, Ordering::Relaxed);
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    stats::LAST_RUN_MS.store(ms, Ordering::Relaxed);
    stats::RUNS_DONE.fetch_add(1, Ordering::Relaxed);
    runs().retain(|(b, _)| *b != bc as usize);
    stats::add(&stats::RUNNING, -1);
    let outcome = Box::into_raw(Box::new(outcome)).cast::<c_void>();
    // SAFETY: `bc` is this run's blocked client, unblocked once; Redis hands `outcome` to
    // `reply` and then to `free_outcome`, which frees it.
    if let Some(unblock) = unsafe { raw::RedisModule_UnblockClient } {
        unsafe { unblock(bc, outcome) };
    }
}

/// Evaluates a run on the worker thread.
fn evaluate(run: Run, tsc: RawCtx, state: &RunState) -> Outcome {
    let Run {
        topo,
        change,
        source,
        max_points,
        schemes,
    } = run;
    let answer = |members: &mut dyn Iterator<Item = Vec<u8>>| -> Result<Answer, EngineError> {
        match &schemes {
            None => topo
                .what_if(&change, members, max_points)
                .map(Answer::Default),
            Some((list, params)) => topo
                .what_if_schemes(&change, members, list, params, max_points)
                .map(Answer::Schemes),
        }
    };
    let result = match source {
        Source::Sample { name, count } => {
            let mut members = Counted {
                inner: sample_members(&name, count),
                state,
                since: 0,
            };
            let result = answer(&mut members);
            state.progress(members.since);
            result.map_err(CommandError::from)
        }
        Source::Keys { walk, limit } => {
            let mut feed = KeyFeed {
                walk,
                tsc,
                slice: Vec::new(),
                matched: 0,
                limit,
                state,
                error: None,
            };
            let result = answer(&mut feed);
            match feed.error {
                Some(e) => Err(e),
                None => result.map_err(CommandError::from),
            }
        }
    };
    match result {
        _ if state.cancelled() => Outcome::Cancelled,
        Ok(w) => Outcome::Done(w),
        Err(e) => Outcome::Failed(e),
    }
}

/// Sample members, counted for `INFO` and stopped when the run is cancelled.
struct Counted<'a, I> {
    inner: I,
    state: &'a RunState,
    since: u64,
}

impl<I: Iterator<Item = Vec<u8>>> Iterator for Counted<'_, I> {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        if self.since == SLICE {
            self.state.progress(self.since);
            self.since = 0;
            if self.state.cancelled() {
                return None;
            }
        }
        let member = self.inner.next()?;
        self.since += 1;
        Some(member)
    }
}

/// The keys of a walk, read a slice at a time with the server lock held.
struct KeyFeed<'a> {
    walk: KeyWalk,
    tsc: RawCtx,
    slice: Vec<Vec<u8>>,
    matched: u64,
    limit: u64,
    state: &'a RunState,
    error: Option<CommandError>,
}

impl Iterator for KeyFeed<'_> {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(key) = self.slice.pop() {
                return Some(key);
            }
            if self.walk.is_done() || self.state.cancelled() || self.error.is_some() {
                return None;
            }
            if self.tsc.is_null() {
                self.error = Some(CommandError::Text(
                    "ERR this Redis has no thread-safe contexts".into(),
                ));
                return None;
            }
            // SAFETY: the thread-safe context of this run's blocked client; the slice is
            // read between lock and unlock, as RedisModule_Scan requires from a thread.
            let step = unsafe {
                let _lock = ServerLock::take(self.tsc);
                self.walk.step(self.tsc, SLICE, &mut self.slice)
            };
            if let Err(e) = step {
                self.error = Some(e);
                return None;
            }
            self.matched += self.slice.len() as u64;
            self.state.progress(self.slice.len() as u64);
            if self.matched > self.limit {
                self.error = Some(EngineError::TooManyMatches { limit: self.limit }.into());
                self.slice.clear();
                return None;
            }
        }
    }
}

/// Sends the outcome to the client that was blocked (main thread).
unsafe extern "C" fn reply(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let outcome = raw::RedisModule_GetBlockedClientPrivateData
        .map(|get| get(ctx).cast::<Outcome>())
        .unwrap_or(std::ptr::null_mut());
    let resp3 = raw::RedisModule_GetContextFlags.map_or(0, |flags| flags(ctx))
        & raw::REDISMODULE_CTX_FLAGS_RESP3 as c_int
        != 0;
    match outcome.as_ref() {
        Some(Outcome::Done(a)) => a.reply().send(ctx, resp3),
        Some(Outcome::Failed(e)) => reply_error(ctx, e),
        Some(Outcome::Cancelled) | None => reply_error(
            ctx,
            &CommandError::Text("ERR RING.MOVES was cancelled".into()),
        ),
    }
    raw::Status::Ok as c_int
}

/// Frees the outcome after the reply (or when the client is gone).
unsafe extern "C" fn free_outcome(_ctx: *mut raw::RedisModuleCtx, privdata: *mut c_void) {
    if !privdata.is_null() {
        drop(Box::from_raw(privdata.cast::<Outcome>()));
    }
}

/// The client of a run went away: the run stops at its next slice.
unsafe extern "C" fn disconnected(
    _ctx: *mut raw::RedisModuleCtx,
    bc: *mut raw::RedisModuleBlockedClient,
) {
    for (b, state) in runs().iter() {
        if *b == bc as usize {
            state.cancelled.store(true, Ordering::Relaxed);
        }
    }
}

/// The server shuts down: every run stops at its next slice.
unsafe extern "C" fn shutting_down(
    _ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut c_void,
) {
    for (_, state) in runs().iter() {
        state.cancelled.store(true, Ordering::Relaxed);
    }
}

/// Subscribes to the shutdown event (called from `init`).
pub fn register(ctx: &redis_module::Context) {
    let event = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_SHUTDOWN,
        dataver: 1,
    };
    // SAFETY: a plain read of a function-pointer static set by RedisModule_Init; called in
    // OnLoad with its context.
    if let Some(subscribe) = unsafe { raw::RedisModule_SubscribeToServerEvent } {
        unsafe { subscribe(ctx.ctx, event, Some(shutting_down)) };
    }
}
