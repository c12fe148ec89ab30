//! The keys `RING.MOVES ... KEYS pattern` evaluates: a walk of the current database with
//! `RedisModule_Scan` (no reply object per key, and usable in slices from another thread with
//! the server lock held), keeping the names that match the glob (as `KEYS` matches them, see
//! [`crate::engine::glob`]), that have not expired, and that the calling user may read: the
//! walk runs with the caller's ACL rights, not the module's.
//!
//! Its guarantees are `SCAN`'s: every key present for the whole walk is seen; on a database
//! that changes meanwhile, a key can be missed or seen twice (Redis also sees a key twice when
//! it shrinks its table during a walk, which it does only after mass deletions).

use super::call::{CommandError, RawCtx};
use crate::engine::glob_match;
use redis_module::{raw, Context, RedisValue};
use std::ffi::c_void;
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

/// Whose read rights a walk has: Redis' root (no ACL user: the AOF, another module's call) or
/// an ACL user, by name. A `RedisModuleUser` is valid only where it was fetched, so every
/// slice of a walk fetches it again by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reader {
    /// No ACL user: every key may be read.
    Root,
    /// The ACL user of this name.
    User(Vec<u8>),
}

/// The bytes of a module string, then frees it.
///
/// # Safety
/// `s` must be a live string the caller owns, created with `ctx`.
unsafe fn take_bytes(ctx: RawCtx, s: *mut raw::RedisModuleString) -> Vec<u8> {
    let mut len = 0usize;
    let bytes = match raw::RedisModule_StringPtrLen {
        Some(ptr_len) => {
            let p = ptr_len(s, &mut len);
            if p.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec()
            }
        }
        None => Vec::new(),
    };
    if let Some(free) = raw::RedisModule_FreeString {
        free(ctx, s);
    }
    bytes
}

/// A module string holding `bytes`, freed on drop (created without a context).
struct Owned(*mut raw::RedisModuleString);

impl Owned {
    fn new(bytes: &[u8]) -> Option<Owned> {
        // SAFETY: a plain read of a function-pointer static set by RedisModule_Init; a NULL
        // context makes a string the caller frees.
        let create = unsafe { raw::RedisModule_CreateString }?;
        // SAFETY: the pointer and length describe `bytes`, which Redis copies.
        let s = unsafe {
            create(
                ptr::null_mut(),
                bytes.as_ptr().cast::<c_char>(),
                bytes.len(),
            )
        };
        (!s.is_null()).then_some(Owned(s))
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: the string was created by `Owned::new` and is freed once.
        if let Some(free) = unsafe { raw::RedisModule_FreeString } {
            unsafe { free(ptr::null_mut(), self.0) };
        }
    }
}

/// The last OS error number (Redis' module API reports through `errno`).
fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The reader of the current call: the client's ACL user (a script's: its caller's; a module
/// call's with the `C` flag: the module's user); Redis' root when the client has none (the
/// AOF, a module's call without `C`).
///
/// # Safety
/// `ctx` must be the live context of a command call on the main thread.
pub unsafe fn caller(ctx: RawCtx) -> Reader {
    let (Some(client_id), Some(by_id)) = (
        raw::RedisModule_GetClientId,
        raw::RedisModule_GetClientUserNameById,
    ) else {
        return Reader::Root;
    };
    let id = client_id(ctx);
    if id == 0 {
        return Reader::Root;
    }
    let name = by_id(ctx, id);
    if !name.is_null() {
        return Reader::User(take_bytes(ctx, name));
    }
    // Not a connected client: a script's client, which carries its caller's user, or a
    // module's RedisModule_Call client, which carries the user of a "C" call or none. No user
    // is what Redis treats as the superuser. On 7.0 RedisModule_GetCurrentUserName reads the
    // user without checking that there is one, so ask first.
    if errno() == ENOENT && has_user(ctx) {
        if let Some(current) = raw::RedisModule_GetCurrentUserName {
            let name = current(ctx);
            if !name.is_null() {
                return Reader::User(take_bytes(ctx, name));
            }
        }
    }
    Reader::Root
}

