//! `cluster`: what a change of masters costs on a real Redis Cluster, predicted exactly from
//! the live cluster and, on a throw-away cluster, checked against the real rebalance.
//!
//! The prediction, from one seed address:
//! 1. The topology: the seed's `CLUSTER NODES`, refused while a slot is migrating or
//!    importing, a node is failing or the nodes disagree; every master must have loaded the
//!    module (a ring key cannot migrate to a master without it).
//! 2. Per-slot key counts (`CLUSTER COUNTKEYSINSLOT` on each slot's master, one plain
//!    connection per master: a cluster client would follow `MOVED` and count a node twice).
//! 3. The plan: `RING.MIRROR` of the live cluster, then `RING.PLAN` of the change (the slot
//!    moves `redis-cli --cluster rebalance --cluster-use-empty-masters` makes). Keys the slot
//!    scheme moves = the sum of the counts of the moved slots: exact, no key read.
//! 4. The ring schemes (native, ketama, groupcache at their defaults) and modulo: each master
//!    evaluates its own keys with `RING.MOVES <its mirror copy> <change> SLOTS a b` over its
//!    slots in chunks, masters in parallel; one flavour at a time, so that the only extra key
//!    in a master's slots is the copy being evaluated, which `SLOTS` leaves out. Copies carry
//!    a TTL, so that a run that dies leaves nothing behind for long, and are deleted at the
//!    end. The topology is read again at the end: a change meanwhile fails the run.
//!
//! With `--local N`, the program starts N masters on free loopback ports, loads the keys,
//! predicts, then performs the change for real (`redis-cli --cluster add-node` + `rebalance
//! --cluster-use-empty-masters`, or a weight-0 rebalance + `del-node`) and counts the keys that
//! really moved from per-slot counts (and a full `SCAN` of every master before and after when
//! the keyspace is small).

use crate::report::{self, fixed, Chart, Panel, Series, Table};
use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::SeriesLabelPosition;
use ringslot_engine::key_slot;
use ringslot_harness::client::error_text;
use ringslot_harness::cluster::{parse_cluster_nodes, Cluster, NodeLine, SLOTS};
use ringslot_harness::redis::{
    self, Connection, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Value,
};
use ringslot_harness::reply::{array as items, field, float, int};
use ringslot_harness::{Server, ServerBuilder};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Set by Ctrl-C: workers stop at the next chunk, and the run cleans up.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Processes started by a local run (their pids), killed by a Ctrl-C handler.
pub static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// The change of masters to predict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A master `node` (`ip:port`) joins with `weight` (redis-cli's default 1).
    Add { node: String, weight: Option<u32> },
    /// The master `node` (`ip:port`) is drained and leaves.
    Del { node: String },
}

impl Change {
    /// The change as `RING.MOVES` / `RING.PLAN` arguments.
    fn args(&self) -> Vec<String> {
        match self {
            Change::Add { node, weight } => {
                let mut a = vec!["ADD".to_string(), node.clone()];
                if let Some(w) = weight {
                    a.extend(["WEIGHT".to_string(), w.to_string()]);
                }
                a
            }
            Change::Del { node } => vec!["DEL".to_string(), node.clone()],
        }
    }

    /// The node the change names.
    fn node(&self) -> &str {
        match self {
            Change::Add { node, .. } | Change::Del { node } => node,
        }
    }
}

/// What a cluster run does.
#[derive(Debug, Clone)]
pub struct Options {
    /// Ring flavours evaluated besides the slot scheme (modulo comes with the first).
    pub flavours: Vec<String>,
    /// Slots per `RING.MOVES ... SLOTS` call.
    pub chunk: u16,
    /// Seconds the ring copies live if the run dies.
    pub ttl_secs: u64,
    /// With --local: `SCAN` every master before and after when the keys are at most this.
    pub scan_limit: u64,
    /// redis-cli's `--cluster-pipeline` for the real rebalance.
    pub pipeline: u32,
}

/// One master of the cluster.
#[derive(Debug, Clone)]
struct Master {
    address: String,
    slots: Vec<u16>,
    info: ConnectionInfo,
}

/// The checked topology: its masters in the order of their first slot, and the owner of
/// every slot.
#[derive(Debug, Clone)]
struct Topology {
    masters: Vec<Master>,
    owner: Vec<Option<usize>>,
    /// The seed, when it is a master.
    seed: Option<usize>,
}

/// `info` with its address replaced by `address` (`ip:port`): the seed's credentials and
/// database on another node.
fn info_at(info: &ConnectionInfo, address: &str) -> Result<ConnectionInfo> {
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| anyhow!("not an ip:port address: {address}"))?;
    let port: u16 = port.parse().with_context(|| format!("port of {address}"))?;
    let mut info = info.clone();
    info.addr = match &info.addr {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host: host.to_string(),
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host.to_string(), port),
    };
    Ok(info)
}

/// A plain connection (no cluster redirection) to one node.
fn connect(info: &ConnectionInfo) -> Result<Connection> {
    let client = redis::Client::open(info.clone())
        .map_err(|e| anyhow!("bad address {:?}: {e}", info.addr))?;
    client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(|e| anyhow!("cannot reach {}: {e}", info.addr))
}

/// Runs a command; an error names the node and the command and quotes the reply.
fn run(con: &mut Connection, at: &str, args: &[String]) -> Result<Value> {
    let parts: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    ringslot_harness::client::cmd(&parts)
        .query::<Value>(con)
        .map_err(|e| {
            let line: Vec<&str> = args.iter().map(String::as_str).take(8).collect();
            anyhow!("{at}: `{}` failed: {}", line.join(" "), error_text(&e))
        })
}

