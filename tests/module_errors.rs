//! Bad input: every error of the command contract, WRONGTYPE, and a loop of random and
//! malformed calls. After each failing call the server still answers PING and the ring is
//! exactly as it was (RING.NODES and RING.SLOTS compared before/after).

use redis::{Connection, Value};
use ringslot::module::table::COMMANDS;
use ringslot_harness::prelude::*;
use ringslot_harness::redis;

/// Sends `line` (which must fail with `expected`), then checks PING and that `ring` is
/// unchanged.
fn refused(con: &mut Connection, ring: &str, line: &str, expected: &str) {
    let before = snapshot(con, ring.as_bytes());
    assert_eq!(e(con, line), expected, "{line}");
    assert_pong(con);
    assert_eq!(
        snapshot(con, ring.as_bytes()),
        before,
        "{line} changed {ring}"
    );
}

fn arity(command: &str) -> String {
    format!(
        "ERR wrong number of arguments for '{}' command",
        command.to_lowercase()
    )
}

#[test]
fn wrong_argument_counts() {
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.ADD err:arity a b");
    for line in [
        "RING.CREATE",
        "RING.ADD",
        "RING.ADD err:arity",
        "RING.DEL err:arity",
        "RING.GET err:arity",
        "RING.MGET err:arity",
        "RING.SLOT err:arity",
        "RING.SLOT err:arity a b",
        "RING.SLOTS",
        "RING.SLOTS err:arity x",
        "RING.ASSIGN err:arity 0 1",
        "RING.ASSIGN err:arity 0 1 a b",
        "RING.NODES",
        "RING.NODES err:arity x",
        "RING.INFO",
        "RING.INFO err:arity x",
        "RING.MOVES err:arity",
        "RING.PLAN err:arity",
    ] {
        let command = line.split(' ').next().unwrap();
        refused(&mut con, "err:arity", line, &arity(command));
    }
}

#[test]
fn syntax_errors_say_what_is_wrong() {
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.ADD err:syntax a b");
    for (line, hint) in [
        (
            "RING.CREATE err:syntax:new FOO",
            "unknown option 'FOO' (RING.CREATE takes COMPAT name, VNODES n and HASHTAG)",
        ),
        ("RING.CREATE err:syntax:new VNODES", "VNODES needs a value"),
        (
            "RING.CREATE err:syntax:new COMPAT",
            "COMPAT needs a value: one of native, ketama, groupcache, native-fnv, nginx, predis, predis-ketama, redis-rb, haproxy, haproxy-crc32, envoy-ring, envoy-redis, python-memcached, go-redis-ring, mcrouter-ch3, envoy-maglev, pymemcache",
        ),
        (
            "RING.CREATE err:syntax:new HASHTAG 1",
            "unknown option '1' (RING.CREATE takes COMPAT name, VNODES n and HASHTAG)",
        ),
        ("RING.ADD err:syntax WEIGHT", "WEIGHT needs a value"),
        (
            "RING.ADD err:syntax WEIGHT 2",
            "RING.ADD needs a node after WEIGHT w",
        ),
        (
            "RING.ADD err:syntax c WEIGHT 2",
            "WEIGHT w goes before the nodes (to add a node named WEIGHT, give WEIGHT w first)",
        ),
        ("RING.GET err:syntax m COUNT", "COUNT needs a value"),
        (
            "RING.GET err:syntax m LIMIT 1",
            "unknown option 'LIMIT' (RING.GET takes COUNT n)",
        ),
        (
            "RING.GET err:syntax m COUNT 1 x",
            "unknown option 'x' (RING.GET takes COUNT n)",
        ),
        (
            "RING.MOVES err:syntax MOVE c",
            "the change is ADD [WEIGHT w] node [node ...], DEL node [node ...] or REBALANCE [THRESHOLD t] [WEIGHT node=w ...], not 'MOVE'",
        ),
        (
            "RING.MOVES err:syntax DEL a WEIGHT 2",
            "WEIGHT goes with ADD only (DEL removes the nodes)",
        ),
        ("RING.MOVES err:syntax ADD c WEIGHT", "WEIGHT needs a value"),
        (
            "RING.MOVES err:syntax ADD c SAMPLE 1 KEYS *",
            "SAMPLE, KEYS and SLOTS exclude each other",
        ),
        (
            "RING.MOVES err:syntax ADD c KEYS * SAMPLE 1",
            "SAMPLE, KEYS and SLOTS exclude each other",
        ),
        ("RING.MOVES err:syntax ADD c KEYS", "KEYS needs a pattern"),
        ("RING.MOVES err:syntax ADD c SAMPLE", "SAMPLE needs a value"),
        (
            "RING.MOVES err:syntax ADD c SAMPLE 1 FOO 1",
            "unknown option 'FOO' (RING.MOVES takes WEIGHT w, SAMPLE n, KEYS pattern, SLOTS start end, SCHEMES name ... and WEIGH BYTES|HITS)",
        ),
        (
            "RING.MOVES err:syntax DEL a SAMPLE 1 FOO 1",
            "unknown option 'FOO' (RING.MOVES takes SAMPLE n, KEYS pattern, SLOTS start end, SCHEMES name ... and WEIGH BYTES|HITS)",
        ),
        (
            "RING.MOVES err:syntax ADD",
            "ADD needs one or more nodes (a node named like an option is given with NODES n name ...)",
        ),
        (
            "RING.PLAN err:syntax DEL SAMPLE 1",
            "DEL needs one or more nodes (a node named like an option is given with NODES n name ...)",
        ),
        (
            "RING.PLAN err:syntax ADD WEIGHT 2 a WEIGHT 3",
            "WEIGHT is given twice",
        ),
        (
            "RING.PLAN err:syntax REBALANCE WEIGHT a",
            "REBALANCE WEIGHT takes node=w items (w an integer, 0 to drain the node), not 'a'",
        ),
    ] {
        // Every such error still starts as the core's does, then says what is wrong.
        refused(
            &mut con,
            "err:syntax",
            line,
            &format!("ERR syntax error, {hint}"),
        );
    }
    assert_eq!(int(&q(&mut con, "EXISTS err:syntax:new")), 0);
    // A forgotten WEIGHT value added no node named WEIGHT; an explicit one still can.
    assert_eq!(node_rows(&mut con, b"err:syntax").len(), 2);
    assert_eq!(int(&q(&mut con, "RING.ADD err:syntax WEIGHT 1 WEIGHT")), 1);
    assert_eq!(node_rows(&mut con, b"err:syntax")[2].0, b"WEIGHT".to_vec());
}

