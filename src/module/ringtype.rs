//! The ring data type, `ringslot1`: one [`RingValue`] per key, which shares its [`Topology`]
//! with the background what-ifs that evaluate a snapshot of it (a write while one runs copies
//! the topology first).
//!
//! RDB encoding (encoding version 2), all integers as RDB unsigned:
//! flavour code (0 native, 1 ketama, 2 groupcache, 3 native-fnv), vnodes, hashtag (0/1), node
//! count, then per node its name (string) and weight, then the slot table as a range count
//! and per range start, end and node index. Points are not stored: they are a pure function of
//! the rest and are rebuilt on load.
//!
//! Encoding version 1 (ringslot 0.1) is the same layout, but its flavour code 0 was that
//! release's native rule (plain FNV-1a-64), which loads as `native-fnv`: a module upgrade
//! never moves the keys of a saved ring. A change of placement is always a new flavour or a
//! new encoding version.
//!
//! AOF rewrite emits the commands of [`rebuild_commands`]: `RING.CREATE` with the
//! configuration (the flavour named), then the nodes in order as `RING.ADD key WEIGHT w node
//! ...`, one command per run of consecutive nodes of one weight (at most 4096 nodes and 65536
//! points each),
//! then one `RING.ASSIGN key start end node` per slot range (and `RING.UNASSIGN` per range no
//! node owns), so that the replayed file ends with the same slot table whatever the
//! rebalancing in between did.

use super::stats;
use crate::engine::error::shown;
use crate::engine::{Flavour, Topology};
use redis_module::native_types::RedisType;
use redis_module::{logging, raw, RedisString};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_longlong, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::Arc;

/// The type's name as `TYPE` shows it (exactly 9 characters, as Redis requires).
pub const TYPE_NAME: &str = "ringslot1";
/// The RDB encoding version this build writes (it also reads version 1).
pub const ENCODING_VERSION: i32 = 2;

/// The registered data type.
pub static RING_TYPE: RedisType = RedisType::new(
    TYPE_NAME,
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: None,
        aux_save: None,
        aux_save2: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: Some(copy),
        defrag: None,
        copy2: None,
        free_effort2: None,
        mem_usage2: None,
        unlink2: None,
    },
);

/// What a ring key holds: its topology, shared with the snapshots of background what-ifs, and
/// counted in `INFO ringslot` (`rings`, `ring_points`) for as long as the key holds it.
#[derive(Debug)]
pub struct RingValue {
    topo: Arc<Topology>,
}

impl RingValue {
    /// The value of a ring key holding `topo`.
    pub fn new(topo: Topology) -> RingValue {
        stats::add(&stats::RINGS, 1);
        stats::add(&stats::POINTS, topo.ring().point_count() as i64);
        RingValue {
            topo: Arc::new(topo),
        }
    }

    /// The topology.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// A snapshot for a background run: O(1), and unchanged by later writes.
    pub fn snapshot(&self) -> Arc<Topology> {
        Arc::clone(&self.topo)
    }

    /// The topology for a change: its own copy first if a snapshot shares it. The point count
    /// of `INFO ringslot` follows the change when the guard is dropped.
    pub fn modify(&mut self) -> RingMut<'_> {
        let before = self.topo.ring().point_count() as i64;
        RingMut {
            value: self,
            before,
        }
    }
}

impl Drop for RingValue {
    fn drop(&mut self) {
        stats::add(&stats::RINGS, -1);
        stats::add(&stats::POINTS, -(self.topo.ring().point_count() as i64));
    }
}

/// A topology being changed (see [`RingValue::modify`]).
pub struct RingMut<'a> {
    value: &'a mut RingValue,
    before: i64,
}

impl std::ops::Deref for RingMut<'_> {
    type Target = Topology;
    fn deref(&self) -> &Topology {
        &self.value.topo
    }
}

impl std::ops::DerefMut for RingMut<'_> {
    fn deref_mut(&mut self) -> &mut Topology {
        Arc::make_mut(&mut self.value.topo)
    }
}

impl Drop for RingMut<'_> {
    fn drop(&mut self) {
        let after = self.value.topo.ring().point_count() as i64;
        stats::add(&stats::POINTS, after - self.before);
    }
}

/// # Safety
/// `value` must be a `RingValue` created by this module (Redis only hands back our values).
unsafe fn topology<'a>(value: *const c_void) -> &'a Topology {
    (*value.cast::<RingValue>()).topology()
}

fn into_value(topology: Topology) -> *mut c_void {
    Box::into_raw(Box::new(RingValue::new(topology))).cast()
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    let topo = topology(value);
    let saved = catch_unwind(AssertUnwindSafe(|| {
        let info = topo.config();
        raw::save_unsigned(rdb, info.flavour.code());
        raw::save_unsigned(rdb, u64::from(info.vnodes));
        raw::save_unsigned(rdb, u64::from(info.hashtag));
        raw::save_unsigned(rdb, topo.nodes().len() as u64);
        for node in topo.nodes() {
            raw::save_slice(rdb, &node.name);
            raw::save_unsigned(rdb, u64::from(node.weight));
        }
        let ranges = topo.slot_table().ranges();
        raw::save_unsigned(rdb, ranges.len() as u64);
        for (start, end, owner) in ranges {
            raw::save_unsigned(rdb, u64::from(start));
            raw::save_unsigned(rdb, u64::from(end));
            raw::save_unsigned(rdb, owner as u64);
        }
    }));
    if saved.is_err() {
        logging::log_warning("ringslot: internal error while saving a ring");
    }
}

