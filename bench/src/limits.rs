//! `limits`: how long RING.* commands hold Redis' main thread, measured on the program's own
//! server as Redis itself times them (`SLOWLOG`, microseconds of execution): the findings of a
//! reliability trial, each beside the figure it measured before the fix, and the longest hold
//! of every command at the default limits.

use crate::common::Global;
use crate::report::{fixed, Table};
use crate::server;
use crate::server::{int, query, text};
use anyhow::{bail, Context, Result};
use ringslot_engine::cost::{self, Source};
use ringslot_engine::{Change, Flavour, Limits, Scheme, SchemeParams, Topology};
use ringslot_harness::redis::{Connection, Value};
use ringslot_tool::reply::ring::{Moves, RingInfo};
use std::time::{Duration, Instant};

/// The most a read-only command may hold Redis' main thread at the default limits (issue 18),
/// in milliseconds.
const READ_TARGET_MS: f64 = 50.0;

/// `ringslot-bench limits`.
#[derive(clap::Args, Debug)]
pub struct Args {
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

/// Runs `limits` on a server of its own (it flushes it and changes its configuration) and
/// writes the report.
pub fn run(g: &Global, a: &Args) -> Result<()> {
    let own = g.own_server("limits", "it flushes it and changes its configuration")?;
    let mut con = server::connect(&own.url())?;
    let opts = Options {
        bulk_nodes: a.bulk_nodes,
        bulk_vnodes: a.bulk_vnodes,
        aof_nodes: a.aof_nodes.clone(),
        huge_nodes: a.huge_nodes,
        huge_vnodes: a.huge_vnodes,
        name_bytes: a.name_bytes,
        repeat: a.repeat,
    };
    let md = measure(&mut con, &own.url(), &opts)?;
    g.publish(&a.name, &md)
}

/// What a limits run measures.
#[derive(Debug, Clone)]
pub struct Options {
    /// Nodes of the bulk RING.ADD / RING.DEL rows (the trial: 100000).
    pub bulk_nodes: usize,
    /// VNODES of the bulk rows (the trial: 100).
    pub bulk_vnodes: u32,
    /// Node counts of the AOF replay rows (the trial: 2000 and 5000).
    pub aof_nodes: Vec<usize>,
    /// Nodes and VNODES of the what-if ring (the trial: 10M points).
    pub huge_nodes: usize,
    pub huge_vnodes: u32,
    /// Bytes of the long ring name (the trial: 64 KiB).
    pub name_bytes: usize,
    /// Repetitions of the short measurements (the median is reported).
    pub repeat: usize,
}

/// Runs `args` and returns how long Redis held its main thread for it, in milliseconds,
/// from the newest `SLOWLOG` entry of that command.
fn held<S: AsRef<str>>(con: &mut Connection, args: &[S]) -> Result<f64> {
    query(con, args)?;
    slowlog_ms(con, args[0].as_ref())
}

/// The duration of the newest `SLOWLOG` entry of `command`, in milliseconds.
fn slowlog_ms(con: &mut Connection, command: &str) -> Result<f64> {
    let log = query(con, &["SLOWLOG", "GET", "20"])?;
    for entry in crate::server::items(&log)? {
        let e = crate::server::items(entry)?;
        let (Some(us), Some(argv)) = (e.get(2), e.get(3)) else {
            continue;
        };
        let name = crate::server::items(argv)?
            .first()
            .and_then(text)
            .unwrap_or_default();
        if name.eq_ignore_ascii_case(command) {
            return Ok(int(us)? as f64 / 1000.0);
        }
    }
    bail!("no SLOWLOG entry for {command}")
}

/// The median over `n` runs of `held(args)`.
fn median_held(con: &mut Connection, args: &[String], n: usize) -> Result<f64> {
    let mut v = Vec::new();
    for _ in 0..n.max(1) {
        v.push(held(con, args)?);
    }
    Ok(crate::common::median(&v))
}

fn nodes(prefix: &str, count: usize, distinct_hosts: bool) -> Vec<String> {
    (0..count)
        .map(|i| {
            if distinct_hosts {
                format!("{prefix}.{}.{}.{}:6379", i / 62500, i / 250 % 250, i % 250)
            } else {
                format!("10.0.0.1:{}", 10000 + i)
            }
        })
        .collect()
}

fn add_args(key: &str, names: &[String]) -> Vec<String> {
    let mut args = vec!["RING.ADD".to_string(), key.to_string()];
    args.extend(names.iter().cloned());
    args
}

fn wait_for(con: &mut Connection, section: &str, busy: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let info = text(&query(con, &["INFO", section])?).unwrap_or_default();
        if !info.lines().any(|l| l == busy) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{busy} for two minutes");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wall<F: FnOnce() -> Result<Value>>(f: F) -> Result<f64> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

fn verdict(ok: bool) -> String {
    if ok { "met" } else { "**missed**" }.to_string()
}

/// Runs every measurement on the server behind `con` at `url` (ours: empty, `DEBUG` enabled)
/// and returns the Markdown report.
pub fn measure(con: &mut Connection, url: &str, opts: &Options) -> Result<String> {
    query(con, &["CONFIG", "SET", "slowlog-log-slower-than", "0"])?;
    query(con, &["CONFIG", "SET", "slowlog-max-len", "1000"])?;
    let mut t = Table::new(&["finding", "before", "after", "target", "verdict"]);

    // 1. ACL: a user limited to ~app:* walks the keyspace.
    eprintln!("limits: ACL ...");
    query(con, &["FLUSHALL"])?;
    query(con, &["RING.ADD", "app:ring", "a", "b", "c"])?;
    for i in 0..6 {
        query(con, &["SET", &format!("app:{i}"), "v"])?;
    }
    for i in 0..50 {
        query(con, &["SET", &format!("other:secret:{i}"), "v"])?;
    }
    query(
        con,
        &["ACL", "SETUSER", "limited", "on", ">pw", "~app:*", "+@all"],
    )?;
    let mut limited = crate::server::connect(url)?;
    query(&mut limited, &["AUTH", "limited", "pw"])?;
    let mut members = |pattern: &str| -> Result<u64> {
        let reply = query(
            &mut limited,
            &["RING.MOVES", "app:ring", "ADD", "x", "KEYS", pattern],
        )?;
        Ok(Moves::read(&reply)?.members)
    };
    let all = members("*")?;
    let secret = members("other:secret:*")?;
    t.push(vec![
        "`RING.MOVES ... KEYS *` by a user limited to `~app:*` (6 app keys and the ring; 50 others)"
            .into(),
        "members 57".into(),
        format!("members {all}"),
        "only readable keys (7)".into(),
        verdict(all == 7),
    ]);
    t.push(vec![
        "`... KEYS other:secret:*` by the same user".into(),
        "members 50".into(),
        format!("members {secret}"),
        "0".into(),
        verdict(secret == 0),
    ]);

    // 2. Bulk RING.ADD / RING.DEL.
    eprintln!("limits: bulk add and del of {} nodes ...", opts.bulk_nodes);
    query(con, &["FLUSHALL"])?;
    query(con, &["CONFIG", "SET", "ringslot.max-points", "100000000"])?;
    query(con, &["CONFIG", "SET", "ringslot.max-nodes", "100000000"])?;
    let vn = opts.bulk_vnodes.to_string();
    let distinct = nodes("10", opts.bulk_nodes, true);
    let one_host = nodes("10", opts.bulk_nodes, false);
    query(con, &["RING.CREATE", "bulk:hosts", "VNODES", &vn])?;
    let add_hosts = held(con, &add_args("bulk:hosts", &distinct))?;
    query(con, &["RING.CREATE", "bulk:one", "VNODES", &vn])?;
    let add_one = held(con, &add_args("bulk:one", &one_host))?;
    let keep = opts.bulk_nodes / 10;
    let mut del = vec!["RING.DEL".to_string(), "bulk:hosts".to_string()];
    del.extend(distinct.iter().skip(keep).cloned());
    let del_most = held(con, &del)?;
    let n = opts.bulk_nodes;
    t.push(vec![
        format!("`RING.ADD` of {n} nodes on {n} hosts, VNODES {vn}, against the same on one host"),
        "17956 ms against 1699 ms (10.6x)".into(),
        format!(
            "{:.0} ms against {:.0} ms ({:.2}x)",
            add_hosts,
            add_one,
            add_hosts / add_one
        ),
        "within 1.5x".into(),
        verdict(add_hosts / add_one <= 1.5),
    ]);
    t.push(vec![
        format!(
            "`RING.DEL` of {} of them in one call, against building the {n}-node ring",
            n - keep
        ),
        "18832 ms against ~1500 ms (12.6x)".into(),
        format!(
            "{:.0} ms against {:.0} ms ({:.2}x)",
            del_most,
            add_hosts,
            del_most / add_hosts
        ),
        "within 1.5x".into(),
        verdict(del_most / add_hosts <= 1.5),
    ]);
    // A join on a 10M-point ring of many small nodes changes few points.
    query(con, &["DEL", "bulk:hosts"])?;
    let join_small = median_held(
        con,
        &[
            "RING.MOVES",
            "bulk:one",
            "ADD",
            "10.9.9.9:6379",
            "SAMPLE",
            "1",
        ]
        .map(String::from),
        opts.repeat,
    )?;
    let points_one = RingInfo::read(&query(con, &["RING.INFO", "bulk:one"])?)?.points;
    query(con, &["FLUSHALL"])?;

    // 3. What-if on a 10M-point ring of big nodes.
    eprintln!(
        "limits: what-ifs on {} nodes x {} points ...",
        opts.huge_nodes, opts.huge_vnodes
    );
    query(
        con,
        &[
            "RING.CREATE",
            "huge",
            "VNODES",
            &opts.huge_vnodes.to_string(),
        ],
    )?;
    query(con, &add_args("huge", &nodes("11", opts.huge_nodes, true)))?;
    let points = RingInfo::read(&query(con, &["RING.INFO", "huge"])?)?.points;
    let join_big = median_held(
        con,
        &["RING.MOVES", "huge", "ADD", "nX", "SAMPLE", "1"].map(String::from),
        opts.repeat,
    )?;
    t.push(vec![
        format!(
            "`RING.MOVES ... ADD nX SAMPLE 1` on a {points}-point ring ({} nodes x {}: the join \
             brings {} points)",
            opts.huge_nodes, opts.huge_vnodes, opts.huge_vnodes
        ),
        "270 ms (a copy of the ring)".into(),
        format!("{join_big:.2} ms"),
        "under 1 ms".into(),
        verdict(join_big < 1.0),
    ]);
    t.push(vec![
        format!(
            "the same on a {points_one}-point ring ({n} nodes x {vn}: the join brings {vn} points)"
        ),
        "(a copy of the ring)".into(),
        format!("{join_small:.3} ms"),
        "under 1 ms".into(),
        verdict(join_small < 1.0),
    ]);
    query(con, &["FLUSHALL"])?;
    query(con, &["CONFIG", "SET", "ringslot.max-points", "1000000"])?;

    // 4. A ring with a long name: the default sample of 100000 members.
    let name = "n".repeat(opts.name_bytes);
    query(con, &["RING.ADD", &name, "a", "b", "c"])?;
    let long_name = held(con, &["RING.MOVES", &name, "ADD", "nX"])?;
    t.push(vec![
        format!(
            "`RING.MOVES <{} KiB name> ADD nX` (default SAMPLE 100000)",
            opts.name_bytes / 1024
        ),
        "43600 ms (6.4 GB hashed)".into(),
        format!("{long_name:.0} ms"),
        "no growth with the name".into(),
        verdict(long_name < 200.0),
    ]);
    query(con, &["FLUSHALL"])?;

    // 5. AOF replay against RDB load.
    query(con, &["CONFIG", "SET", "aof-use-rdb-preamble", "no"])?;
    for &count in &opts.aof_nodes {
        eprintln!("limits: AOF replay of a {count}-node ring ...");
        query(con, &["FLUSHALL"])?;
        // Added in ten batches, so that the slot table has the ranges of a real history.
        let names = nodes("12", count, true);
        for batch in names.chunks(count.div_ceil(10).max(1)) {
            query(con, &add_args("aof:ring", batch))?;
        }
        let points = RingInfo::read(&query(con, &["RING.INFO", "aof:ring"])?)?.points;
        query(con, &["SAVE"])?;
        let rdb = wall(|| query(con, &["DEBUG", "RELOAD", "NOSAVE"]))?;
        query(con, &["CONFIG", "SET", "appendonly", "yes"])?;
        wait_for(con, "persistence", "aof_rewrite_in_progress:1")?;
        wait_for(con, "persistence", "aof_rewrite_scheduled:1")?;
        let aof = wall(|| query(con, &["DEBUG", "LOADAOF"]))?;
        query(con, &["CONFIG", "SET", "appendonly", "no"])?;
        let before = match count {
            2000 => "3500 ms against 30 ms (117x)",
            5000 => "19600 ms against 80 ms (245x)",
            _ => "-",
        };
        t.push(vec![
            format!("AOF replay (no RDB preamble) of a {count}-node ring ({points} points) against its RDB load"),
            before.into(),
            format!("{aof:.0} ms against {rdb:.0} ms ({:.1}x)", aof / rdb.max(0.001)),
            "within 5x".into(),
            verdict(aof / rdb.max(0.001) <= 5.0),
        ]);
    }
    query(con, &["FLUSHALL"])?;

    // 6. Every command's longest hold at the default limits, on the rings that stretch each
    // limit; read-only commands beside the target.
    eprintln!("limits: every command at the default limits ...");
    query(con, &["FLUSHALL"])?;
    for s in [
        "max-points 1000000",
        "max-nodes 10000",
        "max-sample 1000000000",
        "inline-limit 100000",
        "default-vnodes 160",
    ] {
        let (k, v) = s.split_once(' ').unwrap_or_default();
        query(con, &["CONFIG", "SET", &format!("ringslot.{k}"), v])?;
    }
    let holds = every_command(con)?;
    let reads: Vec<&Hold> = holds.iter().filter(|h| !h.write).collect();
    let longest = reads
        .iter()
        .filter(|h| !h.client_sized)
        .map(|h| h.ms)
        .fold(0.0, f64::max);
    t.push(vec![
        "the longest hold of any read-only RING.* command at the default limits (but work \
         the client sends: RING.MGET's members, RING.GET's COUNT)"
            .into(),
        "1100-13500 ms (multi-probe points, a long node name, rendezvous, a hot slot)".into(),
        format!("{longest:.1} ms"),
        format!("under {READ_TARGET_MS} ms"),
        verdict(longest < READ_TARGET_MS),
    ]);
    query(con, &["FLUSHALL"])?;

    let mut per = Table::new(&[
        "command at the default limits",
        "ran",
        "held (ms)",
        "verdict",
    ]);
    for h in &holds {
        let verdict = match (h.write, h.client_sized) {
            (true, _) => "(a write)".to_string(),
            (false, true) => "(as much as the client asks)".to_string(),
            (false, false) => verdict(h.ms < READ_TARGET_MS),
        };
        per.push(vec![
            format!("`{}`", h.command),
            if h.background { "background" } else { "inline" }.into(),
            fixed(h.ms, 1),
            verdict,
        ]);
    }
    Ok::<String, anyhow::Error>(format!(
        "# ringslot: what commands hold Redis' main thread for\n\n\
         Server-side execution times from `SLOWLOG` (wall time for `DEBUG RELOAD` and `DEBUG \
         LOADAOF`); medians of {} runs for the what-ifs. \"before\" is what the reliability \
         trial measured before the fixes (issues 10 and 18).\n\n{}\n## Every command at the \
         default limits\n\nThe rings that stretch each limit: `max:ring` has the most points \
         (6249 nodes x 160), `many:ring` the most nodes (9999 x 100), `heavy:ring` a node \
         holding 999999 of its 1000000 points (VNODES 1), `kt:ring` a ketama node of WEIGHT \
         1000000 with a 1 KiB name (multi-probe gives it a million points), `wide:ring` \
         VNODES 100000. A sample or a keyspace is the largest the inline limit allows for \
         the schemes asked (from the engine's cost estimate); past it a command runs in the \
         background, where its hold is only the start and the reply. Target for read-only \
         commands: under {READ_TARGET_MS} ms.\n\n{}",
        opts.repeat,
        t.markdown(),
        per.markdown()
    ))
    .context("report")
}

/// One command's hold of the main thread.
struct Hold {
    command: String,
    ms: f64,
    background: bool,
    /// A write (outside the read-only target).
    write: bool,
    /// Work that grows with what the client sends (RING.MGET's members, RING.GET's COUNT).
    client_sized: bool,
}

/// `ringslot_runs_done` of `INFO ringslot`.
fn runs_done(con: &mut Connection) -> Result<i64> {
    let info = text(&query(con, &["INFO", "ringslot"])?).unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("ringslot_runs_done:"))
        .and_then(|v| v.trim().parse().ok())
        .context("no runs_done in INFO ringslot")
}

/// The ring `name` of `flavour` with `vnodes` and `nodes` (name, weight), built both on the
/// server and in-process (for the engine's cost estimates).
fn both(
    con: &mut Connection,
    key: &str,
    flavour: Flavour,
    vnodes: Option<u32>,
    nodes: &[(String, u32)],
) -> Result<Topology> {
    let mut create = vec![
        "RING.CREATE".to_string(),
        key.to_string(),
        "COMPAT".to_string(),
        flavour.name().to_string(),
    ];
    if let Some(v) = vnodes {
        create.extend(["VNODES".to_string(), v.to_string()]);
    }
    query(con, &create)?;
    let mut topo = Topology::new(flavour, vnodes.map(i64::from), false)?;
    for run_of in nodes.chunk_by(|a, b| a.1 == b.1) {
        let weight = run_of.first().map_or(1, |n| n.1);
        for chunk in run_of.chunks(1000) {
            let mut add = vec![
                "RING.ADD".to_string(),
                key.to_string(),
                "WEIGHT".to_string(),
                weight.to_string(),
            ];
            add.extend(chunk.iter().map(|n| n.0.clone()));
            query(con, &add)?;
            let names: Vec<&[u8]> = chunk.iter().map(|n| n.0.as_bytes()).collect();
            topo.add(&names, Some(i64::from(weight)), Limits::NONE)?;
        }
    }
    Ok(topo)
}

/// The largest sample (or keyspace, with `walk`) whose what-if fits in the inline limit.
fn largest_inline(
    topo: &Topology,
    change: &Change,
    schemes: &[Scheme],
    walk: bool,
    limit: u64,
) -> u64 {
    let params = SchemeParams::default();
    let one = if walk {
        Source::Walk(1)
    } else {
        Source::Sample(1)
    };
    let w = cost::what_if(topo, change, schemes, &params, one);
    if w.setup >= limit as f64 {
        return 1;
    }
    ((limit as f64 - w.setup) / w.members).floor().max(1.0) as u64
}

/// Runs `cmd` and returns its hold, whether it ran in the background, and its reply.
fn hold_of(con: &mut Connection, args: &[String]) -> Result<(f64, bool)> {
    let before = runs_done(con)?;
    let ms = held(con, args)?;
    Ok((ms, runs_done(con)? > before))
}

/// Every command at the default limits on the rings that stretch them (see the report).
fn every_command(con: &mut Connection) -> Result<Vec<Hold>> {
    const LIMIT: u64 = 100_000;
    let mut holds: Vec<Hold> = Vec::new();
    let mut measure = |con: &mut Connection, args: Vec<String>, write: bool, sized: bool| {
        let (ms, background) = hold_of(con, &args)?;
        // A long argument (a node name) is shown by its length, a long list by its count.
        let mut shown: Vec<String> = args
            .iter()
            .take(8)
            .map(|a| {
                if a.len() > 40 {
                    format!("<{} KiB name>", a.len() / 1024)
                } else {
                    a.clone()
                }
            })
            .collect();
        if args.len() > 8 {
            shown.truncate(2);
            shown.push(format!("<{} names>", args.len() - 2));
        }
        holds.push(Hold {
            command: shown.join(" "),
            ms,
            background,
            write,
            client_sized: sized,
        });
        anyhow::Ok(())
    };
    let split = |s: &str| -> Vec<String> { s.split(' ').map(String::from).collect() };
    let join = Change::Add {
        nodes: vec![b"nX".to_vec()],
        weight: None,
    };

    // The most points: 6249 nodes x 160, one node short of ringslot.max-points.
    let names: Vec<(String, u32)> = nodes("13", 6249, true)
        .into_iter()
        .map(|n| (n, 1))
        .collect();
    query(con, &["RING.CREATE", "max:ring", "VNODES", "160"])?;
    let mut add = vec!["RING.ADD".to_string(), "max:ring".to_string()];
    add.extend(names.iter().map(|n| n.0.clone()));
    measure(con, add, true, false)?;
    query(con, &["DEL", "max:ring"])?;
    let max = both(con, "max:ring", Flavour::Native, Some(160), &names)?;
    let first = names.first().map(|n| n.0.clone()).unwrap_or_default();
    let leave = Change::Del {
        nodes: vec![first.clone().into_bytes()],
    };
    for cmd in [
        "RING.NODES max:ring",
        "RING.INFO max:ring",
        "RING.SLOTS max:ring",
        "RING.SLOT max:ring m",
        "RING.PLAN max:ring ADD nX",
        "RING.OWNERS max:ring m",
    ] {
        measure(con, split(cmd), false, false)?;
    }
    measure(con, split("RING.GET max:ring m COUNT 100000"), false, true)?;
    let mut mget = split("RING.MGET max:ring");
    mget.extend((0..10_000).map(|i| format!("m{i}")));
    measure(con, mget, false, true)?;
    let n = largest_inline(&max, &join, &Scheme::DEFAULT, false, LIMIT);
    measure(
        con,
        split(&format!("RING.MOVES max:ring ADD nX SAMPLE {n}")),
        false,
        false,
    )?;
    let n = largest_inline(&max, &leave, &Scheme::DEFAULT, false, LIMIT);
    measure(
        con,
        split(&format!("RING.MOVES max:ring DEL {first} SAMPLE {n}")),
        false,
        false,
    )?;
    let n = largest_inline(&max, &join, &Scheme::ALL, false, LIMIT);
    measure(
        con,
        split(&format!(
            "RING.MOVES max:ring ADD nX SAMPLE {n} SCHEMES ALL"
        )),
        false,
        false,
    )?;
    let n = balance_inline(&max, LIMIT);
    measure(
        con,
        split(&format!("RING.BALANCE max:ring SAMPLE {n}")),
        false,
        false,
    )?;
    measure(
        con,
        split("RING.BALANCE max:ring SAMPLE 10000"),
        false,
        false,
    )?;
    let keys = largest_inline(&max, &join, &Scheme::DEFAULT, true, LIMIT) - 1;
    query(con, &["DEBUG", "POPULATE", &keys.to_string(), "key", "8"])?;
    measure(
        con,
        split("RING.MOVES max:ring ADD nX KEYS *"),
        false,
        false,
    )?;
    query(con, &["FLUSHALL"])?;

    // The most nodes: 9999 x 100 (a what-if may add one).
    let names: Vec<(String, u32)> = nodes("14", 9999, true)
        .into_iter()
        .map(|n| (n, 1))
        .collect();
    let many = both(con, "many:ring", Flavour::Native, Some(100), &names)?;
    for cmd in [
        "RING.NODES many:ring",
        "RING.INFO many:ring",
        "RING.PLAN many:ring ADD nX",
        "RING.OWNERS many:ring m",
    ] {
        measure(con, split(cmd), false, false)?;
    }
    let n = largest_inline(&many, &join, &[Scheme::Rendezvous], false, LIMIT);
    measure(
        con,
        split(&format!(
            "RING.MOVES many:ring ADD nX SAMPLE {n} SCHEMES rendezvous"
        )),
        false,
        false,
    )?;
    let n = largest_inline(&many, &join, &Scheme::ALL, false, LIMIT);
    measure(
        con,
        split(&format!(
            "RING.MOVES many:ring ADD nX SAMPLE {n} SCHEMES ALL"
        )),
        false,
        false,
    )?;
    measure(
        con,
        split("RING.MOVES many:ring ADD nX SAMPLE 191 SCHEMES rendezvous"),
        false,
        false,
    )?;
    let n = balance_inline(&many, LIMIT);
    measure(
        con,
        split(&format!("RING.BALANCE many:ring SAMPLE {n}")),
        false,
        false,
    )?;
    measure(
        con,
        split("RING.BALANCE many:ring SAMPLE 191"),
        false,
        false,
    )?;
    let mut del = vec!["RING.DEL".to_string(), "many:ring".to_string()];
    del.extend(names.iter().map(|n| n.0.clone()));
    measure(con, del, true, false)?;
    query(con, &["FLUSHALL"])?;

    // A node holding almost every point: leaving or shrinking, it removes a million points.
    let heavy = both(
        con,
        "heavy:ring",
        Flavour::Native,
        Some(1),
        &[("a".to_string(), 999_999), ("b".to_string(), 1)],
    )?;
    let shrink = Change::Add {
        nodes: vec![b"a".to_vec()],
        weight: Some(1),
    };
    // The shrink alone is past the limit: even one member goes to the background.
    debug_assert_eq!(
        largest_inline(&heavy, &shrink, &Scheme::DEFAULT, false, LIMIT),
        1
    );
    for cmd in [
        "RING.MOVES heavy:ring DEL a SAMPLE 100000".to_string(),
        "RING.MOVES heavy:ring ADD a WEIGHT 1 SAMPLE 1".to_string(),
        "RING.INFO heavy:ring".to_string(),
        "RING.OWNERS heavy:ring m".to_string(),
        "RING.BALANCE heavy:ring SAMPLE 1".to_string(),
    ] {
        measure(con, split(&cmd), false, false)?;
    }
    query(con, &["FLUSHALL"])?;

    // Multi-probe points of a heavy ketama node with a long name.
    let long = "n".repeat(1024);
    both(
        con,
        "kt:ring",
        Flavour::Ketama,
        None,
        &[
            (long.clone(), 1_000_000),
            ("a".into(), 1),
            ("b".into(), 1),
            ("c".into(), 1),
        ],
    )?;
    measure(con, split("RING.OWNERS kt:ring m"), false, false)?;
    measure(con, split("RING.BALANCE kt:ring SAMPLE 1"), false, false)?;
    let mut probe = split("RING.MOVES kt:ring DEL");
    probe.push(long);
    probe.extend(split("SAMPLE 1 SCHEMES multiprobe"));
    measure(con, probe, false, false)?;
    query(con, &["FLUSHALL"])?;

    // A long node name joining a ring of VNODES 100000.
    query(con, &["RING.CREATE", "wide:ring", "VNODES", "100000"])?;
    query(con, &["RING.ADD", "wide:ring", "small"])?;
    let mut wide = split("RING.MOVES wide:ring ADD");
    wide.push("z".repeat(65536));
    wide.extend(split("SAMPLE 1"));
    measure(con, wide, false, false)?;
    Ok(holds)
}

/// The largest `RING.BALANCE` sample that fits in the inline limit.
fn balance_inline(topo: &Topology, limit: u64) -> u64 {
    let params = SchemeParams::default();
    let w = cost::balance(topo, &params, 1);
    if w.setup >= limit as f64 {
        return 1;
    }
    ((limit as f64 - w.setup) / w.members).floor().max(1.0) as u64
}
