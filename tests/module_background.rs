//! `RING.MOVES` past `ringslot.inline-limit` runs on a worker thread while the client waits:
//! the same answers as inline, other clients served meanwhile, a snapshot of the ring, cancel
//! on disconnect, a limit on concurrent runs, the inline fallback where blocking is not
//! allowed, nothing replicated, and a server that shuts down or reloads safely.

use ringslot_harness::prelude::*;
use ringslot_harness::redis;
use std::time::{Duration, Instant};

/// Waits (at most 10 s) until `INFO ringslot` shows `running` background runs.
fn wait_running(con: &mut redis::Connection, running: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while ringslot_info(con, "background_runs") != running {
        assert!(
            Instant::now() < deadline,
            "background_runs never became {running}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `line` on its own connection in another thread; the reply comes back on join.
fn spawn(server: &Server, line: &str) -> std::thread::JoinHandle<Result<redis::Value, String>> {
    let mut con = server.client();
    let line = line.to_string();
    std::thread::spawn(move || call(&mut con, &words(&line)))
}

fn moves(con: &mut redis::Connection, args: &[&[u8]]) -> redis::Value {
    let mut all: Vec<&[u8]> = vec![b"RING.MOVES"];
    all.extend_from_slice(args);
    call(con, &all).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[test]
fn background_answers_equal_inline_ones() {
    // The expected value is the inline evaluation of the same keys (the inline path is the
    // one cross-checked against RING.MGET and SCAN MATCH in other tests).
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "RING.ADD bg:ring a b c d");
    q(&mut con, "RING.CREATE bg:ketama COMPAT ketama");
    q(&mut con, "RING.ADD bg:ketama WEIGHT 3 x:11211 y:11211");
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        pipe.cmd("SET")
            .arg(format!("user:{{{}}}:{i}", i % 17))
            .arg("v")
            .ignore();
        let mut binary = format!("bin:{i}:").into_bytes();
        binary.extend([0u8, 0xff, b'\r', b'\n']);
        pipe.cmd("SET").arg(binary).arg("v").ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    let cases: [&[&[u8]]; 5] = [
        &[b"bg:ring", b"ADD", b"e", b"KEYS", b"nothing:*"],
        &[b"bg:ring", b"ADD", b"e", b"KEYS", b"*"],
        &[b"bg:ring", b"DEL", b"b", b"KEYS", b"user:*"],
        &[b"bg:ring", b"ADD", b"a", b"WEIGHT", b"3", b"KEYS", b"bin:*"],
        &[b"bg:ketama", b"ADD", b"z:11211", b"SAMPLE", b"5000"],
    ];
    for args in cases {
        q(&mut con, "CONFIG SET ringslot.inline-limit 1000000");
        let inline = moves(&mut con, args);
        let runs = ringslot_info(&mut con, "runs_done");
        q(&mut con, "CONFIG SET ringslot.inline-limit 10");
        let background = moves(&mut con, args);
        assert_eq!(
            ringslot_info(&mut con, "runs_done"),
            runs + 1,
            "{args:?} ran in the background"
        );
        assert_eq!(background, inline, "{args:?}");
    }
    assert!(ringslot_info(&mut con, "last_run_evaluated") > 0);
    assert!(ringslot_info(&mut con, "total_evaluated") >= 6000);
}

#[test]
fn other_clients_are_served_and_a_snapshot_is_evaluated() {
    // The workers wait between slices (ringslot.debug-pause-background), so that the run is
    // certainly in progress while the other client is served and changes the ring, however
    // fast or slow the machine.
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "CONFIG SET ringslot.inline-limit 10");
    q(&mut con, "RING.ADD snap:ring a b c d");
    q(&mut con, "COPY snap:ring snap:copy");
    q(&mut con, "CONFIG SET ringslot.debug-pause-background 1");
    let long = "RING.MOVES snap:ring ADD e SAMPLE 30000";
    let run = spawn(&server, long);
    wait_running(&mut con, 1);
    // Progress shows once the first slice is evaluated (the worker then waits).
    let deadline = Instant::now() + Duration::from_secs(20);
    while ringslot_info(&mut con, "background_evaluated") == 0 {
        assert!(Instant::now() < deadline, "no progress shown");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Served while the run is paused in the middle, and changing the ring does not change
    // its result.
    assert_pong(&mut con);
    q(&mut con, "RING.ADD snap:ring WEIGHT 5 e f");
    q(&mut con, "RING.DEL snap:ring a");
    q(&mut con, "DEL snap:ring");
    assert_eq!(
        ringslot_info(&mut con, "background_runs"),
        1,
        "still running"
    );
    assert_eq!(
        ringslot_info(&mut con, "background_evaluated"),
        1024,
        "one slice done"
    );
    q(&mut con, "CONFIG SET ringslot.debug-pause-background 0");
    let got = run.join().unwrap().unwrap();
    // The same what-if on the untouched copy, whose sample members are named after snap:ring
    // as the original's were: evaluate the copy under the original name.
    q(&mut con, "RENAME snap:copy snap:ring");
    let expected = q(&mut con, long);
    assert_eq!(got, expected);
    assert_eq!(int(field(&got, "members")), 30000);
}

#[test]
fn a_client_that_leaves_cancels_its_run() {
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "CONFIG SET ringslot.inline-limit 10");
    q(&mut con, "RING.ADD gone:ring a b");
    let mut client = server.client();
    let id = int(&q(&mut client, "CLIENT ID"));
    let run = std::thread::spawn(move || {
        call(
            &mut client,
            &words("RING.MOVES gone:ring ADD c SAMPLE 1000000000"),
        )
    });
    wait_running(&mut con, 1);
    q(&mut con, &format!("CLIENT KILL ID {id}"));
    wait_running(&mut con, 0);
    assert!(run.join().unwrap().is_err(), "the connection was closed");
    assert_eq!(ringslot_info(&mut con, "runs_cancelled"), 1);
    assert!(ringslot_info(&mut con, "last_run_evaluated") < 1_000_000_000);
}

#[test]
fn concurrent_runs_are_limited_and_multi_runs_inline() {
    // A ring of one point a node: a what-if's work is the slot table's rebalance (512 units
    // and a quarter of one a node), half a unit a point that comes or goes, and three quarters
    // of one a member (engine/src/cost.rs).
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "CONFIG SET ringslot.inline-limit 1000");
    q(&mut con, "CONFIG SET ringslot.max-background 1");
    q(&mut con, "RING.CREATE lim:ring VNODES 1");
    q(&mut con, "RING.ADD lim:ring a b");
    let mut client = server.client();
    let id = int(&q(&mut client, "CLIENT ID"));
    let first = std::thread::spawn(move || {
        call(
            &mut client,
            &words("RING.MOVES lim:ring ADD c SAMPLE 1000000000"),
        )
    });
    wait_running(&mut con, 1);
    assert_eq!(
        e(&mut con, "RING.MOVES lim:ring ADD c SAMPLE 1000"),
        "ERR 1 RING.* evaluations already run in the background, the most \
         ringslot.max-background allows: try again when one ends"
    );
    // Inline work needs no background slot.
    q(&mut con, "RING.MOVES lim:ring ADD c SAMPLE 10");
    q(&mut con, &format!("CLIENT KILL ID {id}"));
    let _ = first.join();
    wait_running(&mut con, 0);

    // Inside MULTI the client cannot block: inline up to the limit, refused past it.
    q(&mut con, "MULTI");
    q(&mut con, "RING.MOVES lim:ring ADD c SAMPLE 10");
    let replies = array(&q(&mut con, "EXEC"));
    assert_eq!(int(&map(&replies[0])["members"]), 10);
    q(&mut con, "MULTI");
    q(&mut con, "RING.MOVES lim:ring ADD c SAMPLE 1000");
    let refused = e(&mut con, "EXEC");
    // 512 + 2/4 for the rebalance of two nodes, 1/2 for the joining point, 750 for the
    // members.
    assert_eq!(
        refused,
        "ERR this what-if (SAMPLE 1000) is about 1263 units of work, more than \
         ringslot.inline-limit (1000), the most RING.MOVES does on Redis' main thread, and \
         here (MULTI, a script) it cannot run in the background"
    );
    // And in a script.
    let err = call(
        &mut con,
        &[
            b"EVAL",
            b"return redis.call('RING.MOVES', KEYS[1], 'ADD', 'c', 'SAMPLE', '1000')",
            b"1",
            b"lim:ring",
        ],
    )
    .unwrap_err();
    assert!(err.contains("cannot run in the background"), "{err}");
}

#[test]
fn the_read_is_never_replicated() {
    let master = Server::start();
    let mut m = master.client();
    q(&mut m, "CONFIG SET ringslot.inline-limit 10");
    q(&mut m, "RING.ADD rep:ring a b c");
    for i in 0..100 {
        q(&mut m, &format!("SET rep:{i} v"));
    }
    let offset = |con: &mut redis::Connection| {
        text(&q(con, "INFO replication"))
            .lines()
            .find_map(|l| l.strip_prefix("master_repl_offset:"))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap()
    };
    let before = offset(&mut m);
    q(&mut m, "RING.MOVES rep:ring ADD d KEYS *");
    q(&mut m, "RING.MOVES rep:ring ADD d SAMPLE 1000");
    assert_eq!(offset(&mut m), before, "nothing replicated");
}

#[test]
fn shutdown_and_reload_during_a_run_are_safe() {
    let mut server = Server::start();
    let mut con = server.client();
    q(&mut con, "CONFIG SET ringslot.inline-limit 10");
    q(&mut con, "RING.ADD down:ring a b");
    q(&mut con, "DEBUG POPULATE 200000 down:key");
    // A reload (save, flush, load) while a walk of the keyspace goes on: the workers wait
    // between slices until the reload is done, so both runs are certainly under way.
    q(&mut con, "CONFIG SET ringslot.debug-pause-background 1");
    let run = spawn(&server, "RING.MOVES down:ring ADD c SAMPLE 1000000000");
    let walk = spawn(&server, "RING.MOVES down:ring ADD c KEYS *");
    wait_running(&mut con, 2);
    assert_eq!(q(&mut con, "DEBUG RELOAD"), redis::Value::Okay);
    assert_eq!(ringslot_info(&mut con, "background_runs"), 2);
    q(&mut con, "CONFIG SET ringslot.debug-pause-background 0");
    let walked = walk.join().unwrap();
    assert!(walked.is_ok(), "{walked:?}");
    assert_pong(&mut con);
    // Shutdown while the sample run still goes.
    assert_eq!(ringslot_info(&mut con, "background_runs"), 1);
    let _ = call(&mut con, &words("SHUTDOWN NOSAVE"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.is_alive() {
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = run.join();
    let log = server.log();
    assert!(!log.contains("crashed"), "{log}");
    assert!(log.contains("ready to exit, bye bye"), "{log}");
}