#[test]
fn numbers_that_do_not_parse() {
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.ADD err:int a b");
    let not_int = "ERR value is not an integer or out of range";
    for line in [
        "RING.CREATE err:int:new VNODES x",
        "RING.CREATE err:int:new VNODES 1.5",
        "RING.CREATE err:int:new VNODES +5",
        "RING.CREATE err:int:new VNODES 99999999999999999999",
        "RING.ADD err:int WEIGHT 1.0 c",
        "RING.ADD err:int WEIGHT ten c",
        "RING.GET err:int m COUNT abc",
        "RING.GET err:int m COUNT 01",
        "RING.ASSIGN err:int x 10 a",
        "RING.ASSIGN err:int 0 1e3 a",
        "RING.MOVES err:int ADD c WEIGHT -",
        "RING.MOVES err:int ADD c SAMPLE 1k",
    ] {
        refused(&mut con, "err:int", line, not_int);
    }
}

#[test]
fn numbers_out_of_range_name_the_option() {
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.ADD err:range a b");
    for (line, expected) in [
        (
            "RING.CREATE err:range:new VNODES 0",
            "ERR VNODES must be between 1 and 100000",
        ),
        (
            "RING.CREATE err:range:new VNODES 100001",
            "ERR VNODES must be between 1 and 100000",
        ),
        (
            "RING.ADD err:range WEIGHT 0 c",
            "ERR WEIGHT must be between 1 and 1000000",
        ),
        (
            "RING.ADD err:range WEIGHT -3 a",
            "ERR WEIGHT must be between 1 and 1000000",
        ),
        (
            "RING.ADD err:range WEIGHT 1000001 c",
            "ERR WEIGHT must be between 1 and 1000000",
        ),
        (
            "RING.GET err:range m COUNT 0",
            "ERR COUNT must be 1 or more",
        ),
        (
            "RING.GET err:range m COUNT -1",
            "ERR COUNT must be 1 or more",
        ),
        (
            "RING.MOVES err:range ADD c WEIGHT 0",
            "ERR WEIGHT must be between 1 and 1000000",
        ),
        (
            "RING.MOVES err:range ADD c SAMPLE 0",
            "ERR SAMPLE must be between 1 and 1000000000",
        ),
        (
            "RING.MOVES err:range ADD c SAMPLE 1000000001",
            "ERR 1000000001 members to evaluate, more than ringslot.max-sample (1000000000)",
        ),
        (
            "RING.ASSIGN err:range 0 16384 a",
            "ERR invalid slot range 0..16384: slots are 0..16383 and start <= end",
        ),
        (
            "RING.ASSIGN err:range -1 5 a",
            "ERR invalid slot range -1..5: slots are 0..16383 and start <= end",
        ),
        (
            "RING.ASSIGN err:range 10 9 a",
            "ERR invalid slot range 10..9: slots are 0..16383 and start <= end",
        ),
    ] {
        refused(&mut con, "err:range", line, expected);
    }
    assert_eq!(int(&q(&mut con, "EXISTS err:range:new")), 0);
}

