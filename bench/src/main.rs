//! `ringslot-bench`: migration-cost and balance benchmarks of the ringslot module, measured on
//! a live redis-server (its own temporary one by default, or `--url`), printed as Markdown
//! tables and written as CSV and SVG charts. See BENCHMARKS.md for results and how to run it.

mod balance;
mod cluster;
mod limits;
mod migration;
mod report;
mod scenario;
mod scratch;
mod server;
mod spread;
mod throughput;
mod whatif;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use migration::{Members, RingConf};
use ringslot_harness::server::{find_module, Profile};
use ringslot_harness::{redis, Server};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "ringslot-bench",
    about = "Migration-cost and balance benchmarks of the ringslot Redis module, on a live server"
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
struct Global {
    /// Use this running server (with the module loaded) instead of starting one.
    #[arg(long, global = true)]
    url: Option<String>,
    /// The module to load into the temporary server [default: target/release/libringslot.so,
    /// else target/debug/libringslot.so].
    #[arg(long, global = true)]
    module: Option<PathBuf>,
    /// The redis-server binary for the temporary server.
    #[arg(long, global = true, default_value = "redis-server")]
    redis_server: String,
    /// Where to write the .md, .csv and .svg files.
    #[arg(long, global = true, default_value = "bench/out")]
    out: PathBuf,
    /// Node names: `{}` is replaced by the node's number.
    #[arg(long, global = true, default_value = "10.0.0.{}:6379")]
    names: String,
}

#[derive(Subcommand)]
enum Command {
    /// Members moved by each change of a scenario, per scheme, against the ideal.
    Migration(MigrationArgs),
    /// Peak-to-mean and spread of per-node shares as virtual nodes grow.
    Balance(BalanceArgs),
    /// Requests per second of RING.GET, RING.SLOT and RING.MGET against GET and PING
    /// (redis-benchmark), memory per point and DEBUG RELOAD time, on its own server.
    Throughput(ThroughputArgs),
    /// How long commands hold Redis' main thread: bulk changes against a rebuild, AOF replay
    /// against RDB load, what-ifs on big rings, the ACL outcome of a keyspace walk, and every
    /// command at the default limits, on its own server.
    Limits(LimitsArgs),
    /// RING.MOVES ... KEYS over millions of real keys: background against inline, and the
    /// latency another client sees meanwhile, on its own server.
    Whatif(WhatifArgs),
    /// What a change of masters costs on a real Redis Cluster: predicted from the live
    /// cluster at --url (`--add ip:port` or `--del ip:port`), or, without --url, on a
    /// throw-away cluster (--local N masters, --keys K) where the change is then made for
    /// real and compared.
    Cluster(ClusterArgs),
    /// Spread and load (Karger et al. 1997) of each ring flavour, the slot table and modulo,
    /// over random subsets of the nodes and over the node sets of a join/leave history.
    Spread(SpreadArgs),
}

#[derive(Args)]
struct SpreadArgs {
    /// C: the nodes all views hold together.
    #[arg(long, default_value_t = 20)]
    nodes: usize,
    /// Every view holds at least ceil(nodes / t) nodes.
    #[arg(long, default_value_t = 2)]
    t: usize,
    /// Random subset views.
    #[arg(long, default_value_t = 40)]
    views: usize,
    /// Join/leave steps of the history.
    #[arg(long, default_value_t = 40)]
    steps: usize,
    /// Members `key:0` .. evaluated.
    #[arg(long, default_value_t = 50_000)]
    members: usize,
    /// Ring flavours, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "native,ketama,groupcache,native-fnv"
    )]
    flavours: Vec<String>,
    /// Seed of the random views.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stem of the output files.
    #[arg(long, default_value = "spread")]
    name: String,
}

