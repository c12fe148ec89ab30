//! The relief job (issue 49) shared by tool_relief.rs (a store) and tool_relief_cache.rs (a
//! cache), each run on every server: a cluster near full and [`relieve`], see tool_relief.rs's
//! docs.

use super::live::*;
use super::ringslot;
use ringslot_engine::key_slot;
use ringslot_harness::cluster::Cluster;
use ringslot_harness::prelude::*;
use ringslot_harness::redis;
use ringslot_harness::relief::{FullCluster, Seen};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The fill the old masters start at (`used_memory` over `maxmemory`): the "90-95%".
pub const FULL: f64 = 0.90;

/// The small keys, and the first big string's bytes (0.75, 1.25 and 1.75 MiB: the issue's
/// trial had 1 to 3 MiB in masters five times as large).
pub const KEYS: usize = 60_000;
pub const BIG: usize = 768 * 1024;

/// A cluster near full under `policy` ([`FullCluster`]), and its keyspace as written (read
/// before the limits are set: reading it, as any client's big reply, would take a full cache
/// past its limit, where it evicts).
pub fn full_cluster(policy: &str) -> (FullCluster, Keyspace) {
    let builder = || Server::builder().no_module();
    let mut full = FullCluster::start(KEYS, BIG, builder).unwrap_or_else(|e| panic!("{e}"));
    let written = keyspace(&full.cluster);
    full.fill_up(FULL, policy, builder)
        .unwrap_or_else(|e| panic!("{e}"));
    (full, written)
}

/// Each acknowledged write of `seen` read back through a cluster client: every key holds its
/// last acknowledged value.
pub fn assert_acked(cluster: &Cluster, seen: &Seen) {
    let mut app = AppClient::new(cluster);
    for (key, value) in &seen.acked {
        let got = app.exec(redis::cmd("GET").arg(key), key_slot(key.as_bytes()));
        let got = match got {
            Some(redis::Value::Nil) | None => None,
            Some(v) => Some(text(&v)),
        };
        if got.as_ref() != Some(value) {
            let slot = key_slot(key.as_bytes());
            let holders: Vec<String> = cluster
                .nodes
                .iter()
                .filter(|s| {
                    let n: i64 = redis::cmd("EXISTS")
                        .arg(key)
                        .query(&mut s.client())
                        .unwrap_or(0);
                    n > 0
                })
                .map(|s| s.address())
                .collect();
            panic!(
                "acknowledged write {key} (slot {slot}, owner {:?}): {got:?}, not {value}; on {holders:?}",
                slot_owners(cluster)[usize::from(slot)]
            );
        }
    }
}

