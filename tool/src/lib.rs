//! ringslot's operator tool (the `ringslot` binary) as a library. Its rooms:
//!
//! - [`cluster`]: the cluster layer, how a live Redis Cluster's nodes are reached and read
//!   (links, typed node errors, topology, slot-migration jobs, permissions, pacing);
//! - [`status`]: `ringslot status`, how the cluster stands (reads only, cheaply);
//! - [`predict`]: `ringslot predict`, what a change of masters costs (reads only, unless
//!   `--with-module`);
//! - [`plan`]: the plan file, which `predict --by ... --json` writes and `apply` reads;
//! - `apply`: `ringslot apply`, the plan carried out: the only code that writes to a
//!   cluster;
//! - [`members`]: `ringslot members`, what a change of nodes costs a memcached fleet;
//! - [`cli`]: the command line, a file per subcommand and the option groups they share;
//! - [`picture`]: a cluster as an SVG picture (memory bars, slot strips), for `--out`;
//! - [`render`]: findings and memory judgements in words, for messages and reports;
//! - [`client`], [`reply`], [`output`]: Redis commands with binary arguments, one decoder of
//!   RESP2/RESP3 replies (and of the module's `RING.*` replies), Markdown and CSV tables.
//!
//! The benchmark program and the test harness take the cluster layer, the prediction, the
//! replies and the output from here. It depends on the placement engine (`ringslot-engine`)
//! and the `redis` client, not on the module nor on the test harness, and nothing in it
//! starts a server (its live unit tests start their own, through the harness).

pub(crate) mod apply;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod members;
pub mod output;
pub mod picture;
pub mod plan;
pub mod predict;
pub mod render;
pub mod reply;
pub mod status;
