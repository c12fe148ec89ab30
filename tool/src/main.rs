//! `ringslot`, the operator's tool: `predict` reads a live Redis Cluster and says what a
//! change of masters will cost; `apply` carries out a plan by weight on it, the one command
//! that writes; `members` says what a change of nodes costs a memcached fleet's keys. Each
//! subcommand's options and run live in `tool/src/cli/<name>.rs`; this file only parses and
//! dispatches.

use clap::{Parser, Subcommand};
use ringslot_tool::cli::{apply, members, predict, status};

#[derive(Parser)]
#[command(
    name = "ringslot",
    version,
    about = "What a change of masters costs a live Redis Cluster, and a change of nodes a \
             memcached fleet"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// How the live cluster at --url stands, read cheaply: per master its slots, keys, bytes
    /// (sampled), memory against maxmemory, replicas and open slots; the balance by slots, keys
    /// and bytes; the biggest slots; and a one-line verdict naming the next command.
    Status(status::StatusArgs),
    /// Predicts a change of masters on the live cluster at --url: masters joining (--add),
    /// leaving (--del), or the rebalance pending after `redis-cli --cluster add-node`
    /// (--rebalance).
    Predict(predict::PredictArgs),
    /// What a change of nodes costs keys that are not in Redis: memcached's, from a file (one
    /// key per line, or `lru_crawler metadump` lines) or a live memcached, weighed by their
    /// sizes.
    Members(members::MembersArgs),
    /// Carries out a plan by weight (`ringslot predict ... --by bytes --json > plan.json`) on
    /// the cluster at --url: each slot moved as redis-cli moves one (SETSLOT IMPORTING and
    /// MIGRATING, MIGRATE in batches, SETSLOT NODE everywhere), or with --atomic by Valkey 9's
    /// atomic slot migration; --parallel N moves between disjoint pairs of masters at once.
    /// Writes: asks for a confirmation unless --yes; --dry-run prints the commands instead.
    /// Interrupted, it goes on when run again with the same plan.
    Apply(apply::ApplyArgs),
}

fn main() {
    let cli = Cli::parse();
    let done = match &cli.command {
        Command::Status(a) => status::run(a),
        Command::Predict(a) => predict::run(a),
        Command::Members(a) => members::run(a),
        Command::Apply(a) => apply::run(a),
    };
    if let Err(e) = done {
        eprintln!("ringslot: error: {e:#}");
        std::process::exit(ringslot_tool::cli::exit_status(&e));
    }
}
