//! The command table: every RING.* command as one entry with its name, flags, arity, key
//! spec, docs and handler. [`register`] walks it to create the commands (as raw callbacks)
//! and set their info. Adding a command or an option touches its entry and its handler in
//! `commands.rs`, nothing else.
//!
//! Every RING.* command takes its ring key as argument 1 and no other key, so the legacy key
//! positions are `1 1 1` for all, and the one key spec begins at index 1; the entry gives the
//! spec's flags.

use super::call::{dispatch, RawArgv, RawCallback, RawCtx};
use super::cmdinfo::{self, Arg, Command};
use super::commands;
use super::moves;
use crate::engine::Flavour;
use redis_module::{raw, Context, Status};
use std::ffi::CString;
use std::os::raw::c_int;

const RW: u32 = raw::REDISMODULE_CMD_KEY_RW;
const RO: u32 = raw::REDISMODULE_CMD_KEY_RO;
const ACCESS: u32 = raw::REDISMODULE_CMD_KEY_ACCESS;
const INSERT: u32 = raw::REDISMODULE_CMD_KEY_INSERT;
const UPDATE: u32 = raw::REDISMODULE_CMD_KEY_UPDATE;

const KEY_ONLY: &[Arg] = &[Arg::key()];

/// The flavours `COMPAT` takes, one keyword each, from [`Flavour::ALL`].
const FLAVOURS: [Arg; Flavour::ALL.len()] = {
    let mut out = [Arg::key(); Flavour::ALL.len()];
    let mut i = 0;
    while i < out.len() {
        let name = Flavour::ALL[i].name();
        out[i] = Arg::keyword(name, name);
        i += 1;
    }
    out
};

/// A change of a ring's nodes (RING.MOVES, RING.PLAN): several nodes joining (or
/// re-weighted), leaving, or the rebalance pending on the slot table. A node list ends at the
/// first option keyword; `NODES n` takes `n` names whatever they spell.
const CHANGE: Arg = Arg::one_of(
    "change",
    &[
        Arg::block(
            "add",
            &[
                Arg::keyword("add", "ADD"),
                Arg::integer("weight").token("WEIGHT").optional(),
                Arg::integer("count").token("NODES").optional(),
                Arg::string("node").multiple(),
            ],
        ),
        Arg::block(
            "del",
            &[
                Arg::keyword("del", "DEL"),
                Arg::integer("count").token("NODES").optional(),
                Arg::string("node").multiple(),
            ],
        ),
        Arg::block(
            "rebalance",
            &[
                Arg::keyword("rebalance", "REBALANCE"),
                Arg::double("threshold").token("THRESHOLD").optional(),
                Arg::string("node=weight")
                    .token("WEIGHT")
                    .optional()
                    .multiple(),
            ],
        ),
    ],
);

/// The options of a new ring (RING.CREATE, RING.MIRROR).
const COMPAT: Arg = Arg::one_of("compat", &FLAVOURS).token("COMPAT").optional();
const VNODES: Arg = Arg::integer("vnodes").token("VNODES").optional();
const HASHTAG: Arg = Arg::keyword("hashtag", "HASHTAG").optional();

