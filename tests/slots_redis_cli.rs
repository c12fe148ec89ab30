//! Cross-checks `ringslot_engine::Topology` slot tables against a real Redis Cluster driven by
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

use ringslot_harness::cluster::{self, redis_cli_ok, strings, CliRun};
use ringslot_harness::prelude::*;
use ringslot_harness::redis;

use ringslot_engine::Limits;
use ringslot_engine::{Flavour, Topology, SLOT_COUNT};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A plain (module-less) cluster-enabled redis-server.
fn start_node() -> Server {
    Server::start_cluster_node(&["--cluster-node-timeout", "5000"])
}

/// `CLUSTER MYID` of `server`.
fn node_id(server: &Server) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut server.client())
        .expect("CLUSTER MYID")
}

/// redis-cli that must succeed. The limit catches a hang, not a slow run: step 2 moves 6553
/// slots, 7-16 s on an idle machine, and took more than 40 s once with two other test passes
/// running beside it.
fn cli(args: &[String]) -> CliRun {
    redis_cli_ok(args, Duration::from_secs(600)).unwrap_or_else(|e| panic!("{e}"))
}

/// Per-slot owner ("ip:port") from `CLUSTER SLOTS` on `server`.
fn owners_from_cluster_slots(server: &Server) -> Vec<Option<String>> {
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

/// Waits until the servers of `members` have converged (the harness: every node knows every
/// other, one full slot table, `redis-cli --cluster check` passes) and returns that table,
/// checked against `CLUSTER SLOTS` of `entry`.
fn wait_converged(entry: &Server, members: &[&Server]) -> Vec<Option<String>> {
    let table = cluster::wait_converged(members, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        table,
        owners_from_cluster_slots(entry),
        "CLUSTER NODES and CLUSTER SLOTS disagree on {}",
        entry.address()
    );
    table
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
    entry: &Server,
    names: &[String],
    step: &str,
    weights: &[String],
) -> (Vec<String>, CliRun) {
    let order = redis_cli_master_order(entry, names);
    eprintln!("{step} redis-cli master order: {order:?}");
    let mut args = strings(&[
        "--cluster",
        "rebalance",
        &entry.address(),
        "--cluster-use-empty-masters",
        "--cluster-weight",
    ]);
    args.extend_from_slice(weights);
    let run = cli(&args);
    eprintln!("{step} redis-cli moves: {:?}", moves(&run, names));
    (order, run)
}

/// The order in which redis-cli loads the masters through `entry`
/// (`clusterManagerLoadInfoFromNode`: the entry node, then the other nodes in the order of the
/// entry node's `CLUSTER NODES`), as `p1`.. names; replicas are left out, as rebalance does.
fn redis_cli_master_order(entry: &Server, names: &[String]) -> Vec<String> {
    let text = cluster::cluster_nodes(entry).expect("CLUSTER NODES");
    let nodes = cluster::parse_cluster_nodes(&text).expect("CLUSTER NODES");
    let myself = nodes.iter().filter(|n| n.has("myself"));
    let others = nodes.iter().filter(|n| !n.has("myself"));
    myself
        .chain(others)
        .filter(|n| n.has("master"))
        .map(|n| rename(&n.address, names))
        .collect()
}

#[test]
fn topology_matches_redis_cli_cluster() {
    let started = Instant::now();
    let servers: Vec<Server> = (0..5).map(|_| start_node()).collect();
    let [p1, p2, p3, p4, p5] = &servers[..] else {
        unreachable!()
    };
    let names: Vec<String> = servers.iter().map(Server::address).collect();
    let name = |i: usize| names[i].as_bytes();

    let mut topo = Topology::new(Flavour::Native, None, false).expect("topology");

    // Step 1: `redis-cli --cluster create p1 p2 p3 --cluster-replicas 0`.
    let create = cli(&strings(&[
        "--cluster",
        "create",
        &p1.address(),
        &p2.address(),
        &p3.address(),
        "--cluster-replicas",
        "0",
        "--cluster-yes",
    ]));
    // redis-cli prints the layout it is about to apply, e.g. "Master[0] -> Slots 0 - 5460".
    assert!(
        create.stdout.contains("Master[0] -> Slots 0 - 5460"),
        "{}",
        create.stdout
    );
    let real = wait_converged(p1, &[p1, p2, p3]);
    topo.add(&[name(0), name(1), name(2)], None, Limits::NONE)
        .expect("add p1..p3");
    assert_same_table("create p1 p2 p3", &real, &topo);

    // Step 2: add p4 (empty master), then rebalance with p4 at weight 2.
    cli(&strings(&[
        "--cluster",
        "add-node",
        &p4.address(),
        &p1.address(),
    ]));
    wait_converged(p1, &[p1, p2, p3, p4]);
    let p2_id = node_id(p2);
    let p4_id = node_id(p4);
    // Balances (16384/5 = 3276.8 per unit of weight): p1 5461-3276 = 2185, p2 5462-3276 = 2186,
    // p3 2185, p4 0-6553 = -6553, minus the rounding surplus 3 => -6556. The p1/p3 tie does not
    // change the result (both give their lowest 2185 slots to p4).
    let (_, rebalance) = run_rebalance(p1, &names, "step 2", &[format!("{p4_id}=2")]);
    assert!(
        !moves(&rebalance, &names).is_empty(),
        "redis-cli did not rebalance:\n{}",
        rebalance.stdout
    );
    let real = wait_converged(p1, &[p1, p2, p3, p4]);
    topo.add(&[name(3)], Some(2), Limits::NONE).expect("add p4");
    assert_same_table("add-node p4 + rebalance (p4 weight 2)", &real, &topo);

    // Step 3: drain p2 (weight 0), keeping p4 at weight 2 as the engine does (redis-cli does not
    // remember weights between runs). Balances (16384/4 = 4096 per unit): p1 3276-4096 = -820,
    // p2 3276-0 = 3276, p3 -820, p4 6556-8192 = -1636. p1 and p3 tie at -820: the receiver
    // that comes first gets p2's lower 820 slots. In redis-cli that is the first in its loaded
    // order after a stable sort: p1, the entry node, always loads first; in the engine p1 comes
    // first by insertion order. So both give p1 the lower range.
    let weights = [format!("{p2_id}=0"), format!("{p4_id}=2")];
    let (order, _) = run_rebalance(p1, &names, "step 3", &weights);
    assert_eq!(order.first().map(String::as_str), Some("p1"));
    // Redis 7.0 (cluster-allow-replica-migration yes, the default) turns a master that loses
    // its last slot into a replica of the node that took it, so p2 is now a replica of p3: it
    // stays a cluster member, owning nothing.
    let real = wait_converged(p1, &[p1, p2, p3, p4]);
    assert_eq!(
        counts(&real).get(&p2.address()),
        None,
        "p2 still owns slots after the drain"
    );
    assert_eq!(topo.del(&[name(1)]), 1);
    assert_same_table("rebalance draining p2 (weight 0)", &real, &topo);

    // Step 4: remove the drained p2 from the cluster, add p5 (weight 1), rebalance.
    cli(&strings(&["--cluster", "del-node", &p1.address(), &p2_id]));
    cli(&strings(&[
        "--cluster",
        "add-node",
        &p5.address(),
        &p1.address(),
    ]));
    wait_converged(p1, &[p1, p3, p4, p5]);
    // Balances (16384/5 = 3276.8 per unit): p1 4096-3276 = 820, p3 820, p4 8192-6553 = 1639,
    // p5 -3276 minus the rounding surplus 3 => -3279. All donors feed p5, so the p1/p3 tie
    // does not change the result.
    run_rebalance(p1, &names, "step 4", &[format!("{p4_id}=2")]);
    let real = wait_converged(p1, &[p1, p3, p4, p5]);
    topo.add(&[name(4)], None, Limits::NONE).expect("add p5");
    assert_same_table("del-node p2, add-node p5 + rebalance", &real, &topo);

    eprintln!("scenario took {:?}", started.elapsed());
}
