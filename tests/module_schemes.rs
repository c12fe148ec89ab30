//! The placement schemes beside the ring from redis-cli: `RING.OWNERS` (one member under every
//! scheme), `RING.MOVES ... SCHEMES` (a what-if under any of them, inline and in the
//! background, over a sample or real keys) and `RING.BALANCE`; the same answers after a
//! reload and on a replica; errors that say what is wrong.

use ringslot_harness::prelude::*;
use ringslot_harness::redis::{self, Connection, Value};

const SCHEMES: [&str; 8] = [
    "ring",
    "slots",
    "modulo",
    "jump",
    "rendezvous",
    "maglev",
    "multiprobe",
    "bounded",
];

fn owners(con: &mut Connection, key: &str, member: &str) -> Vec<(String, Option<Vec<u8>>)> {
    let reply = q(con, &format!("RING.OWNERS {key} {member}"));
    fields(&reply)
        .0
        .into_iter()
        .map(|(k, v)| (k, opt_bytes(&v)))
        .collect()
}

#[test]
fn owners_under_every_scheme_are_stable_across_processes() {
    let server = Server::start();
    let mut con = server.client();
    q(
        &mut con,
        "RING.ADD r 10.0.0.1:6379 10.0.0.2:6379 10.0.0.3:6379 10.0.0.4:6379",
    );
    q(&mut con, "RING.ADD r WEIGHT 3 10.0.0.5:6379");
    let nodes: Vec<Vec<u8>> = (1..=5)
        .map(|i| format!("10.0.0.{i}:6379").into_bytes())
        .collect();
    let members: Vec<String> = (0..50).map(|i| format!("user:{i}")).collect();
    let before: Vec<_> = members.iter().map(|m| owners(&mut con, "r", m)).collect();
    for (m, o) in members.iter().zip(&before) {
        let names: Vec<&str> = o.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, SCHEMES);
        for (scheme, owner) in o {
            let owner = owner
                .as_ref()
                .unwrap_or_else(|| panic!("{scheme} has an owner"));
            assert!(nodes.contains(owner), "{scheme}: {owner:?}");
        }
        // The ring's and the slot table's are what RING.GET and RING.SLOT say; bounded loads
        // with nothing else placed is the ring.
        assert_eq!(o[0].1, opt_bytes(&q(&mut con, &format!("RING.GET r {m}"))));
        assert_eq!(
            o[1].1,
            opt_bytes(&array(&q(&mut con, &format!("RING.SLOT r {m}")))[1])
        );
        assert_eq!(o[7].1, o[0].1);
    }
    // The same after a reload, and on a replica.
    q(&mut con, "DEBUG RELOAD");
    let reloaded: Vec<_> = members.iter().map(|m| owners(&mut con, "r", m)).collect();
    assert_eq!(reloaded, before);
    let replica = Server::start();
    let mut rep = connect_replica(&server, &replica);
    assert_eq!(int(&q(&mut con, "WAIT 1 5000")), 1);
    let on_replica: Vec<_> = members.iter().map(|m| owners(&mut rep, "r", m)).collect();
    assert_eq!(on_replica, before);
    // An emptied ring: nil everywhere.
    q(&mut con, "RING.ADD emptied a");
    q(&mut con, "RING.DEL emptied a");
    let empty = owners(&mut con, "emptied", "m");
    assert!(empty.iter().all(|(_, o)| o.is_none()), "{empty:?}");
}

#[test]
fn moves_under_named_schemes() {
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "RING.ADD r a b c d e");
    let all = q(&mut con, "RING.MOVES r ADD f SCHEMES ALL SAMPLE 5000");
    let listed: Vec<String> = names(&all);
    let mut expected = vec!["members".to_string(), "ideal".to_string()];
    expected.extend(SCHEMES.iter().map(|s| s.to_string()));
    assert_eq!(listed, expected);
    let m = map(&all);
    assert_eq!(int(&m["members"]), 5000);
    // Ring, slots and modulo are the default reply's, with the same fields.
    let default = map(&q(&mut con, "RING.MOVES r ADD f SAMPLE 5000"));
    for s in ["ring", "slots", "modulo"] {
        assert_eq!(m[s], default[s], "{s}");
    }
    for s in ["jump", "rendezvous", "multiprobe", "ring", "slots"] {
        assert_eq!(
            int(&map(&m[s])["between_old"]),
            0,
            "{s}: a join moves only to the new node"
        );
    }
    // Maglev's exact share is entries changed / M; schemes without one have no space.
    let maglev = map(&m["maglev"]);
    assert!(float(&maglev["space"]) > 0.1 && float(&maglev["space"]) < 0.3);
    assert!(!map(&m["rendezvous"]).contains_key("space"));
    // Names in the order asked, duplicates once; a removal and a re-weight.
    let some = q(
        &mut con,
        "RING.MOVES r DEL c SCHEMES maglev JUMP maglev SAMPLE 1000",
    );
    assert_eq!(names(&some), ["members", "ideal", "maglev", "jump"]);
    let reweight = map(&q(
        &mut con,
        "RING.MOVES r ADD c WEIGHT 2 SCHEMES jump rendezvous SAMPLE 1000",
    ));
    assert_eq!(
        int(&map(&reweight["jump"])["moved"]),
        0,
        "jump has no weights"
    );
    assert!(int(&map(&reweight["rendezvous"])["moved"]) > 0);

    // Over real keys, inline and in the background: the same figures.
    q(&mut con, "DEBUG POPULATE 3000 key 8");
    let inline = q(&mut con, "RING.MOVES r ADD f SCHEMES ALL KEYS key:*");
    q(&mut con, "CONFIG SET ringslot.inline-limit 100");
    let background = q(&mut con, "RING.MOVES r ADD f SCHEMES ALL KEYS key:*");
    assert_eq!(background, inline);
    assert_eq!(int(&map(&inline)["members"]), 3000);
    q(&mut con, "CONFIG SET ringslot.inline-limit 100000");

    // Errors.
    assert_eq!(
        e(&mut con, "RING.MOVES r ADD f SCHEMES"),
        "ERR syntax error, SCHEMES needs one or more of ring, slots, modulo, jump, rendezvous, \
         maglev, multiprobe, bounded (or ALL)"
    );
    assert_eq!(
        e(&mut con, "RING.MOVES r ADD f SCHEMES foo"),
        "ERR syntax error, SCHEMES needs one or more of ring, slots, modulo, jump, rendezvous, \
         maglev, multiprobe, bounded (or ALL)"
    );
    q(&mut con, "CONFIG SET ringslot.maglev-size 65536");
    let err = e(&mut con, "RING.OWNERS r m");
    assert!(
        err.starts_with("ERR ringslot.maglev-size is 65536"),
        "{err}"
    );
    // Only Maglev needs a prime table.
    let err = e(&mut con, "RING.MOVES r ADD f SCHEMES jump maglev SAMPLE 10");
    assert!(
        err.starts_with("ERR ringslot.maglev-size is 65536"),
        "{err}"
    );
    let jump = q(
        &mut con,
        "RING.MOVES r ADD f SCHEMES jump rendezvous SAMPLE 10",
    );
    assert_eq!(int(&map(&jump)["members"]), 10);
    q(&mut con, "CONFIG SET ringslot.maglev-size 7");
    assert_eq!(names(&q(&mut con, "RING.OWNERS r m")).len(), 8);
}

