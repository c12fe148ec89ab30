//! `throughput`: requests per second of the RING.* read commands against plain `GET` and
//! `PING` (redis-benchmark, with and without pipelining, interleaved rounds, medians), the
//! server's CPU per request, `MEMORY USAGE` per ring point, and the time of `SAVE` and
//! `DEBUG RELOAD` with many rings. Needs its own server (the benchmark pins it to CPU 0 and
//! reloads it); redis-benchmark runs on CPU 1. With `--before-module`, a second server loads
//! an earlier build of the module (also on CPU 0, measured in the same rounds, alternating
//! with the first), and the report adds before/after ratios with their spread over rounds.

use crate::common::{median, Global};
use crate::report::{fixed, Table};
use crate::server;
use crate::server::{int, query, text};
use anyhow::{bail, Context, Result};
use ringslot_harness::redis::{Connection, Value};
use ringslot_harness::Server;
use ringslot_tool::reply::ring::RingInfo;
use std::collections::HashMap;
use std::process::Command;
use std::time::Instant;

/// `ringslot-bench throughput`.
#[derive(clap::Args, Debug)]
pub struct Args {
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
    /// An earlier build of the module (e.g. `make bench-throughput-ab` builds the commit
    /// BEFORE) for a second server measured in the same rounds: before/after ratios.
    #[arg(long)]
    before_module: Option<std::path::PathBuf>,
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

/// Runs `throughput` on a server of its own (pinned to CPU 0, redis-benchmark to CPU 1) and
/// writes the report.
pub fn run(g: &Global, a: &Args) -> Result<()> {
    if g.url.is_some() {
        bail!("throughput needs its own server (it pins it to a CPU and reloads it): drop --url");
    }
    if a.rounds == 0 || a.nodes == 0 || a.rings < 2 {
        bail!("--rounds and --nodes must be at least 1, --rings at least 2");
    }
    // The module is copied so that a rebuild during the run cannot change what is measured.
    let module = g.module_path()?;
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
    // The earlier build, on a server of its own on the same CPU.
    let before = match &a.before_module {
        Some(path) => {
            let copy = copy_dir.path().join("libringslot-before.so");
            std::fs::copy(path, &copy).with_context(|| format!("copy {}", path.display()))?;
            eprintln!("starting a second redis-server with {}", path.display());
            let mut builder = Server::builder().binary(&g.redis_server).module(&copy);
            if !a.no_pin {
                builder = builder.pin_cpu(0);
            }
            let server = builder.start()?;
            let con = server::connect(&server.url())?;
            Some((server, con, path.display().to_string()))
        }
        None => None,
    };
    let opts = Options {
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
    let before_target = match before {
        Some((ref server, con, ref path)) => Some(Target {
            con,
            port: server.port,
            label: path.clone(),
        }),
        None => None,
    };
    let mut md = measure(
        &mut con,
        own.port,
        &own.dir.path().join("dump.rdb"),
        &opts,
        before_target,
    )?;
    md.insert_str(
        md.find("\n\n").map_or(0, |i| i + 2),
        &format!("- module `{}`\n", module.display()),
    );
    g.publish(&a.name, &md)
}

/// What a throughput run measures.
#[derive(Debug, Clone)]
pub struct Options {
    /// Interleaved rounds; each command's figure is its median.
    pub rounds: usize,
    /// redis-benchmark connections (`-c`).
    pub clients: usize,
    /// Commands per pipeline in the pipelined runs (`-P`).
    pub pipeline: usize,
    /// Requests per run, not pipelined.
    pub n_single: usize,
    /// Requests per run, pipelined.
    pub n_pipelined: usize,
    /// `RING.MGET` requests per run, not pipelined.
    pub n_mget: usize,
    /// `RING.MGET` requests per run, pipelined.
    pub n_mget_pipelined: usize,
    /// `DEBUG RELOAD`s timed.
    pub reloads: usize,
    /// Nodes of the measured ring.
    pub nodes: usize,
    /// Rings saved and reloaded (the first and its copies).
    pub rings: usize,
    /// Members per `RING.MGET`.
    pub mget_members: usize,
    /// Distinct member names (`-r`).
    pub keyspace: usize,
    /// Run redis-benchmark on CPU 1 (the server is on CPU 0).
    pub pin: bool,
    /// The redis-benchmark binary.
    pub redis_benchmark: String,
}

/// The measured commands: a name and the command line (`__rand_int__` is redis-benchmark's
/// placeholder). `RING.GET-missing` (no such key) and `RING.GET-one` (a one-node ring that
/// stays in the CPU cache) split what a `RING.GET` costs: the module call, then the member's
/// hash and the lookup, then the cache misses of a big ring.
fn commands(mget_members: usize) -> Vec<(&'static str, Vec<String>)> {
    let words = |line: &str| line.split(' ').map(str::to_string).collect::<Vec<_>>();
    let mut mget = words("RING.MGET ring");
    mget.extend((0..mget_members).map(|_| "member:__rand_int__".to_string()));
    vec![
        ("PING", words("PING")),
        ("GET", words("GET plain")),
        (
            "RING.GET-missing",
            words("RING.GET missing member:__rand_int__"),
        ),
        ("RING.GET-one", words("RING.GET one member:__rand_int__")),
        ("RING.GET", words("RING.GET ring member:__rand_int__")),
        ("RING.SLOT", words("RING.SLOT ring member:__rand_int__")),
        ("RING.MGET", mget),
    ]
}

/// Server CPU seconds so far (user + system, `INFO cpu`).
fn server_cpu(con: &mut Connection) -> Result<f64> {
    let info = text(&query(con, &["INFO", "cpu"])?).unwrap_or_default();
    Ok(info
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| *k == "used_cpu_user" || *k == "used_cpu_sys")
        .filter_map(|(_, v)| v.trim().parse::<f64>().ok())
        .sum())
}

/// A field of `INFO` (`used_memory`).
fn info_field(con: &mut Connection, section: &str, name: &str) -> Result<f64> {
    let info = text(&query(con, &["INFO", section])?).unwrap_or_default();
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.trim().parse().ok())
        .with_context(|| format!("INFO {section} has no {name}"))
}