/// Every RING.* command.
pub static COMMANDS: [Command; 16] = [
    Command {
        name: "ring.create",
        flags: "write deny-oom",
        arity: -2,
        key_flags: RW | INSERT,
        summary: "Creates an empty ring with a flavour, virtual nodes per weight and hash-tag hashing",
        complexity: "O(1)",
        since: "0.1.0",
        args: &[
            Arg::key(),
            COMPAT,
            VNODES,
            HASHTAG,
        ],
        handler: commands::create,
    },
    Command {
        name: "ring.add",
        flags: "write deny-oom",
        arity: -3,
        key_flags: RW | UPDATE,
        summary: "Adds nodes to a ring (creating it) or re-weights them, rebalancing its slot table",
        complexity: "O(P + S) for P points and S slots",
        since: "0.1.0",
        args: &[
            Arg::key(),
            Arg::integer("weight").token("WEIGHT").optional(),
            Arg::string("node").multiple(),
        ],
        handler: commands::add,
    },
    Command {
        name: "ring.del",
        flags: "write deny-oom",
        arity: -3,
        key_flags: RW | UPDATE,
        summary: "Removes nodes from a ring, draining their slots to the others",
        complexity: "O(P + S) for P points and S slots",
        since: "0.1.0",
        args: &[Arg::key(), Arg::string("node").multiple()],
        handler: commands::del,
    },
    Command {
        name: "ring.assign",
        flags: "write deny-oom",
        arity: 5,
        key_flags: RW | UPDATE,
        summary: "Gives a range of hash slots to a node, as CLUSTER ADDSLOTSRANGE",
        complexity: "O(N) for N slots in the range",
        since: "0.1.0",
        args: &[
            Arg::key(),
            Arg::integer("start"),
            Arg::integer("end"),
            Arg::string("node"),
        ],
        handler: commands::assign,
    },
    Command {
        name: "ring.get",
        flags: "readonly fast",
        arity: -3,
        key_flags: RO | ACCESS,
        summary: "Returns the owner of a member on the ring, or its preference list with COUNT",
        complexity: "O(log P), O(P) at worst with COUNT",
        since: "0.1.0",
        args: &[
            Arg::key(),
            Arg::string("member"),
            Arg::integer("count").token("COUNT").optional(),
        ],
        handler: commands::get,
    },
    Command {
        name: "ring.mget",
        flags: "readonly",
        arity: -3,
        key_flags: RO | ACCESS,
        summary: "Returns the owners of several members on the ring",
        complexity: "O(M log P) for M members",
        since: "0.1.0",
        args: &[Arg::key(), Arg::string("member").multiple()],
        handler: commands::mget,
    },
    Command {
        name: "ring.slot",
        flags: "readonly fast",
        arity: 3,
        key_flags: RO | ACCESS,
        summary: "Returns a member's hash slot and its owner in the ring's slot table",
        complexity: "O(1)",
        since: "0.1.0",
        args: &[Arg::key(), Arg::string("member")],
        handler: commands::slot,
    },
    Command {
        name: "ring.owners",
        flags: "readonly",
        arity: 3,
        key_flags: RO | ACCESS,
        summary: "Returns a member's owner under every placement scheme: ring, slots, modulo, jump, rendezvous, maglev, multiprobe, bounded",
        complexity: "O(M + N log N) for a Maglev table of M entries and N nodes",
        since: "0.2.0",
        args: &[Arg::key(), Arg::string("member")],
        handler: commands::owners,
    },
    Command {
        name: "ring.balance",
        flags: "readonly",
        arity: -2,
        key_flags: RO | ACCESS,
        summary: "Returns every placement scheme's peak-to-mean share on the ring's nodes and weights",
        complexity: "O(M + S x N) for a Maglev table of M entries, S sample members, N nodes",
        since: "0.2.0",
        args: &[Arg::key(), Arg::integer("sample").token("SAMPLE").optional()],
        handler: commands::balance,
    },
    Command {
        name: "ring.slots",
        flags: "readonly",
        arity: 2,
        key_flags: RO | ACCESS,
        summary: "Returns the ring's slot table as ranges, like CLUSTER SLOTS",
        complexity: "O(S) for S slots",
        since: "0.1.0",
        args: KEY_ONLY,
        handler: commands::slots,
    },
    Command {
        name: "ring.nodes",
        flags: "readonly",
        arity: 2,
        key_flags: RO | ACCESS,
        summary: "Returns each node with its weight, points and shares of the ring and the slots",
        complexity: "O(P + S)",
        since: "0.1.0",
        args: KEY_ONLY,
        handler: commands::nodes,
    },
    Command {
        name: "ring.info",
        flags: "readonly",
        arity: 2,
        key_flags: RO | ACCESS,
        summary: "Returns the ring's configuration and balance figures",
        complexity: "O(P + S)",
        since: "0.1.0",
        args: KEY_ONLY,
        handler: commands::info,
    },
    Command {
        name: "ring.moves",
        flags: "readonly",
        arity: -3,
        key_flags: RO | ACCESS,
        summary: "Evaluates what adding, removing or re-weighting nodes, or the pending rebalance, would move under the ring, the slots and modulo",
        complexity: "O(M log P + K log K + S + N) for M members, K points that change, S slots, N nodes",
        since: "0.1.0",
        args: &[
            Arg::key(),
            CHANGE,
            Arg::one_of(
                "members",
                &[
                    Arg::integer("sample").token("SAMPLE"),
                    Arg::pattern("pattern").token("KEYS"),
                    Arg::block("slots", &[Arg::integer("start"), Arg::integer("end")])
                        .token("SLOTS"),
                ],
            )
            .optional(),
            Arg::string("scheme").token("SCHEMES").optional().multiple(),
            Arg::one_of(
                "weigh",
                &[Arg::keyword("bytes", "BYTES"), Arg::keyword("hits", "HITS")],
            )
            .token("WEIGH")
            .optional()
            .multiple(),
        ],
        handler: moves::moves,
    },
    Command {
        name: "ring.unassign",
        flags: "write deny-oom",
        arity: 4,
        key_flags: RW | UPDATE,
        summary: "Leaves a range of hash slots without owner, as CLUSTER DELSLOTSRANGE",
        complexity: "O(N) for N slots in the range",
        since: "0.2.0",
        args: &[Arg::key(), Arg::integer("start"), Arg::integer("end")],
        handler: commands::unassign,
    },
    Command {
        name: "ring.plan",
        flags: "readonly",
        arity: -3,
        key_flags: RO | ACCESS,
        summary: "Returns the slot moves a change of nodes, or the pending rebalance, would make, as redis-cli --cluster rebalance",
        complexity: "O(S + N) for S slots and N nodes",
        since: "0.2.0",
        args: &[Arg::key(), CHANGE],
        handler: commands::plan,
    },
    Command {
        name: "ring.mirror",
        flags: "write deny-oom",
        arity: -2,
        // A refresh reads the old ring (its options, order, weights; `removed` names its
        // nodes) and replaces it.
        key_flags: RW | ACCESS | UPDATE,
        summary: "Makes a ring mirror the live cluster: its masters as nodes, its slot map as the slot table",
        complexity: "O(S + N) for S slots and N cluster nodes",
        since: "0.2.0",
        args: &[
            Arg::key(),
            COMPAT,
            VNODES,
            HASHTAG,
        ],
        handler: commands::mirror,
    },
];