#[test]
fn refusals_that_say_why() {
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.ADD err:why a b");
    refused(
        &mut con,
        "err:why",
        "RING.ASSIGN err:why 0 10 zz",
        "ERR no such node 'zz' in the ring",
    );
    refused(
        &mut con,
        "err:why",
        "RING.MOVES err:why DEL zz",
        "ERR no such node 'zz' in the ring",
    );
    refused(
        &mut con,
        "err:why",
        "RING.ASSIGN err:why:none 0 10 a",
        "ERR no such node 'a' in the ring",
    );
    refused(
        &mut con,
        "err:why",
        "RING.PLAN err:why REBALANCE WEIGHT a=1 zz=0",
        "ERR no such node 'zz' in the ring",
    );
    // redis-cli refuses to rebalance while slots are unassigned.
    q(&mut con, "RING.ADD err:why:partial a b");
    q(&mut con, "RING.UNASSIGN err:why:partial 0 9");
    refused(
        &mut con,
        "err:why:partial",
        "RING.PLAN err:why:partial REBALANCE",
        "ERR 10 slots are unassigned: redis-cli --cluster rebalance refuses to run until every slot is served",
    );
    refused(
        &mut con,
        "err:why",
        "RING.MOVES err:why DEL a b zz",
        "ERR no such node 'zz' in the ring",
    );
    refused(
        &mut con,
        "err:why",
        "RING.MOVES err:why ADD a",
        "ERR node 'a' is already in the ring (give WEIGHT w to evaluate a re-weight)",
    );
    refused(
        &mut con,
        "err:why",
        "RING.CREATE err:why",
        "ERR key 'err:why' already exists",
    );
    refused(
        &mut con,
        "err:why",
        "RING.CREATE err:why:k COMPAT ketama VNODES 10",
        "ERR VNODES cannot be set with COMPAT ketama: it fixes the points per node",
    );
    refused(
        &mut con,
        "err:why",
        "RING.CREATE err:why:k COMPAT memcached",
        "ERR COMPAT must be one of native, ketama, groupcache, native-fnv, nginx, predis, predis-ketama, redis-rb, haproxy, haproxy-crc32, envoy-ring, envoy-redis, python-memcached, go-redis-ring, mcrouter-ch3, envoy-maglev, pymemcache",
    );
    // Binary and huge names are shown escaped and cut, never raw.
    let mut long = b"n\x00\r\n".to_vec();
    long.extend(std::iter::repeat_n(b'x', 5000));
    let err = e_raw(&mut con, &[b"RING.ASSIGN", b"err:why", b"0", b"1", &long]);
    assert_eq!(
        err,
        format!(
            "ERR no such node 'n\\x00\\x0d\\x0a{}...' in the ring",
            "x".repeat(124)
        )
    );
    assert_pong(&mut con);
    assert_eq!(int(&q(&mut con, "EXISTS err:why:k err:why:none")), 0);
}

