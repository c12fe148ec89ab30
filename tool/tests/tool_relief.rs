//! Relieving a full cluster (issue 49), on every server `make test` runs: three masters with a
//! replica each at 90% of their `maxmemory` (under `noeviction`, a store; under `allkeys-lru`,
//! a cache, in tool_relief_cache.rs), small keys under hash tags and a few strings of 1 to 3 MiB, a
//! client reading, overwriting a fixed set of keys and adding small new ones throughout; a
//! fourth master and its replica add-node'd with the same `maxmemory`. `ringslot predict
//! --rebalance --by memory` says the plan fits, and `ringslot apply` of it completes: nothing
//! evicted, every key and acknowledged write intact, every replica equal to its master, the
//! fullest master at 80% of its `maxmemory` or less, the new master at its share within twice
//! the plan's tolerance, and the client saw no error but `OOM` (none once the run was done).
//! On Valkey 9.1.2 the same with `--atomic`. And a plan `predict` says fits runs to its end: a
//! joining master whose `maxmemory` is below its share, big keys, replicas and a client, the
//! plan by bytes capped to fit, `apply` completing it with no memory stop and each master
//! ending within the headroom of what `predict` said.

mod common;

use common::live::*;
use common::relief::*;
use common::ringslot;
use ringslot_engine::key_slot;
use ringslot_harness::cluster::has_atomic_slot_migration;
use ringslot_harness::prelude::*;
use ringslot_harness::relief::FullCluster;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn a_store_near_full_is_relieved() {
    relieve("noeviction", false);
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

#[test]
fn a_plan_that_predict_says_fits_runs_to_its_end() {
    // The Valkey 9.1.2 trial, scaled: three masters with a replica each and no
    // maxmemory, small keys, big strings, a hash of 40000 fields and a string of 4.8 MiB; a
    // fourth master and its replica joined under allkeys-lru with a maxmemory of 60% of a
    // quarter of the data (below its share), a client throughout. The plan by bytes is capped
    // to fit, predict's walk finds no moment past a limit, and apply completes it without a
    // memory stop; each master ends within the headroom of what predict said it would.
    let builder = || Server::builder().no_module();
    let mut full = FullCluster::start(KEYS, BIG, builder).unwrap_or_else(|e| panic!("{e}"));
    full.big_hash("{bighash}", 40_000)
        .unwrap_or_else(|e| panic!("{e}"));
    let owners = slot_owners(&full.cluster);
    let string_owner = owners[usize::from(key_slot(b"{bigstring}"))]
        .clone()
        .unwrap();
    let owner = full
        .cluster
        .nodes
        .iter()
        .find(|s| s.address() == string_owner)
        .unwrap();
    call(
        &mut owner.client(),
        &[b"SET", b"{bigstring}", &vec![b's'; 4800 * 1024]],
    )
    .unwrap();
    let used: f64 = (0..3)
        .map(|m| info(&full.cluster.nodes[m], "memory", "used_memory"))
        .sum();
    let limit = (0.6 * used / 4.0) as u64;
    full.join(limit, "allkeys-lru", builder)
        .unwrap_or_else(|e| panic!("{e}"));
    let joining = full.joining.unwrap_or_default();
    let cluster = &full.cluster;
    let target = cluster.nodes[joining].address();
    let url = cluster.nodes[0].url();
    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let app = full.client(stop.clone(), done.clone());

    let predicted = ringslot(&[
        "predict",
        "--url",
        &url,
        "--rebalance",
        "--by",
        "bytes",
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
    assert!(
        p["by_weight"]["capped"].to_string().contains(&target),
        "the joining master's share is cut to its room: {}",
        p["by_weight"]
    );
    let walk = p["capacity"]["walks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["plan"] == "by bytes" && w["walk"]["method"] == "per_key")
        .unwrap_or_else(|| panic!("the plan by bytes' walk: {}", p["capacity"]))["walk"]
        .clone();
    assert!(walk["first"].is_null(), "predict says it fits: {walk}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    std::fs::write(&path, &stdout).unwrap();
    let applied = ringslot(&["apply", path.to_str().unwrap(), "--url", &url, "--yes"]);
    done.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    let seen = app.join().unwrap();
    assert_eq!(
        applied.status.code(),
        Some(0),
        "apply of a plan predict said fits:\n{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    assert!(
        seen.other.is_empty(),
        "the client's errors: {:?}",
        seen.other
    );
    assert_eq!(
        info(&cluster.nodes[joining], "stats", "evicted_keys"),
        0.0,
        "the joining master evicted keys"
    );
    // Each master ends within the headroom (10% of its maxmemory, or of its predicted end
    // where it has none) of what predict's walk said.
    settled(cluster);
    for n in walk["nodes"].as_array().unwrap() {
        if !n["replica_of"].is_null() {
            continue;
        }
        let address = n["address"].as_str().unwrap();
        let s = cluster
            .nodes
            .iter()
            .find(|s| s.address() == address)
            .unwrap();
        let (end, maxmemory) = (n["end"].as_f64().unwrap(), n["maxmemory"].as_f64().unwrap());
        let used = info(s, "memory", "used_memory");
        let allowed = 0.1 * if maxmemory > 0.0 { maxmemory } else { end };
        eprintln!("{address}: predicted {end:.0}, ended at {used:.0} (maxmemory {maxmemory:.0})");
        assert!(
            (used - end).abs() <= allowed,
            "{address} ended at {used:.0}, predicted {end:.0}"
        );
    }
}
