//! `ringslot apply PLAN`: carries out a plan by weight (`ringslot predict --by ... --json`)
//! on the live cluster, slot by slot, the way `redis-cli --cluster rebalance` moves a slot
//! (`moveSlot` in redis-cli.c): `CLUSTER SETSLOT s IMPORTING <source>` on the target,
//! `MIGRATING <target>` on the source, `GETKEYSINSLOT` and `MIGRATE ... KEYS` in batches
//! capped in keys and bytes (a `MIGRATE` blocks both nodes while it runs), then `SETSLOT s
//! NODE <target>` on the target, the source and every other master.
//!
//! Safe by construction: it starts only from a state a prefix of the plan reaches
//! ([`plan::position`]); it checks the cluster between slots (`cluster_state:ok`, no node
//! flagged `fail?`/`fail`, each master of the plan still a master with the same id) and
//! stops on a failover; an interrupted run (Ctrl-C, a killed process, a failed node) is
//! finished by running the same command again, which re-opens the slot where it was and goes
//! on; a key already on the target (`BUSYKEY`) is replaced only when both copies' `DUMP`
//! payloads are equal, else the run stops unless `--replace`. It writes nothing but the slot
//! moves: no key is created, changed or deleted except by `MIGRATE`.

pub mod atomic;
pub mod plan;

use crate::client::error_text;
use crate::link::Access;
use crate::predict::live::{nodes_of, run, s, tls_ports, Limiter, INTERRUPTED};
use crate::predict::permissions::{check, Need, APPLY_NEEDS, ATOMIC_NEEDS};
use anyhow::{anyhow, bail, Result};
use plan::{position, PlannedMove, Position, SlotPlan};
use redis::{Connection, Value};
use ringslot_engine::cluster::{slot_owners, ClusterNode};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// How the keys of a slot travel.
#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions {
    /// Keys a `GETKEYSINSLOT` asks for, and the most a `MIGRATE` carries.
    pub batch_keys: u32,
    /// The most `MEMORY USAGE` bytes a `MIGRATE` carries (one key at least, whatever its size).
    pub batch_bytes: u64,
    /// The most bytes a second the run moves (by `MEMORY USAGE`); 0: no limit.
    pub max_bytes_per_sec: u64,
    /// Replace a key the target already holds even when its copy differs from the source's.
    pub replace: bool,
}

/// Keys `GETKEYSINSLOT` asks for unless `--batch-keys` says otherwise (as many as one
/// `MIGRATE` carries).
pub const DEFAULT_BATCH_KEYS: u32 = 100;
/// Bytes a `MIGRATE` carries at most unless `--batch-bytes` says otherwise: 1 MiB, ~10 ms on a
/// 1 Gbit/s link, far below any `cluster-node-timeout`.
pub const DEFAULT_BATCH_BYTES: u64 = 1 << 20;

/// A master of the cluster as the run reaches it.
struct Node {
    link: crate::link::Link,
    id: String,
    con: Connection,
    /// Its own `CLUSTER NODES`, as last read.
    view: Vec<ClusterNode>,
}

/// What the run does as it goes, for a progress display.
#[derive(Debug)]
pub enum Event<'a> {
    /// A `MIGRATE` of `keys` keys, `bytes` bytes (`MEMORY USAGE`) of the slot of `mv`.
    Batch {
        mv: &'a PlannedMove,
        keys: u64,
        bytes: u64,
    },
    /// The move `index` (from 0) of `total` is done: its slot is the target's on every master.
    Slot {
        index: usize,
        total: usize,
        mv: &'a PlannedMove,
        keys: u64,
        bytes: u64,
    },
}

/// What a run moved.
#[derive(Debug, Default, Clone)]
pub struct Applied {
    /// Moves carried out by this run, and their keys and bytes (`MEMORY USAGE` key by key;
    /// the plan's `DUMP` bytes for an atomic job, which moves a slot whole).
    pub slots: usize,
    pub keys: u64,
    pub bytes: u64,
    /// Keys the target already held as equal copies (their `DUMP` payloads equal), replaced.
    pub equal_copies: Vec<String>,
    /// Keys the target held with a different value, replaced by the source's (`--replace`).
    pub replaced: Vec<String>,
    /// Seconds the run took.
    pub seconds: f64,
}