/// Reads one ring of encoding version `encver` (1 or 2). Every count, length, range and
/// weight is checked before anything is built ([`Topology::from_parts`]); an error says what
/// is wrong: a short read (the module handles I/O errors, so Redis reports them to it instead
/// of stopping), or data that is not a valid ring.
fn load_topology(rdb: *mut raw::RedisModuleIO, encver: c_int) -> Result<Topology, String> {
    let short = |_| "the data ends early (a short read)".to_string();
    let unsigned = || raw::load_unsigned(rdb).map_err(short);
    let code = unsigned()?;
    let flavour = if encver == 1 {
        Flavour::from_code_v1(code)
    } else {
        Flavour::from_code(code)
    }
    .ok_or_else(|| format!("unknown flavour code {code}"))?;
    let vnodes = u32::try_from(unsigned()?).map_err(|_| "vnodes out of range".to_string())?;
    let hashtag = match unsigned()? {
        0 => false,
        1 => true,
        other => return Err(format!("hashtag flag {other} is neither 0 nor 1")),
    };
    let node_count = unsigned()?;
    // Capacity from trusted-looking counts only: a corrupt count must not allocate wildly
    // (every node takes bytes of the payload, so a short read ends a count that lies).
    let mut nodes = Vec::with_capacity(node_count.min(1024) as usize);
    for _ in 0..node_count {
        let name = raw::load_string_buffer(rdb)
            .map_err(short)?
            .as_ref()
            .to_vec();
        let weight = u32::try_from(unsigned()?).unwrap_or(u32::MAX);
        nodes.push((name, weight));
    }
    let range_count = unsigned()?;
    if range_count > crate::engine::SLOT_COUNT as u64 {
        return Err(format!(
            "{range_count} slot ranges, more than there are slots"
        ));
    }
    let mut ranges = Vec::with_capacity(range_count as usize);
    let bad_range = |_| "bad slot range".to_string();
    for _ in 0..range_count {
        let start = u16::try_from(unsigned()?).map_err(bad_range)?;
        let end = u16::try_from(unsigned()?).map_err(bad_range)?;
        let owner = usize::try_from(unsigned()?).map_err(bad_range)?;
        ranges.push((start, end, owner));
    }
    Topology::from_parts(flavour, vnodes, hashtag, nodes, &ranges).map_err(|e| e.to_string())
}

/// The name of the key being loaded, for the log (empty when Redis does not say).
fn loading_key(rdb: *mut raw::RedisModuleIO) -> String {
    // SAFETY: a plain read of a function-pointer static set by RedisModule_Init; `rdb` is the
    // live I/O context of this load, and the returned string belongs to Redis.
    let name = unsafe { raw::RedisModule_GetKeyNameFromIO.map(|get| get(rdb)) };
    match name {
        Some(s) if !s.is_null() => shown(RedisString::string_as_slice(s.cast_mut())),
        _ => "(unknown)".into(),
    }
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    if !(1..=ENCODING_VERSION).contains(&encver) {
        logging::log_warning(format!(
            "ringslot: cannot load a ring of encoding version {encver} (this build reads 1 to \
             {ENCODING_VERSION}): it was saved by a newer ringslot"
        ));
        return std::ptr::null_mut();
    }
    // A refused load returns NULL: RESTORE (and so MIGRATE) then replies "Bad data format"
    // with nothing stored; an RDB load or a full sync stops, as Redis stops on any value it
    // cannot read. No partial ring is ever built.
    match catch_unwind(AssertUnwindSafe(|| load_topology(rdb, encver))) {
        Ok(Ok(topo)) => into_value(topo),
        Ok(Err(why)) => {
            logging::log_warning(format!(
                "ringslot: refused to load the ring at key {}: {why}",
                loading_key(rdb)
            ));
            std::ptr::null_mut()
        }
        Err(_) => {
            logging::log_warning("ringslot: internal error while loading a ring");
            std::ptr::null_mut()
        }
    }
}

const RING_CREATE: &CStr = c"RING.CREATE";
const RING_ADD: &CStr = c"RING.ADD";
const RING_ASSIGN: &CStr = c"RING.ASSIGN";
const RING_UNASSIGN: &CStr = c"RING.UNASSIGN";

/// The most nodes one `RING.ADD` of an AOF rewrite names.
const ADD_CHUNK: usize = 4096;

/// The most points one `RING.ADD` of an AOF rewrite brings (but a node of more comes alone).
/// An atomic slot migration replays these commands on a serving master: the longest of a
/// 1M-point ring's held a Valkey 9.1.2 target 33.8 ms, where one of 4096 nodes of 160 points
/// (655360 points) held it 88.1 ms (release builds, `make soak`).
const ADD_POINTS: u64 = 65536;

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    let topo = topology(value);
    if catch_unwind(AssertUnwindSafe(|| emit_commands(aof, key, topo))).is_err() {
        logging::log_warning("ringslot: internal error while rewriting the AOF");
    }
}

