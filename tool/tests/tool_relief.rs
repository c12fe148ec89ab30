//! Relieving a full cluster (issue 49), on every server `make test` runs: three masters with a
//! replica each at 90% of their `maxmemory` (under `noeviction`, a store; under
//! `allkeys-lru`, a cache), small keys under hash tags and a few strings of 1 to 3 MiB, a
//! client reading, overwriting a fixed set of keys and adding small new ones throughout; a
//! fourth master and its replica add-node'd with the same `maxmemory`. `ringslot predict
//! --rebalance --by memory` says the plan fits, and `ringslot apply` of it completes: nothing
//! evicted, every key and acknowledged write intact, every replica equal to its master, the
//! fullest master at 80% of its `maxmemory` or less, the new master at its share within the
//! plan's tolerance, and the client saw no error but `OOM` (none once the run was done). On
//! Valkey 9.1.2 the same with `--atomic`.

mod common;

use common::live::*;
use common::{ringslot, Noise};
use ringslot_engine::key_slot;
use ringslot_harness::cluster::{has_atomic_slot_migration, Cluster};
use ringslot_harness::prelude::*;
use ringslot_harness::redis;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The fill the old masters start at (`used_memory` over `maxmemory`): the "90-95%".
const FULL: f64 = 0.90;

/// The data: `keys` keys of 64 B to 1.5 KiB under 2000 hash tags (strings, and a hash of four
/// fields every fifth key), and a big string on each of the three masters, of 0.75, 1.25 and
/// 1.75 MiB (the trial had 1 to 3 MiB in masters five times as large).
fn fill_full(cluster: &Cluster, keys: usize) {
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let mut commands = Vec::new();
    for i in 0..keys {
        let key = format!("{{t{}}}:{i}", i % 2000).into_bytes();
        let n = 64 + (noise.next_u64() % 1473) as usize;
        let v = noise.bytes(n);
        commands.push(if i % 5 == 4 {
            let quarter = v.get(..n / 4).unwrap_or(&v).to_vec();
            c(&[
                b"HSET", &key, b"a", &quarter, b"b", &quarter, b"c", &quarter, b"d", &quarter,
            ])
        } else {
            c(&[b"SET", &key, &v])
        });
    }
    write(cluster, &commands);
    let owners = slot_owners(cluster);
    for (m, kib) in [768usize, 1280, 1792].into_iter().enumerate() {
        let address = cluster.nodes[m].address();
        let key = (0..)
            .map(|i| format!("big:{i}"))
            .find(|k| owners[usize::from(key_slot(k.as_bytes()))].as_deref() == Some(&address))
            .unwrap();
        let value = noise.bytes(kib << 10);
        call(
            &mut cluster.nodes[m].client(),
            &[b"SET", key.as_bytes(), &value],
        )
        .unwrap();
    }
}