/// The cluster read and checked against the plan, ready to run.
pub struct Prepared {
    pub plan: SlotPlan,
    /// Where the cluster stands in the plan.
    pub position: Position,
    nodes: BTreeMap<String, Node>,
    /// A connection to the seed, whose view of the other nodes' flags the checks read.
    seed: Connection,
    access: Access,
    /// Writes sent so far (each `SETSLOT` and `MIGRATE`), and the test hook's bound on them.
    writes: u64,
    stop_after: Option<u64>,
    /// When every master was last checked (see [`Prepared::health`]).
    last_full_check: Option<Instant>,
}

/// How often a run checks every master's own view and `cluster_state` (the next move's two
/// masters and the seed's view are checked before every slot).
pub const FULL_CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// For tests only: `RINGSLOT_APPLY_EXIT_AFTER_WRITES=N` makes a run exit at once (status
/// [`EXIT_AFTER_WRITES`], no clean-up, as a killed process leaves the cluster) after its N-th
/// write (`CLUSTER SETSLOT` or `MIGRATE`), so that a test can interrupt an apply at every
/// point of a slot's move for certain rather than by timing.
pub const EXIT_AFTER_WRITES_VAR: &str = "RINGSLOT_APPLY_EXIT_AFTER_WRITES";
/// The exit status of a run stopped by [`EXIT_AFTER_WRITES_VAR`].
pub const EXIT_AFTER_WRITES: i32 = 86;

/// Why a node's state stops a run (a failing node, a failover, a cluster not ok); `None`
/// when it may go on. `seed_view`: the seed's `CLUSTER NODES`; `own`: a master's own view,
/// with the id it had when the run began.
fn unhealthy(seed_view: &[ClusterNode], own: &[(&str, &str, &[ClusterNode])]) -> Option<String> {
    for n in seed_view {
        for bad in ["fail", "fail?", "handshake", "noaddr"] {
            if n.has(bad) {
                return Some(format!(
                    "node {} ({}) is flagged `{bad}`",
                    n.address,
                    n.id.get(..8).unwrap_or(&n.id)
                ));
            }
        }
    }
    for &(address, id, view) in own {
        let Some(me) = view.iter().find(|n| n.has("myself")) else {
            return Some(format!("{address} does not list itself in CLUSTER NODES"));
        };
        if me.id != id || !me.has("master") {
            return Some(format!(
                "{address} is not the master it was (a failover: now {}, id {})",
                if me.has("master") {
                    "a master"
                } else {
                    "a replica"
                },
                me.id.get(..8).unwrap_or(&me.id)
            ));
        }
    }
    None
}

/// Whether `plan` drains the master at `address` by its move `upto` (exclusive): it takes
/// no slot, and every slot it had when the plan was made is moved by then. Such a master may
/// turn replica of one that took its slots (Redis 7.0 and later with
/// cluster-allow-replica-migration), which is no failover; any other master turned replica is.
fn drains(plan: &SlotPlan, address: &str, upto: usize) -> bool {
    if plan.moves.iter().any(|m| m.to == address) {
        return false;
    }
    let moved: std::collections::BTreeSet<u16> = plan
        .moves
        .iter()
        .take(upto)
        .filter(|m| m.from == address)
        .map(|m| m.slot)
        .collect();
    plan.start
        .iter()
        .enumerate()
        .filter(|(_, o)| o.as_deref() == Some(address))
        .all(|(slot, _)| u16::try_from(slot).is_ok_and(|s| moved.contains(&s)))
}

fn claims(view: &[ClusterNode], slot: u16) -> bool {
    view.iter()
        .find(|n| n.has("myself"))
        .is_some_and(|n| n.serves(slot))
}

fn is_busy_key(error: &str) -> bool {
    error.contains("BUSYKEY")
}

