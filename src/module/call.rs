//! One call of a RING.* command as Redis hands it to the module: its context and its
//! arguments, read where Redis keeps them (no copies), the ring at its key, the error a handler
//! can return, and the dispatch that turns a handler's error or panic into the reply.
//!
//! Every command is a raw command callback (see [`super::table`]): there is no per-call `Vec`
//! of retained argument strings and no owned copy of reply strings, which took a pipelined
//! `RING.GET` a tenth of its server CPU (BENCHMARKS.md, "Figures behind the code").

use super::errors::CommandError;
use super::reply::Reply;
use super::ringtype::{RingMut, RingValue, RING_TYPE};
use crate::engine::Topology;
use redis_module::key::{RedisKey, RedisKeyWritable};
use redis_module::{raw, Context, ContextFlags, NotifyEvent, RedisString};
use std::ffi::CString;
use std::mem::ManuallyDrop;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// The module's context pointer, as Redis passes it.
pub type RawCtx = *mut raw::RedisModuleCtx;
/// The argument vector, as Redis passes it.
pub type RawArgv = *mut *mut raw::RedisModuleString;
/// A command callback, as `RedisModule_CreateCommand` takes it.
pub type RawCallback = unsafe extern "C" fn(RawCtx, RawArgv, c_int) -> c_int;

/// A command handler: does all its fallible work first and replies last (with
/// [`Call::reply`]), so that an error is always the whole reply.
pub type Handler = fn(&Call) -> Result<(), CommandError>;

/// One call of a command: its context and arguments (`argv[0]` is the command name, `argv[1]`
/// the ring key).
pub struct Call<'a> {
    ctx: RawCtx,
    argv: &'a [*mut raw::RedisModuleString],
}

impl<'a> Call<'a> {
    /// The number of arguments, the command name included.
    pub fn len(&self) -> usize {
        self.argv.len()
    }

    /// Whether there are no arguments at all (never, for a call Redis made).
    pub fn is_empty(&self) -> bool {
        self.argv.is_empty()
    }

    /// Argument `i` as bytes (Redis' own buffer, valid for the call); `WrongArity` past the
    /// end.
    pub fn arg(&self, i: usize) -> Result<&'a [u8], CommandError> {
        self.argv
            .get(i)
            .map(|&s| RedisString::string_as_slice(s))
            .ok_or(CommandError::WrongArity)
    }

    /// The arguments from `i` on, as bytes.
    pub fn args_from(&self, i: usize) -> Vec<&'a [u8]> {
        self.argv
            .get(i..)
            .unwrap_or(&[])
            .iter()
            .map(|&s| RedisString::string_as_slice(s))
            .collect()
    }

    /// The arguments from `i` on; `WrongArity` unless there are between `min` and `max` of
    /// them (Redis checks the arity first; this keeps each handler safe on its own).
    pub fn rest(&self, i: usize, min: usize, max: usize) -> Result<Vec<&'a [u8]>, CommandError> {
        let rest = self.args_from(i);
        if self.len() < 2 || rest.len() < min || rest.len() > max {
            return Err(CommandError::WrongArity);
        }
        Ok(rest)
    }

    /// The crate's context for this call.
    pub fn context(&self) -> Context {
        Context::new(self.ctx)
    }

    /// The context's flags (replicated, loading, in MULTI, RESP3, ...).
    pub fn flags(&self) -> ContextFlags {
        self.context().get_flags()
    }

    /// The ring key, `argv[1]`, borrowed: Redis keeps argv alive for the call, and
    /// `ManuallyDrop` keeps the wrapper from freeing a string it does not own.
    pub fn key_name(&self) -> Result<ManuallyDrop<RedisString>, CommandError> {
        let &name = self.argv.get(1).ok_or(CommandError::WrongArity)?;
        Ok(ManuallyDrop::new(RedisString::from_redis_module_string(
            self.ctx, name,
        )))
    }

    /// Runs `f` on the ring at the key (`None` when the key is missing), opened read-only as
    /// `GET` opens its key (hit/miss stats, expiry, LRU); `WRONGTYPE` for another type.
    pub fn read_ring<R>(
        &self,
        f: impl FnOnce(Option<&Topology>) -> Result<R, CommandError>,
    ) -> Result<R, CommandError> {
        let name = self.key_name()?;
        let key = RedisKey::open(self.ctx, &name);
        let ring = key
            .get_value::<RingValue>(&RING_TYPE)
            .map_err(|_| CommandError::WrongType)?;
        f(ring.map(RingValue::topology))
    }

    /// [`Call::read_ring`] of a ring that must exist: a missing key is an error naming it
    /// (what-ifs, plans, owners and balance of a ring that is not there).
    pub fn read_existing_ring<R>(
        &self,
        f: impl FnOnce(&Topology) -> Result<R, CommandError>,
    ) -> Result<R, CommandError> {
        self.read_ring(|ring| match ring {
            Some(ring) => f(ring),
            None => Err(self.no_such_key()),
        })
    }

    /// `ERR no such key '<key>'`.
    pub fn no_such_key(&self) -> CommandError {
        let name = self
            .argv
            .get(1)
            .map(|&s| RedisString::string_as_slice(s))
            .unwrap_or_default();
        CommandError::NoSuchKey(name.to_vec())
    }

    /// A snapshot of the ring at the key that later writes do not change. Errors: a missing
    /// key (naming it), `WRONGTYPE` for another type.
    pub fn ring_snapshot(&self) -> Result<Arc<Topology>, CommandError> {
        let name = self.key_name()?;
        let key = RedisKey::open(self.ctx, &name);
        let ring = key
            .get_value::<RingValue>(&RING_TYPE)
            .map_err(|_| CommandError::WrongType)?;
        ring.map(RingValue::snapshot)
            .ok_or_else(|| self.no_such_key())
    }

    /// Opens the key for writing; see [`WritableRing`].
    pub fn write_ring(&self) -> Result<WritableRing, CommandError> {
        let name = self.key_name()?;
        let key = RedisKeyWritable::open(self.ctx, &name);
        // Check the type now, so that every later access is a ring or nothing.
        key.get_value::<RingValue>(&RING_TYPE)
            .map_err(|_| CommandError::WrongType)?;
        Ok(WritableRing { key })
    }

    /// Replicates the command as called (which also counts it dirty for `SAVE`) and fires
    /// the keyspace notification `event` (class `d`, module) on the key.
    pub fn propagate(&self, event: &str) -> Result<(), CommandError> {
        let ctx = self.context();
        ctx.replicate_verbatim();
        let name = self.key_name()?;
        ctx.notify_keyspace_event(NotifyEvent::MODULE, event, &name);
        Ok(())
    }

    /// Sends `reply` (build all of it before sending).
    pub fn reply(&self, reply: &Reply) {
        reply.send(self.ctx, reply.depends_on_protocol() && self.resp3());
    }

    /// Sends `items` as an array reply, without a vector (for the fixed-size replies of the
    /// per-member commands).
    pub fn reply_array(&self, items: &[Reply]) {
        let resp3 = items.iter().any(Reply::depends_on_protocol) && self.resp3();
        Reply::send_array(items, self.ctx, resp3);
    }

    /// Whether the client speaks RESP3.
    fn resp3(&self) -> bool {
        self.flags().contains(ContextFlags::FLAGS_RESP3)
    }
}