#[derive(Args)]
struct ClusterArgs {
    /// Without --url: masters of the throw-away cluster.
    #[arg(long, default_value_t = 3)]
    local: usize,
    /// Without --url: keys loaded (`key:0` ...).
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Without --url: the last master leaves (drained, then removed) instead of one joining.
    #[arg(long)]
    remove: bool,
    /// With --url: the master that joins, as `ip:port`.
    #[arg(long, value_name = "IP:PORT", conflicts_with = "del")]
    add: Option<String>,
    /// With --add: its weight (redis-cli --cluster-weight; default 1).
    #[arg(long, requires = "add")]
    weight: Option<u32>,
    /// With --url: the master that leaves, as `ip:port`.
    #[arg(long, value_name = "IP:PORT")]
    del: Option<String>,
    /// Ring flavours evaluated, comma-separated (modulo comes with them).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "native,ketama,groupcache"
    )]
    flavours: Vec<String>,
    /// Slots per RING.MOVES ... SLOTS call (the work each call holds a master for).
    #[arg(long, default_value_t = 256)]
    chunk: u16,
    /// Seconds the ring copies live on the masters if the run dies.
    #[arg(long, default_value_t = 600)]
    ttl: u64,
    /// Without --url: also SCAN every master before and after, up to this many keys.
    #[arg(long, default_value_t = 200_000)]
    scan_limit: u64,
    /// Without --url: redis-cli's --cluster-pipeline for the real rebalance.
    #[arg(long, default_value_t = 10)]
    pipeline: u32,
    /// Stem of the output files.
    #[arg(long, default_value = "cluster")]
    name: String,
}

#[derive(Args)]
struct WhatifArgs {
    /// Keyspace sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    keys: Vec<u64>,
    /// Nodes of the ring (one more joins).
    #[arg(long, default_value_t = 10)]
    nodes: usize,
    /// Measure the inline path too for keyspaces up to this size.
    #[arg(long, default_value_t = 1_000_000)]
    inline_up_to: u64,
    /// Seconds of PING with nothing running, for the baseline.
    #[arg(long, default_value_t = 2)]
    baseline_secs: u64,
    /// Stem of the output file.
    #[arg(long, default_value = "whatif")]
    name: String,
}

#[derive(Args)]
struct LimitsArgs {
    /// Nodes of the bulk RING.ADD / RING.DEL rows.
    #[arg(long, default_value_t = 100_000)]
    bulk_nodes: usize,
    /// VNODES of the bulk rows.
    #[arg(long, default_value_t = 100)]
    bulk_vnodes: u32,
    /// Node counts of the AOF replay rows, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2000,5000")]
    aof_nodes: Vec<usize>,
    /// Nodes of the big what-if ring.
    #[arg(long, default_value_t = 1000)]
    huge_nodes: usize,
    /// VNODES of the big what-if ring.
    #[arg(long, default_value_t = 10_000)]
    huge_vnodes: u32,
    /// Bytes of the long ring name.
    #[arg(long, default_value_t = 65_536)]
    name_bytes: usize,
    /// Runs of each short measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Stem of the output file.
    #[arg(long, default_value = "limits")]
    name: String,
}

#[derive(Args)]
struct ThroughputArgs {
    /// Interleaved rounds; each figure is the median over them.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// redis-benchmark connections (-c).
    #[arg(long, default_value_t = 50)]
    clients: usize,
    /// Commands per pipeline in the pipelined runs (-P).
    #[arg(long, default_value_t = 16)]
    pipeline: usize,
    /// Requests per run, not pipelined.
    #[arg(long, default_value_t = 150_000)]
    n_single: usize,
    /// Requests per run, pipelined.
    #[arg(long, default_value_t = 1_000_000)]
    n_pipelined: usize,
    /// RING.MGET requests per run, not pipelined.
    #[arg(long, default_value_t = 30_000)]
    n_mget: usize,
    /// RING.MGET requests per run, pipelined.
    #[arg(long, default_value_t = 60_000)]
    n_mget_pipelined: usize,
    /// DEBUG RELOADs timed (median).
    #[arg(long, default_value_t = 3)]
    reloads: usize,
    /// Nodes of the measured ring (160 points each).
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// Rings saved and reloaded (the measured one and copies of it).
    #[arg(long, default_value_t = 100)]
    rings: usize,
    /// Do not pin redis-server to CPU 0 and redis-benchmark to CPU 1.
    #[arg(long)]
    no_pin: bool,
    /// The redis-benchmark binary.
    #[arg(long, default_value = "redis-benchmark")]
    redis_benchmark: String,
    /// Stem of the output file.
    #[arg(long, default_value = "throughput")]
    name: String,
}