/// Reads the cluster from the seed and checks it against `plan`: every master the plan
/// names is a master of the cluster (joining masters `add-node`d first), the cluster is
/// healthy, and its state is one a prefix of the plan reaches. Reads only.
pub fn prepare(access: &Access, plan: SlotPlan) -> Result<Prepared> {
    let seed_view = nodes_of(&access.seed())?;
    let ports = if access.tls() {
        tls_ports(&access.seed())
    } else {
        Default::default()
    };
    let mut nodes = BTreeMap::new();
    for n in seed_view.iter().filter(|n| n.has("master")) {
        let mut link = match (ports.get(&n.id), n.address.rsplit_once(':')) {
            (Some(port), Some((host, _))) => access.at(&format!("{host}:{port}"))?,
            _ => access.at(&n.address)?,
        };
        link.address = n.address.clone();
        let mut con = link.connect()?;
        let view = own_view(&mut con, &n.address)?;
        // A node the seed still lists as a master that has become a replica (the news has
        // not reached the seed yet) is left out unless the plan moves slots to it: a source
        // drained by the plan, or failed over, which the position tells apart (a move from it
        // not done has no owner among the plan's masters).
        let master_itself = view
            .iter()
            .find(|m| m.has("myself"))
            .is_some_and(|m| m.has("master"));
        if !master_itself {
            if drains(&plan, &n.address, plan.moves.len()) {
                continue;
            }
            if !plan.moves.iter().any(|m| m.to == n.address) {
                bail!(
                    "{} is a replica by its own CLUSTER NODES while the seed lists it as a \
                     master (a failover under way?): apply when redis-cli --cluster check is \
                     clean",
                    n.address
                );
            }
        }
        nodes.insert(
            n.address.clone(),
            Node {
                link,
                id: n.id.clone(),
                con,
                view,
            },
        );
    }
    for address in plan.masters() {
        if nodes.contains_key(&address) {
            continue;
        }
        let is_target = plan.moves.iter().any(|m| m.to == address);
        if !is_target
            && seed_view
                .iter()
                .any(|n| n.address == address && !n.has("master"))
        {
            // A source that is a replica now: drained by the moves done (a master that loses
            // its last slot becomes a replica of the one that took it, Redis 7.0 and later with
            // cluster-allow-replica-migration), or failed over, which the position tells
            // apart (a move from it not done has no owner among the plan's masters).
            continue;
        }
        if seed_view.iter().any(|n| n.address == address) {
            bail!(
                "{address}, a master when the plan was made, is not one now (a failover?): the \
                 plan's masters changed; once `redis-cli --cluster check` is clean, make a new \
                 plan"
            );
        }
        {
            bail!(
                "{address}, named by the plan, is not a master of the cluster: a joining master \
                 is added first (redis-cli --cluster add-node {address} <seed>); a plan made \
                 on another cluster does not apply here"
            );
        }
    }
    // The plan's masters must be the nodes it was made on, not others at the same addresses.
    for (address, id) in &plan.ids {
        if let Some(now) = seed_view.iter().find(|n| n.address == *address) {
            if now.id != *id && plan.masters().contains(address) {
                bail!(
                    "{address} is node {} now, where the plan was made on node {}: a cluster \
                     rebuilt on the same addresses, or a node replaced; make a new plan",
                    now.id.get(..8).unwrap_or(&now.id),
                    id.get(..8).unwrap_or(id)
                );
            }
        }
    }
    let own: Vec<(&str, &str, &[ClusterNode])> = nodes
        .iter()
        .map(|(a, n)| (a.as_str(), n.id.as_str(), n.view.as_slice()))
        .collect();
    if let Some(why) = unhealthy(&seed_view, &own) {
        bail!("{why}: apply when the cluster is healthy (redis-cli --cluster check)");
    }
    let views: BTreeMap<String, Vec<ClusterNode>> = nodes
        .iter()
        .map(|(a, n)| (a.clone(), n.view.clone()))
        .collect();
    let position = position(&plan, &slot_owners(&seed_view), &views).map_err(|e| anyhow!("{e}"))?;
    Ok(Prepared {
        plan,
        position,
        nodes,
        seed: access.seed().connect()?,
        access: access.clone(),
        writes: 0,
        last_full_check: None,
        stop_after: std::env::var(EXIT_AFTER_WRITES_VAR)
            .ok()
            .and_then(|v| v.parse().ok()),
    })
}

/// [`prepare`], read a second time a second later when the cluster's state is not one the
/// plan reaches: the masters' views are read one after another, and a slot that changed owner
/// between two reads (an atomic job ending, gossip under way) looks like no state of the plan
/// once. A state that is truly foreign is refused both times.
pub fn prepare_settled(access: &Access, plan: SlotPlan) -> Result<Prepared> {
    match prepare(access, plan.clone()) {
        Err(e) if format!("{e:#}").contains(FOREIGN) => {
            std::thread::sleep(std::time::Duration::from_secs(1));
            prepare(access, plan)
        }
        other => other,
    }
}

/// The words of [`plan::position`]'s refusals of a state no prefix of the plan reaches.
const FOREIGN: &str = "the cluster changed since the plan was made";

