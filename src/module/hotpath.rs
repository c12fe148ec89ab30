//! The read commands on a client's hot path, `RING.GET`, `RING.MGET` and `RING.SLOT`, as raw
//! command callbacks: they read their arguments where Redis keeps them and reply straight from
//! the ring, without the per-call work of the crate's command wrapper (a `Vec` of retained
//! argument strings, freed one by one afterwards, and owned copies of every reply string).
//! Measured pipelined, that took a `RING.GET` from about 0.74 to 0.65 µs of server CPU
//! (README, Performance). The other commands keep the crate's wrapper.
//!
//! Each handler does all its fallible work first and replies last, so an error or a caught
//! panic is always the whole reply.

use super::args;
use super::commands::{run_caught, INTERNAL_ERROR};
use super::ringtype::RING_TYPE;
use crate::engine::{key_slot, Topology};
use redis_module::key::RedisKey;
use redis_module::{raw, Context, RedisError, RedisString, Status};
use std::ffi::CString;
use std::mem::ManuallyDrop;
use std::os::raw::{c_char, c_int, c_long};

type RawCtx = *mut raw::RedisModuleCtx;
type RawArgv = *mut *mut raw::RedisModuleString;

/// One call of a command: its context and arguments (`argv[0]` is the command name).
struct Call<'a> {
    ctx: RawCtx,
    argv: &'a [*mut raw::RedisModuleString],
}

impl<'a> Call<'a> {
    /// Argument `i` as bytes (Redis' own buffer, valid for the call); `WrongArity` past the
    /// end.
    fn arg(&self, i: usize) -> Result<&'a [u8], RedisError> {
        self.argv
            .get(i)
            .map(|&s| RedisString::string_as_slice(s))
            .ok_or(RedisError::WrongArity)
    }

    /// The arguments from `i` on, as bytes.
    fn args_from(&self, i: usize) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.argv
            .get(i..)
            .unwrap_or(&[])
            .iter()
            .map(|&s| RedisString::string_as_slice(s))
    }

    /// Runs `f` on the ring at `argv[1]` (`None` when the key is missing), opened read-only
    /// as `GET` opens its key (hit/miss stats, expiry, LRU); `WRONGTYPE` for another type.
    fn with_ring<R>(&self, f: impl FnOnce(Option<&Topology>) -> R) -> Result<R, RedisError> {
        let &name = self.argv.get(1).ok_or(RedisError::WrongArity)?;
        // Borrowed, not retained: Redis keeps argv alive for the call, and ManuallyDrop
        // keeps the wrapper from freeing a string it does not own.
        let name = ManuallyDrop::new(RedisString::from_redis_module_string(self.ctx, name));
        let key = RedisKey::open(self.ctx, &name);
        let ring = key
            .get_value::<Topology>(&RING_TYPE)
            .map_err(|_| RedisError::WrongType)?;
        Ok(f(ring))
    }

    fn reply_bulk(&self, bytes: &[u8]) {
        raw::reply_with_string_buffer(self.ctx, bytes.as_ptr().cast::<c_char>(), bytes.len());
    }

    fn reply_bulk_or_nil(&self, bytes: Option<&[u8]>) {
        match bytes {
            Some(b) => self.reply_bulk(b),
            None => {
                raw::reply_with_null(self.ctx);
            }
        }
    }

    fn reply_array(&self, len: usize) {
        raw::reply_with_array(self.ctx, c_long::try_from(len).unwrap_or(c_long::MAX));
    }

    fn reply_integer(&self, n: i64) {
        raw::reply_with_long_long(self.ctx, n);
    }
}

type Handler = fn(&Call) -> Result<(), RedisError>;

/// Runs `handler` for one call: an error becomes the reply, a panic becomes
/// `ERR internal error` and a warning in the log (as the crate-wrapped commands do).
fn dispatch(ctx: RawCtx, argv: RawArgv, argc: c_int, name: &str, handler: Handler) -> c_int {
    let len = usize::try_from(argc).unwrap_or(0);
    let argv: &[*mut raw::RedisModuleString] = if argv.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: Redis calls a command with `argc` valid string pointers at `argv`, which
        // stay alive and unchanged until the callback returns; the slice does not outlive it.
        unsafe { std::slice::from_raw_parts(argv, len) }
    };
    let call = Call { ctx, argv };
    let context = Context::new(ctx);
    match run_caught(|| handler(&call)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            context.reply(Err(e));
        }
        Err(why) => {
            context.log_warning(&format!(
                "ringslot: {name} failed with an internal error: {why}"
            ));
            context.reply(Err(RedisError::Str(INTERNAL_ERROR)));
        }
    }
    raw::Status::Ok as c_int
}