/// Whether the client of `ctx` carries an ACL user. RedisModule_Call with "C" (run as the
/// context's user) refuses with `ENOTSUP`, before it looks at the command, exactly when there
/// is none (`module.c`, 7.0); otherwise it runs `PING` as that user, or refuses it for want of
/// the right, and either way there is a user.
///
/// # Safety
/// `ctx` must be the live context of a command call on the main thread.
unsafe fn has_user(ctx: RawCtx) -> bool {
    let (Some(call), Some(free)) = (raw::RedisModule_Call, raw::RedisModule_FreeCallReply) else {
        return false;
    };
    // Every refusal sets errno.
    let reply = call(ctx, c"PING".as_ptr(), c"C".as_ptr());
    let refused_for_no_user = reply.is_null() && errno() == ENOTSUP;
    if !reply.is_null() {
        free(reply);
    }
    !refused_for_no_user
}

/// `ENOENT` (2 on every platform Redis runs on).
const ENOENT: i32 = 2;

/// `ENOTSUP` on Linux (95); on macOS, 45.
#[cfg(target_os = "linux")]
const ENOTSUP: i32 = 95;
#[cfg(not(target_os = "linux"))]
const ENOTSUP: i32 = 45;

/// An ACL user fetched for one use, freed on drop.
struct User(*mut raw::RedisModuleUser);

impl User {
    /// The user called `name`; `None` when it does not exist (any more) or is disabled.
    fn fetch(name: &[u8]) -> Option<User> {
        let s = Owned::new(name)?;
        // SAFETY: a plain read of a function-pointer static set by RedisModule_Init.
        let get = unsafe { raw::RedisModule_GetModuleUserFromUserName }?;
        // SAFETY: `s` is a live string; Redis only reads it.
        let user = unsafe { get(s.0) };
        (!user.is_null()).then_some(User(user))
    }
}

impl Drop for User {
    fn drop(&mut self) {
        // SAFETY: the user was fetched by `User::fetch` and is freed once.
        if let Some(free) = unsafe { raw::RedisModule_FreeModuleUser } {
            unsafe { free(self.0) };
        }
    }
}

/// The error for a reader who may not walk the keyspace.
fn no_scan() -> CommandError {
    CommandError::Text(
        "NOPERM this user has no permissions to run the 'scan' command, which RING.MOVES ... \
         KEYS and SLOTS need"
            .into(),
    )
}

impl Reader {
    /// Checks that the reader may run `SCAN`, which a keyspace walk amounts to. Errors:
    /// `NOPERM`, or a user that no longer exists.
    pub fn check_scan(&self) -> Result<(), CommandError> {
        let Reader::User(name) = self else {
            return Ok(());
        };
        let user = User::fetch(name).ok_or_else(gone)?;
        let (Some(scan), Some(zero)) = (Owned::new(b"SCAN"), Owned::new(b"0")) else {
            return Err(no_scan());
        };
        let mut argv = [scan.0, zero.0];
        // SAFETY: a plain read of a function-pointer static set by RedisModule_Init.
        let Some(check) = (unsafe { raw::RedisModule_ACLCheckCommandPermissions }) else {
            return Err(no_scan());
        };
        // SAFETY: the user and the two strings are live for the call, which only reads them.
        let ok = unsafe { check(user.0, argv.as_mut_ptr(), 2) } == raw::Status::Ok as c_int;
        if ok {
            Ok(())
        } else {
            Err(no_scan())
        }
    }
}

fn gone() -> CommandError {
    CommandError::Text("NOPERM the user of this connection no longer exists".into())
}

/// How a walk finds its keys.
enum Mode {
    /// `RedisModule_Scan` of the whole database, keeping the names that match `pattern`.
    Scan {
        cursor: *mut raw::RedisModuleScanCursor,
        pattern: Vec<u8>,
    },
    /// This cluster node's keys in slots `next..=end` (`CLUSTER GETKEYSINSLOT`), slot by slot,
    /// but `skip` (the ring being evaluated); at most `cap` keys of one slot are read.
    Slots {
        next: u32,
        end: u16,
        skip: Vec<u8>,
        cap: u64,
    },
}

