//! `ringslot-bench`: migration-cost and balance benchmarks of the ringslot module, measured on
//! a live redis-server (its own temporary one by default, or `--url`), printed as Markdown
//! tables and written as CSV and SVG charts. See BENCHMARKS.md for results and how to run it.
//!
//! One file (or folder) per subcommand owns its options (`Args`) and its `run`; this file only
//! dispatches.

mod balance;
mod cache;
mod cluster;
mod common;
mod compat;
mod limits;
mod migration;
mod relief;
mod report;
mod scenario;
mod scratch;
mod server;
mod spread;
mod throughput;
mod whatif;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ringslot-bench",
    about = "Migration-cost and balance benchmarks of the ringslot Redis module, on a live server"
)]
struct Cli {
    #[command(flatten)]
    global: common::Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Members moved by each change of a scenario, per scheme, against the ideal.
    Migration(migration::Args),
    /// Peak-to-mean and spread of per-node shares as virtual nodes grow.
    Balance(balance::Args),
    /// Requests per second of RING.GET, RING.SLOT and RING.MGET against GET and PING
    /// (redis-benchmark), memory per point and DEBUG RELOAD time, on its own server.
    Throughput(throughput::Args),
    /// How long commands hold Redis' main thread: bulk changes against a rebuild, AOF replay
    /// against RDB load, what-ifs on big rings, the ACL outcome of a keyspace walk, and every
    /// command at the default limits, on its own server.
    Limits(limits::Args),
    /// RING.MOVES ... KEYS over millions of real keys: background against inline, and the
    /// latency another client sees meanwhile, on its own server.
    Whatif(whatif::Args),
    /// The operator tool's prediction of a change of masters checked on a throw-away
    /// cluster (--local N masters, --keys K), where the change is then made for real and
    /// compared. On a live cluster, predict with the tool: `ringslot predict --url ...`.
    Cluster(cluster::Args),
    /// Fits the rebalance duration model of `cluster` to the runs of local `cluster` runs
    /// (their `<name>-run.csv` files) and prints each run's error.
    ClusterFit(cluster::model::FitArgs),
    /// What a join or a leave costs a cache fleet behind twemproxy (ketama, modula): the
    /// requests that miss, predicted by ringslot and measured on loopback (--local), and the
    /// same keys' migration on a Redis Cluster.
    Cache(cache::Args),
    /// What one node joining and one leaving costs under the placements of proxies and client
    /// libraries (nginx, HAProxy, Envoy, mcrouter, Predis, redis-rb, go-redis, pymemcache,
    /// python-memcached, libmemcached), beside the slots and `hash mod N`, at 4, 10 and 100
    /// nodes.
    Compat(compat::Args),
    /// Spread and load (Karger et al. 1997) of each ring flavour, the slot table and modulo,
    /// over random subsets of the nodes and over the node sets of a join/leave history.
    Spread(spread::Args),
    /// Relieving a cluster near full (three masters at 92% of their maxmemory, a fourth
    /// joined, a client throughout): ringslot's predict and apply beside redis-cli's
    /// rebalance on identical clusters, wall time and fills after, the median of runs.
    Relief(relief::Args),
}

fn main() {
    let cli = Cli::parse();
    let g = &cli.global;
    let done = match &cli.command {
        Command::Migration(a) => migration::run(g, a),
        Command::Balance(a) => balance::run(g, a),
        Command::Throughput(a) => throughput::run(g, a),
        Command::Limits(a) => limits::run(g, a),
        Command::Whatif(a) => whatif::run(g, a),
        Command::Cluster(a) => cluster::run(g, a),
        Command::ClusterFit(a) => cluster::model::run_fit(a),
        Command::Spread(a) => spread::run(g, a),
        Command::Compat(a) => compat::run(g, a),
        Command::Cache(a) => cache::run(g, a),
        Command::Relief(a) => relief::run(g, a),
    };
    if let Err(e) = done {
        eprintln!("ringslot-bench: error: {e:#}");
        std::process::exit(1);
    }
}
