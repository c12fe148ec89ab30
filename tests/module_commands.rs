//! Every RING.* command and option against a real redis-server, RESP2 and RESP3.
//! Tests running together share one server (`shared_server`): each uses its own keys.

use redis::Value;
use ringslot_harness::prelude::*;
use ringslot_harness::redis;
use std::collections::BTreeSet;

/// `redis-cli --cluster create` with three masters lays slots out as 0-5460, 5461-10922,
/// 10923-16383 (the Redis cluster tutorial's output).
fn three_masters(a: &str, b: &str, c: &str) -> Vec<(i64, i64, Vec<u8>)> {
    vec![
        (0, 5460, a.into()),
        (5461, 10922, b.into()),
        (10923, 16383, c.into()),
    ]
}

#[test]
fn add_lays_out_slots_like_cluster_create_and_keeps_weights() {
    let server = shared_server();
    let mut con = server.client();
    assert_eq!(int(&q(&mut con, "RING.ADD cmd:add a b c")), 3);
    assert_eq!(
        slot_ranges(&mut con, b"cmd:add"),
        three_masters("a", "b", "c")
    );
    assert_eq!(
        node_rows(&mut con, b"cmd:add"),
        vec![
            (b"a".to_vec(), 1, 160, 5461),
            (b"b".to_vec(), 1, 160, 5462),
            (b"c".to_vec(), 1, 160, 5461),
        ]
    );
    // Known nodes are not added again; duplicates in one call count once.
    assert_eq!(int(&q(&mut con, "RING.ADD cmd:add a")), 0);
    assert_eq!(int(&q(&mut con, "RING.ADD cmd:add a d d")), 1);
    // WEIGHT re-weights a known node (reply 0: nothing new); without WEIGHT it keeps its weight.
    assert_eq!(int(&q(&mut con, "RING.ADD cmd:add weight 3 a")), 0);
    assert_eq!(node_rows(&mut con, b"cmd:add")[0].1, 3);
    assert_eq!(node_rows(&mut con, b"cmd:add")[0].2, 480);
    assert_eq!(int(&q(&mut con, "RING.ADD cmd:add a e")), 1);
    let rows = node_rows(&mut con, b"cmd:add");
    assert_eq!(rows[0].1, 3, "a keeps WEIGHT 3");
    assert_eq!(rows[4], (b"e".to_vec(), 1, 160, rows[4].3));
    assert_eq!(rows.iter().map(|r| r.3).sum::<i64>(), 16384);
    // A node named like the keyword.
    assert_eq!(int(&q(&mut con, "RING.ADD cmd:add WEIGHT 1 weight")), 1);
    assert_eq!(node_rows(&mut con, b"cmd:add")[5].0, b"weight".to_vec());
}

#[test]
fn slot_matches_cluster_keyslot_vectors() {
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.ADD cmd:slot a b c");
    let ranges = slot_ranges(&mut con, b"cmd:slot");
    let rows = vectors("keyslot.tsv");
    assert!(rows.len() > 20);
    for row in rows {
        let member = from_hex(&row[0]);
        let slot: i64 = row[1].parse().expect("slot");
        let reply = array(&call(&mut con, &[b"RING.SLOT", b"cmd:slot", &member]).expect("SLOT"));
        assert_eq!(int(&reply[0]), slot, "member {}", row[0]);
        assert_eq!(
            opt_bytes(&reply[1]),
            owner_in(&ranges, slot),
            "member {}",
            row[0]
        );
        // A missing ring still knows the slot.
        let reply = array(&call(&mut con, &[b"RING.SLOT", b"cmd:slot:none", &member]).unwrap());
        assert_eq!(int(&reply[0]), slot);
        assert_eq!(reply[1], Value::Nil);
    }
}