#[test]
fn max_points_and_max_sample() {
    // Its own server: it changes configurations.
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "RING.ADD err:max a b");
    q(&mut con, "CONFIG SET ringslot.max-points 500");
    refused(
        &mut con,
        "err:max",
        "RING.ADD err:max c d",
        "ERR the ring would have 640 points, more than ringslot.max-points (500)",
    );
    refused(
        &mut con,
        "err:max",
        "RING.ADD err:max WEIGHT 3 a",
        "ERR the ring would have 640 points, more than ringslot.max-points (500)",
    );
    assert!(e(&mut con, "RING.ADD err:max:new a b c d").contains("ringslot.max-points"));
    assert_eq!(
        int(&q(&mut con, "EXISTS err:max:new")),
        0,
        "no ring left behind"
    );
    q(&mut con, "RING.ADD err:max c");
    // The what-ifs below add a fourth node: room for it.
    q(&mut con, "CONFIG SET ringslot.max-points 640");

    q(&mut con, "CONFIG SET ringslot.max-sample 10");
    for i in 0..11 {
        q(&mut con, &format!("SET err:max:key:{i} v"));
    }
    refused(
        &mut con,
        "err:max",
        "RING.MOVES err:max ADD d KEYS err:max:key:*",
        "ERR more than ringslot.max-sample (10) keys match the pattern",
    );
    refused(
        &mut con,
        "err:max",
        "RING.MOVES err:max ADD d SAMPLE 11",
        "ERR 11 members to evaluate, more than ringslot.max-sample (10)",
    );
    q(&mut con, "DEL err:max:key:10");
    let m = map(&q(&mut con, "RING.MOVES err:max ADD d KEYS err:max:key:*"));
    assert_eq!(int(&m["members"]), 10);
    // Past the limit in a later SCAN batch (SCAN takes 1000 at a time).
    let mut pipe = redis::pipe();
    for i in 0..2500 {
        pipe.cmd("SET")
            .arg(format!("err:max:many:{i}"))
            .arg("v")
            .ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    q(&mut con, "CONFIG SET ringslot.max-sample 1500");
    refused(
        &mut con,
        "err:max",
        "RING.MOVES err:max ADD d KEYS err:max:many:*",
        "ERR more than ringslot.max-sample (1500) keys match the pattern",
    );
    q(&mut con, "CONFIG SET ringslot.max-sample 2500");
    let m = map(&q(&mut con, "RING.MOVES err:max ADD d KEYS err:max:many:*"));
    assert_eq!(int(&m["members"]), 2500);
}

#[test]
fn a_what_if_past_max_points_is_refused_before_it_allocates() {
    // Issue 15: RING.MOVES built the ring after the change without the point limit, so a
    // reader could make the server allocate 160 million points (or 1e11) and abort. The
    // server runs under a 2 GiB address-space cap: were the ring built, Redis would abort
    // with "Out Of Memory" at once instead of eating the machine, and the test would fail.
    let mut server = Server::builder()
        .memory_limit(2 << 30)
        .start()
        .expect("a capped server");
    let mut con = server.client();
    q(&mut con, "RING.ADD huge:r a b c");
    // 3 x 160 points now, 160 x 1000000 for x: 160000480 points.
    refused(
        &mut con,
        "huge:r",
        "RING.MOVES huge:r ADD x WEIGHT 1000000 SAMPLE 1",
        "ERR the ring would have 160000480 points, more than ringslot.max-points (1000000)",
    );
    q(&mut con, "RING.CREATE huge:v VNODES 100000");
    q(&mut con, "RING.ADD huge:v a b c");
    // 3 x 100000 points now, 100000 x 1000000 for x: 100000300000 points.
    refused(
        &mut con,
        "huge:v",
        "RING.MOVES huge:v ADD x WEIGHT 1000000 SAMPLE 1",
        "ERR the ring would have 100000300000 points, more than ringslot.max-points (1000000)",
    );
    // Within the limit the what-if still runs.
    let m = map(&q(&mut con, "RING.MOVES huge:v ADD x WEIGHT 2 SAMPLE 5"));
    assert_eq!(int(&m["members"]), 5);
    assert!(server.is_alive(), "the server survived:\n{}", server.log());
}

#[test]
fn wrong_type_for_every_command() {
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "SET err:str value");
    q(&mut con, "LPUSH err:list value");
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for key in ["err:str", "err:list"] {
        for line in [
            format!("RING.CREATE {key}"),
            format!("RING.ADD {key} a"),
            format!("RING.DEL {key} a"),
            format!("RING.ASSIGN {key} 0 1 a"),
            format!("RING.GET {key} m"),
            format!("RING.GET {key} m COUNT 2"),
            format!("RING.MGET {key} m n"),
            format!("RING.SLOT {key} m"),
            format!("RING.SLOTS {key}"),
            format!("RING.NODES {key}"),
            format!("RING.INFO {key}"),
            format!("RING.MOVES {key} ADD a SAMPLE 5"),
        ] {
            assert_eq!(e(&mut con, &line), wrongtype, "{line}");
            assert_pong(&mut con);
        }
    }
    assert_eq!(text(&q(&mut con, "GET err:str")), "value");
    q(&mut con, "RING.ADD err:ring a");
    assert!(e(&mut con, "GET err:ring").starts_with("WRONGTYPE"));
    assert!(e(&mut con, "LPUSH err:ring x").starts_with("WRONGTYPE"));
    assert_eq!(
        q(&mut con, "TYPE err:ring"),
        Value::SimpleString("ringslot1".into())
    );
}

