//! What the live tests of `apply` share: data written to a cluster's masters, its keyspace read
//! back key by key, `redis-cli --cluster check`, and a client as an application runs one.

use super::Noise;
use ringslot_engine::key_slot;
use ringslot_harness::cluster::{cluster_nodes, owners, parse_cluster_nodes, redis_cli, Cluster};
use ringslot_harness::prelude::*;
use ringslot_harness::redis;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The owner of every slot, from node 0's `CLUSTER NODES`.
pub fn slot_owners(cluster: &Cluster) -> Vec<Option<String>> {
    owners(&parse_cluster_nodes(&cluster_nodes(&cluster.nodes[0]).unwrap()).unwrap())
}

/// Writes `commands` (each a command whose second argument is the key), pipelined to each
/// key's owner.
pub fn write(cluster: &Cluster, commands: &[Vec<Vec<u8>>]) {
    let owner = slot_owners(cluster);
    let mut by_owner: HashMap<String, redis::Pipeline> = HashMap::new();
    for c in commands {
        let o = owner[usize::from(key_slot(&c[1]))].clone().unwrap();
        let p = by_owner.entry(o).or_default();
        let mut cmd = redis::cmd(std::str::from_utf8(&c[0]).unwrap());
        for a in &c[1..] {
            cmd.arg(a.as_slice());
        }
        p.add_command(cmd).ignore();
    }
    for s in &cluster.nodes {
        if let Some(p) = by_owner.get(&s.address()) {
            p.query::<()>(&mut s.client()).unwrap();
        }
    }
}

