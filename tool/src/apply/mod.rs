//! `ringslot apply PLAN`: the only part of ringslot that writes to a cluster. It carries out a
//! plan by weight (`ringslot predict --by ... --json`, read as [`crate::plan::SlotPlan`]) on
//! the live cluster, slot by slot, the way `redis-cli --cluster rebalance` moves a slot
//! (`clusterManagerMoveSlot` in redis-cli.c and valkey-cli.c): the verbs of [`verbs`] open the
//! slot (`CLUSTER SETSLOT s IMPORTING <source>` on the target, `MIGRATING <target>` on the
//! source), move its keys (`GETKEYSINSLOT` and `MIGRATE ... KEYS` in batches capped in keys
//! and bytes: a `MIGRATE` blocks both nodes while it runs) and close it (`SETSLOT s NODE
//! <target>` on the target, the source and every other master); or, with `--atomic`, Valkey
//! 9's atomic slot migration ([`atomic`]). Every write goes through one door
//! ([`door::Masters::write`]).
//!
//! Safe by construction: it starts only from a state a prefix of the plan reaches
//! ([`position::position`]); it checks the cluster between slots (`cluster_state:ok`, no node
//! flagged `fail?`/`fail`, each master of the plan still a master with the same id) and
//! stops on a failover ([`Stop`]); an interrupted run (Ctrl-C, a killed process, a failed node)
//! is finished by running the same command again, which re-opens the slot where it was and
//! goes on; a key already on the target (`BUSYKEY`) is replaced only when both copies' `DUMP`
//! payloads are equal, else the run stops unless `--replace`. It writes nothing but the slot
//! moves: no key is created, changed or deleted except by `MIGRATE`.

pub(crate) mod atomic;
pub(crate) mod door;
pub(crate) mod position;
mod verbs;

use crate::cluster::connection::NodeConnection;
use crate::cluster::link::Access;
use crate::cluster::pacing::Limiter;
use crate::cluster::permissions::{check, Need, APPLY_NEEDS, ATOMIC_NEEDS};
use crate::cluster::topology::{nodes_of, nodes_on, Reach};
use crate::cluster::INTERRUPTED;
use crate::plan::{SlotMove, SlotPlan};
use anyhow::{bail, Result};
use door::{Masters, Node};
use position::{position, Position, Unreached};
use ringslot_engine::cluster::{myself, slot_owners, ClusterNode};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How the keys of a slot travel.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ApplyOptions {
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
pub(crate) const DEFAULT_BATCH_KEYS: u32 = 100;
/// Bytes a `MIGRATE` carries at most unless `--batch-bytes` says otherwise: 1 MiB, ~10 ms on a
/// 1 Gbit/s link, far below any `cluster-node-timeout`.
pub(crate) const DEFAULT_BATCH_BYTES: u64 = 1 << 20;

impl ApplyOptions {
    /// Refuses options that cannot be meant: a batch of 0 keys.
    pub(crate) fn check(&self) -> Result<()> {
        if self.batch_keys == 0 {
            bail!("--batch-keys needs at least 1 key");
        }
        Ok(())
    }
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            batch_keys: DEFAULT_BATCH_KEYS,
            batch_bytes: DEFAULT_BATCH_BYTES,
            max_bytes_per_sec: 0,
            replace: false,
        }
    }
}

/// What the run does as it goes, for a progress display.
#[derive(Debug)]
pub(crate) enum Event<'a> {
    /// The move `index` (from 0) of `total` is done: its slot is the target's on every master.
    /// `keys` and `bytes` are what this run moved of it (`MEMORY USAGE` key by key; the plan's
    /// `DUMP` bytes for an atomic job).
    Slot {
        index: usize,
        total: usize,
        mv: &'a SlotMove,
        keys: u64,
        bytes: u64,
    },
}

