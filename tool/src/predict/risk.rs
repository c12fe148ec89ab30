//! The typed findings a prediction warns of ([`Risk`]), which [`super::risks`] finds, the
//! report says in words and `--json` gives as they are.

use super::method::Method;
use crate::cluster::budget::Judgement;
use serde::Serialize;

/// `proto-max-bulk-len` by default (512 MB): a `RESTORE` payload past it is refused.
pub const PROTO_MAX_BULK_LEN: f64 = 512.0 * 1024.0 * 1024.0;

/// `cluster-node-timeout` by default, seconds: a master that holds its main thread past it is
/// taken for failed and its replica promoted (the tool cannot read the setting without
/// `+config|get`).
pub const CLUSTER_NODE_TIMEOUT: f64 = 15.0;

/// One plan's judgement of a node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanJudgement {
    /// The plan (`redis-cli`, `by memory`, ...) and the method it was walked by.
    pub plan: String,
    pub method: Method,
    /// The node's worst moment under it.
    pub judgement: Judgement,
}

/// A plan's end for a master full now: the plan, the method, and its `used_memory` then.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanEnd {
    pub plan: String,
    pub method: Method,
    /// Its `used_memory` when the plan is done, bytes, and that over its `maxmemory`.
    pub end: f64,
    pub fill: f64,
}

/// What to know before running a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Risk {
    /// A node that some plan takes past its limit less the headroom (`in_margin`) or past its
    /// limit (`crosses`), with each such plan's worst moment: `apply` refuses such a plan
    /// (redis-cli does not look).
    Limit {
        node: String,
        under: Vec<PlanJudgement>,
    },
    /// A master at or past its limit less the headroom now. A move that takes bytes off it is
    /// never refused (the headroom is for growth): `ends` says where each plan leaves it.
    /// `evicting`: past `maxmemory` under an eviction policy, it evicts before every command,
    /// the run's and the clients' alike, until it is under.
    Full {
        judgement: Judgement,
        ends: Vec<PlanEnd>,
        evicting: bool,
    },
    /// A big key ([`super::big_keys::BigKey`], by name and slot) a plan moves, and the limits
    /// its move passes.
    BigKey {
        key: String,
        slot: u16,
        /// Past `--max-hold`: the plan by weight (named) leaves its slot where it is.
        pinned_by: Option<String>,
        /// Past `--max-hold`, but the plan by slots (redis-cli's own) moves it all the same.
        moved_by_slots: bool,
        /// Its hold of its source is a third or more of the default `cluster-node-timeout`.
        past_node_timeout: bool,
        /// Its payload passes `proto-max-bulk-len` (the target refuses its `RESTORE`), and
        /// the replicas' output buffer soft limit (a replica may resync in full).
        past_bulk_len: bool,
        past_replica_buffer: bool,
        /// Every master has Valkey 9 and a plan moves it: `--atomic` sends it in pieces.
        atomic_sends_pieces: bool,
    },
    /// Nodes held to nothing but their host's RAM (`maxmemory 0`), which every node on a
    /// host shares, bytes.
    HostRamOnly { nodes: Vec<String>, system: f64 },
    /// `count` replicas: each grows with its master and does not evict on its own.
    Replicas { count: usize },
    /// Nodes whose memory could not be read, and why the first could not.
    Unread {
        nodes: Vec<String>,
        note: Option<String>,
    },
}
