//! `ringslot predict` on a real cluster started here: the read-only way changes nothing on
//! the cluster (keyspace digests and `rdb_changes_since_last_save` before and after) and
//! equals one standalone server's `RING.MOVES ... KEYS` over the same keys; keys past their
//! expiry are counted by neither way; a cluster with an open slot or a failing node is
//! refused; a master without the module makes the prediction read-only. (Predictions checked
//! against real rebalances: the benchmark program's local runs, bench/tests/cluster.rs.)

mod common;

use common::{csv_table, ok, ringslot};
use ringslot_engine::key_slot;
use ringslot_harness::cluster::{cluster_nodes, Cluster};
use ringslot_harness::prelude::*;
use ringslot_harness::redis;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// The rows of the CSV the tool wrote, keyed by scheme.
fn csv_rows(path: &Path) -> HashMap<String, HashMap<String, String>> {
    csv_table(path)
        .into_iter()
        .map(|row| (row["scheme"].clone(), row))
        .collect()
}

fn n(row: &HashMap<String, String>, col: &str) -> i64 {
    row[col]
        .parse()
        .unwrap_or_else(|_| panic!("{col} = {:?}", row[col]))
}

const SLOTS_ROW: &str = "slots (redis-cli --cluster rebalance)";

/// `DEBUG DIGEST` and `rdb_changes_since_last_save` of a server.
fn untouched(con: &mut redis::Connection) -> (String, String) {
    let digest = text(&q(con, "DEBUG DIGEST"));
    let info = text(&q(con, "INFO persistence"));
    let changes = info
        .lines()
        .find(|l| l.starts_with("rdb_changes_since_last_save:"))
        .unwrap()
        .trim()
        .to_string();
    (digest, changes)
}

