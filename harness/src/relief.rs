//! A cluster near full, as operators bring it to a rebalance, for the relief job's tests and
//! its benchmark (`make bench-relief`): three masters with a replica each holding small keys
//! under hash tags and a few big strings, each master and its replica filled to a share of
//! its `maxmemory` under a policy, and a fourth master with a replica joined empty; and a
//! client that reads, overwrites and adds keys throughout.

use crate::app::AppClient;
use crate::cluster::{cluster_nodes, owners, parse_cluster_nodes, Cluster};
use crate::programs::Noise;
use crate::server::{Error, Server};
use ringslot_engine::key_slot;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The hash tags the small keys are spread over.
pub const TAGS: usize = 2000;

/// A cluster near full (see the module docs).
pub struct FullCluster {
    pub cluster: Cluster,
    /// The small keys written (`{t<i % TAGS>}:<i>`, every fifth a hash).
    pub keys: usize,
    /// The joining master's index, once joined.
    pub joining: Option<usize>,
    /// Each master's `maxmemory`, by address, once set.
    pub limits: BTreeMap<String, u64>,
}

/// Runs `line` (space-separated) on `server`.
fn run(server: &Server, line: &str) -> Result<(), Error> {
    let mut con = server.try_client().map_err(|e| Error(e.to_string()))?;
    let mut cmd = redis::cmd("");
    let mut words = line.split_whitespace();
    if let Some(first) = words.next() {
        cmd = redis::cmd(first);
    }
    for w in words {
        cmd.arg(w);
    }
    cmd.query::<redis::Value>(&mut con)
        .map(|_| ())
        .map_err(|e| Error(format!("{}: {line}: {e}", server.address())))
}

