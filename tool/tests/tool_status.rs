//! `ringslot status` on real clusters started here, on every server: it agrees with
//! `redis-cli --cluster check` on what both report (each master's keys, slots and replicas,
//! and the slots left open by a killed `apply`), and with the keys the test wrote on the rest
//! (each master's bytes: the sum of its keys' `MEMORY USAGE` (5 samples) when every key is
//! sized, within the stated error when sampled; the big key; the hot slot; `maxmemory`); it
//! shows Valkey 9's atomic slot migration under way; it writes nothing.

mod common;

use common::live::*;
use common::{ok, ringslot};
use ringslot_engine::key_slot;
use ringslot_harness::cluster::{has_atomic_slot_migration, Cluster};
use ringslot_harness::prelude::*;
use ringslot_tool::picture::mib;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `ringslot status --json` against node 0, with `extra` options.
fn status(cluster: &Cluster, extra: &[&str]) -> serde_json::Value {
    let url = cluster.nodes[0].url();
    let mut args = vec!["status", "--url", &url, "--json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&ok(&args)).expect("a JSON object")
}

/// The master `address` of a status.
fn master<'a>(status: &'a serde_json::Value, address: &str) -> &'a serde_json::Value {
    status["masters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["address"] == address)
        .unwrap_or_else(|| panic!("{address} in {}", status["masters"]))
}

/// What `redis-cli --cluster check` of node 0 prints: each master's keys, slots and replicas
/// (`ip:port (id...) -> K keys | S slots | R slaves.`), and its warnings.
fn redis_cli_check(cluster: &Cluster) -> (BTreeMap<String, (u64, u64, u64)>, String) {
    let run = cluster_check(cluster);
    let mut masters = BTreeMap::new();
    for line in run.stdout.lines() {
        let Some((head, counts)) = line.split_once(" -> ") else {
            continue;
        };
        let numbers: Vec<u64> = counts
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect();
        if let (Some(address), [keys, slots, replicas]) =
            (head.split_whitespace().next(), numbers.as_slice())
        {
            masters.insert(address.to_string(), (*keys, *slots, *replicas));
        }
    }
    (masters, run.stdout)
}

/// Every master's keyspace digest, to show that nothing was written.
fn digests(cluster: &Cluster) -> Vec<String> {
    cluster
        .nodes
        .iter()
        .map(|s| text(&q(&mut s.client(), "DEBUG DIGEST")))
        .collect()
}

/// Sampled (the default, 8 keys a slot): each master's bytes within the stated error of
/// `truth` (and 2% for the scaling of slots whose sampled keys are all alike). The hot slot's
/// keys (of `hot_master`) are strings and, every third, streams, of unlike sizes: the 8 of
/// them sampled, the first in its per-slot dictionary's order (random on Valkey and Redis 8),
/// may all be strings (one run in 25), and then look alike, their stated error 0: its master
/// is allowed that spread as well. Returns the status.
fn sampled_within_their_error(
    cluster: &Cluster,
    truth: &BTreeMap<String, f64>,
    hot_master: &str,
) -> serde_json::Value {
    let sampled = status(cluster, &[]);
    let hot_node = cluster
        .nodes
        .iter()
        .find(|s| s.address() == hot_master)
        .unwrap();
    let usage = |key: &str| match q(&mut hot_node.client(), &format!("MEMORY USAGE {key}")) {
        redis::Value::Int(n) => n as f64,
        other => panic!("MEMORY USAGE {key}: {other:?}"),
    };
    let hot_spread = 600.0 * (usage("{hot0}:2") - usage("{hot0}:0")).abs();
    for (address, t) in truth {
        let b = &master(&sampled, address)["bytes"];
        let (value, error) = (b["value"].as_f64().unwrap(), b["error"].as_f64().unwrap());
        let spread = if address == hot_master {
            hot_spread
        } else {
            0.0
        };
        assert!(
            (value - t).abs() <= error + 0.02 * t + spread,
            "{address}: {b} against {t}"
        );
    }
    sampled
}

