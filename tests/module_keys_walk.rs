//! `RING.MOVES ... KEYS pattern` walks the keyspace itself (RedisModule_Scan and its own glob
//! matcher), so it must evaluate exactly the keys Redis would list, with the caller's rights.
//! Expected values here are Redis' own answers: `SCAN ... MATCH` on the same server, and the
//! ACL rules of 7.0 (a user sees the keys its `~`/`%R~` patterns allow).

use ringslot_harness::prelude::*;
use ringslot_harness::redis;
use std::collections::BTreeSet;

/// Every key `SCAN 0 MATCH pattern` lists, as Redis itself walks it.
fn scan_match(con: &mut redis::Connection, pattern: &[u8]) -> BTreeSet<Vec<u8>> {
    let mut keys = BTreeSet::new();
    let mut cursor = b"0".to_vec();
    loop {
        let reply = call(
            con,
            &[b"SCAN", &cursor, b"MATCH", pattern, b"COUNT", b"1000"],
        )
        .unwrap();
        let parts = array(&reply);
        cursor = bytes(&parts[0]);
        keys.extend(array(&parts[1]).iter().map(bytes));
        if cursor == b"0" {
            return keys;
        }
    }
}

fn members(con: &mut redis::Connection, pattern: &[u8]) -> i64 {
    let reply = call(
        con,
        &[b"RING.MOVES", b"walk:ring", b"ADD", b"x", b"KEYS", pattern],
    );
    int(&map(&reply.unwrap_or_else(|e| panic!("{pattern:?}: {e}")))["members"])
}

#[test]
fn keys_are_those_scan_match_lists() {
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "RING.ADD walk:ring a b c");
    let mut names: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"*".to_vec(),
        b"\\".to_vec(),
        b"a]b".to_vec(),
        b"a[b".to_vec(),
        b"\xff\x00bin".to_vec(),
        b"\xc0".to_vec(),
        b"user:{42}:cart".to_vec(),
    ];
    let mut rng = Rng::new(7);
    let alphabet = b"ab*?[]^-\\:x\xc3\xa9";
    for _ in 0..600 {
        let len = rng.below(7);
        names.push((0..len).map(|_| *rng.pick(alphabet)).collect());
    }
    for i in 0..400 {
        names.push(format!("user:{i}:profile").into_bytes());
        names.push(format!("session:{}", i * 7).into_bytes());
    }
    let mut pipe = redis::pipe();
    for n in &names {
        pipe.cmd("SET").arg(n.as_slice()).arg("v").ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    let patterns: Vec<&[u8]> = vec![
        b"*",
        b"**",
        b"?",
        b"??",
        b"user:*",
        b"user:*:profile",
        b"user:1?:*",
        b"session:[0-3]*",
        b"session:[^0-3]*",
        b"session:[3-0]*",
        b"*[ab]*",
        b"*\\**",
        b"\\*",
        b"*\\\\*",
        b"a[\\]]b",
        b"a[]b",
        b"[",
        b"[^",
        b"a[b",
        b"*[a-\xff]*",
        b"*[\x80-\xff]*",
        b"*[",
        b"a*b*",
        b"*:*:*",
        b"walk:*",
        b"nothing",
    ];
    for pattern in patterns {
        let expected = scan_match(&mut con, pattern);
        assert_eq!(
            members(&mut con, pattern),
            expected.len() as i64,
            "pattern {:?}: SCAN MATCH lists {:?}",
            String::from_utf8_lossy(pattern),
            expected
        );
    }
}

#[test]
fn the_walk_has_the_callers_rights() {
    // Issue 10: a user limited to ~app:* ran `KEYS *` and got every key of the database, and
    // `KEYS other:secret:*` told it that 50 such keys exist.
    let server = Server::start();
    let mut admin = server.client();
    q(&mut admin, "RING.ADD app:ring a b c");
    for i in 0..6 {
        q(&mut admin, &format!("SET app:{i} v"));
    }
    for i in 0..50 {
        q(&mut admin, &format!("SET other:secret:{i} v"));
    }
    q(&mut admin, "ACL SETUSER limited on >pw ~app:* +@all");
    q(&mut admin, "ACL SETUSER reader on >pw %R~app:* +@all");
    q(&mut admin, "ACL SETUSER noscan on >pw ~* +@all -scan");
    let moves = |con: &mut redis::Connection, pattern: &str| {
        call(
            con,
            &words(&format!("RING.MOVES app:ring ADD x KEYS {pattern}")),
        )
    };
    // The admin (the default user) reads everything: the ring, 6 app keys, 50 others.
    assert_eq!(int(&map(&moves(&mut admin, "*").unwrap())["members"]), 57);
    assert!(
        !map(&moves(&mut admin, "*").unwrap()).contains_key("unreadable"),
        "nothing skipped, nothing said"
    );
    for user in ["limited", "reader"] {
        let mut con = server.client();
        q(&mut con, &format!("AUTH {user} pw"));
        // The ring key and the six app:* keys; nothing of other:*, and the walk says how many
        // keys it skipped (issue 30).
        let all = map(&moves(&mut con, "*").unwrap());
        assert_eq!(int(&all["members"]), 7, "{user}");
        assert_eq!(int(&all["unreadable"]), 50, "{user}");
        let secret = map(&moves(&mut con, "other:secret:*").unwrap());
        assert_eq!(int(&secret["members"]), 0, "{user}");
        assert_eq!(int(&secret["unreadable"]), 50, "{user}");
    }
    // A user who may read the app keys but not run GET, which stands for reading a key: an
    // error that names the command, not `members 0` (issue 30: it once answered 0, silently).
    q(&mut admin, "ACL SETUSER noget on >pw %R~app:* +@all -get");
    let mut con = server.client();
    q(&mut con, "AUTH noget pw");
    let err = moves(&mut con, "app:*").unwrap_err();
    assert!(
        err.starts_with(
            "NOPERM the user 'noget' may read these keys but not run the 'get' command"
        ) && err.contains("ACL SETUSER noget +get"),
        "{err}"
    );
    // From a script the walk has the rights of the script's caller, also of one that may not
    // run PING (the module asks RedisModule_Call "C" whether the script's client has a user).
    q(&mut admin, "ACL SETUSER noping on >pw ~app:* +@all -ping");
    for user in ["limited", "noping"] {
        let mut con = server.client();
        q(&mut con, &format!("AUTH {user} pw"));
        let script = "return redis.call('RING.MOVES', KEYS[1], 'ADD', 'x', 'KEYS', '*')";
        let args: [&[u8]; 4] = [b"EVAL", script.as_bytes(), b"1", b"app:ring"];
        // A script hands the map on as a flat field/value array, which map() reads.
        let members = int(&map(&call(&mut con, &args).unwrap())["members"]);
        assert_eq!(members, 7, "{user}");
    }
    // Checking the script's user leaves no trace: nothing in ACL LOG (the module once ran
    // PING as the user to find out, which logged a denial for `noping`).
    assert_eq!(
        array(&q(&mut admin, "ACL LOG")),
        vec![],
        "ACL LOG stays empty"
    );
    let mut con = server.client();
    q(&mut con, "AUTH noscan pw");
    let err = moves(&mut con, "*").unwrap_err();
    assert!(
        err.starts_with("NOPERM this user has no permissions to run the 'scan' command"),
        "{err}"
    );
    // SAMPLE needs no walk, so it stays allowed.
    q(&mut con, "RING.MOVES app:ring ADD x SAMPLE 10");
}