/// A node's own `CLUSTER NODES`, parsed.
fn own_view(con: &mut Connection, at: &str) -> Result<Vec<ClusterNode>> {
    let text = crate::reply::text(&run(con, at, &s(&["CLUSTER", "NODES"]))?)
        .map_err(|e| anyhow!("{at}: CLUSTER NODES: {e}"))?;
    ringslot_engine::cluster::parse_cluster_nodes(&text).map_err(|e| anyhow!("{at}: {e}"))
}

impl Prepared {
    /// Probes every command the run needs on every master ([`APPLY_NEEDS`], and
    /// [`ATOMIC_NEEDS`] with `atomic`) before anything is written. Error: every refusal at
    /// once, with the `ACL SETUSER` rule that grants them.
    pub fn check_permissions(&self, atomic: bool) -> Result<()> {
        let links: Vec<&crate::link::Link> = self.nodes.values().map(|n| &n.link).collect();
        // --atomic finishes a key-by-key move left half done that way: it needs both.
        let mut needs: Vec<Need> = APPLY_NEEDS.to_vec();
        if atomic {
            needs.extend_from_slice(ATOMIC_NEEDS);
        }
        check(&links, &needs, self.access.user()).map(|_| ())
    }

    /// The moves this run carries out: from the position on.
    pub fn remaining(&self) -> &[PlannedMove] {
        self.plan.moves.get(self.position.done..).unwrap_or(&[])
    }

    fn id(&self, address: &str) -> String {
        self.nodes
            .get(address)
            .map(|n| n.id.clone())
            .unwrap_or_default()
    }

    /// The `MIGRATE` arguments after the keys' host, port, db and timeout: `AUTH2 user
    /// password` (or `AUTH password` for the default user) when the tool logs in with a
    /// password, since the target asks the same of `MIGRATE`'s connection. `redact` hides the
    /// password (for `--dry-run`).
    fn auth(&self, redact: bool) -> Vec<String> {
        let Some(password) = self.access.password() else {
            return Vec::new();
        };
        let password = if redact { "<password>" } else { password };
        match self.access.user() {
            "default" => s(&["AUTH", password]),
            user => s(&["AUTH2", user, password]),
        }
    }

    /// `MIGRATE`'s timeout, milliseconds: half the tool's wait for a reply (it bounds each of
    /// its I/O steps, not the whole command; the batch caps bound the whole).
    fn migrate_timeout_ms(&self) -> u128 {
        (self.access.timeout.as_millis() / 2).max(1)
    }

    /// The commands the run would send, in order, one line each (`node: command`), with a
    /// comment line per move: what `--dry-run` prints.
    pub fn commands(&self, opts: &ApplyOptions) -> Vec<String> {
        let mut lines = Vec::new();
        let close = |lines: &mut Vec<String>, m: &PlannedMove| {
            let to = self.id(&m.to);
            lines.push(format!("{}: CLUSTER SETSLOT {} NODE {to}", m.to, m.slot));
            lines.push(format!("{}: CLUSTER SETSLOT {} NODE {to}", m.from, m.slot));
            for other in self.nodes.keys().filter(|a| **a != m.to && **a != m.from) {
                lines.push(format!("{other}: CLUSTER SETSLOT {} NODE {to}", m.slot));
            }
        };
        if self.position.close_last {
            if let Some(m) = self
                .position
                .done
                .checked_sub(1)
                .and_then(|i| self.plan.moves.get(i))
            {
                lines.push(format!(
                    "# move {} (slot {}) has its keys on {}: it is closed first",
                    self.position.done, m.slot, m.to
                ));
                close(&mut lines, m);
            }
        }
        let total = self.plan.moves.len();
        for (i, m) in self.remaining().iter().enumerate() {
            let index = self.position.done + i + 1;
            lines.push(format!(
                "# move {index} of {total}: slot {} {} -> {} ({} keys, {:.0} bytes by DUMP \
                 when planned)",
                m.slot, m.from, m.to, m.keys, m.bytes
            ));
            lines.push(format!(
                "{}: CLUSTER SETSLOT {} IMPORTING {}",
                m.to,
                m.slot,
                self.id(&m.from)
            ));
            lines.push(format!(
                "{}: CLUSTER SETSLOT {} MIGRATING {}",
                m.from,
                m.slot,
                self.id(&m.to)
            ));
            let (host, port) = m.to.rsplit_once(':').unwrap_or((&m.to, ""));
            let mut migrate = vec![
                "MIGRATE".to_string(),
                host.to_string(),
                port.to_string(),
                "\"\"".into(),
                "0".into(),
                self.migrate_timeout_ms().to_string(),
            ];
            migrate.extend(self.auth(true));
            lines.push(format!(
                "{}: repeated until the slot is empty: CLUSTER GETKEYSINSLOT {} {}; MEMORY \
                 USAGE of each key; {} KEYS <keys> (at most {} keys and {} bytes a MIGRATE)",
                m.from,
                m.slot,
                opts.batch_keys,
                migrate.join(" "),
                opts.batch_keys,
                opts.batch_bytes
            ));
            close(&mut lines, m);
        }
        lines
    }

