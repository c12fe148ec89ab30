//! The `ringslot-bench` program against a live server: its migration figures must be the
//! module's own `RING.MOVES` replies for an identical ring, and must agree with theory (one
//! equal-weight node joining N nodes: ideal 1/(N+1); the native ring and the slot table never
//! move a member between two old nodes). Its errors must name the problem.

mod common;

use common::{bench, csv_table, ok};
use ringslot_harness::prelude::*;
use ringslot_harness::redis;

use std::collections::HashMap;
use std::path::Path;

/// The rows of a CSV the program wrote (its fields hold no commas or quotes), keyed by
/// `(step, scheme)`, each a map from column name to field.
fn csv_rows(path: &Path) -> HashMap<(usize, String), HashMap<String, String>> {
    csv_table(path)
        .into_iter()
        .map(|row| ((row["step"].parse().unwrap(), row["scheme"].clone()), row))
        .collect()
}

fn num(row: &HashMap<String, String>, col: &str) -> f64 {
    row[col]
        .parse()
        .unwrap_or_else(|_| panic!("{col} = {:?}", row[col]))
}

fn node(i: usize) -> String {
    format!("10.0.0.{i}:6379")
}

#[test]
fn migration_figures_are_the_modules_and_match_theory() {
    let server = Server::start();
    let url = server.url();
    let out = tempfile::tempdir().unwrap();
    let stdout = ok(&[
        "--url",
        &url,
        "--out",
        out.path().to_str().unwrap(),
        "migration",
        "--grow",
        "3..5",
        "--keys",
        "5000",
        "--vnodes",
        "10,160",
        "--compat",
        "ketama",
        "--keep",
    ]);
    assert!(stdout.contains("| step | change |"), "{stdout}");
    for file in ["migration.md", "migration.csv", "migration.svg"] {
        assert!(out.path().join(file).exists(), "{file} missing");
    }
    let svg = std::fs::read_to_string(out.path().join("migration.svg")).unwrap();
    // The chart plots moved/ideal against the 1.0 target, modulo on a panel of its own.
    assert!(svg.contains("1.0 is best") && svg.contains("hash mod N, on its own scale"));
    let rows = csv_rows(&out.path().join("migration.csv"));
    // 2 steps x (2 native rings + ketama + slot table + modulo).
    assert_eq!(rows.len(), 10);

    // The same rings, built by hand, asked the same questions.
    let mut con = server.client();
    for vnodes in [10, 160] {
        let key = format!("check:{vnodes}");
        redis::cmd("RING.CREATE")
            .arg(&key)
            .arg("VNODES")
            .arg(vnodes)
            .query::<()>(&mut con)
            .unwrap();
        redis::cmd("RING.ADD")
            .arg(&key)
            .arg(node(1))
            .arg(node(2))
            .arg(node(3))
            .query::<i64>(&mut con)
            .unwrap();
        for (step, joining) in [(1usize, 4usize), (2, 5)] {
            let reply: redis::Value = redis::cmd("RING.MOVES")
                .arg(&key)
                .arg("ADD")
                .arg(node(joining))
                .arg("KEYS")
                .arg("key:*")
                .query(&mut con)
                .unwrap();
            assert_eq!(int(field(&reply, "members")), 5000);
            let ring = &rows[&(step, format!("ring vnodes={vnodes}"))];
            let mine = field(&reply, "ring");
            assert_eq!(
                num(ring, "moved") as i64,
                int(field(mine, "moved")),
                "step {step}"
            );
            assert_eq!(
                num(ring, "between_old"),
                0.0,
                "the native ring never moves between old nodes"
            );
            assert_eq!(num(ring, "members"), 5000.0);
            // Ideal: one equal-weight node joining `joining - 1` nodes.
            let ideal = 1.0 / joining as f64;
            assert!((num(ring, "ideal") - ideal).abs() < 5e-5, "{ring:?}");
            if vnodes == 10 {
                let slots = &rows[&(step, "slot table".to_string())];
                let mine = field(&reply, "slots");
                assert_eq!(num(slots, "moved") as i64, int(field(mine, "moved")));
                assert_eq!(
                    num(slots, "between_old"),
                    0.0,
                    "rebalance only feeds the new node"
                );
                // redis-cli rebalance gives the new node floor/round(16384/N) slots.
                let slots_moved = int(field(mine, "slots_moved")) as f64;
                assert!((num(slots, "hash_space_fraction") - slots_moved / 16384.0).abs() < 5e-5);
                assert!(
                    (slots_moved / 16384.0 - ideal).abs() < 0.001,
                    "{slots_moved}"
                );
                let modulo = &rows[&(step, "modulo".to_string())];
                let mine = field(&reply, "modulo");
                assert_eq!(num(modulo, "moved") as i64, int(field(mine, "moved")));
                assert_eq!(
                    num(modulo, "between_old") as i64,
                    int(field(mine, "between_old"))
                );
                // hash mod N -> hash mod N+1 keeps a member only when both agree: ~1/(N+1).
                let f = num(modulo, "fraction");
                assert!((f - (1.0 - ideal)).abs() < 0.05, "modulo fraction {f}");
            }
            redis::cmd("RING.ADD")
                .arg(&key)
                .arg(node(joining))
                .query::<i64>(&mut con)
                .unwrap();
        }
    }
    // Ketama with equal weights: adding a server leaves the others' points alone.
    for step in [1, 2] {
        let ketama = &rows[&(step, "ketama".to_string())];
        assert_eq!(num(ketama, "between_old"), 0.0, "{ketama:?}");
        assert!(num(ketama, "moved") > 0.0);
    }
}

