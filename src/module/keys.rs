//! The keys `RING.MOVES ... KEYS pattern` evaluates: a walk of the current database with
//! `RedisModule_Scan` (no reply object per key, and usable in slices from another thread with
//! the server lock held), keeping the names that match the glob (as `KEYS` matches them, see
//! [`crate::engine::glob`]), that have not expired, and that the calling user may read: the
//! walk runs with the caller's ACL rights, not the module's.
//!
//! Its guarantees are `SCAN`'s: every key present for the whole walk is seen; on a database
//! that changes meanwhile, a key can be missed or seen twice (Redis also sees a key twice when
//! it shrinks its table during a walk, which it does only after mass deletions).

use super::call::RawCtx;
use super::errors::CommandError;
use super::live;
use crate::engine::error::shown;
use crate::engine::{glob_match, key_slot, lfu_accesses, EngineError, MemberWeight};
use redis_module::{raw, Context, RedisValue};
use std::cell::Cell;
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

/// A key opened to read without touching it and, where Redis knows the flags (7.2 and later,
/// Valkey), without expiring it or counting it in the statistics; closed on drop.
struct QuietKey(*mut raw::RedisModuleKey);

impl QuietKey {
    /// Opens `name`: `Ok(None)` when it does not exist, `Err(())` when the module API or the
    /// name's string cannot be had.
    ///
    /// # Safety
    /// `ctx` must be a live context, used with the server lock held, for the key's life.
    unsafe fn open(ctx: RawCtx, name: &[u8]) -> Result<Option<QuietKey>, ()> {
        let (Some(open), Some(keyname)) = (raw::RedisModule_OpenKey, Owned::new(name)) else {
            return Err(());
        };
        let mode = raw::REDISMODULE_READ
            | raw::REDISMODULE_OPEN_KEY_NOTOUCH
            | raw::REDISMODULE_OPEN_KEY_NOEXPIRE
            | raw::REDISMODULE_OPEN_KEY_NOEFFECTS;
        let key = open(ctx, keyname.0, mode as c_int).cast::<raw::RedisModuleKey>();
        Ok((!key.is_null()).then_some(QuietKey(key)))
    }
}

impl Drop for QuietKey {
    fn drop(&mut self) {
        // SAFETY: the key was opened by `QuietKey::open` and is closed once, under the lock
        // its opener holds.
        if let Some(close) = unsafe { raw::RedisModule_CloseKey } {
            unsafe { close(self.0) };
        }
    }
}

