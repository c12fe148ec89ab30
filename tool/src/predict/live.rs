//! The live cluster, read from a seed address with plain connections (a cluster client would
//! follow `MOVED` and count a node twice): its masters and slots (`CLUSTER NODES`), checked to
//! be stable; which masters have the module; the key count of every slot; and the longest
//! any of the run's commands held each master.

use crate::client::error_text;
use crate::link::{Access, Link};
use crate::reply::{array as items, field};
use anyhow::{anyhow, bail, Result};
use redis::{Connection, Value};
use ringslot_engine::cluster::{parse_cluster_nodes, ClusterNode};
use ringslot_engine::{key_slot, SLOT_COUNT};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Set by Ctrl-C: the reads stop at their next batch, and the run cleans up.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// One master of the cluster.
#[derive(Debug, Clone)]
pub struct Master {
    /// `ip:port`, as `CLUSTER NODES` announces it.
    pub address: String,
    /// The slots it serves, ascending.
    pub slots: Vec<u16>,
    /// How the tool reaches it.
    pub link: Link,
}

/// The checked topology: its masters in the order of their first slot, and the owner of
/// every slot.
#[derive(Debug, Clone)]
pub struct LiveCluster {
    pub masters: Vec<Master>,
    pub owner: Vec<Option<usize>>,
    /// The seed, when it is a master.
    pub seed: Option<usize>,
    /// The seed's `CLUSTER NODES` (its own line marked `myself`): what `redis-cli --cluster`
    /// loads when run against it.
    pub nodes: Vec<ClusterNode>,
}

impl LiveCluster {
    /// The masters without the module loaded.
    pub fn without_module(&self) -> Result<Vec<String>> {
        let mut missing = Vec::new();
        for m in &self.masters {
            if !has_module(m)? {
                missing.push(m.address.clone());
            }
        }
        Ok(missing)
    }
}

/// The longest any command of the run held each master, as the client timed it (a round trip:
/// an upper bound of the server's time), and the keys read from each.
#[derive(Debug, Default)]
pub struct Holds(Mutex<BTreeMap<String, (Duration, u64)>>);

impl Holds {
    /// Runs `f` (one command or pipeline to `at`) and notes how long it took.
    pub fn time<T>(&self, at: &str, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = f();
        let took = started.elapsed();
        if let Ok(mut map) = self.0.lock() {
            let e = map.entry(at.to_string()).or_default();
            e.0 = e.0.max(took);
        }
        out
    }

    /// Notes `keys` keys read from `at`.
    pub fn read(&self, at: &str, keys: u64) {
        if let Ok(mut map) = self.0.lock() {
            map.entry(at.to_string()).or_default().1 += keys;
        }
    }

    /// Per master: the longest hold in seconds, and the keys read.
    pub fn list(&self) -> Vec<(String, f64, u64)> {
        self.0.lock().map_or_else(
            |_| Vec::new(),
            |map| {
                map.iter()
                    .map(|(a, (d, k))| (a.clone(), d.as_secs_f64(), *k))
                    .collect()
            },
        )
    }
}

/// What another client sees of each master while the run works: a `PING` every 10 ms on a
/// connection of its own, the longest it waited for the answer (the server busy with the
/// run's commands, or with anything else), and the typical round trip.
pub struct Prober {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handles: Vec<std::thread::JoinHandle<(String, Vec<Duration>)>>,
}

/// One master's `PING`s while the run worked.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Probe {
    /// The longest round trip, seconds.
    pub longest: f64,
    /// The median round trip, seconds.
    pub median: f64,
    /// The 90th percentile, seconds.
    pub p90: f64,
    /// `PING`s answered.
    pub samples: usize,
}

impl Probe {
    /// The probe of `rtts` (round trips); `None` for none (the master refused `PING`, or could
    /// not be reached: not measured, never 0).
    pub fn of(rtts: &[Duration]) -> Option<Probe> {
        let mut v: Vec<f64> = rtts.iter().map(Duration::as_secs_f64).collect();
        v.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
            v.get(i).copied().unwrap_or(0.0)
        };
        (!v.is_empty()).then(|| Probe {
            longest: v.last().copied().unwrap_or(0.0),
            median: at(0.5),
            p90: at(0.9),
            samples: v.len(),
        })
    }
}