fn s(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// `CLUSTER NODES` of the node at `info`, parsed.
fn nodes_of(info: &ConnectionInfo) -> Result<Vec<NodeLine>> {
    let mut con = connect(info)?;
    let at = format!("{:?}", info.addr);
    let text = ringslot_harness::reply::text(&run(&mut con, &at, &s(&["CLUSTER", "NODES"]))?)
        .map_err(|e| anyhow!("{at}: CLUSTER NODES: {e}"))?;
    parse_cluster_nodes(&text).map_err(|e| anyhow!("{at}: {e}"))
}

/// Reads and checks the topology from the seed (see the module docs).
fn read_topology(seed: &ConnectionInfo, check_modules: bool) -> Result<Topology> {
    let nodes = nodes_of(seed)?;
    for n in &nodes {
        for bad in ["fail", "fail?", "handshake", "noaddr"] {
            if n.has(bad) {
                bail!(
                    "node {} ({}) is flagged `{bad}`: predict when the cluster is healthy \
                     (redis-cli --cluster check)",
                    n.address,
                    n.id
                );
            }
        }
        if let Some(open) = n.open.first() {
            bail!(
                "slot {open} of {} is migrating or importing: run when the migration ends \
                 (redis-cli --cluster check, and --cluster fix if it is stuck)",
                n.address
            );
        }
    }
    let mut masters: Vec<Master> = nodes
        .iter()
        .filter(|n| n.has("master"))
        .map(|n| {
            Ok(Master {
                address: n.address.clone(),
                slots: n.slots.clone(),
                info: info_at(seed, &n.address)?,
            })
        })
        .collect::<Result<_>>()?;
    masters.sort_by(|a, b| {
        let first = |m: &Master| m.slots.first().copied().unwrap_or(u16::MAX);
        (first(a), &a.address).cmp(&(first(b), &b.address))
    });
    let mut owner = vec![None; SLOTS];
    for (i, m) in masters.iter().enumerate() {
        for &slot in &m.slots {
            if let Some(o) = owner.get_mut(usize::from(slot)) {
                *o = Some(i);
            }
        }
    }
    // Every node must see the same masters and slot table.
    let table = |nodes: &[NodeLine]| -> Vec<(String, Vec<u16>)> {
        let mut t: Vec<(String, Vec<u16>)> = nodes
            .iter()
            .filter(|n| n.has("master"))
            .map(|n| (n.address.clone(), n.slots.clone()))
            .collect();
        t.sort();
        t
    };
    let mine = table(&nodes);
    for n in &nodes {
        let theirs = nodes_of(&info_at(seed, &n.address)?)?;
        // A node lists its own open slots only (on its `myself` line).
        if let Some(open) = theirs
            .iter()
            .find(|t| t.has("myself"))
            .and_then(|me| me.open.first())
        {
            bail!(
                "slot {open} of {} is migrating or importing: run when the migration ends \
                 (redis-cli --cluster check, and --cluster fix if it is stuck)",
                n.address
            );
        }
        if table(&theirs) != mine {
            bail!(
                "{} and the seed disagree on the masters or the slot table: run when the \
                 cluster has converged (redis-cli --cluster check)",
                n.address
            );
        }
    }
    if check_modules {
        let missing: Vec<&str> = masters
            .iter()
            .filter(|m| !has_module(m).unwrap_or(false))
            .map(|m| m.address.as_str())
            .collect();
        if !missing.is_empty() {
            bail!(
                "the ringslot module is not loaded on {}: load it on every master (a ring \
                 key cannot migrate to a master without it, and MIGRATE leaves the slot open)",
                missing.join(", ")
            );
        }
    }
    let seed = nodes
        .iter()
        .find(|n| n.has("myself"))
        .and_then(|me| masters.iter().position(|m| m.address == me.address));
    Ok(Topology {
        masters,
        owner,
        seed,
    })
}

/// Whether `MODULE LIST` of the master names ringslot.
fn has_module(m: &Master) -> Result<bool> {
    let mut con = connect(&m.info)?;
    let list = run(&mut con, &m.address, &s(&["MODULE", "LIST"]))?;
    Ok(items(&list)?.iter().any(|module| {
        field(module, "name")
            .ok()
            .and_then(|n| ringslot_harness::reply::text(n).ok())
            .is_some_and(|n| n == "ringslot")
    }))
}

/// For every slot, a hash tag `{...}` whose key slot it is.
fn tags() -> Vec<String> {
    let mut tags = vec![String::new(); SLOTS];
    let mut missing = SLOTS;
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

/// The key count of every slot, from its master (pipelined per master).
fn slot_counts(topo: &Topology) -> Result<Vec<u64>> {
    let mut counts = vec![0u64; SLOTS];
    for m in &topo.masters {
        let mut con = connect(&m.info)?;
        for part in m.slots.chunks(1000) {
            let mut pipe = redis::pipe();
            for slot in part {
                pipe.cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(*slot);
            }
            let got: Vec<u64> = pipe
                .query(&mut con)
                .map_err(|e| anyhow!("{}: CLUSTER COUNTKEYSINSLOT: {e}", m.address))?;
            for (slot, n) in part.iter().zip(got) {
                counts[usize::from(*slot)] = n;
            }
        }
    }
    Ok(counts)
}

/// One move of the plan.
#[derive(Debug, Clone)]
struct PlannedMove {
    from: Option<String>,
    to: Option<String>,
    slots: Vec<u16>,
}

fn opt_text(v: &Value) -> Option<String> {
    match v {
        Value::Nil => None,
        other => ringslot_harness::reply::text(other).ok(),
    }
}

/// Parses the reply of `RING.PLAN`.
fn parse_plan(reply: &Value) -> Result<Vec<PlannedMove>> {
    let mut moves = Vec::new();
    for m in items(reply)? {
        let mut slots = Vec::new();
        for range in items(field(m, "ranges")?)? {
            let r = items(range)?;
            let (Some(a), Some(b)) = (r.first(), r.get(1)) else {
                bail!("RING.PLAN: a range of fewer than two ends");
            };
            let (a, b) = (u16::try_from(int(a)?)?, u16::try_from(int(b)?)?);
            slots.extend(a..=b);
        }
        moves.push(PlannedMove {
            from: opt_text(field(m, "from")?),
            to: opt_text(field(m, "to")?),
            slots,
        });
    }
    Ok(moves)
}

/// Sums of the `RING.MOVES` replies of one flavour.
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    members: u64,
    ring_moved: u64,
    ring_between: u64,
    slots_moved: u64,
    modulo_moved: u64,
    modulo_between: u64,
    ideal: f64,
}

impl Sums {
    fn add(&mut self, o: &Sums) {
        self.members += o.members;
        self.ring_moved += o.ring_moved;
        self.ring_between += o.ring_between;
        self.slots_moved += o.slots_moved;
        self.modulo_moved += o.modulo_moved;
        self.modulo_between += o.modulo_between;
        self.ideal = o.ideal;
    }

    fn of(reply: &Value) -> Result<Sums> {
        let section = |name: &str, what: &str| -> Result<u64> {
            Ok(int(field(field(reply, name)?, what)?)? as u64)
        };
        Ok(Sums {
            members: int(field(reply, "members")?)? as u64,
            ring_moved: section("ring", "moved")?,
            ring_between: section("ring", "between_old")?,
            slots_moved: section("slots", "moved")?,
            modulo_moved: section("modulo", "moved")?,
            modulo_between: section("modulo", "between_old")?,
            ideal: float(field(reply, "ideal")?)?,
        })
    }
}

/// Keys one `RING.MOVES ... SLOTS` call reads at most, unless one slot holds more: well under
/// `ringslot.max-sample` (1M), and about 0.1-0.2 s of one master's main thread inline.
pub const CHUNK_KEYS: u64 = 100_000;

/// The runs of `slots` (ascending) cut into chunks of at most `chunk` slots and, but for a
/// single slot that holds more, at most [`CHUNK_KEYS`] keys by `counts` (keys per slot).
fn chunks(slots: &[u16], chunk: u16, counts: &[u64]) -> Vec<(u16, u16)> {
    let count = |s: u16| counts.get(usize::from(s)).copied().unwrap_or(0);
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&start) = slots.get(i) {
        let (mut end, mut keys) = (start, count(start));
        let mut j = i + 1;
        while let Some(&next) = slots.get(j) {
            if next != end + 1 || next - start >= chunk || keys + count(next) > CHUNK_KEYS {
                break;
            }
            end = next;
            keys += count(next);
            j += 1;
        }
        out.push((start, end));
        i = j;
    }
    out
}