/// Whether the key `name` of `ctx`'s database is live: it exists and has not expired. The key
/// is opened as [`QuietKey`] does, so that a key past its expiry is seen and skipped; on 7.0,
/// which ignores the flags, the read reclaims such a key, as any read of it would (`GET`,
/// `MIGRATE`). A slot walk keeps live keys only, as `MIGRATE` moves only those.
///
/// # Safety
/// `ctx` must be a live context, used with the server lock held.
unsafe fn is_live(ctx: RawCtx, name: &[u8]) -> bool {
    let (Some(key_type), Some(get_expire)) = (raw::RedisModule_KeyType, raw::RedisModule_GetExpire)
    else {
        return true;
    };
    match QuietKey::open(ctx, name) {
        Err(()) => true,
        Ok(None) => false,
        Ok(Some(key)) => {
            key_type(key.0) != raw::REDISMODULE_KEYTYPE_EMPTY as c_int && get_expire(key.0) != 0
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
/// context's user) refuses with `ENOTSUP` exactly when there is none, and checks that before
/// it looks the command up (`module.c`, 7.0); so a call of a command that does not exist
/// answers `ENOENT` when there is a user, and runs nothing and checks no right: no ACL LOG
/// entry, no statistic.
///
/// # Safety
/// `ctx` must be the live context of a command call on the main thread.
unsafe fn has_user(ctx: RawCtx) -> bool {
    let (Some(call), Some(free)) = (raw::RedisModule_Call, raw::RedisModule_FreeCallReply) else {
        return false;
    };
    let reply = call(ctx, c"RINGSLOT.NO-SUCH-COMMAND".as_ptr(), c"C".as_ptr());
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
    CommandError::NoScanPermission
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
    CommandError::UserGone
}

/// How a walk finds its keys.
enum Mode {
    /// `RedisModule_Scan` of the whole database, keeping the names that match `pattern`.
    Scan {
        cursor: *mut raw::RedisModuleScanCursor,
        pattern: Vec<u8>,
    },
    /// This cluster node's keys in slots `next..=end`, but `skip` (the ring being evaluated):
    /// slot by slot (`CLUSTER GETKEYSINSLOT`) for those of at most [`live::SLOT_READ_WHOLE`] keys;
    /// the slots with more are listed in `big` and their keys found afterwards by a walk of
    /// the database (`cursor`, made when the slot by slot part is done) that keeps the keys
    /// of those slots.
    Slots {
        start: u16,
        next: u32,
        end: u16,
        skip: Vec<u8>,
        big: Vec<u16>,
        cursor: Option<*mut raw::RedisModuleScanCursor>,
        /// The names of the slot `pending_slot` read by `CLUSTER GETKEYSINSLOT` and not yet
        /// checked: a slot of many keys is read at once (a few ms for 16384 names) and its keys
        /// checked across steps, at most the step's budget each, so that no step holds the
        /// server for a whole slot's checks.
        pending: Vec<Vec<u8>>,
        pending_slot: Option<u16>,
    },
}

/// A walk of the database: how it finds keys, whose rights apply, and what it weighs them by.
pub struct KeyWalk {
    mode: Mode,
    reader: Reader,
    weigh: Weigh,
    done: bool,
    /// Keys the walk skipped because the reader may not read them, and kept.
    unreadable: u64,
    kept: u64,
    /// Whether a key was skipped that the reader may read but not with `GET`.
    get_refused: bool,
    /// On a cluster node, the walk's slots as this node served them at the walk's first
    /// step: every later step checks they are still the same (see
    /// [`live::ClusterView::check_walk`]).
    served_at_start: Option<live::ServedSlots>,
}

/// A key a walk keeps, with its weights (0 where the walk weighs nothing).
pub type Member = (Vec<u8>, MemberWeight);

/// What a walk weighs each key it keeps by, read under the same lock as the key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Weigh {
    /// The key's memory: `MEMORY USAGE key` (its default sampling of 5 elements of an
    /// aggregate), called by the module.
    pub bytes: bool,
    /// The key's accesses, from its LFU counter (`RedisModule_GetLFU`, decayed as the server
    /// decays it) by [`lfu_accesses`] with this `lfu-log-factor`; `None`: not weighed.
    pub hits: Option<u64>,
}

impl Weigh {
    /// Whether anything is weighed.
    pub fn any(self) -> bool {
        self.bytes || self.hits.is_some()
    }

    /// The weights of the live key `name`, read without touching it: its LRU/LFU stay as
    /// they were (the key is opened `NOTOUCH`, and `MEMORY USAGE` looks keys up without
    /// touching them). Not quite without a trace: on Redis 7.0, which ignores `NOEFFECTS`, the
    /// open counts one `keyspace_hits`, and `MEMORY USAGE` counts in `INFO commandstats` and
    /// shows in `MONITOR` as any module call does. Error: a `MEMORY USAGE` call that fails (a
    /// cluster replica refuses it: the module's call is not `READONLY`).
    ///
    /// # Safety
    /// `ctx` must be a live context, used with the server lock held.
    unsafe fn of(self, ctx: RawCtx, name: &[u8]) -> Result<MemberWeight, CommandError> {
        let mut w = MemberWeight::default();
        if let Some(factor) = self.hits {
            w.hits = lfu_counter(ctx, name).map_or(0, |c| lfu_accesses(c, factor));
        }
        if self.bytes {
            w.bytes = memory_usage(ctx, name).ok_or_else(|| {
                CommandError::Redis(format!(
                    "ERR WEIGH BYTES: MEMORY USAGE of '{}' failed in the module's call (a \
                     cluster replica refuses it: weigh on the master)",
                    shown(name)
                ))
            })?;
        }
        Ok(w)
    }
}

/// The LFU counter of the key `name` (decayed), or `None` when the key is gone or the server
/// keeps no LFU counters (its `maxmemory-policy` is not an LFU one).
///
/// # Safety
/// As [`Weigh::of`].
unsafe fn lfu_counter(ctx: RawCtx, name: &[u8]) -> Option<u8> {
    let get_lfu = raw::RedisModule_GetLFU?;
    let key = QuietKey::open(ctx, name).ok().flatten()?;
    let mut freq: std::os::raw::c_longlong = -1;
    let ok = get_lfu(key.0, &mut freq) == raw::Status::Ok as c_int;
    (ok && freq >= 0).then(|| u8::try_from(freq).unwrap_or(u8::MAX))
}

/// `MEMORY USAGE name` called by the module; `None` when the call fails or answers anything
/// but an integer.
///
/// # Safety
/// As [`Weigh::of`].
unsafe fn memory_usage(ctx: RawCtx, name: &[u8]) -> Option<u64> {
    let (Some(call), Some(kind), Some(integer), Some(free)) = (
        raw::RedisModule_Call,
        raw::RedisModule_CallReplyType,
        raw::RedisModule_CallReplyInteger,
        raw::RedisModule_FreeCallReply,
    ) else {
        return None;
    };
    let reply = call(
        ctx,
        c"MEMORY".as_ptr(),
        c"cb".as_ptr(),
        c"USAGE".as_ptr(),
        name.as_ptr().cast::<c_char>(),
        name.len(),
    );
    if reply.is_null() {
        return None;
    }
    let bytes = (kind(reply) == raw::REDISMODULE_REPLY_INTEGER as c_int).then(|| integer(reply));
    free(reply);
    bytes.and_then(|b| u64::try_from(b).ok())
}

// SAFETY: the scan cursor is plain memory (a position and a flag) that Redis reads and writes
// only inside `RedisModule_Scan`, which `step` calls with the server lock held; the walk is
// used by one thread at a time.
unsafe impl Send for KeyWalk {}

/// Which keys a scan keeps.
enum Filter<'a> {
    /// Those whose names match the glob and that have not expired (as `KEYS`).
    Pattern(&'a [u8]),
    /// Those of the (sorted) slots, but `skip`, that have not expired (as `MIGRATE` moves).
    Slots { slots: &'a [u16], skip: &'a [u8] },
}

/// What the scan callback works with.
struct ScanState<'a> {
    filter: Filter<'a>,
    reader: &'a ReadCheck,
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
        let kept = match state.filter {
            Filter::Pattern(pattern) => glob_match(pattern, name),
            Filter::Slots { slots, skip } => {
                name != skip && slots.binary_search(&key_slot(name)).is_ok()
            }
        };
        if !kept {
            return;
        }
        // A key past its expiry that Redis has not deleted yet is gone for KEYS, SCAN and
        // MIGRATE (the scan opens keys without expiring them).
        if let (false, Some(get_expire)) = (key.is_null(), raw::RedisModule_GetExpire) {
            if get_expire(key) == 0 {
                return;
            }
        }
        if !state.reader.allows(keyname) {
            return;
        }
        state.out.push(name.to_vec());
    }));
}