impl Prober {
    /// Starts probing `masters`.
    pub fn start(masters: &[Master]) -> Prober {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let handles = masters
            .iter()
            .map(|m| {
                let (m, stop) = (m.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut rtts = Vec::new();
                    let Ok(mut con) = m.link.connect() else {
                        return (m.address, rtts);
                    };
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let started = Instant::now();
                        if redis::cmd("PING").query::<()>(&mut con).is_err() {
                            break;
                        }
                        rtts.push(started.elapsed());
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    (m.address, rtts)
                })
            })
            .collect();
        Prober { stop, handles }
    }

    /// Stops probing; per master that answered `PING`, its probe (masters that did not are
    /// left out: not measured).
    pub fn finish(self) -> BTreeMap<String, Probe> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handles
            .into_iter()
            .filter_map(|h| h.join().ok())
            .filter_map(|(a, rtts)| Some((a, Probe::of(&rtts)?)))
            .collect()
    }
}

/// Each master's `PING` round trips, `count` of them `apart` (zero: back to back, as redis-cli
/// sends each command when the last is answered), one master after another. On a virtual
/// machine whose CPUs idle between round trips, waking them dominates: here back-to-back
/// `PING`s took 0.10 ms with the other core idle and 0.014 ms with it busy, and `PING`s 2 ms
/// apart 0.1 ms either way. A master that refuses `PING` or cannot be reached is left out.
pub fn ping_round_trips(
    masters: &[Master],
    count: usize,
    apart: Duration,
) -> BTreeMap<String, Probe> {
    let mut out = BTreeMap::new();
    for m in masters {
        let mut rtts = Vec::with_capacity(count);
        if let Ok(mut con) = m.link.connect() {
            for _ in 0..count {
                let started = Instant::now();
                if redis::cmd("PING").query::<()>(&mut con).is_err() {
                    break;
                }
                rtts.push(started.elapsed());
                if !apart.is_zero() {
                    std::thread::sleep(apart);
                }
            }
        }
        if let Some(p) = Probe::of(&rtts) {
            out.insert(m.address.clone(), p);
        }
    }
    out
}

/// `DUMP`'s calls and microseconds so far on each master (`INFO commandstats`), for the
/// server time of the prediction's own `DUMP`s; masters that refuse `INFO` are left out.
pub fn dump_stats(masters: &[Master]) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for m in masters {
        let Ok(mut con) = m.link.connect() else {
            continue;
        };
        let Ok(info) = redis::cmd("INFO")
            .arg("commandstats")
            .query::<String>(&mut con)
        else {
            continue;
        };
        let line = crate::reply::info_field(&info, "cmdstat_dump").unwrap_or_default();
        let field = |name: &str| {
            line.split(',')
                .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        out.insert(m.address.clone(), (field("calls"), field("usec")));
    }
    out
}

/// Keeps a reader at most `rate` keys a second (0: no limit), from its first key.
#[derive(Debug)]
pub struct Limiter {
    rate: u64,
    started: Instant,
    taken: u64,
}

impl Limiter {
    pub fn new(rate: u64) -> Limiter {
        Limiter {
            rate,
            started: Instant::now(),
            taken: 0,
        }
    }

    /// Counts `keys` more keys and sleeps until the rate allows them.
    pub fn take(&mut self, keys: u64) {
        self.taken += keys;
        if self.rate == 0 {
            return;
        }
        let due = Duration::from_secs_f64(self.taken as f64 / self.rate as f64);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
    }
}

/// Runs a command; an error names the node and the command and quotes the reply.
pub fn run(con: &mut Connection, at: &str, args: &[String]) -> Result<Value> {
    let parts: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    crate::client::cmd(&parts).query::<Value>(con).map_err(|e| {
        let line: Vec<&str> = args.iter().map(String::as_str).take(8).collect();
        anyhow!("{at}: `{}` failed: {}", line.join(" "), error_text(&e))
    })
}

