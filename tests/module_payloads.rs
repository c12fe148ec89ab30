//! A ring payload that is damaged or crafted never crashes the server and never builds part of
//! a ring: `RESTORE` (the path `MIGRATE` and a reshard take) refuses it with Redis' "Bad data
//! format" and stores nothing; an RDB file holding one stops the server's load with the
//! module's reason in the log, as Redis stops on any value it cannot read, instead of a crash.
//! Payloads are checked against the ceiling of `ringslot.max-points` before anything is built,
//! and load as written below it whatever this server's `ringslot.max-points`.
//!
//! The payload layout is Redis' (see `ringslot_harness::dump`); the ring's fields are the ones
//! `src/module/ringtype.rs` documents: flavour code, vnodes, hashtag, node count, per node its
//! name and weight, range count, per range start, end and node index.

use redis::Connection;
use ringslot_harness::dump::{module_payload, value_bytes, with_fixed_crc, Field};
use ringslot_harness::prelude::*;
use ringslot_harness::redis;

use Field::{Bytes, Unsigned as U};

/// A real DUMP of a one-node native ring, to take the type id and RDB version from.
fn template(con: &mut Connection) -> Vec<u8> {
    q(con, "RING.ADD tpl a");
    bytes(&q(con, "DUMP tpl"))
}

/// The fields of a ring: `flavour`, `vnodes`, no hash tag, `nodes` (name, weight), `ranges`.
fn ring_fields(
    flavour: u64,
    vnodes: u64,
    nodes: &[(&str, u64)],
    ranges: &[[u64; 3]],
) -> Vec<Field> {
    let mut f = vec![U(flavour), U(vnodes), U(0), U(nodes.len() as u64)];
    for (name, weight) in nodes {
        f.extend([Bytes(name.as_bytes().to_vec()), U(*weight)]);
    }
    f.push(U(ranges.len() as u64));
    for r in ranges {
        f.extend(r.iter().map(|&v| U(v)));
    }
    f
}

/// RESTOREs `payload` at `key`: the error text, or `None` when it was stored.
fn restore(con: &mut Connection, key: &[u8], payload: &[u8]) -> Option<String> {
    call(con, &[b"RESTORE", key, b"0", payload]).err()
}

#[test]
fn the_payload_layout_is_understood() {
    // The encoder below writes exactly what the module writes: the checks that follow craft
    // payloads with it.
    let server = Server::start();
    let mut con = server.client();
    let tpl = template(&mut con);
    let made = module_payload(&tpl, &ring_fields(0, 160, &[("a", 1)], &[[0, 16383, 0]]));
    assert_eq!(made, tpl);
}

