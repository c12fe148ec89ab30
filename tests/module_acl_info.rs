//! What Redis knows about the commands (COMMAND INFO / DOCS / GETKEYS, arity, flags, key
//! specs), ACL key permissions built on those key specs, and keyspace notifications.

use redis::Value;
use ringslot::module::table::COMMANDS;
use ringslot_harness::prelude::*;
use ringslot_harness::redis;
use std::collections::BTreeSet;
use std::time::Duration;

/// The command table's flags as `COMMAND INFO` names them (`deny-oom` is `denyoom` there).
fn info_flags(flags: &str) -> BTreeSet<String> {
    flags
        .split(' ')
        .map(|f| if f == "deny-oom" { "denyoom" } else { f }.to_string())
        .collect()
}

#[test]
fn command_info_getkeys_and_docs() {
    let server = shared_server();
    let mut con = server.client();
    // The server knows every command of the table, and no other of the module.
    let listed: BTreeSet<String> = array(&q(&mut con, "COMMAND LIST FILTERBY MODULE ringslot"))
        .iter()
        .map(text)
        .collect();
    let table: BTreeSet<String> = COMMANDS.iter().map(|c| c.name.to_string()).collect();
    assert_eq!(listed, table);
    for command in &COMMANDS {
        let name = command.name;
        let flags = info_flags(command.flags);
        let info = array(&q(&mut con, &format!("COMMAND INFO {name}")));
        let info = array(&info[0]);
        assert_eq!(text(&info[0]), name);
        assert_eq!(int(&info[1]), i64::from(command.arity), "{name} arity");
        let got: BTreeSet<String> = array(&info[2]).iter().map(text).collect();
        let mut want = flags.clone();
        want.insert("module".into());
        assert_eq!(got, want, "{name} flags");
        assert_eq!(
            (int(&info[3]), int(&info[4]), int(&info[5])),
            (1, 1, 1),
            "{name} keys"
        );
        // One key spec: the key at index 1, RW for writers and RO for readers.
        let specs = array(&info[8]);
        assert_eq!(specs.len(), 1, "{name} key specs");
        let spec = map(&specs[0]);
        let spec_flags: BTreeSet<String> = array(&spec["flags"]).iter().map(text).collect();
        let access = if flags.contains("write") { "RW" } else { "RO" };
        assert!(spec_flags.contains(access), "{name}: {spec_flags:?}");
        let begin = map(&spec["begin_search"]);
        assert_eq!(text(&begin["type"]), "index");
        assert_eq!(int(&map(&begin["spec"])["index"]), 1);

        let docs = array(&q(&mut con, &format!("COMMAND DOCS {name}")));
        assert_eq!(text(&docs[0]), name);
        let doc = map(&docs[1]);
        assert!(!text(&doc["summary"]).is_empty(), "{name} summary");
        assert_eq!(text(&doc["module"]), "ringslot");
        let first_arg = map(&array(&doc["arguments"])[0]);
        assert_eq!(text(&first_arg["type"]), "key");
    }
    let docs = array(&q(&mut con, "COMMAND DOCS ring.create"));
    let args: Vec<String> = array(&map(&docs[1])["arguments"])
        .iter()
        .map(|a| text(&map(a)["name"]))
        .collect();
    assert_eq!(args, ["key", "compat", "vnodes", "hashtag"]);
    // The change of RING.PLAN and RING.MOVES: one of three blocks.
    let docs = array(&q(&mut con, "COMMAND DOCS ring.plan"));
    let args = array(&map(&docs[1])["arguments"]);
    let change = map(&args[1]);
    assert_eq!(text(&change["name"]), "change");
    assert_eq!(text(&change["type"]), "oneof");
    let blocks: Vec<String> = array(&change["arguments"])
        .iter()
        .map(|a| text(&map(a)["name"]))
        .collect();
    assert_eq!(blocks, ["add", "del", "rebalance"]);

    for line in [
        "COMMAND GETKEYS RING.ADD info:ring a b",
        "COMMAND GETKEYS RING.ADD info:ring WEIGHT 2 a",
        "COMMAND GETKEYS RING.GET info:ring m COUNT 3",
        "COMMAND GETKEYS RING.MOVES info:ring ADD n KEYS user:*",
        "COMMAND GETKEYS RING.PLAN info:ring REBALANCE",
        "COMMAND GETKEYS RING.ASSIGN info:ring 0 10 a",
        "COMMAND GETKEYS RING.SLOTS info:ring",
    ] {
        assert_eq!(
            q(&mut con, line),
            Value::Array(vec![Value::BulkString(b"info:ring".to_vec())]),
            "{line}"
        );
    }
}