/// The callback of table entry `I`: runs its handler.
unsafe extern "C" fn callback<const I: usize>(ctx: RawCtx, argv: RawArgv, argc: c_int) -> c_int {
    match COMMANDS.get(I) {
        // SAFETY: the arguments are those Redis passed to this callback.
        Some(command) => unsafe { dispatch(ctx, argv, argc, command.name, command.handler) },
        None => raw::Status::Err as c_int,
    }
}

macro_rules! callbacks {
    ($($i:literal)*) => { [$(callback::<$i> as RawCallback),*] };
}

/// One callback per table position (Redis passes a command no user data, so each entry
/// needs its own function); room for more entries than the table has.
const CALLBACKS: [RawCallback; 32] = callbacks!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
);

const _: () = assert!(COMMANDS.len() <= CALLBACKS.len(), "add callbacks");

/// Creates every command of the table and sets its info. Called from the module's `init`.
pub fn register(ctx: &Context) -> Status {
    // SAFETY: a plain read of a function-pointer static that RedisModule_Init wrote before
    // the module's code runs, on this same thread.
    let Some(create) = (unsafe { raw::RedisModule_CreateCommand }) else {
        return Status::Err;
    };
    for (command, &callback) in COMMANDS.iter().zip(&CALLBACKS) {
        let (Ok(name), Ok(flags)) = (CString::new(command.name), CString::new(command.flags))
        else {
            return Status::Err;
        };
        // SAFETY: the module API is initialised (this runs in RedisModule_OnLoad after
        // RedisModule_Init); the strings outlive the call, which copies them.
        let status = unsafe {
            create(
                ctx.ctx,
                name.as_ptr(),
                Some(callback),
                flags.as_ptr(),
                1,
                1,
                1,
            )
        };
        if status != raw::Status::Ok as c_int {
            ctx.log_warning(&format!("ringslot: could not create {}", command.name));
            return Status::Err;
        }
        if let Err(e) = cmdinfo::set_info(ctx, command) {
            ctx.log_warning(&format!("ringslot: {e}"));
            return Status::Err;
        }
    }
    Status::Ok
}
