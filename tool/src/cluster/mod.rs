//! The cluster layer: how the tool reaches a live Redis Cluster's nodes and reads them, on
//! which `predict` (reads) and `apply` (writes) both stand. Nothing here knows of plans or
//! predictions.
//!
//! - [`link`]: the seed's URL, credentials, TLS and timeout; a node's [`link::Link`];
//! - [`connection`]: a connection to one node, every error a [`error::NodeError`];
//! - [`error`]: what a node answered, typed by its code (the one place error texts are read);
//! - [`finding`]: what the tool finds about a cluster, one type for every command, each with
//!   its exit status;
//! - [`topology`]: the masters and slots, checked to be stable; `topology::Reach` turns a
//!   `CLUSTER NODES` line into a link;
//! - [`migrations`]: Valkey 9's atomic slot-migration jobs;
//! - [`memory`]: a node's memory, limit and eviction policy, and a master's replicas' lag;
//! - [`budget`]: the one model of a node's memory through a move, judging it against its limit;
//! - `permissions`: the commands each run needs, probed on every master first;
//! - [`pacing`]: the rate limit, the run's holds, and another client's `PING`s meanwhile;
//! - [`reads`]: `INFO` facts, per-slot key counts, `SCAN`;
//! - [`snapshot`]: one read of the whole cluster (views, memory, replication, state, atomic
//!   jobs), the one piece of code that reads what the commands judge it by.

pub mod budget;
pub mod connection;
pub mod error;
pub mod finding;
pub mod link;
pub mod memory;
pub mod migrations;
pub mod pacing;
pub(crate) mod permissions;
pub mod reads;
pub mod snapshot;
pub mod topology;

pub use connection::{args, NodeConnection};
pub use error::{Code, NodeError};
pub use link::{Access, Link, TlsFiles};
pub use snapshot::read_topology;
pub use topology::{LiveCluster, Master};

use std::sync::atomic::AtomicBool;

/// Set by Ctrl-C: reads stop at their next batch, and an apply once the slot under way is
/// moved and closed; the run then cleans up and says what it left.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);