#[derive(Args)]
struct MigrationArgs {
    /// Start with FROM nodes and add one at a time up to TO (default 4..8 when no other
    /// scenario flag is given).
    #[arg(long, value_name = "FROM..TO")]
    grow: Option<String>,
    /// Remove the most recently added nodes one at a time from FROM down to TO (after --grow,
    /// --reweight and --lose when combined).
    #[arg(long, value_name = "FROM..TO")]
    shrink: Option<String>,
    /// Change a node's weight (NODE is a name or a node number), e.g. `--reweight 1=3`.
    #[arg(long, value_name = "NODE=W")]
    reweight: Vec<String>,
    /// Lose a node (NODE is a name or a node number), e.g. `--lose 2`.
    #[arg(long, value_name = "NODE")]
    lose: Vec<String>,
    /// Nodes to start with when neither --grow nor --shrink is given.
    #[arg(long, default_value_t = 4)]
    start: usize,
    /// A scenario file (see bench/scenario-example.txt); replaces the flags above.
    #[arg(long, conflicts_with_all = ["grow", "shrink", "reweight", "lose"])]
    scenario: Option<PathBuf>,
    /// Real keys written into the server and evaluated with RING.MOVES ... KEYS.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Write nothing; evaluate with RING.MOVES ... SAMPLE N instead.
    #[arg(long, value_name = "N")]
    sample: Option<u64>,
    /// Prefix of the member keys (`key:` gives key:0, key:1, ...).
    #[arg(long, default_value = "key:")]
    key_prefix: String,
    /// VNODES of the native rings, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10,100,160,1000")]
    vnodes: Vec<u32>,
    /// Also measure these flavours at their default points (comma-separated; `none` for
    /// none).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ketama,groupcache,native-fnv"
    )]
    compat: Vec<String>,
    /// Other schemes, evaluated on the same nodes, weights and members (comma-separated:
    /// jump, rendezvous, maglev, multiprobe, bounded, or all; `none` for none).
    #[arg(long, value_delimiter = ',', default_value = "none")]
    schemes: Vec<String>,
    /// VNODES of the groupcache ring [default: the module's, 50].
    #[arg(long)]
    groupcache_vnodes: Option<u32>,
    /// Commands per pipeline (SET, RING.MGET of this many members, RING.SLOT).
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Leave the member keys and the rings on the server (--url) until their TTL (an hour).
    #[arg(long)]
    keep: bool,
    /// Evaluate the keys that already match the member prefix (--url) as they are, read-only,
    /// instead of writing --keys new ones.
    #[arg(long)]
    reuse_keys: bool,
    /// Stem of the output files.
    #[arg(long, default_value = "migration")]
    name: String,
}

#[derive(Args)]
struct BalanceArgs {
    /// Node counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10,100")]
    nodes: Vec<usize>,
    /// Virtual nodes per node, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,5,10,20,50,100,160,200,500,1000"
    )]
    vnodes: Vec<u32>,
    /// Flavours, comma-separated (ketama has fixed points: one row per node count).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "native,groupcache,ketama,native-fnv"
    )]
    flavours: Vec<String>,
    /// Other schemes (comma-separated: jump, rendezvous, maglev, multiprobe, bounded, or all;
    /// `none` for none), from RING.BALANCE on a native ring of 160 points with the same names.
    #[arg(long, value_delimiter = ',', default_value = "none")]
    schemes: Vec<String>,
    /// Sets of node names each configuration is measured over (set k uses the node numbers
    /// kN+1..kN+N of --names); the table and chart give their mean, lowest and highest.
    #[arg(long, default_value_t = 8)]
    name_sets: usize,
    /// Stem of the output files.
    #[arg(long, default_value = "balance")]
    name: String,
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("ringslot-bench: error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let cli = Cli::parse();
    let g = &cli.global;
    if let Command::Throughput(a) = &cli.command {
        return throughput_cmd(g, a);
    }
    if let Command::Limits(a) = &cli.command {
        return limits_cmd(g, a);
    }
    if let Command::Whatif(a) = &cli.command {
        return whatif_cmd(g, a);
    }
    if let Command::Cluster(a) = &cli.command {
        return cluster_cmd(g, a);
    }
    // The server: ours (stopped when `_own` drops) or the one at --url.
    let (_own, url) = match &g.url {
        Some(url) => (None, url.clone()),
        None => {
            let module = module_path(g.module.as_deref())?;
            eprintln!("starting redis-server with {}", module.display());
            let own = Server::builder()
                .binary(&g.redis_server)
                .module(&module)
                .start()?;
            let url = own.url();
            (Some(own), url)
        }
    };
    let mut con = server::connect(&url)?;
    // Ctrl-C: the keys the run made are deleted before the program exits (a run that dies
    // otherwise leaves them until their TTL).
    ctrlc::set_handler(|| {
        eprintln!("ringslot-bench: interrupted; deleting the keys this run made");
        scratch::interrupted();
        std::process::exit(130);
    })
    .context("install the Ctrl-C handler")?;
    // Our own server is thrown away at the end: no need to clean it.
    let keep = _own.is_some() || matches!(&cli.command, Command::Migration(a) if a.keep);
    let scratch = scratch::Scratch::new(&url, keep);
    let started = Instant::now();
    let md = match &cli.command {
        Command::Migration(a) => migration_cmd(&mut con, &scratch, g, a)?,
        Command::Balance(a) => balance_cmd(&mut con, &scratch, g, a)?,
        Command::Spread(a) => {
            for f in &a.flavours {
                check_flavour(f)?;
            }
            let opts = spread::Options {
                nodes: a.nodes,
                t: a.t,
                views: a.views,
                steps: a.steps,
                members: a.members,
                flavours: a.flavours.clone(),
                seed: a.seed,
                names: g.names.clone(),
            };
            let outcome = spread::run_spread(&mut con, &scratch, &opts)?;
            spread::write_outputs(&g.out, &a.name, &outcome, &opts)?
        }
        Command::Throughput(_) | Command::Limits(_) | Command::Whatif(_) | Command::Cluster(_) => {
            unreachable!("handled above")
        }
    };
    println!("{md}");
    eprintln!(
        "measured in {:.1} s; wrote {}/*.{{md,csv,svg}}",
        started.elapsed().as_secs_f64(),
        g.out.display()
    );
    Ok(())
}

