//! `COMMAND INFO` / `COMMAND DOCS` / `COMMAND GETKEYS` for the RING.* commands: arity, key
//! specs, summaries and argument docs, set with `RedisModule_SetCommandInfo` after the
//! commands are created by the `commands:` table (Redis 7.0 has no module ACL categories, so
//! the crate's `#[command]` macro cannot be used; RedisBloom's `src/cmd_info/` does the same
//! in C).

use redis_module::commands::{
    get_redis_command_args, get_redis_key_spec, BeginSearch, CommandArgFlags, FindKeys, KeySpec,
    KeySpecFlags, RedisModuleCommandArg,
};
use redis_module::{raw, Context, Status};
use std::ffi::CString;
use std::ptr;

const SINCE: &str = "0.1.0";

/// How one command is documented.
struct Doc {
    name: &'static str,
    summary: &'static str,
    complexity: &'static str,
    arity: i32,
    /// Key-spec flags (`REDISMODULE_CMD_KEY_*` bits).
    key_flags: u32,
    args: fn() -> Vec<RedisModuleCommandArg>,
}

/// An argument without sub-arguments.
fn arg(
    name: &str,
    type_: u32,
    token: Option<&str>,
    flags: CommandArgFlags,
) -> RedisModuleCommandArg {
    with_subargs(name, type_, token, flags, None)
}

/// A block or one-of argument made of `subargs`.
fn group(
    name: &str,
    type_: u32,
    token: Option<&str>,
    flags: CommandArgFlags,
    subargs: Vec<RedisModuleCommandArg>,
) -> RedisModuleCommandArg {
    with_subargs(name, type_, token, flags, Some(subargs))
}

fn with_subargs(
    name: &str,
    type_: u32,
    token: Option<&str>,
    flags: CommandArgFlags,
    subargs: Option<Vec<RedisModuleCommandArg>>,
) -> RedisModuleCommandArg {
    RedisModuleCommandArg::new(
        name.to_string(),
        type_,
        None,
        token.map(str::to_string),
        None,
        None,
        flags,
        None,
        subargs,
        None,
    )
}

fn key() -> RedisModuleCommandArg {
    RedisModuleCommandArg::new(
        "key".to_string(),
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        Some(0),
        None,
        None,
        None,
        CommandArgFlags::NONE,
        None,
        None,
        None,
    )
}

fn string(name: &str) -> RedisModuleCommandArg {
    arg(
        name,
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        None,
        CommandArgFlags::NONE,
    )
}

fn strings(name: &str) -> RedisModuleCommandArg {
    arg(
        name,
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        None,
        CommandArgFlags::MULTIPLE,
    )
}

fn integer(name: &str) -> RedisModuleCommandArg {
    arg(
        name,
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        None,
        CommandArgFlags::NONE,
    )
}

fn optional_integer(name: &str, token: &str) -> RedisModuleCommandArg {
    arg(
        name,
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        Some(token),
        CommandArgFlags::OPTIONAL,
    )
}

fn pure_token(name: &str, token: &str, flags: CommandArgFlags) -> RedisModuleCommandArg {
    arg(
        name,
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
        Some(token),
        flags,
    )
}

const ONEOF: u32 = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF;

fn create_args() -> Vec<RedisModuleCommandArg> {
    vec![
        key(),
        group(
            "compat",
            ONEOF,
            Some("COMPAT"),
            CommandArgFlags::OPTIONAL,
            vec![
                pure_token("native", "native", CommandArgFlags::NONE),
                pure_token("ketama", "ketama", CommandArgFlags::NONE),
                pure_token("groupcache", "groupcache", CommandArgFlags::NONE),
            ],
        ),
        optional_integer("vnodes", "VNODES"),
        pure_token("hashtag", "HASHTAG", CommandArgFlags::OPTIONAL),
    ]
}

fn add_args() -> Vec<RedisModuleCommandArg> {
    vec![key(), optional_integer("weight", "WEIGHT"), strings("node")]
}

fn del_args() -> Vec<RedisModuleCommandArg> {
    vec![key(), strings("node")]
}

fn assign_args() -> Vec<RedisModuleCommandArg> {
    vec![key(), integer("start"), integer("end"), string("node")]
}

fn get_args() -> Vec<RedisModuleCommandArg> {
    vec![key(), string("member"), optional_integer("count", "COUNT")]
}

fn mget_args() -> Vec<RedisModuleCommandArg> {
    vec![key(), strings("member")]
}

fn slot_args() -> Vec<RedisModuleCommandArg> {
    vec![key(), string("member")]
}

fn key_only() -> Vec<RedisModuleCommandArg> {
    vec![key()]
}

fn moves_args() -> Vec<RedisModuleCommandArg> {
    vec![
        key(),
        group(
            "change",
            ONEOF,
            None,
            CommandArgFlags::NONE,
            vec![
                pure_token("add", "ADD", CommandArgFlags::NONE),
                pure_token("del", "DEL", CommandArgFlags::NONE),
            ],
        ),
        string("node"),
        optional_integer("weight", "WEIGHT"),
        group(
            "members",
            ONEOF,
            None,
            CommandArgFlags::OPTIONAL,
            vec![
                arg(
                    "sample",
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                    Some("SAMPLE"),
                    CommandArgFlags::NONE,
                ),
                arg(
                    "pattern",
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PATTERN,
                    Some("KEYS"),
                    CommandArgFlags::NONE,
                ),
            ],
        ),
    ]
}