/// A cluster near full: three masters with a replica each holding [`fill_full`]'s data, each
/// master and its replica at [`FULL`] of its `maxmemory` under `policy`; a fourth master with
/// a replica joined (no slots), at the largest of the three `maxmemory`. Returns it, the index
/// of the joining master, each master's `maxmemory` by address, and the keyspace as written
/// (read before the limits are set: reading it, as any client's big reply, would take a
/// full cache past its limit, where it evicts).
fn full_cluster(policy: &str, keys: usize) -> (Cluster, usize, BTreeMap<String, u64>, Keyspace) {
    let mut cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    let replicas: Vec<usize> = (0..3)
        .map(|m| {
            cluster
                .add_replica(m, || Server::builder().no_module())
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    // The nodes here are a hundredth of a small production node: their replication backlog is
    // set to Redis's default of 1 MiB (Valkey's is 10 MiB, which would be half of these nodes'
    // maxmemory where it is a percent of a production node's).
    for s in &cluster.nodes {
        q(&mut s.client(), "CONFIG SET repl-backlog-size 1048576");
    }
    fill_full(&cluster, keys);
    let written = keyspace(&cluster);
    let mut limits = BTreeMap::new();
    for (m, r) in (0..3).zip(&replicas) {
        let used = info(&cluster.nodes[m], "memory", "used_memory");
        let limit = (used / FULL) as u64;
        set_limit(&[&cluster.nodes[m], &cluster.nodes[*r]], limit, policy);
        limits.insert(cluster.nodes[m].address(), limit);
    }
    let joining = cluster
        .add_node(|| Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    q(
        &mut cluster.nodes[joining].client(),
        "CONFIG SET repl-backlog-size 1048576",
    );
    let joining_replica = cluster
        .add_replica(joining, || Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    q(
        &mut cluster.nodes[joining_replica].client(),
        "CONFIG SET repl-backlog-size 1048576",
    );
    let largest = limits.values().copied().max().unwrap_or(0);
    set_limit(
        &[&cluster.nodes[joining], &cluster.nodes[joining_replica]],
        largest,
        policy,
    );
    limits.insert(cluster.nodes[joining].address(), largest);
    cluster.converge().unwrap_or_else(|e| panic!("{e}"));
    (cluster, joining, limits, written)
}

/// What the client saw: its acknowledged writes (each key's last value), its `OOM` answers
/// and its other errors, those after the run ended apart.
#[derive(Default)]
struct Seen {
    acked: BTreeMap<String, String>,
    oom_during: u64,
    oom_after: u64,
    other: Vec<String>,
}

/// A client as an application runs one, about 300 commands a second until `stop`: it adds a
/// small new key, overwrites one of 200 keys of its own, and reads a data key (a string), in
/// turn; `done` says the run has ended (its `OOM`s are counted apart from then).
fn client(
    cluster: &Cluster,
    keys: usize,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
) -> JoinHandle<Seen> {
    let mut app = AppClient::new(cluster);
    std::thread::spawn(move || {
        let mut seen = Seen::default();
        let mut i = 0u64;
        while !stop.load(Ordering::SeqCst) {
            let (new, fixed) = (format!("w:new:{i}"), format!("w:fixed:{}", i % 200));
            // A string of the data: every fifth key is a hash.
            let n = (i as usize * 5) % keys;
            let read = format!("{{t{}}}:{n}", n % 2000);
            let value = format!("{i:016}");
            let commands = [
                (redis::cmd("SET").arg(&new).arg(&value).clone(), &new, true),
                (
                    redis::cmd("SET").arg(&fixed).arg(&value).clone(),
                    &fixed,
                    true,
                ),
                (redis::cmd("GET").arg(&read).clone(), &read, false),
            ];
            for (cmd, key, writes) in commands {
                let errors = app.errors.len();
                let answered = app.exec(&cmd, key_slot(key.as_bytes())).is_some();
                if answered && writes {
                    seen.acked.insert(key.clone(), value.clone());
                }
                for e in app.errors.drain(errors..) {
                    match (e.starts_with("OOM"), done.load(Ordering::SeqCst)) {
                        (true, false) => seen.oom_during += 1,
                        (true, true) => seen.oom_after += 1,
                        (false, _) => seen.other.push(e),
                    }
                }
            }
            i += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
        seen
    })
}

/// Each acknowledged write of `seen` read back through a cluster client: every key holds its
/// last acknowledged value.
fn assert_acked(cluster: &Cluster, seen: &Seen) {
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
fn settled(cluster: &Cluster) {
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
fn relieve(policy: &str, atomic: bool) {
    let keys = 60_000;
    let (cluster, joining, limits, before) = full_cluster(policy, keys);
    let url = cluster.nodes[0].url();
    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let app = client(&cluster, keys, stop.clone(), done.clone());

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
    let full: Vec<&serde_json::Value> = p["risks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "full")
        .collect();
    assert_eq!(
        full.len(),
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
        &keyspace(&cluster),
        "the data keys after the relief",
    );
    assert_acked(&cluster, &seen);
    check_clean(&cluster);
    assert_replicas_equal(&cluster);
    // The fullest master at 80% of its maxmemory or less; the new one at its share: its
    // fill (used_memory over maxmemory, what the plan by memory evens) within the plan's
    // tolerance of the mean.
    settled(&cluster);
    let fills: BTreeMap<String, f64> = limits
        .iter()
        .map(|(address, limit)| {
            let s = cluster
                .nodes
                .iter()
                .find(|s| s.address() == *address)
                .unwrap();
            (
                address.clone(),
                info(s, "memory", "used_memory") / *limit as f64,
            )
        })
        .collect();
    eprintln!("fills after: {fills:?}");
    for (address, fill) in &fills {
        assert!(*fill <= 0.80, "{address} ends at {:.1}%", 100.0 * fill);
    }
    let mean = fills.values().sum::<f64>() / fills.len() as f64;
    let new = fills[&cluster.nodes[joining].address()];
    let tolerance = weight["tolerance"].as_f64().unwrap();
    assert!(
        (new / mean - 1.0).abs() <= tolerance * 1.5,
        "the new master's fill {new:.3} against the mean {mean:.3}"
    );
}

#[test]
fn a_store_near_full_is_relieved() {
    relieve("noeviction", false);
}

#[test]
fn a_cache_near_full_is_relieved() {
    relieve("allkeys-lru", false);
}

#[test]
fn on_valkey_a_store_near_full_is_relieved_by_atomic_slot_migration() {
    let probe = Server::builder().no_module().start().unwrap();
    if !has_atomic_slot_migration(&probe) {
        eprintln!("skipped: no atomic slot migration on this server");
        return;
    }
    drop(probe);
    relieve("noeviction", true);
}