impl KeyWalk {
    /// A walk from the start of the database for keys matching `pattern`, with `reader`'s
    /// rights. Error: the module API lacks scan cursors.
    pub fn new(pattern: &[u8], reader: Reader) -> Result<KeyWalk, CommandError> {
        Ok(KeyWalk {
            mode: Mode::Scan {
                cursor: new_cursor()?,
                pattern: pattern.to_vec(),
            },
            reader,
            weigh: Weigh::default(),
            done: false,
            unreadable: 0,
            kept: 0,
            get_refused: false,
            served_at_start: None,
        })
    }

    /// The walk, weighing each key it keeps by `weigh`.
    pub fn weighing(mut self, weigh: Weigh) -> KeyWalk {
        self.weigh = weigh;
        self
    }

    /// Whether the walk weighs its keys (and so costs more per key).
    pub fn weighs(&self) -> bool {
        self.weigh.any()
    }

    /// Whether the walk reads keys of any hash slot by name: every walk does (a slot walk
    /// checks each key, a weighing walk reads each key's LFU counter, and a pattern walk
    /// reads each key's expiry), which a server may look up in the calling command's own hash
    /// slot only (see [`super::live::keys_read_in_own_slot`]).
    pub fn opens_keys(&self) -> bool {
        true
    }

    /// A walk of this cluster node's keys in slots `start..=end`, with `reader`'s rights, but
    /// `skip`: the ring being evaluated, so that a copy placed on a master to evaluate its keys
    /// does not count itself. Live keys only: a key past its expiry is skipped (`CLUSTER
    /// COUNTKEYSINSLOT` counts it until Redis reclaims it, but `MIGRATE` never moves it;
    /// see [`is_live`]). A slot of at most
    /// [`live::SLOT_READ_WHOLE`] keys in one read, the keys of bigger ones by a walk of the database
    /// in slices once the others are read. Every step first checks, under the same lock as its
    /// reads, that this node still serves the slots left and that none is migrating or
    /// importing: keys that a reshard moves away during a background walk make it fail, not
    /// undercount.
    pub fn slots(start: u16, end: u16, reader: Reader, skip: &[u8]) -> KeyWalk {
        KeyWalk {
            mode: Mode::Slots {
                start,
                next: u32::from(start),
                end,
                skip: skip.to_vec(),
                big: Vec::new(),
                cursor: None,
                pending: Vec::new(),
                pending_slot: None,
            },
            reader,
            weigh: Weigh::default(),
            done: start > end,
            unreadable: 0,
            kept: 0,
            get_refused: false,
            served_at_start: None,
        }
    }

