//! The ring data type, `ringslot1`: one [`Topology`] per key.
//!
//! RDB encoding (encoding version 1), all integers as RDB unsigned:
//! flavour code (0 native, 1 ketama, 2 groupcache), vnodes, hashtag (0/1), node count, then
//! per node its name (string) and weight, then the slot table as a range count and per range
//! start, end and node index. Points are not stored: they are a pure function of the rest
//! and are rebuilt on load.
//!
//! AOF rewrite emits `RING.CREATE` with the configuration, one `RING.ADD key WEIGHT w node`
//! per node in order, then one `RING.ASSIGN key start end node` per slot range, so that the
//! replayed file ends with the same slot table whatever the rebalancing in between did.

use crate::engine::{Flavour, Topology};
use redis_module::native_types::RedisType;
use redis_module::{logging, raw};
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_longlong, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The type's name as `TYPE` shows it (exactly 9 characters, as Redis requires).
pub const TYPE_NAME: &str = "ringslot1";
/// The RDB encoding version this build writes and reads.
pub const ENCODING_VERSION: i32 = 1;

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

/// # Safety
/// `value` must be a `Topology` created by this module (Redis only hands back our values).
unsafe fn topology<'a>(value: *const c_void) -> &'a Topology {
    &*value.cast::<Topology>()
}

fn into_value(topology: Topology) -> *mut c_void {
    Box::into_raw(Box::new(topology)).cast()
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

/// Reads one ring; `None` on a short read or data that is not a valid ring.
fn load_topology(rdb: *mut raw::RedisModuleIO) -> Option<Topology> {
    let flavour = Flavour::from_code(raw::load_unsigned(rdb).ok()?)?;
    let vnodes = u32::try_from(raw::load_unsigned(rdb).ok()?).ok()?;
    let hashtag = match raw::load_unsigned(rdb).ok()? {
        0 => false,
        1 => true,
        _ => return None,
    };
    let node_count = raw::load_unsigned(rdb).ok()?;
    // Capacity from trusted-looking counts only: a corrupt count must not allocate wildly.
    let mut nodes = Vec::with_capacity(node_count.min(1024) as usize);
    for _ in 0..node_count {
        let name = raw::load_string_buffer(rdb).ok()?.as_ref().to_vec();
        let weight = u32::try_from(raw::load_unsigned(rdb).ok()?).ok()?;
        nodes.push((name, weight));
    }
    let range_count = raw::load_unsigned(rdb).ok()?;
    if range_count > crate::engine::SLOT_COUNT as u64 {
        return None;
    }
    let mut ranges = Vec::with_capacity(range_count as usize);
    for _ in 0..range_count {
        let start = u16::try_from(raw::load_unsigned(rdb).ok()?).ok()?;
        let end = u16::try_from(raw::load_unsigned(rdb).ok()?).ok()?;
        let owner = usize::try_from(raw::load_unsigned(rdb).ok()?).ok()?;
        ranges.push((start, end, owner));
    }
    Topology::from_parts(flavour, vnodes, hashtag, nodes, &ranges).ok()
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    if encver != ENCODING_VERSION {
        logging::log_warning(format!(
            "ringslot: cannot load a ring of encoding version {encver} (this build reads {ENCODING_VERSION})"
        ));
        return std::ptr::null_mut();
    }
    match catch_unwind(AssertUnwindSafe(|| load_topology(rdb))) {
        Ok(Some(topo)) => into_value(topo),
        _ => {
            logging::log_warning("ringslot: corrupt ring in RDB data");
            std::ptr::null_mut()
        }
    }
}

const RING_CREATE: &CStr = c"RING.CREATE";
const RING_ADD: &CStr = c"RING.ADD";
const RING_ASSIGN: &CStr = c"RING.ASSIGN";

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

/// Emits the commands that rebuild `topo` (see the module docs).
unsafe fn emit_commands(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    topo: &Topology,
) {
    let Some(emit) = raw::RedisModule_EmitAOF else {
        return;
    };
    let info = topo.config();
    let Ok(compat) = CString::new(info.flavour.name()) else {
        return;
    };
    // Unused trailing arguments are never read: the format decides how many are.
    if info.flavour.fixes_vnodes() {
        let fmt = if info.hashtag { c"sccc" } else { c"scc" };
        emit(
            aof,
            RING_CREATE.as_ptr(),
            fmt.as_ptr(),
            key,
            c"COMPAT".as_ptr(),
            compat.as_ptr(),
            c"HASHTAG".as_ptr(),
        );
    } else {
        let fmt = if info.hashtag { c"sccclc" } else { c"scccl" };
        emit(
            aof,
            RING_CREATE.as_ptr(),
            fmt.as_ptr(),
            key,
            c"COMPAT".as_ptr(),
            compat.as_ptr(),
            c"VNODES".as_ptr(),
            c_longlong::from(info.vnodes),
            c"HASHTAG".as_ptr(),
        );
    }
    for node in topo.nodes() {
        emit(
            aof,
            RING_ADD.as_ptr(),
            c"sclb".as_ptr(),
            key,
            c"WEIGHT".as_ptr(),
            c_longlong::from(node.weight),
            node.name.as_ptr().cast::<c_char>(),
            node.name.len(),
        );
    }
    for (start, end, node) in topo.slot_ranges() {
        emit(
            aof,
            RING_ASSIGN.as_ptr(),
            c"sllb".as_ptr(),
            key,
            c_longlong::from(start),
            c_longlong::from(end),
            node.as_ptr().cast::<c_char>(),
            node.len(),
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
        drop(Box::from_raw(value.cast::<Topology>()));
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