fn docs() -> Vec<Doc> {
    let rw = raw::REDISMODULE_CMD_KEY_RW;
    let ro = raw::REDISMODULE_CMD_KEY_RO;
    let access = raw::REDISMODULE_CMD_KEY_ACCESS;
    vec![
        Doc {
            name: "ring.create",
            summary: "Creates an empty ring with a flavour, virtual nodes per weight and hash-tag hashing",
            complexity: "O(1)",
            arity: -2,
            key_flags: rw | raw::REDISMODULE_CMD_KEY_INSERT,
            args: create_args,
        },
        Doc {
            name: "ring.add",
            summary: "Adds nodes to a ring (creating it) or re-weights them, rebalancing its slot table",
            complexity: "O(P + S) for P points and S slots",
            arity: -3,
            key_flags: rw | raw::REDISMODULE_CMD_KEY_UPDATE,
            args: add_args,
        },
        Doc {
            name: "ring.del",
            summary: "Removes nodes from a ring, draining their slots to the others",
            complexity: "O(P + S) for P points and S slots",
            arity: -3,
            key_flags: rw | raw::REDISMODULE_CMD_KEY_DELETE,
            args: del_args,
        },
        Doc {
            name: "ring.assign",
            summary: "Gives a range of hash slots to a node, as CLUSTER ADDSLOTSRANGE",
            complexity: "O(N) for N slots in the range",
            arity: 5,
            key_flags: rw | raw::REDISMODULE_CMD_KEY_UPDATE,
            args: assign_args,
        },
        Doc {
            name: "ring.get",
            summary: "Returns the owner of a member on the ring, or its preference list with COUNT",
            complexity: "O(log P), O(P) at worst with COUNT",
            arity: -3,
            key_flags: ro | access,
            args: get_args,
        },
        Doc {
            name: "ring.mget",
            summary: "Returns the owners of several members on the ring",
            complexity: "O(M log P) for M members",
            arity: -3,
            key_flags: ro | access,
            args: mget_args,
        },
        Doc {
            name: "ring.slot",
            summary: "Returns a member's hash slot and its owner in the ring's slot table",
            complexity: "O(1)",
            arity: 3,
            key_flags: ro | access,
            args: slot_args,
        },
        Doc {
            name: "ring.slots",
            summary: "Returns the ring's slot table as ranges, like CLUSTER SLOTS",
            complexity: "O(S) for S slots",
            arity: 2,
            key_flags: ro | access,
            args: key_only,
        },
        Doc {
            name: "ring.nodes",
            summary: "Returns each node with its weight, points and shares of the ring and the slots",
            complexity: "O(P + S)",
            arity: 2,
            key_flags: ro | access,
            args: key_only,
        },
        Doc {
            name: "ring.info",
            summary: "Returns the ring's configuration and balance figures",
            complexity: "O(P + S)",
            arity: 2,
            key_flags: ro,
            args: key_only,
        },
        Doc {
            name: "ring.moves",
            summary: "Evaluates what adding or removing a node would move under the ring, the slots and modulo",
            complexity: "O(M log P + P + S) for M members",
            arity: -4,
            key_flags: ro,
            args: moves_args,
        },
    ]
}

static INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

fn set_one(ctx: &Context, doc: &Doc) -> Result<(), String> {
    let (Some(get_command), Some(set_info)) = (unsafe { raw::RedisModule_GetCommand }, unsafe {
        raw::RedisModule_SetCommandInfo
    }) else {
        return Err("this Redis has no RedisModule_SetCommandInfo".into());
    };
    let name = CString::new(doc.name).map_err(|e| e.to_string())?;
    let summary = CString::new(doc.summary).map_err(|e| e.to_string())?;
    let complexity = CString::new(doc.complexity).map_err(|e| e.to_string())?;
    let since = CString::new(SINCE).map_err(|e| e.to_string())?;
    // SAFETY: the command was created by the `commands:` table in this OnLoad.
    let command = unsafe { get_command(ctx.get_raw(), name.as_ptr()) };
    if command.is_null() {
        return Err(format!("command {} not found", doc.name));
    }
    let mut key_specs = get_redis_key_spec(vec![KeySpec::new(
        None,
        KeySpecFlags::from_bits_truncate(doc.key_flags),
        BeginSearch::new_index(1),
        FindKeys::new_range(0, 1, 0),
    )]);
    // The argument strings are leaked (a few KB, once): a module with a data type is never
    // unloaded, and Redis copies everything it keeps.
    let mut args = get_redis_command_args((doc.args)()).unwrap_or_default();
    let info = raw::RedisModuleCommandInfo {
        version: &INFO_VERSION,
        summary: summary.as_ptr(),
        complexity: complexity.as_ptr(),
        since: since.as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: doc.arity,
        key_specs: key_specs.as_mut_ptr(),
        args: if args.is_empty() {
            ptr::null_mut()
        } else {
            args.as_mut_ptr()
        },
    };
    // SAFETY: every pointer in `info` outlives the call; Redis copies what it keeps.
    let status = unsafe { set_info(command, &info) };
    if status == raw::Status::Ok as i32 {
        Ok(())
    } else {
        Err(format!("RedisModule_SetCommandInfo refused {}", doc.name))
    }
}

/// Sets arity, key specs and docs of every RING.* command. Called from the module's `init`.
pub fn set_command_infos(ctx: &Context) -> Status {
    for doc in docs() {
        if let Err(e) = set_one(ctx, &doc) {
            ctx.log_warning(&format!("ringslot: {e}"));
            return Status::Err;
        }
    }
    Status::Ok
}