#[test]
fn status_agrees_with_redis_cli_check_and_with_the_keys_written() {
    let mut cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    cluster
        .add_replica(0, || Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    q(&mut cluster.nodes[1].client(), "CONFIG SET maxmemory 512mb");
    q(
        &mut cluster.nodes[1].client(),
        "CONFIG SET maxmemory-policy allkeys-lru",
    );
    // Small keys of every type, a hot tag of 600 keys of 2 KiB, a big string of 600 KiB.
    fill(&cluster, 3000, &[(600, 2048)]);
    let big = b"{bigs}:s";
    write(&cluster, &[c(&[b"SET", big, &vec![b's'; 600 * 1024]])]);
    let hot_slot = key_slot(b"{hot0}:0");
    let before = digests(&cluster);

    // Every key sized: each master's bytes are its keys' MEMORY USAGE, exactly.
    let all = status(&cluster, &["--bytes-sample", "1000"]);
    assert_eq!(all["version"], 1);
    let truth = memory_by_master(&cluster);
    let (check, said) = redis_cli_check(&cluster);
    assert_eq!(check.len(), 3, "{said}");
    for (address, &(keys, slots, replicas)) in &check {
        let m = master(&all, address);
        assert_eq!(m["keys"], keys, "{address}: keys as redis-cli counts them");
        assert_eq!(m["slots"], slots, "{address}");
        assert_eq!(
            m["replicas"].as_array().unwrap().len() as u64,
            replicas,
            "{address}"
        );
        assert_eq!(
            m["bytes"]["value"].as_f64(),
            Some(truth[address]),
            "{address}"
        );
    }
    let replica = &master(&all, &cluster.nodes[0].address())["replicas"][0];
    assert_eq!(replica["link"], "up", "{replica}");
    let limited = master(&all, &cluster.nodes[1].address());
    assert_eq!(limited["maxmemory"].as_f64(), Some(512.0 * 1024.0 * 1024.0));
    assert_eq!(limited["policy"], "allkeys-lru");
    assert_eq!(
        all["biggest_slots"][0]["slot"], hot_slot,
        "{}",
        all["biggest_slots"]
    );
    let found = &all["big_keys"][0];
    assert_eq!(
        (&found["key"], &found["type"], &found["length"]),
        (&"{bigs}:s".into(), &"string".into(), &(600 * 1024).into()),
        "{found}"
    );
    // The verdict names the master with the most bytes, its hot slot (1.2 MiB of the test's
    // 3.5, more than a master's share: no plan of whole slots evens it) and the plan that
    // evens the rest.
    let heaviest = truth.iter().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
    let verdict = all["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with(&format!("not balanced by bytes: master {heaviest} holds "))
            && verdict.contains(&format!("slot {hot_slot} alone"))
            && verdict.contains("--rebalance --by bytes"),
        "{verdict}"
    );

    // A big key among 600 keys of a slot, sized 1 key a slot: --big-keys screens every key
    // and finds it, counted whole in its master's bytes.
    write(
        &cluster,
        &[c(&[b"SET", b"{hot0}:big", &vec![b'b'; 700 * 1024]])],
    );
    let screened = status(&cluster, &["--bytes-sample", "1", "--big-keys"]);
    assert_eq!(screened["big_keys_screened"], true);
    let hot_master = slot_owners(&cluster)[usize::from(hot_slot)]
        .clone()
        .unwrap();
    let found = screened["big_keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key"] == "{hot0}:big")
        .unwrap_or_else(|| panic!("{{hot0}}:big in {}", screened["big_keys"]));
    assert_eq!(found["master"], hot_master.as_str(), "{found}");
    let bytes = master(&screened, &hot_master)["bytes"]["value"]
        .as_f64()
        .unwrap();
    assert!(
        bytes >= found["memory"].as_f64().unwrap(),
        "{bytes} against {found}"
    );
    write(&cluster, &[c(&[b"DEL", b"{hot0}:big"])]);
    let sampled = sampled_within_their_error(&cluster, &truth, &hot_master);
    // The picture: every master, its used_memory as the JSON has it, its share and limit.
    let dir = tempfile::tempdir().unwrap();
    let url = cluster.nodes[0].url();
    let out = dir.path().to_str().unwrap();
    let pictured: serde_json::Value =
        serde_json::from_str(&ok(&["status", "--url", &url, "--json", "--out", out])).unwrap();
    let labels = ringslot_tool::picture::labels(
        &std::fs::read_to_string(dir.path().join("status.svg")).unwrap(),
    );
    let masters = pictured["masters"].as_array().unwrap();
    let used: Vec<f64> = masters
        .iter()
        .map(|m| m["used_memory"].as_f64().unwrap())
        .collect();
    let share = format!(
        "even share {}",
        mib(used.iter().sum::<f64>() / used.len() as f64)
    );
    for (m, used) in masters.iter().zip(&used) {
        for label in [
            m["address"].as_str().unwrap().to_string(),
            mib(*used),
            share.clone(),
        ] {
            assert!(labels.contains(&label), "{label} in {labels:?}");
        }
    }
    assert!(
        labels.contains(&"maxmemory 512.0 (off the chart)".to_string()),
        "{labels:?}"
    );
    // The report: the verdict first, then the masters.
    let url = cluster.nodes[0].url();
    let md = ok(&["status", "--url", &url]);
    let said = sampled["verdict"].as_str().unwrap();
    assert!(
        md.contains(&format!("**{said}**")) && md.contains("| master |"),
        "{said}\n{md}"
    );
    assert_eq!(digests(&cluster), before, "status wrote to the cluster");

    // Open slots as a killed apply leaves them: the same slot migrating on the source and
    // importing on the target, as redis-cli --cluster check warns.
    open_slot_left_by_a_killed_apply(&mut cluster);
}