/// Waits (at most a minute) until no node of `cluster` has frees pending in the background
/// (`lazyfree_pending_objects`: Valkey frees a migrated key late).
pub fn settled(cluster: &Cluster) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for s in &cluster.nodes {
        while info(s, "memory", "lazyfree_pending_objects") > 0.0 {
            assert!(
                Instant::now() < deadline,
                "{} frees for a minute",
                s.address()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The relief job on a cluster near full under `policy`, key by key or (`atomic`) by atomic
/// slot migration: see the module docs.
pub fn relieve(policy: &str, atomic: bool) {
    let (full, before) = full_cluster(policy);
    let cluster = &full.cluster;
    let joining = full.joining.unwrap_or_default();
    let url = cluster.nodes[0].url();
    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let app = full.client(stop.clone(), done.clone());

    // predict: the old masters full now, the plan by memory fits (apply's own walk).
    let predicted = ringslot(&[
        "predict",
        "--url",
        &url,
        "--rebalance",
        "--by",
        "memory",
        "--max-keys-per-sec",
        "0",
        "--json",
    ]);
    let stdout = String::from_utf8_lossy(&predicted.stdout).into_owned();
    assert!(
        predicted.status.success(),
        "predict: {}",
        String::from_utf8_lossy(&predicted.stderr)
    );
    let plan: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let p = &plan["prediction"];
    let full_now: Vec<&serde_json::Value> = p["risks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "full")
        .collect();
    assert_eq!(
        full_now.len(),
        3,
        "the three old masters are full: {}",
        p["risks"]
    );
    let walk = p["capacity"]["walks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["plan"] == "by memory" && w["walk"]["method"] == "per_key")
        .unwrap_or_else(|| panic!("the plan by memory's walk: {}", p["capacity"]));
    assert!(
        walk["walk"]["first"].is_null(),
        "predict says it fits: {walk}"
    );
    let weight = &p["by_weight"];
    assert_eq!(weight["by_maxmemory"], true, "{weight}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    std::fs::write(&path, &stdout).unwrap();

    // apply: it completes.
    let mut args = vec!["apply", path.to_str().unwrap(), "--url", &url, "--yes"];
    if atomic {
        args.push("--atomic");
    }
    let started = Instant::now();
    let applied = ringslot(&args);
    let seconds = started.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&applied.stderr).into_owned();
    done.store(true, Ordering::SeqCst);
    if applied.status.code() != Some(0) {
        for s in &cluster.nodes {
            let m = text(&q(&mut s.client(), "INFO memory"));
            let pick: Vec<&str> = m
                .lines()
                .filter(|l| {
                    l.starts_with("used_memory:")
                        || l.starts_with("mem_not_counted")
                        || l.starts_with("maxmemory:")
                        || l.starts_with("mem_clients")
                        || l.starts_with("mem_replication_backlog")
                        || l.starts_with("used_memory_dataset:")
                        || l.starts_with("mem_total_replication")
                })
                .collect();
            eprintln!("{}: {}", s.address(), pick.join(" "));
        }
    }
    assert_eq!(applied.status.code(), Some(0), "apply:\n{err}");
    // A while more of the client once the run is done.
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::SeqCst);
    let seen = app.join().unwrap();
    eprintln!(
        "relief under {policy}{}: apply {seconds:.1} s; the client's writes acknowledged {}, \
         OOM during {} and after {}",
        if atomic { ", atomic" } else { "" },
        seen.acked.len(),
        seen.oom_during,
        seen.oom_after
    );

    // Nothing evicted; the client saw no error but OOM, and none once the run was done.
    for s in &cluster.nodes {
        assert_eq!(
            info(s, "stats", "evicted_keys"),
            0.0,
            "{} evicted keys",
            s.address()
        );
    }
    assert!(
        seen.other.is_empty(),
        "the client's errors: {:?}",
        seen.other
    );
    assert_eq!(seen.oom_after, 0, "OOM once the run was done");
    // Every key and acknowledged write intact, every replica equal to its master.
    assert_same(
        &before,
        &keyspace(cluster),
        "the data keys after the relief",
    );
    assert_acked(cluster, &seen);
    check_clean(cluster);
    assert_replicas_equal(cluster);
    // The fullest master at 80% of its maxmemory or less; the new one at its share: its
    // fill (used_memory over maxmemory, what the plan by memory evens) within twice the
    // plan's tolerance of the mean. Twice: the client adds keys to the old masters all
    // along, and on Redis 8.2.3 a source ends some 0.5 to 0.8 MB above what its keys' memory
    // says it frees (0.921 of the mean seen once there, with a tolerance of 0.05).
    settled(cluster);
    let fills = full.fills();
    eprintln!("fills after: {fills:?}");
    for (address, fill) in &fills {
        assert!(*fill <= 0.80, "{address} ends at {:.1}%", 100.0 * fill);
    }
    let mean = fills.values().sum::<f64>() / fills.len() as f64;
    let new = fills[&cluster.nodes[joining].address()];
    let tolerance = weight["tolerance"].as_f64().unwrap();
    assert!(
        (new / mean - 1.0).abs() <= tolerance * 2.0,
        "the new master's fill {new:.3} against the mean {mean:.3}"
    );
}
