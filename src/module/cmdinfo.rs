//! What `COMMAND INFO` / `COMMAND DOCS` / `COMMAND GETKEYS` say about a command: its facts
//! ([`Command`]) and argument docs as constant data ([`Arg`]), turned into the structures of
//! `RedisModule_SetCommandInfo`. Redis 7.0 has no module ACL categories, so the crate's
//! `#[command]` macro cannot be used; RedisBloom's `src/cmd_info/` does the same in C.

use super::call::Handler;
use redis_module::commands::{
    get_redis_command_args, get_redis_key_spec, BeginSearch, CommandArgFlags, FindKeys, KeySpec,
    KeySpecFlags, RedisModuleCommandArg,
};
use redis_module::{raw, Context};
use std::ffi::CString;
use std::ptr;

/// One RING.* command: its facts, from which it is created and documented (the table of
/// them is [`super::table::COMMANDS`]).
pub struct Command {
    /// Lower-case name, as `COMMAND INFO` shows it.
    pub name: &'static str,
    /// `RedisModule_CreateCommand` flags (`write deny-oom`, `readonly fast`, ...).
    pub flags: &'static str,
    /// Arity as Redis counts it: negative for "at least".
    pub arity: i32,
    /// Flags of the key spec of the ring key (`REDISMODULE_CMD_KEY_*` bits).
    pub key_flags: u32,
    /// One line for `COMMAND DOCS`.
    pub summary: &'static str,
    /// Time complexity for `COMMAND DOCS`.
    pub complexity: &'static str,
    /// The ringslot version that introduced the command.
    pub since: &'static str,
    /// The arguments, for `COMMAND DOCS` and redis-cli's hints.
    pub args: &'static [Arg],
    /// What runs when the command is called.
    pub handler: Handler,
}

/// The kind of a documented argument (`COMMAND DOCS` "type").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// The ring key.
    Key,
    /// A string.
    String,
    /// An integer.
    Integer,
    /// A floating-point number.
    Double,
    /// A glob-style pattern.
    Pattern,
    /// A keyword without a value.
    PureToken,
    /// One of the sub-arguments.
    OneOf,
    /// All of the sub-arguments, together.
    Block,
}

/// One documented argument: constant data, so that a command's docs sit in its table entry.
#[derive(Debug, Clone, Copy)]
pub struct Arg {
    /// The argument's name (`node`, `weight`).
    pub name: &'static str,
    /// Its kind.
    pub kind: ArgKind,
    /// The keyword that introduces it (`WEIGHT`), if any.
    pub token: Option<&'static str>,
    /// It may be left out.
    pub optional: bool,
    /// It may be repeated.
    pub multiple: bool,
    /// Sub-arguments of a one-of.
    pub sub: &'static [Arg],
}

impl Arg {
    const fn of(name: &'static str, kind: ArgKind) -> Arg {
        Arg {
            name,
            kind,
            token: None,
            optional: false,
            multiple: false,
            sub: &[],
        }
    }

    /// The ring key (always argument 1, the one key spec).
    pub const fn key() -> Arg {
        Arg::of("key", ArgKind::Key)
    }

    /// A string argument.
    pub const fn string(name: &'static str) -> Arg {
        Arg::of(name, ArgKind::String)
    }

    /// An integer argument.
    pub const fn integer(name: &'static str) -> Arg {
        Arg::of(name, ArgKind::Integer)
    }

    /// A floating-point argument.
    pub const fn double(name: &'static str) -> Arg {
        Arg::of(name, ArgKind::Double)
    }

    /// A glob-style pattern argument.
    pub const fn pattern(name: &'static str) -> Arg {
        Arg::of(name, ArgKind::Pattern)
    }

    /// A keyword without a value.
    pub const fn keyword(name: &'static str, token: &'static str) -> Arg {
        Arg::of(name, ArgKind::PureToken).token(token)
    }

    /// One of `sub`.
    pub const fn one_of(name: &'static str, sub: &'static [Arg]) -> Arg {
        Arg {
            sub,
            ..Arg::of(name, ArgKind::OneOf)
        }
    }