/// A numeric field of `INFO section` on `server` (0 where absent).
pub fn info_number(server: &Server, section: &str, name: &str) -> f64 {
    let text: String = server
        .try_client()
        .ok()
        .and_then(|mut c| redis::cmd("INFO").arg(section).query(&mut c).ok())
        .unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

impl FullCluster {
    /// Three masters (made by `builder`, without the module) with a replica each, their
    /// replication backlog at 1 MiB (Redis's default; Valkey's 10 MiB would be half of a
    /// small test node), holding `keys` keys of 64 B to 1.5 KiB under [`TAGS`] hash tags
    /// (every fifth a hash of four fields) and a big string on each master of `big` bytes
    /// (each the next 512 KiB larger: 0.75, 1.25, 1.75 MiB from 768 KiB).
    pub fn start(
        keys: usize,
        big: usize,
        builder: impl Fn() -> crate::ServerBuilder,
    ) -> Result<FullCluster, Error> {
        let mut cluster = Cluster::start(3, &builder)?;
        for m in 0..3 {
            cluster.add_replica(m, &builder)?;
        }
        for s in &cluster.nodes {
            run(s, "CONFIG SET repl-backlog-size 1048576")?;
        }
        let full = FullCluster {
            cluster,
            keys,
            joining: None,
            limits: BTreeMap::new(),
        };
        full.fill(big)?;
        Ok(full)
    }

    /// Writes the data (see [`FullCluster::start`]), pipelined to each key's owner.
    fn fill(&self, big: usize) -> Result<(), Error> {
        let table = cluster_nodes(&self.cluster.nodes[0]).and_then(|t| parse_cluster_nodes(&t))?;
        let owner = owners(&table);
        let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
        let mut pipes: BTreeMap<String, redis::Pipeline> = BTreeMap::new();
        let mut queued = 0usize;
        let flush = |pipes: &mut BTreeMap<String, redis::Pipeline>| -> Result<(), Error> {
            for (address, pipe) in std::mem::take(pipes) {
                let server = self
                    .cluster
                    .nodes
                    .iter()
                    .find(|s| s.address() == address)
                    .ok_or_else(|| Error(format!("no node {address}")))?;
                let mut con = server.try_client().map_err(|e| Error(e.to_string()))?;
                pipe.query::<()>(&mut con)
                    .map_err(|e| Error(format!("{address}: {e}")))?;
            }
            Ok(())
        };
        for i in 0..self.keys {
            let key = format!("{{t{}}}:{i}", i % TAGS);
            let n = 64 + (noise.next_u64() % 1473) as usize;
            let v = noise.bytes(n);
            let at = owner
                .get(usize::from(key_slot(key.as_bytes())))
                .cloned()
                .flatten()
                .unwrap_or_default();
            let pipe = pipes.entry(at).or_default();
            if i % 5 == 4 {
                let quarter = v.get(..n / 4).unwrap_or(&v).to_vec();
                pipe.cmd("HSET").arg(&key);
                for field in ["a", "b", "c", "d"] {
                    pipe.arg(field).arg(quarter.as_slice());
                }
                pipe.ignore();
            } else {
                pipe.cmd("SET").arg(&key).arg(v).ignore();
            }
            queued += 1;
            if queued.is_multiple_of(5000) {
                flush(&mut pipes)?;
            }
        }
        flush(&mut pipes)?;
        for m in 0..3usize {
            let address = self.cluster.nodes[m].address();
            let key = (0..)
                .map(|i| format!("big:{i}"))
                .find(|k| {
                    owner
                        .get(usize::from(key_slot(k.as_bytes())))
                        .cloned()
                        .flatten()
                        == Some(address.clone())
                })
                .unwrap_or_default();
            let value = noise.bytes(big + m * 512 * 1024);
            let mut con = self.cluster.nodes[m]
                .try_client()
                .map_err(|e| Error(e.to_string()))?;
            redis::cmd("SET")
                .arg(&key)
                .arg(value)
                .query::<()>(&mut con)
                .map_err(|e| Error(format!("{address}: {e}")))?;
        }
        Ok(())
    }

    /// Fills each master and its replica to `fill` of its `maxmemory` (their `used_memory`
    /// over `fill`) under `policy`, then joins a fourth master and its replica (made by
    /// `builder`) with the largest of the three `maxmemory` ([`FullCluster::join`]).
    pub fn fill_up(
        &mut self,
        fill: f64,
        policy: &str,
        builder: impl Fn() -> crate::ServerBuilder,
    ) -> Result<(), Error> {
        let replica_of = |m: usize| 3 + m;
        for m in 0..3usize {
            let limit =
                (info_number(&self.cluster.nodes[m], "memory", "used_memory") / fill) as u64;
            for n in [m, replica_of(m)] {
                let s = &self.cluster.nodes[n];
                run(s, &format!("CONFIG SET maxmemory {limit}"))?;
                run(s, &format!("CONFIG SET maxmemory-policy {policy}"))?;
            }
            self.limits.insert(self.cluster.nodes[m].address(), limit);
        }
        let largest = self.limits.values().copied().max().unwrap_or(0);
        self.join(largest, policy, builder)
    }

    /// Joins a fourth master and its replica (made by `builder`, their backlog at 1 MiB) with
    /// `maxmemory` `limit` under `policy`, and waits for convergence.
    pub fn join(
        &mut self,
        limit: u64,
        policy: &str,
        builder: impl Fn() -> crate::ServerBuilder,
    ) -> Result<(), Error> {
        let joining = self.cluster.add_node(&builder)?;
        run(
            &self.cluster.nodes[joining],
            "CONFIG SET repl-backlog-size 1048576",
        )?;
        let replica = self.cluster.add_replica(joining, &builder)?;
        run(
            &self.cluster.nodes[replica],
            "CONFIG SET repl-backlog-size 1048576",
        )?;
        for n in [joining, replica] {
            let s = &self.cluster.nodes[n];
            run(s, &format!("CONFIG SET maxmemory {limit}"))?;
            run(s, &format!("CONFIG SET maxmemory-policy {policy}"))?;
        }
        self.limits
            .insert(self.cluster.nodes[joining].address(), limit);
        self.joining = Some(joining);
        self.cluster.converge()?;
        Ok(())
    }

    /// A hash of `fields` fields of 80 bytes at `key`, on its owner (pipelined).
    pub fn big_hash(&self, key: &str, fields: usize) -> Result<(), Error> {
        let table = cluster_nodes(&self.cluster.nodes[0]).and_then(|t| parse_cluster_nodes(&t))?;
        let owner = owners(&table)
            .get(usize::from(key_slot(key.as_bytes())))
            .cloned()
            .flatten()
            .unwrap_or_default();
        let server = self
            .cluster
            .nodes
            .iter()
            .find(|s| s.address() == owner)
            .ok_or_else(|| Error(format!("no owner of {key}")))?;
        let mut con = server.try_client().map_err(|e| Error(e.to_string()))?;
        for chunk in (0..fields).collect::<Vec<_>>().chunks(10_000) {
            let mut pipe = redis::pipe();
            for i in chunk {
                pipe.cmd("HSET")
                    .arg(key)
                    .arg(format!("field:{i}"))
                    .arg(format!("{:x<80}", format!("value-{i}-")))
                    .ignore();
            }
            pipe.query::<()>(&mut con)
                .map_err(|e| Error(format!("{owner}: {e}")))?;
        }
        Ok(())
    }

    /// Each master's `used_memory` over its `maxmemory`, by address.
    pub fn fills(&self) -> BTreeMap<String, f64> {
        self.limits
            .iter()
            .filter_map(|(address, limit)| {
                let s = self
                    .cluster
                    .nodes
                    .iter()
                    .find(|s| s.address() == *address)?;
                Some((
                    address.clone(),
                    info_number(s, "memory", "used_memory") / *limit as f64,
                ))
            })
            .collect()
    }

    /// `evicted_keys` added up over every node.
    pub fn evicted(&self) -> f64 {
        self.cluster
            .nodes
            .iter()
            .map(|s| info_number(s, "stats", "evicted_keys"))
            .sum()
    }

    /// Starts [`client`] on this cluster.
    pub fn client(&self, stop: Arc<AtomicBool>, done: Arc<AtomicBool>) -> JoinHandle<Seen> {
        client(&self.cluster, self.keys, stop, done)
    }
}

/// What the client saw: its acknowledged writes (each key's last value), its `OOM` answers
/// (before and after the run ended) and its other errors.
#[derive(Default, Debug)]
pub struct Seen {
    pub acked: BTreeMap<String, String>,
    pub oom_during: u64,
    pub oom_after: u64,
    pub other: Vec<String>,
}

/// A client as an application runs one, about 300 commands a second until `stop`: it adds a
/// small new key (`w:new:<i>`), overwrites one of 200 keys of its own (`w:fixed:<i>`), and
/// reads a string of the data (of `keys`), in turn; `done` says the run has ended (its `OOM`s
/// are counted apart from then).
pub fn client(
    cluster: &Cluster,
    keys: usize,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
) -> JoinHandle<Seen> {
    let mut app = AppClient::new(cluster);
    std::thread::spawn(move || {
        let mut seen = Seen::default();
        let mut i = 0u64;
        while !stop.load(Ordering::SeqCst) {
            let (new, fixed) = (format!("w:new:{i}"), format!("w:fixed:{}", i % 200));
            // A string of the data: every fifth key is a hash.
            let n = (i as usize * 5) % keys.max(1);
            let read = format!("{{t{}}}:{n}", n % TAGS);
            let value = format!("{i:016}");
            let commands = [
                (redis::cmd("SET").arg(&new).arg(&value).clone(), &new, true),
                (
                    redis::cmd("SET").arg(&fixed).arg(&value).clone(),
                    &fixed,
                    true,
                ),
                (redis::cmd("GET").arg(&read).clone(), &read, false),
            ];
            for (cmd, key, writes) in commands {
                let errors = app.errors.len();
                let answered = app.exec(&cmd, key_slot(key.as_bytes())).is_some();
                if answered && writes {
                    seen.acked.insert(key.clone(), value.clone());
                }
                for e in app.errors.drain(errors..) {
                    match (e.starts_with("OOM"), done.load(Ordering::SeqCst)) {
                        (true, false) => seen.oom_during += 1,
                        (true, true) => seen.oom_after += 1,
                        (false, _) => seen.other.push(e),
                    }
                }
            }
            i += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
        seen
    })
}