#[test]
fn a_key_counts_where_one_selector_allows_a_read_command_on_it() {
    // ACL selectors (Redis 7.0): a key counts only where one selector lets the user run GET
    // (the command that stands for a read) on it, command and key checked together, as
    // `ACL DRYRUN user GET key` answers. A selector that grants read access to secret:* but
    // allows no read command reveals nothing; one that allows GET on them does.
    let server = Server::start();
    let mut admin = server.client();
    q(&mut admin, "RING.ADD app:ring a b c");
    for i in 0..4 {
        q(&mut admin, &format!("SET app:{i} v"));
        q(&mut admin, &format!("SET secret:{i} v"));
    }
    q(
        &mut admin,
        "ACL SETUSER pinger on >pw ~app:* +@all (%R~secret:* +ping)",
    );
    q(
        &mut admin,
        "ACL SETUSER getter on >pw ~app:* +@all (%R~secret:* +get)",
    );
    for (user, secrets) in [("pinger", 0), ("getter", 4)] {
        // Redis' own answer for the same user, command and key.
        let dry = call(
            &mut admin,
            &words(&format!("ACL DRYRUN {user} GET secret:0")),
        );
        assert_eq!(
            dry == Ok(redis::Value::Okay),
            secrets > 0,
            "{user}: {dry:?}"
        );
        let mut con = server.client();
        q(&mut con, &format!("AUTH {user} pw"));
        // pinger may read the secret keys but run no read command on them: counting only
        // them is an error naming GET; among others they are skipped, and counted as such.
        let secret = call(&mut con, &words("RING.MOVES app:ring ADD x KEYS secret:*"));
        match secrets {
            0 => assert!(
                secret
                    .as_ref()
                    .is_err_and(|e| e.contains("not run the 'get' command")),
                "{user}: {secret:?}"
            ),
            n => assert_eq!(int(&map(&secret.unwrap())["members"]), n, "{user}"),
        }
        let reply = map(&q(&mut con, "RING.MOVES app:ring ADD x KEYS *"));
        assert_eq!(int(&reply["members"]), 5 + secrets, "{user}");
        assert_eq!(
            reply.get("unreadable").map(int),
            (secrets == 0).then_some(4),
            "{user}"
        );
    }
    assert_eq!(array(&q(&mut admin, "ACL LOG")), vec![], "no ACL LOG entry");
}

#[test]
fn walks_past_the_inline_limit_give_the_same_keys() {
    // Past ringslot.inline-limit the walk runs in the background, in slices (module_background
    // tests that path in full); it must find the same keys.
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "RING.ADD lim:ring a b");
    for i in 0..10 {
        q(&mut con, &format!("SET lim:{i} v"));
    }
    let inline = q(&mut con, "RING.MOVES lim:ring ADD x KEYS lim:*");
    q(&mut con, "CONFIG SET ringslot.inline-limit 10");
    // 11 keys with the ring: the walk would visit more than 10.
    assert_eq!(q(&mut con, "RING.MOVES lim:ring ADD x KEYS lim:*"), inline);
    assert_eq!(int(&map(&inline)["members"]), 11);
}

#[test]
fn expired_keys_are_not_evaluated() {
    // KEYS and SCAN skip a key past its expiry that Redis has not deleted yet; so does the
    // walk. Active expiry is off, so the key stays in the keyspace meanwhile.
    let server = Server::start();
    let mut con = server.client();
    q(&mut con, "DEBUG SET-ACTIVE-EXPIRE 0");
    q(&mut con, "RING.ADD exp:ring a b");
    q(&mut con, "SET exp:live v");
    q(&mut con, "SET exp:gone v PX 1");
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        int(&q(&mut con, "DBSIZE")),
        3,
        "the expired key is still stored"
    );
    assert_eq!(
        int(&map(&q(&mut con, "RING.MOVES exp:ring ADD x KEYS exp:*"))["members"]),
        2,
        "the ring and exp:live"
    );
}