#[test]
fn get_count_and_mget_agree() {
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.ADD cmd:get n1 n2 n3 n4 n5");
    let all: BTreeSet<Vec<u8>> = (1..=5).map(|i| format!("n{i}").into_bytes()).collect();
    let members: Vec<String> = (0..200).map(|i| format!("member-{i}")).collect();
    let mut owners = Vec::new();
    for m in &members {
        let owner = bytes(&q(&mut con, &format!("RING.GET cmd:get {m}")));
        assert!(all.contains(&owner));
        let list: Vec<Vec<u8>> = array(&q(&mut con, &format!("RING.GET cmd:get {m} COUNT 3")))
            .iter()
            .map(bytes)
            .collect();
        assert_eq!(list.len(), 3);
        assert_eq!(list[0], owner, "the preference list starts with the owner");
        assert_eq!(list.iter().collect::<BTreeSet<_>>().len(), 3, "distinct");
        let every: BTreeSet<Vec<u8>> = array(&q(
            &mut con,
            &format!("RING.GET cmd:get {m} count 9999999999"),
        ))
        .iter()
        .map(bytes)
        .collect();
        assert_eq!(every, all);
        owners.push(owner);
    }
    let line = format!("RING.MGET cmd:get {}", members.join(" "));
    let mget: Vec<Vec<u8>> = array(&q(&mut con, &line)).iter().map(bytes).collect();
    assert_eq!(mget, owners);
    // Several owners are used (5 nodes, 200 members).
    assert!(owners.iter().collect::<BTreeSet<_>>().len() >= 2);

    // Missing key and empty ring.
    assert_eq!(q(&mut con, "RING.GET cmd:get:none m"), Value::Nil);
    assert_eq!(
        q(&mut con, "RING.GET cmd:get:none m COUNT 2"),
        Value::Array(vec![])
    );
    assert_eq!(
        q(&mut con, "RING.MGET cmd:get:none m1 m2"),
        Value::Array(vec![Value::Nil, Value::Nil])
    );
    q(&mut con, "RING.CREATE cmd:get:empty");
    assert_eq!(q(&mut con, "RING.GET cmd:get:empty m"), Value::Nil);
    assert_eq!(
        q(&mut con, "RING.GET cmd:get:empty m COUNT 2"),
        Value::Array(vec![])
    );
    assert_eq!(
        q(&mut con, "RING.SLOTS cmd:get:empty"),
        Value::Array(vec![])
    );
    assert_eq!(
        q(&mut con, "RING.NODES cmd:get:empty"),
        Value::Array(vec![])
    );
    assert_eq!(q(&mut con, "RING.SLOTS cmd:get:none"), Value::Array(vec![]));
    assert_eq!(q(&mut con, "RING.NODES cmd:get:none"), Value::Array(vec![]));
    assert_eq!(q(&mut con, "RING.INFO cmd:get:none"), Value::Nil);
    assert_eq!(int(&q(&mut con, "RING.DEL cmd:get:none a")), 0);
    assert_eq!(
        int(&q(&mut con, "EXISTS cmd:get:none")),
        0,
        "reads create nothing"
    );
}

#[test]
fn ketama_matches_libmemcached_known_answers() {
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.CREATE cmd:ketama COMPAT ketama");
    let servers = [
        ("10.0.1.1", 600),
        ("10.0.1.2", 300),
        ("10.0.1.3", 200),
        ("10.0.1.4", 350),
        ("10.0.1.5", 1000),
        ("10.0.1.6", 800),
        ("10.0.1.7", 950),
        ("10.0.1.8", 100),
    ];
    for (host, weight) in servers {
        q(
            &mut con,
            &format!("RING.ADD cmd:ketama WEIGHT {weight} {host}:11211"),
        );
    }
    let points: Vec<i64> = node_rows(&mut con, b"cmd:ketama")
        .iter()
        .map(|r| r.2)
        .collect();
    assert_eq!(points, vec![176, 88, 56, 104, 296, 236, 280, 28]);
    let info = map(&q(&mut con, "RING.INFO cmd:ketama"));
    assert_eq!(int(&info["points"]), 1264);
    assert_eq!(text(&info["compat"]), "ketama");
    let rows = vectors("ketama_libmemcached.tsv");
    assert!(rows.len() >= 10);
    for row in rows {
        let member = from_hex(&row[0]);
        let owner = call(&mut con, &[b"RING.GET", b"cmd:ketama", &member]).expect("GET");
        assert_eq!(
            text(&owner),
            format!("{}:11211", row[3]),
            "member {}",
            row[0]
        );
    }
}