pub fn s(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// `CLUSTER NODES` of the node at `link`, parsed.
pub fn nodes_of(link: &Link) -> Result<Vec<ClusterNode>> {
    let mut con = link.connect()?;
    let at = &link.address;
    let text = crate::reply::text(&run(&mut con, at, &s(&["CLUSTER", "NODES"]))?)
        .map_err(|e| anyhow!("{at}: CLUSTER NODES: {e}"))?;
    parse_cluster_nodes(&text).map_err(|e| anyhow!("{at}: {e}"))
}

/// Every slot `node` serves, ascending.
pub fn slots_of(node: &ClusterNode) -> Vec<u16> {
    node.slots.iter().flat_map(|&(a, b)| a..=b).collect()
}

/// The first slot `node` is migrating or importing, if any.
pub fn first_open(node: &ClusterNode) -> Option<u16> {
    node.migrating
        .iter()
        .chain(&node.importing)
        .map(|(slot, _)| *slot)
        .min()
}

/// Reads and checks the topology from the seed (see the module docs): refused while a node is
/// failing or in handshake, a slot is migrating or importing, or the nodes disagree on the
/// masters and the slot table.
pub fn read_topology(access: &Access) -> Result<LiveCluster> {
    let nodes = nodes_of(&access.seed())?;
    if let Some(why) = refusal(&nodes, &[]) {
        bail!("{why}");
    }
    // Over TLS, a node is reached on its TLS port, which CLUSTER NODES does not show when the
    // cluster bus is plain (`tls-cluster no`): CLUSTER SHARDS gives each node's `tls-port`.
    let tls_ports = if access.tls() {
        tls_ports(&access.seed())
    } else {
        HashMap::new()
    };
    let link_to = |n: &ClusterNode| -> Result<Link> {
        let mut link = match (tls_ports.get(&n.id), n.address.rsplit_once(':')) {
            (Some(port), Some((host, _))) => access.at(&format!("{host}:{port}"))?,
            _ => access.at(&n.address)?,
        };
        link.address = n.address.clone();
        Ok(link)
    };
    // Every node's own view.
    let mut views = Vec::with_capacity(nodes.len());
    for n in &nodes {
        views.push((n.address.clone(), nodes_of(&link_to(n)?)?));
    }
    if let Some(why) = refusal(&nodes, &views) {
        bail!("{why}");
    }
    let mut masters: Vec<Master> = nodes
        .iter()
        .filter(|n| n.has("master"))
        .map(|n| {
            Ok(Master {
                address: n.address.clone(),
                slots: slots_of(n),
                link: link_to(n)?,
            })
        })
        .collect::<Result<_>>()?;
    for m in &masters {
        if let Some(why) = atomic_migration_running(m)? {
            bail!("{why}");
        }
    }
    masters.sort_by(|a, b| {
        let first = |m: &Master| m.slots.first().copied().unwrap_or(u16::MAX);
        (first(a), &a.address).cmp(&(first(b), &b.address))
    });
    let mut owner = vec![None; SLOT_COUNT];
    for (i, m) in masters.iter().enumerate() {
        for &slot in &m.slots {
            if let Some(o) = owner.get_mut(usize::from(slot)) {
                *o = Some(i);
            }
        }
    }
    let seed = nodes
        .iter()
        .find(|n| n.has("myself"))
        .and_then(|me| masters.iter().position(|m| m.address == me.address));
    Ok(LiveCluster {
        masters,
        owner,
        seed,
        nodes,
    })
}

/// Each node's TLS port by node id, from `CLUSTER SHARDS` on the node at `link` (Redis 7.0 and
/// later, Valkey); empty where the server has no such command or gives no `tls-port`.
pub fn tls_ports(link: &Link) -> HashMap<String, u16> {
    let mut ports = HashMap::new();
    let Ok(mut con) = link.connect() else {
        return ports;
    };
    let Ok(shards) = redis::cmd("CLUSTER").arg("SHARDS").query::<Value>(&mut con) else {
        return ports;
    };
    for shard in items(&shards).unwrap_or_default() {
        let Ok(nodes) = field(shard, "nodes").and_then(items) else {
            continue;
        };
        for node in nodes {
            let id = field(node, "id").and_then(crate::reply::text);
            let port = field(node, "tls-port").and_then(crate::reply::int);
            if let (Ok(id), Ok(port)) = (id, port) {
                if let Ok(port) = u16::try_from(port) {
                    ports.insert(id, port);
                }
            }
        }
    }
    ports
}

/// The masters and their slots as one node's `CLUSTER NODES` lists them, sorted: what all
/// nodes must agree on.
fn table(nodes: &[ClusterNode]) -> Vec<(String, Vec<u16>)> {
    let mut t: Vec<(String, Vec<u16>)> = nodes
        .iter()
        .filter(|n| n.has("master"))
        .map(|n| (n.address.clone(), slots_of(n)))
        .collect();
    t.sort();
    t
}

/// Why a prediction must not run on the cluster the seed sees as `seed_view`, given every
/// node's own view (`views`: address, its `CLUSTER NODES`): a node flagged failing, in
/// handshake or without an address; a slot migrating or importing (a node lists its own open
/// slots only, on its `myself` line); a node whose masters or slot table differ from the
/// seed's. `None` when it may run.
pub fn refusal(seed_view: &[ClusterNode], views: &[(String, Vec<ClusterNode>)]) -> Option<String> {
    let open = |slot: u16, at: &str| {
        format!(
            "slot {slot} of {at} is migrating or importing: run when the migration ends \
             (redis-cli --cluster check, and --cluster fix if it is stuck)"
        )
    };
    for n in seed_view {
        for bad in ["fail", "fail?", "handshake", "noaddr"] {
            if n.has(bad) {
                return Some(format!(
                    "node {} ({}) is flagged `{bad}`: predict when the cluster is healthy \
                     (redis-cli --cluster check)",
                    n.address, n.id
                ));
            }
        }
        if let Some(slot) = first_open(n) {
            return Some(open(slot, &n.address));
        }
    }
    let mine = table(seed_view);
    for (address, theirs) in views {
        if let Some(slot) = theirs.iter().find(|t| t.has("myself")).and_then(first_open) {
            return Some(open(slot, address));
        }
        if table(theirs) != mine {
            return Some(format!(
                "{address} and the seed disagree on the masters or the slot table: run when \
                 every node's CLUSTER NODES lists the same masters and slots (after an \
                 add-node the others take a few seconds to meet the new master, which \
                 redis-cli --cluster check, reading the seed alone, does not show)"
            ));
        }
    }
    None
}

/// One job of `CLUSTER GETSLOTMIGRATIONS`: its fields as text (`name`, `operation`,
/// `slot_ranges` as `0-100 200-300`, `source_node`, `target_node`, `state`, `message`, ...).
pub type Job = BTreeMap<String, String>;

/// Whether a job is over: `success`, `failed` or `cancelled`.
pub fn migration_finished(job: &Job) -> bool {
    matches!(
        job.get("state").map(String::as_str),
        Some("success" | "failed" | "cancelled")
    )
}

/// The slots of a job's `slot_ranges` (`0-100 200-300`, or `5` for one slot).
pub fn job_slots(job: &Job) -> std::collections::BTreeSet<u16> {
    let mut slots = std::collections::BTreeSet::new();
    for range in job
        .get("slot_ranges")
        .map(String::as_str)
        .unwrap_or_default()
        .split([' ', ','])
        .filter(|r| !r.is_empty())
    {
        let (a, b) = range.split_once('-').unwrap_or((range, range));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<u16>(), b.trim().parse::<u16>()) {
            slots.extend(a..=b);
        }
    }
    slots
}

