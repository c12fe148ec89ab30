//! `ringslot`, the operator's tool: `status` reads how a live Redis Cluster stands; `predict`
//! reads it and says what a change of masters will cost; `apply` carries out a plan by weight
//! on it, the one command that writes; `members` says what a change of nodes costs a memcached
//! fleet. The command line is declared in `tool/src/cli/program.rs`, each subcommand's options
//! and run in `tool/src/cli/<name>.rs`; this file only parses, runs and sets the exit status.

use clap::Parser;
use ringslot_tool::cli::program::{run, Cli};

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(&cli) {
        eprintln!("ringslot: error: {e:#}");
        std::process::exit(ringslot_tool::cli::exit_status(&e));
    }
}