#[test]
fn malformed_payloads_are_refused_and_nothing_is_stored() {
    let server = Server::start();
    let mut con = server.client();
    let tpl = template(&mut con);
    let one = |nodes: &[(&str, u64)], ranges: &[[u64; 3]]| ring_fields(0, 160, nodes, ranges);
    let mut node_count_two = one(&[("a", 1)], &[[0, 16383, 0]]);
    node_count_two[3] = U(2);
    let mut no_eof = module_payload(&tpl, &one(&[("a", 1)], &[]));
    let body = value_bytes(&no_eof);
    no_eof.drain(body.end - 3..body.end);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        // The reliability trial's crash: the node count byte 01 -> 02, CRC fixed.
        (
            "node count 2 with one node",
            module_payload(&tpl, &node_count_two),
        ),
        ("the values cut short", with_fixed_crc(&no_eof)),
        (
            "flavour code 9",
            module_payload(&tpl, &ring_fields(9, 160, &[("a", 1)], &[])),
        ),
        (
            "vnodes 0",
            module_payload(&tpl, &ring_fields(0, 0, &[("a", 1)], &[])),
        ),
        (
            "vnodes 100001",
            module_payload(&tpl, &ring_fields(0, 100_001, &[("a", 1)], &[])),
        ),
        (
            "ketama with vnodes 5",
            module_payload(&tpl, &ring_fields(1, 5, &[("a", 1)], &[])),
        ),
        ("weight 0", module_payload(&tpl, &one(&[("a", 0)], &[]))),
        (
            "weight 1000001",
            module_payload(&tpl, &one(&[("a", 1_000_001)], &[])),
        ),
        ("an empty name", module_payload(&tpl, &one(&[("", 1)], &[]))),
        (
            "a duplicate node",
            module_payload(&tpl, &one(&[("a", 1), ("a", 2)], &[])),
        ),
        (
            "a range past 16383",
            module_payload(&tpl, &one(&[("a", 1)], &[[0, 16384, 0]])),
        ),
        (
            "a reversed range",
            module_payload(&tpl, &one(&[("a", 1)], &[[9, 3, 0]])),
        ),
        (
            "overlapping ranges",
            module_payload(&tpl, &one(&[("a", 1), ("b", 1)], &[[0, 10, 0], [5, 20, 1]])),
        ),
        (
            "a range of no node",
            module_payload(&tpl, &one(&[("a", 1)], &[[0, 10, 1]])),
        ),
        (
            "more ranges than slots",
            module_payload(
                &tpl,
                &[one(&[("a", 1)], &[])[..4].to_vec(), vec![U(16385)]].concat(),
            ),
        ),
        // 1e11 points (VNODES 100000 x WEIGHT 1000000): past the ceiling of
        // ringslot.max-points, refused before a point is made (it aborted the server for want
        // of memory).
        (
            "1e11 points",
            module_payload(&tpl, &ring_fields(0, 100_000, &[("a", 1_000_000)], &[])),
        ),
        // 100000100 points: just past the ceiling.
        (
            "just past the ceiling",
            module_payload(
                &tpl,
                &ring_fields(0, 100, &[("a", 1_000_000), ("b", 1)], &[]),
            ),
        ),
    ];
    // Both ways of loading a payload: unchecked, and with the server's deep sanitization. A
    // server of its own for each (Valkey 9 takes sanitize-dump-payload at start only).
    drop(con);
    drop(server);
    for sanitize in ["no", "yes"] {
        let server = Server::start_with(&[], &["--sanitize-dump-payload", sanitize]);
        let mut con = server.client();
        for (what, payload) in &cases {
            let err = restore(&mut con, b"bad", payload)
                .unwrap_or_else(|| panic!("{what}: RESTORE accepted it"));
            assert!(err.contains("Bad data format"), "{what}: {err}");
            assert_eq!(int(&q(&mut con, "EXISTS bad")), 0, "{what}: nothing stored");
            assert_pong(&mut con);
        }
        let log = server.log();
        assert!(
            log.contains("refused to load the ring"),
            "the log says why:\n{log}"
        );
    }
}

#[test]
fn payloads_under_the_ceiling_load_as_written() {
    // A replica or the target of a reshard must hold what its master held: a ring of more
    // points than this server's ringslot.max-points loads all the same.
    let server = Server::start();
    let mut con = server.client();
    let tpl = template(&mut con);
    q(&mut con, "CONFIG SET ringslot.max-points 100");
    let payload = module_payload(
        &tpl,
        &ring_fields(2, 50, &[("x", 3), ("y", 1)], &[[0, 99, 1], [100, 16383, 0]]),
    );
    assert_eq!(restore(&mut con, b"big", &payload), None);
    let info = map(&q(&mut con, "RING.INFO big"));
    assert_eq!(int(&info["points"]), 200);
    assert_eq!(text(&info["compat"]), "groupcache");
    assert_eq!(
        slot_ranges(&mut con, b"big"),
        vec![(0, 99, b"y".to_vec()), (100, 16383, b"x".to_vec())]
    );
    // The limit still binds what a command makes.
    assert!(e(&mut con, "RING.ADD big z").contains("ringslot.max-points"));
}

