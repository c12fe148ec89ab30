//! Which server the module runs in, read once at load (`INFO server` through
//! `RedisModule_GetServerInfo`: `server_name`, `redis_version`, `valkey_version`), and the
//! module options declared to it.
//!
//! Valkey's and Redis' version numbers overlap (Valkey 9 answers `redis_version:7.2.4`, Redis
//! 8 answers `8.x`), and the high context flags mean different things on each (`1 << 25` is
//! Valkey's slot-import client and Redis 8.4's debug-enabled, `1 << 26` Valkey's slot-export
//! client and Redis' trim-in-progress), so the server is told by its name, never by a number.

use redis_module::{raw, Context};
use std::ffi::CStr;
use std::os::raw::c_int;
use std::sync::OnceLock;

/// Valkey's `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION` (valkey-io/valkey#2593,
/// `valkeymodule.h`): the module accepts that keys of slots being imported by an atomic slot
/// migration (`CLUSTER MIGRATESLOTS`) are loaded before the slots are owned. Valkey refuses a
/// migration while any loaded module has not declared it. The bit means nothing (or something
/// else) on Redis, so it is only ever set on Valkey.
pub const OPTION_HANDLE_ATOMIC_SLOT_MIGRATION: c_int = 1 << 5;

/// Valkey's `VALKEYMODULE_CTX_FLAGS_SLOT_IMPORT_CLIENT` (`valkeymodule.h`): the command runs
/// on the target of an atomic slot migration, replayed by the slot-import client. On Redis
/// 8.4 the same bit is `REDISMODULE_CTX_FLAGS_DEBUG_ENABLED`, so it is read on Valkey only.
pub const CTX_FLAG_SLOT_IMPORT_CLIENT: c_int = 1 << 25;

/// Whether the command of `context` is replayed by Valkey's slot-import client (see
/// [`CTX_FLAG_SLOT_IMPORT_CLIENT`]); always false on Redis.
pub fn is_slot_import_client(context: &Context) -> bool {
    if kind().family != Family::Valkey {
        return false;
    }
    // SAFETY: a plain read of a function-pointer static set by RedisModule_Init, called with
    // the live context of a command.
    let flags = unsafe { raw::RedisModule_GetContextFlags.map(|get| get(context.ctx)) };
    flags.is_some_and(|f| f & CTX_FLAG_SLOT_IMPORT_CLIENT != 0)
}

/// The server family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Redis (7.0.15 and 8.2.3 are tested).
    Redis,
    /// Valkey (9.1.2 is tested).
    Valkey,
}

/// The server the module was loaded into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerKind {
    /// Redis or Valkey, from `server_name` (`valkey` on Valkey 8 and later; absent on Redis).
    pub family: Family,
    /// The family's own version (`valkey_version` on Valkey, `redis_version` on Redis) as
    /// (major, minor, patch); zeros where the text has none.
    pub version: (u32, u32, u32),
}

impl ServerKind {
    /// The kind an `INFO server` text names. Unknown fields read as Redis 0.0.0.
    pub fn from_info(info: &str) -> ServerKind {
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
                .map(str::to_string)
        };
        let family = match field("server_name").as_deref() {
            Some("valkey") => Family::Valkey,
            _ => Family::Redis,
        };
        let version = match family {
            Family::Valkey => field("valkey_version").or_else(|| field("redis_version")),
            Family::Redis => field("redis_version"),
        };
        ServerKind {
            family,
            version: parse_version(&version.unwrap_or_default()),
        }
    }

    /// Whether a module command that opens keys of other hash slots finds them while it runs
    /// in cluster mode. Servers with one dictionary per slot (Valkey 8 and later, Redis 7.4 and
    /// later) look such a key up in the slot of the executing command's own key and find
    /// nothing; from a worker thread the key's own slot is used. Found on Valkey 9.1.2 and
    /// Redis 8.2.3 (`RING.MOVES ... SLOTS` inline counted no key), not on Redis 7.0.15.
    pub fn reads_keys_in_command_slot(&self) -> bool {
        match self.family {
            Family::Valkey => true,
            Family::Redis => (self.version.0, self.version.1) >= (7, 4),
        }
    }

    /// Whether the server has Valkey's atomic slot migration (`CLUSTER MIGRATESLOTS`, Valkey 9).
    pub fn has_valkey_atomic_migration(&self) -> bool {
        self.family == Family::Valkey && self.version.0 >= 9
    }
}

