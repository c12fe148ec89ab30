//! Rings survive everything Redis does with values: SAVE + restart, DEBUG RELOAD, DUMP /
//! RESTORE, COPY, MEMORY USAGE, DEBUG DIGEST-VALUE, and AOF (plain and rewritten without the
//! RDB preamble) + restart.

use redis::{Connection, Value};
use ringslot_harness::prelude::*;
use ringslot_harness::redis;

const RINGS: [&str; 11] = [
    "p:native",
    "p:ketama",
    "p:groupcache",
    "p:emptied",
    "p:binary\x01",
    "p:haproxy",
    "p:predis",
    "p:redis-rb",
    "p:envoy",
    "p:maglev",
    "p:pymemcache",
];

/// Builds rings of every kind of flavour with a history-dependent slot table (adds, a removal,
/// a re-weight and assignments), an emptied ring, and binary node names; rings of proxies and
/// client libraries (points by position, the last point at or before, no weights, 64-bit).
fn build(con: &mut Connection) {
    for line in [
        "RING.CREATE p:native VNODES 40 HASHTAG",
        "RING.ADD p:native a b c",
        "RING.ADD p:native WEIGHT 2 d",
        "RING.DEL p:native b",
        "RING.ADD p:native WEIGHT 3 a",
        "RING.ASSIGN p:native 100 200 c",
        "RING.ASSIGN p:native 16000 16383 d",
        "RING.CREATE p:ketama COMPAT ketama",
        "RING.ADD p:ketama WEIGHT 5 10.0.0.1:11211 10.0.0.2:6379",
        "RING.ADD p:ketama 10.0.0.3",
        "RING.CREATE p:groupcache COMPAT groupcache VNODES 7 HASHTAG",
        "RING.ADD p:groupcache x y z",
        "RING.ASSIGN p:groupcache 0 0 z",
        "RING.CREATE p:emptied COMPAT groupcache VNODES 9",
        "RING.ADD p:emptied x",
        "RING.DEL p:emptied x",
        "RING.CREATE p:haproxy COMPAT haproxy",
        "RING.ADD p:haproxy s1 s2 s3 s4",
        "RING.ADD p:haproxy WEIGHT 3 s2",
        "RING.DEL p:haproxy s1",
        "RING.CREATE p:predis COMPAT predis VNODES 100",
        "RING.ADD p:predis WEIGHT 100 10.0.0.1:6379 /tmp/r.sock",
        "RING.ADD p:predis WEIGHT 250 10.0.0.3:6379",
        "RING.CREATE p:redis-rb COMPAT redis-rb",
        "RING.ADD p:redis-rb 10.0.0.1:6379 redis://h:1/2 10.0.0.3:6379",
        "RING.DEL p:redis-rb 10.0.0.1:6379",
        "RING.CREATE p:envoy COMPAT envoy-redis HASHTAG",
        "RING.ADD p:envoy 10.0.0.1:80 [::1]:8080",
        "RING.ADD p:envoy WEIGHT 2 10.0.0.3:80",
        "RING.CREATE p:maglev COMPAT envoy-maglev",
        "RING.ADD p:maglev 10.0.0.1:80 10.0.0.2:80",
        "RING.ADD p:maglev WEIGHT 3 10.0.0.3:80",
        "RING.CREATE p:pymemcache COMPAT pymemcache",
        "RING.ADD p:pymemcache 10.0.0.1:11211 10.0.0.2:11211 10.0.0.3:11211",
        "RING.DEL p:pymemcache 10.0.0.2:11211",
    ] {
        q(con, line);
    }
    let add: [&[u8]; 5] = [
        b"RING.ADD",
        b"p:binary\x01",
        b"\x00n\xff",
        b"sp ace",
        b"crlf\r\n",
    ];
    call(con, &add).unwrap();
    call(
        con,
        &[b"RING.ASSIGN", b"p:binary\x01", b"7", b"9", b"crlf\r\n"],
    )
    .unwrap();
}

