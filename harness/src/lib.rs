//! Support shared by ringslot's integration tests and its benchmark program:
//!
//! - [`server`]: a real `redis-server` (with the module, or plain and cluster-enabled) on a
//!   free loopback port, in its own temporary directory, stopped when dropped;
//! - [`reply`]: one decoder of RESP2/RESP3 replies (the operator tool's, `ringslot_tool::reply`);
//! - [`cluster`]: real Redis Clusters (`redis-cli --cluster`, `CLUSTER NODES`, convergence);
//! - [`proxy`]: twemproxy (`nutcracker`) pools and `memcached` on free loopback ports;
//! - [`tls`]: a throw-away CA and certificates for TLS-only servers;
//! - [`dump`]: `DUMP` payloads of module values taken apart and made, for `RESTORE` tests;
//! - [`client`]: sending commands with binary arguments and reading errors as their text (the
//!   operator tool's, `ringslot_tool::client`);
//! - [`prelude`]: the same for tests, panicking with the reply in the message, plus ring
//!   snapshots, a seeded PRNG and the known-answer files;
//! - [`programs`]: the workspace's programs run by their tests, the CSV files they write, and
//!   incompressible values;
//! - [`app`]: a cluster client as an application runs one (redirections followed, errors
//!   counted);
//! - [`relief`]: a cluster near full and a client throughout, as the relief job meets them;
//! - [`error`]: the harness's error.

pub mod app;
pub mod cluster;
pub mod dump;
pub mod error;
pub mod lb;
pub mod prelude;
pub mod programs;
pub mod proxy;
pub mod relief;
pub mod server;
pub mod tls;

pub use redis;
pub use ringslot_tool::{client, reply};
pub use server::{Server, ServerBuilder};
pub use tempfile;