/// The ring copies a run made, deleted when dropped (also on error).
struct Copies {
    keys: Vec<(ConnectionInfo, String, String)>,
}

impl Copies {
    fn remove(&mut self) {
        for (info, at, key) in self.keys.drain(..) {
            if let Ok(mut con) = connect(&info) {
                let _ = run(&mut con, &at, &s(&["DEL", &key]));
            }
        }
    }
}

impl Drop for Copies {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Evaluates `change` over one master's keys: a mirror copy of `flavour` under a tag of its
/// first slot, then `RING.MOVES ... SLOTS` over its chunks. A chunk whose slot is migrating is
/// retried (three times, a second apart); a chunk whose slots left the master fails the run.
fn evaluate_master(
    m: &Master,
    flavour: &str,
    change: &Change,
    opts: &Options,
    counts: &[u64],
    key: &str,
    bar: &ProgressBar,
) -> Result<Sums> {
    let mut con = connect(&m.info)?;
    let mut sums = Sums::default();
    for (a, b) in chunks(&m.slots, opts.chunk.max(1), counts) {
        if INTERRUPTED.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let mut args = s(&["RING.MOVES", key]);
        args.extend(change.args());
        args.extend(s(&["SLOTS", &a.to_string(), &b.to_string()]));
        let mut attempt = 0;
        let reply = loop {
            attempt += 1;
            match run(&mut con, &m.address, &args) {
                Ok(reply) => break reply,
                Err(e) => {
                    let text = e.to_string();
                    let retry = text.contains("is migrating")
                        || text.contains("is importing")
                        || text.contains("LOADING");
                    if attempt >= 3 || !retry {
                        let hint = if text.contains("is served by") || text.contains("MOVED") {
                            ": the slots left this master while the prediction ran; run again \
                             when the cluster is stable"
                        } else {
                            ""
                        };
                        bail!(
                            "{flavour}: slots {a}-{b} of {} failed{hint}: {text}",
                            m.address
                        );
                    }
                    std::thread::sleep(Duration::from_secs(1));
                    con = connect(&m.info)?;
                }
            }
        };
        sums.add(&Sums::of(&reply)?);
        bar.inc(1);
    }
    Ok(sums)
}

/// `RING.MIRROR key COMPAT flavour` and `EXPIRE key ttl` in one `MULTI`/`EXEC`, so that a run
/// killed between them cannot leave a copy without a TTL.
fn mirror_with_ttl(
    con: &mut Connection,
    at: &str,
    key: &str,
    flavour: &str,
    ttl: &str,
) -> Result<()> {
    // RING.MIRROR refreshes a ring that exists: the key must be new, and stay new until the
    // mirror is made (WATCH: EXEC does nothing if another client wrote it meanwhile).
    let fail = |e: redis::RedisError| anyhow!("{at}: RING.MIRROR {key}: {}", error_text(&e));
    redis::cmd("WATCH")
        .arg(key)
        .query::<()>(con)
        .map_err(fail)?;
    if redis::cmd("EXISTS")
        .arg(key)
        .query::<i64>(con)
        .map_err(fail)?
        != 0
    {
        let _ = redis::cmd("UNWATCH").query::<()>(con);
        bail!("{at}: the key {key} exists; the benchmark changes no key it did not create");
    }
    let made: Option<(redis::Value, i64)> = redis::pipe()
        .atomic()
        .cmd("RING.MIRROR")
        .arg(key)
        .arg("COMPAT")
        .arg(flavour)
        .cmd("EXPIRE")
        .arg(key)
        .arg(ttl)
        .query(con)
        .map_err(fail)?;
    if made.is_none() {
        bail!("{at}: another client wrote {key} while the benchmark made it");
    }
    Ok(())
}

/// What a prediction found.
#[derive(Debug, Clone)]
pub struct Prediction {
    masters: Vec<(String, usize)>,
    counts: Vec<u64>,
    plan: Vec<PlannedMove>,
    /// The master the mirrors were made on: the plan is `redis-cli --cluster rebalance`'s
    /// run against it.
    entry: String,
    owner_before: Vec<Option<String>>,
    owner_after: Vec<Option<String>>,
    /// Per flavour, the sums over every master.
    rings: Vec<(String, Sums)>,
    slots_moved: u64,
    slots_between: u64,
    keys: u64,
    ideal: f64,
    seconds: f64,
    /// The time of each step, in seconds.
    steps: Vec<(String, f64)>,
}

/// Predicts `change` on the cluster behind `seed` (see the module docs).
fn predict(seed: &ConnectionInfo, change: &Change, opts: &Options) -> Result<Prediction> {
    let started = Instant::now();
    eprintln!("cluster: reading the topology ...");
    let topo = read_topology(seed, true)?;
    let names: Vec<String> = topo.masters.iter().map(|m| m.address.clone()).collect();
    match change {
        Change::Add { node, .. } if names.contains(node) => {
            bail!("{node} is already a master of this cluster")
        }
        Change::Del { node } if !names.contains(node) => {
            bail!(
                "{node} is not a master of this cluster (masters: {})",
                names.join(", ")
            )
        }
        _ => {}
    }
    eprintln!(
        "cluster: {} masters; counting the keys of 16384 slots ...",
        names.len()
    );
    let counts = slot_counts(&topo)?;
    let keys: u64 = counts.iter().sum();
    let mut steps = vec![(
        "topology, module check and per-slot key counts".to_string(),
        started.elapsed().as_secs_f64(),
    )];
    let mark = Instant::now();
    let tags = tags();
    let run_id = std::process::id();
    let copy_key = |m: &Master, flavour: &str| -> String {
        let first = m.slots.first().copied().unwrap_or(0);
        format!(
            "{}ringslot-bench:{run_id}:{flavour}",
            tags[usize::from(first)]
        )
    };
    let mut copies = Copies { keys: Vec::new() };
    let ttl = opts.ttl_secs.max(1).to_string();
    let serving: Vec<&Master> = topo
        .masters
        .iter()
        .filter(|m| !m.slots.is_empty())
        .collect();
    // Mirrors are made on the seed, so that the plan is what `redis-cli --cluster rebalance
    // <seed>` does (redis-cli breaks ties of balance by the order it loads masters in from its
    // entry node, which RING.MIRROR follows); a seed that serves no slot cannot hold one, and
    // the first master that serves slots stands in.
    let entry_index = topo
        .seed
        .filter(|&i| !topo.masters[i].slots.is_empty())
        .or_else(|| topo.masters.iter().position(|m| !m.slots.is_empty()));
    let Some(first) = entry_index.map(|i| &topo.masters[i]) else {
        bail!("no master serves a slot");
    };
    let entry = first.address.clone();

    // The plan, from a mirror on the entry master.
    let plan_key = copy_key(first, "plan");
    let mut con = connect(&first.info)?;
    mirror_with_ttl(&mut con, &first.address, &plan_key, "native", &ttl)?;
    copies
        .keys
        .push((first.info.clone(), first.address.clone(), plan_key.clone()));
    let mut plan_args = s(&["RING.PLAN", &plan_key]);
    plan_args.extend(change.args());
    let plan = parse_plan(&run(&mut con, &first.address, &plan_args)?)?;
    copies.remove();
    let owner_before: Vec<Option<String>> = topo
        .owner
        .iter()
        .map(|o| o.map(|i| topo.masters[i].address.clone()))
        .collect();
    let mut owner_after = owner_before.clone();
    let (mut slots_moved, mut slots_between) = (0u64, 0u64);
    let survives = |n: &Option<String>| {
        n.as_deref()
            .is_some_and(|n| names.iter().any(|m| m == n) && n != change.node())
    };
    for mv in &plan {
        let keys: u64 = mv.slots.iter().map(|&s| counts[usize::from(s)]).sum();
        slots_moved += keys;
        if survives(&mv.from) && survives(&mv.to) {
            slots_between += keys;
        }
        for &slot in &mv.slots {
            owner_after[usize::from(slot)] = mv.to.clone();
        }
    }

    steps.push((
        "the plan (RING.MIRROR + RING.PLAN) and the slot scheme's sums".to_string(),
        mark.elapsed().as_secs_f64(),
    ));
    // The rings and modulo, one flavour at a time, masters in parallel.
    let per_flavour: u64 = serving
        .iter()
        .map(|m| chunks(&m.slots, opts.chunk.max(1), &counts).len() as u64)
        .sum();
    let bar = ProgressBar::new(per_flavour * opts.flavours.len() as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} chunks, {elapsed} elapsed, ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut rings = Vec::new();
    for flavour in &opts.flavours {
        let mark = Instant::now();
        bar.set_message(format!("cluster: {flavour}"));
        // One mirror, on the entry master, copied byte for byte to the others (DUMP and
        // RESTORE): every master evaluates the same ring, with the same node order (which
        // modulo and ketama's ties depend on).
        let key = copy_key(first, flavour);
        let mut con = connect(&first.info)?;
        mirror_with_ttl(&mut con, &first.address, &key, flavour, &ttl)?;
        copies
            .keys
            .push((first.info.clone(), first.address.clone(), key.clone()));
        let payload: Vec<u8> = redis::cmd("DUMP")
            .arg(&key)
            .query(&mut con)
            .map_err(|e| anyhow!("{}: DUMP {key}: {e}", first.address))?;
        for m in serving.iter().filter(|m| m.address != first.address) {
            let key = copy_key(m, flavour);
            let mut con = connect(&m.info)?;
            // RESTORE refuses a key that exists (BUSYKEY): only a copy it made is deleted.
            redis::cmd("RESTORE")
                .arg(&key)
                .arg(opts.ttl_secs.max(1) * 1000)
                .arg(&payload)
                .query::<()>(&mut con)
                .map_err(|e| anyhow!("{}: RESTORE {key}: {}", m.address, error_text(&e)))?;
            copies
                .keys
                .push((m.info.clone(), m.address.clone(), key.clone()));
        }
        let results: Vec<Result<Sums>> = std::thread::scope(|scope| {
            let handles: Vec<_> = serving
                .iter()
                .map(|m| {
                    let key = copy_key(m, flavour);
                    let bar = bar.clone();
                    let counts = &counts;
                    scope.spawn(move || {
                        evaluate_master(m, flavour, change, opts, counts, &key, &bar)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("a worker thread panicked")))
                })
                .collect()
        });
        copies.remove();
        let mut total = Sums::default();
        for r in results {
            total.add(&r?);
        }
        rings.push((flavour.clone(), total));
        steps.push((
            format!("{flavour} ring and modulo: every key, on its master"),
            mark.elapsed().as_secs_f64(),
        ));
    }
    bar.finish_and_clear();
    // The keys evaluated must be the keys counted, and nothing may have moved meanwhile.
    let after = read_topology(seed, false)?;
    let unchanged = after.masters.len() == topo.masters.len()
        && after
            .masters
            .iter()
            .zip(&topo.masters)
            .all(|(a, b)| a.address == b.address && a.slots == b.slots);
    if !unchanged {
        bail!("the cluster's slot table changed while the prediction ran: run again");
    }
    let ideal = rings.first().map_or(0.0, |(_, s)| s.ideal);
    Ok(Prediction {
        masters: topo
            .masters
            .iter()
            .map(|m| (m.address.clone(), m.slots.len()))
            .collect(),
        counts,
        plan,
        entry,
        owner_before,
        owner_after,
        rings,
        slots_moved,
        slots_between,
        keys,
        ideal,
        seconds: started.elapsed().as_secs_f64(),
        steps,
    })
}

/// What really happened, in a local run.
#[derive(Debug, Clone)]
struct Real {
    moved: u64,
    between: u64,
    scan_moved: Option<u64>,
    owner_after: Vec<Option<String>>,
    seconds: f64,
    moves_printed: Vec<String>,
}

/// Every key of every master (`SCAN`), with its master's address.
fn scan_all(topo: &Topology) -> Result<HashMap<Vec<u8>, String>> {
    let mut all = HashMap::new();
    for m in &topo.masters {
        let mut con = connect(&m.info)?;
        let keys: Vec<Vec<u8>> = redis::cmd("SCAN")
            .cursor_arg(0)
            .arg("COUNT")
            .arg(1000)
            .clone()
            .iter(&mut con)
            .map_err(|e| anyhow!("{}: SCAN: {e}", m.address))?
            .collect();
        for k in keys {
            all.insert(k, m.address.clone());
        }
    }
    Ok(all)
}

/// Writes `count` keys `key:0..` into their masters, masters in parallel.
fn load_keys(topo: &Topology, count: u64) -> Result<()> {
    let per_master: Vec<Vec<u64>> = {
        let mut v = vec![Vec::new(); topo.masters.len()];
        for i in 0..count {
            let slot = key_slot(format!("key:{i}").as_bytes());
            if let Some(Some(m)) = topo.owner.get(usize::from(slot)) {
                v[*m].push(i);
            }
        }
        v
    };
    let bar = ProgressBar::new(count);
    bar.set_style(
        ProgressStyle::with_template("cluster: loading keys [{bar:30}] {pos}/{len}, ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = topo
            .masters
            .iter()
            .zip(&per_master)
            .map(|(m, ids)| {
                let bar = bar.clone();
                scope.spawn(move || -> Result<()> {
                    let mut con = connect(&m.info)?;
                    for part in ids.chunks(10_000) {
                        let mut pipe = redis::pipe();
                        for i in part {
                            pipe.cmd("SET").arg(format!("key:{i}")).arg("v").ignore();
                        }
                        pipe.query::<()>(&mut con)
                            .map_err(|e| anyhow!("{}: SET: {e}", m.address))?;
                        bar.inc(part.len() as u64);
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a loader panicked")))
            })
            .collect()
    });
    bar.finish_and_clear();
    results.into_iter().collect()
}

/// A local run's cluster: servers started here, registered for the Ctrl-C handler.
fn register(cluster: &Cluster) {
    if let Ok(mut c) = CHILDREN.lock() {
        c.extend(cluster.nodes.iter().map(Server::pid));
    }
}

/// The result of a run, for the report.
pub struct Outcome {
    prediction: Prediction,
    real: Option<Real>,
    change: Change,
}

/// Predicts `change` on the cluster at `seed_url`.
pub fn predict_url(seed_url: &str, change: Change, opts: &Options) -> Result<Outcome> {
    let seed = seed_url
        .into_connection_info()
        .map_err(|e| anyhow!("bad seed URL {seed_url}: {e}"))?;
    let prediction = predict(&seed, &change, opts)?;
    Ok(Outcome {
        prediction,
        real: None,
        change,
    })
}

/// `--local`: starts `masters` masters made by `builder`, loads `keys` keys, predicts the
/// change (a master joins, or with `remove` the last one leaves), performs it and counts what
/// really moved.
pub fn local(
    masters: usize,
    keys: u64,
    remove: bool,
    builder: &(dyn Fn() -> ServerBuilder + Sync),
    opts: &Options,
) -> Result<Outcome> {
    if masters < 1 || (remove && masters < 2) {
        bail!("--local needs at least 1 master (2 to remove one)");
    }
    eprintln!("cluster: starting {masters} masters ...");
    let mut cluster = Cluster::start(masters, builder)?;
    register(&cluster);
    let seed = cluster.nodes[0].url().into_connection_info()?;
    let topo = read_topology(&seed, true)?;
    let started = Instant::now();
    load_keys(&topo, keys)?;
    eprintln!(
        "cluster: loaded {keys} keys in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // The joining master: started now, so that its address is known, and joined after the
    // prediction.
    let joining = if remove {
        None
    } else {
        let server = builder()
            .cluster()
            .args(&["--cluster-node-timeout", "5000"])
            .start()?;
        if let Ok(mut c) = CHILDREN.lock() {
            c.push(server.pid());
        }
        Some(server)
    };
    let change = match &joining {
        Some(server) => Change::Add {
            node: server.address(),
            weight: None,
        },
        None => Change::Del {
            node: topo
                .masters
                .last()
                .map(|m| m.address.clone())
                .unwrap_or_default(),
        },
    };
    let prediction = predict(&seed, &change, opts)?;
    let before_scan = if keys <= opts.scan_limit {
        Some(scan_all(&topo)?)
    } else {
        None
    };
    eprintln!("cluster: performing the change for real ...");
    let pipeline = s(&["--cluster-pipeline", &opts.pipeline.to_string()]);
    let started = Instant::now();
    let run = match joining {
        Some(server) => {
            // add_node starts its own server: hand it ours instead.
            let address = server.address();
            cluster.nodes.push(server);
            ringslot_harness::cluster::redis_cli_ok(
                &s(&[
                    "--cluster",
                    "add-node",
                    &address,
                    &cluster.nodes[0].address(),
                ]),
                Duration::from_secs(60),
            )?;
            let deadline = Instant::now() + Duration::from_secs(60);
            while cluster.converge().is_err() {
                if Instant::now() > deadline {
                    cluster.converge()?;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            cluster.rebalance(&pipeline)?
        }
        None => {
            let last = topo.masters.len() - 1;
            let address = &topo.masters[last].address;
            let index = cluster
                .nodes
                .iter()
                .position(|n| n.address() == *address)
                .ok_or_else(|| anyhow!("{address} is not one of ours"))?;
            if index == 0 {
                bail!("the master to remove is the entry node");
            }
            cluster.drain_and_remove(index, &pipeline)?
        }
    };
    cluster.converge()?;
    let seconds = started.elapsed().as_secs_f64();
    let moves_printed: Vec<String> = run
        .stdout
        .lines()
        .filter(|l| l.contains("Moving") && l.contains("slots from"))
        .map(|l| strip_ansi(l).trim().trim_start_matches(">>> ").to_string())
        .collect();
    let after = read_topology(&cluster.nodes[0].url().into_connection_info()?, false)?;
    let owner_after: Vec<Option<String>> = after
        .owner
        .iter()
        .map(|o| o.map(|i| after.masters[i].address.clone()))
        .collect();
    let survivors: Vec<&String> = after.masters.iter().map(|m| &m.address).collect();
    let (mut moved, mut between) = (0u64, 0u64);
    let old = |n: Option<&String>| {
        n.is_some_and(|n| survivors.contains(&n) && topo.masters.iter().any(|m| m.address == *n))
    };
    for ((before, now), count) in prediction
        .owner_before
        .iter()
        .zip(&owner_after)
        .zip(&prediction.counts)
    {
        if before != now {
            moved += count;
            if old(before.as_ref()) && old(now.as_ref()) {
                between += count;
            }
        }
    }
    let scan_moved = match before_scan {
        Some(before) => {
            let now = scan_all(&after)?;
            if now.len() != before.len() {
                bail!(
                    "SCAN found {} keys after the change and {} before",
                    now.len(),
                    before.len()
                );
            }
            Some(
                before
                    .iter()
                    .filter(|(k, m)| now.get(*k) != Some(*m))
                    .count() as u64,
            )
        }
        None => None,
    };
    Ok(Outcome {
        prediction,
        real: Some(Real {
            moved,
            between,
            scan_moved,
            owner_after,
            seconds,
            moves_printed,
        }),
        change,
    })
}

/// `line` without its ANSI colour sequences (redis-cli colours its output).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... letter
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn fraction(moved: u64, keys: u64) -> f64 {
    if keys == 0 {
        0.0
    } else {
        moved as f64 / keys as f64
    }
}

/// Writes the Markdown, CSV and SVG of `outcome` under `dir/name.*`; returns the Markdown.
pub fn write_outputs(dir: &Path, name: &str, outcome: &Outcome) -> Result<String> {
    let p = &outcome.prediction;
    let real = outcome.real.as_ref();
    let change = outcome.change.args().join(" ");
    let mut t = Table::new(&[
        "scheme",
        "keys",
        "moved",
        "moved between old masters",
        "fraction",
        "ideal",
        "real moved",
        "real fraction",
    ]);
    let real_cell = |r: Option<u64>| r.map_or("-".to_string(), |n| n.to_string());
    let real_fraction =
        |r: Option<u64>| r.map_or("-".to_string(), |n| fixed(fraction(n, p.keys), 4));
    t.push(vec![
        "slots (redis-cli --cluster rebalance)".into(),
        p.keys.to_string(),
        p.slots_moved.to_string(),
        p.slots_between.to_string(),
        fixed(fraction(p.slots_moved, p.keys), 4),
        fixed(p.ideal, 4),
        real_cell(real.map(|r| r.moved)),
        real_fraction(real.map(|r| r.moved)),
    ]);
    for (flavour, sums) in &p.rings {
        t.push(vec![
            format!("ring ({flavour})"),
            sums.members.to_string(),
            sums.ring_moved.to_string(),
            sums.ring_between.to_string(),
            fixed(fraction(sums.ring_moved, sums.members), 4),
            fixed(p.ideal, 4),
            "-".into(),
            "-".into(),
        ]);
    }
    if let Some((_, sums)) = p.rings.first() {
        t.push(vec![
            "modulo (hash mod N)".into(),
            sums.members.to_string(),
            sums.modulo_moved.to_string(),
            sums.modulo_between.to_string(),
            fixed(fraction(sums.modulo_moved, sums.members), 4),
            fixed(p.ideal, 4),
            "-".into(),
            "-".into(),
        ]);
    }
    // Keys per master before and after, under the slot scheme.
    let tally = |owners: &[Option<String>]| -> HashMap<String, (usize, u64)> {
        let mut t: HashMap<String, (usize, u64)> = HashMap::new();
        for (slot, owner) in owners.iter().enumerate() {
            if let Some(o) = owner {
                let e = t.entry(o.clone()).or_default();
                e.0 += 1;
                e.1 += p.counts[slot];
            }
        }
        t
    };
    let before = tally(&p.owner_before);
    let planned = tally(&p.owner_after);
    let really = real.map(|r| tally(&r.owner_after));
    let mut all: Vec<String> = p.masters.iter().map(|(a, _)| a.clone()).collect();
    if let Change::Add { node, .. } = &outcome.change {
        all.push(node.clone());
    }
    let mut per = Table::new(&[
        "master",
        "slots before",
        "keys before",
        "slots after (plan)",
        "keys after (plan)",
        "keys after (real)",
    ]);
    let get = |t: &HashMap<String, (usize, u64)>, a: &str| t.get(a).copied().unwrap_or((0, 0));
    for address in &all {
        let (sb, kb) = get(&before, address);
        let (sa, ka) = get(&planned, address);
        per.push(vec![
            address.clone(),
            sb.to_string(),
            kb.to_string(),
            sa.to_string(),
            ka.to_string(),
            really
                .as_ref()
                .map_or("-".to_string(), |t| get(t, address).1.to_string()),
        ]);
    }
    let entry = &p.entry;
    let slots_planned: usize = p.plan.iter().map(|m| m.slots.len()).sum();
    let mut plan_lines = String::new();
    for m in &p.plan {
        plan_lines.push_str(&format!(
            "- {} slots from {} to {}\n",
            m.slots.len(),
            m.from.as_deref().unwrap_or("(unassigned)"),
            m.to.as_deref().unwrap_or("(unassigned)")
        ));
    }
    // The slot scheme key by key: each mirror copy's RING.MOVES evaluated the same plan.
    let per_key: Vec<String> = p
        .rings
        .iter()
        .map(|(_, sums)| sums.slots_moved.to_string())
        .collect();
    let agree = p
        .rings
        .iter()
        .all(|(_, sums)| sums.slots_moved == p.slots_moved);
    let mut check = format!(
        "The slot scheme evaluated key by key on the masters (`RING.MOVES ... SLOTS` on each \
         mirror copy): {} keys moved; {} the sum of the moved slots' counts.\n",
        per_key.join(", "),
        if agree {
            "equal to"
        } else {
            "**not equal to**"
        }
    );
    for (flavour, sums) in &p.rings {
        if sums.members != p.keys {
            check.push_str(&format!(
                "\n**The {flavour} pass evaluated {} keys where the masters counted {}**: keys \
                 were written or deleted during the run, or the user may not read some.\n",
                sums.members, p.keys
            ));
        }
    }
    let mut md = format!(
        "# ringslot on a Redis Cluster: {change}\n\n\
         {} masters, {} keys. The plan (`RING.PLAN` on a mirror of the live cluster, made on \
         {entry}: what `redis-cli --cluster rebalance {entry}` does) moves {slots_planned} \
         slots:\n\n{plan_lines}\n{}\n{check}\n## Keys per master (slot \
         scheme)\n\n{}",
        p.masters.len(),
        p.keys,
        t.markdown(),
        per.markdown()
    );
    let mut times = Table::new(&["step", "seconds"]);
    for (step, secs) in &p.steps {
        times.push(vec![format!("- {step}"), fixed(*secs, 2)]);
    }
    times.push(vec![
        "prediction (topology, counts, plan, every key under every ring)".into(),
        fixed(p.seconds, 2),
    ]);
    if let Some(r) = real {
        times.push(vec![
            "real change (add-node or drain, rebalance, del-node, convergence)".into(),
            fixed(r.seconds, 2),
        ]);
        times.push(vec![
            "prediction / real".into(),
            fixed(p.seconds / r.seconds.max(1e-9), 3),
        ]);
        let same_owners = r.owner_after == p.owner_after;
        md.push_str(&format!(
            "\n## Predicted against real\n\n\
             - keys the slot scheme moves: predicted {}, real {} (per-slot counts before, slot \
             owners after){}\n\
             - keys moved between old masters: predicted {}, real {}\n\
             - slot owners after the real rebalance {} the plan's\n\
             - redis-cli printed: {}\n",
            p.slots_moved,
            r.moved,
            r.scan_moved.map_or(String::new(), |n| format!(
                "; a SCAN of every master before and after: {n}"
            )),
            p.slots_between,
            r.between,
            if same_owners {
                "equal"
            } else {
                "**differ from**"
            },
            if r.moves_printed.is_empty() {
                "nothing moved".to_string()
            } else {
                r.moves_printed.join("; ")
            }
        ));
    }
    md.push_str(&format!("\n## Time\n\n{}", times.markdown()));
    report::write(dir, &format!("{name}.md"), &md)?;
    report::write(dir, &format!("{name}.csv"), &t.csv())?;
    // The chart: moved fraction per scheme against the ideal, and keys per master.
    let mut schemes = vec!["slots".to_string()];
    let mut predicted = vec![(0.0, fraction(p.slots_moved, p.keys))];
    for (k, (flavour, sums)) in p.rings.iter().enumerate() {
        schemes.push(flavour.clone());
        predicted.push(((k + 1) as f64, fraction(sums.ring_moved, sums.members)));
    }
    if let Some((_, sums)) = p.rings.first() {
        schemes.push("modulo".into());
        predicted.push((
            (schemes.len() - 1) as f64,
            fraction(sums.modulo_moved, sums.members),
        ));
    }
    let last = (schemes.len() - 1) as f64;
    let mut left = vec![
        Series {
            markers_only: true,
            ..Series::line("predicted".into(), predicted, 0)
        },
        Series::reference("ideal", p.ideal, 0.0, last),
    ];
    if let Some(r) = real {
        left.push(Series {
            markers_only: true,
            dashed: true,
            ..Series::line(
                "real (slots)".into(),
                vec![(0.0, fraction(r.moved, p.keys))],
                1,
            )
        });
    }
    let point = |t: &HashMap<String, (usize, u64)>| -> Vec<(f64, f64)> {
        all.iter()
            .enumerate()
            .map(|(i, a)| (i as f64, get(t, a).1 as f64))
            .collect()
    };
    let mut right = vec![
        Series {
            markers_only: true,
            ..Series::line("before".into(), point(&before), 2)
        },
        Series {
            markers_only: true,
            dashed: true,
            ..Series::line("after (plan)".into(), point(&planned), 3)
        },
    ];
    if let Some(t) = &really {
        right.push(Series {
            markers_only: true,
            ..Series::line("after (real)".into(), point(t), 4)
        });
    }
    let title = format!("{} masters, {} keys: {change}", p.masters.len(), p.keys);
    report::svg_panels(
        &dir.join(format!("{name}.svg")),
        &title,
        vec![
            Panel {
                chart: Chart {
                    title: "Moved fraction per scheme",
                    x_label: "scheme",
                    y_label: "keys moved / keys",
                    x_log: false,
                    y_log: false,
                    x_names: schemes,
                    legend: SeriesLabelPosition::UpperLeft,
                },
                series: left,
                width: 1,
            },
            Panel {
                chart: Chart {
                    title: "Keys per master (slot scheme)",
                    x_label: "master",
                    y_label: "keys",
                    x_log: false,
                    y_log: false,
                    x_names: all.clone(),
                    legend: SeriesLabelPosition::LowerRight,
                },
                series: right,
                width: 1,
            },
        ],
    )?;
    Ok(md)
}