#[test]
fn groupcache_vnodes_and_hashtag() {
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.CREATE cmd:gc COMPAT groupcache");
    q(&mut con, "RING.ADD cmd:gc x y");
    let info = map(&q(&mut con, "RING.INFO cmd:gc"));
    assert_eq!(text(&info["compat"]), "groupcache");
    assert_eq!(int(&info["vnodes"]), 50, "groupcache's default replicas");
    assert_eq!(int(&info["points"]), 100);
    q(&mut con, "RING.CREATE cmd:gc7 compat GROUPCACHE vnodes 7");
    q(&mut con, "RING.ADD cmd:gc7 WEIGHT 2 x");
    assert_eq!(node_rows(&mut con, b"cmd:gc7")[0].2, 14);
    q(&mut con, "RING.CREATE cmd:native VNODES 3");
    q(&mut con, "RING.ADD cmd:native WEIGHT 5 x");
    assert_eq!(node_rows(&mut con, b"cmd:native")[0].2, 15);

    // HASHTAG: members hash by their tag on the ring, so a tag and its members share an owner.
    q(&mut con, "RING.CREATE cmd:tag HASHTAG");
    q(&mut con, "RING.ADD cmd:tag n1 n2 n3 n4 n5 n6 n7 n8");
    assert_eq!(
        map(&q(&mut con, "RING.INFO cmd:tag"))["hashtag"],
        Value::Int(1)
    );
    let mut owners = BTreeSet::new();
    for i in 0..40 {
        let plain = q(&mut con, &format!("RING.GET cmd:tag user{i}"));
        assert_eq!(
            q(&mut con, &format!("RING.GET cmd:tag {{user{i}}}.a")),
            plain
        );
        assert_eq!(
            q(&mut con, &format!("RING.GET cmd:tag x{{user{i}}}.b")),
            plain
        );
        owners.insert(bytes(&plain));
    }
    assert!(owners.len() >= 2);
}

#[test]
fn assign_moves_slots_like_addslotsrange() {
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.ADD cmd:assign a b c");
    assert_eq!(q(&mut con, "RING.ASSIGN cmd:assign 0 100 c"), Value::Okay);
    let ranges = slot_ranges(&mut con, b"cmd:assign");
    assert_eq!(ranges[0], (0, 100, b"c".to_vec()));
    assert_eq!(ranges[1], (101, 5460, b"a".to_vec()));
    let slots: Vec<i64> = node_rows(&mut con, b"cmd:assign")
        .iter()
        .map(|r| r.3)
        .collect();
    assert_eq!(slots, vec![5360, 5462, 5562]);
    // The empty member is in slot 0 (CLUSTER KEYSLOT "" = 0).
    let reply = array(&call(&mut con, &[b"RING.SLOT", b"cmd:assign", b""]).unwrap());
    assert_eq!((int(&reply[0]), bytes(&reply[1])), (0, b"c".to_vec()));
    q(&mut con, "RING.ASSIGN cmd:assign 16383 16383 a");
    assert_eq!(
        slot_ranges(&mut con, b"cmd:assign").last().unwrap(),
        &(16383, 16383, b"a".to_vec())
    );
    q(&mut con, "RING.ASSIGN cmd:assign 0 16383 b");
    assert_eq!(
        slot_ranges(&mut con, b"cmd:assign"),
        vec![(0, 16383, b"b".to_vec())]
    );
}

#[test]
fn del_drains_and_an_emptied_ring_keeps_its_configuration() {
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.ADD cmd:del a b c d");
    let four: Vec<i64> = node_rows(&mut con, b"cmd:del")
        .iter()
        .map(|r| r.3)
        .collect();
    assert_eq!(four, vec![4096, 4096, 4096, 4096]);
    assert_eq!(int(&q(&mut con, "RING.DEL cmd:del d zzz d")), 1);
    let rows = node_rows(&mut con, b"cmd:del");
    assert_eq!(rows.len(), 3);
    assert_eq!(rows.iter().map(|r| r.3).sum::<i64>(), 16384);
    assert!(
        rows.iter().all(|r| (5461..=5462).contains(&r.3)),
        "{rows:?}"
    );
    assert_eq!(int(&q(&mut con, "RING.DEL cmd:del zzz")), 0);
    // Members owned by survivors before the removal of a node keep their owner on the ring.
    let before: Vec<Value> = (0..100)
        .map(|i| q(&mut con, &format!("RING.GET cmd:del m{i}")))
        .collect();
    q(&mut con, "RING.DEL cmd:del a");
    for (i, owner) in before.iter().enumerate() {
        if bytes(owner) != b"a" {
            assert_eq!(&q(&mut con, &format!("RING.GET cmd:del m{i}")), owner);
        }
    }
    assert_eq!(int(&q(&mut con, "RING.DEL cmd:del b c")), 2);
    assert_eq!(q(&mut con, "RING.SLOTS cmd:del"), Value::Array(vec![]));
    assert_eq!(int(&map(&q(&mut con, "RING.INFO cmd:del"))["nodes"]), 0);
    assert_eq!(int(&q(&mut con, "EXISTS cmd:del")), 1);

    q(&mut con, "RING.CREATE cmd:del:k COMPAT ketama HASHTAG");
    q(&mut con, "RING.ADD cmd:del:k s1:11211 s2:11211");
    q(&mut con, "RING.DEL cmd:del:k s1:11211 s2:11211");
    let info = map(&q(&mut con, "RING.INFO cmd:del:k"));
    assert_eq!(text(&info["compat"]), "ketama");
    assert_eq!(info["hashtag"], Value::Int(1));
    assert_eq!(int(&info["points"]), 0);
    q(&mut con, "RING.ADD cmd:del:k s3:11211");
    assert_eq!(
        slot_ranges(&mut con, b"cmd:del:k"),
        vec![(0, 16383, b"s3:11211".to_vec())]
    );
}