/// The module file: `flag` when given (made absolute: redis-server changes into its `--dir`
/// before it loads modules), else the release build, else the debug build.
fn module_path(flag: Option<&Path>) -> Result<PathBuf> {
    match flag {
        Some(p) if !p.exists() => bail!("the module {} does not exist", p.display()),
        Some(p) => Ok(p.canonicalize().unwrap_or_else(|_| p.to_path_buf())),
        None => find_module(&[Profile::Release, Profile::Debug]).ok_or_else(|| {
            anyhow!(
                "no module at target/release/libringslot.so or target/debug/libringslot.so: \
                 run `make release` (or `cargo build --lib`), or pass --module PATH"
            )
        }),
    }
}

/// The schemes of `--schemes` beyond the rings, the slot table and modulo (which every run
/// measures): `all` for every one, `none` for none.
fn other_schemes(list: &[String]) -> Result<Vec<String>> {
    const OTHERS: [&str; 5] = ["jump", "rendezvous", "maglev", "multiprobe", "bounded"];
    let mut out: Vec<String> = Vec::new();
    for s in list {
        match s.as_str() {
            "none" => {}
            "all" => out.extend(OTHERS.iter().map(|s| s.to_string())),
            s if OTHERS.contains(&s) => out.push(s.to_string()),
            other => bail!(
                "unknown scheme `{other}` ({}, all or none)",
                OTHERS.join(", ")
            ),
        }
    }
    out.dedup();
    Ok(out)
}

fn check_flavour(f: &str) -> Result<()> {
    if ringslot_engine::Flavour::from_name(f.as_bytes()).is_none() {
        let names: Vec<&str> = ringslot_engine::Flavour::ALL
            .iter()
            .map(|f| f.name())
            .collect();
        bail!("unknown flavour `{f}` ({})", names.join(", "));
    }
    Ok(())
}

