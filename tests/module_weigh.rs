//! `RING.MOVES ... WEIGH BYTES | HITS`: moved bytes and moved hits beside moved keys, and each
//! node's load after the change. Expected values come from the same server: `MEMORY USAGE` of
//! each key, the accesses the test itself made (with `lfu-log-factor 0` and `lfu-decay-time 0`
//! Redis' LFU counter counts every access exactly, `evict.c` `LFULogIncr` with probability
//! `1 / ((c - 5) * 0 + 1) = 1`), and `RING.OWNERS` on a ring changed for real.

use ringslot_harness::prelude::*;
use ringslot_harness::redis;
use std::collections::BTreeMap;

/// A server whose LFU counters count exactly (factor 0, no decay).
fn lfu_server() -> Server {
    Server::start_with(
        &[],
        &[
            "--maxmemory-policy",
            "allkeys-lfu",
            "--lfu-log-factor",
            "0",
            "--lfu-decay-time",
            "0",
        ],
    )
}

/// Owners of `member` under each scheme on ring `key`, by scheme name.
fn owners(con: &mut redis::Connection, key: &str, member: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let reply = call(con, &[b"RING.OWNERS", key.as_bytes(), member]).unwrap();
    map(&reply)
        .into_iter()
        .map(|(s, o)| (s, opt_bytes(&o).unwrap_or_default()))
        .collect()
}

#[test]
fn moved_bytes_and_hits_are_those_of_the_keys_that_change_owner() {
    let server = lfu_server();
    let mut con = server.client();
    q(&mut con, "RING.ADD w:ring a b c");
    q(&mut con, "RING.ADD w:after a b c");
    q(&mut con, "RING.ADD w:after d");
    // 300 keys of varied sizes, read 0 to 40 times each; one hash tag fat and hot.
    let mut keys: Vec<(Vec<u8>, u64)> = Vec::new();
    for i in 0..300u64 {
        let name = if i % 10 == 0 {
            format!("k:{{hot}}:{i}")
        } else {
            format!("k:{i}")
        };
        let size = if i % 10 == 0 {
            2000
        } else {
            10 + (i * 37) % 300
        };
        let reads = if i % 10 == 0 { 40 } else { (i * 7) % 13 };
        let value = "v".repeat(size as usize);
        call(&mut con, &[b"SET", name.as_bytes(), value.as_bytes()]).unwrap();
        for _ in 0..reads {
            call(&mut con, &[b"GET", name.as_bytes()]).unwrap();
        }
        keys.push((name.into_bytes(), reads));
    }
    // The exact answers, key by key.
    let mut total = (0i64, 0i64);
    let mut moved: BTreeMap<String, (i64, i64, i64)> = BTreeMap::new();
    // Per scheme and node after the change: keys, bytes, hits.
    let mut load: BTreeMap<(String, Vec<u8>), [i64; 3]> = BTreeMap::new();
    for (name, reads) in &keys {
        let bytes = int(&call(&mut con, &[b"MEMORY", b"USAGE", name]).unwrap());
        // The counter as Redis keeps it: 5 at creation, one more per read.
        let freq = int(&call(&mut con, &[b"OBJECT", b"FREQ", name]).unwrap());
        assert_eq!(freq, 5 + *reads as i64, "{name:?}");
        total.0 += bytes;
        total.1 += *reads as i64;
        let before = owners(&mut con, "w:ring", name);
        let after = owners(&mut con, "w:after", name);
        for scheme in ["ring", "slots", "modulo"] {
            let l = load
                .entry((scheme.to_string(), after[scheme].clone()))
                .or_default();
            l[0] += 1;
            l[1] += bytes;
            l[2] += *reads as i64;
            if before[scheme] != after[scheme] {
                let m = moved.entry(scheme.to_string()).or_default();
                m.0 += 1;
                m.1 += bytes;
                m.2 += *reads as i64;
            }
        }
    }
    let reply = q(
        &mut con,
        "RING.MOVES w:ring ADD d KEYS k:* WEIGH BYTES HITS",
    );
    let m = map(&reply);
    assert_eq!(int(&m["members"]), 300);
    assert_eq!(int(&m["bytes"]), total.0);
    assert_eq!(int(&m["hits"]), total.1);
    for scheme in ["ring", "slots", "modulo"] {
        let s = map(&m[scheme]);
        let want = moved.get(scheme).copied().unwrap_or_default();
        assert_eq!(
            (
                int(&s["moved"]),
                int(&s["moved_bytes"]),
                int(&s["moved_hits"])
            ),
            want,
            "{scheme}"
        );
        let fraction = float(&s["bytes_fraction"]);
        assert!((fraction - want.1 as f64 / total.0 as f64).abs() < 1e-12);
        // Four nodes of weight 1, all serving after the change: the busiest node's share
        // over a quarter.
        for (k, field) in [
            "keys_peak_to_mean_after",
            "bytes_peak_to_mean_after",
            "hits_peak_to_mean_after",
        ]
        .into_iter()
        .enumerate()
        {
            let per_node: Vec<i64> = load
                .iter()
                .filter(|((s, _), _)| s == scheme)
                .map(|(_, l)| l[k])
                .collect();
            assert_eq!(per_node.len(), 4, "{scheme}: every node owns keys after");
            let sum: i64 = per_node.iter().sum();
            let peak = *per_node.iter().max().unwrap() as f64 / sum as f64 * 4.0;
            let got = float(&s[field]);
            assert!(
                (got - peak).abs() < 1e-9,
                "{scheme} {field}: {got} vs {peak}"
            );
        }
    }
    // The hot, fat tag lands whole on one master of the slot table: its bytes and hits weigh
    // more on that master than its key count does.
    let slots = map(&m["slots"]);
    assert!(
        float(&slots["hits_peak_to_mean_after"]) > float(&slots["keys_peak_to_mean_after"]),
        "{slots:?}"
    );
    // The walk touched nothing: every counter is as the reads left it.
    for (name, reads) in keys.iter().take(20) {
        let freq = int(&call(&mut con, &[b"OBJECT", b"FREQ", name]).unwrap());
        assert_eq!(freq, 5 + *reads as i64, "{name:?}");
    }
    // Only what was asked for is replied.
    let reply = q(&mut con, "RING.MOVES w:ring ADD d KEYS k:* WEIGH BYTES");
    let m = map(&reply);
    assert!(m.contains_key("bytes") && !m.contains_key("hits"));
    let ring = map(&m["ring"]);
    assert!(ring.contains_key("moved_bytes") && !ring.contains_key("moved_hits"));
    // Background runs (the LFU read from the worker, with the lock held) give the same
    // answer as inline ones.
    let inline = q(
        &mut con,
        "RING.MOVES w:ring ADD d KEYS k:* WEIGH BYTES HITS",
    );
    q(&mut con, "CONFIG SET ringslot.inline-limit 1");
    let background = q(
        &mut con,
        "RING.MOVES w:ring ADD d KEYS k:* WEIGH BYTES HITS",
    );
    assert_eq!(background, inline);
    assert_eq!(int(&map(&background)["hits"]), total.1);
}

