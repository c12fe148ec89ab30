//! Cross-checks `ringslot::engine::Topology` slot tables against a real Redis Cluster driven by
//! the real `redis-cli --cluster` (Debian redis-tools 7.0.15). Every expected owner here is the
//! one reported by the live cluster (`CLUSTER NODES`, cross-checked with `CLUSTER SLOTS`) after
//! the named `redis-cli --cluster` command ran.
//!
//! Scenario (5 plain cluster-enabled redis-servers on free loopback ports, killed on drop):
//! 1. `redis-cli --cluster create p1 p2 p3 --cluster-replicas 0` vs
//!    `add([p1, p2, p3], None)` (the `create` layout).
//! 2. `redis-cli --cluster add-node p4 p1` then
//!    `redis-cli --cluster rebalance p1 --cluster-use-empty-masters --cluster-weight <p4>=2`
//!    (default threshold 2%) vs `add([p4], Some(2))`.
//! 3. `redis-cli --cluster rebalance p1 --cluster-weight <p2>=0 <p4>=2` (a drain; p4's weight
//!    is repeated because redis-cli does not remember weights between runs, while the engine
//!    keeps p4 at 2) vs `del([p2])`.
//! 4. `redis-cli --cluster del-node p1 <p2>`, `add-node p5 p1`, then
//!    `redis-cli --cluster rebalance p1 --cluster-use-empty-masters --cluster-weight <p4>=2`
//!    vs `add([p5], None)`.
//!
//! Node order: redis-cli's rebalance orders the masters as loaded from the entry node (the entry
//! node first, then the others in that node's `CLUSTER NODES` order, which follows its node
//! dictionary, not the join order), and sorts them by balance with `qsort` (glibc 2.36's is a
//! stable merge sort). The only balance tie whose order changes the result is step 3's
//! (p1 and p3 both receive 820 slots); p1 is the entry node, so it comes first in redis-cli as
//! in the engine's insertion order. The test logs redis-cli's "Moving N slots from .. to .."
//! lines, which show the real order.

use ringslot_harness::prelude::*;
use ringslot_harness::redis;

use ringslot::engine::{Flavour, Topology, SLOT_COUNT};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const HOST: &str = "127.0.0.1";

/// A plain (module-less) cluster-enabled redis-server from ringslot-harness, with the views of
/// the cluster this test reads.
struct ClusterServer(Server);

impl ClusterServer {
    fn start() -> ClusterServer {
        ClusterServer(Server::start_cluster_node(&[
            "--cluster-node-timeout",
            "5000",
        ]))
    }

    fn try_client(&self) -> redis::RedisResult<redis::Connection> {
        self.0.try_client()
    }

    fn client(&self) -> redis::Connection {
        self.0.client()
    }

    /// `host:port`, the name the engine's topology uses for this node.
    fn addr(&self) -> String {
        format!("{HOST}:{}", self.0.port)
    }

    /// `CLUSTER MYID`.
    fn node_id(&self) -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut self.client())
            .expect("CLUSTER MYID")
    }

    fn cluster_nodes(&self) -> redis::RedisResult<String> {
        redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut self.try_client()?)
    }
}

/// The result of one `redis-cli` run.
struct CliRun {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs `redis-cli args...` with a bounded time, its output going to files (a rebalance prints
/// one `#` per moved slot).
fn redis_cli(scratch: &Path, args: &[String], limit: Duration) -> CliRun {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out_path = scratch.join(format!("cli-{n}.out"));
    let err_path = scratch.join(format!("cli-{n}.err"));
    let out = std::fs::File::create(&out_path).expect("cli stdout file");
    let err = std::fs::File::create(&err_path).expect("cli stderr file");
    let mut child = Command::new("redis-cli")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .expect("redis-cli not found");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait redis-cli") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let run = CliRun {
        success: status.is_some_and(|s| s.success()),
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    };
    assert!(
        status.is_some(),
        "redis-cli {args:?} timed out after {limit:?}\n{}\n{}",
        run.stdout,
        run.stderr
    );
    run
}

/// Runs `redis-cli args...` and panics unless it succeeds.
fn redis_cli_ok(scratch: &Path, args: &[String]) -> CliRun {
    let run = redis_cli(scratch, args, Duration::from_secs(40));
    assert!(
        run.success,
        "redis-cli {args:?} failed\nstdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    run
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// One node line of `CLUSTER NODES`: `(node id, "ip:port", is_master, slots)`; slot entries of
/// the form `[slot->-id]` / `[slot-<-id]` (migrating / importing) are not ownership and are
/// skipped.
fn parse_cluster_nodes(text: &str) -> Vec<(String, String, bool, Vec<u16>)> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let id = fields.first().copied().unwrap_or_default().to_string();
            // "ip:port@cport[,hostname]"
            let addr = fields.get(1).copied().unwrap_or_default();
            let addr = addr.split('@').next().unwrap_or_default().to_string();
            let flags = fields.get(2).copied().unwrap_or_default();
            let master = flags.split(',').any(|f| f == "master");
            let mut slots = Vec::new();
            for spec in fields.iter().skip(8) {
                if spec.starts_with('[') {
                    continue;
                }
                let (a, b) = spec.split_once('-').unwrap_or((spec, spec));
                let a: u16 = a.parse().expect("slot");
                let b: u16 = b.parse().expect("slot");
                slots.extend(a..=b);
            }
            (id, addr, master, slots)
        })
        .collect()
}