/// The jobs `CLUSTER GETSLOTMIGRATIONS` lists on the node (newest first). Error: a server
/// without atomic slot migration, or a refusal.
pub fn slot_migrations(con: &mut Connection, at: &str) -> Result<Vec<Job>> {
    let reply = run(con, at, &s(&["CLUSTER", "GETSLOTMIGRATIONS"]))?;
    items(&reply)?
        .iter()
        .map(|job| {
            let (pairs, _) = crate::reply::fields(job)?;
            Ok(pairs
                .into_iter()
                .map(|(k, v)| {
                    let value = crate::reply::text(v)
                        .or_else(|_| crate::reply::int(v).map(|n| n.to_string()))
                        .unwrap_or_default();
                    (k, value)
                })
                .collect())
        })
        .collect()
}

/// Why a prediction must not run while `m` takes part in an atomic slot migration: a job of
/// Valkey's `CLUSTER GETSLOTMIGRATIONS` that is not over ([`migration_finished`]; the slots
/// it moves change owner when it ends, and meanwhile the target holds keys it does not own
/// yet). `None` when none runs, or on a server without the command (Redis: an error reply,
/// taken as "no atomic migration"). Redis 8.4's own `CLUSTER MIGRATION STATUS` is not asked:
/// no 8.4 server was at hand to test its reply against.
pub fn atomic_migration_running(m: &Master) -> Result<Option<String>> {
    let mut con = m.link.connect()?;
    let jobs = match slot_migrations(&mut con, &m.address) {
        Ok(jobs) => jobs,
        // Redis and Valkey before 9 do not know the subcommand; any other error (NOPERM, a
        // timeout, LOADING) must not pass for "no migration".
        Err(e) if unknown_subcommand(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(jobs.iter().find(|j| !migration_finished(j)).map(|job| {
        let text = |name: &str| job.get(name).cloned().unwrap_or_default();
        format!(
            "{} has an atomic slot migration running ({} of slots {}, {}): predict when \
             CLUSTER GETSLOTMIGRATIONS shows it over",
            m.address,
            text("operation").to_lowercase(),
            text("slot_ranges"),
            text("state"),
        )
    }))
}

/// Whether an error is a server's refusal of a subcommand it does not know (Redis, or Valkey
/// before 9, asked `CLUSTER GETSLOTMIGRATIONS`).
pub fn unknown_subcommand(e: &anyhow::Error) -> bool {
    format!("{e:#}")
        .to_lowercase()
        .contains("unknown subcommand")
}

/// What a node says of itself in `INFO server` and `INFO memory`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeFacts {
    /// Valkey 9 or later (`server_name:valkey`, `valkey_version`): it has atomic slot
    /// migration (`CLUSTER MIGRATESLOTS`).
    pub atomic: bool,
    /// `used_memory`, bytes.
    pub used_memory: f64,
}

/// [`NodeFacts`] of the node at `link`. Error: the node cannot be reached, or refuses `INFO`
/// (an ACL user without `+info`).
pub fn node_facts(link: &Link) -> Result<NodeFacts> {
    let address = &link.address;
    let mut con = link.connect()?;
    let text = |section: &str, con: &mut Connection| -> Result<String> {
        let v = run(con, address, &s(&["INFO", section]))?;
        crate::reply::text(&v).map_err(|e| anyhow!("{address}: INFO {section}: {e}"))
    };
    let server = text("server", &mut con)?;
    let memory = text("memory", &mut con)?;
    Ok(NodeFacts {
        atomic: crate::reply::is_valkey_9(&server),
        used_memory: crate::reply::info_field(&memory, "used_memory")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0),
    })
}