/// One measurement: requests per second and server CPU microseconds per request.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    rps: f64,
    cpu_us: f64,
}

struct Bench<'a> {
    opts: &'a Options,
    port: u16,
}

/// A second server measured in the same rounds (an earlier build of the module).
pub struct Target {
    /// A connection to it.
    pub con: Connection,
    /// Its port.
    pub port: u16,
    /// What it runs (the module's path), for the report.
    pub label: String,
}

/// Creates the measured rings and key on a server: `ring` (`nodes` nodes), `one` (one node)
/// and the string `plain`; returns the ring's points and VNODES.
fn prepare(con: &mut Connection, opts: &Options) -> Result<(f64, i64)> {
    let nodes: Vec<String> = (0..opts.nodes)
        .map(|i| format!("10.0.{}.{}:6379", i / 250, i % 250 + 1))
        .collect();
    let mut add = vec!["RING.ADD".to_string(), "ring".to_string()];
    add.extend(nodes.iter().cloned());
    if int(&query(con, &add)?)? != opts.nodes as i64 {
        bail!("RING.ADD ring did not add {} nodes", opts.nodes);
    }
    query(con, &["SET", "plain", "value"])?;
    query(con, &["RING.ADD", "one", "10.0.0.1:6379"])?;
    let info = RingInfo::read(&query(con, &["RING.INFO", "ring"])?)?;
    Ok((info.points as f64, info.vnodes as i64))
}