/// A fourth master joins; `apply` of redis-cli's plan stops after its first two writes (the
/// test hook, as a kill would leave it); `status` shows the slot open on both sides, as
/// `redis-cli --cluster check` warns, and says so first.
fn open_slot_left_by_a_killed_apply(cluster: &mut Cluster) {
    let joining = cluster
        .add_node(|| Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.nodes[0].url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let plan = ok(&[
        "predict",
        "--url",
        &url,
        "--rebalance",
        "--by",
        "slots",
        "--max-keys-per-sec",
        "0",
        "--json",
        "--out",
        out,
    ]);
    predict_picture_agrees(&plan, &dir.path().join("predict.svg"));
    let path = dir.path().join("plan.json");
    std::fs::write(&path, plan).unwrap();
    stopped_after_writes(
        &["apply", path.to_str().unwrap(), "--url", &url, "--yes"],
        [2],
    );
    let s = status(cluster, &[]);
    let target = master(&s, &cluster.nodes[joining].address());
    let importing = &target["importing"][0];
    let slot = importing["slot"].as_u64().unwrap();
    let source = importing["peer"].as_str().unwrap();
    assert_eq!(
        master(&s, source)["migrating"][0],
        serde_json::json!({"slot": slot, "peer": cluster.nodes[joining].address()}),
        "{s}"
    );
    let (_, said) = redis_cli_check(cluster);
    for warning in [
        format!("has slots in importing state {slot}"),
        format!("has slots in migrating state {slot}"),
    ] {
        assert!(said.contains(&warning), "{warning} in:\n{said}");
    }
    let verdict = s["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with(&format!("slot {slot} is migrating from {source}")),
        "{verdict}"
    );
    // Where the slot stands is plain before the join's own finding.
    assert!(
        verdict.contains("holds no slots") || verdict.contains("by slots"),
        "{verdict}"
    );
}

/// The picture of prediction `json` (`predict --out`) shows every master, its memory now and
/// after each plan as the JSON has them, and the strips of each plan.
fn predict_picture_agrees(json: &str, svg: &std::path::Path) {
    let p: serde_json::Value = serde_json::from_str(json).unwrap();
    let labels = ringslot_tool::picture::labels(&std::fs::read_to_string(svg).unwrap());
    let rows = |methods: &serde_json::Value| -> Vec<serde_json::Value> {
        methods[0]["memory"].as_array().unwrap().clone()
    };
    let prediction = &p["prediction"];
    for row in rows(&prediction["methods"]) {
        for label in [
            row["address"].as_str().unwrap().to_string(),
            mib(row["now"].as_f64().unwrap()),
            mib(row["end"].as_f64().unwrap()),
        ] {
            assert!(labels.contains(&label), "{label} in {labels:?}");
        }
    }
    for row in rows(&prediction["by_weight"]["methods"]) {
        let label = mib(row["end"].as_f64().unwrap());
        assert!(labels.contains(&label), "{label} in {labels:?}");
    }
    for strip in ["now", "after redis-cli's plan", "after the plan by slots"] {
        let label = format!("slots 0-16383, {strip}");
        assert!(
            labels.iter().any(|l| l.starts_with(&label)),
            "{label} in {labels:?}"
        );
    }
}

#[test]
fn status_shows_an_atomic_slot_migration_under_way() {
    let cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    if !has_atomic_slot_migration(&cluster.nodes[0]) {
        eprintln!("no atomic slot migration on this server: nothing to show");
        return;
    }
    fill(&cluster, 2000, &[]);
    // The source's job waits behind a BGSAVE slowed to a crawl: it stays under way.
    let source = &cluster.nodes[0];
    let save = hold_behind_bgsave(source);
    let first = slot_owners(&cluster)
        .iter()
        .position(|o| o.as_deref() == Some(source.address().as_str()))
        .unwrap() as u16;
    let name = cluster
        .migrate_slots(0, &[(first, first + 9)], 1)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let s = status(&cluster, &[]);
    let job = &master(&s, &source.address())["atomic_migrations"][0];
    assert_eq!(job["operation"], "EXPORT", "{job}");
    assert_eq!(job["slots"], format!("{first}-{}", first + 9), "{job}");
    assert_eq!(job["peer"], cluster.nodes[1].address(), "{job}");
    let verdict = s["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with(&format!(
            "an atomic slot migration is under way on {}",
            source.address()
        )),
        "{verdict}"
    );
    // Let the job go, and see it end.
    save.release(source);
    cluster
        .wait_slot_migration(0, &name, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}"));
    let after = status(&cluster, &[]);
    assert!(
        after["masters"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["atomic_migrations"] == serde_json::json!([])),
        "{after}"
    );
}

