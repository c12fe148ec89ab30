//! A replica answers exactly as its master after every write (as RedisBloom's
//! `test_replication.py` checks each write command), reads and no-op writes are not
//! replicated, and the replica applies what its master accepted whatever its own limits.

use redis::{Connection, Value};
use ringslot_harness::prelude::*;
use ringslot_harness::redis;

fn master_offset(con: &mut Connection) -> i64 {
    let info = bytes(&q(con, "INFO replication"));
    String::from_utf8_lossy(&info)
        .lines()
        .find_map(|l| l.strip_prefix("master_repl_offset:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("master_repl_offset")
}

/// Waits until the replica has caught up (WAIT 1), then compares `keys` on both.
fn assert_same(master: &mut Connection, replica: &mut Connection, keys: &[&[u8]], after: &str) {
    assert_eq!(
        int(&q(master, "WAIT 1 5000")),
        1,
        "the replica acknowledged {after}"
    );
    for key in keys {
        assert_eq!(
            snapshot(replica, key),
            snapshot(master, key),
            "after {after}"
        );
        assert_eq!(
            info_state(replica, key),
            info_state(master, key),
            "after {after}"
        );
        for m in ["m1", "m2", "{m}3"] {
            let get = [b"RING.GET", *key, m.as_bytes(), b"COUNT", b"2"];
            assert_eq!(call(replica, &get).unwrap(), call(master, &get).unwrap());
        }
    }
}

#[test]
fn every_write_reaches_the_replica() {
    let master = Server::start();
    let replica = Server::start();
    let mut m = master.client();
    // A ring made before the replica connects travels in the full sync (RDB).
    q(&mut m, "RING.ADD rep:synced a b c");
    q(&mut m, "RING.ASSIGN rep:synced 10 20 c");
    let mut r = connect_replica(&master, &replica);
    let keys: [&[u8]; 3] = [b"rep:synced", b"rep:ring", b"rep:ketama"];
    assert_same(&mut m, &mut r, &keys, "full sync");

    for line in [
        "RING.CREATE rep:ring VNODES 32 HASHTAG",
        "RING.ADD rep:ring a b c d",
        "RING.ADD rep:ring WEIGHT 4 b",
        "RING.DEL rep:ring a",
        "RING.ASSIGN rep:ring 0 999 d",
        "RING.CREATE rep:ketama COMPAT ketama",
        "RING.ADD rep:ketama WEIGHT 3 s1:11211 s2:11211",
        "RING.DEL rep:ketama s1:11211",
        "RING.ADD rep:synced e",
        "RING.DEL rep:synced a b",
    ] {
        q(&mut m, line);
        assert_same(&mut m, &mut r, &keys, line);
    }
    call(&mut m, &[b"RING.ADD", b"rep:ring", b"\x00bin\xff"]).unwrap();
    assert_same(&mut m, &mut r, &keys, "binary node");
    assert_eq!(
        q(&mut r, "TYPE rep:ring"),
        Value::SimpleString("ringslot1".into())
    );
    // The replica refuses writes of its own.
    assert!(e(&mut r, "RING.ADD rep:ring x").starts_with("READONLY"));
    assert!(e(&mut r, "RING.CREATE rep:new").starts_with("READONLY"));
    // ... but serves reads.
    assert_eq!(int(&array(&q(&mut r, "RING.SLOT rep:ring foo"))[0]), 12182);
}

#[test]
fn reads_refusals_and_no_ops_are_not_replicated() {
    let master = Server::start();
    let replica = Server::start();
    let mut m = master.client();
    q(&mut m, "RING.ADD quiet:ring a b c");
    let mut r = connect_replica(&master, &replica);
    assert_eq!(int(&q(&mut m, "WAIT 1 5000")), 1);
    let offset = master_offset(&mut m);
    for line in [
        "RING.GET quiet:ring m",
        "RING.GET quiet:ring m COUNT 3",
        "RING.MGET quiet:ring m n",
        "RING.SLOT quiet:ring m",
        "RING.SLOTS quiet:ring",
        "RING.NODES quiet:ring",
        "RING.INFO quiet:ring",
        "RING.MOVES quiet:ring ADD d SAMPLE 100",
        "RING.ADD quiet:ring a b",
        "RING.ADD quiet:ring WEIGHT 1 a",
        "RING.DEL quiet:ring zz",
        "RING.DEL quiet:none zz",
        "RING.ASSIGN quiet:ring 0 5460 a",
    ] {
        q(&mut m, line);
    }
    for line in [
        "RING.ADD quiet:ring WEIGHT 0 a",
        "RING.ASSIGN quiet:ring 0 10 zz",
        "RING.CREATE quiet:ring",
        "RING.GET quiet:ring m COUNT 0",
    ] {
        e(&mut m, line);
    }
    assert_eq!(master_offset(&mut m), offset, "nothing was replicated");
    q(&mut m, "RING.ADD quiet:ring d");
    assert!(
        master_offset(&mut m) > offset,
        "a write that changes the ring is"
    );
    assert_same(&mut m, &mut r, &[b"quiet:ring"], "RING.ADD d");
}

#[test]
fn the_replica_applies_what_its_master_accepted() {
    let master = Server::start();
    let replica = Server::start_with(&["max-points", "10", "default-vnodes", "160"], &[]);
    let mut m = master.client();
    let mut r = connect_replica(&master, &replica);
    q(&mut m, "RING.CREATE big:ring VNODES 100");
    q(&mut m, "RING.ADD big:ring a b c");
    assert_same(
        &mut m,
        &mut r,
        &[b"big:ring"],
        "a ring past the replica's max-points",
    );
    assert_eq!(int(&map(&q(&mut r, "RING.INFO big:ring"))["points"]), 300);
}

#[test]
fn a_ring_created_by_ring_add_keeps_its_vnodes_on_the_replica() {
    // The master creates rings with 20 points per node, the replica would use 160: the
    // replica must still build the master's ring (RING.CREATE with VNODES goes first).
    let master = Server::start_with(&["default-vnodes", "20"], &[]);
    let replica = Server::start_with(&["default-vnodes", "160"], &[]);
    let mut m = master.client();
    let mut r = connect_replica(&master, &replica);
    q(&mut m, "RING.ADD implicit:ring a b c");
    assert_same(
        &mut m,
        &mut r,
        &[b"implicit:ring"],
        "RING.ADD on a missing key",
    );
    assert_eq!(
        int(&map(&q(&mut r, "RING.INFO implicit:ring"))["points"]),
        60
    );
    q(&mut m, "RING.ADD implicit:ring d");
    assert_same(&mut m, &mut r, &[b"implicit:ring"], "RING.ADD on the ring");
    assert_eq!(
        int(&map(&q(&mut r, "RING.INFO implicit:ring"))["vnodes"]),
        20
    );
}