/// Per-slot owner ("ip:port") as one node sees it in `CLUSTER NODES`.
fn owners_from_nodes(text: &str) -> Vec<Option<String>> {
    let mut owners = vec![None; SLOT_COUNT];
    for (_, addr, _, slots) in parse_cluster_nodes(text) {
        for s in slots {
            owners[usize::from(s)] = Some(addr.clone());
        }
    }
    owners
}

/// Per-slot owner ("ip:port") from `CLUSTER SLOTS` on `server`.
fn owners_from_cluster_slots(server: &ClusterServer) -> Vec<Option<String>> {
    let reply: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut server.client())
        .expect("CLUSTER SLOTS");
    let mut owners = vec![None; SLOT_COUNT];
    for entry in reply {
        let start: usize = redis::from_redis_value(&entry[0]).expect("start");
        let end: usize = redis::from_redis_value(&entry[1]).expect("end");
        let master: Vec<redis::Value> = redis::from_redis_value(&entry[2]).expect("master");
        let ip: String = redis::from_redis_value(&master[0]).expect("ip");
        let port: u16 = redis::from_redis_value(&master[1]).expect("port");
        for owner in owners.iter_mut().take(end + 1).skip(start) {
            *owner = Some(format!("{ip}:{port}"));
        }
    }
    owners
}

/// Per-slot owner in the engine's table.
fn owners_from_engine(topo: &Topology) -> Vec<Option<String>> {
    let mut owners = vec![None; SLOT_COUNT];
    for (start, end, node) in topo.slot_ranges() {
        let name = String::from_utf8(node.to_vec()).expect("utf-8 node name");
        for owner in owners
            .iter_mut()
            .take(usize::from(end) + 1)
            .skip(usize::from(start))
        {
            *owner = Some(name.clone());
        }
    }
    owners
}

/// `(start, end, owner)` ranges of a per-slot table, for messages.
fn ranges(owners: &[Option<String>]) -> Vec<(usize, usize, String)> {
    let mut out: Vec<(usize, usize, String)> = Vec::new();
    for (slot, owner) in owners.iter().enumerate() {
        let owner = owner.clone().unwrap_or_else(|| "-".into());
        match out.last_mut() {
            Some(last) if last.2 == owner && last.1 + 1 == slot => last.1 = slot,
            _ => out.push((slot, slot, owner)),
        }
    }
    out
}

fn counts(owners: &[Option<String>]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for owner in owners.iter().flatten() {
        *counts.entry(owner.clone()).or_insert(0) += 1;
    }
    counts
}

/// Asserts the live table (the expected value, from the real cluster) equals the engine's.
fn assert_same_table(step: &str, real: &[Option<String>], topo: &Topology) {
    let engine = owners_from_engine(topo);
    if real == engine.as_slice() {
        return;
    }
    let diff: Vec<(usize, Option<String>, Option<String>)> = real
        .iter()
        .zip(&engine)
        .enumerate()
        .filter(|(_, (r, e))| r != e)
        .map(|(s, (r, e))| (s, r.clone(), e.clone()))
        .collect();
    let mut diff_ranges: Vec<(usize, usize, String, String)> = Vec::new();
    for (s, r, e) in &diff {
        let r = r.clone().unwrap_or_else(|| "-".into());
        let e = e.clone().unwrap_or_else(|| "-".into());
        match diff_ranges.last_mut() {
            Some(last) if last.2 == r && last.3 == e && last.1 + 1 == *s => last.1 = *s,
            _ => diff_ranges.push((*s, *s, r, e)),
        }
    }
    panic!(
        "{step}: the engine's slot table differs from the real cluster in {} slots\n\
         differing ranges (start, end, real owner, engine owner): {diff_ranges:?}\n\
         real counts {:?}\nengine counts {:?}\nreal ranges {:?}\nengine ranges {:?}",
        diff.len(),
        counts(real),
        counts(&engine),
        ranges(real),
        ranges(&engine),
    );
}