#[test]
fn read_only_changes_nothing_equals_one_server_and_refuses_bad_clusters() {
    let mut cluster = Cluster::start(3, Server::builder).unwrap_or_else(|e| panic!("{e}"));
    let seed = cluster.nodes[0].url();
    // 20000 keys, each written to its master; the same keys on a standalone server.
    let owners = ringslot_harness::cluster::owners(
        &ringslot_harness::cluster::parse_cluster_nodes(&cluster_nodes(&cluster.nodes[0]).unwrap())
            .unwrap(),
    );
    let mut cons: HashMap<String, redis::Connection> = cluster
        .nodes
        .iter()
        .map(|s| (s.address(), s.client()))
        .collect();
    let standalone = Server::start();
    let mut one = standalone.client();
    for i in 0..20000 {
        let key = format!("key:{i}");
        let owner = owners[usize::from(key_slot(key.as_bytes()))]
            .clone()
            .unwrap();
        let con = cons.get_mut(&owner).unwrap();
        call(con, &[b"SET", key.as_bytes(), b"v"]).unwrap();
        call(&mut one, &[b"SET", key.as_bytes(), b"v"]).unwrap();
    }
    let before: HashMap<String, (String, String)> = cons
        .iter_mut()
        .map(|(a, c)| (a.clone(), untouched(c)))
        .collect();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    let md = ok(&[
        "predict",
        "--url",
        &seed,
        "--out",
        dir,
        "--add",
        "10.9.9.9:7000",
        "--no-module",
        "--max-keys-per-sec",
        "0",
    ]);
    assert!(md.contains("**Read-only** (--no-module)"), "{md}");
    // Nothing changed: every master's keyspace digest and its count of writes.
    for (a, c) in cons.iter_mut() {
        assert_eq!(untouched(c), before[a], "{a}");
    }
    let rows = csv_rows(&out.path().join("predict.csv"));
    // --json: one object with the report's figures.
    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "predict",
        "--url",
        &seed,
        "--json",
        "--add",
        "10.9.9.9:7000",
        "--no-module",
        "--max-keys-per-sec",
        "0",
    ]))
    .expect("a JSON object");
    assert_eq!(json["change"]["kind"], "add");
    assert_eq!(json["prediction"]["mode"]["way"], "read_only");
    assert_eq!(json["prediction"]["keys"], 20000);
    assert_eq!(
        json["prediction"]["slots_moved"],
        n(&rows[SLOTS_ROW], "moved")
    );
    assert_eq!(
        json["prediction"]["masters"].as_array().map(Vec::len),
        Some(4)
    );
    // The masters as redis-cli loads them from the seed: the seed, then the other masters in
    // the order of its CLUSTER NODES.
    let listed = cluster_nodes(&cluster.nodes[0]).unwrap();
    let mut masters = vec![cluster.nodes[0].address()];
    for line in listed.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields[2].contains("master") && !fields[2].contains("myself") {
            masters.push(fields[1].split('@').next().unwrap().to_string());
        }
    }
    for flavour in ["native", "ketama", "groupcache"] {
        let ring = format!("ring:{flavour}");
        q(&mut one, &format!("RING.CREATE {ring} COMPAT {flavour}"));
        q(&mut one, &format!("RING.ADD {ring} {}", masters.join(" ")));
        let reply = map(&q(
            &mut one,
            &format!("RING.MOVES {ring} ADD 10.9.9.9:7000 KEYS key:*"),
        ));
        let section = |name: &str| map(&reply[name]);
        let row = &rows[&format!("ring ({flavour})")];
        assert_eq!(n(row, "keys"), int(&reply["members"]), "{flavour}");
        assert_eq!(n(row, "moved"), int(&section("ring")["moved"]), "{flavour}");
        assert_eq!(
            n(row, "moved between old masters"),
            int(&section("ring")["between_old"]),
            "{flavour}"
        );
        // A fresh cluster has the layout of --cluster create, which RING.ADD lays out too.
        assert_eq!(
            n(&rows[SLOTS_ROW], "moved"),
            int(&section("slots")["moved"]),
            "{flavour}"
        );
        if flavour == "native" {
            let modulo = &rows["modulo (hash mod N)"];
            assert_eq!(n(modulo, "moved"), int(&section("modulo")["moved"]));
            assert_eq!(
                n(modulo, "moved between old masters"),
                int(&section("modulo")["between_old"])
            );
        }
    }

    // Keys past their expiry that Redis has not reclaimed (active expiry off) are counted by
    // CLUSTER COUNTKEYSINSLOT but never migrated: neither way counts them. (Either way's reads
    // reclaim them, so each run gets its own.)
    let slots_moved = n(&rows[SLOTS_ROW], "moved");
    for mode in ["--no-module", "--chunk=256"] {
        for (a, c) in cons.iter_mut() {
            q(c, "DEBUG SET-ACTIVE-EXPIRE 0");
            for i in 0..3000 {
                let key = format!("gone:{mode}:{i}");
                if owners[usize::from(key_slot(key.as_bytes()))].as_deref() == Some(a.as_str()) {
                    call(c, &[b"SET", key.as_bytes(), b"v", b"PX", b"1"]).unwrap();
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
        let md = ok(&[
            "predict",
            "--url",
            &seed,
            "--out",
            dir,
            "--add",
            "10.9.9.9:7000",
            mode,
            "--flavours",
            "native",
        ]);
        let rows = csv_rows(&out.path().join("predict.csv"));
        assert_eq!(n(&rows[SLOTS_ROW], "keys"), 20000, "{mode}: {md}");
        assert_eq!(n(&rows[SLOTS_ROW], "moved"), slots_moved, "{mode}: {md}");
        assert_eq!(n(&rows["ring (native)"], "keys"), 20000, "{mode}: {md}");
    }
    for c in cons.values_mut() {
        q(c, "DEBUG SET-ACTIVE-EXPIRE 1");
    }

    // A migrating slot: refused, nothing written.
    let id1 = cluster.node_id(1).unwrap();
    let m0 = cons.get_mut(&cluster.nodes[0].address()).unwrap();
    q(m0, &format!("CLUSTER SETSLOT 100 MIGRATING {id1}"));
    let out = ringslot(&["predict", "--url", &seed, "--add", "10.9.9.9:7000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("is migrating or importing"), "{err}");
    q(m0, "CLUSTER SETSLOT 100 STABLE");

    // A master without the module (an empty one, add-node'd): the prediction runs read-only,
    // and predicts the rebalance pending with it.
    let bare = cluster
        .add_node(|| Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    let bare_address = cluster.nodes[bare].address();
    let md = ok(&["predict", "--url", &seed, "--out", dir, "--rebalance"]);
    assert!(
        md.contains(&format!(
            "**Read-only** (the module is not loaded on {bare_address})"
        )),
        "{md}"
    );
    assert!(
        md.contains(&format!("| {bare_address} | 0 | 0 | 4096 |")),
        "{md}"
    );
    // The master add-node made, named again: the error says what to run instead.
    let out = ringslot(&["predict", "--url", &seed, "--add", &bare_address]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("predict the pending rebalance with --rebalance"),
        "{err}"
    );

    // A failing master (stopped; the seed flags it `fail?` after the node timeout): refused.
    for node in &cluster.nodes {
        q(&mut node.client(), "CONFIG SET cluster-node-timeout 1000");
    }
    let stopped = cluster.nodes[2].pid().to_string();
    let signal = |sig: &str| {
        std::process::Command::new("kill")
            .args([sig, &stopped])
            .status()
            .unwrap();
    };
    signal("-STOP");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cluster_nodes(&cluster.nodes[0])
        .unwrap()
        .lines()
        .any(|l| l.contains("fail"))
    {
        if Instant::now() > deadline {
            signal("-CONT");
            panic!("the stopped master was never flagged");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = ringslot(&["predict", "--url", &seed, "--add", "10.9.9.9:7000"]);
    signal("-CONT");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&cluster.nodes[2].address()) && err.contains("is flagged"),
        "{err}"
    );
}