/// Everything observable about the rings: NODES, SLOTS, INFO and some owners.
fn observe(con: &mut Connection) -> Vec<Value> {
    let mut seen = Vec::new();
    for ring in RINGS {
        let key = ring.as_bytes();
        seen.push(call(con, &[b"TYPE", key]).unwrap());
        let (nodes, slots) = snapshot(con, key);
        seen.push(nodes);
        seen.push(slots);
        seen.push(Value::Array(
            info_state(con, key)
                .into_iter()
                .flat_map(|(k, v)| [Value::BulkString(k.into_bytes()), v])
                .collect(),
        ));
        let members: Vec<Vec<u8>> = (0..50).map(|i| format!("m{i}").into_bytes()).collect();
        let mut mget: Vec<&[u8]> = vec![b"RING.MGET", key];
        mget.extend(members.iter().map(Vec::as_slice));
        seen.push(call(con, &mget).unwrap());
        for m in &members[..10] {
            seen.push(call(con, &[b"RING.SLOT", key, m]).unwrap());
        }
    }
    seen
}

/// The base file of `server`'s multi-part AOF (what the last rewrite wrote).
fn base_aof(server: &Server) -> Vec<u8> {
    let aof_dir = server.dir.path().join("appendonlydir");
    let base = std::fs::read_dir(&aof_dir)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().contains(".base.aof"))
        .expect("a base AOF");
    std::fs::read(base.path()).unwrap()
}

#[test]
fn save_and_restart() {
    let server = Server::start();
    let mut con = server.client();
    build(&mut con);
    let before = observe(&mut con);
    assert_eq!(q(&mut con, "SAVE"), Value::Okay);
    let dir = server.stop();
    assert!(dir.path().join("dump.rdb").exists());
    let server = Server::start_in(dir, &[], &[]);
    let mut con = server.client();
    assert_eq!(int(&q(&mut con, "DBSIZE")), RINGS.len() as i64);
    assert_eq!(observe(&mut con), before);
    // The restored rings keep working and keep their history.
    assert_eq!(int(&q(&mut con, "RING.ADD p:native e")), 1);
    assert_eq!(
        slot_ranges(&mut con, b"p:native")
            .iter()
            .map(|r| r.1 - r.0 + 1)
            .sum::<i64>(),
        16384
    );
}

#[test]
fn debug_reload_dump_restore_copy_digest_memory() {
    let server = shared_server();
    let mut con = server.client();
    build(&mut con);
    let before = observe(&mut con);
    assert_eq!(q(&mut con, "DEBUG RELOAD"), Value::Okay);
    assert_eq!(observe(&mut con), before);

    for ring in RINGS {
        let key = ring.as_bytes();
        let digest = call(&mut con, &[b"DEBUG", b"DIGEST-VALUE", key]).unwrap();
        assert_ne!(
            array(&digest)[0],
            Value::BulkString(vec![b'0'; 40]),
            "{ring}"
        );

        // DUMP / RESTORE under another name.
        let payload = bytes(&call(&mut con, &[b"DUMP", key]).unwrap());
        let restored = [key, b":restored"].concat();
        call(&mut con, &[b"RESTORE", &restored, b"0", &payload]).unwrap();
        assert_eq!(
            snapshot(&mut con, &restored),
            snapshot(&mut con, key),
            "{ring}"
        );
        assert_eq!(
            call(&mut con, &[b"DEBUG", b"DIGEST-VALUE", &restored]).unwrap(),
            digest,
            "{ring}"
        );
        // A damaged payload is refused and the server carries on.
        let mut damaged = payload.clone();
        let mid = damaged.len() / 2;
        damaged[mid] ^= 0x55;
        assert!(call(&mut con, &[b"RESTORE", b"p:damaged", b"0", &damaged]).is_err());
        assert_pong(&mut con);

        // COPY gives an independent ring.
        let copied = [key, b":copy"].concat();
        assert_eq!(
            call(&mut con, &[b"COPY", key, &copied]).unwrap(),
            Value::Int(1)
        );
        assert_eq!(
            snapshot(&mut con, &copied),
            snapshot(&mut con, key),
            "{ring}"
        );
        assert_eq!(
            call(&mut con, &[b"DEBUG", b"DIGEST-VALUE", &copied]).unwrap(),
            digest
        );
        call(&mut con, &[b"RING.ADD", &copied, b"copy-only"]).unwrap();
        assert_ne!(snapshot(&mut con, &copied), snapshot(&mut con, key));
        assert_ne!(
            call(&mut con, &[b"DEBUG", b"DIGEST-VALUE", &copied]).unwrap(),
            digest
        );

        // MEMORY USAGE reports the ring (at least what RING.INFO counts).
        let usage = int(&call(&mut con, &[b"MEMORY", b"USAGE", key]).unwrap());
        let info = map(&call(&mut con, &[b"RING.INFO", key]).unwrap());
        assert!(usage >= int(&info["memory_bytes"]), "{ring}: {usage}");
    }
    let small = int(&q(&mut con, "MEMORY USAGE p:emptied"));
    let big = int(&q(&mut con, "MEMORY USAGE p:native"));
    assert!(big > small, "{big} > {small}");
    assert_eq!(observe(&mut con), before, "the originals are untouched");
}