/// `"8.2.3"` -> (8, 2, 3); missing or unreadable parts are 0.
fn parse_version(text: &str) -> (u32, u32, u32) {
    let mut parts = text.trim().split('.').map(|p| p.parse().unwrap_or(0));
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

static KIND: OnceLock<ServerKind> = OnceLock::new();

/// The server the module runs in, as read at load ([`detect`]); Redis 0.0.0 until then (or
/// where the server could not say).
pub fn kind() -> ServerKind {
    KIND.get().copied().unwrap_or(ServerKind {
        family: Family::Redis,
        version: (0, 0, 0),
    })
}

/// Reads `INFO server` through `RedisModule_GetServerInfo` and remembers the kind (see
/// [`kind`]). Called once from `init`.
pub fn detect(context: &Context) -> ServerKind {
    let ctx = context.ctx;
    let mut text = String::new();
    // SAFETY: plain reads of function-pointer statics set by RedisModule_Init; `ctx` is the
    // live context of OnLoad; the info data is freed before returning, and the field strings
    // it hands out live as long as it.
    unsafe {
        if let (Some(get), Some(field), Some(free)) = (
            raw::RedisModule_GetServerInfo,
            raw::RedisModule_ServerInfoGetFieldC,
            raw::RedisModule_FreeServerInfo,
        ) {
            let info = get(ctx, c"server".as_ptr());
            if !info.is_null() {
                for name in [c"server_name", c"redis_version", c"valkey_version"] {
                    let value = field(info, name.as_ptr());
                    if !value.is_null() {
                        let value = CStr::from_ptr(value).to_string_lossy();
                        text.push_str(&format!("{}:{value}\n", name.to_string_lossy()));
                    }
                }
                free(ctx, info);
            }
        }
    }
    let kind = ServerKind::from_info(&text);
    let _ = KIND.set(kind);
    kind
}

/// The module options to declare on `kind`, given what the server supports (`all`, from
/// `RedisModule_GetModuleOptionsAll`, `None` where the server has no such call, as Redis
/// 7.0): I/O errors handled always; atomic slot migration only on Valkey, and only where the
/// server lists the bit.
pub fn module_options(kind: ServerKind, all: Option<c_int>) -> c_int {
    let mut options = raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS as c_int;
    if kind.family == Family::Valkey
        && all.is_some_and(|all| all & OPTION_HANDLE_ATOMIC_SLOT_MIGRATION != 0)
    {
        options |= OPTION_HANDLE_ATOMIC_SLOT_MIGRATION;
    }
    options
}

/// Declares the module's options (see [`module_options`]) on the server of `context`; returns
/// whether atomic slot migration was declared.
pub fn declare_options(context: &Context, kind: ServerKind) -> bool {
    let ctx = context.ctx;
    // SAFETY: plain reads of function-pointer statics set by RedisModule_Init; called in
    // OnLoad with its context.
    unsafe {
        let all = raw::RedisModule_GetModuleOptionsAll.map(|all| all());
        let options = module_options(kind, all);
        if let Some(set) = raw::RedisModule_SetModuleOptions {
            set(ctx, options);
        }
        options & OPTION_HANDLE_ATOMIC_SLOT_MIGRATION != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IO: c_int = raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS as c_int;

    // The fields as the three tested servers print them in `INFO server`.
    const VALKEY_9_1_2: &str = "redis_version:7.2.4\nserver_name:valkey\nvalkey_version:9.1.2\n";
    const REDIS_8_2_3: &str = "redis_version:8.2.3\n";
    const REDIS_7_0_15: &str = "redis_version:7.0.15\n";

    #[test]
    fn servers_are_told_by_name_not_by_number() {
        let valkey = ServerKind::from_info(VALKEY_9_1_2);
        assert_eq!(valkey.family, Family::Valkey);
        assert_eq!(valkey.version, (9, 1, 2));
        let redis8 = ServerKind::from_info(REDIS_8_2_3);
        assert_eq!((redis8.family, redis8.version), (Family::Redis, (8, 2, 3)));
        let redis7 = ServerKind::from_info(REDIS_7_0_15);
        assert_eq!((redis7.family, redis7.version), (Family::Redis, (7, 0, 15)));
        assert!(valkey.has_valkey_atomic_migration());
        assert!(!redis8.has_valkey_atomic_migration());
    }

    #[test]
    fn keys_of_other_slots_are_read_in_the_command_slot_from_7_4_and_on_valkey() {
        assert!(ServerKind::from_info(VALKEY_9_1_2).reads_keys_in_command_slot());
        assert!(ServerKind::from_info(REDIS_8_2_3).reads_keys_in_command_slot());
        assert!(ServerKind::from_info("redis_version:7.4.1\n").reads_keys_in_command_slot());
        assert!(!ServerKind::from_info(REDIS_7_0_15).reads_keys_in_command_slot());
        assert!(!ServerKind::from_info("redis_version:7.2.4\n").reads_keys_in_command_slot());
    }

    #[test]
    fn atomic_slot_migration_is_declared_on_valkey_only_where_listed() {
        let valkey = ServerKind::from_info(VALKEY_9_1_2);
        let redis8 = ServerKind::from_info(REDIS_8_2_3);
        let redis7 = ServerKind::from_info(REDIS_7_0_15);
        // Valkey 9.1.2's GetModuleOptionsAll: every bit below _VALKEYMODULE_OPTIONS_FLAGS_NEXT
        // (1 << 6).
        let valkey_all = Some((1 << 6) - 1);
        assert_eq!(
            module_options(valkey, valkey_all),
            IO | OPTION_HANDLE_ATOMIC_SLOT_MIGRATION
        );
        // Valkey 8 lists no such bit; Redis 7.0 has no GetModuleOptionsAll; Redis 8 lists
        // bits up to 1 << 4 and may give bit 5 another meaning one day.
        assert_eq!(module_options(valkey, Some((1 << 5) - 1)), IO);
        assert_eq!(module_options(redis7, None), IO);
        assert_eq!(module_options(redis8, Some((1 << 4) - 1)), IO);
        assert_eq!(module_options(redis8, Some((1 << 8) - 1)), IO);
    }
}