#[test]
fn reweight_is_measured_with_ring_moves() {
    let server = Server::start();
    let out = tempfile::tempdir().unwrap();
    ok(&[
        "--url",
        &server.url(),
        "--out",
        out.path().to_str().unwrap(),
        "migration",
        "--start",
        "4",
        "--reweight",
        "1=3",
        "--keys",
        "3000",
        "--vnodes",
        "160",
        "--compat",
        "none",
    ]);
    let rows = csv_rows(&out.path().join("migration.csv"));
    assert_eq!(rows.len(), 3);
    // Node 1 goes from 1/4 to 3/6 of the weight: a perfect scheme moves 1/4 of the members.
    for scheme in ["ring vnodes=160", "slot table", "modulo"] {
        assert_eq!(
            num(&rows[&(1, scheme.to_string())], "ideal"),
            0.25,
            "{scheme}"
        );
    }
    let ring = &rows[&(1, "ring vnodes=160".to_string())];
    // Native points depend only on (node, index): the extra points all belong to node 1.
    assert_eq!(num(ring, "between_old"), 0.0);
    assert!(
        num(ring, "fraction") > 0.1 && num(ring, "fraction") < 0.4,
        "{ring:?}"
    );
    let slots = &rows[&(1, "slot table".to_string())];
    assert_eq!(
        num(slots, "between_old"),
        0.0,
        "rebalance only feeds node 1"
    );
    // 16384 * 3/6 = 8192 slots for node 1, which had 4096: about 4096 slots move (redis-cli's
    // rounding of the donors' 1365.33 slots each may add one).
    let moved = num(slots, "hash_space_fraction");
    assert!((moved - 0.25).abs() < 0.0002, "{moved}");
    let modulo = &rows[&(1, "modulo".to_string())];
    assert_eq!(num(modulo, "moved"), 0.0, "modulo ignores weights");
    // The program cleaned up after itself on a --url server.
    let mut con = server.client();
    let left: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn sample_mode_writes_nothing() {
    let server = Server::start();
    let out = tempfile::tempdir().unwrap();
    ok(&[
        "--url",
        &server.url(),
        "--out",
        out.path().to_str().unwrap(),
        "migration",
        "--grow",
        "2..3",
        "--sample",
        "2000",
        "--vnodes",
        "100",
        "--compat",
        "groupcache",
        "--keep",
    ]);
    let rows = csv_rows(&out.path().join("migration.csv"));
    assert_eq!(
        num(&rows[&(1, "ring vnodes=100".to_string())], "members"),
        2000.0
    );
    let ideal = num(&rows[&(1, "groupcache vnodes=50".to_string())], "ideal");
    assert!((ideal - 1.0 / 3.0).abs() < 5e-5, "{ideal}");
    let mut con = server.client();
    let keys: Vec<String> = redis::cmd("KEYS").arg("key:*").query(&mut con).unwrap();
    assert!(keys.is_empty(), "sample mode wrote {keys:?}");
}

#[test]
fn balance_reports_every_configuration() {
    let server = Server::start();
    let out = tempfile::tempdir().unwrap();
    let stdout = ok(&[
        "--url",
        &server.url(),
        "--out",
        out.path().to_str().unwrap(),
        "balance",
        "--nodes",
        "10",
        "--vnodes",
        "1,160",
    ]);
    assert!(stdout.contains("peak_to_mean"), "{stdout}");
    let text = std::fs::read_to_string(out.path().join("balance.csv")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // Header, native x2, groupcache x2, ketama, native-fnv x2, slot table.
    assert_eq!(lines.len(), 9, "{text}");
    // redis-cli --cluster create over 10 masters: 1639 or 1638 slots each, so the largest
    // share is 1639/1638.4 of the mean.
    let slots = lines.iter().find(|l| l.contains("slot table")).unwrap();
    assert!(
        slots.starts_with("10,slot table,-,16384,1.0004,"),
        "{slots}"
    );
    let ketama = lines.iter().find(|l| l.contains("ketama")).unwrap();
    assert!(ketama.starts_with("10,ketama,160,1600,"), "{ketama}");
}

#[test]
fn spread_reports_every_scheme_for_both_kinds_of_views() {
    let server = Server::start();
    let out = tempfile::tempdir().unwrap();
    ok(&[
        "--url",
        &server.url(),
        "--out",
        out.path().to_str().unwrap(),
        "spread",
        "--nodes",
        "8",
        "--views",
        "8",
        "--steps",
        "8",
        "--members",
        "3000",
    ]);
    let text = std::fs::read_to_string(out.path().join("spread.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let rows: HashMap<(String, String), HashMap<&str, f64>> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let nums = header
                .iter()
                .zip(&f)
                .skip(2)
                .map(|(h, v)| (*h, v.parse::<f64>().unwrap()))
                .collect();
            ((f[0].to_string(), f[1].to_string()), nums)
        })
        .collect();
    // Six schemes, two kinds of views.
    assert_eq!(rows.len(), 12, "{text}");
    for kind in ["subsets", "history"] {
        let get = |scheme: &str| &rows[&(kind.to_string(), scheme.to_string())];
        for scheme in [
            "native",
            "ketama",
            "groupcache",
            "native-fnv",
            "modulo",
            "slot table",
        ] {
            let r = get(scheme);
            // Sum of spreads = sum of loads: the mean load over I/C is the mean spread.
            assert!(
                (r["spread_mean"] - r["load_mean"]).abs() < 0.002,
                "{kind} {scheme}"
            );
            assert!(
                r["spread_mean"] >= 1.0 && r["spread_max"] <= 8.0,
                "{kind} {scheme}"
            );
            assert!(r["load_max"] >= r["load_mean"], "{kind} {scheme}");
        }
        // Modulo reshuffles with every change of size; the rings move members only to or
        // from the nodes that change.
        assert!(
            get("modulo")["spread_mean"] > 1.5 * get("native")["spread_mean"],
            "{kind}"
        );
    }
}

#[test]
fn other_schemes_are_measured_on_the_same_members() {
    let server = Server::start();
    let out = tempfile::tempdir().unwrap();
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/scenario-schemes.txt");
    ok(&[
        "--url",
        &server.url(),
        "--out",
        out.path().to_str().unwrap(),
        "migration",
        "--scenario",
        scenario,
        "--vnodes",
        "160",
        "--compat",
        "none",
        "--schemes",
        "all",
        "--sample",
        "4000",
        "--name",
        "schemes",
    ]);
    let rows = csv_rows(&out.path().join("schemes.csv"));
    let between =
        |step: usize, scheme: &str| num(&rows[&(step, scheme.to_string())], "between_old");
    // Step 1 adds a node, step 2 removes one from the middle, step 3 adds one of weight 2.
    for scheme in [
        "jump",
        "rendezvous",
        "multiprobe",
        "bounded 125% over ring vnodes=160",
    ] {
        assert_eq!(between(1, scheme), 0.0, "{scheme} join");
    }
    assert_eq!(between(2, "rendezvous"), 0.0);
    assert!(
        between(2, "jump") > 0.0,
        "jump's last node takes the freed bucket"
    );
    // Jump ignores weights: the weight-2 node gets one share, not two.
    let jump = &rows[&(3, "jump".to_string())];
    assert!(num(jump, "fraction") < 0.7 * num(jump, "ideal"), "{jump:?}");
    // Maglev's exact share of changed entries is reported.
    assert!(num(&rows[&(1, "maglev".to_string())], "hash_space_fraction") > 0.0);

    // Balance: the other schemes beside the rings.
    ok(&[
        "--url",
        &server.url(),
        "--out",
        out.path().to_str().unwrap(),
        "balance",
        "--nodes",
        "10",
        "--vnodes",
        "160",
        "--flavours",
        "native",
        "--name-sets",
        "2",
        "--scheme-sample",
        "10000",
        "--schemes",
        "jump,maglev",
    ]);
    let text = std::fs::read_to_string(out.path().join("balance.csv")).unwrap();
    assert!(
        text.lines().any(|l| l.starts_with("10,jump,-,0,")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("10,maglev,-,0,")),
        "{text}"
    );
    let err = bench(&["--url", &server.url(), "balance", "--schemes", "hrw"]);
    assert!(String::from_utf8_lossy(&err.stderr).contains("unknown scheme `hrw`"));
}

#[test]
fn errors_name_the_problem() {
    // Nobody listens on this port.
    let port = free_port().expect("a free port");
    let out = bench(&["--url", &format!("redis://127.0.0.1:{port}/"), "balance"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach redis-server"), "{err}");

    // A server without the module.
    let plain = Server::builder()
        .no_module()
        .start()
        .expect("a plain server");
    let url = plain.url();
    let out = bench(&["--url", &url, "migration", "--keys", "10"]);
    drop(plain);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("the ringslot module is not loaded on {url}")),
        "{err}"
    );

    // A bad scenario line is named.
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.txt");
    std::fs::write(&file, "start 3\ndel 9\n").unwrap();
    let out = bench(&[
        "--url",
        &server.url(),
        "migration",
        "--scenario",
        file.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("scenario line 2") && err.contains("not in the ring"),
        "{err}"
    );
}

#[test]
fn throughput_reports_every_command_memory_and_reload() {
    // A tiny run of the real measurement: every command through redis-benchmark, the memory
    // figures and a DEBUG RELOAD, on the program's own server.
    let out = tempfile::tempdir().unwrap();
    let stdout = ok(&[
        "--out",
        out.path().to_str().unwrap(),
        "throughput",
        "--rounds",
        "1",
        "--n-single",
        "300",
        "--n-pipelined",
        "600",
        "--n-mget",
        "30",
        "--n-mget-pipelined",
        "60",
        "--reloads",
        "1",
        "--nodes",
        "20",
        "--rings",
        "3",
        "--no-pin",
    ]);
    for section in [
        "## Requests per second",
        "## Memory",
        "## DEBUG RELOAD with 3 rings (9600 points)",
        "## Targets",
        "ring: 20 nodes x 160 vnodes = 3200 points",
    ] {
        assert!(stdout.contains(section), "{section} missing:\n{stdout}");
    }
    // One row per command, each with a positive request rate and a ratio to GET (1.00 for GET
    // itself).
    for command in [
        "`PING`",
        "`GET plain`",
        "`RING.GET missing member:__rand_int__`",
        "`RING.GET one member:__rand_int__`",
        "`RING.GET ring member:__rand_int__`",
        "`RING.SLOT ring member:__rand_int__`",
        "`RING.MGET ring member:__rand_int__ ...` (100 members)",
    ] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {command} |")))
            .unwrap_or_else(|| panic!("no row for {command}:\n{stdout}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let rps: f64 = cells[2].parse().expect("req/s");
        assert!(rps > 0.0, "{row}");
        if command == "`GET plain`" {
            assert_eq!(cells[3], "1.00", "{row}");
        }
    }
    let written = std::fs::read_to_string(out.path().join("throughput.md")).unwrap();
    assert!(written.contains("## Targets"));
}

#[test]
fn a_users_data_is_never_touched() {
    // The program against a server holding a user's data (as with --url): whatever it runs,
    // succeeds or fails, the data set's digest is the same after, and nothing of its own is
    // left (reliability trial: `--key-prefix acct: --reuse-keys` overwrote 1000 acct:* keys
    // and deleted them).
    let server = Server::start();
    let url = server.url();
    let mut con = server.client();
    for i in 0..1000 {
        q(&mut con, &format!("SET acct:{i} balance-{i}"));
    }
    q(&mut con, "HSET acct:h field value");
    q(&mut con, "SET ringslot-bench:ring:native:10 the-users-own");
    let digest = |con: &mut redis::Connection| bytes(&q(con, "DEBUG DIGEST"));
    let leftovers = |con: &mut redis::Connection, pattern: &str| -> Vec<String> {
        redis::cmd("KEYS").arg(pattern).query(con).unwrap()
    };
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().to_str().unwrap();
    let migration = |extra: &[&str]| {
        let mut args = vec![
            "--url",
            url.as_str(),
            "--out",
            out,
            "migration",
            "--grow",
            "3..4",
            "--vnodes",
            "10,160",
            "--compat",
            "none",
        ];
        args.extend_from_slice(extra);
        bench(&args)
    };
    let before = digest(&mut con);
    // A key the program would make exists: refused, and the key is the user's still.
    let run = migration(&["--key-prefix", "acct:", "--reuse-keys"]);
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("cannot make the ring ringslot-bench:ring:native:10"),
        "{err}"
    );
    assert_eq!(digest(&mut con), before);
    assert_eq!(
        leftovers(&mut con, "ringslot-bench:ring:native:160"),
        Vec::<String>::new()
    );
    q(&mut con, "DEL ringslot-bench:ring:native:10");
    let before = digest(&mut con);

    // The user's keys evaluated as they are: read-only.
    let run = migration(&["--key-prefix", "acct:", "--reuse-keys"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let rows = csv_rows(&out_dir.path().join("migration.csv"));
    assert_eq!(
        num(&rows[&(1, "ring vnodes=10".to_string())], "members"),
        1001.0
    );
    assert_eq!(digest(&mut con), before);
    // Without --reuse-keys they are not written over: refused.
    let run = migration(&["--key-prefix", "acct:", "--keys", "1000"]);
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("--reuse-keys"));
    assert_eq!(digest(&mut con), before);
    // Keys of its own, written and deleted.
    let run = migration(&["--key-prefix", "fresh:", "--keys", "300"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(digest(&mut con), before);
    // A run that fails half-way (Maglev refuses a table size that is not a prime) deletes the
    // keys it wrote.
    q(&mut con, "CONFIG SET ringslot.maglev-size 65536");
    let run = migration(&[
        "--key-prefix",
        "fresh:",
        "--keys",
        "300",
        "--schemes",
        "maglev",
    ]);
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("maglev-size"));
    q(&mut con, "CONFIG SET ringslot.maglev-size 65537");
    assert_eq!(digest(&mut con), before);
    // Kept keys carry a TTL.
    let run = migration(&["--key-prefix", "fresh:", "--keys", "300", "--keep"]);
    assert!(run.status.success());
    for key in ["fresh:0", "ringslot-bench:ring:native:160"] {
        let ttl = int(&q(&mut con, &format!("PTTL {key}")));
        assert!(ttl > 0, "{key}: PTTL {ttl}");
    }
    for i in 0..300 {
        q(&mut con, &format!("DEL fresh:{i}"));
    }
    q(
        &mut con,
        "DEL ringslot-bench:ring:native:10 ringslot-bench:ring:native:160",
    );
    assert_eq!(digest(&mut con), before);

    // The other subcommands that run on --url.
    ok(&[
        "--url",
        &url,
        "--out",
        out,
        "balance",
        "--nodes",
        "3",
        "--vnodes",
        "1,2",
        "--name-sets",
        "1",
    ]);
    ok(&[
        "--url",
        &url,
        "--out",
        out,
        "spread",
        "--nodes",
        "4",
        "--views",
        "2",
        "--steps",
        "2",
        "--members",
        "200",
    ]);
    assert_eq!(digest(&mut con), before);
    assert_eq!(
        leftovers(&mut con, "ringslot-bench:*"),
        Vec::<String>::new()
    );
}