fn aof_args() -> [&'static str; 6] {
    [
        "--appendonly",
        "yes",
        "--aof-use-rdb-preamble",
        "no",
        "--appendfsync",
        "always",
    ]
}

#[test]
fn aof_rewrite_without_preamble_and_restart() {
    let server = Server::start_with(&[], &aof_args());
    let mut con = server.client();
    wait_aof_rewrite(&mut con);
    build(&mut con);
    let before = observe(&mut con);
    q(&mut con, "BGREWRITEAOF");
    wait_aof_rewrite(&mut con);
    // The rewritten base is commands, not an RDB.
    let text = base_aof(&server);
    assert!(!text.starts_with(b"REDIS"), "no RDB preamble");
    let text = String::from_utf8_lossy(&text);
    assert!(
        text.contains("RING.CREATE") && text.contains("RING.ADD") && text.contains("RING.ASSIGN")
    );
    // Writes after the rewrite go to the incremental file.
    q(&mut con, "RING.ADD p:ketama 10.0.0.9:11211");
    let before_after_write = observe(&mut con);
    assert_ne!(before_after_write, before);

    let dir = server.stop();
    // A lower ringslot.max-points does not stop the replay of rings accepted before.
    let server = Server::start_in(dir, &["max-points", "10"], &aof_args());
    let mut con = server.client();
    assert_eq!(observe(&mut con), before_after_write);
    assert!(e(&mut con, "RING.ADD p:ketama 10.0.0.10").contains("ringslot.max-points"));
}

#[test]
fn aof_replay_of_the_commands_as_called() {
    let server = Server::start_with(&[], &aof_args());
    let mut con = server.client();
    wait_aof_rewrite(&mut con);
    build(&mut con);
    // A refused write and a no-op write leave no trace that could break the replay.
    assert!(e(&mut con, "RING.ASSIGN p:native 0 1 nobody").starts_with("ERR"));
    assert_eq!(int(&q(&mut con, "RING.ADD p:native a")), 0);
    let before = observe(&mut con);
    let dir = server.stop();
    // Nor does another ringslot.default-vnodes change p:binary, which RING.ADD created.
    let server = Server::start_in(
        dir,
        &["max-points", "10", "default-vnodes", "3"],
        &aof_args(),
    );
    let mut con = server.client();
    assert_eq!(observe(&mut con), before);
}

