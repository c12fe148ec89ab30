//! Production's limits (issue 40), on real clusters started here, on every server: masters and
//! replicas with `maxmemory` and `allkeys-lru` (as caches are configured), big keys, a client
//! writing and reading throughout. `predict` names the node redis-cli's rebalance would take
//! past its limit and the big keys; the plan by memory keeps within every node's room and
//! follows each master's `maxmemory`; `apply` refuses, before any write, a plan the cluster
//! has no room for now, completes one it has room for with nothing evicted, every key and
//! acknowledged write intact and every replica equal to its master; a client filling the
//! target stops it before the target's limit less the headroom, and the same command finishes
//! once room is made; a big key moves alone, and a slot whose key would hold its master past
//! `--max-hold` stays where it is unless `--move-big-keys`.

mod common;

use common::live::*;
use common::{ok, ringslot};
use ringslot_engine::key_slot;
use ringslot_harness::cluster::Cluster;
use ringslot_harness::prelude::*;
use ringslot_harness::redis;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `CONFIG SET maxmemory <bytes>` and `maxmemory-policy allkeys-lru` on `servers`.
fn set_maxmemory(servers: &[&Server], bytes: u64) {
    set_limit(servers, bytes, "allkeys-lru");
}

/// `HSET key field:i value...` for `fields` fields of 80 bytes, pipelined to the key's owner
/// (6000 fields: 0.7 MB by `MEMORY USAGE` on Valkey 9.1.2, 0.9 MB on Redis 7.0.15 and 8.2.3).
fn big_hash(cluster: &Cluster, key: &str, fields: usize) {
    let owner = slot_owners(cluster)[usize::from(key_slot(key.as_bytes()))]
        .clone()
        .unwrap();
    let server = cluster.nodes.iter().find(|s| s.address() == owner).unwrap();
    let mut pipe = redis::pipe();
    for i in 0..fields {
        pipe.cmd("HSET")
            .arg(key)
            .arg(format!("field:{i}"))
            .arg(format!("{:x<80}", format!("value-{i}-")))
            .ignore();
    }
    let _: () = pipe.query(&mut server.client()).unwrap();
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_rebalance_keeps_every_node_within_its_limit_and_every_replica_whole() {
    // Three masters of different maxmemory (24, 24 and 48 MB), a replica of the first; small
    // keys in every type, hot tags, a big hash and a big string; a fourth master joins with
    // its replica, as small as a cache node can be.
    let mut cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    let mb = 1u64 << 20;
    let replica0 = cluster
        .add_replica(0, || Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    for (i, limit) in [
        (0, 24 * mb),
        (1, 24 * mb),
        (2, 48 * mb),
        (replica0, 24 * mb),
    ] {
        set_maxmemory(&[&cluster.nodes[i]], limit);
    }
    fill(&cluster, 24000, &[(60, 4096), (30, 8192)]);
    big_hash(&cluster, "{big}:hash", 6000);
    let string_owner = slot_owners(&cluster)[usize::from(key_slot(b"{big2}:string"))]
        .clone()
        .unwrap();
    let owner = cluster
        .nodes
        .iter()
        .find(|s| s.address() == string_owner)
        .unwrap();
    call(
        &mut owner.client(),
        &[b"SET", b"{big2}:string", &vec![b's'; 600 * 1024]],
    )
    .unwrap();
    let joining = cluster
        .add_node(|| Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    let joining_replica = cluster
        .add_replica(joining, || Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    // Every replication backlog at 1 MiB (Redis's default; Valkey's 10 MiB, which the client
    // below fills, would be some 40% of a master's share here).
    for s in &cluster.nodes {
        q(&mut s.client(), "CONFIG SET repl-backlog-size 1048576");
    }
    let joining_address = cluster.nodes[joining].address();
    let pair = [&cluster.nodes[joining], &cluster.nodes[joining_replica]];
    let used = info(&cluster.nodes[joining], "memory", "used_memory") as u64;
    // Room for about a megabyte: redis-cli's rebalance would send it a quarter of the data.
    set_maxmemory(&pair, used + mb);
    let url = cluster.nodes[0].url();
    let predict = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "predict",
            "--url",
            &url,
            "--rebalance",
            "--by",
            "memory",
            "--max-keys-per-sec",
            "0",
            "--json",
        ];
        args.extend_from_slice(extra);
        serde_json::from_str(&ok(&args)).unwrap()
    };
    let tight = predict(&[]);
    assert_tight(&tight, &joining_address);

    // With room (24 MB like its peers), the plan by memory follows each master's maxmemory.
    set_maxmemory(&pair, 24 * mb);
    let roomy = predict(&[]);
    let weight = &roomy["prediction"]["by_weight"];
    assert_eq!(weight["by_maxmemory"], true, "{weight}");
    assert_eq!(weight["capped"], serde_json::json!([]), "{weight}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    std::fs::write(&path, serde_json::to_string(&roomy).unwrap()).unwrap();
    let path = path.to_str().unwrap();

    // Room taken away since from the master the plan sends the most memory to, and its
    // replicas: refused before any write. (Not always the joining master: on Valkey 9.1.2 its
    // own overhead can fill its share of the fill ratio, and the plan sends it nothing.)
    let before = keyspace(&cluster);
    let groups = [
        (vec![0, replica0], 24 * mb),
        (vec![1], 24 * mb),
        (vec![2], 48 * mb),
        (vec![joining, joining_replica], 24 * mb),
    ];
    refused_once_room_is_taken(&cluster, &roomy, path, &groups);
    check_clean(&cluster);

    // Room given back: the apply completes with a client writing and reading throughout.
    let evicted_before: Vec<f64> = cluster
        .nodes
        .iter()
        .map(|s| info(s, "stats", "evicted_keys"))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (out, (mut app, acked)) = std::thread::scope(|scope| {
        let handle = scope.spawn(|| traffic(&cluster, stop.clone()));
        let out = ringslot(&["apply", path, "--url", &url, "--yes"]);
        stop.store(true, Ordering::SeqCst);
        (out, handle.join().unwrap())
    });
    assert!(out.status.success(), "apply failed:\n{}", stderr(&out));
    // It says how far used_memory itself ends from even fill ratios.
    assert!(
        stderr(&out).contains("used_memory over maxmemory after the run"),
        "{}",
        stderr(&out)
    );
    for (s, was) in cluster.nodes.iter().zip(&evicted_before) {
        assert_eq!(
            info(s, "stats", "evicted_keys"),
            *was,
            "{} evicted keys during the apply",
            s.address()
        );
    }
    assert!(
        app.errors.is_empty(),
        "the client saw errors: {:?}",
        app.errors
    );
    let last: BTreeMap<String, String> = acked.into_iter().collect();
    for (key, value) in &last {
        let got = app.exec(
            &redis::cmd("GET").arg(key).clone(),
            key_slot(key.as_bytes()),
        );
        assert_eq!(got.map(|v| text(&v)), Some(value.clone()), "{key} lost");
    }
    cluster.converge().unwrap();
    check_clean(&cluster);
    assert_same(&before, &keyspace(&cluster), "before and after the apply");
    assert_replicas_equal(&cluster);

    assert_even_fill(&cluster, joining, weight);
}

/// The plan `roomy` (at `path`) refused before any write once room is taken away (`maxmemory`
/// at its `used_memory` and half a megabyte) from the master it sends the most memory to and
/// its replicas, `groups` giving each master and its replicas (node indexes) and their limit,
/// set back after.
fn refused_once_room_is_taken(
    cluster: &Cluster,
    roomy: &serde_json::Value,
    path: &str,
    groups: &[(Vec<usize>, u64)],
) {
    let mb = 1u64 << 20;
    let url = cluster.nodes[0].url();
    let owners_before = slot_owners(cluster);
    let (taker, taker_limit) = groups
        .iter()
        .max_by(|a, b| {
            let taken = |g: &(Vec<usize>, u64)| memory_to(roomy, &cluster.nodes[g.0[0]].address());
            taken(a).total_cmp(&taken(b))
        })
        .unwrap();
    let taker: Vec<&Server> = taker.iter().map(|&i| &cluster.nodes[i]).collect();
    let taker_address = taker[0].address();
    let taker_used = info(taker[0], "memory", "used_memory") as u64;
    let evicted =
        |s: &[&Server]| -> f64 { s.iter().map(|n| info(n, "stats", "evicted_keys")).sum() };
    let evicted_before = evicted(&taker);
    set_maxmemory(&taker, taker_used + mb / 2);
    let refused = ringslot(&["apply", path, "--url", &url, "--yes"]);
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(3), "{err}");
    assert!(
        err.contains("refused before any write")
            && err.contains(&taker_address)
            && err.contains("maxmemory"),
        "{err}"
    );
    set_maxmemory(&taker, *taker_limit);
    assert_eq!(
        evicted(&taker),
        evicted_before,
        "{taker_address} evicted keys"
    );
    assert_eq!(
        slot_owners(cluster),
        owners_before,
        "a refused apply moved slots"
    );
}

/// The memory the plan by weight of `prediction` (`predict --json`) sends to the master at
/// `address`, bytes (`MEMORY USAGE` of its moves' keys; their `DUMP` bytes where unmeasured).
fn memory_to(prediction: &serde_json::Value, address: &str) -> f64 {
    prediction["prediction"]["by_weight"]["moves"]
        .as_array()
        .unwrap_or_else(|| {
            panic!(
                "the plan's moves in {}",
                prediction["prediction"]["by_weight"]
            )
        })
        .iter()
        .filter(|m| m["to"] == address)
        .map(|m| m["memory"].as_f64().or(m["bytes"].as_f64()).unwrap_or(0.0))
        .sum()
}

/// The joining master (`joining`) is named by the risks of a tight prediction `tight`
/// (redis-cli's plan crosses its limit), the big hash is listed, and the plan by memory keeps
/// within the joining master's room.
fn assert_tight(tight: &serde_json::Value, joining_address: &str) {
    let p = &tight["prediction"];
    // The risks name the joining master under redis-cli's plan, first of all.
    let risks = p["risks"].to_string();
    assert!(risks.contains(joining_address), "{risks}");
    // The memory model's walk of redis-cli's plan takes it past its limit.
    let walk = p["capacity"]["walks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["plan"] == "redis-cli" && w["walk"]["method"] == "per_key")
        .unwrap_or_else(|| panic!("redis-cli's walk in {}", p["capacity"]));
    let node = walk["walk"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["address"] == joining_address)
        .unwrap_or_else(|| panic!("{} in {}", joining_address, walk));
    assert_eq!(node["worst"]["fit"], "crosses", "{node}");
    // The big keys are listed, from their lengths and MEMORY USAGE.
    let big: Vec<&str> = p["big_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key"].as_str().unwrap())
        .collect();
    assert!(big.contains(&"{big}:hash"), "{big:?}");
    // The plan by memory keeps within the joining master's room: the memory model's walk of
    // it, the one apply refuses a plan by, finds no moment past a limit (the plan evens
    // used_memory over maxmemory, and the joining master's own overhead already fills most of
    // its share).
    let walk = p["capacity"]["walks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["plan"] == "by memory" && w["walk"]["method"] == "per_key")
        .unwrap_or_else(|| panic!("the plan by memory's walk in {}", p["capacity"]));
    assert!(walk["walk"]["first"].is_null(), "{walk}");
}

/// Each master's fill ratio (used_memory over its maxmemory, what the plan by memory evens)
/// is within the plan's tolerance of the mean, by the by-weight section `weight` of the
/// prediction applied.
fn assert_even_fill(cluster: &Cluster, joining: usize, weight: &serde_json::Value) {
    let mb = 1u64 << 20;
    // Even fill ratios: each master's used_memory over its maxmemory within the plan's
    // tolerance; its data keys' MEMORY USAGE over it, reported (a node's own overhead, 1-2 MB
    // on an empty node, is in no key: evened by keys alone, used_memory ended 1.28-1.58 from
    // even at the test's 5 MB of keys).
    let limits: BTreeMap<String, f64> = [(0, 24.0), (1, 24.0), (2, 48.0), (joining, 24.0)]
        .iter()
        .map(|&(i, l)| (cluster.nodes[i].address(), l * mb as f64))
        .collect();
    let fill = |by: &BTreeMap<String, f64>| -> Vec<f64> {
        limits.iter().map(|(a, l)| by[a] / l).collect()
    };
    let spread = |ratios: &[f64]| {
        let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
        ratios.iter().fold(0.0f64, |a, &r| a.max(r)) / mean
    };
    let by_memory = spread(&fill(&memory_by_master(cluster)));
    let tolerance = weight["tolerance"].as_f64().unwrap();
    // used_memory less the client's own keys (written as fast as it can throughout, some
    // megabytes by the end, where their slots happen to be), which no plan made before it
    // could count.
    let used: BTreeMap<String, f64> = limits
        .keys()
        .map(|a| {
            let s = cluster.nodes.iter().find(|s| s.address() == *a).unwrap();
            (
                a.clone(),
                info(s, "memory", "used_memory") - client_keys_memory(s),
            )
        })
        .collect();
    let by_used = spread(&fill(&used));
    eprintln!(
        "fill ratios' peak-to-mean after the apply: {by_used:.3} by used_memory, \
         {by_memory:.3} by its keys' MEMORY USAGE"
    );
    assert_eq!(weight["within"], true, "{weight}");
    // The plan evens used_memory over maxmemory within the tolerance, and the memory model
    // counts a node's own memory (its tables, its buffers) to some 0.3 to 0.5 MB; here the
    // client writes as fast as it can, filling the replication backlogs it streams through
    // (1 MiB each here), which no plan sees coming: at this test's 5 MB of keys in nodes of
    // 24 and 48 MB (fills near 20%), each is some 10% of a master's share. So the fills are
    // held to six tolerances (1.09 on Redis 7.0.15, 1.13 on Redis 8.2.3, 1.22 to 1.31 on
    // Valkey 9.1.2 measured with its default backlog of 10 MiB, which the test now sets to
    // 1 MiB; evening the keys' memory alone, as before, left 1.28 to 1.58);
    // tool_relief.rs holds larger nodes to the tolerance.
    assert!(
        by_used <= 1.0 + 6.0 * tolerance,
        "fill ratios by used_memory {by_used:.3} past six tolerances of {tolerance}"
    );
}

/// The `MEMORY USAGE` of the client's keys (`w:...`) on `server`.
fn client_keys_memory(server: &Server) -> f64 {
    let mut con = server.client();
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("w:*").query(&mut con).unwrap();
    let mut total = 0.0;
    for chunk in keys.chunks(1000) {
        let mut pipe = redis::pipe();
        for k in chunk {
            pipe.cmd("MEMORY").arg("USAGE").arg(k.as_slice());
        }
        let sizes: Vec<Option<u64>> = pipe.query(&mut con).unwrap();
        total += sizes.into_iter().flatten().sum::<u64>() as f64;
    }
    total
}

/// A hash tag whose keys fall in `slot`.
fn tag_of(slot: u16) -> String {
    (0u64..)
        .map(|i| format!("f{i}"))
        .find(|t| key_slot(format!("{{{t}}}").as_bytes()) == slot)
        .unwrap()
}

#[test]
fn a_client_filling_the_target_stops_the_apply_before_its_limit() {
    let mut cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    fill(&cluster, 12000, &[(60, 4096)]);
    let joining = cluster
        .add_node(|| Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    let target = cluster.nodes[joining].address();
    let url = cluster.nodes[0].url();
    let plan: serde_json::Value = serde_json::from_str(&ok(&[
        "predict",
        "--url",
        &url,
        "--rebalance",
        "--by",
        "memory",
        "--max-keys-per-sec",
        "0",
        "--json",
    ]))
    .unwrap();
    let moves = plan["prediction"]["by_weight"]["moves"].as_array().unwrap();
    let first = moves.iter().find(|m| m["to"] == target.as_str()).unwrap();
    let slot = first["slot"].as_u64().unwrap() as u16;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    std::fs::write(&path, serde_json::to_string(&plan).unwrap()).unwrap();
    let path = path.to_str().unwrap();
    // Room for the plan's fullest moment on the target (the memory model's walk: its keys as
    // it holds them, its slots' tables, two payloads in flight) and 1.5 MB more, less the 10%
    // headroom.
    let fullest = plan["prediction"]["capacity"]["walks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["plan"] == "by memory" && w["walk"]["method"] == "per_key")
        .and_then(|w| {
            w["walk"]["nodes"]
                .as_array()?
                .iter()
                .find(|n| n["address"] == target.as_str())?["fullest"]
                .as_f64()
        })
        .unwrap_or_else(|| panic!("the target's fullest moment in {}", plan["prediction"]));
    let limit = ((fullest + 1.5 * 1048576.0) / 0.9) as u64;
    set_maxmemory(&[&cluster.nodes[joining]], limit);

    // The apply, slowed; a client writes 20 KB every 50 ms into the first slot it moves
    // (through its source until it moves), until the apply stops.
    let tag = tag_of(slot);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ringslot"))
        .args([
            "apply",
            path,
            "--url",
            &url,
            "--yes",
            "--max-bytes-per-sec",
            "100000",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its stderr read as it comes (a line a slot: a full pipe would block the run).
    let mut pipe = child.stderr.take().unwrap();
    let said = std::thread::spawn(move || {
        let mut err = String::new();
        std::io::Read::read_to_string(&mut pipe, &mut err).unwrap();
        err
    });
    let mut app = AppClient::new(&cluster);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut written = 0u64;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let err = said.join().unwrap();
            let t = &cluster.nodes[joining];
            panic!(
                "the apply did not stop ({written} values written; the target uses {} of \
                 {limit}, {} not counted, {} evicted, policy {}):\n{err}",
                info(t, "memory", "used_memory"),
                info(t, "memory", "mem_not_counted_for_evict"),
                info(t, "stats", "evicted_keys"),
                text(
                    &q(&mut t.client(), "CONFIG GET maxmemory-policy")
                        .as_sequence()
                        .unwrap()[1]
                        .clone()
                )
            );
        }
        // The client fills the target up to its limit less the headroom, no further: past
        // that line the run must stop before its next MIGRATE (what is checked), and writes
        // after it would take the target past its limit whatever the run did, while the run
        // reads the masters again on its way out (longer on a busy machine).
        let used = info(&cluster.nodes[joining], "memory", "used_memory");
        if used < 0.9 * limit as f64 {
            let key = format!("w:{{{tag}}}:{written}");
            let set = redis::cmd("SET").arg(&key).arg(vec![b'v'; 20_000]).clone();
            app.exec(&set, slot);
            written += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = said.join().unwrap();
    assert!(!status.success(), "the apply ran to its end: {err}");
    assert!(
        err.contains("stopped before a MIGRATE")
            && err.contains(&target)
            && err.contains("maxmemory"),
        "{err}"
    );
    assert_eq!(
        info(&cluster.nodes[joining], "stats", "evicted_keys"),
        0.0,
        "the target evicted keys"
    );
    assert!(app.errors.is_empty(), "{:?}", app.errors);
    eprintln!(
        "the client wrote {written} values of 20 KB; the apply stopped: {}",
        err.lines().last().unwrap_or("")
    );

    // Room made: the same command finishes.
    set_maxmemory(&[&cluster.nodes[joining]], limit * 4);
    let out = ringslot(&["apply", path, "--url", &url, "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    cluster.converge().unwrap();
    check_clean(&cluster);
    assert_eq!(slot_owners(&cluster), planned_owners(&plan));
    assert_eq!(info(&cluster.nodes[joining], "stats", "evicted_keys"), 0.0);
}

#[test]
fn a_big_key_moves_alone_and_past_max_hold_stays_unless_asked() {
    let cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    // The drained master stays an empty master: on Valkey 9.1.2, one that turned replica of
    // the master taking its slots while that master was importing another slot was once left
    // with the slot importing (a replica's state the apply cannot reach; seen in 1 run of 5).
    // tool_apply's drain test covers a drained master turning replica.
    for n in &cluster.nodes {
        q(
            &mut n.client(),
            "CONFIG SET cluster-allow-replica-migration no",
        );
    }
    fill(&cluster, 3000, &[]);
    big_hash(&cluster, "{big}:hash", 20000);
    let slot = key_slot(b"{big}:hash");
    let owner = slot_owners(&cluster)[usize::from(slot)].clone().unwrap();
    let url = cluster.nodes[0].url();
    let predict = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "predict",
            "--url",
            &url,
            "--by",
            "memory",
            "--json",
            "--max-hold",
            "1",
        ];
        args.extend_from_slice(extra);
        serde_json::from_str(&ok(&args)).unwrap()
    };
    // A master joins: past --max-hold, the big key's slot stays where it is unless asked.
    let moved_slots = |p: &serde_json::Value| -> Vec<u64> {
        p["prediction"]["by_weight"]["moves"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["slot"].as_u64().unwrap())
            .collect()
    };
    let pinned = predict(&["--add", "10.9.9.9:7000"]);
    assert_eq!(
        pinned["prediction"]["by_weight"]["pinned"],
        serde_json::json!([slot]),
        "{}",
        pinned["prediction"]["by_weight"]
    );
    assert!(!moved_slots(&pinned).contains(&u64::from(slot)));
    let asked = predict(&["--add", "10.9.9.9:7000", "--move-big-keys"]);
    assert_eq!(
        asked["prediction"]["by_weight"]["pinned"],
        serde_json::json!([])
    );

    // Its master leaves: every slot moves, the big key's too, in a MIGRATE of its own.
    let drain = predict(&["--del", &owner]);
    assert!(moved_slots(&drain).contains(&u64::from(slot)));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    std::fs::write(&path, serde_json::to_string(&drain).unwrap()).unwrap();
    let source = cluster.nodes.iter().find(|s| s.address() == owner).unwrap();
    q(&mut source.client(), "CONFIG SET slowlog-max-len 100000");
    q(&mut source.client(), "CONFIG SET slowlog-log-slower-than 0");
    q(&mut source.client(), "SLOWLOG RESET");
    let before = keyspace(&cluster);
    let out = ringslot(&["apply", path.to_str().unwrap(), "--url", &url, "--yes"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("moving big key \"{big}:hash\""), "{err}");
    let valkey = text(&q(&mut source.client(), "INFO server")).contains("server_name:valkey");
    assert_eq!(err.contains("--atomic"), valkey, "{err}");
    q(
        &mut source.client(),
        "CONFIG SET slowlog-log-slower-than 10000",
    );
    let log = q(&mut source.client(), "SLOWLOG GET 100000");
    let migrates: Vec<Vec<String>> = array(&log)
        .iter()
        .map(|e| {
            array(&array(e)[3])
                .iter()
                .map(text)
                .collect::<Vec<String>>()
        })
        .filter(|c| c[0].eq_ignore_ascii_case("MIGRATE") && c.iter().any(|a| a == "{big}:hash"))
        .collect();
    assert_eq!(migrates.len(), 1, "{migrates:?}");
    let keys = migrates[0].iter().position(|a| a == "KEYS").unwrap();
    assert_eq!(
        migrates[0].len(),
        keys + 2,
        "the big key alone: {:?}",
        migrates[0]
    );
    cluster.converge().unwrap();
    check_clean(&cluster);
    assert_same(&before, &keyspace(&cluster), "before and after the drain");
}