    /// Re-reads the seed's and each master's own view; the reason the run must stop, if any.
    /// `next`: the index of the next move. A master the plan has drained by then ([`drains`])
    /// that has become a replica leaves the run: no failover.
    ///
    /// The seed's view and the next move's two masters are read every time; every other
    /// master at most every [`FULL_CHECK_EVERY`] (their `CLUSTER NODES` and `CLUSTER INFO`:
    /// two round trips each, which on a cluster of 100 masters would cost more than the move).
    fn health(&mut self, next: usize) -> Result<Option<String>> {
        let seed_view = own_view(&mut self.seed, &self.access.seed().address)?;
        let full = self
            .last_full_check
            .is_none_or(|t| t.elapsed() >= FULL_CHECK_EVERY);
        if full {
            self.last_full_check = Some(Instant::now());
        }
        let involved: Vec<String> = self
            .plan
            .moves
            .get(next)
            .map(|m| vec![m.from.clone(), m.to.clone()])
            .unwrap_or_default();
        let mut checked = std::collections::BTreeSet::new();
        let mut drained = Vec::new();
        for (address, n) in self.nodes.iter_mut() {
            if !full && !involved.contains(address) {
                continue;
            }
            checked.insert(address.clone());
            n.view = own_view(&mut n.con, address)?;
            let me = n.view.iter().find(|m| m.has("myself"));
            if me.is_some_and(|m| !m.has("master") && m.slots.is_empty())
                && drains(&self.plan, address, next)
            {
                drained.push(address.clone());
                continue;
            }
            let info = crate::reply::text(&run(&mut n.con, address, &s(&["CLUSTER", "INFO"]))?)
                .map_err(|e| anyhow!("{address}: CLUSTER INFO: {e}"))?;
            let state = crate::reply::info_field(&info, "cluster_state").unwrap_or_default();
            if state != "ok" {
                return Ok(Some(format!("{address} says cluster_state:{state}")));
            }
        }
        for address in drained {
            self.nodes.remove(&address);
        }
        let own: Vec<(&str, &str, &[ClusterNode])> = self
            .nodes
            .iter()
            .filter(|(a, _)| checked.contains(*a))
            .map(|(a, n)| (a.as_str(), n.id.as_str(), n.view.as_slice()))
            .collect();
        Ok(unhealthy(&seed_view, &own))
    }

    /// Carries out the plan from its position, reporting each batch and slot to `on`. Errors
    /// name the slot, the nodes and the server's reply, and say what was left open; Ctrl-C
    /// (`INTERRUPTED`) stops it once the slot under way is moved and closed. Running it again
    /// goes on.
    pub fn run(&mut self, opts: &ApplyOptions, on: &mut dyn FnMut(Event)) -> Result<Applied> {
        if let Some(why) = self.atomic_running()? {
            bail!("{why}");
        }
        let began = Instant::now();
        let mut applied = Applied::default();
        let mut limiter = Limiter::new(opts.max_bytes_per_sec);
        let total = self.plan.moves.len();
        let moves = self.plan.moves.clone();
        let first = self.position.done;
        if self.position.close_last {
            if let Some(m) = first.checked_sub(1).and_then(|i| moves.get(i)) {
                self.checked(m, opts, &mut limiter, &mut applied, on)?;
            }
        }
        for (index, m) in moves.iter().enumerate().skip(first) {
            if INTERRUPTED.load(Ordering::SeqCst) {
                bail!(
                    "interrupted before slot {} (move {} of {total}); the slots moved stay \
                     moved: run the same command again to go on",
                    m.slot,
                    index + 1
                );
            }
            let (keys, bytes) = self.checked(m, opts, &mut limiter, &mut applied, on)?;
            applied.slots += 1;
            applied.keys += keys;
            applied.bytes += bytes;
            self.position.done = index + 1;
            on(Event::Slot {
                index,
                total,
                mv: m,
                keys,
                bytes,
            });
        }
        self.position.close_last = false;
        applied.seconds = began.elapsed().as_secs_f64();
        Ok(applied)
    }