    /// Whether the walk has seen all its keys.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// At the end of the walk: how many keys it skipped because the reader may not read them.
    /// Error: the reader kept no key, and some it may read were refused because it may not run
    /// `GET`, which stands for reading a key: it could count nothing that way, which an error
    /// naming the command says rather than a silent 0.
    pub fn unreadable(&self) -> Result<u64, CommandError> {
        match &self.reader {
            Reader::User(name) if self.kept == 0 && self.get_refused => {
                Err(CommandError::NoGetPermission {
                    user: String::from_utf8_lossy(name).into_owned(),
                })
            }
            _ => Ok(self.unreadable),
        }
    }

    /// Walks on until at least `budget` keys were visited or the walk ends (a slot read whole
    /// counts all its keys), appending to `out` the names that the walk keeps and the reader
    /// may read; returns how many keys were visited. Errors: the reader's user no longer
    /// exists; a `CLUSTER` call that fails; a slot that stopped being served or began to
    /// migrate.
    ///
    /// # Safety
    /// `ctx` must be a live context of the database to walk, used with the server lock held
    /// (the main thread, or a thread-safe context locked for the call).
    pub unsafe fn step(
        &mut self,
        ctx: RawCtx,
        budget: u64,
        out: &mut Vec<Member>,
    ) -> Result<u64, CommandError> {
        let mut names = Vec::new();
        let user = match &self.reader {
            Reader::Root => None,
            Reader::User(name) => Some(User::fetch(name).ok_or_else(gone)?),
        };
        let reader = ReadCheck::new(user.as_ref().map_or(ptr::null_mut(), |u| u.0));
        let visited = self.find(ctx, budget, &reader, &mut names)?;
        self.unreadable += reader.refused.get();
        self.get_refused |= reader.refused_get.get();
        self.kept += names.len() as u64;
        let weigh = self.weigh;
        for name in names {
            let w = if weigh.any() {
                weigh.of(ctx, &name)?
            } else {
                MemberWeight::default()
            };
            out.push((name, w));
        }
        Ok(visited)
    }

