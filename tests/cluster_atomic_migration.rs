//! Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`) on a real cluster of three
//! masters with the module on every node (started here, stopped on drop). The module declares
//! support for it (without the declaration Valkey refuses every migration of the cluster), and
//! rings move whole: the source's snapshot replays each ring as the commands of its AOF
//! rewrite on the target, run there by the slot-import client, whatever the target's own
//! `ringslot.max-points` and `max-nodes`. Meanwhile the module's commands keep answering on
//! the source, writes to rings in the moving slots arrive, and keyspace walks that a migration
//! overlaps fail with a clear error instead of counting keys that are not the node's.
//!
//! The expected answers are the source's own replies before the move (`DUMP`, `DEBUG
//! DIGEST-VALUE`, `RING.INFO`, `RING.MGET`) and Valkey's (`CLUSTER GETSLOTMIGRATIONS`). On a
//! server without atomic slot migration (Redis) the tests say so and pass.

use ringslot_engine::key_slot;
use ringslot_harness::cluster::{
    cluster_nodes, has_atomic_slot_migration, migration_finished, owners, parse_cluster_nodes,
    slot_migrations, Cluster,
};
use ringslot_harness::prelude::*;
use ringslot_harness::redis::{self, Connection, Value};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a migration may take before the test gives up: far beyond the seconds it takes.
const MIGRATION_LIMIT: Duration = Duration::from_secs(300);

/// The slots the tests move, all served by the first master of `redis-cli --cluster create`.
const MOVING: (u16, u16) = (0, 100);

/// A hash tag `{...}` whose slot is in `lo..=hi`, the `n`-th such (so that rings get slots of
/// their own).
fn tag_in(lo: u16, hi: u16, n: usize) -> String {
    (0u64..)
        .map(|i| format!("{{a{i}}}"))
        .filter(|t| (lo..=hi).contains(&key_slot(t.as_bytes())))
        .nth(n)
        .unwrap_or_default()
}

/// A 3-master cluster with the module on every node, or `None` (said on stderr) when the
/// server has no atomic slot migration.
fn atomic_cluster() -> Option<Cluster> {
    let cluster = Cluster::start(3, Server::builder).unwrap_or_else(|e| panic!("{e}"));
    if !has_atomic_slot_migration(&cluster.nodes[0]) {
        eprintln!("no CLUSTER MIGRATESLOTS on this server (Valkey 9 has it): nothing to test");
        return None;
    }
    Some(cluster)
}

/// The index of the node serving `slot`.
fn owner_of(cluster: &Cluster, slot: u16) -> usize {
    let text = cluster_nodes(&cluster.nodes[0]).unwrap_or_else(|e| panic!("{e}"));
    let table = owners(&parse_cluster_nodes(&text).unwrap_or_else(|e| panic!("{e}")));
    let owner = table[usize::from(slot)].clone().expect("served");
    (0..cluster.nodes.len())
        .find(|&i| cluster.nodes[i].address() == owner)
        .expect("a node of the cluster")
}

/// What must survive a move of the ring at `key`: its `DUMP` payload, `DEBUG DIGEST-VALUE`,
/// `RING.INFO` and the owners of 500 members. `RING.INFO`'s `memory_bytes` is left out: it
/// counts the capacity of the ring's arrays, which depends on the steps it was built in (the
/// target rebuilds it from the commands of its AOF rewrite, 4096 nodes a `RING.ADD`); it
/// differed by 768 of 616738 bytes for the 10000-node ring.
fn fingerprint(con: &mut Connection, key: &str) -> (Vec<u8>, Value, Vec<(String, Value)>, Value) {
    let k = key.as_bytes();
    let dump = bytes(&call(con, &[b"DUMP", k]).expect("DUMP"));
    let digest = call(con, &[b"DEBUG", b"DIGEST-VALUE", k]).expect("DIGEST-VALUE");
    let info = info_state(con, k);
    let members: Vec<Vec<u8>> = (0..500).map(|i| format!("user:{i}").into_bytes()).collect();
    let mut mget: Vec<&[u8]> = vec![b"RING.MGET", k];
    mget.extend(members.iter().map(Vec::as_slice));
    let owners = call(con, &mget).expect("RING.MGET");
    (dump, digest, info, owners)
}