    /// One move between two health checks; an error says why and what was left.
    fn checked(
        &mut self,
        m: &PlannedMove,
        opts: &ApplyOptions,
        limiter: &mut Limiter,
        applied: &mut Applied,
        on: &mut dyn FnMut(Event),
    ) -> Result<(u64, u64)> {
        let stop = |why: &str| {
            anyhow!(
                "the apply stopped at slot {} ({} -> {}), which it did not touch this time: {why}. \
                 Slots already moved stay moved. Run the same command again once `redis-cli \
                 --cluster check` is clean; after a failover the plan's masters changed: make \
                 a new plan",
                m.slot,
                m.from,
                m.to
            )
        };
        let next = self
            .plan
            .moves
            .iter()
            .position(|p| p.slot == m.slot)
            .unwrap_or(0);
        if let Some(why) = self.health(next)? {
            return Err(stop(&why));
        }
        match self.move_slot(m, opts, limiter, applied, on) {
            Ok(moved) => Ok(moved),
            Err(e) => {
                // A failed command may be the first sign of a failover: say so if it is.
                if let Ok(Some(why)) = self.health(next) {
                    bail!(
                        "slot {} ({} -> {}): {e:#}; the cluster changed: {why}. The slot is \
                         left open; once `redis-cli --cluster check` is clean, make a new plan",
                        m.slot,
                        m.from,
                        m.to
                    );
                }
                bail!(
                    "slot {} ({} -> {}): {e:#}. The slot may be left open (importing on {}, \
                     migrating on {}): run the same command again to go on from there",
                    m.slot,
                    m.from,
                    m.to,
                    m.to,
                    m.from
                )
            }
        }
    }

    fn node(&mut self, address: &str) -> Result<&mut Node> {
        self.nodes
            .get_mut(address)
            .ok_or_else(|| anyhow!("{address} is not a master of the cluster"))
    }

    /// Runs `args` on the master at `address`.
    fn on_node(&mut self, address: &str, args: &[String]) -> Result<Value> {
        let n = self.node(address)?;
        let reply = run(&mut n.con, address, args);
        if args.get(1).is_some_and(|a| a == "SETSLOT") {
            self.wrote();
        }
        reply
    }

    /// Counts a write sent; the test hook ([`EXIT_AFTER_WRITES_VAR`]) may end the process.
    fn wrote(&mut self) {
        self.writes += 1;
        if self.stop_after == Some(self.writes) {
            std::process::exit(EXIT_AFTER_WRITES);
        }
    }

