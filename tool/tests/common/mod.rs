//! What the tool's tests share: running the `ringslot` binary (the harness's
//! [`ringslot_harness::programs`], which the benchmark program's tests use too).

#![allow(dead_code, unused_imports)]

pub use ringslot_harness::programs::{csv_table, Noise};

pub mod live;
pub mod relief;
use std::process::Output;

/// Runs `ringslot args...`.
pub fn ringslot(args: &[&str]) -> Output {
    ringslot_harness::programs::run(env!("CARGO_BIN_EXE_ringslot"), args)
}

/// [`ringslot`] killed if it runs past `limit` (a hang: the test fails, naming it).
pub fn ringslot_within(args: &[&str], limit: std::time::Duration) -> Output {
    ringslot_harness::programs::run_within(env!("CARGO_BIN_EXE_ringslot"), args, limit)
}

/// [`ringslot`] that must succeed; returns its standard output.
pub fn ok(args: &[&str]) -> String {
    ringslot_harness::programs::ok(env!("CARGO_BIN_EXE_ringslot"), args)
}