// Field order as the command reference gives it, kept under RESP2 (flat array) and RESP3.
const NODE_FIELDS: [&str; 6] = [
    "node",
    "weight",
    "points",
    "ring_share",
    "slots",
    "slot_share",
];
const INFO_FIELDS: [&str; 8] = [
    "compat",
    "vnodes",
    "hashtag",
    "nodes",
    "points",
    "ring_peak_to_mean",
    "slot_peak_to_mean",
    "memory_bytes",
];

#[test]
fn nodes_and_info_in_resp2_and_resp3() {
    let server = shared_server();
    let mut r2 = server.client();
    let mut r3 = server.client_resp3();
    q(&mut r2, "RING.ADD cmd:shape a b c");
    for (con, resp3) in [(&mut r2, false), (&mut r3, true)] {
        let nodes = array(&q(con, "RING.NODES cmd:shape"));
        assert_eq!(nodes.len(), 3);
        let mut ring_total = 0.0;
        for (i, n) in nodes.iter().enumerate() {
            let (f, is_map) = fields(n);
            assert_eq!(is_map, resp3);
            let m = map(n);
            assert_eq!(names(n), NODE_FIELDS);
            assert_eq!(bytes(&m["node"]), [b"a", b"b", b"c"][i].to_vec());
            if resp3 {
                assert!(matches!(m["ring_share"], Value::Double(_)));
                assert!(matches!(m["slot_share"], Value::Double(_)));
            } else {
                assert!(matches!(m["ring_share"], Value::BulkString(_)));
            }
            assert_eq!(float(&m["slot_share"]), int(&m["slots"]) as f64 / 16384.0);
            let share = float(&m["ring_share"]);
            assert!((0.0..=1.0).contains(&share));
            ring_total += share;
            assert_eq!(f.len(), 6);
        }
        assert!(
            (ring_total - 1.0).abs() < 1e-9,
            "ring shares sum to 1: {ring_total}"
        );

        let info_reply = q(con, "RING.INFO cmd:shape");
        assert_eq!(fields(&info_reply).1, resp3);
        let info = map(&info_reply);
        assert_eq!(names(&info_reply), INFO_FIELDS);
        assert_eq!(text(&info["compat"]), "native");
        assert_eq!(int(&info["vnodes"]), 160);
        assert_eq!(int(&info["nodes"]), 3);
        assert_eq!(int(&info["points"]), 480);
        assert_eq!(
            info["hashtag"],
            if resp3 {
                Value::Boolean(false)
            } else {
                Value::Int(0)
            }
        );
        // The largest slot count is 5462 of 16384 against an ideal third.
        assert_eq!(float(&info["slot_peak_to_mean"]), 5462.0 / 16384.0 * 3.0);
        assert!(float(&info["ring_peak_to_mean"]) >= 1.0);
        assert!(int(&info["memory_bytes"]) > 0);
    }
    let small = int(&map(&q(&mut r2, "RING.INFO cmd:shape"))["memory_bytes"]);
    q(&mut r2, "RING.ADD cmd:shape d e f g h");
    let big = int(&map(&q(&mut r2, "RING.INFO cmd:shape"))["memory_bytes"]);
    assert!(big > small, "{big} > {small}");

    // RESP3 owners and slots.
    let slot = array(&q(&mut r3, "RING.SLOT cmd:shape foo"));
    assert_eq!(int(&slot[0]), 12182);
    let slot = array(&q(&mut r3, "RING.SLOT cmd:shape:none foo"));
    assert_eq!(slot[1], Value::Nil);
    assert_eq!(q(&mut r3, "RING.GET cmd:shape:none foo"), Value::Nil);
}

