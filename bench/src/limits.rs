//! `limits`: how long RING.* commands hold Redis' main thread, measured on the program's own
//! server as Redis itself times them (`SLOWLOG`, microseconds of execution): the findings of a
//! reliability trial, each beside the figure it measured before the fix, and the longest hold
//! of every command at the default limits.

use crate::report::{fixed, Table};
use crate::server::{field, int, run, text};
use anyhow::{bail, Context, Result};
use ringslot_harness::redis::{Connection, Value};
use std::time::{Duration, Instant};

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
    run(con, args)?;
    slowlog_ms(con, args[0].as_ref())
}

/// The duration of the newest `SLOWLOG` entry of `command`, in milliseconds.
fn slowlog_ms(con: &mut Connection, command: &str) -> Result<f64> {
    let log = run(con, &["SLOWLOG", "GET", "20"])?;
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
    Ok(crate::throughput::median(&v))
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
        let info = text(&run(con, &["INFO", section])?).unwrap_or_default();
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
    run(con, &["CONFIG", "SET", "slowlog-log-slower-than", "0"])?;
    run(con, &["CONFIG", "SET", "slowlog-max-len", "1000"])?;
    let mut t = Table::new(&["finding", "before", "after", "target", "verdict"]);

    // 1. ACL: a user limited to ~app:* walks the keyspace.
    eprintln!("limits: ACL ...");
    run(con, &["FLUSHALL"])?;
    run(con, &["RING.ADD", "app:ring", "a", "b", "c"])?;
    for i in 0..6 {
        run(con, &["SET", &format!("app:{i}"), "v"])?;
    }
    for i in 0..50 {
        run(con, &["SET", &format!("other:secret:{i}"), "v"])?;
    }
    run(
        con,
        &["ACL", "SETUSER", "limited", "on", ">pw", "~app:*", "+@all"],
    )?;
    let mut limited = crate::server::connect(url)?;
    run(&mut limited, &["AUTH", "limited", "pw"])?;
    let mut members = |pattern: &str| -> Result<i64> {
        let reply = run(
            &mut limited,
            &["RING.MOVES", "app:ring", "ADD", "x", "KEYS", pattern],
        )?;
        Ok(int(field(&reply, "members")?)?)
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
    run(con, &["FLUSHALL"])?;
    run(con, &["CONFIG", "SET", "ringslot.max-points", "100000000"])?;
    let vn = opts.bulk_vnodes.to_string();
    let distinct = nodes("10", opts.bulk_nodes, true);
    let one_host = nodes("10", opts.bulk_nodes, false);
    run(con, &["RING.CREATE", "bulk:hosts", "VNODES", &vn])?;
    let add_hosts = held(con, &add_args("bulk:hosts", &distinct))?;
    run(con, &["RING.CREATE", "bulk:one", "VNODES", &vn])?;
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
    run(con, &["DEL", "bulk:hosts"])?;
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
    let points_one = int(field(&run(con, &["RING.INFO", "bulk:one"])?, "points")?)?;
    run(con, &["FLUSHALL"])?;

    // 3. What-if on a 10M-point ring of big nodes.
    eprintln!(
        "limits: what-ifs on {} nodes x {} points ...",
        opts.huge_nodes, opts.huge_vnodes
    );
    run(
        con,
        &[
            "RING.CREATE",
            "huge",
            "VNODES",
            &opts.huge_vnodes.to_string(),
        ],
    )?;
    run(con, &add_args("huge", &nodes("11", opts.huge_nodes, true)))?;
    let points = int(field(&run(con, &["RING.INFO", "huge"])?, "points")?)?;
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
    run(con, &["FLUSHALL"])?;
    run(con, &["CONFIG", "SET", "ringslot.max-points", "1000000"])?;

    // 4. A ring with a long name: the default sample of 100000 members.
    let name = "n".repeat(opts.name_bytes);
    run(con, &["RING.ADD", &name, "a", "b", "c"])?;
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
    run(con, &["FLUSHALL"])?;

    // 5. AOF replay against RDB load.
    run(con, &["CONFIG", "SET", "aof-use-rdb-preamble", "no"])?;
    for &count in &opts.aof_nodes {
        eprintln!("limits: AOF replay of a {count}-node ring ...");
        run(con, &["FLUSHALL"])?;
        // Added in ten batches, so that the slot table has the ranges of a real history.
        let names = nodes("12", count, true);
        for batch in names.chunks(count.div_ceil(10).max(1)) {
            run(con, &add_args("aof:ring", batch))?;
        }
        let points = int(field(&run(con, &["RING.INFO", "aof:ring"])?, "points")?)?;
        run(con, &["SAVE"])?;
        let rdb = wall(|| run(con, &["DEBUG", "RELOAD", "NOSAVE"]))?;
        run(con, &["CONFIG", "SET", "appendonly", "yes"])?;
        wait_for(con, "persistence", "aof_rewrite_in_progress:1")?;
        wait_for(con, "persistence", "aof_rewrite_scheduled:1")?;
        let aof = wall(|| run(con, &["DEBUG", "LOADAOF"]))?;
        run(con, &["CONFIG", "SET", "appendonly", "no"])?;
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
    run(con, &["FLUSHALL"])?;

    // 6. Every command's longest hold at the default limits.
    eprintln!("limits: every command at the default limits ...");
    for s in [
        "max-points 1000000",
        "max-sample 1000000",
        "inline-limit 100000",
        "default-vnodes 160",
    ] {
        let (k, v) = s.split_once(' ').unwrap_or_default();
        run(con, &["CONFIG", "SET", &format!("ringslot.{k}"), v])?;
    }
    // One node short of ringslot.max-points, so that a what-if may add one.
    let max_nodes = 1_000_000 / 160 - 1;
    let names = nodes("13", max_nodes, true);
    let mut holds: Vec<(String, f64)> = Vec::new();
    holds.push((
        format!("RING.ADD of {max_nodes} nodes x 160 (a ring at ringslot.max-points)"),
        held(con, &add_args("max:ring", &names))?,
    ));
    for cmd in [
        "RING.NODES max:ring",
        "RING.INFO max:ring",
        "RING.SLOTS max:ring",
        "RING.GET max:ring m COUNT 100000",
        "RING.ASSIGN max:ring 0 16383 13.0.0.0:6379",
        "RING.MOVES max:ring ADD nX SAMPLE 100000",
        "RING.MOVES max:ring DEL 13.0.0.0:6379 SAMPLE 100000",
    ] {
        let args: Vec<String> = cmd.split(' ').map(String::from).collect();
        holds.push((cmd.to_string(), held(con, &args)?));
    }
    // One node holding almost every point (VNODES 1): leaving or shrinking, it removes a
    // million points, in long runs that lookups on the changed ring must jump.
    run(con, &["RING.CREATE", "heavy:ring", "VNODES", "1"])?;
    run(con, &["RING.ADD", "heavy:ring", "WEIGHT", "999999", "a"])?;
    run(con, &["RING.ADD", "heavy:ring", "b"])?;
    for cmd in [
        "RING.MOVES heavy:ring DEL a SAMPLE 100000",
        "RING.MOVES heavy:ring ADD a WEIGHT 1 SAMPLE 100000",
    ] {
        let args: Vec<String> = cmd.split(' ').map(String::from).collect();
        holds.push((
            format!("{cmd} (a node holding 999999 of the 1000000 points)"),
            held(con, &args)?,
        ));
    }
    run(con, &["DEL", "heavy:ring"])?;
    run(con, &["DEBUG", "POPULATE", "99999", "key", "8"])?;
    holds.push((
        "RING.MOVES max:ring ADD nX KEYS * (100000 keys, the inline limit)".into(),
        held(con, &["RING.MOVES", "max:ring", "ADD", "nX", "KEYS", "*"])?,
    ));
    let mut del = vec!["RING.DEL".to_string(), "max:ring".to_string()];
    del.extend(names.iter().cloned());
    holds.push((
        format!("RING.DEL of all {max_nodes} nodes"),
        held(con, &del)?,
    ));
    let longest = holds.iter().map(|h| h.1).fold(0.0, f64::max);
    t.push(vec![
        "the longest hold of any RING.* command at the default limits".into(),
        "1500 ms (RING.ADD of a 10M-point ring, allowed by ringslot.max-points)".into(),
        format!("{longest:.0} ms"),
        "about 100 ms".into(),
        verdict(longest <= 120.0),
    ]);
    run(con, &["FLUSHALL"])?;

    let mut per = Table::new(&["command at the default limits", "held (ms)"]);
    for (cmd, ms) in &holds {
        per.push(vec![format!("`{cmd}`"), fixed(*ms, 1)]);
    }
    Ok::<String, anyhow::Error>(format!(
        "# ringslot: what commands hold Redis' main thread for\n\n\
         Server-side execution times from `SLOWLOG` (wall time for `DEBUG RELOAD` and `DEBUG \
         LOADAOF`); medians of {} runs for the what-ifs. \"before\" is what the reliability \
         trial measured before the fixes (issue 10).\n\n{}\n## Every command at the default \
         limits\n\n{}",
        opts.repeat,
        t.markdown(),
        per.markdown()
    ))
    .context("report")
}