/// What a run moved.
#[derive(Debug, Default, Clone)]
pub(crate) struct Applied {
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

impl Applied {
    /// Counts a move done (`keys`, `bytes`).
    fn add(&mut self, keys: u64, bytes: u64) {
        self.slots += 1;
        self.keys += keys;
        self.bytes += bytes;
    }
}

/// The cluster read and checked against the plan, ready to run.
pub(crate) struct Prepared {
    pub plan: SlotPlan,
    /// Where the cluster stands in the plan.
    pub position: Position,
    masters: Masters,
    /// A connection to the seed, whose view of the other nodes' flags the checks read.
    seed: NodeConnection,
    access: Access,
    /// When every master was last checked (see [`Prepared::health`]).
    last_full_check: Option<Instant>,
}

/// How often a run checks every master's own view and `cluster_state` (the next move's two
/// masters and the seed's view are checked before every slot).
pub(crate) const FULL_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Why the cluster's state stops a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop {
    /// A node is flagged failing, in handshake or without an address (the seed's view).
    Flagged {
        node: String,
        id: String,
        flag: &'static str,
    },
    /// A master does not list itself in its own `CLUSTER NODES`.
    Unlisted { node: String },
    /// A master of the plan is not the master it was: a replica now, or another node.
    Failover {
        node: String,
        replica: bool,
        id: String,
    },
    /// A master says `cluster_state` is not `ok`.
    ClusterState { node: String, state: String },
    /// An atomic slot migration runs on a master (a key-by-key run must not start).
    AtomicMigration {
        node: String,
        job: String,
        slots: String,
    },
    /// A master has no atomic slot migration (`--atomic` needs Valkey 9 or later).
    NoAtomicMigration { node: String },
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Flagged { node, id, flag } => {
                write!(f, "node {node} ({id}) is flagged `{flag}`")
            }
            Stop::Unlisted { node } => write!(f, "{node} does not list itself in CLUSTER NODES"),
            Stop::Failover { node, replica, id } => write!(
                f,
                "{node} is not the master it was (a failover: now {}, id {id})",
                if *replica { "a replica" } else { "a master" }
            ),
            Stop::ClusterState { node, state } => write!(f, "{node} says cluster_state:{state}"),
            Stop::AtomicMigration { node, job, slots } => write!(
                f,
                "{node} runs an atomic slot migration ({job} of slots {slots}): run with \
                 --atomic to wait for it and go on that way, or wait for it to end"
            ),
            Stop::NoAtomicMigration { node } => write!(
                f,
                "{node} has no atomic slot migration (CLUSTER MIGRATESLOTS is Valkey 9 and \
                 later): run without --atomic to move the slots key by key"
            ),
        }
    }
}