pub fn c(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

/// Skewed data: `small` keys of 16 to 200 bytes in every type, some with a TTL (an hour:
/// nothing expires during a test); and hot tags of `tags` (keys, value bytes) each.
pub fn fill(cluster: &Cluster, small: usize, tags: &[(usize, usize)]) {
    let mut noise = Noise(0x2545_f491_4f6c_dd1d);
    let mut commands = Vec::new();
    for i in 0..small {
        let key = format!("k:{i}").into_bytes();
        let n = 16 + (noise.next_u64() % 185) as usize;
        let v = noise.bytes(n);
        commands.push(match i % 6 {
            0 | 1 => c(&[b"SET", &key, &v]),
            2 => c(&[b"RPUSH", &key, &v, b"x"]),
            3 => c(&[b"HSET", &key, b"f", &v]),
            4 => c(&[b"ZADD", &key, b"1", &v]),
            _ => c(&[b"SADD", &key, &v]),
        });
        if i % 5 == 0 {
            commands.push(c(&[b"PEXPIRE", &key, b"3600000"]));
        }
    }
    for (t, &(keys, bytes)) in tags.iter().enumerate() {
        for i in 0..keys {
            let key = format!("{{hot{t}}}:{i}").into_bytes();
            let v = noise.bytes(bytes);
            commands.push(if i % 3 == 2 {
                c(&[b"XADD", &key, b"1-1", b"payload", &v])
            } else {
                c(&[b"SET", &key, &v])
            });
        }
    }
    write(cluster, &commands);
}

/// Each key's master, its `DUMP` payload, and for a hash table its `DEBUG DIGEST-VALUE` (a
/// hash table's DUMP follows its iteration order, which a RESTORE may change; the digest is
/// order-free).
pub type Keyspace = BTreeMap<Vec<u8>, (String, Vec<u8>, Option<String>)>;

/// Every key of every master (data keys: not the client's `w:` keys), as [`Keyspace`]; a key
/// found on two masters fails the test.
pub fn keyspace(cluster: &Cluster) -> Keyspace {
    let mut all = BTreeMap::new();
    let owner = slot_owners(cluster);
    for s in &cluster.nodes {
        let mut con = s.client();
        let role = text(&q(&mut con, "ROLE").as_sequence().unwrap()[0].clone());
        if role != "master" {
            continue;
        }
        let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
        keys.retain(|k| !k.starts_with(b"w:"));
        // Pipelined, 1000 keys at a time: DUMP and OBJECT ENCODING of each.
        let mut read = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(1000) {
            let mut pipe = redis::pipe();
            for k in chunk {
                pipe.cmd("DUMP").arg(k.as_slice());
                pipe.cmd("OBJECT").arg("ENCODING").arg(k.as_slice());
            }
            let replies: Vec<redis::Value> = pipe.query(&mut con).unwrap();
            for (k, pair) in chunk.iter().zip(replies.chunks(2)) {
                read.push((k.clone(), bytes(&pair[0]), text(&pair[1])));
            }
        }
        for (k, dump, encoding) in read {
            let digest = (encoding == "hashtable").then(|| {
                let digest: Vec<String> = redis::cmd("DEBUG")
                    .arg("DIGEST-VALUE")
                    .arg(k.as_slice())
                    .query(&mut con)
                    .unwrap();
                digest.concat()
            });
            // A key is where its slot's owner is.
            assert_eq!(
                owner[usize::from(key_slot(&k))].as_deref(),
                Some(s.address().as_str()),
                "{:?} on {} outside its slot's owner",
                String::from_utf8_lossy(&k),
                s.address()
            );
            let before = all.insert(k.clone(), (s.address(), dump, digest));
            assert!(
                before.is_none(),
                "{:?} on two masters",
                String::from_utf8_lossy(&k)
            );
        }
    }
    all
}

/// Asserts that two keyspaces hold the same keys with the same values (wherever they are): the
/// same `DUMP` payloads, or for hash tables the same digests. Names the first difference.
pub fn assert_same(a: &Keyspace, b: &Keyspace, what: &str) {
    assert_eq!(
        a.len(),
        b.len(),
        "{what}: {} keys against {}",
        a.len(),
        b.len()
    );
    for (k, (_, dump, digest)) in a {
        let name = String::from_utf8_lossy(k);
        let other = b
            .get(k)
            .unwrap_or_else(|| panic!("{what}: {name:?} missing"));
        let same = match (digest, &other.2) {
            (Some(x), Some(y)) => x == y,
            _ => other.1 == *dump,
        };
        assert!(same, "{what}: {name:?} differs");
    }
}

/// `redis-cli --cluster check` of node 0, as it ran.
pub fn cluster_check(cluster: &Cluster) -> ringslot_harness::cluster::CliRun {
    let mut args = cluster.nodes[0].cli_args();
    args.extend([
        "--cluster".into(),
        "check".into(),
        cluster.nodes[0].address(),
    ]);
    redis_cli(&args, Duration::from_secs(60)).unwrap()
}

/// `redis-cli --cluster check` of node 0: exit 0, no open slot, every slot covered.
pub fn check_clean(cluster: &Cluster) {
    let run = cluster_check(cluster);
    assert!(
        run.success && !run.stdout.contains("[WARNING]") && !run.stdout.contains("[ERR]"),
        "redis-cli --cluster check:\n{}\n{}",
        run.stdout,
        run.stderr
    );
}

/// The slot owners the plan ends with.
pub fn planned_owners(plan: &serde_json::Value) -> Vec<Option<String>> {
    let mut o = slot_owners_from_plan(plan);
    for m in plan["prediction"]["by_weight"]["moves"].as_array().unwrap() {
        o[m["slot"].as_u64().unwrap() as usize] = Some(m["to"].as_str().unwrap().to_string());
    }
    o
}

pub fn slot_owners_from_plan(plan: &serde_json::Value) -> Vec<Option<String>> {
    let mut o = vec![None; 16384];
    for r in plan["prediction"]["by_weight"]["start"].as_array().unwrap() {
        for s in r["first"].as_u64().unwrap()..=r["last"].as_u64().unwrap() {
            o[s as usize] = r["owner"].as_str().map(str::to_string);
        }
    }
    o
}

pub use ringslot_harness::app::AppClient;

/// Writes `w:<i>` (and a pair of keys under one tag, by MSET, for TRYAGAIN) and reads them
/// back until `stop`; returns the client and the acknowledged writes.
pub fn traffic(cluster: &Cluster, stop: Arc<AtomicBool>) -> (AppClient, Vec<(String, String)>) {
    let mut client = AppClient::new(cluster);
    let mut acked = Vec::new();
    let mut i = 0u64;
    while !stop.load(Ordering::SeqCst) || i < 200 {
        let key = format!("w:{i}");
        let value = format!("v{i}");
        let set = redis::cmd("SET").arg(&key).arg(&value).clone();
        if client.exec(&set, key_slot(key.as_bytes())).is_some() {
            acked.push((key.clone(), value.clone()));
        }
        let tag = format!("w:{{t{}}}", i % 64);
        let (a, b) = (format!("{tag}:a"), format!("{tag}:b"));
        let mset = redis::cmd("MSET")
            .arg(&a)
            .arg(&value)
            .arg(&b)
            .arg(&value)
            .clone();
        if client.exec(&mset, key_slot(a.as_bytes())).is_some() {
            acked.push((a.clone(), value.clone()));
            acked.push((b, value.clone()));
        }
        let get = redis::cmd("GET").arg(&key).clone();
        client.exec(&get, key_slot(key.as_bytes()));
        i += 1;
    }
    (client, acked)
}

/// The process id of a child of process `parent` (a server's fork: its BGSAVE), read from
/// `/proc`; `None` when it has none.
pub fn fork_child_of(parent: u32) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.find_map(|entry| {
        let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // "pid (comm) state ppid ...": the comm may hold spaces, so read after its ')'.
        let ppid: u32 = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        (ppid == parent).then_some(pid)
    })
}