/// A key opened for writing that holds a ring or nothing (its type was checked on opening).
pub struct WritableRing {
    key: RedisKeyWritable,
}

impl WritableRing {
    /// The ring, to change, `None` when the key is missing.
    pub fn ring(&self) -> Option<RingMut<'_>> {
        self.key
            .get_value::<RingValue>(&RING_TYPE)
            .ok()
            .flatten()
            .map(RingValue::modify)
    }

    /// Whether the key holds nothing.
    pub fn is_empty(&self) -> bool {
        self.key.is_empty()
    }

    /// Stores `ring` at the empty key.
    pub fn create(&self, ring: Topology) -> Result<(), CommandError> {
        Ok(self.key.set_value(&RING_TYPE, RingValue::new(ring))?)
    }
}

/// Runs `f`, returning the message of a panic instead of unwinding into Redis.
pub fn run_caught<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    })
}

/// Replies with an error: the whole `text` (which starts with its code, `ERR ...`), with any
/// NUL byte (which would end the C string early) shown as `\x00`.
pub(crate) fn reply_error(ctx: RawCtx, error: &CommandError) {
    match error {
        CommandError::WrongArity => {
            // SAFETY: a plain read of a function-pointer static set by RedisModule_Init.
            if let Some(wrong_arity) = unsafe { raw::RedisModule_WrongArity } {
                // SAFETY: ctx is the live context of the current call.
                unsafe { wrong_arity(ctx) };
            }
        }
        other => {
            let text = other.to_string().replace('\0', "\\x00");
            let text = CString::new(text).unwrap_or_default();
            raw::reply_with_error(ctx, text.as_ptr());
        }
    }
}

/// Runs `handler` for one call: an error becomes the reply, a panic becomes
/// `ERR internal error` and a warning in the log.
///
/// # Safety
/// `ctx`, `argv` and `argc` must be what Redis passed to a command callback, used before the
/// callback returns.
pub unsafe fn dispatch(
    ctx: RawCtx,
    argv: RawArgv,
    argc: c_int,
    name: &str,
    handler: Handler,
) -> c_int {
    let len = usize::try_from(argc).unwrap_or(0);
    let argv: &[*mut raw::RedisModuleString] = if argv.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: Redis calls a command with `argc` valid string pointers at `argv`, which
        // stay alive and unchanged until the callback returns; the slice does not outlive it.
        unsafe { std::slice::from_raw_parts(argv, len) }
    };
    let call = Call { ctx, argv };
    match run_caught(|| handler(&call)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => reply_error(ctx, &e),
        Err(why) => {
            call.context().log_warning(&format!(
                "ringslot: {} failed with an internal error: {why}",
                name.to_uppercase()
            ));
            reply_error(ctx, &CommandError::Internal { command: None, why });
        }
    }
    raw::Status::Ok as c_int
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_caught_with_its_message() {
        assert_eq!(run_caught(|| 7), Ok(7));
        assert_eq!(
            run_caught(|| -> i32 { panic!("boom") }),
            Err("boom".to_string())
        );
        let index = 3;
        let caught = run_caught(|| [1, 2][index]);
        assert!(caught.unwrap_err().contains("index out of bounds"));
    }
}
