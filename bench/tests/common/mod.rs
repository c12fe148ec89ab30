//! What the program's tests share: running `ringslot-bench` with the module `make test`
//! builds (`ringslot_harness::server::test_module`), through the harness's
//! [`ringslot_harness::programs`], which the tool's tests use too.

#![allow(dead_code, unused_imports)]

pub use ringslot_harness::programs::csv_table;
use std::process::Output;

/// `--module <the test module>` and `args`.
fn with_module(args: &[&str]) -> Vec<String> {
    let module = ringslot_harness::server::test_module();
    let mut all = vec!["--module".to_string(), module.display().to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    all
}

/// Runs `ringslot-bench --module <the test module> args...`.
pub fn bench(args: &[&str]) -> Output {
    let all = with_module(args);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    ringslot_harness::programs::run(env!("CARGO_BIN_EXE_ringslot-bench"), &all)
}

/// [`bench`] that must succeed; returns its standard output.
pub fn ok(args: &[&str]) -> String {
    let all = with_module(args);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    ringslot_harness::programs::ok(env!("CARGO_BIN_EXE_ringslot-bench"), &all)
}