/// Every master's `MEMORY USAGE` of its data keys (not the client's `w:` keys; its default
/// of 5 samples a collection), by address.
pub fn memory_by_master(cluster: &Cluster) -> BTreeMap<String, f64> {
    let mut by = BTreeMap::new();
    for s in &cluster.nodes {
        let mut con = s.client();
        if !text(&q(&mut con, "INFO replication")).contains("role:master") {
            continue;
        }
        let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
        keys.retain(|k| !k.starts_with(b"w:"));
        let mut total = 0.0;
        for chunk in keys.chunks(1000) {
            let mut pipe = redis::pipe();
            for k in chunk {
                pipe.cmd("MEMORY").arg("USAGE").arg(k.as_slice());
            }
            let sizes: Vec<Option<u64>> = pipe.query(&mut con).unwrap();
            total += sizes.into_iter().flatten().sum::<u64>() as f64;
        }
        by.insert(s.address(), total);
    }
    by
}

/// Runs `ringslot` with `args` once for each count of `after`, stopped by the test hook right
/// after that many writes (as a kill would leave the cluster); each must end so (status 86).
pub fn stopped_after_writes(args: &[&str], after: impl IntoIterator<Item = u64>) {
    for n in after {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringslot"))
            .args(args)
            .env("RINGSLOT_APPLY_EXIT_AFTER_WRITES", n.to_string())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(86),
            "stopped after {n} writes:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A `BGSAVE` of a server slowed to a crawl (`rdb-key-save-delay`, 1 s a key): its fork holds
/// an atomic slot migration of that master before its snapshot. [`HeldSave::release`] lets it
/// go; dropped unreleased (a test that failed), it kills the fork too, so that no save
/// outlives the test (the server's own stop does not end its fork).
pub struct HeldSave {
    pid: u32,
    released: bool,
}

/// Starts a [`HeldSave`] on `server`.
pub fn hold_behind_bgsave(server: &Server) -> HeldSave {
    let mut con = server.client();
    q(&mut con, "CONFIG SET stop-writes-on-bgsave-error no");
    q(&mut con, "CONFIG SET rdb-key-save-delay 1000000");
    q(&mut con, "BGSAVE");
    HeldSave {
        pid: server.pid(),
        released: false,
    }
}

impl HeldSave {
    /// Ends the save at once (its fork killed, the delay back to 0); whether a fork was there
    /// to kill.
    pub fn release(mut self, server: &Server) -> bool {
        // Once released, a fork the server starts later (a snapshot of its own) is not ours.
        self.released = true;
        q(&mut server.client(), "CONFIG SET rdb-key-save-delay 0");
        self.kill_fork()
    }

    fn kill_fork(&self) -> bool {
        fork_child_of(self.pid).is_some_and(|child| {
            std::process::Command::new("kill")
                .args(["-KILL", &child.to_string()])
                .status()
                .is_ok_and(|s| s.success())
        })
    }
}

impl Drop for HeldSave {
    fn drop(&mut self) {
        if !self.released {
            self.kill_fork();
        }
    }
}

/// A field of `INFO` on `server`, as a number (0 where absent).
pub fn info(server: &Server, section: &str, name: &str) -> f64 {
    let text = text(&q(&mut server.client(), &format!("INFO {section}")));
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// `CONFIG SET maxmemory <bytes>` and `maxmemory-policy <policy>` on `servers`.
pub fn set_limit(servers: &[&Server], bytes: u64, policy: &str) {
    for s in servers {
        q(&mut s.client(), &format!("CONFIG SET maxmemory {bytes}"));
        q(
            &mut s.client(),
            &format!("CONFIG SET maxmemory-policy {policy}"),
        );
    }
}

/// Waits until each replica of `cluster` has acknowledged its master's replication offset
/// (the client stopped), then asserts that it holds what its master holds (`DEBUG DIGEST`).
pub fn assert_replicas_equal(cluster: &Cluster) {
    for r in &cluster.nodes {
        let replication = text(&q(&mut r.client(), "INFO replication"));
        if !replication.contains("role:slave") {
            continue;
        }
        let field = |t: &str, name: &str| -> String {
            t.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .unwrap_or("")
                .trim()
                .to_string()
        };
        let (host, port) = (
            field(&replication, "master_host"),
            field(&replication, "master_port"),
        );
        let master = cluster
            .nodes
            .iter()
            .find(|s| s.address() == format!("{host}:{port}"))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let theirs = info(master, "replication", "master_repl_offset");
            let ours = info(r, "replication", "slave_repl_offset");
            if ours >= theirs {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "replica {} stays behind its master {}",
                r.address(),
                master.address()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(
            text(&q(&mut r.client(), "DEBUG DIGEST")),
            text(&q(&mut master.client(), "DEBUG DIGEST")),
            "replica {} differs from its master {}",
            r.address(),
            master.address()
        );
    }
}