/// Waits until every server in `members` lists exactly the addresses of `members` as masters in
/// `CLUSTER NODES`, all of them report the same full slot table, and `redis-cli --cluster
/// check` through `entry` passes; returns that table (as seen by `entry`).
fn wait_converged(
    scratch: &Path,
    entry: &ClusterServer,
    members: &[&ClusterServer],
) -> Vec<Option<String>> {
    let mut want: Vec<String> = members.iter().map(|s| s.addr()).collect();
    want.sort();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    loop {
        let mut tables = Vec::new();
        let mut ok = true;
        for s in members {
            match s.cluster_nodes() {
                Ok(text) => {
                    let nodes = parse_cluster_nodes(&text);
                    let mut seen: Vec<String> = nodes.iter().map(|n| n.1.clone()).collect();
                    seen.sort();
                    let healthy = !text.contains("fail") && !text.contains("handshake");
                    if seen != want || !healthy {
                        ok = false;
                        last = format!("{} sees:\n{text}", s.addr());
                    }
                    tables.push(owners_from_nodes(&text));
                }
                Err(e) => {
                    ok = false;
                    last = format!("{}: {e}", s.addr());
                }
            }
        }
        if ok && tables.windows(2).all(|w| w[0] == w[1]) {
            let check = redis_cli(
                scratch,
                &strings(&["--cluster", "check", &entry.addr()]),
                Duration::from_secs(20),
            );
            let clean = check.success
                && !check.stdout.contains("[ERR]")
                && !check.stdout.contains("[WARNING]")
                && check.stdout.contains("All 16384 slots covered");
            if clean {
                let table = tables.swap_remove(0);
                let from_slots = owners_from_cluster_slots(entry);
                assert_eq!(
                    table,
                    from_slots,
                    "CLUSTER NODES and CLUSTER SLOTS disagree on {}",
                    entry.addr()
                );
                return table;
            }
            last = format!("check:\n{}\n{}", check.stdout, check.stderr);
        } else if ok {
            last = "nodes disagree on the slot table".into();
        }
        assert!(
            Instant::now() < deadline,
            "cluster did not converge: {last}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// redis-cli's "Moving N slots from A to B" lines (its own log of the order in which it paired
/// receivers and donors), with addresses renamed `p1`.. (the first one follows a colour escape).
fn moves(run: &CliRun, names: &[String]) -> Vec<String> {
    run.stdout
        .lines()
        .filter_map(|l| l.find("Moving ").map(|at| &l[at..]))
        .map(|l| rename(l, names))
        .collect()
}

/// `text` with every server address replaced by its name in the test (`p1`..`p5`).
fn rename(text: &str, names: &[String]) -> String {
    let mut out = text.to_string();
    for (i, addr) in names.iter().enumerate() {
        out = out.replace(addr.as_str(), &format!("p{}", i + 1));
    }
    out
}

/// `redis-cli --cluster rebalance <entry> --cluster-use-empty-masters --cluster-weight
/// <weights>...`; logs redis-cli's master order before it (the order its ties follow) and the
/// moves it made, and returns both.
fn run_rebalance(
    scratch: &Path,
    entry: &ClusterServer,
    names: &[String],
    step: &str,
    weights: &[String],
) -> (Vec<String>, CliRun) {
    let order = redis_cli_master_order(entry, names);
    eprintln!("{step} redis-cli master order: {order:?}");
    let mut args = strings(&[
        "--cluster",
        "rebalance",
        &entry.addr(),
        "--cluster-use-empty-masters",
        "--cluster-weight",
    ]);
    args.extend_from_slice(weights);
    let run = redis_cli_ok(scratch, &args);
    eprintln!("{step} redis-cli moves: {:?}", moves(&run, names));
    (order, run)
}

/// The order in which redis-cli loads the masters through `entry`
/// (`clusterManagerLoadInfoFromNode`: the entry node, then the other nodes in the order of the
/// entry node's `CLUSTER NODES`), as `p1`.. names; replicas are left out, as rebalance does.
fn redis_cli_master_order(entry: &ClusterServer, names: &[String]) -> Vec<String> {
    let text = entry.cluster_nodes().expect("CLUSTER NODES");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let myself = lines.iter().filter(|l| l.contains("myself"));
    let others = lines.iter().filter(|l| !l.contains("myself"));
    myself
        .chain(others)
        .map(|l| parse_cluster_nodes(l).remove(0))
        .filter(|n| n.2)
        .map(|n| rename(&n.1, names))
        .collect()
}

#[test]
fn topology_matches_redis_cli_cluster() {
    let started = Instant::now();
    let scratch = ringslot_harness::tempfile::tempdir().expect("scratch dir");
    let scratch: PathBuf = scratch.path().to_path_buf();
    let servers: Vec<ClusterServer> = (0..5).map(|_| ClusterServer::start()).collect();
    let [p1, p2, p3, p4, p5] = &servers[..] else {
        unreachable!()
    };
    let names: Vec<String> = servers.iter().map(ClusterServer::addr).collect();
    let name = |i: usize| names[i].as_bytes();

    let mut topo = Topology::new(Flavour::Native, None, false).expect("topology");

    // Step 1: `redis-cli --cluster create p1 p2 p3 --cluster-replicas 0`.
    let create = redis_cli_ok(
        &scratch,
        &strings(&[
            "--cluster",
            "create",
            &p1.addr(),
            &p2.addr(),
            &p3.addr(),
            "--cluster-replicas",
            "0",
            "--cluster-yes",
        ]),
    );
    // redis-cli prints the layout it is about to apply, e.g. "Master[0] -> Slots 0 - 5460".
    assert!(
        create.stdout.contains("Master[0] -> Slots 0 - 5460"),
        "{}",
        create.stdout
    );
    let real = wait_converged(&scratch, p1, &[p1, p2, p3]);
    topo.add(&[name(0), name(1), name(2)], None, u64::MAX)
        .expect("add p1..p3");
    assert_same_table("create p1 p2 p3", &real, &topo);

    // Step 2: add p4 (empty master), then rebalance with p4 at weight 2.
    redis_cli_ok(
        &scratch,
        &strings(&["--cluster", "add-node", &p4.addr(), &p1.addr()]),
    );
    wait_converged(&scratch, p1, &[p1, p2, p3, p4]);
    let p2_id = p2.node_id();
    let p4_id = p4.node_id();
    // Balances (16384/5 = 3276.8 per unit of weight): p1 5461-3276 = 2185, p2 5462-3276 = 2186,
    // p3 2185, p4 0-6553 = -6553, minus the rounding surplus 3 => -6556. The p1/p3 tie does not
    // change the result (both give their lowest 2185 slots to p4).
    let (_, rebalance) = run_rebalance(&scratch, p1, &names, "step 2", &[format!("{p4_id}=2")]);
    assert!(
        !moves(&rebalance, &names).is_empty(),
        "redis-cli did not rebalance:\n{}",
        rebalance.stdout
    );
    let real = wait_converged(&scratch, p1, &[p1, p2, p3, p4]);
    topo.add(&[name(3)], Some(2), u64::MAX).expect("add p4");
    assert_same_table("add-node p4 + rebalance (p4 weight 2)", &real, &topo);

    // Step 3: drain p2 (weight 0), keeping p4 at weight 2 as the engine does (redis-cli does not
    // remember weights between runs). Balances (16384/4 = 4096 per unit): p1 3276-4096 = -820,
    // p2 3276-0 = 3276, p3 -820, p4 6556-8192 = -1636. p1 and p3 tie at -820: the receiver
    // that comes first gets p2's lower 820 slots. In redis-cli that is the first in its loaded
    // order after a stable sort: p1, the entry node, always loads first; in the engine p1 comes
    // first by insertion order. So both give p1 the lower range.
    let weights = [format!("{p2_id}=0"), format!("{p4_id}=2")];
    let (order, _) = run_rebalance(&scratch, p1, &names, "step 3", &weights);
    assert_eq!(order.first().map(String::as_str), Some("p1"));
    // Redis 7.0 (cluster-allow-replica-migration yes, the default) turns a master that loses
    // its last slot into a replica of the node that took it, so p2 is now a replica of p3: it
    // stays a cluster member, owning nothing.
    let real = wait_converged(&scratch, p1, &[p1, p2, p3, p4]);
    assert_eq!(
        counts(&real).get(&p2.addr()),
        None,
        "p2 still owns slots after the drain"
    );
    assert_eq!(topo.del(&[name(1)]), 1);
    assert_same_table("rebalance draining p2 (weight 0)", &real, &topo);

    // Step 4: remove the drained p2 from the cluster, add p5 (weight 1), rebalance.
    redis_cli_ok(
        &scratch,
        &strings(&["--cluster", "del-node", &p1.addr(), &p2_id]),
    );
    redis_cli_ok(
        &scratch,
        &strings(&["--cluster", "add-node", &p5.addr(), &p1.addr()]),
    );
    wait_converged(&scratch, p1, &[p1, p3, p4, p5]);
    // Balances (16384/5 = 3276.8 per unit): p1 4096-3276 = 820, p3 820, p4 8192-6553 = 1639,
    // p5 -3276 minus the rounding surplus 3 => -3279. All donors feed p5, so the p1/p3 tie
    // does not change the result.
    run_rebalance(&scratch, p1, &names, "step 4", &[format!("{p4_id}=2")]);
    let real = wait_converged(&scratch, p1, &[p1, p3, p4, p5]);
    topo.add(&[name(4)], None, u64::MAX).expect("add p5");
    assert_same_table("del-node p2, add-node p5 + rebalance", &real, &topo);

    eprintln!("scenario took {:?}", started.elapsed());
}