fn migration_cmd(
    con: &mut redis::Connection,
    scratch: &scratch::Scratch,
    g: &Global,
    a: &MigrationArgs,
) -> Result<String> {
    let scenario = match &a.scenario {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("read {}", path.display()))?;
            scenario::parse(&text, &g.names).with_context(|| path.display().to_string())?
        }
        None => {
            let grow = a.grow.as_deref().map(scenario::parse_range).transpose()?;
            let shrink = a.shrink.as_deref().map(scenario::parse_range).transpose()?;
            let reweight = a
                .reweight
                .iter()
                .map(|s| scenario::parse_reweight(s))
                .collect::<Result<Vec<_>>>()?;
            let nothing =
                grow.is_none() && shrink.is_none() && reweight.is_empty() && a.lose.is_empty();
            let grow = if nothing { Some((4, 8)) } else { grow };
            scenario::from_flags(&g.names, a.start, grow, shrink, &reweight, &a.lose)?
        }
    };
    let mut rings: Vec<RingConf> = a
        .vnodes
        .iter()
        .map(|&v| RingConf {
            flavour: "native".into(),
            vnodes: Some(v),
        })
        .collect();
    for f in a.compat.iter().filter(|f| f.as_str() != "none") {
        check_flavour(f)?;
        rings.push(RingConf {
            flavour: f.clone(),
            vnodes: if f == "groupcache" {
                a.groupcache_vnodes
            } else {
                None
            },
        });
    }
    let members = match a.sample {
        Some(n) => Members::Sample { count: n },
        None => Members::Keys {
            prefix: a.key_prefix.clone(),
            count: a.keys,
        },
    };
    let count = match &members {
        Members::Keys { count, .. } => format!("{count} real keys"),
        Members::Sample { count, .. } => format!("SAMPLE {count}"),
    };
    let opts = migration::Options {
        rings,
        members,
        batch: a.batch.max(1),
        reuse_keys: a.reuse_keys,
        schemes: other_schemes(&a.schemes)?,
    };
    let rows = migration::run_scenario(con, scratch, &scenario, &opts)?;
    let title = format!(
        "Migration cost: {} nodes, {} changes, {count}",
        scenario.start.len(),
        scenario.steps.len()
    );
    migration::write_outputs(&g.out, &a.name, &rows, &title)
}

fn balance_cmd(
    con: &mut redis::Connection,
    scratch: &scratch::Scratch,
    g: &Global,
    a: &BalanceArgs,
) -> Result<String> {
    for f in &a.flavours {
        check_flavour(f)?;
    }
    if a.nodes.is_empty() || a.nodes.contains(&0) {
        bail!("--nodes needs node counts >= 1");
    }
    if a.name_sets == 0 {
        bail!("--name-sets needs at least 1");
    }
    let schemes = other_schemes(&a.schemes)?;
    let opts = balance::Options {
        node_counts: &a.nodes,
        vnodes: &a.vnodes,
        flavours: &a.flavours,
        template: &g.names,
        sets: a.name_sets,
        schemes: &schemes,
    };
    let rows = balance::run_balance(con, scratch, &opts)?;
    let counts: Vec<String> = a.nodes.iter().map(usize::to_string).collect();
    // The node names change the native ring's points: say which ones were used.
    let title = format!(
        "Balance: peak-to-mean share, {} equal nodes named {}",
        counts.join(" and "),
        g.names.replace("{}", "N")
    );
    balance::write_outputs(&g.out, &a.name, &rows, &title)
}

fn throughput_cmd(g: &Global, a: &ThroughputArgs) -> Result<()> {
    if g.url.is_some() {
        bail!("throughput needs its own server (it pins it to a CPU and reloads it): drop --url");
    }
    if a.rounds == 0 || a.nodes == 0 || a.rings < 2 {
        bail!("--rounds and --nodes must be at least 1, --rings at least 2");
    }
    // The module is copied so that a rebuild during the run cannot change what is measured.
    let module = module_path(g.module.as_deref())?;
    let copy_dir = tempfile::tempdir().context("temp dir")?;
    let copy = copy_dir.path().join("libringslot.so");
    std::fs::copy(&module, &copy).with_context(|| format!("copy {}", module.display()))?;
    eprintln!("starting redis-server with {}", module.display());
    let mut builder = Server::builder().binary(&g.redis_server).module(&copy);
    if !a.no_pin {
        builder = builder.pin_cpu(0);
    }
    let own = builder.start()?;
    let mut con = server::connect(&own.url())?;
    let opts = throughput::Options {
        rounds: a.rounds,
        clients: a.clients,
        pipeline: a.pipeline,
        n_single: a.n_single,
        n_pipelined: a.n_pipelined,
        n_mget: a.n_mget,
        n_mget_pipelined: a.n_mget_pipelined,
        reloads: a.reloads,
        nodes: a.nodes,
        rings: a.rings,
        mget_members: 100,
        keyspace: 100_000,
        pin: !a.no_pin,
        redis_benchmark: a.redis_benchmark.clone(),
    };
    let mut md = throughput::measure(&mut con, own.port, &own.dir.path().join("dump.rdb"), &opts)?;
    md.insert_str(
        md.find("\n\n").map_or(0, |i| i + 2),
        &format!("- module `{}`\n", module.display()),
    );
    publish(g, &a.name, &md)
}

