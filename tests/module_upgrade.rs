//! A module upgrade never moves anyone's keys: rings saved by ringslot 0.1 (type encoding
//! version 1, `tests/fixtures/v1/rings.rdb`, written by the build of commit 1ac1c77) load with
//! exactly the answers that build gave (`tests/fixtures/v1/expected.tsv`, recorded from it),
//! their native rings as `native-fnv`, and keep them through a save in today's encoding, a
//! restart, and an AOF rewrite without the RDB preamble.

use ringslot_harness::prelude::*;
use ringslot_harness::redis::Connection;
use ringslot_harness::server::workspace_root;
use std::collections::BTreeMap;

/// What one ring answered, per `expected.tsv`'s kinds of line.
#[derive(Debug, Default, PartialEq)]
struct Answers {
    owners: Vec<(String, String)>,
    nodes: Vec<Vec<String>>,
    slots: Vec<Vec<String>>,
}

fn fixture(name: &str) -> std::path::PathBuf {
    workspace_root().join("tests/fixtures/v1").join(name)
}

fn expected() -> BTreeMap<String, Answers> {
    let text = std::fs::read_to_string(fixture("expected.tsv")).expect("expected.tsv");
    let mut rings: BTreeMap<String, Answers> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<String> = line.split('\t').map(str::to_string).collect();
        let a = rings.entry(f[0].clone()).or_default();
        match f[1].as_str() {
            "@node" => a.nodes.push(f[2..].to_vec()),
            "@slots" => a.slots.push(f[2..].to_vec()),
            _ => a
                .owners
                .push((f[1].clone(), f.get(2).cloned().unwrap_or_default())),
        }
    }
    rings
}

/// The same questions, asked of `con`.
fn answers(con: &mut Connection, ring: &str, want: &Answers) -> Answers {
    let members: Vec<&str> = want.owners.iter().map(|(m, _)| m.as_str()).collect();
    let mut args: Vec<&[u8]> = vec![b"RING.MGET", ring.as_bytes()];
    args.extend(members.iter().map(|m| m.as_bytes()));
    let owners = array(&call(con, &args).unwrap())
        .iter()
        .zip(&members)
        .map(|(o, m)| {
            let owner = opt_bytes(o).map(|b| String::from_utf8(b).unwrap());
            (m.to_string(), owner.unwrap_or_default())
        })
        .collect();
    let nodes = array(&call(con, &[b"RING.NODES", ring.as_bytes()]).unwrap())
        .iter()
        .map(|row| {
            let m = map(row);
            let n = |k: &str| int(&m[k]).to_string();
            let share = format!("{:?}", float(&m["ring_share"]));
            vec![
                text(&m["node"]),
                n("weight"),
                n("points"),
                share,
                n("slots"),
            ]
        })
        .collect();
    let slots = slot_ranges(con, ring.as_bytes())
        .into_iter()
        .map(|(a, b, n)| vec![a.to_string(), b.to_string(), String::from_utf8(n).unwrap()])
        .collect();
    Answers {
        owners,
        nodes,
        slots,
    }
}

fn compat(con: &mut Connection, ring: &str) -> String {
    text(&map(&q(con, &format!("RING.INFO {ring}")))["compat"])
}

fn check_all(con: &mut Connection, rings: &BTreeMap<String, Answers>, when: &str) {
    for (ring, want) in rings {
        assert_eq!(&answers(con, ring, want), want, "{ring} {when}");
    }
    for ring in ["v1:native", "v1:native:tag", "v1:implicit", "v1:empty"] {
        assert_eq!(compat(con, ring), "native-fnv", "{ring} {when}");
    }
    assert_eq!(compat(con, "v1:ketama"), "ketama", "{when}");
    assert_eq!(compat(con, "v1:groupcache"), "groupcache", "{when}");
}

#[test]
fn rings_saved_by_0_1_keep_their_placement() {
    let rings = expected();
    assert_eq!(rings.len(), 6, "six rings in the fixture");
    let dir = ringslot_harness::tempfile::tempdir().unwrap();
    std::fs::copy(fixture("rings.rdb"), dir.path().join("dump.rdb")).unwrap();
    let server = Server::start_in(dir, &[], &[]);
    let mut con = server.client();
    assert_eq!(int(&q(&mut con, "DBSIZE")), 6);
    check_all(&mut con, &rings, "after loading the 0.1 RDB");

    // Saved again (encoding version 2, native-fnv's own code) and loaded: the same.
    q(&mut con, "DEBUG RELOAD");
    check_all(&mut con, &rings, "after DEBUG RELOAD");

    // The AOF rewrite names the flavour, so that a replay builds native-fnv rings.
    q(&mut con, "CONFIG SET aof-use-rdb-preamble no");
    q(&mut con, "CONFIG SET appendonly yes");
    wait_aof_rewrite(&mut con);
    q(&mut con, "DEBUG LOADAOF");
    check_all(&mut con, &rings, "after an AOF rewrite and replay");

    // A ring made now with the default flavour is the new native, not native-fnv.
    q(&mut con, "RING.ADD new:ring node-1 node-2");
    assert_eq!(compat(&mut con, "new:ring"), "native");
}
