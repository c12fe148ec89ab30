//! The program's cache side against real components: a fleet behind twemproxy and the same
//! keys on a Redis Cluster, a fleet of memcached servers behind nginx (`ringslot members`,
//! over a real memcached, is the tool's: tested in tool/tests/tool_members.rs).

mod common;

use common::{csv_table, ok};

/// `cache --local` on a small fleet writing to `out`: 3 backends, 5000 keys, short runs; then
/// `extra`.
fn small_run(out: &std::path::Path, extra: &[&str]) -> String {
    let mut args = vec![
        "--out",
        out.to_str().unwrap(),
        "cache",
        "--local",
        "--backends",
        "3",
        "--keys",
        "5000",
        "--interval",
        "2000",
        "--warmup-min",
        "20000",
        "--warmup-max",
        "60000",
        "--probe",
        "4000",
        "--after-max",
        "20000",
    ];
    args.extend_from_slice(extra);
    ok(&args)
}

#[test]
fn a_small_cache_fleet_behind_twemproxy_and_its_cluster_side() {
    // Four backends behind twemproxy (ketama, then modula), one joining; then the same keys on
    // a 3-master Redis Cluster and a fourth master. What must hold whatever the timing: the
    // keys ringslot's engine says move are those RING.MOVES counts on the backends, and on the
    // cluster the keys and bytes the real rebalance moved are those predicted.
    let out = tempfile::tempdir().unwrap();
    let stdout = small_run(out.path(), &["--maxmemory-mb", "1", "--cases", "join"]);
    assert!(stdout.contains("| join | twemproxy ketama |"), "{stdout}");
    assert!(stdout.contains("| join | twemproxy modula |"), "{stdout}");
    for row in csv_table(&out.path().join("cache.csv")) {
        let moved = &row["moved cached keys"];
        let (engine, rest) = moved.split_once(" (").expect("n (m by RING.MOVES)");
        assert_eq!(rest, format!("{engine} by RING.MOVES)"), "{row:?}");
        assert!(engine.parse::<u64>().unwrap() > 0);
        let predicted: f64 = row["instantaneous extra miss share: predicted (exact)"]
            .parse()
            .unwrap();
        assert!(predicted > 0.0 && predicted < 1.0, "{row:?}");
    }
    let cluster = csv_table(&out.path().join("cache-cluster.csv"));
    assert_eq!(cluster.len(), 1);
    let c = &cluster[0];
    assert_eq!(
        c["keys migrated: predicted"], c["keys migrated: real"],
        "{c:?}"
    );
    assert_eq!(
        c["bytes migrated: predicted"], c["bytes migrated: real"],
        "{c:?}"
    );
    assert!(c["keys migrated: predicted"].parse::<u64>().unwrap() > 0);
    let svg = std::fs::read_to_string(out.path().join("cache.svg")).unwrap();
    assert!(svg.contains("measured at the switch (probe)"));
}

#[test]
fn a_small_cache_fleet_behind_nginx() {
    // Three memcached servers behind nginx's hash $arg_key consistent, one joining, then one
    // leaving. What must hold whatever the timing: a row per case with cached keys, some of
    // which move, no LFU side (memcached has no counters), and predictions that are shares.
    let out = tempfile::tempdir().unwrap();
    let stdout = small_run(
        out.path(),
        &[
            "--no-cluster",
            "--distributions",
            "nginx",
            "--maxmemory-mb",
            "2",
            "--value-min",
            "100",
            "--value-max",
            "120",
            "--cases",
            "join,leave",
        ],
    );
    assert!(stdout.contains("| join | nginx consistent |"), "{stdout}");
    assert!(stdout.contains("| leave | nginx consistent |"), "{stdout}");
    assert!(stdout.contains("memcached (LRU) behind nginx"), "{stdout}");
    let rows = csv_table(&out.path().join("cache.csv"));
    assert_eq!(rows.len(), 2);
    for row in rows {
        let cached: u64 = row["cached keys"].parse().unwrap();
        let moved: u64 = row["moved cached keys"].parse().unwrap();
        assert!(moved > 0 && moved < cached, "{row:?}");
        assert_eq!(row["predicted (LFU)"], "-", "{row:?}");
        let at_once: f64 = row["instantaneous extra miss share: predicted (exact)"]
            .parse()
            .unwrap();
        assert!(at_once > 0.0 && at_once < 1.0, "{row:?}");
        // 0 when every key fits after the change.
        let after: f64 = row["steady miss share after: predicted"].parse().unwrap();
        assert!((0.0..1.0).contains(&after), "{row:?}");
        assert!(
            row["LRU (Che) model: steady after"].contains("memory share"),
            "{row:?}"
        );
    }
}