/// Whether `MODULE LIST` of the master names ringslot.
pub fn has_module(m: &Master) -> Result<bool> {
    let mut con = m.link.connect()?;
    let list = run(&mut con, &m.address, &s(&["MODULE", "LIST"]))?;
    Ok(items(&list)?.iter().any(|module| {
        field(module, "name")
            .ok()
            .and_then(|n| crate::reply::text(n).ok())
            .is_some_and(|n| n == "ringslot")
    }))
}

/// For every slot, a hash tag `{...}` whose key slot it is.
pub fn tags() -> Vec<String> {
    let mut tags = vec![String::new(); SLOT_COUNT];
    let mut missing = SLOT_COUNT;
    let mut i = 0u64;
    while missing > 0 {
        let tag = format!("{{rs{i}}}");
        let slot = usize::from(key_slot(tag.as_bytes()));
        if let Some(t) = tags.get_mut(slot) {
            if t.is_empty() {
                *t = tag;
                missing -= 1;
            }
        }
        i += 1;
    }
    tags
}

/// The key count of every slot, from its master: one `CLUSTER SLOT-STATS SLOTSRANGE 0 16383`
/// where the server has it (Valkey 8 and later, Redis 8.2 and later), else `CLUSTER
/// COUNTKEYSINSLOT` of each of its slots, pipelined. Both count what the slot's dictionary
/// holds: keys past their expiry that the server has not reclaimed yet are counted (a walk of
/// live keys skips them, and `MIGRATE` never moves them).
pub fn slot_counts(topo: &LiveCluster) -> Result<Vec<u64>> {
    let mut counts = vec![0u64; SLOT_COUNT];
    for m in &topo.masters {
        let mut con = m.link.connect()?;
        if let Some(stats) = slot_stats(&mut con)? {
            for &slot in &m.slots {
                counts[usize::from(slot)] = stats.get(&slot).copied().unwrap_or(0);
            }
        } else {
            for (slot, n) in count_keys_in_slots(&mut con, m)? {
                counts[usize::from(slot)] = n;
            }
        }
    }
    Ok(counts)
}