/// A walk of the database: how it finds keys, and whose rights apply.
pub struct KeyWalk {
    mode: Mode,
    reader: Reader,
    done: bool,
}

// SAFETY: the scan cursor is plain memory (a position and a flag) that Redis reads and writes
// only inside `RedisModule_Scan`, which `step` calls with the server lock held; the walk is
// used by one thread at a time.
unsafe impl Send for KeyWalk {}

/// What the scan callback works with.
struct ScanState<'a> {
    pattern: &'a [u8],
    user: *mut raw::RedisModuleUser,
    out: &'a mut Vec<Vec<u8>>,
    visited: u64,
}

unsafe extern "C" fn on_key(
    _ctx: *mut raw::RedisModuleCtx,
    keyname: *mut raw::RedisModuleString,
    key: *mut raw::RedisModuleKey,
    privdata: *mut c_void,
) {
    let state = &mut *privdata.cast::<ScanState>();
    // No unwinding into Redis; a key that makes the body panic is skipped.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        state.visited += 1;
        let Some(ptr_len) = raw::RedisModule_StringPtrLen else {
            return;
        };
        let mut len = 0usize;
        let p = ptr_len(keyname, &mut len);
        if p.is_null() {
            return;
        }
        let name = std::slice::from_raw_parts(p.cast::<u8>(), len);
        if !glob_match(state.pattern, name) {
            return;
        }
        // A key past its expiry that Redis has not deleted yet is gone for KEYS and SCAN.
        if let (false, Some(get_expire)) = (key.is_null(), raw::RedisModule_GetExpire) {
            if get_expire(key) == 0 {
                return;
            }
        }
        if !state.user.is_null() {
            let Some(check) = raw::RedisModule_ACLCheckKeyPermissions else {
                return;
            };
            let access = raw::REDISMODULE_CMD_KEY_ACCESS as c_int;
            if check(state.user, keyname, access) != raw::Status::Ok as c_int {
                return;
            }
        }
        state.out.push(name.to_vec());
    }));
}

impl KeyWalk {
    /// A walk from the start of the database for keys matching `pattern`, with `reader`'s
    /// rights. Error: the module API lacks scan cursors.
    pub fn new(pattern: &[u8], reader: Reader) -> Result<KeyWalk, CommandError> {
        // SAFETY: a plain read of a function-pointer static set by RedisModule_Init.
        let create = unsafe { raw::RedisModule_ScanCursorCreate }
            .ok_or_else(|| CommandError::Text("ERR this Redis has no RedisModule_Scan".into()))?;
        // SAFETY: creates a cursor this walk owns and destroys on drop.
        let cursor = unsafe { create() };
        Ok(KeyWalk {
            mode: Mode::Scan {
                cursor,
                pattern: pattern.to_vec(),
            },
            reader,
            done: false,
        })
    }

    /// A walk of this cluster node's keys in slots `start..=end`, with `reader`'s rights, but
    /// `skip`: the ring being evaluated, so that a copy placed on a master to evaluate its keys
    /// does not count itself. Keys are taken as the node stores them (`CLUSTER
    /// COUNTKEYSINSLOT` counts the same ones), expired or not, one whole slot at a time; of a
    /// slot with more keys than `cap`, `cap` are read (the caller's limit is then passed).
    /// Every step first checks, under the same lock as its reads, that this node still serves
    /// the slots left and that none is migrating or importing: keys that a reshard moves away
    /// during a background walk make it fail, not undercount.
    pub fn slots(start: u16, end: u16, reader: Reader, skip: &[u8], cap: u64) -> KeyWalk {
        KeyWalk {
            mode: Mode::Slots {
                next: u32::from(start),
                end,
                skip: skip.to_vec(),
                cap: cap.max(1),
            },
            reader,
            done: start > end,
        }
    }