/// Arguments a fuzzer draws from: keywords, junk numbers, huge counts, empty, binary.
const POOL: &[&[u8]] = &[
    b"a",
    b"b",
    b"c",
    b"new",
    b"",
    b"\x00",
    b"\xff\xfe",
    b"{tag}",
    b"0",
    b"1",
    b"-1",
    b"2",
    b"16383",
    b"16384",
    b"100000",
    b"100001",
    b"1000000",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"99999999999999999999",
    b"1.5",
    b"+1",
    b" 1",
    b"nan",
    b"WEIGHT",
    b"weight",
    b"COUNT",
    b"VNODES",
    b"COMPAT",
    b"ketama",
    b"groupcache",
    b"native",
    b"HASHTAG",
    b"SAMPLE",
    b"KEYS",
    b"*",
    b"ADD",
    b"DEL",
    b"fuzz:*",
];

const KEYS: &[&[u8]] = &[
    b"fuzz:ring",
    b"fuzz:ketama",
    b"fuzz:str",
    b"fuzz:missing",
    b"",
];

#[test]
fn random_and_malformed_calls_never_hurt() {
    // Its own server: small limits keep random rings small. 1500 calls here, 100000 in
    // `make soak`.
    let mut server = Server::start();
    let mut con = server.client();
    q(&mut con, "CONFIG SET ringslot.max-points 20000");
    q(&mut con, "CONFIG SET ringslot.max-sample 200");
    q(&mut con, "RING.ADD fuzz:ring a b c");
    q(&mut con, "RING.CREATE fuzz:ketama COMPAT ketama");
    q(&mut con, "RING.ADD fuzz:ketama a:11211 b:11211");
    q(&mut con, "SET fuzz:str v");
    let mut rng = Rng::new(0x5eed_1234_abcd_0001);
    // Every command of the table, as a client spells it.
    let commands: Vec<Vec<u8>> = COMMANDS
        .iter()
        .map(|c| c.name.to_ascii_uppercase().into_bytes())
        .collect();
    let (mut failed, mut succeeded) = (0, 0);
    for round in 0..soak(1500, 100_000) {
        let command = rng.pick(&commands).as_slice();
        let key = *rng.pick(KEYS);
        let extra = rng.below(7);
        let mut args: Vec<&[u8]> = vec![command];
        if rng.below(20) != 0 {
            args.push(key);
        }
        for _ in 0..extra {
            args.push(*rng.pick(POOL));
        }
        // Only the named key can change; a ring under another name is checked every 50 rounds.
        let rings: Vec<&[u8]> = [&b"fuzz:ring"[..], b"fuzz:ketama"]
            .into_iter()
            .filter(|r| args.get(1) == Some(r) || round % 50 == 0)
            .collect();
        let before: Vec<_> = rings.iter().map(|r| snapshot(&mut con, r)).collect();
        match call(&mut con, &args) {
            Ok(_) => succeeded += 1,
            Err(text) => {
                failed += 1;
                assert!(
                    text.starts_with("ERR ") || text.starts_with("WRONGTYPE "),
                    "round {round} {args:?}: unexpected error {text}"
                );
                assert_ne!(text, "ERR internal error", "round {round} {args:?}");
                let after: Vec<_> = rings.iter().map(|r| snapshot(&mut con, r)).collect();
                assert_eq!(
                    after, before,
                    "round {round}: failing {args:?} changed a ring"
                );
            }
        }
        if round % 50 == 0 {
            assert_pong(&mut con);
        }
    }
    assert!(
        failed > 300 && succeeded > 100,
        "failed {failed}, succeeded {succeeded}"
    );
    assert_pong(&mut con);
    assert!(server.is_alive());
    assert!(
        !server.log().contains("panicked"),
        "a handler panicked:\n{}",
        server.log()
    );
    assert_eq!(text(&q(&mut con, "GET fuzz:str")), "v");
}