/// `CLUSTER COUNTKEYSINSLOT` of each slot of `m`, pipelined 1000 at a time.
fn count_keys_in_slots(con: &mut Connection, m: &Master) -> Result<Vec<(u16, u64)>> {
    let mut counts = Vec::with_capacity(m.slots.len());
    for part in m.slots.chunks(1000) {
        let mut pipe = redis::pipe();
        for slot in part {
            pipe.cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(*slot);
        }
        let got: Vec<u64> = pipe
            .query(con)
            .map_err(|e| anyhow!("{}: CLUSTER COUNTKEYSINSLOT: {}", m.address, error_text(&e)))?;
        counts.extend(part.iter().copied().zip(got));
    }
    Ok(counts)
}

/// The key count of each slot this node serves, from `CLUSTER SLOT-STATS SLOTSRANGE 0 16383`
/// (one reply of `[slot, [key-count, n, ...]]` per served slot); `None` on a server without
/// the command (Redis before 8.2, Valkey before 8), or one that answers in another shape.
pub fn slot_stats(con: &mut Connection) -> Result<Option<BTreeMap<u16, u64>>> {
    let reply: Value = match redis::cmd("CLUSTER")
        .arg("SLOT-STATS")
        .arg("SLOTSRANGE")
        .arg(0)
        .arg(SLOT_COUNT - 1)
        .query(con)
    {
        Ok(v) => v,
        Err(_) => return Ok(None),
    };
    let mut stats = BTreeMap::new();
    let Ok(rows) = items(&reply) else {
        return Ok(None);
    };
    for row in rows {
        let entry = match items(row) {
            Ok([slot, fields]) => crate::reply::int(slot)
                .ok()
                .zip(field(fields, "key-count").ok())
                .and_then(|(slot, n)| {
                    Some((u16::try_from(slot).ok()?, crate::reply::int(n).ok()?))
                }),
            _ => None,
        };
        let Some((slot, n)) = entry else {
            return Ok(None);
        };
        stats.insert(slot, u64::try_from(n).unwrap_or(0));
    }
    Ok(Some(stats))
}

