//! `--local`: a throw-away cluster on a fixed block of loopback ports (so that its masters'
//! names, which the rings hash, are the same from run to run), loaded with keys of varied
//! sizes (and a hot hash tag if asked), the change predicted and then made for real with
//! `redis-cli --cluster` (`add-node` each joining master and one `rebalance
//! --cluster-use-empty-masters`; or a rebalance draining the leaving masters, weight 0 each,
//! and a `del-node` each), and what really moved counted: keys from the per-slot counts and
//! slot owners before and after, key by key with a `SCAN` of every master when the keyspace is
//! small, with the `DUMP` bytes of each key that moved, and the bytes the receiving masters
//! read from the network meanwhile.

use super::real::{Hold, Outcome, Real, RealMemory};
use super::CHILDREN;
use anyhow::{anyhow, bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use ringslot_engine::key_slot;
use ringslot_harness::client::scan_keys;
use ringslot_harness::cluster::{redis_cli_ok, Cluster};
use ringslot_harness::redis;
use ringslot_harness::{Server, ServerBuilder};
use ringslot_tool::cluster::args;
use ringslot_tool::cluster::link::CLIENT_NAME;
use ringslot_tool::cluster::reads::slot_counts;
use ringslot_tool::cluster::{read_topology, Access, LiveCluster, TlsFiles};
use ringslot_tool::predict::method::{ranges, Method};
use ringslot_tool::predict::steps::StepCost;
use ringslot_tool::predict::{predict, MasterChange, Options};
use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A local run: the cluster and the change.
#[derive(Debug, Clone)]
pub(super) struct Local {
    /// Masters at the start.
    pub(super) masters: usize,
    /// Masters that join (one rebalance), or that leave (the last ones).
    pub(super) join: usize,
    pub(super) leave: usize,
    /// The joining masters are added before the prediction, which predicts the pending
    /// rebalance.
    pub(super) pending: bool,
    /// `--cluster-threshold` of the pending rebalance.
    pub(super) threshold: f64,
    /// Keys `key:0` ... and keys of the hot tag `{hot}:0` ...
    pub(super) keys: u64,
    pub(super) hot_keys: u64,
    /// The first port.
    pub(super) base_port: u16,
    /// Predict with the module and read-only.
    pub(super) both_modes: bool,
    /// `SCAN` every master before and after when the keys are at most this.
    pub(super) scan_limit: u64,
    /// redis-cli's `--cluster-pipeline` for the real rebalance.
    pub(super) pipeline: u32,
}

/// `used_memory` and `used_memory_peak` of a server, from `INFO memory`.
fn memory_of(con: &mut redis::Connection) -> Result<(f64, f64)> {
    let info: String = redis::cmd("INFO").arg("memory").query(con)?;
    let field = |name: &str| {
        ringslot_tool::reply::info_field(&info, name)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok((field("used_memory"), field("used_memory_peak")))
}

/// Samples the `used_memory` of `servers` every 100 ms on a thread of its own until
/// [`MemorySampler::finish`]; keeps each one's highest.
struct MemorySampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<f64>>,
}

impl MemorySampler {
    fn start(servers: &[&Server]) -> Result<MemorySampler> {
        let mut cons = servers
            .iter()
            .map(|s| s.try_client().map_err(|e| anyhow!("{}: {e}", s.address())))
            .collect::<Result<Vec<_>>>()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut highest = vec![0.0f64; cons.len()];
            loop {
                for (con, high) in cons.iter_mut().zip(highest.iter_mut()) {
                    if let Ok((used, _)) = memory_of(con) {
                        *high = high.max(used);
                    }
                }
                if stopped.load(Ordering::SeqCst) {
                    return highest;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Ok(MemorySampler { stop, thread })
    }

    fn finish(self) -> Vec<f64> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap_or_default()
    }
}

/// Moves the slots of `plan` as `valkey-cli --cluster rebalance
/// --cluster-use-atomic-slot-migration` does (valkey-io/valkey#2755): one `CLUSTER
/// MIGRATESLOTS` a move, its slots as ranges, sent to the source, polled every 100 ms until
/// over, one after another. Returns a line per job and the jobs' `cow_size` summed. Error: a
/// job that does not succeed.
fn atomic_rebalance(cluster: &Cluster, plan: &[StepCost]) -> Result<(Vec<String>, u64)> {
    let index = |address: &Option<String>| {
        address
            .as_ref()
            .and_then(|a| cluster.nodes.iter().position(|n| n.address() == *a))
            .ok_or_else(|| anyhow!("{address:?} is not a master of ours"))
    };
    let (mut lines, mut cow) = (Vec::new(), 0u64);
    for m in plan {
        let (from, to) = (index(&m.from)?, index(&m.to)?);
        let ranges = ranges(&m.slots);
        let name = cluster.migrate_slots(from, &ranges, to)?.map_err(|e| {
            anyhow!(
                "CLUSTER MIGRATESLOTS on {}: {e}",
                cluster.nodes[from].address()
            )
        })?;
        let job = cluster.wait_slot_migration(from, &name, Duration::from_secs(3600))?;
        if job.get("state").map(String::as_str) != Some("success") {
            bail!("the atomic slot migration {name} did not succeed: {job:?}");
        }
        cow += job
            .get("cow_size")
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        lines.push(format!(
            "MIGRATESLOTS of {} slots ({} ranges) from {} to {}",
            m.slots.len(),
            ranges.len(),
            cluster.nodes[from].address(),
            cluster.nodes[to].address()
        ));
    }
    Ok((lines, cow))
}

/// The value of `key:i`: 16 to 1024 bytes (the length varied by a multiplicative hash of
/// `i`) of a xorshift stream seeded by `i`, which `DUMP`'s LZF compression cannot shrink, so
/// that the bytes a move carries are those of the values.
fn value_of(i: u64) -> Vec<u8> {
    let len = 16 + (i.wrapping_mul(2_654_435_761) >> 7) % 1009;
    noise(i, len as usize)
}

/// `len` bytes of a xorshift64 stream seeded by `seed`.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Writes `count` keys `key:0..` and `hot` keys `{hot}:0..` (4 KiB values) into their
/// masters, masters in parallel.
pub(super) fn load_keys(topo: &LiveCluster, count: u64, hot: u64) -> Result<()> {
    let mut per_master: Vec<Vec<(String, Vec<u8>)>> = vec![Vec::new(); topo.masters.len()];
    let mut place = |key: String, value: Vec<u8>| {
        let slot = key_slot(key.as_bytes());
        if let Some(Some(m)) = topo.owner.get(usize::from(slot)) {
            per_master[*m].push((key, value));
        }
    };
    for i in 0..count {
        place(format!("key:{i}"), value_of(i));
    }
    for i in 0..hot {
        place(format!("{{hot}}:{i}"), noise(u64::MAX - i, 4096));
    }
    let bar = ProgressBar::new(count + hot);
    bar.set_style(
        ProgressStyle::with_template("cluster: loading keys [{bar:30}] {pos}/{len}, ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = topo
            .masters
            .iter()
            .zip(&per_master)
            .map(|(m, keys)| {
                let bar = bar.clone();
                scope.spawn(move || -> Result<()> {
                    let mut con = m.link.connect()?.into_raw();
                    for part in keys.chunks(5_000) {
                        let mut pipe = redis::pipe();
                        for (k, v) in part {
                            pipe.cmd("SET").arg(k).arg(v).ignore();
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

/// Every key of every master (`SCAN`), with its master's address.
pub(super) fn scan_all(topo: &LiveCluster) -> Result<HashMap<Vec<u8>, String>> {
    let mut all = HashMap::new();
    for m in &topo.masters {
        let mut con = m.link.connect()?.into_raw();
        scan_keys(&mut con, "*", |_: &mut redis::Connection, keys| {
            for k in keys {
                all.insert(k, m.address.clone());
            }
            Ok::<_, redis::RedisError>(())
        })
        .map_err(|e| anyhow!("{}: SCAN: {e}", m.address))?;
    }
    Ok(all)
}

/// The sum of the `DUMP` lengths of `keys` (name, master) on their masters.
fn dump_total(topo: &LiveCluster, keys: &[(&Vec<u8>, &String)]) -> Result<u64> {
    let mut by_master: HashMap<&String, Vec<&Vec<u8>>> = HashMap::new();
    for (k, m) in keys {
        by_master.entry(m).or_default().push(k);
    }
    let mut total = 0u64;
    for m in &topo.masters {
        let Some(names) = by_master.get(&m.address) else {
            continue;
        };
        let mut con = m.link.connect()?.into_raw();
        for part in names.chunks(1000) {
            let mut pipe = redis::pipe();
            for k in part {
                pipe.cmd("DUMP").arg(*k);
            }
            let payloads: Vec<Option<Vec<u8>>> = pipe
                .query(&mut con)
                .map_err(|e| anyhow!("{}: DUMP: {e}", m.address))?;
            total += payloads
                .iter()
                .flatten()
                .map(|p| p.len() as u64)
                .sum::<u64>();
        }
    }
    Ok(total)
}

/// `total_net_input_bytes` of each master.
fn net_input(topo: &LiveCluster) -> Result<HashMap<String, u64>> {
    let mut out = HashMap::new();
    for m in &topo.masters {
        let mut con = m.link.connect()?.into_raw();
        let info: String = redis::cmd("INFO")
            .arg("stats")
            .query(&mut con)
            .map_err(|e| anyhow!("{}: INFO stats: {e}", m.address))?;
        let n = info
            .lines()
            .find_map(|l| l.strip_prefix("total_net_input_bytes:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        out.insert(m.address.clone(), n);
    }
    Ok(out)
}

/// A local run's cluster: servers started here, registered for the Ctrl-C handler.
fn register(pids: impl IntoIterator<Item = u32>) {
    if let Ok(mut c) = CHILDREN.lock() {
        c.extend(pids);
    }
}

/// Runs `plan` on masters made by `builder` (see the module docs).
pub(super) fn local(
    plan: &Local,
    builder: &(dyn Fn() -> ServerBuilder + Sync),
    opts: &Options,
) -> Result<Outcome> {
    if plan.masters < 3 || plan.leave >= plan.masters {
        bail!(
            "--local needs at least 3 masters (redis-cli --cluster create refuses fewer), and \
             more than --leave"
        );
    }
    if plan.join == 0 && plan.leave == 0 {
        bail!("--join needs at least 1 master");
    }
    let total = plan.masters + plan.join;
    let last = u32::from(plan.base_port) + total as u32 - 1;
    if last > 65535 {
        bail!(
            "--base-port {} leaves no room for {total} masters",
            plan.base_port
        );
    }
    for port in plan.base_port..=last as u16 {
        if TcpListener::bind(("127.0.0.1", port)).is_err() {
            bail!(
                "port {port} is in use: the local masters take ports {}..{last} (their names \
                 are hashed by the rings; give --base-port for another block)",
                plan.base_port
            );
        }
    }
    let next = AtomicU16::new(plan.base_port);
    let at_port = || builder().port(next.fetch_add(1, Ordering::SeqCst));
    eprintln!("cluster: starting {} masters ...", plan.masters);
    let mut cluster = Cluster::start(plan.masters, at_port)?;
    register(cluster.nodes.iter().map(Server::pid));
    // The benchmark's own loads and checks may take long on a busy machine: a generous bound.
    let seed = Access::new(
        &cluster.nodes[0].url(),
        None,
        None,
        &TlsFiles::default(),
        Duration::from_secs(300),
    )?;
    let topo = read_topology(&seed)?;
    let started = Instant::now();
    load_keys(&topo, plan.keys, plan.hot_keys)?;
    eprintln!(
        "cluster: loaded {} keys in {:.1} s",
        plan.keys + plan.hot_keys,
        started.elapsed().as_secs_f64()
    );
    // The joining masters: started now, so that their addresses are known.
    let mut joining = Vec::new();
    for _ in 0..plan.join {
        let server = at_port()
            .cluster()
            .args(&["--cluster-node-timeout", "5000"])
            .start()?;
        register([server.pid()]);
        joining.push(server);
    }
    let joining_names: Vec<String> = joining.iter().map(Server::address).collect();
    if plan.pending {
        for server in joining.drain(..) {
            cluster.add_server(server)?;
        }
    }
    let leaving: Vec<String> = topo
        .masters
        .iter()
        .rev()
        .take(plan.leave)
        .map(|m| m.address.clone())
        .collect();
    let change = if plan.leave > 0 {
        MasterChange::Del {
            nodes: leaving.clone(),
        }
    } else if plan.pending {
        MasterChange::Rebalance {
            threshold: plan.threshold,
        }
    } else {
        MasterChange::Add {
            nodes: joining_names,
            weight: None,
        }
    };
    let before_topo = read_topology(&seed)?;
    let counts = slot_counts(&before_topo)?;
    // What each prediction held the masters for: the tool's commands in SLOWLOG (10 ms and
    // more) and the module's background slices in the latency monitor (10 ms and more).
    watch_holds(&before_topo)?;
    let prediction = predict(&seed, &change, opts)?;
    let mut holds = vec![(mode_name(opts), read_holds(&before_topo)?)];
    let read_only = if plan.both_modes {
        let ro = Options {
            with_module: false,
            ..opts.clone()
        };
        watch_holds(&before_topo)?;
        let p = predict(&seed, &change, &ro)?;
        holds.push((mode_name(&ro), read_holds(&before_topo)?));
        Some(p)
    } else {
        None
    };
    let before_scan = if plan.keys + plan.hot_keys <= plan.scan_limit {
        Some(scan_all(&before_topo)?)
    } else {
        None
    };
    eprintln!("cluster: performing the change for real ...");
    let mut extra = args(&["--cluster-pipeline", &plan.pipeline.to_string()]);
    if plan.pending {
        extra.extend(args(&["--cluster-threshold", &plan.threshold.to_string()]));
    }
    let started = Instant::now();
    for server in joining {
        cluster.add_server(server)?;
    }
    let all_before = read_topology(&seed)?;
    let net_before = net_input(&all_before)?;
    let mut leaving_ids = Vec::new();
    for address in &leaving {
        let index = cluster
            .nodes
            .iter()
            .position(|n| n.address() == *address)
            .ok_or_else(|| anyhow!("{address} is not one of ours"))?;
        if index == 0 {
            bail!("the master to remove is the entry node");
        }
        // Redis 7.0 makes a master that loses its last slot a replica of the node that took
        // it (cluster-allow-replica-migration yes): mid-rebalance, redis-cli's next SETSLOT to
        // it fails ("Please use SETSLOT only with masters"). Drained masters keep their role.
        let mut con = cluster.nodes[index].client();
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-allow-replica-migration")
            .arg("no")
            .query::<()>(&mut con)?;
        let id = cluster.node_id(index)?;
        leaving_ids.push((index, id));
    }
    if !leaving_ids.is_empty() {
        extra.push("--cluster-weight".to_string());
        extra.extend(leaving_ids.iter().map(|(_, id)| format!("{id}=0")));
    }
    let mut memory: Vec<RealMemory> = Vec::new();
    for n in &cluster.nodes {
        let (before, _) = memory_of(&mut n.client())?;
        memory.push(RealMemory {
            address: n.address(),
            before,
            ..RealMemory::default()
        });
    }
    let sampler = MemorySampler::start(&cluster.nodes.iter().collect::<Vec<_>>())?;
    let rebalance_started = Instant::now();
    let (method, moves_printed, cow_bytes) = if opts.atomic {
        let (lines, cow) = atomic_rebalance(&cluster, &prediction.plan)?;
        (Method::Atomic, lines, cow)
    } else {
        let run = cluster.rebalance(&extra)?;
        let printed = run
            .stdout
            .lines()
            .filter(|l| l.contains("Moving") && l.contains("slots from"))
            .map(|l| strip_ansi(l).trim().trim_start_matches(">>> ").to_string())
            .collect();
        (Method::PerKey, printed, 0)
    };
    let rebalance_seconds = rebalance_started.elapsed().as_secs_f64();
    for (row, high) in memory.iter_mut().zip(sampler.finish()) {
        row.sampled_peak = high.max(row.before);
    }
    cluster.converge()?;
    for (row, n) in memory.iter_mut().zip(&cluster.nodes) {
        let (after, peak) = memory_of(&mut n.client())?;
        row.after = after;
        row.server_peak = peak;
    }
    let after_rebalance = read_topology(&seed)?;
    let net_after = net_input(&after_rebalance)?;
    for (_, id) in &leaving_ids {
        redis_cli_ok(
            &args(&["--cluster", "del-node", &cluster.nodes[0].address(), id]),
            Duration::from_secs(60),
        )?;
    }
    let mut gone: Vec<usize> = leaving_ids.iter().map(|(i, _)| *i).collect();
    gone.sort_unstable();
    for i in gone.into_iter().rev() {
        drop(cluster.nodes.remove(i));
    }
    cluster.converge()?;
    let seconds = started.elapsed().as_secs_f64();
    let after = read_topology(&seed)?;
    let owner_after: Vec<Option<String>> = after
        .owner
        .iter()
        .map(|o| o.map(|i| after.masters[i].address.clone()))
        .collect();
    let counts_after = slot_counts(&after)?;
    let mut keys_after: HashMap<String, u64> = HashMap::new();
    for (owner, n) in owner_after.iter().zip(&counts_after) {
        if let Some(o) = owner {
            *keys_after.entry(o.clone()).or_default() += n;
        }
    }
    let serves =
        |owners: &[Option<String>], a: &String| owners.iter().any(|o| o.as_ref() == Some(a));
    let (mut moved, mut between) = (0u64, 0u64);
    let old = |n: Option<&String>| {
        n.is_some_and(|n| {
            serves(&prediction.owner_before, n)
                && serves(&owner_after, n)
                && !change.named().contains(n)
        })
    };
    for ((before, now), count) in prediction
        .owner_before
        .iter()
        .zip(&owner_after)
        .zip(&counts)
    {
        if before != now {
            moved += count;
            if old(before.as_ref()) && old(now.as_ref()) {
                between += count;
            }
        }
    }
    // The receivers: masters that gained slots.
    let net_in: u64 = net_after
        .iter()
        .filter(|(a, _)| {
            prediction
                .owner_before
                .iter()
                .zip(&owner_after)
                .any(|(b, n)| n.as_ref() == Some(*a) && b.as_ref() != Some(*a))
        })
        .map(|(a, n)| n.saturating_sub(net_before.get(a).copied().unwrap_or(0)))
        .sum();
    let (scan_moved, scan_bytes) = match before_scan {
        Some(before) => {
            let now = scan_all(&after)?;
            if now.len() != before.len() {
                bail!(
                    "SCAN found {} keys after the change and {} before",
                    now.len(),
                    before.len()
                );
            }
            let moved_keys: Vec<(&Vec<u8>, &String)> = now
                .iter()
                .filter(|(k, m)| before.get(*k) != Some(*m))
                .collect();
            let bytes = dump_total(&after, &moved_keys)?;
            (Some(moved_keys.len() as u64), Some(bytes))
        }
        None => (None, None),
    };
    Ok(Outcome {
        prediction,
        read_only,
        real: Some(Real {
            moved,
            between,
            scan_moved,
            scan_bytes,
            net_in,
            owner_after,
            keys_after,
            rebalance_seconds,
            seconds,
            moves_printed,
            method,
            memory,
            cow_bytes,
            holds,
            load_average: load_average(),
        }),
        change,
    })
}

/// The host's load average (`/proc/loadavg`), where there is one.
fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// The way a prediction ran, as the holds table names it.
fn mode_name(opts: &Options) -> String {
    if opts.with_module {
        "with the module".into()
    } else {
        "read-only".into()
    }
}

/// Resets every master's `SLOWLOG` (threshold 10 ms) and latency monitor (threshold 10 ms),
/// before a prediction.
fn watch_holds(topo: &LiveCluster) -> Result<()> {
    for m in &topo.masters {
        let mut con = m.link.connect()?.into_raw();
        for args in [
            ["CONFIG", "SET", "slowlog-log-slower-than", "10000"].as_slice(),
            &["CONFIG", "SET", "slowlog-max-len", "1024"],
            &["SLOWLOG", "RESET"],
            &["CONFIG", "SET", "latency-monitor-threshold", "10"],
            &["LATENCY", "RESET"],
        ] {
            ringslot_tool::client::call(&mut con, args)
                .map_err(|e| anyhow!("{}: {}: {e}", m.address, args.join(" ")))?;
        }
    }
    Ok(())
}

/// What the prediction held each master for since [`watch_holds`]: its `SLOWLOG` entries of
/// the tool's connections (named [`CLIENT_NAME`]), the longest with its command, and the
/// longest background slice of the module (`LATENCY LATEST`, event `ringslot-slice`).
fn read_holds(topo: &LiveCluster) -> Result<Vec<Hold>> {
    let mut out = Vec::new();
    for m in &topo.masters {
        let mut con = m.link.connect()?.into_raw();
        let log: redis::Value = redis::cmd("SLOWLOG").arg("GET").arg(1024).query(&mut con)?;
        let mut hold = Hold {
            address: m.address.clone(),
            ..Hold::default()
        };
        for entry in ringslot_tool::reply::array(&log).unwrap_or_default() {
            let fields = ringslot_tool::reply::array(entry).unwrap_or_default();
            let name = fields
                .get(5)
                .and_then(|v| ringslot_tool::reply::text(v).ok())
                .unwrap_or_default();
            if name != CLIENT_NAME {
                continue;
            }
            let micros = fields
                .get(2)
                .and_then(|v| ringslot_tool::reply::int(v).ok())
                .unwrap_or(0);
            hold.slow_commands += 1;
            let ms = micros as f64 / 1000.0;
            if ms > hold.longest_command_ms {
                hold.longest_command_ms = ms;
                hold.longest_command = fields
                    .get(3)
                    .and_then(|v| ringslot_tool::reply::array(v).ok())
                    .unwrap_or_default()
                    .iter()
                    .take(4)
                    .filter_map(|a| ringslot_tool::reply::text(a).ok())
                    .map(|a| shortened(&a, 24))
                    .collect::<Vec<_>>()
                    .join(" ");
            }
        }
        let latest: redis::Value = redis::cmd("LATENCY").arg("LATEST").query(&mut con)?;
        for event in ringslot_tool::reply::array(&latest).unwrap_or_default() {
            let fields = ringslot_tool::reply::array(event).unwrap_or_default();
            let is_slice = fields
                .first()
                .and_then(|v| ringslot_tool::reply::text(v).ok())
                .is_some_and(|e| e == "ringslot-slice");
            if is_slice {
                hold.longest_slice_ms = fields
                    .get(3)
                    .and_then(|v| ringslot_tool::reply::int(v).ok())
                    .unwrap_or(0) as f64;
            }
        }
        out.push(hold);
    }
    Ok(out)
}

/// `text`, cut to at most `max` characters with "..." where it was cut (a script's source in
/// a command's words).
fn shortened(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max.saturating_sub(3)).collect();
    format!("{cut}...")
}

/// `line` without its ANSI colour sequences (redis-cli colours its output).
pub(super) fn strip_ansi(line: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_stripped_from_redis_cli_lines() {
        assert_eq!(
            strip_ansi("\u{1b}[29;1m>>> Rebalancing across 4 nodes.\u{1b}[0m"),
            ">>> Rebalancing across 4 nodes."
        );
        assert_eq!(strip_ansi("Moving 1366 slots"), "Moving 1366 slots");
    }

    #[test]
    fn values_are_16_to_1024_bytes() {
        let lens: Vec<usize> = (0..10_000).map(|i| value_of(i).len()).collect();
        assert_eq!(lens.iter().min(), Some(&16));
        assert_eq!(lens.iter().max(), Some(&1024));
        assert_eq!(value_of(7), value_of(7));
    }
}