/// One command that rebuilds part of a ring: its name and its arguments after the key.
pub type RebuildCommand = (&'static CStr, Vec<Vec<u8>>);

/// The commands that rebuild `topo` at a key (see the module docs): `RING.CREATE` with the
/// configuration (the flavour named), `RING.ADD key WEIGHT w node ...` per run of consecutive
/// nodes of one weight (at most 4096 nodes and 65536 points), then `RING.ASSIGN key start end node` per slot
/// range and, for a ring with nodes, `RING.UNASSIGN key start end` per range no node owns (a
/// mirror of a cluster can have such). Used by the AOF rewrite and by writes that replicate
/// their effect instead of themselves.
pub fn rebuild_commands(topo: &Topology) -> Vec<RebuildCommand> {
    let info = topo.config();
    let mut create: Vec<Vec<u8>> = vec![b"COMPAT".to_vec(), info.flavour.name().into()];
    if !info.flavour.fixes_vnodes() {
        create.extend([b"VNODES".to_vec(), info.vnodes.to_string().into_bytes()]);
    }
    if info.hashtag {
        create.push(b"HASHTAG".to_vec());
    }
    let mut commands = vec![(RING_CREATE, create)];
    // Runs of consecutive nodes of one weight, one RING.ADD each: the replay then pays one
    // incremental change per run, not one per node.
    let nodes = topo.nodes();
    let mut from = 0;
    while let Some(first) = nodes.get(from) {
        let mut points = 0u64;
        let run = nodes
            .get(from..)
            .unwrap_or(&[])
            .iter()
            .take(ADD_CHUNK)
            .take_while(|n| {
                points += u64::from(n.points);
                n.weight == first.weight && points <= ADD_POINTS
            })
            .count()
            .max(1);
        let mut args = vec![b"WEIGHT".to_vec(), first.weight.to_string().into_bytes()];
        args.extend(
            nodes
                .get(from..from + run)
                .unwrap_or(&[])
                .iter()
                .map(|n| n.name.clone()),
        );
        commands.push((RING_ADD, args));
        from += run;
    }
    let decimal = |n: u16| n.to_string().into_bytes();
    for (start, end, node) in topo.slot_ranges() {
        commands.push((
            RING_ASSIGN,
            vec![decimal(start), decimal(end), node.to_vec()],
        ));
    }
    if !nodes.is_empty() {
        for (start, end) in topo.slot_table().unassigned() {
            commands.push((RING_UNASSIGN, vec![decimal(start), decimal(end)]));
        }
    }
    commands
}

/// Emits the commands that rebuild `topo` (see [`rebuild_commands`]).
unsafe fn emit_commands(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    topo: &Topology,
) {
    let Some(emit) = raw::RedisModule_EmitAOF else {
        return;
    };
    for (name, args) in rebuild_commands(topo) {
        let strings: Vec<RedisString> = args
            .iter()
            .map(|a| RedisString::create_from_slice(ptr::null_mut(), a))
            .collect();
        let mut raw_args: Vec<*mut raw::RedisModuleString> =
            strings.iter().map(|a| a.inner).collect();
        // "v": an array of strings and its length; Redis takes its own references.
        emit(
            aof,
            name.as_ptr(),
            c"sv".as_ptr(),
            key,
            raw_args.as_mut_ptr(),
            raw_args.len(),
        );
    }
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    let topo = topology(value);
    catch_unwind(AssertUnwindSafe(|| topo.memory_bytes())).unwrap_or(0)
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    let (Some(add_buffer), Some(add_number), Some(end)) = (
        raw::RedisModule_DigestAddStringBuffer,
        raw::RedisModule_DigestAddLongLong,
        raw::RedisModule_DigestEndSequence,
    ) else {
        return;
    };
    let topo = topology(value);
    let info = topo.config();
    add_number(md, info.flavour.code() as c_longlong);
    add_number(md, c_longlong::from(info.vnodes));
    add_number(md, c_longlong::from(info.hashtag));
    end(md);
    for node in topo.nodes() {
        add_buffer(md, node.name.as_ptr().cast::<c_char>(), node.name.len());
        add_number(md, c_longlong::from(node.weight));
        end(md);
    }
    for (start, end_slot, owner) in topo.slot_table().ranges() {
        add_number(md, c_longlong::from(start));
        add_number(md, c_longlong::from(end_slot));
        add_number(md, owner as c_longlong);
        end(md);
    }
}

unsafe extern "C" fn free(value: *mut c_void) {
    if !value.is_null() {
        drop(Box::from_raw(value.cast::<RingValue>()));
    }
}

unsafe extern "C" fn copy(
    _from_key: *mut raw::RedisModuleString,
    _to_key: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    let topo = topology(value);
    match catch_unwind(AssertUnwindSafe(|| topo.clone())) {
        Ok(copy) => into_value(copy),
        Err(_) => std::ptr::null_mut(),
    }
}