/// Every live key name of master `m`, a `SCAN` batch at a time (about 1000 names), handed to
/// `visit` with the connection.
pub fn scan_master(
    m: &Master,
    con: &mut Connection,
    holds: &Holds,
    mut visit: impl FnMut(&mut Connection, Vec<Vec<u8>>) -> Result<()>,
) -> Result<()> {
    let mut cursor: u64 = 0;
    loop {
        if INTERRUPTED.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let (next, names): (u64, Vec<Vec<u8>>) = holds
            .time(&m.address, || {
                redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(1000)
                    .query(con)
            })
            .map_err(|e| anyhow!("{}: SCAN: {}", m.address, error_text(&e)))?;
        visit(con, names)?;
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

/// Fails when the masters or the slot table changed since `topo` was read: the keys evaluated
/// must be the keys counted.
pub fn check_unchanged(access: &Access, topo: &LiveCluster) -> Result<()> {
    let after = read_topology(access)?;
    let unchanged = after.masters.len() == topo.masters.len()
        && after
            .masters
            .iter()
            .zip(&topo.masters)
            .all(|(a, b)| a.address == b.address && a.slots == b.slots);
    if !unchanged {
        bail!("the cluster's slot table changed while the prediction ran: run again");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_stats_count_what_countkeysinslot_counts() {
        // A live cluster of the server under test: where it answers CLUSTER SLOT-STATS
        // (Valkey 9.1.2, Redis 8.2.3), one call per master gives every slot's key count as
        // 16384 pipelined COUNTKEYSINSLOT do, keys past their expiry included; Redis 7.0.15
        // has no such command, and the counts come from COUNTKEYSINSLOT.
        use ringslot_harness::cluster::Cluster;
        let cluster = Cluster::start(3, ringslot_harness::Server::builder).unwrap();
        let mut seed = cluster.nodes[0].client();
        let access = Access::plain(&cluster.nodes[0].url()).unwrap();
        let topo = read_topology(&access).unwrap();
        let tags = tags();
        for m in &topo.masters {
            let mut con = m.link.connect().unwrap();
            let mut pipe = redis::pipe();
            for (i, &slot) in m.slots.iter().enumerate().step_by(7) {
                let tag = &tags[usize::from(slot)];
                for k in 0..(i % 5) {
                    pipe.cmd("SET").arg(format!("{tag}k{k}")).arg(k).ignore();
                }
                pipe.cmd("SET")
                    .arg(format!("{tag}gone"))
                    .arg(1)
                    .arg("PX")
                    .arg(1)
                    .ignore();
            }
            redis::cmd("DEBUG")
                .arg("SET-ACTIVE-EXPIRE")
                .arg(0)
                .exec(&mut con)
                .unwrap();
            pipe.query::<()>(&mut con).unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
        let valkey9 = ringslot_harness::cluster::has_atomic_slot_migration(&cluster.nodes[0]);
        let version: String = redis::cmd("INFO").arg("server").query(&mut seed).unwrap();
        let has_stats = valkey9 || version.contains("redis_version:8.");
        let (mut by_stats, mut by_count) = (Duration::ZERO, Duration::ZERO);
        for m in &topo.masters {
            let mut con = m.link.connect().unwrap();
            let started = Instant::now();
            let stats = slot_stats(&mut con).unwrap();
            by_stats += started.elapsed();
            let started = Instant::now();
            let counted = count_keys_in_slots(&mut con, m).unwrap();
            by_count += started.elapsed();
            assert_eq!(stats.is_some(), has_stats, "{version}");
            if let Some(stats) = stats {
                let counted: BTreeMap<u16, u64> = counted.into_iter().collect();
                assert_eq!(stats, counted, "{}", m.address);
            }
        }
        eprintln!(
            "every slot's key count: CLUSTER SLOT-STATS {by_stats:?}, COUNTKEYSINSLOT \
             {by_count:?} (3 masters)"
        );
    }

    #[test]
    fn every_slot_gets_a_tag_of_its_own() {
        let tags = tags();
        assert_eq!(tags.len(), SLOT_COUNT);
        for (slot, tag) in tags.iter().enumerate() {
            assert_eq!(usize::from(key_slot(tag.as_bytes())), slot, "{tag}");
        }
    }

    #[test]
    fn slots_and_open_slots_of_a_node() {
        let nodes = parse_cluster_nodes(
            "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 \
             connected 0-2 7 [9->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1] \
             [4-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]",
        )
        .unwrap();
        assert_eq!(slots_of(&nodes[0]), vec![0, 1, 2, 7]);
        assert_eq!(first_open(&nodes[0]), Some(4));
    }

    /// Three masters as node A sees them (its own line `myself`); `extra` is appended to B's
    /// line, `flags_c` replaces C's flags.
    fn view(myself: char, extra_b: &str, flags_c: &str) -> Vec<ClusterNode> {
        let line = |c: char, port: u16, flags: &str, slots: &str| {
            let id = c.to_string().repeat(40);
            let flags = if c == myself {
                format!("myself,{flags}")
            } else {
                flags.to_string()
            };
            format!("{id} 127.0.0.1:{port}@1{port} {flags} - 0 0 1 connected {slots}\n")
        };
        let text = line('a', 30001, "master", "0-5460")
            + &line('b', 30002, "master", &format!("5461-10922{extra_b}"))
            + &line('c', 30003, flags_c, "10923-16383");
        parse_cluster_nodes(&text).unwrap()
    }

    #[test]
    fn unhealthy_or_disagreeing_clusters_are_refused() {
        let seed = view('a', "", "master");
        let same = vec![
            ("127.0.0.1:30002".to_string(), view('b', "", "master")),
            ("127.0.0.1:30003".to_string(), view('c', "", "master")),
        ];
        assert_eq!(refusal(&seed, &same), None);
        // A failing node, as the seed sees it.
        let failing = view('a', "", "master,fail?");
        let why = refusal(&failing, &[]).unwrap();
        assert!(
            why.contains("127.0.0.1:30003") && why.contains("`fail?`"),
            "{why}"
        );
        // A node that sees a slot of its own migrating (only it lists that).
        let migrating = vec![(
            "127.0.0.1:30002".to_string(),
            view(
                'b',
                " [6000->-cccccccccccccccccccccccccccccccccccccccc]",
                "master",
            ),
        )];
        let why = refusal(&seed, &migrating).unwrap();
        assert!(
            why.starts_with("slot 6000 of 127.0.0.1:30002 is migrating"),
            "{why}"
        );
        // A node whose view of the slots differs from the seed's.
        let mut other = view('c', "", "master");
        other[1].slots = vec![(5461, 10900)];
        let why = refusal(&seed, &[("127.0.0.1:30003".to_string(), other)]).unwrap();
        assert!(
            why.starts_with("127.0.0.1:30003 and the seed disagree"),
            "{why}"
        );
    }
}