#[test]
fn weigh_refusals() {
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "RING.ADD w:ring a b c");
    q(&mut con, "SET k:1 v");
    // No LFU counters without an LFU policy: the error names the setting.
    let err = e(&mut con, "RING.MOVES w:ring ADD d KEYS k:* WEIGH HITS");
    assert!(
        err.starts_with("ERR WEIGH HITS") && err.contains("maxmemory-policy allkeys-lfu"),
        "{err}"
    );
    // Sample members weigh nothing.
    let err = e(&mut con, "RING.MOVES w:ring ADD d SAMPLE 10 WEIGH BYTES");
    assert!(
        err.starts_with("ERR") && err.contains("WEIGH needs real keys"),
        "{err}"
    );
    let err = e(&mut con, "RING.MOVES w:ring ADD d KEYS * WEIGH");
    assert!(err.contains("WEIGH needs BYTES, HITS or both"), "{err}");
    let err = e(&mut con, "RING.MOVES w:ring ADD d KEYS * WEIGH POUNDS");
    assert!(err.starts_with("ERR"), "{err}");
    // WEIGH ends a node list: the nodes evaluated are those before it (two, d and e: the
    // ideal is their share of five).
    let reply = q(&mut con, "RING.MOVES w:ring ADD d e WEIGH BYTES KEYS k:*");
    assert_eq!(int(&map(&reply)["members"]), 1);
    assert!((float(&map(&reply)["ideal"]) - 0.4).abs() < 1e-12);
    // The ring is as it was.
    assert_eq!(int(&map(&q(&mut con, "RING.INFO w:ring"))["nodes"]), 3);
    assert_pong(&mut con);
}
