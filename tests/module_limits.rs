//! Read-only commands never hold Redis' main thread for work past `ringslot.inline-limit`:
//! what they would build (multi-probe points, Maglev tables, the points a change moves) and
//! score (rendezvous scores every node) is counted before they run (`engine/src/cost.rs`), and
//! past the limit they run in the background with the same answer, or are refused where the
//! client cannot wait (MULTI, scripts). Commands do not make rings past `ringslot.max-nodes`
//! either. No assertion here times anything but the name test, whose bound is a thousand
//! times what the work takes.

use ringslot_harness::prelude::*;
use ringslot_harness::redis::{self, Connection};
use std::time::{Duration, Instant};

/// `ringslot_runs_done` of `INFO ringslot`: background runs finished.
fn runs_done(con: &mut Connection) -> i64 {
    let text = text(&q(con, "INFO ringslot"));
    text.lines()
        .find_map(|l| l.strip_prefix("ringslot_runs_done:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no runs_done in INFO ringslot:\n{text}"))
}

/// Runs `line` and returns its reply and whether it ran in the background.
fn run(con: &mut Connection, line: &str) -> (redis::Value, bool) {
    let before = runs_done(con);
    let reply = call(con, &words(line)).unwrap_or_else(|e| panic!("{line}: {e}"));
    (reply, runs_done(con) > before)
}

/// Runs `line` inside MULTI: the error EXEC gives.
fn in_multi(con: &mut Connection, line: &str) -> String {
    q(con, "MULTI");
    q(con, line);
    e(con, "EXEC")
}

#[test]
fn multiprobe_points_of_a_heavy_node_are_work_past_the_limit() {
    // The reliability trial's stall: a ketama ring (its points do not grow with weights) with a
    // node of WEIGHT 1000000 and a 1 KB name: multi-probe makes a point per unit of weight (1M
    // of them) for RING.OWNERS, RING.BALANCE and a what-if of multi-probe: 1.1 s each, inline.
    let server = Server::start();
    let mut con = server.client();
    let heavy = "n".repeat(1024);
    q(&mut con, "RING.CREATE kt COMPAT ketama");
    q(&mut con, &format!("RING.ADD kt WEIGHT 1000000 {heavy}"));
    q(&mut con, "RING.ADD kt a b c");
    for line in [
        "RING.OWNERS kt m".to_string(),
        "RING.BALANCE kt SAMPLE 1".to_string(),
        format!("RING.MOVES kt DEL {heavy} SAMPLE 1 SCHEMES multiprobe"),
    ] {
        let (reply, background) = run(&mut con, &line);
        assert!(background, "{line}: ran in the background");
        assert_ne!(reply, redis::Value::Nil);
        let err = in_multi(&mut con, &line);
        assert!(
            err.contains("more than ringslot.inline-limit (100000)"),
            "{line}: {err}"
        );
    }
    // The ring itself (ketama: 640 points) stays quick: inline.
    let (_, background) = run(&mut con, "RING.MOVES kt ADD d SAMPLE 1000");
    assert!(!background);
}

#[test]
fn rendezvous_is_charged_every_node() {
    // Rendezvous scores every node for every member, before and after the change: 191
    // members over 9000 nodes are 3.4M scores (the trial's 99990 nodes held Redis 295 ms,
    // charged as if 64 nodes cost one lookup).
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "RING.CREATE big VNODES 10");
    for chunk in 0..9 {
        let nodes: Vec<String> = (0..1000).map(|i| format!("n{chunk}-{i}")).collect();
        q(&mut con, &format!("RING.ADD big {}", nodes.join(" ")));
    }
    let (_, background) = run(
        &mut con,
        "RING.MOVES big ADD x SAMPLE 191 SCHEMES rendezvous",
    );
    assert!(background, "rendezvous over 9000 nodes");
    let (_, background) = run(&mut con, "RING.BALANCE big SAMPLE 300");
    assert!(background, "balance over 9000 nodes");
    // Jump over the same nodes is cheap: inline.
    let (_, background) = run(&mut con, "RING.MOVES big ADD x SAMPLE 191 SCHEMES jump");
    assert!(!background);
}

#[test]
fn the_points_a_change_moves_are_work() {
    // A node holding 999999 of a ring's 1000000 points shrinking to weight 1, or leaving:
    // a million points go (120 ms inline before), whatever the sample.
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "RING.CREATE heavy VNODES 1");
    q(&mut con, "RING.ADD heavy WEIGHT 999999 a");
    q(&mut con, "RING.ADD heavy b");
    for line in [
        "RING.MOVES heavy ADD a WEIGHT 1 SAMPLE 1",
        "RING.MOVES heavy DEL a SAMPLE 1",
    ] {
        let (reply, background) = run(&mut con, line);
        assert!(background, "{line}");
        assert_eq!(int(&map(&reply)["members"]), 1);
    }
    let (_, background) = run(&mut con, "RING.MOVES heavy DEL b SAMPLE 1");
    assert!(!background, "one point goes: inline");
}

#[test]
fn a_long_node_name_is_hashed_once_not_once_per_point() {
    // A 1 MB name joining a ring of VNODES 100000: hashing it once per point would be 100 GB
    // (the trial: 1.02 s for a 10 KB name, 10.3 s for 100 KB); the name is hashed once and
    // the labels' hashes derived from its state. The bound is a thousand times what it takes.
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "RING.CREATE v VNODES 100000");
    q(&mut con, "RING.ADD v small");
    let name = vec![b'z'; 1 << 20];
    let started = Instant::now();
    let reply = call(
        &mut con,
        &[b"RING.MOVES", b"v", b"ADD", &name, b"SAMPLE", b"1"],
    )
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(float(&map(&reply)["ideal"]), 0.5);
}

#[test]
fn commands_make_no_ring_past_max_nodes() {
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "CONFIG SET ringslot.max-nodes 3");
    q(&mut con, "RING.ADD r a b");
    assert_eq!(
        e(&mut con, "RING.ADD r c d"),
        "ERR the ring would have 4 nodes, more than ringslot.max-nodes (3)"
    );
    assert_eq!(int(&q(&mut con, "RING.ADD r c")), 1);
    assert_eq!(
        e(&mut con, "RING.MOVES r ADD d SAMPLE 10"),
        "ERR the ring would have 4 nodes, more than ringslot.max-nodes (3)"
    );
    assert_eq!(array(&q(&mut con, "RING.NODES r")).len(), 3);
}