#[test]
fn the_shipped_redis_conf_keeps_rings_across_a_restart() {
    // Issue 15: `make run` starts `redis-server redis.conf` from the repository root; rings
    // must survive a SHUTDOWN and a new `make run`. The same layout in a scratch directory:
    // redis.conf as shipped, data/, and the module where redis.conf looks for it.
    let root = ringslot_harness::server::workspace_root();
    let lay_out = || {
        let dir = ringslot_harness::tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        std::fs::create_dir_all(dir.path().join("target/release")).unwrap();
        std::fs::copy(
            ringslot_harness::server::test_module(),
            dir.path().join("target/release/libringslot.so"),
        )
        .unwrap();
        std::fs::copy(root.join("redis.conf"), dir.path().join("redis.conf")).unwrap();
        dir
    };
    let start = |dir| {
        Server::builder()
            .dir(dir)
            .config_file(std::path::Path::new("redis.conf"))
            .start()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let server = start(lay_out());
    let mut con = server.client();
    q(&mut con, "RING.CREATE kept VNODES 40");
    q(&mut con, "RING.ADD kept a b c");
    let before = snapshot(&mut con, b"kept");
    let dir = server.stop();
    assert!(
        dir.path().join("data/appendonlydir").exists(),
        "the AOF is in data/"
    );
    let server = start(dir);
    let mut con = server.client();
    assert_eq!(snapshot(&mut con, b"kept"), before);
}

#[test]
fn the_aof_rewrite_adds_runs_of_nodes_and_replays_a_big_ring_exactly() {
    // Issue 10: the rewrite emitted one RING.ADD per node, and replaying N of them costs N
    // incremental changes (quadratic). Now one RING.ADD per run of nodes of one weight, at
    // most 4096 nodes each: 5000 nodes of weight 1, 2 of weight 3, 1000 of weight 1 make
    // 2 + 1 + 1 commands, and the replay rebuilds the same ring (history-dependent slots
    // included). And at most 65536 points each (a replayed command holds the server a few
    // ms, also on the target of an atomic slot migration, which replays these commands):
    // 1000 nodes of 160 points make 3 commands of 409, 409 and 182 nodes.
    let server = Server::start_with(&[], &aof_args());
    let mut con = server.client();
    wait_aof_rewrite(&mut con);
    q(&mut con, "RING.CREATE big:aof VNODES 4");
    q(&mut con, "RING.CREATE dense:aof VNODES 160");
    let add_to = |con: &mut Connection, key: &str, weight: u32, range: std::ops::Range<u32>| {
        let names: Vec<String> = range
            .map(|i| format!("10.{}.{}.1:6379", i / 250, i % 250))
            .collect();
        let mut args: Vec<&[u8]> = vec![b"RING.ADD", key.as_bytes(), b"WEIGHT"];
        let w = weight.to_string();
        args.push(w.as_bytes());
        args.extend(names.iter().map(|n| n.as_bytes()));
        call(con, &args).unwrap();
    };
    let add = |con: &mut Connection, weight: u32, range: std::ops::Range<u32>| {
        add_to(con, "big:aof", weight, range)
    };
    add(&mut con, 1, 0..5000);
    add(&mut con, 3, 5000..5002);
    add(&mut con, 1, 5002..6002);
    q(&mut con, "RING.ASSIGN big:aof 100 200 10.0.7.1:6379");
    add_to(&mut con, "dense:aof", 1, 0..1000);
    let rings = |con: &mut Connection| {
        [&b"big:aof"[..], b"dense:aof"].map(|k| (snapshot(con, k), info_state(con, k)))
    };
    let before = rings(&mut con);
    q(&mut con, "BGREWRITEAOF");
    wait_aof_rewrite(&mut con);
    let text = String::from_utf8_lossy(&base_aof(&server)).into_owned();
    assert_eq!(
        text.matches("RING.ADD\r\n$7\r\nbig:aof\r\n").count(),
        4,
        "runs of one weight, 4096 at most"
    );
    let dense: Vec<usize> = text
        .split("RING.ADD\r\n$9\r\ndense:aof\r\n")
        .skip(1)
        .map(|rest| {
            // The command's own arguments: up to the next command's array header.
            let command = rest.split("\r\n*").next().unwrap_or_default();
            command.matches(":6379").count()
        })
        .collect();
    assert_eq!(dense, vec![409, 409, 182], "65536 points at most");
    let dir = server.stop();
    let server = Server::start_in(dir, &[], &aof_args());
    let mut con = server.client();
    assert_eq!(rings(&mut con), before);
}