    /// All of `sub`, together.
    pub const fn block(name: &'static str, sub: &'static [Arg]) -> Arg {
        Arg {
            sub,
            ..Arg::of(name, ArgKind::Block)
        }
    }

    /// The same argument introduced by the keyword `token`.
    pub const fn token(self, token: &'static str) -> Arg {
        Arg {
            token: Some(token),
            ..self
        }
    }

    /// The same argument, optional.
    pub const fn optional(self) -> Arg {
        Arg {
            optional: true,
            ..self
        }
    }

    /// The same argument, repeatable.
    pub const fn multiple(self) -> Arg {
        Arg {
            multiple: true,
            ..self
        }
    }

    /// The crate's description of this argument (and its sub-arguments).
    fn to_crate(self) -> RedisModuleCommandArg {
        let kind = match self.kind {
            ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
            ArgKind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            ArgKind::Double => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
            ArgKind::Pattern => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PATTERN,
            ArgKind::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
            ArgKind::OneOf => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
            ArgKind::Block => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
        };
        let mut flags = CommandArgFlags::NONE;
        if self.optional {
            flags |= CommandArgFlags::OPTIONAL;
        }
        if self.multiple {
            flags |= CommandArgFlags::MULTIPLE;
        }
        let sub = (!self.sub.is_empty()).then(|| self.sub.iter().map(|a| a.to_crate()).collect());
        RedisModuleCommandArg::new(
            self.name.to_string(),
            kind,
            (self.kind == ArgKind::Key).then_some(0),
            self.token.map(str::to_string),
            None,
            None,
            flags,
            None,
            sub,
            None,
        )
    }
}

static INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// Sets the arity, the key spec (the ring key at index 1, with the entry's flags) and the docs
/// of the created command `command`. Error: a message for the log.
pub fn set_info(ctx: &Context, command: &Command) -> Result<(), String> {
    // SAFETY: plain reads of function-pointer statics set by RedisModule_Init.
    let (Some(get_command), Some(set_info)) = (unsafe { raw::RedisModule_GetCommand }, unsafe {
        raw::RedisModule_SetCommandInfo
    }) else {
        return Err("this Redis has no RedisModule_SetCommandInfo".into());
    };
    let c = |s: &str| CString::new(s).map_err(|e| e.to_string());
    let (name, summary) = (c(command.name)?, c(command.summary)?);
    let (complexity, since) = (c(command.complexity)?, c(command.since)?);
    // SAFETY: the command was created in this OnLoad; the name outlives the call.
    let handle = unsafe { get_command(ctx.get_raw(), name.as_ptr()) };
    if handle.is_null() {
        return Err(format!("command {} not found", command.name));
    }
    let mut key_specs = get_redis_key_spec(vec![KeySpec::new(
        None,
        KeySpecFlags::from_bits_truncate(command.key_flags),
        BeginSearch::new_index(1),
        FindKeys::new_range(0, 1, 0),
    )]);
    // The argument strings are leaked (a few KB, once): a module with a data type is never
    // unloaded, and Redis copies everything it keeps.
    let mut args = get_redis_command_args(command.args.iter().map(|a| a.to_crate()).collect())
        .unwrap_or_default();
    let info = raw::RedisModuleCommandInfo {
        version: &INFO_VERSION,
        summary: summary.as_ptr(),
        complexity: complexity.as_ptr(),
        since: since.as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: command.arity,
        key_specs: key_specs.as_mut_ptr(),
        args: if args.is_empty() {
            ptr::null_mut()
        } else {
            args.as_mut_ptr()
        },
    };
    // SAFETY: every pointer in `info` outlives the call; Redis copies what it keeps.
    let status = unsafe { set_info(handle, &info) };
    if status == raw::Status::Ok as i32 {
        Ok(())
    } else {
        Err(format!(
            "RedisModule_SetCommandInfo refused {}",
            command.name
        ))
    }
}