impl Bench<'_> {
    /// One redis-benchmark run of `line` with `n` requests at `pipeline`.
    fn run(
        &self,
        con: &mut Connection,
        line: &[String],
        n: usize,
        pipeline: usize,
    ) -> Result<Sample> {
        let cpu0 = server_cpu(con)?;
        let mut command = if self.opts.pin && can_pin() {
            let mut c = Command::new("taskset");
            c.args(["-c", "1"]).arg(&self.opts.redis_benchmark);
            c
        } else {
            Command::new(&self.opts.redis_benchmark)
        };
        let out = command
            .args(["-p", &self.port.to_string()])
            .args(["-c", &self.opts.clients.to_string()])
            .args(["-P", &pipeline.to_string()])
            .args(["-n", &n.to_string()])
            .args(["-r", &self.opts.keyspace.to_string()])
            .arg("--csv")
            .args(line)
            .output()
            .with_context(|| format!("cannot run {} (make deps)", self.opts.redis_benchmark))?;
        let cpu1 = server_cpu(con)?;
        let csv = String::from_utf8_lossy(&out.stdout);
        // The last line: "test","rps","avg_latency_ms",...
        let rps = csv
            .lines()
            .last()
            .and_then(|l| l.split("\",\"").nth(1))
            .and_then(|v| v.trim_matches('"').parse::<f64>().ok())
            .with_context(|| {
                format!(
                    "no figure from redis-benchmark for `{}`: {csv}{}",
                    line.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                )
            })?;
        Ok(Sample {
            rps,
            cpu_us: (cpu1 - cpu0) * 1e6 / n as f64,
        })
    }

    fn requests(&self, name: &str, pipeline: usize) -> usize {
        match (name == "RING.MGET", pipeline > 1) {
            (true, false) => self.opts.n_mget,
            (true, true) => self.opts.n_mget_pipelined,
            (false, false) => self.opts.n_single,
            (false, true) => self.opts.n_pipelined,
        }
    }
}

/// Whether `taskset` can pin a process here.
fn can_pin() -> bool {
    std::thread::available_parallelism().map_or(1, usize::from) >= 2
        && Command::new("taskset")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
}