/// Sets `n` plain keys `<tag>fill<i>` on `con` (pipelined), all in the tag's slot.
fn fill(con: &mut Connection, tag: &str, n: usize) {
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("SET").arg(format!("{tag}fill{i}")).arg(i).ignore();
    }
    pipe.query::<()>(con).expect("SET");
}

/// Waits (at most a minute) until `test` holds on `con`.
fn wait_for(con: &mut Connection, what: &str, mut test: impl FnMut(&mut Connection) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !test(con) {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `RING.MOVES <ring> ADD probe KEYS *` on `server` in the background (on a Valkey
/// cluster node a keyspace walk always runs there) with the workers paused
/// (`ringslot.debug-pause-background`), waits until it has read its first slice of keys,
/// and returns the thread that waits for its reply.
fn paused_walk(server: &Server, ring: &str) -> std::thread::JoinHandle<Result<Value, String>> {
    let mut con = server.client();
    q(&mut con, "CONFIG SET ringslot.debug-pause-background 1");
    let before = ringslot_info(&mut con, "background_evaluated");
    let mut walker = server.client();
    let line = format!("RING.MOVES {ring} ADD probe KEYS *");
    let handle = std::thread::spawn(move || call(&mut walker, &words(&line)));
    wait_for(&mut con, "the walk has read its first slice", |c| {
        ringslot_info(c, "background_runs") == 1
            && ringslot_info(c, "background_evaluated") > before
    });
    handle
}

#[test]
fn rings_move_whole_by_atomic_slot_migration() {
    let Some(cluster) = atomic_cluster() else {
        return;
    };
    let source = owner_of(&cluster, MOVING.0);
    let target = (source + 1) % 3;
    let mut src = cluster.nodes[source].client();
    let mut tgt = cluster.nodes[target].client();
    let big = std::env::var_os("RINGSLOT_SOAK").is_some();
    // The ring at ringslot.max-points: 100000 points here (the source's limit set to it),
    // 1M (the default limit) in `make soak`.
    let dense_nodes: u32 = if big { 6250 } else { 625 };
    q(
        &mut src,
        &format!("CONFIG SET ringslot.max-points {}", dense_nodes * 160),
    );

    // Rings in the moving slots: a small weighted ketama ring with an assignment; a ring at
    // ringslot.max-nodes (10000 nodes) with 8192 slot ranges; a ring at max-points; and a
    // ring outside them, which must stay as it is.
    let tags: Vec<String> = (0..4).map(|n| tag_in(MOVING.0, MOVING.1, n)).collect();
    let (small, wide, dense, written) = (
        format!("{}small", tags[0]),
        format!("{}wide", tags[1]),
        format!("{}dense", tags[2]),
        format!("{}written", tags[3]),
    );
    let stay = format!("{}stay", tag_in(MOVING.1 + 1, 5000, 0));
    q(&mut src, &format!("RING.CREATE {small} COMPAT ketama"));
    q(&mut src, &format!("RING.ADD {small} WEIGHT 2 a:1 b:1"));
    q(&mut src, &format!("RING.ADD {small} c:1"));
    q(&mut src, &format!("RING.ASSIGN {small} 0 99 c:1"));
    q(&mut src, &format!("RING.CREATE {wide} VNODES 1"));
    for chunk in 0..10 {
        let names: Vec<String> = (chunk * 1000..(chunk + 1) * 1000)
            .map(|i| format!("n{i}"))
            .collect();
        q(&mut src, &format!("RING.ADD {wide} {}", names.join(" ")));
    }
    let mut assign = redis::pipe();
    for range in 0..8192u32 {
        assign
            .cmd("RING.ASSIGN")
            .arg(&wide)
            .arg(range * 2)
            .arg(range * 2 + 1)
            .arg(format!("n{}", (range * 7919) % 10000))
            .ignore();
    }
    assign.query::<()>(&mut src).expect("RING.ASSIGN");
    assert_eq!(
        array(&q(&mut src, &format!("RING.SLOTS {wide}"))).len(),
        8192
    );
    q(&mut src, &format!("RING.CREATE {dense} VNODES 160"));
    for chunk in 0..dense_nodes.div_ceil(1000) {
        let names: Vec<String> = (chunk * 1000..((chunk + 1) * 1000).min(dense_nodes))
            .map(|i| format!("10.0.{}.{}:6379", i / 250, i % 250))
            .collect();
        q(&mut src, &format!("RING.ADD {dense} {}", names.join(" ")));
    }
    assert_eq!(
        int(field(&q(&mut src, &format!("RING.INFO {dense}")), "points")),
        i64::from(dense_nodes) * 160
    );
    q(&mut src, &format!("RING.ADD {written} w:start"));
    q(&mut src, &format!("RING.ADD {stay} x y z"));
    // Plain keys beside them, with and without a TTL.
    for i in 0..200 {
        let tag = &tags[i % 4];
        q(&mut src, &format!("SET {tag}k{i} v{i}"));
        q(&mut src, &format!("SET {tag}t{i} v{i} PX 600000"));
    }
    let moving = [&small, &wide, &dense];
    let before: Vec<_> = moving.iter().map(|k| fingerprint(&mut src, k)).collect();
    let stay_before = fingerprint(&mut src, &stay);

    // The target's own limits are far below these rings: the import must not be refused.
    q(&mut tgt, "CONFIG SET ringslot.max-points 1000");
    q(&mut tgt, "CONFIG SET ringslot.max-nodes 50");
    q(&mut tgt, "CONFIG SET slowlog-log-slower-than 0");
    q(&mut tgt, "CONFIG SET slowlog-max-len 100000");
    q(&mut tgt, "SLOWLOG RESET");

    // A writer changes one ring as fast as it can while the slots move (it adds node w:i,
    // then deletes the node before, so that the ring stays below the target's limits) and
    // creates small rings (RING.ADD of a missing key, replicated as RING.CREATE + RING.ADD),
    // following MOVED as a cluster client does. The ring must end as the acknowledged writes
    // left it; a cross-slot propagation would fail the migration.
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let done = Arc::clone(&done);
        let mut con = cluster.nodes[source].client();
        let (target_port, target_address) =
            (cluster.nodes[target].port, cluster.nodes[target].address());
        let (written, tag) = (written.clone(), tags[3].clone());
        std::thread::spawn(move || {
            let (mut writes, mut moved, mut created) = (0u64, 0, Vec::new());
            let mut last = "w:start".to_string();
            loop {
                let finished = done.load(Ordering::Relaxed);
                let node = format!("w:{writes}");
                let ops: [(&[u8], &String); 2] = [(b"RING.ADD", &node), (b"RING.DEL", &last)];
                for (op, name) in ops {
                    loop {
                        match call(&mut con, &[op, written.as_bytes(), name.as_bytes()]) {
                            Ok(v) => {
                                assert_eq!(v, Value::Int(1), "{op:?} {name}");
                                break;
                            }
                            Err(e) if e.starts_with("MOVED") && e.ends_with(&target_address) => {
                                moved += 1;
                                con =
                                    redis::Client::open(format!("redis://127.0.0.1:{target_port}"))
                                        .and_then(|c| c.get_connection())
                                        .expect("the target");
                            }
                            Err(e) => panic!("{op:?} {written} {name}: {e}"),
                        }
                    }
                }
                last = node;
                writes += 2;
                if writes % 50 == 0 {
                    let key = format!("{tag}created{writes}");
                    if call(&mut con, &[b"RING.ADD", key.as_bytes(), b"c1", b"c2"]).is_ok() {
                        created.push(key);
                    }
                }
                if finished {
                    return (writes, last, moved, created);
                }
            }
        })
    };
    let job = cluster
        .migrate_slots(source, &[MOVING], target)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("CLUSTER MIGRATESLOTS: {e}"));
    // The module's commands keep answering on the source while the slots move (or MOVED
    // once they are gone).
    match call(&mut src, &[b"RING.GET", small.as_bytes(), b"user:1"]) {
        Ok(owner) => assert_eq!(Some(&owner), array(&before[0].3).get(1)),
        Err(e) => assert!(e.starts_with("MOVED"), "{e}"),
    }
    let job = cluster
        .wait_slot_migration(source, &job, MIGRATION_LIMIT)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(job["state"], "success", "{job:?}");
    assert_eq!(job["slot_ranges"], format!("{}-{}", MOVING.0, MOVING.1));
    cluster.converge().unwrap_or_else(|e| panic!("{e}"));
    done.store(true, Ordering::Relaxed);
    // The target's SLOWLOG before this test reads anything there (its own reads would show).
    let log = array(&q(&mut tgt, "SLOWLOG GET -1"));
    let (writes, last, moved, created) = writer.join().expect("the writer");
    eprintln!("{writes} writes acknowledged ({moved} MOVED) while the slots moved");

    // Every ring arrived whole, byte for byte, on the target, which now serves the slots.
    assert_eq!(owner_of(&cluster, MOVING.0), target);
    for (key, was) in moving.iter().zip(&before) {
        let now = fingerprint(&mut tgt, key);
        assert_eq!(now.1, was.1, "{key}: DEBUG DIGEST-VALUE on the target");
        assert_eq!(now.2, was.2, "{key}: RING.INFO on the target");
        assert_eq!(now.3, was.3, "{key}: RING.MGET on the target");
        assert!(now.0 == was.0, "{key}: DUMP on the target");
    }
    for i in 0..200 {
        let tag = &tags[i % 4];
        assert_eq!(
            text(&q(&mut tgt, &format!("GET {tag}k{i}"))),
            format!("v{i}")
        );
        assert_eq!(int(&q(&mut tgt, &format!("PTTL {tag}k{i}"))), -1);
        let ttl = int(&q(&mut tgt, &format!("PTTL {tag}t{i}")));
        assert!(ttl > 0 && ttl <= 600_000, "{tag}t{i}: PTTL {ttl}");
    }
    let nodes: BTreeSet<Vec<u8>> = node_rows(&mut tgt, written.as_bytes())
        .into_iter()
        .map(|n| n.0)
        .collect();
    assert_eq!(
        nodes,
        BTreeSet::from([last.into_bytes()]),
        "the ring as the last acknowledged write left it"
    );
    for key in created {
        assert_eq!(node_rows(&mut tgt, key.as_bytes()).len(), 2, "{key}");
    }
    // The source kept nothing of the moved slots and left the other ring alone.
    for slot in MOVING.0..=MOVING.1 {
        assert_eq!(
            int(&q(&mut src, &format!("CLUSTER COUNTKEYSINSLOT {slot}"))),
            0
        );
    }
    assert_eq!(fingerprint(&mut src, &stay), stay_before);

    // The replay, as the target's SLOWLOG shows it: the rings' AOF-rewrite commands, the
    // 8192 slot ranges of the wide ring one RING.ASSIGN each.
    let replayed: Vec<(i64, String)> = log
        .iter()
        .filter_map(|entry| {
            let e = array(entry);
            let args = array(e.get(3)?);
            let name = text(args.first()?).to_uppercase();
            let key = args.get(1).map(text).unwrap_or_default();
            (name.starts_with("RING.") && moving.iter().any(|k| **k == key)).then(|| {
                (
                    int(&e[2]),
                    format!("{name} {key} ({} arguments)", args.len()),
                )
            })
        })
        .collect();
    let assigns = replayed
        .iter()
        .filter(|(_, c)| c.starts_with(&format!("RING.ASSIGN {wide}")))
        .count();
    assert_eq!(assigns, 8192, "one RING.ASSIGN per slot range of {wide}");
    let longest = replayed.iter().max().expect("replayed commands");
    eprintln!(
        "the longest replayed command on the target: {} µs, {}",
        longest.0, longest.1
    );
}

#[test]
fn walks_and_writes_while_an_atomic_slot_migration_runs() {
    let Some(cluster) = atomic_cluster() else {
        return;
    };
    let source = owner_of(&cluster, MOVING.0);
    let target = (source + 1) % 3;
    let (mut src, mut tgt) = (
        cluster.nodes[source].client(),
        cluster.nodes[target].client(),
    );
    let ring = format!("{}ring", tag_in(MOVING.0, MOVING.1, 0));
    let tag = tag_in(MOVING.0, MOVING.1, 1);
    let theirs = format!("{}theirs", tag_in(6000, 10000, 0));
    assert_eq!(owner_of(&cluster, key_slot(theirs.as_bytes())), target);
    q(&mut src, &format!("RING.ADD {ring} a b c"));
    q(&mut tgt, &format!("RING.ADD {theirs} a b c"));
    // Keys enough for a walk to pause after its first slice, on both nodes; and big values
    // in the moving slots, which the source's snapshot sends one per second
    // (rdb-key-save-delay), so that the migration runs for minutes unless cancelled.
    fill(&mut src, &tag_in(MOVING.1 + 1, 5000, 0), 3000);
    fill(&mut tgt, &tag_in(6000, 10000, 1), 3000);
    let value = "x".repeat(64 * 1024);
    for i in 0..300 {
        q(&mut src, &format!("SET {tag}big{i} {value}"));
    }
    let walk_before = paused_walk(&cluster.nodes[source], &ring);
    let keys_before = int(&q(&mut src, "DBSIZE"));

    q(&mut src, "CONFIG SET rdb-key-save-delay 1000000");
    let job = cluster
        .migrate_slots(source, &[MOVING], target)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("CLUSTER MIGRATESLOTS: {e}"));
    // The target holds keys of the moving slots that it does not own yet.
    let count_moving = |con: &mut Connection| -> i64 {
        (MOVING.0..=MOVING.1)
            .map(|s| int(&q(con, &format!("CLUSTER COUNTKEYSINSLOT {s}"))))
            .sum()
    };
    wait_for(&mut tgt, "the target holds imported keys", |c| {
        count_moving(c) > 0
    });
    let running = |server: &Server| {
        slot_migrations(server)
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .any(|j| !migration_finished(j))
    };
    assert!(running(&cluster.nodes[source]) && running(&cluster.nodes[target]));

    // The source serves its rings as before, and writes to them are applied there; every
    // write command the module propagates names one key, so none fails the migration
    // (Valkey fails every export on a cross-slot propagation).
    assert_eq!(
        q(&mut src, &format!("RING.GET {ring} user:1")),
        q(&mut src, &format!("RING.GET {ring} user:1"))
    );
    assert_eq!(int(&q(&mut src, &format!("RING.ADD {ring} d"))), 1);
    q(&mut src, &format!("RING.CREATE {tag}created COMPAT ketama"));
    q(&mut src, &format!("RING.ADD {tag}implicit a b"));
    q(&mut src, &format!("RING.ADD {tag}gone a b"));
    q(&mut src, &format!("RING.DEL {tag}gone a"));
    q(&mut src, &format!("RING.ASSIGN {ring} 0 10 a"));
    q(&mut src, &format!("RING.UNASSIGN {ring} 11 12"));
    q(&mut src, &format!("RING.MIRROR {tag}mirror"));
    let jobs = slot_migrations(&cluster.nodes[source]).unwrap_or_else(|e| panic!("{e}"));
    let now = jobs
        .iter()
        .find(|j| j.get("name") == Some(&job))
        .expect("the job");
    assert!(
        !migration_finished(now),
        "the writes failed the migration: {now:?}"
    );
    assert_eq!(now.get("message").map(String::as_str), Some(""), "{now:?}");

    // Walks that would mix keys of two owners are refused with the reason, on both sides.
    for (con, key) in [(&mut src, &ring), (&mut tgt, &theirs)] {
        let refused = e(con, &format!("RING.MOVES {key} ADD probe KEYS *"));
        assert!(
            refused.starts_with("ERR an atomic slot migration (")
                && refused.contains(&format!("of slots {}-{}", MOVING.0, MOVING.1)),
            "{refused}"
        );
    }
    // On the target, the imported ring is not served yet (the server's MOVED), and a walk of
    // the slots is refused as slots of another node.
    let moved = e(&mut tgt, &format!("RING.GET {ring} user:1"));
    assert!(moved.starts_with("MOVED"), "{moved}");
    let elsewhere = e(
        &mut tgt,
        &format!("RING.MOVES {theirs} ADD probe SLOTS 0 100"),
    );
    assert!(elsewhere.contains("is served by"), "{elsewhere}");

    // Cancelled, the migration leaves the source as it was (with its new writes) and the
    // target without the imported keys; the walk paused before it then finishes right.
    q(&mut src, "CLUSTER CANCELSLOTMIGRATIONS");
    let cancelled = cluster
        .wait_slot_migration(source, &job, MIGRATION_LIMIT)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cancelled["state"], "cancelled", "{cancelled:?}");
    wait_for(&mut tgt, "the target dropped the imported keys", |c| {
        count_moving(c) == 0 && !running(&cluster.nodes[target])
    });
    q(&mut src, "CONFIG SET rdb-key-save-delay 0");
    q(&mut src, "CONFIG SET ringslot.debug-pause-background 0");
    let walked = walk_before.join().expect("the walk").expect("RING.MOVES");
    let members = int(field(&walked, "members"));
    let keys_after = int(&q(&mut src, "DBSIZE"));
    // The walk may leave out the ring it evaluates, and may or may not see keys created
    // while it ran.
    assert!(
        (keys_before - 1..=keys_after).contains(&members),
        "{members} members, {keys_before}..{keys_after} keys"
    );
    let ring_before = fingerprint(&mut src, &ring);

    // Walks paused on both sides, then the slots move for real: both walks fail, since the
    // slots of their node changed under them.
    let walk_source = paused_walk(&cluster.nodes[source], &ring);
    let walk_target = paused_walk(&cluster.nodes[target], &theirs);
    let job = cluster
        .migrate_slots(source, &[MOVING], target)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("CLUSTER MIGRATESLOTS: {e}"));
    let job = cluster
        .wait_slot_migration(source, &job, MIGRATION_LIMIT)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(job["state"], "success", "{job:?}");
    cluster.converge().unwrap_or_else(|e| panic!("{e}"));
    q(&mut src, "CONFIG SET ringslot.debug-pause-background 0");
    q(&mut tgt, "CONFIG SET ringslot.debug-pause-background 0");
    for walk in [walk_source, walk_target] {
        let refused = walk.join().expect("the walk").expect_err("a refused walk");
        assert!(
            refused.starts_with("ERR the hash slots of this node changed"),
            "{refused}"
        );
    }
    // The ring arrived with the writes made during the cancelled migration.
    assert_eq!(fingerprint(&mut tgt, &ring), ring_before);
    assert_eq!(
        node_rows(&mut tgt, format!("{tag}implicit").as_bytes()).len(),
        2
    );
    assert_eq!(
        node_rows(&mut tgt, format!("{tag}gone").as_bytes()).len(),
        1
    );
}

#[test]
fn the_module_declares_atomic_slot_migration_on_valkey_only() {
    // INFO modules lists each module's options: Valkey shows the declaration, and a Redis
    // server (which has no such option) never gets the bit.
    let server = Server::start();
    let mut con = server.client();
    let info = text(&q(&mut con, "INFO modules"));
    let line = info
        .lines()
        .find(|l| l.starts_with("module:name=ringslot,"))
        .unwrap_or_else(|| panic!("no ringslot in INFO modules:\n{info}"));
    let valkey = text(&q(&mut con, "INFO server")).contains("server_name:valkey");
    assert_eq!(
        line.contains("handle-atomic-slot-migration"),
        valkey && has_atomic_slot_migration(&server),
        "{line}"
    );
    assert!(!valkey || line.contains("handle-io-errors"), "{line}");
}