extern "C" fn ring_get_command(ctx: RawCtx, argv: RawArgv, argc: c_int) -> c_int {
    dispatch(ctx, argv, argc, "RING.GET", get)
}

extern "C" fn ring_mget_command(ctx: RawCtx, argv: RawArgv, argc: c_int) -> c_int {
    dispatch(ctx, argv, argc, "RING.MGET", mget)
}

extern "C" fn ring_slot_command(ctx: RawCtx, argv: RawArgv, argc: c_int) -> c_int {
    dispatch(ctx, argv, argc, "RING.SLOT", slot)
}

/// `RING.GET key member [COUNT n]` -> the owner (bulk, or nil on an empty ring); with
/// `COUNT`, an array of up to n distinct nodes clockwise from the member, the owner first.
fn get(call: &Call) -> Result<(), RedisError> {
    let member = call.arg(2)?;
    let count = if call.argv.len() > 3 {
        let opts: Vec<&[u8]> = call.args_from(3).collect();
        args::parse_get(&opts).map_err(super::commands::arg_error)?
    } else {
        None
    };
    match count {
        None => call.with_ring(|ring| call.reply_bulk_or_nil(ring.and_then(|t| t.owner(member)))),
        Some(n) => call.with_ring(|ring| {
            let list = ring
                .map(|t| t.preference_list(member, n))
                .unwrap_or_default();
            call.reply_array(list.len());
            for node in list {
                call.reply_bulk(node);
            }
        }),
    }
}

/// `RING.MGET key member [member ...]` -> one owner (or nil) per member.
fn mget(call: &Call) -> Result<(), RedisError> {
    call.arg(2)?;
    call.with_ring(|ring| {
        // Every lookup before the first reply byte (see the module docs).
        let owners: Vec<Option<&[u8]>> = call
            .args_from(2)
            .map(|member| ring.and_then(|t| t.owner(member)))
            .collect();
        call.reply_array(owners.len());
        for owner in owners {
            call.reply_bulk_or_nil(owner);
        }
    })
}

/// `RING.SLOT key member` -> `[slot, node-or-nil]`: the member's hash slot and its owner in
/// the ring's slot table.
fn slot(call: &Call) -> Result<(), RedisError> {
    let member = call.arg(2)?;
    if call.argv.len() > 3 {
        return Err(RedisError::WrongArity);
    }
    call.with_ring(|ring| {
        let (slot, owner) = match ring {
            Some(t) => t.slot(member),
            None => (key_slot(member), None),
        };
        call.reply_array(2);
        call.reply_integer(i64::from(slot));
        call.reply_bulk_or_nil(owner);
    })
}

/// Creates `RING.GET`, `RING.MGET` and `RING.SLOT` (flags and legacy key positions as the
/// `commands:` table would give them); their command info is set with the others'.
pub fn register(ctx: &Context) -> Status {
    let commands: [(&str, raw::RedisModuleCmdFunc, &str); 3] = [
        ("ring.get", Some(ring_get_command), "readonly fast"),
        ("ring.mget", Some(ring_mget_command), "readonly"),
        ("ring.slot", Some(ring_slot_command), "readonly fast"),
    ];
    for (name, callback, flags) in commands {
        let (Ok(c_name), Ok(c_flags)) = (CString::new(name), CString::new(flags)) else {
            return Status::Err;
        };
        // SAFETY: a plain read of a function-pointer static that RedisModule_Init wrote before
        // the module's code runs, on this same thread.
        let Some(create) = (unsafe { raw::RedisModule_CreateCommand }) else {
            return Status::Err;
        };
        // SAFETY: the module API is initialised (this runs in RedisModule_OnLoad after
        // RedisModule_Init); the strings outlive the call, which copies them.
        let status = unsafe {
            create(
                ctx.ctx,
                c_name.as_ptr(),
                callback,
                c_flags.as_ptr(),
                1,
                1,
                1,
            )
        };
        if status != raw::Status::Ok as c_int {
            ctx.log_warning(&format!("ringslot: could not create command {name}"));
            return Status::Err;
        }
    }
    Status::Ok
}