/// Runs the whole measurement on the server at `port` (ours, empty, with `DEBUG` enabled and
/// its RDB in `rdb`) and returns the Markdown report.
pub fn measure(
    con: &mut Connection,
    port: u16,
    rdb: &std::path::Path,
    opts: &Options,
    mut earlier: Option<Target>,
) -> Result<String> {
    let (points, vnodes) = prepare(con, opts)?;
    if let Some(b) = earlier.as_mut() {
        if prepare(&mut b.con, opts)?.0 != points {
            bail!("the server with {} built another ring", b.label);
        }
    }

    let cmds = commands(opts.mget_members);
    // Every command must answer without an error before it is timed (redis-benchmark would
    // count error replies as requests).
    for (name, line) in &cmds {
        let line: Vec<String> = line
            .iter()
            .map(|w| w.replace("__rand_int__", "000000000042"))
            .collect();
        query(con, &line).with_context(|| format!("{name} before timing"))?;
        if let Some(b) = earlier.as_mut() {
            query(&mut b.con, &line).with_context(|| format!("{name} before timing"))?;
        }
    }
    let bench = Bench { opts, port };
    let bench_before = earlier.as_ref().map(|b| Bench { opts, port: b.port });
    let pipelines = [1, opts.pipeline];
    // Warm-up: connections, caches, the CPU's clock.
    for (_, line) in &cmds {
        bench.run(con, line, 2000.min(opts.n_single), opts.pipeline)?;
        if let (Some(bb), Some(b)) = (&bench_before, earlier.as_mut()) {
            bb.run(&mut b.con, line, 2000.min(opts.n_single), opts.pipeline)?;
        }
    }
    let started = Instant::now();
    let mut samples: HashMap<(&str, usize), Vec<Sample>> = HashMap::new();
    let mut samples_before: HashMap<(&str, usize), Vec<Sample>> = HashMap::new();
    for round in 0..opts.rounds {
        eprintln!("throughput: round {}/{} ...", round + 1, opts.rounds);
        for &pipeline in &pipelines {
            // Rotate the order every round so that no command always runs first or last,
            // and alternate which server goes first.
            for k in 0..cmds.len() {
                let (name, line) = &cmds[(k + round) % cmds.len()];
                let n = bench.requests(name, pipeline);
                let before_first = round % 2 == 1;
                let mut run_before = |samples_before: &mut HashMap<(&str, usize), Vec<Sample>>| {
                    if let (Some(bb), Some(b)) = (&bench_before, earlier.as_mut()) {
                        let s = bb.run(&mut b.con, line, n, pipeline)?;
                        samples_before.entry((name, pipeline)).or_default().push(s);
                    }
                    anyhow::Ok(())
                };
                if before_first {
                    run_before(&mut samples_before)?;
                }
                let s = bench.run(con, line, n, pipeline)?;
                samples.entry((name, pipeline)).or_default().push(s);
                if !before_first {
                    run_before(&mut samples_before)?;
                }
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let rps = |name: &str, p: usize| -> Vec<f64> {
        samples
            .get(&(name, p))
            .map_or(Vec::new(), |v| v.iter().map(|s| s.rps).collect())
    };
    let med_rps = |name: &str, p: usize| median(&rps(name, p));
    let med_cpu = |name: &str, p: usize| {
        median(
            &samples
                .get(&(name, p))
                .map_or(Vec::new(), |v| v.iter().map(|s| s.cpu_us).collect()),
        )
    };
    // The median over rounds of the ratio to GET in the same round.
    let ratio = |name: &str, p: usize| {
        let ratios: Vec<f64> = rps(name, p)
            .iter()
            .zip(rps("GET", p))
            .map(|(a, b)| a / b)
            .collect();
        median(&ratios)
    };

    // Memory of one ring, then of copies of it (the allocator's view).
    let memory_usage = int(&query(con, &["MEMORY", "USAGE", "ring"])?)? as f64;
    let memory_usage_before = match earlier.as_mut() {
        Some(b) => Some(int(&query(&mut b.con, &["MEMORY", "USAGE", "ring"])?)? as f64),
        None => None,
    };
    let memory_bytes = RingInfo::read(&query(con, &["RING.INFO", "ring"])?)?.memory_bytes;
    let table_bytes = 16384.0 * 4.0;
    let used_before = info_field(con, "memory", "used_memory")?;
    for r in 2..=opts.rings {
        query(con, &["COPY", "ring", &format!("ring:{r}")])?;
    }
    let used_after = info_field(con, "memory", "used_memory")?;
    let alloc_per_ring = (used_after - used_before) / (opts.rings.max(2) - 1) as f64;
    let probe = |con: &mut Connection| -> Result<Value> {
        query(
            con,
            &[
                "RING.MGET",
                &format!("ring:{}", opts.rings),
                "member:1",
                "member:2",
                "member:3",
            ],
        )
    };
    let before = probe(con)?;
    let t = Instant::now();
    query(con, &["SAVE"])?;
    let save_ms = t.elapsed().as_secs_f64() * 1e3;
    let rdb_bytes = std::fs::metadata(rdb).map_or(0, |m| m.len());
    let mut reloads = Vec::new();
    for _ in 0..opts.reloads {
        let t = Instant::now();
        query(con, &["DEBUG", "RELOAD"])?;
        reloads.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let reload_ms = median(&reloads);
    if probe(con)? != before || int(&query(con, &["DBSIZE"])?)? != opts.rings as i64 + 2 {
        bail!("the rings differ after DEBUG RELOAD");
    }

    // The report.
    let p = opts.pipeline;
    let mut md = String::from("# ringslot throughput and memory\n\n");
    md.push_str(&format!(
        "- ring: {} nodes x {vnodes} vnodes = {points} points (native); members \
         `member:__rand_int__` over {} values\n- redis-benchmark -c {}, not pipelined (-n {}; \
         RING.MGET {}) and -P {p} (-n {}; RING.MGET {}); median of {} interleaved rounds \
         ({seconds:.0} s); {}\n- {} CPU(s), load average at the end {}\n\n",
        opts.nodes,
        opts.keyspace,
        opts.clients,
        opts.n_single,
        opts.n_mget,
        opts.n_pipelined,
        opts.n_mget_pipelined,
        opts.rounds,
        if opts.pin && can_pin() {
            "redis-server pinned to CPU 0, redis-benchmark to CPU 1"
        } else {
            "not pinned"
        },
        std::thread::available_parallelism().map_or(1, usize::from),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split(' ')
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    ));
    md.push_str(
        "## Requests per second\n\n\"vs GET\" is the median over rounds of the ratio to GET in \
         the same round; \"server µs\" is redis-server CPU time (user + system, `INFO cpu`) per \
         request: what the server pays for one command whether or not the benchmark client is \
         the bottleneck.\n\n",
    );
    let p_col = format!("-P {p}");
    let mut t = Table::new(&[
        "command",
        "not pipelined",
        "vs GET",
        "server µs",
        &p_col,
        "vs GET",
        "server µs",
    ]);
    for (name, line) in &cmds {
        let label = if *name == "RING.MGET" {
            format!(
                "`RING.MGET ring member:__rand_int__ ...` ({} members)",
                opts.mget_members
            )
        } else {
            format!("`{}`", line.join(" "))
        };
        t.push(vec![
            label,
            fixed(med_rps(name, 1), 0),
            fixed(ratio(name, 1), 2),
            fixed(med_cpu(name, 1), 3),
            fixed(med_rps(name, p), 0),
            fixed(ratio(name, p), 2),
            fixed(med_cpu(name, p), 3),
        ]);
    }
    let m = opts.mget_members as f64;
    let lookups = |q: usize| med_rps("RING.MGET", q) * m;
    t.push(vec![
        "RING.MGET lookups/s (members x req/s)".into(),
        fixed(lookups(1), 0),
        fixed(lookups(1) / med_rps("GET", 1), 2),
        fixed(med_cpu("RING.MGET", 1) / m, 3),
        fixed(lookups(p), 0),
        fixed(lookups(p) / med_rps("GET", p), 2),
        fixed(med_cpu("RING.MGET", p) / m, 3),
    ]);
    md.push_str(&t.markdown());
    md.push_str("\nEvery run (req/s, in round order):\n\n");
    for (name, _) in &cmds {
        let list = |q: usize| {
            rps(name, q)
                .iter()
                .map(|r| fixed(*r, 0))
                .collect::<Vec<_>>()
                .join(" ")
        };
        md.push_str(&format!(
            "- {name}: not pipelined {}; -P {p} {}\n",
            list(1),
            list(p)
        ));
    }
    let ns = |a: f64, b: f64| format!("{:+.0}", (a - b) * 1000.0);
    md.push_str(&format!(
        "\nServer CPU per RING.GET over GET (medians): not pipelined {:.2}x, -P {p} {:.2}x.\n\n\
         Where a pipelined RING.GET's server time goes, over GET's (-P {p}, medians, ns per \
         request):\n\n\
         - module call with one more argument, key missing (RING.GET-missing - GET): {}\n\
         - member hash, lookup and reply on a ring in cache (RING.GET-one - RING.GET-missing): {}\n\
         - cache misses of a {points}-point ring (RING.GET - RING.GET-one): {}\n\n",
        med_cpu("RING.GET", 1) / med_cpu("GET", 1),
        med_cpu("RING.GET", p) / med_cpu("GET", p),
        ns(med_cpu("RING.GET-missing", p), med_cpu("GET", p)),
        ns(med_cpu("RING.GET-one", p), med_cpu("RING.GET-missing", p)),
        ns(med_cpu("RING.GET", p), med_cpu("RING.GET-one", p)),
    ));
    if let Some(b) = &earlier {
        md.push_str(&before_after(
            &samples_before,
            &samples,
            &b.label,
            opts,
            points,
            memory_usage_before.unwrap_or(0.0),
            memory_usage,
        ));
    }
    md.push_str("## Memory\n\n");
    let budget = 16.0 * points + table_bytes;
    let mut t = Table::new(&["figure", "bytes", "per point"]);
    t.push(vec![
        "`MEMORY USAGE ring`".into(),
        fixed(memory_usage, 0),
        fixed(memory_usage / points, 2),
    ]);
    t.push(vec![
        "same, less the 64 KiB slot table".into(),
        fixed(memory_usage - table_bytes, 0),
        fixed((memory_usage - table_bytes) / points, 2),
    ]);
    t.push(vec![
        "`RING.INFO ring` memory_bytes".into(),
        memory_bytes.to_string(),
        "-".into(),
    ]);
    t.push(vec![
        format!(
            "used_memory growth per ring (COPY x {}, allocator's view)",
            opts.rings - 1
        ),
        fixed(alloc_per_ring, 0),
        fixed(alloc_per_ring / points, 2),
    ]);
    t.push(vec![
        "budget: 16 x points + 65536".into(),
        fixed(budget, 0),
        "-".into(),
    ]);
    md.push_str(&t.markdown());
    let total_points = points * opts.rings as f64;
    md.push_str(&format!(
        "\n## DEBUG RELOAD with {} rings ({total_points} points)\n\n\
         - `SAVE`: {save_ms:.1} ms (RDB {rdb_bytes} bytes)\n\
         - `DEBUG RELOAD` (save + empty + load): median {reload_ms:.1} ms over {} ({} ms)\n\
         - load alone (reload - save), about {:.1} ms, {:.1} ms per ring\n\n",
        opts.rings,
        reloads.len(),
        reloads
            .iter()
            .map(|r| fixed(*r, 1))
            .collect::<Vec<_>>()
            .join(" "),
        reload_ms - save_ms,
        (reload_ms - save_ms) / opts.rings as f64,
    ));
    md.push_str("## Targets\n\n");
    let verdict = |ok: bool| if ok { "met" } else { "**missed**" }.to_string();
    let mut t = Table::new(&["target", "figure", "verdict"]);
    for q in pipelines {
        let r = ratio("RING.GET", q);
        let label = if q == 1 {
            "not pipelined".to_string()
        } else {
            format!("-P {q}")
        };
        t.push(vec![
            format!("RING.GET >= 0.9 x GET, {label}"),
            fixed(r, 2),
            verdict(r >= 0.9),
        ]);
    }
    t.push(vec![
        "MEMORY USAGE <= 16 B/point + 64 KiB".into(),
        format!(
            "{memory_usage:.0} <= {budget:.0} ({:.2} B/point)",
            (memory_usage - table_bytes) / points
        ),
        verdict(memory_usage <= budget),
    ]);
    t.push(vec![
        "allocator bytes per ring <= 16 B/point + 64 KiB".into(),
        format!("{alloc_per_ring:.0} <= {budget:.0}"),
        verdict(alloc_per_ring <= budget),
    ]);
    md.push_str(&t.markdown());
    Ok(md)
}

/// The before/after section: for the earlier build (`before`) and this one (`after`),
/// measured in the same rounds, the pipelined `RING.GET` against the module floor (a
/// `RING.GET` of a missing key) and against `GET`, the split of its server time, and memory;
/// ratios are medians over rounds of the ratio in the same round, with their range.
fn before_after(
    before: &HashMap<(&str, usize), Vec<Sample>>,
    after: &HashMap<(&str, usize), Vec<Sample>>,
    label: &str,
    opts: &Options,
    points: f64,
    memory_before: f64,
    memory_after: f64,
) -> String {
    let p = opts.pipeline;
    let table_bytes = 16384.0 * 4.0;
    let get = |s: &HashMap<(&str, usize), Vec<Sample>>, name: &str, f: fn(&Sample) -> f64| {
        s.get(&(name, p))
            .map_or(Vec::new(), |v| v.iter().map(f).collect::<Vec<f64>>())
    };
    // Per round, a / b of requests per second; median and range.
    let ratio = |s: &HashMap<(&str, usize), Vec<Sample>>, a: &str, b: &str| -> Vec<f64> {
        get(s, a, |x| x.rps)
            .iter()
            .zip(get(s, b, |x| x.rps))
            .map(|(x, y)| x / y)
            .collect()
    };
    // Per round, the server CPU of a minus that of b, in ns per request.
    let split = |s: &HashMap<(&str, usize), Vec<Sample>>, a: &str, b: &str| -> Vec<f64> {
        get(s, a, |x| x.cpu_us)
            .iter()
            .zip(get(s, b, |x| x.cpu_us))
            .map(|(x, y)| (x - y) * 1000.0)
            .collect()
    };
    let spread = |v: &[f64], digits: usize| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!(
            "{} ({}..{})",
            fixed(median(v), digits),
            fixed(lo, digits),
            fixed(hi, digits)
        )
    };
    let floor = |s| ratio(s, "RING.GET", "RING.GET-missing");
    let misses = |s| split(s, "RING.GET", "RING.GET-one");
    let mut md = format!(
        "## Before and after, side by side (-P {p})\n\nBefore: `{label}`, on a second \
         redis-server on the same CPU, measured in the same rounds (the servers alternate). \
         Figures are medians over the {} rounds, with the range in brackets; ratios are taken \
         within a round.\n\n",
        opts.rounds
    );
    let mut t = Table::new(&["figure", "before", "after"]);
    let rows: [(&str, Vec<f64>, Vec<f64>, usize); 6] = [
        (
            "RING.GET / RING.GET of a missing key (req/s; the module floor)",
            floor(before),
            floor(after),
            2,
        ),
        (
            "RING.GET / GET (req/s)",
            ratio(before, "RING.GET", "GET"),
            ratio(after, "RING.GET", "GET"),
            2,
        ),
        (
            "module call (RING.GET-missing - GET), server ns",
            split(before, "RING.GET-missing", "GET"),
            split(after, "RING.GET-missing", "GET"),
            0,
        ),
        (
            "hash, lookup, reply in cache (RING.GET-one - RING.GET-missing), server ns",
            split(before, "RING.GET-one", "RING.GET-missing"),
            split(after, "RING.GET-one", "RING.GET-missing"),
            0,
        ),
        (
            "cache misses of the big ring (RING.GET - RING.GET-one), server ns",
            misses(before),
            misses(after),
            0,
        ),
        (
            "RING.MGET of 100 / GET (req/s)",
            ratio(before, "RING.MGET", "GET"),
            ratio(after, "RING.MGET", "GET"),
            3,
        ),
    ];
    for (name, b, a, digits) in &rows {
        t.push(vec![
            name.to_string(),
            spread(b, *digits),
            spread(a, *digits),
        ]);
    }
    t.push(vec![
        "`MEMORY USAGE ring` per point, less the slot table".into(),
        fixed((memory_before - table_bytes) / points, 2),
        fixed((memory_after - table_bytes) / points, 2),
    ]);
    md.push_str(&t.markdown());
    let verdict = |ok: bool| if ok { "met" } else { "**missed**" }.to_string();
    let (floor_after, miss_before, miss_after) = (
        median(&floor(after)),
        median(&misses(before)),
        median(&misses(after)),
    );
    let mut t = Table::new(&["target", "figure", "verdict"]);
    t.push(vec![
        "pipelined RING.GET within 10% of the module floor".into(),
        fixed(floor_after, 2),
        verdict(floor_after >= 0.9),
    ]);
    t.push(vec![
        "cache-miss share halved or better".into(),
        format!("{miss_before:.0} -> {miss_after:.0} ns"),
        if miss_before > 0.0 {
            verdict(miss_after <= miss_before / 2.0)
        } else {
            "no share to halve (before <= 0: noise)".into()
        },
    ]);
    md.push('\n');
    md.push_str(&t.markdown());
    md.push('\n');
    md
}
