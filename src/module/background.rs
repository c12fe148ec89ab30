//! A job runner for evaluations too long for Redis' main thread (`RING.MOVES`,
//! `RING.OWNERS`, `RING.BALANCE` past `ringslot.inline-limit`): the calling client is blocked
//! (`RedisModule_BlockClient`), a worker thread runs the job's closure over the job's members
//! and hands back a finished reply, which the main thread sends. The runner knows nothing of
//! the commands: a job is a source of members and a closure.
//!
//! - Sample members are made on the worker alone.
//! - Keys are read from the keyspace in slices of [`SLICE`] keys with the server lock held
//!   (a thread-safe context, `RedisModule_Scan` or `CLUSTER GETKEYSINSLOT`), then handed to the
//!   closure with the lock free, so that other clients wait at most one slice. Memory per run
//!   is one slice of names, whatever the number of keys.
//! - A client that disconnects cancels its run (the worker stops at its next slice), as does
//!   a server that shuts down; `ringslot.max-background` runs may go at once.
//! - What a closure evaluates is a snapshot (an `Arc` of the ring, see
//!   [`super::ringtype::RingValue`]): a write to the ring meanwhile copies it first, so it
//!   changes nothing in the result; `DEL`, `DEBUG RELOAD` or `FLUSHALL` meanwhile are safe too
//!   (the keys walked are then those of the database as it changes).
//! - `ringslot.debug-pause-background` (for tests, as Redis' own `key-load-delay`) makes every
//!   worker wait before each slice of members while it is 1, so that a test can act while a
//!   run is certainly in progress, whatever the machine's speed.

use super::call::{reply_error, Call, RawCtx};
use super::config::{self, DEBUG_PAUSE, INLINE_LIMIT, MAX_BACKGROUND};
use super::errors::CommandError;
use super::keys::{KeyWalk, Member};
use super::live;
use super::reply::Reply;
use super::stats;
use crate::engine::{sample_members, EngineError, MemberWeight};
use redis_module::{raw, ContextFlags};
use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Keys read from the keyspace per hold of the server lock (what a hold costs: BENCHMARKS.md,
/// "Figures behind the code").
pub const SLICE: u64 = 1024;

/// Keys read per hold of the server lock by a walk that weighs them (`WEIGH`): each costs a
/// `MEMORY USAGE` call and an LFU read besides, about four times a plain key.
pub const WEIGHED_SLICE: u64 = 256;

/// The sample members of the ring `name`, weighing nothing.
fn samples(name: &[u8], count: u64) -> impl Iterator<Item = Member> + '_ {
    sample_members(name, count).map(|m| (m, MemberWeight::default()))
}

/// Where a job's members come from.
pub enum Source {
    /// No members (an evaluation of the ring alone).
    Nothing,
    /// `SAMPLE count` over the ring called `name`.
    Sample {
        /// The ring key's name.
        name: Vec<u8>,
        /// How many members.
        count: u64,
    },
    /// The keys a walk finds; more than `limit` matches is an error.
    Keys {
        /// The walk, with the caller's rights (boxed: it is most of the enum's size).
        walk: Box<KeyWalk>,
        /// `ringslot.max-sample`.
        limit: u64,
    },
}

/// What a job does with its members: the whole reply, or the error to reply.
pub type Work = Box<
    dyn FnOnce(&mut dyn Iterator<Item = Member>) -> Result<Reply<'static>, CommandError> + Send,
>;

