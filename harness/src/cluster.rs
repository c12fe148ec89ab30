//! Real Redis Clusters for tests and benchmarks: `redis-cli --cluster` runs with a time limit,
//! `CLUSTER NODES` parsed (by the engine's parser), and a wait for full convergence (every node knows every other and
//! all agree on the slot table: `cluster_state:ok` alone is not enough before a rebalance).

use crate::server::{Error, Server, ServerBuilder};
pub use ringslot_engine::cluster::ClusterNode;
use ringslot_engine::SLOT_COUNT;
pub use ringslot_tool::reply::is_valkey_9;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Number of hash slots.
pub const SLOTS: usize = SLOT_COUNT;

/// `CLUSTER NODES` parsed by the engine (one parser for the module, the benchmark and the
/// tests), with a harness error.
pub fn parse_cluster_nodes(text: &str) -> Result<Vec<ClusterNode>, Error> {
    ringslot_engine::cluster::parse_cluster_nodes(text).map_err(|e| Error(format!("{e}: {text}")))
}

/// The owner (`ip:port`) of every slot in a parsed `CLUSTER NODES` (the engine's).
pub use ringslot_engine::cluster::slot_owners as owners;

/// The outcome of one `redis-cli` run.
#[derive(Debug, Clone)]
pub struct CliRun {
    /// It exited with status 0.
    pub success: bool,
    /// What it printed.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

/// Runs `redis-cli args...` with its output in files (a rebalance prints a `#` per moved
/// slot), killed after `limit`. Errors: no redis-cli, or the time limit.
pub fn redis_cli(args: &[String], limit: Duration) -> Result<CliRun, Error> {
    let dir = tempfile::tempdir().map_err(|e| Error(format!("temp dir: {e}")))?;
    let (out_path, err_path): (PathBuf, PathBuf) = (dir.path().join("out"), dir.path().join("err"));
    let file = |p: &PathBuf| std::fs::File::create(p).map_err(|e| Error(e.to_string()));
    let mut child = Command::new("redis-cli")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(file(&out_path)?))
        .stderr(Stdio::from(file(&err_path)?))
        .spawn()
        .map_err(|e| Error(format!("cannot run redis-cli ({e}): install redis-tools")))?;
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let tail = |p: &PathBuf| {
                let text = std::fs::read_to_string(p).unwrap_or_default();
                let start = text.len().saturating_sub(2000);
                text.get(start..).unwrap_or_default().to_string()
            };
            return Err(Error(format!(
                "redis-cli {args:?} did not finish in {limit:?}; the end of its stdout:\n{}\nstderr:\n{}",
                tail(&out_path),
                tail(&err_path)
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(CliRun {
        success: status.success(),
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    })
}

/// [`redis_cli`] that must succeed.
pub fn redis_cli_ok(args: &[String], limit: Duration) -> Result<CliRun, Error> {
    let run = redis_cli(args, limit)?;
    if !run.success {
        return Err(Error(format!(
            "redis-cli {args:?} failed\nstdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        )));
    }
    Ok(run)
}

/// Owned strings from `&str`s, for redis-cli arguments.
pub fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The text reply of `args` on `server`; `None` when it cannot be had (a server still
/// starting, say).
fn text_reply(server: &Server, args: &[&str]) -> Option<String> {
    let mut con = server.try_client().ok()?;
    let mut cmd = redis::cmd(args.first()?);
    for a in args.iter().skip(1) {
        cmd.arg(*a);
    }
    cmd.query::<String>(&mut con).ok()
}

/// `CLUSTER NODES` of `server`.
pub fn cluster_nodes(server: &Server) -> Result<String, Error> {
    let mut con = server
        .try_client()
        .map_err(|e| Error(format!("{}: {e}", server.address())))?;
    redis::cmd("CLUSTER")
        .arg("NODES")
        .query::<String>(&mut con)
        .map_err(|e| Error(format!("{}: CLUSTER NODES: {e}", server.address())))
}

/// Waits (at most `limit`) until every server of `members` lists exactly their addresses in
/// `CLUSTER NODES`, none failing or in handshake, all agree on which are masters (a node just
/// added as a replica may still be listed as a master by some), all report
/// `cluster_state:ok` and the same slot table with every slot served, and `redis-cli
/// --cluster check` through the first passes; returns the table.
pub fn wait_converged(members: &[&Server], limit: Duration) -> Result<Vec<Option<String>>, Error> {
    let want: BTreeSet<String> = members.iter().map(|s| s.address()).collect();
    let deadline = Instant::now() + limit;
    let mut last = String::new();
    loop {
        let mut tables = Vec::new();
        let mut roles = Vec::new();
        let mut ok = true;
        for s in members {
            match cluster_nodes(s) {
                Ok(text) => {
                    let nodes = parse_cluster_nodes(&text)?;
                    let seen: BTreeSet<String> = nodes.iter().map(|n| n.address.clone()).collect();
                    let healthy = nodes.iter().all(|n| n.failing_flag().is_none());
                    if seen != want || !healthy {
                        ok = false;
                        last = format!("{} sees:\n{text}", s.address());
                    }
                    let masters: BTreeSet<String> = nodes
                        .iter()
                        .filter(|n| n.has("master"))
                        .map(|n| n.address.clone())
                        .collect();
                    roles.push(masters);
                    tables.push(owners(&nodes));
                }
                Err(e) => {
                    ok = false;
                    last = e.0;
                }
            }
        }
        // A master that started less than two seconds ago reports the cluster down (Redis'
        // CLUSTER_WRITABLE_DELAY) and refuses the keys a rebalance sends it.
        for s in members {
            let state_ok = text_reply(s, &["CLUSTER", "INFO"])
                .is_some_and(|info| info.contains("cluster_state:ok"));
            if !state_ok {
                ok = false;
                last = format!("{} does not report cluster_state:ok", s.address());
            }
        }
        let agree =
            tables.windows(2).all(|w| w[0] == w[1]) && roles.windows(2).all(|w| w[0] == w[1]);
        let full = tables
            .first()
            .is_some_and(|t| t.iter().all(Option::is_some));
        if ok && agree && full {
            if let Some(entry) = members.first() {
                let mut args = entry.cli_args();
                args.extend(strings(&["--cluster", "check", &entry.address()]));
                let check = redis_cli(&args, Duration::from_secs(30))?;
                if check.success
                    && !check.stdout.contains("[ERR]")
                    && !check.stdout.contains("[WARNING]")
                    && check.stdout.contains("All 16384 slots covered")
                {
                    return Ok(tables.swap_remove(0));
                }
                last = format!("check:\n{}\n{}", check.stdout, check.stderr);
            }
        } else if ok && !agree {
            last = "the nodes disagree on the slot table or on which are masters".into();
        }
        if Instant::now() > deadline {
            return Err(Error(format!("the cluster did not converge: {last}")));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A cluster of servers started by [`Cluster::start`], stopped when dropped.
pub struct Cluster {
    /// Its servers, in the order they were started (the first is the entry point).
    pub nodes: Vec<Server>,
}

impl Cluster {
    /// Starts `masters` cluster-enabled servers made by `builder` (`.cluster()` is added),
    /// joins them with `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes` and
    /// waits for convergence.
    pub fn start(masters: usize, builder: impl Fn() -> ServerBuilder) -> Result<Cluster, Error> {
        let mut nodes = Vec::with_capacity(masters);
        for _ in 0..masters {
            nodes.push(
                builder()
                    .cluster()
                    .args(&["--cluster-node-timeout", "5000"])
                    .start()?,
            );
        }
        let cluster = Cluster { nodes };
        let mut args = cluster.nodes[0].cli_args();
        args.extend(strings(&["--cluster", "create"]));
        args.extend(cluster.nodes.iter().map(Server::address));
        args.extend(strings(&["--cluster-replicas", "0", "--cluster-yes"]));
        redis_cli_ok(&args, Duration::from_secs(60))?;
        cluster.converge()?;
        Ok(cluster)
    }

    /// Waits for all of its nodes to converge (see [`wait_converged`]); returns the table.
    pub fn converge(&self) -> Result<Vec<Option<String>>, Error> {
        let members: Vec<&Server> = self.nodes.iter().collect();
        wait_converged(&members, Duration::from_secs(60))
    }

    /// Starts one more server made by `builder` and joins it with `redis-cli --cluster
    /// add-node <it> <node 0> <extra...>`; returns its index (convergence is the caller's).
    fn join(
        &mut self,
        builder: impl Fn() -> ServerBuilder,
        extra: &[&str],
    ) -> Result<usize, Error> {
        let node = builder()
            .cluster()
            .args(&["--cluster-node-timeout", "5000"])
            .start()?;
        self.join_server(node, extra)
    }

    /// Joins the running `node` with `redis-cli --cluster add-node <it> <node 0> <extra...>`;
    /// returns its index (convergence is the caller's).
    fn join_server(&mut self, node: Server, extra: &[&str]) -> Result<usize, Error> {
        let mut args = self.nodes[0].cli_args();
        args.extend(strings(&[
            "--cluster",
            "add-node",
            &node.address(),
            &self.nodes[0].address(),
        ]));
        args.extend(strings(extra));
        self.nodes.push(node);
        redis_cli_ok(&args, Duration::from_secs(60))?;
        Ok(self.nodes.len() - 1)
    }

    /// Waits until every node knows node `index` and agrees (after an add-node, which returns
    /// before every node has met the new one); returns `index`.
    fn converged_with(&self, index: usize) -> Result<usize, Error> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match self.converge() {
                Ok(_) => return Ok(index),
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// Starts one more server made by `builder`, adds it as an empty master
    /// (`redis-cli --cluster add-node`) and waits for convergence; returns its index.
    pub fn add_node(&mut self, builder: impl Fn() -> ServerBuilder) -> Result<usize, Error> {
        let index = self.join(builder, &[])?;
        self.converged_with(index)
    }

    /// Adds the running `server` (started with `.cluster()`) as an empty master
    /// (`redis-cli --cluster add-node`) and waits for convergence; returns its index.
    pub fn add_server(&mut self, server: Server) -> Result<usize, Error> {
        let index = self.join_server(server, &[])?;
        self.converged_with(index)
    }

    /// Starts one more server made by `builder`, adds it as a replica of node `master`
    /// (`redis-cli --cluster add-node ... --cluster-slave --cluster-master-id`), waits for
    /// convergence and for its link to the master to be up; returns its index.
    pub fn add_replica(
        &mut self,
        master: usize,
        builder: impl Fn() -> ServerBuilder,
    ) -> Result<usize, Error> {
        let id = self.node_id(master)?;
        let index = self.join(builder, &["--cluster-slave", "--cluster-master-id", &id])?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let linked = text_reply(&self.nodes[index], &["INFO", "replication"])
                .is_some_and(|info| info.contains("master_link_status:up"));
            if linked && self.converge().is_ok() {
                return Ok(index);
            }
            if Instant::now() > deadline {
                return Err(Error(format!(
                    "the replica {} did not join: {}",
                    self.nodes[index].address(),
                    self.converge().err().map(|e| e.0).unwrap_or_default()
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The node id of node `i` (`CLUSTER MYID`).
    pub fn node_id(&self, i: usize) -> Result<String, Error> {
        let mut con = self.nodes[i]
            .try_client()
            .map_err(|e| Error(e.to_string()))?;
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut con)
            .map_err(|e| Error(e.to_string()))
    }

    /// `redis-cli --cluster rebalance <first node> --cluster-use-empty-masters <extra...>`.
    pub fn rebalance(&self, extra: &[String]) -> Result<CliRun, Error> {
        let mut args = self.nodes[0].cli_args();
        args.extend(strings(&[
            "--cluster",
            "rebalance",
            &self.nodes[0].address(),
            "--cluster-use-empty-masters",
        ]));
        args.extend_from_slice(extra);
        redis_cli_ok(&args, Duration::from_secs(300))
    }

    /// Drains node `i` (a rebalance with its weight 0), removes it from the cluster
    /// (`redis-cli --cluster del-node`), stops it, and waits for the others to converge.
    /// Node 0 is the entry point of every redis-cli run and cannot be removed.
    pub fn drain_and_remove(&mut self, i: usize, extra: &[String]) -> Result<CliRun, Error> {
        if i == 0 || i >= self.nodes.len() {
            return Err(Error(format!("cannot remove node {i}")));
        }
        let id = self.node_id(i)?;
        let mut args = strings(&["--cluster-weight", &format!("{id}=0")]);
        args.extend_from_slice(extra);
        let run = self.rebalance(&args)?;
        self.converge()?;
        let mut del = self.nodes[0].cli_args();
        del.extend(strings(&[
            "--cluster",
            "del-node",
            &self.nodes[0].address(),
            &id,
        ]));
        redis_cli_ok(&del, Duration::from_secs(60))?;
        drop(self.nodes.remove(i));
        self.converge()?;
        Ok(run)
    }
}

/// One job of Valkey's `CLUSTER GETSLOTMIGRATIONS` (Valkey 9): its fields as text (`name`,
/// `operation` IMPORT or EXPORT, `slot_ranges` as `0-100 200-300`, `source_node`,
/// `target_node`, `state`, `message`, `cow_size` in bytes, the times in seconds, ...), as the
/// operator's tool reads it.
pub use ringslot_tool::cluster::migrations::Job as SlotMigration;

/// Whether a job of [`slot_migrations`] is over: `success`, `cancelled` or `failed`
/// (valkey-io/valkey `src/cluster_migrateslots.c`, the terminal states).
pub use ringslot_tool::cluster::migrations::finished as migration_finished;

/// The jobs `CLUSTER GETSLOTMIGRATIONS` lists on `server`, newest first (Valkey adds each new
/// job at the head of its list). Error: a server without the command (Redis, Valkey before 9).
pub fn slot_migrations(server: &Server) -> Result<Vec<SlotMigration>, Error> {
    let reply = server
        .try_client()
        .and_then(|mut con| {
            redis::cmd("CLUSTER")
                .arg("GETSLOTMIGRATIONS")
                .query(&mut con)
        })
        .map_err(|e| {
            Error(format!(
                "{}: {}",
                server.address(),
                crate::client::error_text(&e)
            ))
        })?;
    ringslot_tool::cluster::migrations::jobs_of(&reply).map_err(|e| Error(e.to_string()))
}

/// Whether `server` has Valkey's atomic slot migration (`CLUSTER MIGRATESLOTS`): Valkey 9 or
/// later, told by `INFO server`'s `server_name` and `valkey_version`.
pub fn has_atomic_slot_migration(server: &Server) -> bool {
    is_valkey_9(&text_reply(server, &["INFO", "server"]).unwrap_or_default())
}

impl Cluster {
    /// Sends `CLUSTER MIGRATESLOTS SLOTSRANGE start end ... NODE <id of target>` to node
    /// `source` (Valkey 9's atomic slot migration, started by the source). Returns the name of
    /// the job it started (as `CLUSTER GETSLOTMIGRATIONS` lists it on both sides), or the
    /// error text the server replied.
    pub fn migrate_slots(
        &self,
        source: usize,
        ranges: &[(u16, u16)],
        target: usize,
    ) -> Result<Result<String, String>, Error> {
        let id = self.node_id(target)?;
        let server = &self.nodes[source];
        let known: BTreeSet<String> = slot_migrations(server)?
            .into_iter()
            .filter_map(|job| job.get("name").cloned())
            .collect();
        let mut con = server.try_client().map_err(|e| Error(e.to_string()))?;
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("MIGRATESLOTS").arg("SLOTSRANGE");
        for &(start, end) in ranges {
            cmd.arg(start).arg(end);
        }
        cmd.arg("NODE").arg(&id);
        if let Err(e) = cmd.query::<String>(&mut con) {
            return Ok(Err(crate::client::error_text(&e)));
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let new = slot_migrations(server)?
                .into_iter()
                .filter_map(|job| job.get("name").cloned())
                .find(|name| !known.contains(name));
            if let Some(name) = new {
                return Ok(Ok(name));
            }
            if Instant::now() > deadline {
                return Err(Error(format!(
                    "{}: CLUSTER MIGRATESLOTS answered OK but lists no new job",
                    server.address()
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Polls `CLUSTER GETSLOTMIGRATIONS` on node `node` every 100 ms (as valkey-cli's
    /// atomic path does) until the job `name` is over ([`migration_finished`]), at most
    /// `limit`; returns it.
    pub fn wait_slot_migration(
        &self,
        node: usize,
        name: &str,
        limit: Duration,
    ) -> Result<SlotMigration, Error> {
        let deadline = Instant::now() + limit;
        loop {
            let jobs = slot_migrations(&self.nodes[node])?;
            let job = jobs
                .iter()
                .find(|j| j.get("name").map(String::as_str) == Some(name));
            if let Some(job) = job.filter(|j| migration_finished(j)) {
                return Ok(job.clone());
            }
            if Instant::now() > deadline {
                return Err(Error(format!(
                    "the atomic slot migration {name} of {} did not end in {limit:?}: {job:?}",
                    self.nodes[node].address()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