/// Why a node's state stops a run (a failing node, a failover); `None` when it may go on.
/// `seed_view`: the seed's `CLUSTER NODES`; `own`: a master's own view, with the id it had
/// when the run began.
fn unhealthy(seed_view: &[ClusterNode], own: &[(&str, &str, &[ClusterNode])]) -> Option<Stop> {
    for n in seed_view {
        if let Some(flag) = n.failing_flag() {
            return Some(Stop::Flagged {
                node: n.address.clone(),
                id: n.short_id().to_string(),
                flag,
            });
        }
    }
    for &(address, id, view) in own {
        let Some(me) = myself(view) else {
            return Some(Stop::Unlisted {
                node: address.to_string(),
            });
        };
        if me.id != id || !me.has("master") {
            return Some(Stop::Failover {
                node: address.to_string(),
                replica: !me.has("master"),
                id: me.short_id().to_string(),
            });
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
    let moved: BTreeSet<u16> = plan
        .moves
        .iter()
        .take(upto)
        .filter(|m| m.from == address)
        .map(|m| m.slot)
        .collect();
    plan.start_owners()
        .iter()
        .enumerate()
        .filter(|(_, o)| o.as_deref() == Some(address))
        .all(|(slot, _)| u16::try_from(slot).is_ok_and(|s| moved.contains(&s)))
}

/// Whether the node whose own view is `view` serves `slot`.
fn claims(view: &[ClusterNode], slot: u16) -> bool {
    myself(view).is_some_and(|n| n.serves(slot))
}

/// Reads the cluster from the seed and checks it against `plan`: every master the plan
/// names is a master of the cluster (joining masters `add-node`d first), the cluster is
/// healthy, and its state is one a prefix of the plan reaches. Reads only.
pub(crate) fn prepare(access: &Access, plan: SlotPlan) -> Result<Prepared> {
    let seed_view = nodes_of(&access.seed())?;
    let reach = Reach::of(access);
    let mut nodes = BTreeMap::new();
    for n in seed_view.iter().filter(|n| n.has("master")) {
        let link = reach.link(n)?;
        let mut con = link.connect()?;
        let view = nodes_on(&mut con)?;
        // A node the seed still lists as a master that has become a replica (the news has
        // not reached the seed yet) is left out unless the plan moves slots to it: a source
        // drained by the plan, or failed over, which the position tells apart (a move from it
        // not done has no owner among the plan's masters).
        let master_itself = myself(&view).is_some_and(|m| m.has("master"));
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
    check_masters(&plan, &seed_view, &nodes)?;
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
    let position = position(&plan, &slot_owners(&seed_view), &views)?;
    Ok(Prepared {
        plan,
        position,
        masters: Masters::new(nodes),
        seed: access.seed().connect()?,
        access: access.clone(),
        last_full_check: None,
    })
}

/// Checks that every master `plan` names is one of the cluster's, `nodes` (the masters the
/// run reaches), and the node the plan was made on.
fn check_masters(
    plan: &SlotPlan,
    seed_view: &[ClusterNode],
    nodes: &BTreeMap<String, Node>,
) -> Result<()> {
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
        bail!(
            "{address}, named by the plan, is not a master of the cluster: a joining master \
             is added first (redis-cli --cluster add-node {address} <seed>); a plan made on \
             another cluster does not apply here"
        );
    }
    // The plan's masters must be the nodes it was made on, not others at the same addresses.
    for (address, id) in &plan.ids {
        if let Some(now) = seed_view.iter().find(|n| n.address == *address) {
            if now.id != *id && plan.masters().contains(address) {
                bail!(
                    "{address} is node {} now, where the plan was made on node {}: a cluster \
                     rebuilt on the same addresses, or a node replaced; make a new plan",
                    now.short_id(),
                    id.get(..8).unwrap_or(id)
                );
            }
        }
    }
    Ok(())
}

/// [`prepare`], read a second time a second later when the cluster's state is not one the
/// plan reaches because a slot is served elsewhere ([`Unreached::Changed`]): the masters'
/// views are read one after another, and a slot that changed owner between two reads (an
/// atomic job ending, gossip under way) looks like no state of the plan once. A state that is
/// truly foreign is refused both times.
pub(crate) fn prepare_settled(access: &Access, plan: SlotPlan) -> Result<Prepared> {
    match prepare(access, plan.clone()) {
        Err(e) if matches!(e.downcast_ref::<Unreached>(), Some(Unreached::Changed(_))) => {
            std::thread::sleep(Duration::from_secs(1));
            prepare(access, plan)
        }
        other => other,
    }
}

impl Prepared {
    /// Probes every command the run needs on every master ([`APPLY_NEEDS`], and
    /// [`ATOMIC_NEEDS`] with `atomic`) before anything is written. Error: every refusal at
    /// once, with the `ACL SETUSER` rule that grants them.
    pub(crate) fn check_permissions(&self, atomic: bool) -> Result<()> {
        let links: Vec<&crate::cluster::link::Link> =
            self.masters.nodes.values().map(|n| &n.link).collect();
        // --atomic finishes a key-by-key move left half done that way: it needs both.
        let mut needs: Vec<Need> = APPLY_NEEDS.to_vec();
        if atomic {
            needs.extend_from_slice(ATOMIC_NEEDS);
        }
        check(&links, &needs, self.access.user()).map(|_| ())
    }

    /// The moves this run carries out: from the position on.
    pub(crate) fn remaining(&self) -> &[SlotMove] {
        self.plan.moves.get(self.position.done..).unwrap_or(&[])
    }

    /// Re-reads the seed's and each master's own view; the reason the run must stop, if any.
    /// `next`: the index of the next move. A master the plan has drained by then ([`drains`])
    /// that has become a replica leaves the run: no failover.
    ///
    /// The seed's view and the next move's two masters are read every time; every other
    /// master at most every [`FULL_CHECK_EVERY`] (their `CLUSTER NODES` and `CLUSTER INFO`:
    /// two round trips each, which on a cluster of 100 masters would cost more than the move).
    fn health(&mut self, next: usize) -> Result<Option<Stop>> {
        let seed_view = nodes_on(&mut self.seed)?;
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
        let mut checked = BTreeSet::new();
        let mut drained = Vec::new();
        for (address, n) in self.masters.nodes.iter_mut() {
            if !full && !involved.contains(address) {
                continue;
            }
            checked.insert(address.clone());
            n.view = nodes_on(&mut n.con)?;
            let me = myself(&n.view);
            if me.is_some_and(|m| !m.has("master") && m.slots.is_empty())
                && drains(&self.plan, address, next)
            {
                drained.push(address.clone());
                continue;
            }
            let info = n.con.text(&["CLUSTER", "INFO"])?;
            let state = crate::reply::info_field(&info, "cluster_state").unwrap_or_default();
            if state != "ok" {
                return Ok(Some(Stop::ClusterState {
                    node: address.clone(),
                    state,
                }));
            }
        }
        for address in drained {
            self.masters.nodes.remove(&address);
        }
        let own: Vec<(&str, &str, &[ClusterNode])> = self
            .masters
            .nodes
            .iter()
            .filter(|(a, _)| checked.contains(*a))
            .map(|(a, n)| (a.as_str(), n.id.as_str(), n.view.as_slice()))
            .collect();
        Ok(unhealthy(&seed_view, &own))
    }

    /// Carries out the plan from its position, reporting each slot to `on`. Errors name the
    /// slot, the nodes and the server's reply, and say what was left open; Ctrl-C
    /// (`INTERRUPTED`) stops it once the slot under way is moved and closed. Running it again
    /// goes on.
    pub(crate) fn run(
        &mut self,
        opts: &ApplyOptions,
        on: &mut dyn FnMut(Event),
    ) -> Result<Applied> {
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
                self.checked(m, opts, &mut limiter, &mut applied)?;
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
            let (keys, bytes) = self.checked(m, opts, &mut limiter, &mut applied)?;
            applied.add(keys, bytes);
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
        m: &SlotMove,
        opts: &ApplyOptions,
        limiter: &mut Limiter,
        applied: &mut Applied,
    ) -> Result<(u64, u64)> {
        let next = self
            .plan
            .moves
            .iter()
            .position(|p| p.slot == m.slot)
            .unwrap_or(0);
        if let Some(why) = self.health(next)? {
            bail!(
                "the apply stopped at slot {} ({} -> {}), which it did not touch this time: {why}. \
                 Slots already moved stay moved. Run the same command again once `redis-cli \
                 --cluster check` is clean; after a failover the plan's masters changed: make \
                 a new plan",
                m.slot,
                m.from,
                m.to
            );
        }
        match self.move_slot(m, opts, limiter, applied) {
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
            "default" => vec!["AUTH".into(), password.into()],
            user => vec!["AUTH2".into(), user.into(), password.into()],
        }
    }

    /// `MIGRATE`'s timeout, milliseconds: half the tool's wait for a reply (it bounds each of
    /// its I/O steps, not the whole command; the batch caps bound the whole).
    fn migrate_timeout_ms(&self) -> u128 {
        (self.access.timeout.as_millis() / 2).max(1)
    }

    /// The commands the run would send, in order, one line each (`node: command`), with a
    /// comment line per move: what `--dry-run` prints.
    pub(crate) fn commands(&self, opts: &ApplyOptions) -> Vec<String> {
        let mut lines = Vec::new();
        let close = |lines: &mut Vec<String>, m: &SlotMove| {
            let to = self.masters.id(&m.to);
            lines.push(format!("{}: CLUSTER SETSLOT {} NODE {to}", m.to, m.slot));
            lines.push(format!("{}: CLUSTER SETSLOT {} NODE {to}", m.from, m.slot));
            for other in self
                .masters
                .nodes
                .keys()
                .filter(|a| **a != m.to && **a != m.from)
            {
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
                self.masters.id(&m.from)
            ));
            lines.push(format!(
                "{}: CLUSTER SETSLOT {} MIGRATING {}",
                m.from,
                m.slot,
                self.masters.id(&m.to)
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
        let why = unhealthy(&seed, &[("10.0.0.1:7000", "aaaa", &demoted)])
            .unwrap()
            .to_string();
        assert!(
            why.contains("failover") && why.contains("a replica"),
            "{why}"
        );
        // Another node at the address.
        let why = unhealthy(&seed, &[("10.0.0.1:7000", "dddd", &own_a)])
            .unwrap()
            .to_string();
        assert!(why.contains("failover"), "{why}");
        // A node flagged failing.
        let failing = parse_cluster_nodes(
            "aaaa 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-100\n\
             bbbb 10.0.0.2:7000@17000 master,fail? - 0 0 2 connected 101-200\n",
        )
        .unwrap();
        let why = unhealthy(&failing, &[]).unwrap().to_string();
        assert!(
            why.contains("10.0.0.2:7000") && why.contains("fail?"),
            "{why}"
        );
    }
}
