//! `ringslot-bench cluster` on real clusters started here: its slot-scheme prediction must be
//! what the real `redis-cli --cluster rebalance` then moves (per-slot counts and a SCAN of
//! every master, for a master joining 3 and one leaving 4); its ring and modulo totals over
//! the masters must be one standalone server's `RING.MOVES ... KEYS` over the same keys; and
//! it must refuse a cluster with a migrating slot or a master without the module before
//! writing anything.

mod common;

use common::{bench, csv_table, ok};
use ringslot_engine::key_slot;
use ringslot_harness::cluster::{cluster_nodes, Cluster};
use ringslot_harness::prelude::*;
use ringslot_harness::redis;
use std::collections::HashMap;
use std::path::Path;

/// The rows of the CSV the program wrote, keyed by scheme.
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

/// Runs a local scenario and checks predicted against real.
fn local_run(extra: &[&str], name: &str) {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    let mut args = vec!["--out", dir, "cluster", "--keys", "30000", "--name", name];
    args.extend_from_slice(extra);
    let md = ok(&args);
    let rows = csv_rows(&out.path().join(format!("{name}.csv")));
    let slots = &rows["slots (redis-cli --cluster rebalance)"];
    assert_eq!(n(slots, "keys"), 30000);
    assert!(n(slots, "moved") > 5000, "{md}");
    assert_eq!(n(slots, "moved"), n(slots, "real moved"), "{md}");
    assert!(
        md.contains(&format!(
            "a SCAN of every master before and after: {}",
            n(slots, "moved")
        )),
        "{md}"
    );
    assert!(
        md.contains("slot owners after the real rebalance equal the plan's"),
        "{md}"
    );
    assert!(
        md.contains("keys moved; equal to the sum of the moved slots' counts"),
        "{md}"
    );
    for scheme in [
        "ring (native)",
        "ring (ketama)",
        "ring (groupcache)",
        "modulo (hash mod N)",
    ] {
        assert_eq!(n(&rows[scheme], "keys"), 30000, "{scheme}");
    }
}

#[test]
fn predicted_slot_moves_equal_a_real_join() {
    local_run(&["--local", "3"], "join");
}

#[test]
fn predicted_slot_moves_equal_a_real_drain() {
    local_run(&["--local", "4", "--remove"], "drain");
}

#[test]
fn cluster_totals_equal_one_server_and_bad_clusters_are_refused() {
    let mut cluster = Cluster::start(3, Server::builder).unwrap_or_else(|e| panic!("{e}"));
    let seed = cluster.nodes[0].url();
    // 20000 keys, each written to its master; the same keys on a standalone server.
    let owners = ringslot_harness::cluster::owners(
        &ringslot_harness::cluster::parse_cluster_nodes(
            &ringslot_harness::cluster::cluster_nodes(&cluster.nodes[0]).unwrap(),
        )
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
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    ok(&[
        "--url",
        &seed,
        "--out",
        dir,
        "cluster",
        "--add",
        "10.9.9.9:7000",
        "--chunk",
        "1000",
    ]);
    let rows = csv_rows(&out.path().join("cluster.csv"));
    // Nothing of the run is left on the masters.
    let total: i64 = cons.values_mut().map(|c| int(&q(c, "DBSIZE"))).sum();
    assert_eq!(total, 20000);
    // The masters as the mirror on the seed lists them: the seed, then the other masters in
    // the order of its CLUSTER NODES (redis-cli's order from that node).
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
        let slots = &rows["slots (redis-cli --cluster rebalance)"];
        assert_eq!(
            n(slots, "moved"),
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

    // A migrating slot: refused, nothing written.
    let id1 = cluster.node_id(1).unwrap();
    let m0 = cons.get_mut(&cluster.nodes[0].address()).unwrap();
    q(m0, &format!("CLUSTER SETSLOT 100 MIGRATING {id1}"));
    let out = bench(&["--url", &seed, "cluster", "--add", "10.9.9.9:7000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("is migrating or importing"), "{err}");
    q(m0, "CLUSTER SETSLOT 100 STABLE");

    // A master without the module (an empty one): refused, nothing written.
    let bare = cluster
        .add_node(|| Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    let out = bench(&["--url", &seed, "cluster", "--add", "10.9.9.9:7000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!(
            "the ringslot module is not loaded on {}",
            cluster.nodes[bare].address()
        )),
        "{err}"
    );
    let total: i64 = cons.values_mut().map(|c| int(&q(c, "DBSIZE"))).sum();
    assert_eq!(total, 20000);
}