#[test]
fn exit_statuses_tell_a_usage_error_an_error_a_refusal_and_ctrl_c_apart() {
    // 2: clap's usage error.
    let out = ringslot(&["status", "--no-such-option"]);
    assert_eq!(out.status.code(), Some(2));
    // 1: an error (no node at the address).
    let out = ringslot(&["status", "--url", "redis://127.0.0.1:1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("ringslot: error: "), "{err}");
    // 3: a safety rule's refusal: predict on a cluster with an open slot, which status reads
    // (status 0).
    let cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    fill(&cluster, 30000, &[]);
    let url = cluster.nodes[0].url();
    let first = slot_owners(&cluster)
        .iter()
        .position(|o| o.as_deref() == Some(cluster.nodes[0].address().as_str()))
        .unwrap();
    let id1 = cluster.node_id(1).unwrap();
    let mut con = cluster.nodes[0].client();
    q(
        &mut con,
        &format!("CLUSTER SETSLOT {first} MIGRATING {id1}"),
    );
    let out = ringslot(&["predict", "--url", &url, "--add", "10.9.9.9:7000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains(&format!("slot {first} of")), "{err}");
    let open = status(&cluster, &[]);
    assert_eq!(
        master(&open, &cluster.nodes[0].address())["migrating"][0]["slot"],
        first
    );
    q(&mut con, &format!("CLUSTER SETSLOT {first} STABLE"));
    // A master that does not answer (stopped, not yet flagged) is reported, first in the
    // verdict, and the others as usual: status 0.
    let stopped = cluster.nodes[2].pid().to_string();
    let signal = |sig: &str| Command::new("kill").args([sig, &stopped]).status().unwrap();
    signal("-STOP");
    let out = ringslot(&["status", "--url", &url, "--json", "--timeout", "1"]);
    signal("-CONT");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let address = cluster.nodes[2].address();
    // (On a machine so busy that the run outlasts the 5 s node timeout, the others flag it
    // `fail?` meanwhile: it is then named as flagged, first too.)
    let unread = master(&s, &address)["unread"].as_str().unwrap().to_string();
    let verdict = s["verdict"].as_str().unwrap();
    let timed_out = unread.contains("within 1 s")
        && verdict.starts_with(&format!("master {address} could not be read"));
    let flagged = unread.contains("flagged")
        && verdict.starts_with(&format!("not healthy: master {address}"));
    assert!(timed_out || flagged, "{unread}: {verdict}");
    assert!(master(&s, &cluster.nodes[0].address())["keys"].as_u64() > Some(0));
    // 130: Ctrl-C. A predict reading 200 keys a second (10000 keys a master: 50 s) is
    // interrupted once its connections show on the masters.
    let child = Command::new(env!("CARGO_BIN_EXE_ringslot"))
        .args(["predict", "--url", &url, "--add", "10.9.9.9:7000"])
        .args(["--max-keys-per-sec", "200"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !cluster
        .nodes
        .iter()
        .all(|s| text(&q(&mut s.client(), "CLIENT LIST")).contains("name=ringslot"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "predict never connected"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let signalled = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(signalled.success());
    // It stops at its next SCAN batch: at most a few seconds; a run that does not is killed
    // and fails the test.
    let mut child = child;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("predict did not stop within 2 minutes of Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
}

/// The rule docs/cluster.md gives the user of `ringslot status` ("How the cluster stands").
const STATUS_ACL: &str = "resetchannels -@all +cluster|nodes +cluster|countkeysinslot \
    +cluster|getkeysinslot +info +dbsize +memory|usage +type +object|encoding +strlen +hlen \
    +llen +scard +zcard +xlen +scan";

#[test]
fn a_user_with_the_documented_rule_reads_every_master() {
    let cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    fill(&cluster, 3000, &[(100, 2048)]);
    write(
        &cluster,
        &[c(&[b"SET", b"{bigs}:s", &vec![b's'; 600 * 1024]])],
    );
    for s in &cluster.nodes {
        let mut con = s.client();
        q(
            &mut con,
            &format!("ACL SETUSER status-reader on >reader-secret resetkeys ~* {STATUS_ACL}"),
        );
        // Where the server has them (a rule naming a subcommand a server lacks is refused).
        for extra in ["+cluster|slot-stats", "+cluster|getslotmigrations"] {
            let _ = call(
                &mut con,
                &[b"ACL", b"SETUSER", b"status-reader", extra.as_bytes()],
            );
        }
    }
    let url = format!(
        "redis://status-reader:reader-secret@{}",
        cluster.nodes[0].address()
    );
    for extra in [&[][..], &["--big-keys"][..]] {
        let mut args = vec!["status", "--url", &url, "--json"];
        args.extend_from_slice(extra);
        let s: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
        for m in s["masters"].as_array().unwrap() {
            assert_eq!(m["unread"], "", "{extra:?}: {m}");
        }
        assert_eq!(
            s["big_keys"][0]["key"], "{bigs}:s",
            "{extra:?}: {}",
            s["big_keys"]
        );
    }
}