    /// [`KeyWalk::step`] without the weights: the names kept.
    ///
    /// # Safety
    /// As [`KeyWalk::step`].
    unsafe fn find(
        &mut self,
        ctx: RawCtx,
        budget: u64,
        reader: &ReadCheck,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<u64, CommandError> {
        let context = Context::new(ctx);
        // On a cluster node, the keys walked must stay this node's: the walk's slots must not
        // change owner or open between steps, and no atomic slot migration of them may run
        // meanwhile (Valkey 9 loads the keys of importing slots before it owns them, and trims
        // exported ones after). A pattern walk covers every slot; a slot walk its own.
        let range = match &self.mode {
            Mode::Scan { .. } => None,
            Mode::Slots { start, end, .. } => Some((*start, *end)),
        };
        let view = live::ClusterView::read(&context, range)?;
        if let Some(view) = &view {
            view.check_walk(&mut self.served_at_start, range)?;
        }
        match &mut self.mode {
            Mode::Scan { cursor, pattern } => {
                let mut state = ScanState {
                    filter: Filter::Pattern(pattern),
                    reader,
                    out,
                    visited: 0,
                };
                self.done = scan(ctx, *cursor, &mut state, budget);
                Ok(state.visited)
            }
            Mode::Slots {
                next,
                end,
                skip,
                big,
                cursor,
                pending,
                pending_slot,
                ..
            } => {
                let nodes = match view {
                    Some(view) => view.nodes,
                    None => live::nodes_seen(&context)?,
                };
                if let Ok(first) = u16::try_from(*next) {
                    live::check_slots(&nodes, first, *end)?;
                }
                for &slot in big.iter().chain(pending_slot.iter()) {
                    live::check_slots(&nodes, slot, slot)?;
                }
                let mut visited = 0u64;
                while visited < budget {
                    // The names of a slot read before, checked a budget at a time.
                    if let Some(name) = pending.pop() {
                        visited += 1;
                        if name != *skip && reader.allows_bytes(&name) && is_live(ctx, &name) {
                            out.push(name);
                        }
                        continue;
                    }
                    *pending_slot = None;
                    if *next > u32::from(*end) {
                        break;
                    }
                    let slot = u16::try_from(*next).unwrap_or(u16::MAX);
                    *next += 1;
                    // A slot without keys still counts as work done.
                    visited += 1;
                    let count = live::keys_in_slot(&context, slot)?;
                    if count > live::SLOT_READ_WHOLE {
                        big.push(slot);
                        continue;
                    }
                    if count == 0 {
                        continue;
                    }
                    let keys = context.call(
                        "CLUSTER",
                        &["GETKEYSINSLOT", &slot.to_string(), &count.to_string()][..],
                    )?;
                    if let RedisValue::Array(keys) = keys {
                        *pending = keys
                            .into_iter()
                            .filter_map(|key| match key {
                                RedisValue::StringBuffer(b) => Some(b),
                                RedisValue::BulkString(s) | RedisValue::SimpleString(s) => {
                                    Some(s.into_bytes())
                                }
                                _ => None,
                            })
                            .collect();
                        *pending_slot = Some(slot);
                    }
                }
                if !pending.is_empty() || *next <= u32::from(*end) || visited >= budget {
                    return Ok(visited);
                }
                if big.is_empty() {
                    self.done = true;
                    return Ok(visited);
                }
                let cursor = match cursor {
                    Some(c) => *c,
                    None => *cursor.insert(new_cursor()?),
                };
                let mut state = ScanState {
                    filter: Filter::Slots { slots: big, skip },
                    reader,
                    out,
                    visited: 0,
                };
                self.done = scan(ctx, cursor, &mut state, budget - visited);
                Ok(visited + state.visited)
            }
        }
    }
}

impl KeyWalk {
    /// Walks to the end, returning the keys the walk keeps (at most `limit` of them, else
    /// `TooManyMatches`) and how many it skipped because the reader may not read them.
    ///
    /// # Safety
    /// As [`KeyWalk::step`].
    pub unsafe fn run_to_end(
        mut self,
        ctx: RawCtx,
        limit: u64,
    ) -> Result<(Vec<Member>, u64), CommandError> {
        let mut found = Vec::new();
        while !self.is_done() {
            self.step(ctx, 1000, &mut found)?;
            if found.len() as u64 > limit {
                return Err(EngineError::TooManyMatches { limit }.into());
            }
        }
        let unreadable = self.unreadable()?;
        Ok((found, unreadable))
    }
}

/// A new scan cursor, which the walk destroys on drop. Error: the module API lacks them.
fn new_cursor() -> Result<*mut raw::RedisModuleScanCursor, CommandError> {
    // SAFETY: a plain read of a function-pointer static set by RedisModule_Init.
    let create = unsafe { raw::RedisModule_ScanCursorCreate }.ok_or(CommandError::NoScan)?;
    // SAFETY: creates a cursor the caller owns.
    Ok(unsafe { create() })
}

/// Scans on from `cursor` until `budget` keys were visited or the database ends; returns
/// whether it ended.
///
/// # Safety
/// As [`KeyWalk::step`]; `cursor` is the walk's own.
unsafe fn scan(
    ctx: RawCtx,
    cursor: *mut raw::RedisModuleScanCursor,
    state: &mut ScanState,
    budget: u64,
) -> bool {
    let Some(scan) = raw::RedisModule_Scan else {
        return true;
    };
    while state.visited < budget {
        let more = scan(
            ctx,
            cursor,
            Some(on_key),
            (state as *mut ScanState).cast::<c_void>(),
        );
        if more == 0 {
            return true;
        }
    }
    false
}

/// Whether a reader may read keys: the command that stands for a read, `GET`, is checked with
/// each key (the command and the key together, as `ACL DRYRUN user GET key` checks them), so
/// that a key counts only where one of the user's selectors lets it run `GET` on that key.
/// `RedisModule_ACLCheckCommandPermissions` writes nothing to `ACL LOG`.
struct ReadCheck {
    /// The user; null for Redis' root, who may read everything.
    user: *mut raw::RedisModuleUser,
    /// The string `GET`, made once per step.
    get: Option<Owned>,
    /// Keys refused because the user may not read them, this step.
    refused: Cell<u64>,
    /// Whether a key the user may read was refused because the user may not run `GET`.
    refused_get: Cell<bool>,
}

impl ReadCheck {
    fn new(user: *mut raw::RedisModuleUser) -> ReadCheck {
        let get = if user.is_null() {
            None
        } else {
            Owned::new(b"GET")
        };
        ReadCheck {
            user,
            get,
            refused: Cell::new(0),
            refused_get: Cell::new(false),
        }
    }