#[test]
fn moves_reports_the_three_schemes_and_changes_nothing() {
    let server = shared_server();
    let mut con = server.client();
    let mut r3 = server.client_resp3();
    q(&mut con, "RING.ADD cmd:moves a b c");
    let before = snapshot(&mut con, b"cmd:moves");

    let reply = q(&mut r3, "RING.MOVES cmd:moves ADD d SAMPLE 2000");
    assert!(fields(&reply).1, "a RESP3 map");
    let m = map(&reply);
    assert_eq!(
        names(&reply),
        ["members", "ideal", "ring", "slots", "modulo"]
    );
    assert_eq!(
        names(&q(&mut con, "RING.MOVES cmd:moves ADD d SAMPLE 10")),
        ["members", "ideal", "ring", "slots", "modulo"],
        "the same order in a RESP2 flat array"
    );
    assert_eq!(int(&m["members"]), 2000);
    assert_eq!(float(&m["ideal"]), 0.25);
    let ring = map(&m["ring"]);
    assert_eq!(
        names(&m["ring"]),
        [
            "moved",
            "between_old",
            "fraction",
            "standard_error",
            "space"
        ]
    );
    // The standard error of 2000 independent draws at that fraction.
    let f = float(&ring["fraction"]);
    assert!((float(&ring["standard_error"]) - (f * (1.0 - f) / 2000.0).sqrt()).abs() < 1e-12);
    assert_eq!(
        int(&ring["between_old"]),
        0,
        "a ring moves members only to the new node"
    );
    assert_eq!(
        float(&ring["fraction"]),
        int(&ring["moved"]) as f64 / 2000.0
    );
    assert!((0.0..=1.0).contains(&float(&ring["space"])));
    let slots = map(&m["slots"]);
    assert_eq!(
        names(&m["slots"]),
        [
            "moved",
            "between_old",
            "fraction",
            "standard_error",
            "slots_moved"
        ]
    );
    assert_eq!(
        int(&slots["slots_moved"]),
        4096,
        "rebalance gives the new master 16384/4"
    );
    assert_eq!(int(&slots["between_old"]), 0);
    assert!(int(&slots["moved"]) > 0);
    let modulo = map(&m["modulo"]);
    assert_eq!(
        names(&m["modulo"]),
        ["moved", "between_old", "fraction", "standard_error"]
    );
    assert!(
        int(&modulo["moved"]) > int(&slots["moved"]),
        "mod N moves most members"
    );
    assert!(int(&modulo["between_old"]) > 0);

    let m = map(&q(&mut con, "RING.MOVES cmd:moves DEL a SAMPLE 500"));
    assert_eq!(int(&m["members"]), 500);
    assert_eq!(float(&m["ideal"]), 1.0 / 3.0);
    assert_eq!(
        int(&map(&m["slots"])["slots_moved"]),
        5461,
        "all of a's slots"
    );
    assert_eq!(int(&map(&m["ring"])["between_old"]), 0);
    assert_eq!(int(&map(&m["slots"])["between_old"]), 0);
    let m = map(&q(
        &mut con,
        "RING.MOVES cmd:moves add d weight 3 sample 10",
    ));
    assert_eq!(float(&m["ideal"]), 0.5);

    // Default sample.
    let m = map(&q(&mut con, "RING.MOVES cmd:moves ADD d"));
    assert_eq!(int(&m["members"]), 100_000);

    // KEYS evaluates the real keys matching the glob.
    for i in 0..40 {
        q(&mut con, &format!("SET cmd:moves:user:{i} v"));
    }
    let m = map(&q(
        &mut con,
        "RING.MOVES cmd:moves ADD d KEYS cmd:moves:user:*",
    ));
    assert_eq!(int(&m["members"]), 40);
    // More matches than one SCAN batch, binary names among them: each key counts once.
    let mut pipe = redis::pipe();
    for i in 0..2500 {
        let mut key = format!("cmd:moves:many:{i}:").into_bytes();
        key.push(0xff);
        pipe.cmd("SET").arg(key).arg("v").ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    let m = map(&q(
        &mut con,
        "RING.MOVES cmd:moves ADD d KEYS cmd:moves:many:*",
    ));
    assert_eq!(int(&m["members"]), 2500);
    // ... and exactly those keys: the moves predicted are the owners that really change when
    // a copy of the ring takes d (expected value: RING.MGET before and after).
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
        .arg("cmd:moves:many:*")
        .query(&mut con)
        .unwrap();
    assert!(keys.iter().all(|k| k.last() == Some(&0xff)), "binary names");
    let owners = |con: &mut redis::Connection| -> Vec<Value> {
        let mut args: Vec<&[u8]> = vec![b"RING.MGET", b"cmd:moves:copy"];
        args.extend(keys.iter().map(Vec::as_slice));
        array(&call(con, &args).unwrap())
    };
    q(&mut con, "COPY cmd:moves cmd:moves:copy");
    let before_add = owners(&mut con);
    q(&mut con, "RING.ADD cmd:moves:copy d");
    let after_add = owners(&mut con);
    let changed = before_add
        .iter()
        .zip(&after_add)
        .filter(|(b, a)| b != a)
        .count();
    assert!(changed > 0);
    assert_eq!(int(&map(&m["ring"])["moved"]), changed as i64);
    q(&mut con, "DEL cmd:moves:copy");
    let m = map(&q(
        &mut con,
        "RING.MOVES cmd:moves DEL b KEYS nothing:matches:*",
    ));
    assert_eq!(int(&m["members"]), 0);
    // Nothing evaluated: no fraction to give.
    for s in ["ring", "slots", "modulo"] {
        let scheme = map(&m[s]);
        assert_eq!(int(&scheme["moved"]), 0);
        assert_eq!(scheme["fraction"], Value::Nil, "{s}");
        // Real keys are counted exactly: no sampling error is replied.
        assert!(!scheme.contains_key("standard_error"), "{s}");
    }

    assert_eq!(
        snapshot(&mut con, b"cmd:moves"),
        before,
        "RING.MOVES changes nothing"
    );

    // A missing ring (a typo, say) is an error naming the key, for every evaluation of a
    // ring; RING.GET of a missing ring stays nil, as GET of a missing key.
    for line in [
        "RING.MOVES cmd:mvoes ADD a SAMPLE 10",
        "RING.PLAN cmd:mvoes ADD a",
        "RING.OWNERS cmd:mvoes m",
        "RING.BALANCE cmd:mvoes",
    ] {
        assert_eq!(e(&mut con, line), "ERR no such key 'cmd:mvoes'", "{line}");
    }
    assert_eq!(q(&mut con, "RING.GET cmd:mvoes m"), Value::Nil);
    assert_eq!(int(&q(&mut con, "EXISTS cmd:mvoes")), 0);
}

#[test]
fn resp2_doubles_are_the_shortest_text_that_reads_back() {
    // Issue 15: Redis 7.0 writes RESP2 doubles with %.17g ("0.20000000000000001"); ringslot
    // writes the shortest decimal text that parses to the same double ("0.2").
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.ADD cmd:doubles a b c d");
    let m = q(&mut con, "RING.MOVES cmd:doubles ADD e SAMPLE 10");
    // One node joining four of equal weight: a perfect scheme moves 1/5.
    assert_eq!(map(&m)["ideal"], Value::BulkString(b"0.2".to_vec()));
    let info = map(&q(&mut con, "RING.INFO cmd:doubles"));
    // 4096 slots each: exactly the mean.
    assert_eq!(info["slot_peak_to_mean"], Value::BulkString(b"1".to_vec()));
    for node in array(&q(&mut con, "RING.NODES cmd:doubles")) {
        let share = text(&map(&node)["ring_share"]);
        let value: f64 = share.parse().unwrap();
        assert_eq!(value.to_string(), share, "shortest form");
        assert!(share.len() <= 19, "{share}");
    }
    // RESP3 clients get real doubles.
    let mut r3 = server.client_resp3();
    let m = q(&mut r3, "RING.MOVES cmd:doubles ADD e SAMPLE 10");
    assert_eq!(map(&m)["ideal"], Value::Double(0.2));
}

#[test]
fn moves_evaluates_a_re_weight() {
    // Issue 15: `RING.MOVES key ADD <node in the ring> WEIGHT w` is what `RING.ADD key WEIGHT
    // w node` would do. Expected values: the owners that really change when a copy of the
    // ring is re-weighted (RING.MGET before and after), and the share arithmetic.
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.ADD cmd:rew a b c d");
    let keys: Vec<String> = (0..3000).map(|i| format!("cmd:rew:k{i}")).collect();
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.cmd("SET").arg(k).arg("v").ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    let before = snapshot(&mut con, b"cmd:rew");
    let m = map(&q(
        &mut con,
        "RING.MOVES cmd:rew ADD a WEIGHT 3 KEYS cmd:rew:k*",
    ));
    assert_eq!(
        snapshot(&mut con, b"cmd:rew"),
        before,
        "a what-if changes nothing"
    );
    assert_eq!(int(&m["members"]), 3000);
    // a goes from 1/4 of the weight to 3/6: a perfect scheme moves 1/2 - 1/4 of the members.
    assert_eq!(float(&m["ideal"]), 0.25);
    let ring = map(&m["ring"]);
    assert_eq!(
        int(&ring["between_old"]),
        0,
        "points depend on (node, index) only"
    );
    let slots = map(&m["slots"]);
    assert_eq!(int(&slots["between_old"]), 0, "the rebalance only feeds a");
    assert_eq!(
        int(&map(&m["modulo"])["moved"]),
        0,
        "modulo ignores weights"
    );

    q(&mut con, "COPY cmd:rew cmd:rew:copy");
    let owners = |con: &mut redis::Connection, what: &[u8]| -> Vec<Value> {
        let mut args: Vec<&[u8]> = vec![what, b"cmd:rew:copy"];
        args.extend(keys.iter().map(|k| k.as_bytes()));
        if what == b"RING.MGET" {
            array(&call(con, &args).unwrap())
        } else {
            keys.iter()
                .map(|k| {
                    array(&call(con, &[b"RING.SLOT", b"cmd:rew:copy", k.as_bytes()]).unwrap())[1]
                        .clone()
                })
                .collect()
        }
    };
    let ring_before = owners(&mut con, b"RING.MGET");
    let slot_before = owners(&mut con, b"RING.SLOT");
    q(&mut con, "RING.ADD cmd:rew:copy WEIGHT 3 a");
    let changed = |a: &[Value], b: &[Value]| a.iter().zip(b).filter(|(x, y)| x != y).count() as i64;
    assert_eq!(
        int(&ring["moved"]),
        changed(&ring_before, &owners(&mut con, b"RING.MGET"))
    );
    assert_eq!(
        int(&slots["moved"]),
        changed(&slot_before, &owners(&mut con, b"RING.SLOT"))
    );
    assert!(int(&ring["moved"]) > 0);
    // The same weight again changes nothing.
    let m = map(&q(
        &mut con,
        "RING.MOVES cmd:rew:copy ADD a WEIGHT 3 SAMPLE 100",
    ));
    assert_eq!(int(&map(&m["ring"])["moved"]), 0);
    assert_eq!(float(&m["ideal"]), 0.0);
    q(&mut con, "DEL cmd:rew:copy");
}

#[test]
fn node_names_and_members_are_binary_safe() {
    let server = shared_server();
    let mut con = server.client();
    let names: [&[u8]; 4] = [
        b"\x00bin\xff",
        b"with space",
        b"crlf\r\n",
        "\u{4e2d}".as_bytes(),
    ];
    let mut args: Vec<&[u8]> = vec![b"RING.ADD", b"cmd:bin"];
    args.extend(names);
    assert_eq!(call(&mut con, &args).unwrap(), Value::Int(4));
    let in_layout: Vec<Vec<u8>> = slot_ranges(&mut con, b"cmd:bin")
        .into_iter()
        .map(|r| r.2)
        .collect();
    assert_eq!(
        in_layout,
        names.iter().map(|n| n.to_vec()).collect::<Vec<_>>()
    );
    let rows: Vec<Vec<u8>> = node_rows(&mut con, b"cmd:bin")
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(rows, in_layout);
    let all: BTreeSet<Vec<u8>> = in_layout.iter().cloned().collect();
    for member in [&b"\x00\xff"[..], b"", b"\r\n", b"{}"] {
        let owner = call(&mut con, &[b"RING.GET", b"cmd:bin", member]).unwrap();
        assert!(all.contains(&bytes(&owner)));
        let list =
            array(&call(&mut con, &[b"RING.GET", b"cmd:bin", member, b"COUNT", b"4"]).unwrap());
        assert_eq!(list.iter().map(bytes).collect::<BTreeSet<_>>(), all);
    }
    assert_eq!(
        call(
            &mut con,
            &[b"RING.ASSIGN", b"cmd:bin", b"0", b"9", b"\x00bin\xff"]
        )
        .unwrap(),
        Value::Okay
    );
    let reply = call(&mut con, &[b"RING.DEL", b"cmd:bin", b"crlf\r\n"]).unwrap();
    assert_eq!(reply, Value::Int(1));
    assert_eq!(
        e_raw(&mut con, &[b"RING.ADD", b"cmd:bin", b""]),
        "ERR node name must not be empty"
    );
    // A binary ring key name.
    assert_eq!(
        call(&mut con, &[b"RING.ADD", b"cmd:\x00\xffkey", b"n"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        call(&mut con, &[b"TYPE", b"cmd:\x00\xffkey"]).unwrap(),
        Value::SimpleString("ringslot1".into())
    );
}

#[test]
fn configurations_drive_new_rings_and_limits() {
    let server = shared_server();
    let mut con = server.client();
    let got = array(&q(&mut con, "CONFIG GET ringslot.*"));
    let got: std::collections::BTreeMap<String, String> =
        got.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect();
    assert_eq!(got["ringslot.default-vnodes"], "160");
    assert_eq!(got["ringslot.max-points"], "1000000");
    assert_eq!(got["ringslot.max-sample"], "1000000000");
    assert_eq!(got["ringslot.inline-limit"], "100000");
    assert_eq!(got["ringslot.max-background"], "2");
    assert!(e(&mut con, "CONFIG SET ringslot.default-vnodes 0").starts_with("ERR"));
    assert!(e(&mut con, "CONFIG SET ringslot.max-sample abc").starts_with("ERR"));
}

#[test]
fn bad_loadmodule_arguments_stop_the_load_with_a_reason() {
    // Issue 10: the crate took module arguments as unchecked defaults, so `max-points 0`
    // started a server with a value CONFIG SET refuses, and unknown names were ignored.
    for (args, reason) in [
        (
            &["max-points", "0"][..],
            "module argument 'max-points' is '0': it must be an integer from 1 to 100000000",
        ),
        (
            &["max-points", "-5"],
            "module argument 'max-points' is '-5': it must be an integer from 1 to 100000000",
        ),
        (
            &["max-sample", "0"],
            "module argument 'max-sample' is '0': it must be an integer from 1 to 1000000000000",
        ),
        (
            &["default-vnodes", "200000"],
            "module argument 'default-vnodes' is '200000': it must be an integer from 1 to 100000",
        ),
        (
            &["nosuch-option", "5"],
            "unknown module argument 'nosuch-option'",
        ),
        (&["max_sample", "5"], "unknown module argument 'max_sample'"),
        (
            &["max-sample"],
            "module argument 'max-sample' needs a value",
        ),
    ] {
        let err = match Server::builder().module_args(args).start() {
            Ok(_) => panic!("{args:?}: the server started"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(reason), "{args:?}: {err}");
        assert!(err.contains("Can't load module"), "{err}");
    }
}

#[test]
fn configurations_from_loadmodule_arguments() {
    let s = Server::start_with(
        &[
            "default-vnodes",
            "20",
            "max-sample",
            "5",
            "max-points",
            "100",
        ],
        &[],
    );
    let mut con = s.client();
    assert_eq!(
        text(&array(&q(&mut con, "CONFIG GET ringslot.default-vnodes"))[1]),
        "20"
    );
    q(&mut con, "RING.ADD r a b");
    assert_eq!(node_rows(&mut con, b"r")[0].2, 20);
    assert_eq!(int(&map(&q(&mut con, "RING.INFO r"))["vnodes"]), 20);
    // The default sample (100000) is never cut to the limit silently.
    assert_eq!(
        e(&mut con, "RING.MOVES r ADD c"),
        "ERR the default SAMPLE 100000 is more than ringslot.max-sample (5): give SAMPLE n (at \
         most 5) or KEYS pattern"
    );
    assert_eq!(
        int(&map(&q(&mut con, "RING.MOVES r ADD c SAMPLE 5"))["members"]),
        5
    );
    let err = e(&mut con, "RING.MOVES r ADD c SAMPLE 6");
    assert!(
        err.starts_with("ERR ") && err.contains("ringslot.max-sample"),
        "{err}"
    );
    // 6 nodes x 20 points would pass max-points 100.
    let before = snapshot(&mut con, b"r");
    let err = e(&mut con, "RING.ADD r c d e f");
    assert!(
        err.starts_with("ERR ") && err.contains("ringslot.max-points"),
        "{err}"
    );
    assert_eq!(snapshot(&mut con, b"r"), before);
    q(&mut con, "CONFIG SET ringslot.default-vnodes 7");
    q(&mut con, "RING.ADD r2 a");
    assert_eq!(node_rows(&mut con, b"r2")[0].2, 7);
    q(&mut con, "CONFIG SET ringslot.max-points 1000");
    q(&mut con, "RING.ADD r c d e f");
    assert_eq!(node_rows(&mut con, b"r").len(), 6);
}