/// One evaluation for a worker.
pub struct Job {
    /// The command, for messages (`RING.MOVES`).
    pub command: &'static str,
    /// Its members.
    pub source: Source,
    /// What it does with them.
    pub work: Work,
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
    Done(Reply<'static>),
    Failed(CommandError),
    Cancelled(&'static str),
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

/// Runs `job` for the call: on Redis' main thread when its estimated work (`units`) fits in
/// `ringslot.inline-limit`, else in the background ([`start`]), except where the client cannot
/// be blocked (`MULTI`, scripts), where it is refused with an error that names the limit and
/// says what costs (`what`). Inline, a keyspace walk runs to its end first (at most
/// `ringslot.max-sample` keys).
///
/// A keyspace walk (`KEYS`, `SLOTS`: it reads keys of other hash slots) always runs in the
/// background on a server that reads a command's keys in the command's own slot (Valkey 8
/// and later, see [`live::keys_read_in_own_slot`]); there, `MULTI` and scripts get an error.
pub fn run(call: &Call, job: Job, units: u64, what: &str) -> Result<(), CommandError> {
    let limit = config::get(&INLINE_LIMIT);
    let opens_keys = matches!(&job.source, Source::Keys { walk, .. } if walk.opens_keys());
    let blocked = ContextFlags::MULTI | ContextFlags::LUA | ContextFlags::DENY_BLOCKING;
    if opens_keys && live::keys_read_in_own_slot(&call.context()) {
        if call.flags().intersects(blocked) {
            return Err(CommandError::BackgroundOnly {
                command: job.command,
            });
        }
        // SAFETY: the live context of this call, on the main thread, which may block.
        return unsafe { start(call.context().ctx, job) };
    }
    if units > limit {
        if call.flags().intersects(blocked) {
            return Err(CommandError::PastInlineLimit {
                command: job.command,
                what: what.to_string(),
                units,
                limit,
            });
        }
        // SAFETY: the live context of this call, on the main thread, which may block.
        return unsafe { start(call.context().ctx, job) };
    }
    let Job { source, work, .. } = job;
    let reply = match source {
        Source::Nothing => work(&mut std::iter::empty())?,
        Source::Sample { name, count } => work(&mut samples(&name, count))?,
        Source::Keys { walk, limit } => {
            // SAFETY: the live context of this call, on the main thread; the whole walk
            // happens within this call.
            let (keys, unreadable) = unsafe { walk.run_to_end(call.context().ctx, limit)? };
            with_unreadable(work(&mut keys.into_iter())?, unreadable)
        }
    };
    call.reply(&reply);
    Ok(())
}

/// `reply` with the field `unreadable` (the keys a walk skipped because the caller may not
/// read them) at the end of its map, when there were any.
fn with_unreadable(reply: Reply<'static>, unreadable: u64) -> Reply<'static> {
    match reply {
        Reply::Map(mut fields) if unreadable > 0 => {
            fields.push(("unreadable", Reply::count(unreadable)));
            Reply::Map(fields)
        }
        other => other,
    }
}

/// Starts `job` for the client of `ctx`: blocks it and spawns the worker. Errors:
/// `ringslot.max-background` runs already going, or a client that cannot be blocked.
///
/// # Safety
/// `ctx` must be the live context of a command call on the main thread, in a context where
/// blocking is allowed.
pub unsafe fn start(ctx: RawCtx, job: Job) -> Result<(), CommandError> {
    let max = i64::try_from(config::get(&MAX_BACKGROUND)).unwrap_or(i64::MAX);
    let reserved = stats::RUNNING.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
        (n < max).then_some(n + 1)
    });
    if reserved.is_err() {
        return Err(CommandError::BackgroundBusy { max });
    }
    let release = || stats::add(&stats::RUNNING, -1);
    let (Some(block), Some(on_disconnect_set)) = (
        raw::RedisModule_BlockClient,
        raw::RedisModule_SetDisconnectCallback,
    ) else {
        release();
        return Err(CommandError::NoBlocking);
    };
    let bc = block(ctx, Some(reply), None, Some(free_outcome), 0);
    if bc.is_null() {
        release();
        return Err(CommandError::CannotBlock);
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
        .name("ringslot-job".into())
        .spawn(move || work(handles, job, state));
    if spawned.is_err() {
        free_context(tsc);
        // Nothing will unblock the client: say why now.
        let outcome = Outcome::Failed(CommandError::NoThread);
        finish(bc, outcome, 0, Instant::now());
    }
    Ok(())
}

/// The worker: runs the job, then hands the outcome to the main thread.
fn work(handles: Handles, job: Job, state: Arc<RunState>) {
    let started = Instant::now();
    let Handles { bc, tsc } = handles;
    let command = job.command;
    let outcome =
        super::call::run_caught(|| run_on_worker(job, tsc, &state)).unwrap_or_else(|why| {
            Outcome::Failed(CommandError::Internal {
                command: Some(command),
                why,
            })
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
    if matches!(outcome, Outcome::Cancelled(_)) {
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

/// Waits while `ringslot.debug-pause-background` is 1 (tests), or until the run is cancelled.
fn pause_point(state: &RunState) {
    while config::get(&DEBUG_PAUSE) == 1 && !state.cancelled() {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs a job on the worker thread.
fn run_on_worker(job: Job, tsc: RawCtx, state: &RunState) -> Outcome {
    let Job {
        command,
        source,
        work,
    } = job;
    let result = match source {
        Source::Nothing => {
            pause_point(state);
            work(&mut std::iter::empty())
        }
        Source::Sample { name, count } => {
            let mut members = Counted {
                inner: samples(&name, count),
                state,
                since: 0,
            };
            let result = work(&mut members);
            state.progress(members.since);
            result
        }
        Source::Keys { walk, limit } => {
            let mut feed = KeyFeed {
                walk: *walk,
                tsc,
                slice: Vec::new(),
                walked: 0,
                matched: 0,
                limit,
                state,
                error: None,
            };
            let result = work(&mut feed);
            match feed.error {
                Some(e) => Err(e),
                None => result.and_then(|r| Ok(with_unreadable(r, feed.walk.unreadable()?))),
            }
        }
    };
    match result {
        _ if state.cancelled() => Outcome::Cancelled(command),
        Ok(reply) => Outcome::Done(reply),
        Err(e) => Outcome::Failed(e),
    }
}

/// Sample members, counted for `INFO` and stopped when the run is cancelled.
struct Counted<'a, I> {
    inner: I,
    state: &'a RunState,
    since: u64,
}

impl<I: Iterator<Item = Member>> Iterator for Counted<'_, I> {
    type Item = Member;

    fn next(&mut self) -> Option<Member> {
        if self.since == SLICE {
            self.state.progress(self.since);
            self.since = 0;
            pause_point(self.state);
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
    slice: Vec<Member>,
    /// Slices read so far.
    walked: u64,
    matched: u64,
    limit: u64,
    state: &'a RunState,
    error: Option<CommandError>,
}

impl Iterator for KeyFeed<'_> {
    type Item = Member;

    fn next(&mut self) -> Option<Member> {
        loop {
            if let Some(key) = self.slice.pop() {
                return Some(key);
            }
            if self.walk.is_done() || self.state.cancelled() || self.error.is_some() {
                return None;
            }
            if self.matched > 0 || self.walked > 0 {
                pause_point(self.state);
            }
            if self.tsc.is_null() {
                self.error = Some(CommandError::NoThreadSafeContext);
                return None;
            }
            // SAFETY: the thread-safe context of this run's blocked client; the slice is
            // read between lock and unlock, as RedisModule_Scan requires from a thread.
            let step = unsafe {
                let _lock = ServerLock::take(self.tsc);
                let held = Instant::now();
                let slice = if self.walk.weighs() {
                    WEIGHED_SLICE
                } else {
                    SLICE
                };
                let step = self.walk.step(self.tsc, slice, &mut self.slice);
                note_hold(held);
                step
            };
            if let Err(e) = step {
                self.error = Some(e);
                return None;
            }
            self.walked += 1;
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

/// The latency event a slice's hold of the server lock is reported under (`LATENCY LATEST`,
/// `LATENCY HISTORY ringslot-slice`, when it reaches `latency-monitor-threshold`): the time a
/// background walk kept the main thread waiting, which `SLOWLOG` does not see.
pub const SLICE_EVENT: &std::ffi::CStr = c"ringslot-slice";

/// Reports a slice's hold of the lock, begun at `held`, to the latency monitor (which keeps it
/// only when it reaches `latency-monitor-threshold`). Called with the lock still held.
fn note_hold(held: Instant) {
    let ms = i64::try_from(held.elapsed().as_millis()).unwrap_or(i64::MAX);
    // SAFETY: a plain read of a function-pointer static set by RedisModule_Init; the call
    // runs with the server lock held, as the latency monitor's tables need.
    if let (Some(add), true) = (unsafe { raw::RedisModule_LatencyAddSample }, ms > 0) {
        unsafe { add(SLICE_EVENT.as_ptr(), ms) };
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
        Some(Outcome::Done(reply)) => reply.send(ctx, resp3),
        Some(Outcome::Failed(e)) => reply_error(ctx, e),
        Some(Outcome::Cancelled(command)) => reply_error(ctx, &CommandError::Cancelled { command }),
        None => reply_error(
            ctx,
            &CommandError::Cancelled {
                command: "RING.* evaluation",
            },
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