#[test]
fn balance_of_every_scheme() {
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "RING.ADD r a b c d");
    let reply = q(&mut con, "RING.BALANCE r SAMPLE 2000");
    assert_eq!(names(&reply), SCHEMES);
    let m = map(&reply);
    for s in SCHEMES {
        let b = map(&m[s]);
        let p2m = float(&b["peak_to_mean"]);
        assert!((1.0..1.6).contains(&p2m), "{s}: {p2m}");
        let exact = matches!(s, "ring" | "slots" | "modulo" | "maglev");
        assert_eq!(b["exact"], Value::Int(i64::from(exact)), "{s}");
        // Beside an estimate, what a perfect scheme reads over 2000 members on four equal
        // nodes (500 each, a standard deviation of about 19: the largest of four about 1.05).
        if exact {
            assert_eq!(b["balanced_peak_to_mean"], Value::Nil, "{s}");
        } else {
            let balanced = float(&b["balanced_peak_to_mean"]);
            assert!((1.02..1.09).contains(&balanced), "{s}: {balanced}");
        }
    }
    // The ring's is RING.INFO's.
    let info = map(&q(&mut con, "RING.INFO r"));
    assert_eq!(
        float(&map(&m["ring"])["peak_to_mean"]),
        float(&info["ring_peak_to_mean"])
    );
    // Past ringslot.inline-limit it runs in the background with the same answer, and where
    // the client cannot wait (MULTI) it is refused, naming the limit.
    let inline = q(&mut con, "RING.BALANCE r SAMPLE 5000");
    let owners = q(&mut con, "RING.OWNERS r m");
    q(&mut con, "CONFIG SET ringslot.inline-limit 1000");
    let done = |con: &mut redis::Connection| -> i64 {
        text(&q(con, "INFO ringslot"))
            .lines()
            .find_map(|l| l.strip_prefix("ringslot_runs_done:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("runs_done")
    };
    let before = done(&mut con);
    assert_eq!(q(&mut con, "RING.BALANCE r SAMPLE 5000"), inline);
    // A Maglev table of 65537 entries is past 1000 units too.
    assert_eq!(q(&mut con, "RING.OWNERS r m"), owners);
    assert_eq!(done(&mut con), before + 2, "both ran in the background");
    q(&mut con, "MULTI");
    q(&mut con, "RING.BALANCE r SAMPLE 5000");
    let err = e(&mut con, "EXEC");
    assert!(
        err.contains("more than ringslot.inline-limit (1000)"),
        "{err}"
    );
    q(&mut con, "CONFIG SET ringslot.inline-limit 100000");
    assert_eq!(
        e(&mut con, "RING.BALANCE r COUNT 5"),
        "ERR syntax error, unknown option 'COUNT' (RING.BALANCE takes SAMPLE n)"
    );
    let _ = redis::cmd("PING").query::<String>(&mut con);
}

#[test]
fn an_empty_rings_balance_is_nil_not_zero() {
    // Issue 30: a ring without nodes answered peak_to_mean 0.0 with exact true, a figure no
    // placement has. Every scheme's peak-to-mean is nil there.
    let server = shared_server();
    let mut con = server.client();
    q(&mut con, "RING.CREATE balance:empty");
    let reply = map(&q(&mut con, "RING.BALANCE balance:empty SAMPLE 10"));
    assert!(!reply.is_empty());
    for (scheme, part) in &reply {
        assert_eq!(map(part)["peak_to_mean"], redis::Value::Nil, "{scheme}");
    }
}