/// A temporary server of the program's own, for a subcommand that may not run on `--url`
/// (`why` says what it does to the server); stopped when dropped.
fn own_server(g: &Global, command: &str, why: &str) -> Result<Server> {
    if g.url.is_some() {
        bail!("{command} needs its own server ({why}): drop --url");
    }
    let module = module_path(g.module.as_deref())?;
    eprintln!("starting redis-server with {}", module.display());
    Ok(Server::builder()
        .binary(&g.redis_server)
        .module(&module)
        .start()?)
}

/// Writes a subcommand's Markdown report to `<out>/<name>.md` and prints it.
fn publish(g: &Global, name: &str, md: &str) -> Result<()> {
    let path = report::write(&g.out, &format!("{name}.md"), md)?;
    println!("{md}");
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn limits_cmd(g: &Global, a: &LimitsArgs) -> Result<()> {
    let own = own_server(g, "limits", "it flushes it and changes its configuration")?;
    let mut con = server::connect(&own.url())?;
    let opts = limits::Options {
        bulk_nodes: a.bulk_nodes,
        bulk_vnodes: a.bulk_vnodes,
        aof_nodes: a.aof_nodes.clone(),
        huge_nodes: a.huge_nodes,
        huge_vnodes: a.huge_vnodes,
        name_bytes: a.name_bytes,
        repeat: a.repeat,
    };
    let md = limits::measure(&mut con, &own.url(), &opts)?;
    publish(g, &a.name, &md)
}

fn whatif_cmd(g: &Global, a: &WhatifArgs) -> Result<()> {
    let own = own_server(g, "whatif", "it flushes it and fills it with keys")?;
    let mut con = server::connect(&own.url())?;
    let opts = whatif::Options {
        keys: a.keys.clone(),
        nodes: a.nodes,
        inline_up_to: a.inline_up_to,
        baseline_secs: a.baseline_secs,
    };
    let md = whatif::measure(&mut con, &own.url(), &opts)?;
    publish(g, &a.name, &md)
}

fn cluster_cmd(g: &Global, a: &ClusterArgs) -> Result<()> {
    for f in &a.flavours {
        check_flavour(f)?;
    }
    if a.chunk == 0 {
        bail!("--chunk needs at least 1 slot");
    }
    let opts = cluster::Options {
        flavours: a.flavours.clone(),
        chunk: a.chunk,
        ttl_secs: a.ttl,
        scan_limit: a.scan_limit,
        pipeline: a.pipeline,
    };
    // Ctrl-C: the workers stop at their next chunk and the ring copies are deleted; the
    // servers of a local run are killed at once. A second Ctrl-C exits.
    ctrlc::set_handler(|| {
        if cluster::INTERRUPTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(130);
        }
        let pids: Vec<String> = cluster::CHILDREN
            .lock()
            .map(|c| c.iter().map(u32::to_string).collect())
            .unwrap_or_default();
        if !pids.is_empty() {
            eprintln!("ringslot-bench: interrupted; stopping the servers of the local cluster");
            let _ = std::process::Command::new("kill")
                .arg("-9")
                .args(&pids)
                .status();
            std::process::exit(130);
        }
        eprintln!("ringslot-bench: interrupted; removing the ring copies");
    })
    .context("install the Ctrl-C handler")?;
    let outcome = match &g.url {
        Some(url) => {
            let change = match (&a.add, &a.del) {
                (Some(node), None) => cluster::Change::Add {
                    node: node.clone(),
                    weight: a.weight,
                },
                (None, Some(node)) => cluster::Change::Del { node: node.clone() },
                _ => bail!(
                    "with --url, name the change: --add ip:port [--weight w] or --del ip:port"
                ),
            };
            cluster::predict_url(url, change, &opts)?
        }
        None => {
            if a.add.is_some() || a.del.is_some() {
                bail!("--add and --del name a change on a live cluster (--url); a local run adds a master, or removes one with --remove");
            }
            let module = module_path(g.module.as_deref())?;
            let binary = g.redis_server.clone();
            let builder = move || Server::builder().binary(&binary).module(&module);
            cluster::local(a.local, a.keys, a.remove, &builder, &opts)?
        }
    };
    let md = cluster::write_outputs(&g.out, &a.name, &outcome)?;
    println!("{md}");
    eprintln!("wrote {}/{}.{{md,csv,svg}}", g.out.display(), a.name);
    Ok(())
}