    /// Whether the walk has seen all its keys.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Walks on until at least `budget` keys were visited or the walk ends (a slot walk takes
    /// whole slots), appending to `out` the names that match, have not expired (scan) and the
    /// reader may read; returns how many keys were visited. Errors: the reader's user no
    /// longer exists; a `CLUSTER` call that fails.
    ///
    /// # Safety
    /// `ctx` must be a live context of the database to walk, used with the server lock held
    /// (the main thread, or a thread-safe context locked for the call).
    pub unsafe fn step(
        &mut self,
        ctx: RawCtx,
        budget: u64,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<u64, CommandError> {
        let user = match &self.reader {
            Reader::Root => None,
            Reader::User(name) => Some(User::fetch(name).ok_or_else(gone)?),
        };
        let user_ptr = user.as_ref().map_or(ptr::null_mut(), |u| u.0);
        match &mut self.mode {
            Mode::Scan { cursor, pattern } => {
                let Some(scan) = raw::RedisModule_Scan else {
                    self.done = true;
                    return Ok(0);
                };
                let mut state = ScanState {
                    pattern,
                    user: user_ptr,
                    out,
                    visited: 0,
                };
                while !self.done && state.visited < budget {
                    let more = scan(
                        ctx,
                        *cursor,
                        Some(on_key),
                        (&mut state as *mut ScanState).cast::<c_void>(),
                    );
                    self.done = more == 0;
                }
                Ok(state.visited)
            }
            Mode::Slots {
                next,
                end,
                skip,
                cap,
            } => {
                let context = Context::new(ctx);
                if let Ok(first) = u16::try_from(*next) {
                    super::cluster::check_slots(
                        &super::cluster::nodes_seen(&context)?,
                        first,
                        *end,
                    )?;
                }
                let mut visited = 0u64;
                while !self.done && visited < budget {
                    let slot = u16::try_from(*next).unwrap_or(u16::MAX);
                    let count = super::cluster::keys_in_slot(&context, slot)?.min(*cap);
                    let keys = context.call(
                        "CLUSTER",
                        &["GETKEYSINSLOT", &slot.to_string(), &count.to_string()][..],
                    )?;
                    if let RedisValue::Array(keys) = keys {
                        for key in keys {
                            let name = match key {
                                RedisValue::StringBuffer(b) => b,
                                RedisValue::BulkString(s) | RedisValue::SimpleString(s) => {
                                    s.into_bytes()
                                }
                                _ => continue,
                            };
                            visited += 1;
                            if name != *skip && readable(user_ptr, &name) {
                                out.push(name);
                            }
                        }
                    }
                    // A slot without keys still counts as work done.
                    visited += 1;
                    *next += 1;
                    self.done = *next > u32::from(*end);
                }
                Ok(visited)
            }
        }
    }
}

/// Whether `user` (null: root) may read the key `name`.
fn readable(user: *mut raw::RedisModuleUser, name: &[u8]) -> bool {
    if user.is_null() {
        return true;
    }
    let (Some(key), Some(check)) = (Owned::new(name), unsafe {
        raw::RedisModule_ACLCheckKeyPermissions
    }) else {
        return false;
    };
    let access = raw::REDISMODULE_CMD_KEY_ACCESS as c_int;
    // SAFETY: the user and the string are live for the call, which only reads them.
    unsafe { check(user, key.0, access) == raw::Status::Ok as c_int }
}

impl Drop for KeyWalk {
    fn drop(&mut self) {
        if let Mode::Scan { cursor, .. } = self.mode {
            // SAFETY: the cursor was created by `KeyWalk::new` and is destroyed once;
            // destroying it is a plain free, safe without the server lock.
            if let Some(destroy) = unsafe { raw::RedisModule_ScanCursorDestroy } {
                unsafe { destroy(cursor) };
            }
        }
    }
}

/// The number of keys in the context's database.
///
/// # Safety
/// `ctx` must be a live context, used with the server lock held.
pub unsafe fn db_size(ctx: RawCtx) -> u64 {
    raw::RedisModule_DbSize.map_or(0, |size| size(ctx))
}