    /// Moves the keys of `m`'s slot and gives it to the target everywhere; (keys, bytes).
    fn move_slot(
        &mut self,
        m: &PlannedMove,
        opts: &ApplyOptions,
        limiter: &mut Limiter,
        applied: &mut Applied,
        on: &mut dyn FnMut(Event),
    ) -> Result<(u64, u64)> {
        let slot = m.slot.to_string();
        let (from_id, to_id) = (self.id(&m.from), self.id(&m.to));
        let target_claims = claims(&self.node(&m.to)?.view, m.slot);
        let source_claims = claims(&self.node(&m.from)?.view, m.slot);
        let (mut keys, mut bytes) = (0u64, 0u64);
        let (mut last_first, mut last_len): (Option<Vec<u8>>, usize) = (None, 0);
        if !target_claims {
            self.on_node(
                &m.to,
                &s(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]),
            )?;
            if source_claims {
                self.on_node(
                    &m.from,
                    &s(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]),
                )?;
            }
            loop {
                let batch = self.batch(m, opts)?;
                if batch.is_empty() {
                    break;
                }
                // MIGRATE answers NOKEY for a key that expired but is still listed (no write to
                // the source deletes it meanwhile): the same batch twice is no progress.
                let first: Option<Vec<u8>> = batch.first().map(|(k, _)| k.clone());
                if first.is_some() && first == last_first && batch.len() == last_len {
                    bail!(
                        "{}: the same {} keys came back from GETKEYSINSLOT after a MIGRATE \
                         (keys that expired but are still listed?): stopped rather than loop",
                        m.from,
                        batch.len()
                    );
                }
                last_first = first;
                last_len = batch.len();
                let batch_bytes: u64 = batch.iter().map(|(_, b)| b).sum();
                let names: Vec<Vec<u8>> = batch.into_iter().map(|(k, _)| k).collect();
                match self.migrate(m, &names, false) {
                    Ok(()) => {}
                    Err(e) if is_busy_key(&e) => self.resolve_busy(m, &names, opts, applied)?,
                    Err(e) => bail!("{}: MIGRATE to {}: {e}", m.from, m.to),
                }
                keys += names.len() as u64;
                bytes += batch_bytes;
                on(Event::Batch {
                    mv: m,
                    keys: names.len() as u64,
                    bytes: batch_bytes,
                });
                limiter.take(batch_bytes);
            }
        } else {
            let left = self.on_node(&m.from, &s(&["CLUSTER", "COUNTKEYSINSLOT", &slot]))?;
            let left = crate::reply::int(&left)?;
            if left > 0 {
                bail!(
                    "{} already serves the slot but {} still holds {left} of its keys: move \
                     them to it by hand (MIGRATE) and run again",
                    m.to,
                    m.from
                );
            }
        }
        // The target first, then the source, then every other master (redis-cli's order).
        let node = s(&["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
        let replica =
            |e: &anyhow::Error| format!("{e:#}").contains("Please use SETSLOT only with masters");
        self.on_node(&m.to, &node)?;
        // A source that gave its last slot may already be a replica of the target (told by
        // gossip first): it holds none of the slot's keys, and takes the news by gossip.
        if let Err(e) = self.on_node(&m.from, &node) {
            if !replica(&e) {
                return Err(e);
            }
        }
        let others: Vec<String> = self
            .nodes
            .keys()
            .filter(|a| **a != m.to && **a != m.from)
            .cloned()
            .collect();
        for other in others {
            if let Err(e) = self.on_node(&other, &node) {
                // A master that has become a replica meanwhile takes the news by gossip.
                if !replica(&e) {
                    return Err(e);
                }
            }
        }
        Ok((keys, bytes))
    }

    /// The next keys of `m`'s slot on its source, with their `MEMORY USAGE`: at most
    /// `batch_keys`, and at most `batch_bytes` unless the first key alone is bigger.
    fn batch(&mut self, m: &PlannedMove, opts: &ApplyOptions) -> Result<Vec<(Vec<u8>, u64)>> {
        let slot = m.slot.to_string();
        let count = opts.batch_keys.max(1).to_string();
        let n = self.node(&m.from)?;
        let names: Vec<Vec<u8>> = crate::client::cmd(&["CLUSTER", "GETKEYSINSLOT", &slot, &count])
            .query(&mut n.con)
            .map_err(|e| {
                anyhow!(
                    "{}: CLUSTER GETKEYSINSLOT {slot}: {}",
                    m.from,
                    error_text(&e)
                )
            })?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for k in &names {
            pipe.cmd("MEMORY").arg("USAGE").arg(k.as_slice());
        }
        let sizes: Vec<Option<u64>> = pipe
            .query(&mut n.con)
            .map_err(|e| anyhow!("{}: MEMORY USAGE: {}", m.from, error_text(&e)))?;
        let mut batch = Vec::new();
        let mut total = 0u64;
        for (k, size) in names.into_iter().zip(sizes) {
            let size = size.unwrap_or(0);
            if !batch.is_empty() && total + size > opts.batch_bytes {
                break;
            }
            total += size;
            batch.push((k, size));
        }
        Ok(batch)
    }

    /// `MIGRATE` of `keys` from `m`'s source to its target; an error is the reply's text.
    fn migrate(&mut self, m: &PlannedMove, keys: &[Vec<u8>], replace: bool) -> Result<(), String> {
        let (host, port) =
            m.to.rsplit_once(':')
                .ok_or_else(|| format!("not an ip:port address: {}", m.to))?;
        let mut args: Vec<Vec<u8>> = [
            "MIGRATE",
            host,
            port,
            "",
            "0",
            &self.migrate_timeout_ms().to_string(),
        ]
        .iter()
        .map(|a| a.as_bytes().to_vec())
        .collect();
        if replace {
            args.push(b"REPLACE".to_vec());
        }
        args.extend(self.auth(false).into_iter().map(String::into_bytes));
        args.push(b"KEYS".to_vec());
        args.extend(keys.iter().cloned());
        let n = self.nodes.get_mut(&m.from).ok_or("no source")?;
        let reply = crate::client::call(&mut n.con, &args).map(|_| ());
        self.wrote();
        reply
    }

    /// After a `BUSYKEY`: each key of `keys` still on the source is compared with the target's
    /// copy (`DUMP` on both, `ASKING` on the target, which does not serve the slot yet) and
    /// moved with `REPLACE` when the payloads are equal (or with `--replace`); a key whose
    /// copies differ stops the run.
    fn resolve_busy(
        &mut self,
        m: &PlannedMove,
        keys: &[Vec<u8>],
        opts: &ApplyOptions,
        applied: &mut Applied,
    ) -> Result<()> {
        for k in keys {
            let name = String::from_utf8_lossy(k).into_owned();
            let src = self.node(&m.from)?;
            let ours: Option<Vec<u8>> = redis::cmd("DUMP")
                .arg(k.as_slice())
                .query(&mut src.con)
                .map_err(|e| anyhow!("{}: DUMP {name}: {}", m.from, error_text(&e)))?;
            let Some(ours) = ours else { continue };
            let dst = self.node(&m.to)?;
            let (_, theirs): ((), Option<Vec<u8>>) = redis::pipe()
                .cmd("ASKING")
                .cmd("DUMP")
                .arg(k.as_slice())
                .query(&mut dst.con)
                .map_err(|e| anyhow!("{}: DUMP {name}: {}", m.to, error_text(&e)))?;
            let replace = match theirs {
                None => false,
                Some(theirs) if theirs == ours => {
                    applied.equal_copies.push(name.clone());
                    true
                }
                Some(_) if opts.replace => {
                    applied.replaced.push(name.clone());
                    true
                }
                Some(_) => bail!(
                    "key {name:?} is on both {} and {} with different values (their DUMP \
                     payloads differ: the values, or only their encodings); nothing was \
                     overwritten. Look at both copies; run again \
                     with --replace to keep {}'s copy and overwrite {}'s",
                    m.from,
                    m.to,
                    m.from,
                    m.to
                ),
            };
            self.migrate(m, std::slice::from_ref(k), replace)
                .map_err(|e| anyhow!("{}: MIGRATE {name} to {}: {e}", m.from, m.to))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringslot_engine::cluster::parse_cluster_nodes;

    #[test]
    fn a_failover_or_a_failing_node_stops_a_run() {
        let seed = parse_cluster_nodes(
            "aaaa 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-100\n\
             bbbb 10.0.0.2:7000@17000 master - 0 0 2 connected 101-200\n",
        )
        .unwrap();
        let own_a =
            parse_cluster_nodes("aaaa 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-100\n")
                .unwrap();
        assert_eq!(unhealthy(&seed, &[("10.0.0.1:7000", "aaaa", &own_a)]), None);
        // The master at the address is now a replica (its replica took over).
        let demoted =
            parse_cluster_nodes("aaaa 10.0.0.1:7000@17000 myself,slave cccc 0 0 3 connected\n")
                .unwrap();
        let why = unhealthy(&seed, &[("10.0.0.1:7000", "aaaa", &demoted)]).unwrap();
        assert!(
            why.contains("failover") && why.contains("a replica"),
            "{why}"
        );
        // Another node at the address.
        let why = unhealthy(&seed, &[("10.0.0.1:7000", "dddd", &own_a)]).unwrap();
        assert!(why.contains("failover"), "{why}");
        // A node flagged failing.
        let failing = parse_cluster_nodes(
            "aaaa 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-100\n\
             bbbb 10.0.0.2:7000@17000 master,fail? - 0 0 2 connected 101-200\n",
        )
        .unwrap();
        let why = unhealthy(&failing, &[]).unwrap();
        assert!(
            why.contains("10.0.0.2:7000") && why.contains("fail?"),
            "{why}"
        );
    }

    #[test]
    fn busy_keys_are_told_by_migrates_reply() {
        assert!(is_busy_key(
            "ERR Target instance replied with error: BUSYKEY Target key name already exists."
        ));
        assert!(!is_busy_key(
            "IOERR error or timeout reading to target instance"
        ));
    }
}