    /// Whether the reader may read the key `name` (a module string). A refusal is counted:
    /// as a key the user may not read, or, when the user may read the key (its key
    /// permissions, `RedisModule_ACLCheckKeyPermissions`) but not run `GET`, as a refused
    /// command.
    fn allows(&self, name: *mut raw::RedisModuleString) -> bool {
        if self.user.is_null() {
            return true;
        }
        // SAFETY: a plain read of a function-pointer static set by RedisModule_Init.
        let (Some(get), Some(check)) = (&self.get, unsafe {
            raw::RedisModule_ACLCheckCommandPermissions
        }) else {
            return false;
        };
        let mut argv = [get.0, name];
        // SAFETY: the user and both strings are live for the call, which only reads them.
        if unsafe { check(self.user, argv.as_mut_ptr(), 2) == raw::Status::Ok as c_int } {
            return true;
        }
        // SAFETY: as above; the check only reads the user and the name.
        let key_readable = unsafe { raw::RedisModule_ACLCheckKeyPermissions }.is_some_and(|k| {
            // ACCESS is the read a key spec asks for (the function takes no RO/RW flags).
            let flags = raw::REDISMODULE_CMD_KEY_ACCESS as c_int;
            unsafe { k(self.user, name, flags) == raw::Status::Ok as c_int }
        });
        if key_readable {
            self.refused_get.set(true);
        }
        self.refused.set(self.refused.get() + 1);
        false
    }

    /// Whether the reader may read the key `name`.
    fn allows_bytes(&self, name: &[u8]) -> bool {
        if self.user.is_null() {
            return true;
        }
        Owned::new(name).is_some_and(|key| self.allows(key.0))
    }
}

impl Drop for KeyWalk {
    fn drop(&mut self) {
        let cursor = match self.mode {
            Mode::Scan { cursor, .. } => Some(cursor),
            Mode::Slots { cursor, .. } => cursor,
        };
        if let Some(cursor) = cursor {
            // SAFETY: the cursor was created for this walk and is destroyed once; destroying
            // it is a plain free, safe without the server lock.
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