#[test]
fn random_mutations_of_real_payloads_never_crash() {
    // 1-4 random bytes of a real DUMP changed, the CRC fixed (so that RESTORE reaches the
    // module), as the reliability trial did (271 of its 300 crashed the server). Each is
    // refused with nothing stored, or loads a ring that answers; the server answers after
    // every one. Rings have few points per node so that a mutated weight stays small.
    let server = Server::start();
    let mut con = server.client();
    for line in [
        "RING.CREATE f:native VNODES 3 HASHTAG",
        "RING.ADD f:native a b c",
        "RING.ADD f:native WEIGHT 2 d",
        "RING.ASSIGN f:native 100 200 c",
        "RING.CREATE f:ketama COMPAT ketama",
        "RING.ADD f:ketama WEIGHT 5 10.0.0.1:11211 10.0.0.2:6379",
        "RING.CREATE f:gc COMPAT groupcache VNODES 2",
        "RING.ADD f:gc x y z",
        "RING.CREATE f:fnv COMPAT native-fnv VNODES 4",
        "RING.ADD f:fnv n1 n2",
        "RING.DEL f:fnv n1",
    ] {
        q(&mut con, line);
    }
    let dumps: Vec<Vec<u8>> = ["f:native", "f:ketama", "f:gc", "f:fnv"]
        .iter()
        .map(|k| bytes(&q(&mut con, &format!("DUMP {k}"))))
        .collect();
    let mut rng = Rng::new(18);
    let (mut refused, mut loaded) = (0, 0);
    for round in 0..soak(300, 20_000) {
        let mut payload = rng.pick(&dumps).clone();
        let body = value_bytes(&payload);
        for _ in 0..1 + rng.below(4) {
            let at = body.start + rng.below(body.len());
            payload[at] = rng.next_u64() as u8;
        }
        let payload = with_fixed_crc(&payload);
        match restore(&mut con, b"fuzz", &payload) {
            Some(err) => {
                assert!(err.contains("Bad data format"), "round {round}: {err}");
                assert_eq!(int(&q(&mut con, "EXISTS fuzz")), 0, "round {round}");
                refused += 1;
            }
            None => {
                // A mutation can make another valid ring: it must work as one.
                q(&mut con, "RING.INFO fuzz");
                q(&mut con, "RING.NODES fuzz");
                q(&mut con, "RING.GET fuzz member COUNT 3");
                q(&mut con, "RING.SLOTS fuzz");
                q(&mut con, "DEL fuzz");
                loaded += 1;
            }
        }
        assert_pong(&mut con);
    }
    assert!(
        refused > 0 && loaded > 0,
        "refused {refused}, loaded {loaded}"
    );
}

#[test]
fn a_corrupt_ring_in_an_rdb_file_stops_the_load_without_a_crash() {
    // The node count of a saved ring raised by one, the file's CRC fixed: Redis stops loading
    // the file (as for any value it cannot read), with the module's reason in its log, not a
    // crash report.
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "RING.ADD saved a-distinctive-node-name");
    q(&mut con, "SAVE");
    let dir = server.stop();
    let path = dir.path().join("dump.rdb");
    let mut rdb = std::fs::read(&path).unwrap();
    let name = b"a-distinctive-node-name";
    let at = rdb
        .windows(name.len())
        .position(|w| w == name)
        .expect("the node name in the RDB file");
    // ... [2, node count] [5, name length] name ...
    assert_eq!(
        &rdb[at - 4..at - 1],
        &[2, 1, 5],
        "the bytes before the name"
    );
    rdb[at - 3] = 2;
    std::fs::write(&path, with_fixed_crc(&rdb)).unwrap();
    let failed = Server::builder()
        .dir(dir)
        .start()
        .err()
        .expect("the server refuses the file");
    let log = failed.0;
    assert!(
        log.contains("refused to load the ring at key 'saved'"),
        "{log}"
    );
    assert!(!log.contains("BUG REPORT"), "no crash:\n{log}");
}