#[test]
fn acl_key_patterns_apply_to_ring_keys() {
    let server = shared_server();
    let mut admin = server.client();
    q(&mut admin, "ACL SETUSER limited on >secret ~other:* +@all");
    q(&mut admin, "RING.ADD ring:acl a b");
    let mut con = server.client();
    q(&mut con, "AUTH limited secret");
    for line in [
        "RING.GET ring:acl m",
        "RING.ADD ring:acl c",
        "RING.CREATE ring:acl:new",
        "RING.NODES ring:acl",
        "RING.MOVES ring:acl ADD c SAMPLE 10",
    ] {
        let err = e(&mut con, line);
        assert!(err.starts_with("NOPERM"), "{line}: {err}");
        assert_pong(&mut con);
    }
    assert_eq!(int(&q(&mut con, "RING.ADD other:acl a b")), 2);
    assert_eq!(slot_ranges(&mut con, b"other:acl").len(), 2);
    assert_eq!(
        node_rows(&mut admin, b"ring:acl").len(),
        2,
        "the refused ADD changed nothing"
    );
    assert_eq!(int(&q(&mut admin, "EXISTS ring:acl:new")), 0);
}

#[test]
fn key_specs_separate_readers_from_writers() {
    // Issue 15: RING.INFO and RING.MOVES read the ring, RING.DEL changes it without deleting
    // the key. A read-only user (%R~) may run every reader and no writer; a write-only user
    // (%W~) the opposite. Expected outcomes: the ACL rules of Redis 7.0 (`ACL SETUSER`,
    // "Selectors" and key permissions), applied to the key specs COMMAND INFO shows.
    let server = shared_server();
    let mut admin = server.client();
    q(&mut admin, "RING.ADD app:ring a b c");
    q(&mut admin, "ACL SETUSER reader on >pw %R~app:* +@all");
    q(&mut admin, "ACL SETUSER writer on >pw %W~app:* +@all");
    let readers = [
        "RING.GET app:ring m",
        "RING.MGET app:ring m n",
        "RING.SLOT app:ring m",
        "RING.SLOTS app:ring",
        "RING.NODES app:ring",
        "RING.INFO app:ring",
        "RING.MOVES app:ring ADD d SAMPLE 10",
    ];
    let writers = [
        "RING.ADD app:ring d",
        "RING.DEL app:ring d",
        "RING.ASSIGN app:ring 0 0 a",
        "RING.CREATE app:new",
    ];
    for (user, allowed, refused) in [
        ("reader", &readers[..], &writers[..]),
        ("writer", &writers[..], &readers[..]),
    ] {
        let mut con = server.client();
        q(&mut con, &format!("AUTH {user} pw"));
        for line in allowed {
            q(&mut con, line);
        }
        for line in refused {
            let err = e(&mut con, line);
            assert!(err.starts_with("NOPERM"), "{user}: {line}: {err}");
        }
    }
    let flags = |name: &str, admin: &mut redis::Connection| -> BTreeSet<String> {
        let info = array(&q(admin, &format!("COMMAND INFO {name}")));
        let spec = map(&array(&array(&info[0])[8])[0]);
        array(&spec["flags"]).iter().map(text).collect()
    };
    let set = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(flags("ring.del", &mut admin), set(&["RW", "update"]));
    assert_eq!(flags("ring.info", &mut admin), set(&["RO", "access"]));
    assert_eq!(flags("ring.moves", &mut admin), set(&["RO", "access"]));
}

#[test]
fn writes_fire_keyspace_notifications() {
    // Its own server: keyevent channels would also carry the other tests' writes.
    let server = Server::start();
    let mut admin = server.client();
    q(&mut admin, "CONFIG SET notify-keyspace-events KEA");
    let mut sub_con = server.client();
    let mut sub = sub_con.as_pubsub();
    sub.psubscribe("__keyspace@0__:ntf:*").unwrap();
    sub.psubscribe("__keyevent@0__:ring.*").unwrap();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();

    let mut con = server.client();
    let mut expected = Vec::new();
    let mut write = |line: &str, key: &str, event: Option<&str>| {
        let _ = call(&mut con, &words(line));
        if let Some(event) = event {
            expected.push((format!("__keyspace@0__:{key}"), event.to_string()));
            expected.push((format!("__keyevent@0__:{event}"), key.to_string()));
        }
    };
    write("RING.CREATE ntf:a", "ntf:a", Some("ring.create"));
    write("RING.ADD ntf:a x y", "ntf:a", Some("ring.add"));
    write("RING.ADD ntf:a x", "ntf:a", None); // nothing changed
    write("RING.GET ntf:a m", "ntf:a", None); // a read
    write("RING.MOVES ntf:a ADD z SAMPLE 5", "ntf:a", None);
    write("RING.ASSIGN ntf:a 0 0 y", "ntf:a", Some("ring.assign"));
    write("RING.ASSIGN ntf:a 0 0 nobody", "ntf:a", None); // refused
    write("RING.ADD ntf:a WEIGHT 0 q", "ntf:a", None); // refused
    write("RING.DEL ntf:a x", "ntf:a", Some("ring.del"));
    write("RING.DEL ntf:a x", "ntf:a", None); // nothing removed
    write("RING.ADD ntf:b n", "ntf:b", Some("ring.add")); // creates the ring
    for (channel, payload) in expected {
        let msg = sub.get_message().expect("a notification");
        assert_eq!(
            (msg.get_channel_name(), msg.get_payload_bytes()),
            (channel.as_str(), payload.as_bytes())
        );
    }
    sub.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    assert!(sub.get_message().is_err(), "no further notification");
}
