//! ringslot's operator tool (the `ringslot` binary) as a library: what a change of masters
//! costs a live Redis Cluster ([`predict`]), and what a change of nodes costs a memcached
//! fleet ([`members`]); with the Redis client pieces ([`client`], [`reply`], [`replies`]) and the output
//! ([`output`]) that the benchmark program and the test harness take from it.
//!
//! It depends on the placement engine (`ringslot-engine`) and the `redis` client, not on the
//! module nor on the test harness, and nothing in it starts a server.

pub mod apply;
pub mod args;
pub mod client;
pub mod link;
pub mod members;
pub mod memcached;
pub mod output;
pub mod predict;
pub mod replies;
pub mod reply;
