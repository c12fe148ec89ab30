//! The one model of a node's memory through a move: what `status` calls near full, what
//! `predict` judges each plan by (its capacity table, the room of its plan by weight), what
//! `apply` refuses before its first write and watches before every batch. No other code of
//! the tool compares a node's memory with its limit.
//!
//! What it stands on (docs/cluster.md "What a node's memory does during a move"; each fact
//! pinned on Redis 7.0.15, Valkey 9.1.2 and Redis 8.2.3 by `tool/tests/tool_memory_facts.rs`):
//!
//! - A master's limit is `maxmemory`, against what eviction counts: `used_memory` less
//!   `mem_not_counted_for_evict` (its replicas' output buffers and the AOF buffer). A node
//!   checks it before a command runs: past it, under `noeviction` (or a `volatile-*` policy
//!   with no key to evict) it refuses writes with `OOM`; under `allkeys-*` it evicts any key
//!   first. A `RESTORE` that starts just under it lands whole.
//! - `MIGRATE` is no `denyoom` command: a source past its limit serves it under `noeviction`,
//!   and the keys leave it. Only the target's `RESTORE-ASKING` is refused, key by key. So a
//!   move that takes bytes off a master is never judged against that master's limit: the
//!   headroom is for growth. The source's serialized batch is real memory while its `MIGRATE`
//!   runs and freed before the next command: it counts against its host's RAM only.
//! - A target holds a batch's payload in its query buffer while the keys land: its moment is
//!   its level after the batch plus the payload. Its replicas receive the same through their
//!   master's output buffer (RAM on the target's host, not counted for eviction) and grow
//!   with it; a replica never evicts on its own (`replica-ignore-maxmemory yes`, the
//!   default): past its own `maxmemory` it grows on, and once promoted it evicts or refuses
//!   writes at once. It is held to its own `maxmemory`, on all it uses.
//! - A master that gives its last slot becomes a replica of the node that took it
//!   (`cluster-allow-replica-migration yes`) and full-syncs from it: it and its replicas copy
//!   the target's data set, and the target forks (its copy-on-write, as its last fork
//!   measured it, is RAM on its host that `used_memory` does not show).
//! - An atomic slot migration (Valkey 9) keeps the source's copy until the job ends (then
//!   trims it), and its fork's copy-on-write and the job's payload in the output buffer are
//!   the source's host's; the target grows as per key.
//! - `total_system_memory`, the host's RAM, ignores cgroup limits: in a container it is the
//!   machine's, not the container's. Nodes on one host (by IP) share it.
//!
//! Every judgement is [`Fit::Fits`] (at or under the limit less the headroom),
//! [`Fit::InMargin`] (past that, at or under the limit) or [`Fit::Crosses`] (past the limit).
//! `apply` refuses, and stops before, anything but `Fits`; `predict` says which plan would
//! be refused with the same walk ([`Budget::walk`]), so that for a cluster that has not
//! changed, "apply refuses such a plan" is true by construction.

use super::memory::{NodeMemory, Policy};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// `--headroom`'s default, in percent: the part of each limit kept free for growth.
pub const DEFAULT_HEADROOM: f64 = 10.0;

/// The batch a `MIGRATE` carries at most by default (`apply --batch-bytes`, 1 MiB), and the
/// batch a plan is judged with where it does not say (redis-cli's batches of 10 keys are
/// taken to be under it).
pub const DEFAULT_BATCH: f64 = 1024.0 * 1024.0;

/// The batch, bytes, a plan moved by `method` is walked with by default, by `predict` and
/// `apply` alike: [`DEFAULT_BATCH`] key by key; none by an atomic job (what it holds in
/// flight is its biggest key, [`MoveSize::transient`]).
pub fn default_batch(method: Method) -> f64 {
    match method {
        Method::PerKey => DEFAULT_BATCH,
        Method::Atomic => 0.0,
    }
}

/// The payloads a node that takes a batch is judged with on top of its level once the batch's
/// keys have landed. Measured on Redis 7.0.15, Valkey 9.1.2 and Redis 8.2.3, a target with a
/// replica at level L taking one key of K bytes as a payload of P bytes (a 3.5 MB string):
/// its `RESTORE` is refused with `OOM` where L + 2P passes `maxmemory` (the payload is held
/// twice while it is checked); right after, `used_memory` is L + K + P (the payload stays in
/// the query buffer until the node's cron trims it, some 100 ms later), and Valkey keeps
/// another P in its replication backlog until more writes push it out. So L + K + 2P.
pub const PAYLOADS_IN_FLIGHT: f64 = 2.0;

/// What a node's `used_memory` gains for a byte of `MEMORY USAGE` of the keys it takes: their
/// memory, and what `MEMORY USAGE` leaves out (the key table's buckets, the allocator's size
/// classes). Measured moving slots of 1, 15 and 20 keys (200 B, or 64 B to 1.5 KiB) to an
/// empty master, the gain fitted as keys times this plus slots times [`slot_overhead`]:
/// 1.072 on Redis 7.0.15, 1.047 on Valkey 9.1.2, 1.062 on Redis 8.2.3. A source frees its
/// keys' `MEMORY USAGE` and no more (0.994, 0.997, 1.0): it keeps its tables.
pub const TARGET_GROWTH: f64 = 1.07;

/// What a cluster node's `used_memory` gains for each slot with keys it takes, besides the
/// keys, bytes (its per-slot key tables), from the same runs: Redis 7.0.15 about 300, Valkey
/// 9.1.2 420, Redis 8.2.3 2550 to 2830 (its per-slot dictionaries, as Redis 7.4 and later keep
/// them); taken a little high: 750, 700 and 3200. Unknown servers take the largest.
pub fn slot_overhead(server: &str) -> f64 {
    match server_family(server) {
        Family::Valkey => 700.0,
        Family::Redis70 => 750.0,
        Family::Other => 3200.0,
    }
}

/// What a cluster node's `used_memory` frees for each slot it gives away, besides its keys'
/// `MEMORY USAGE`, bytes, from the same runs: Redis 8.2.3 about 2400 to 2750 (its per-slot
/// dictionaries); Redis 7.0.15 and Valkey 9.1.2 none (they keep their tables). Taken a little
/// low: 2400; unknown servers 0.
pub fn slot_freed(server: &str) -> f64 {
    match server_family(server) {
        Family::Other if server.starts_with("redis ") => 2400.0,
        _ => 0.0,
    }
}

/// The families whose memory differs through a move.
enum Family {
    /// Valkey (8 and later: per-slot tables, kept when a slot leaves).
    Valkey,
    /// Redis before 7.4 (one key table and a slot index).
    Redis70,
    /// Redis 7.4 and later (per-slot dictionaries), and anything not told apart.
    Other,
}

/// The family of `server` (`redis 7.0.15`, `valkey 9.1.2`, as [`super::memory::server_of`]).
fn server_family(server: &str) -> Family {
    let version = |v: &str| -> (u32, u32) {
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    };
    match server.split_once(' ') {
        Some(("valkey", _)) => Family::Valkey,
        Some(("redis", v)) if version(v) < (7, 4) => Family::Redis70,
        _ => Family::Other,
    }
}

/// The part of its host's free RAM (its RAM less the headroom, less what every node there
/// uses) a source near or past its limit may hold as one serialized batch.
pub const SOURCE_SHARE_OF_FREE_RAM: f64 = 0.25;

/// The part of a master's replica output buffer soft limit (`client-output-buffer-limit
/// replica`, 64 MiB by default) one batch may take: a stream past the soft limit for its
/// seconds, or past the hard one at once, disconnects the replica, which then resyncs in full.
pub const REPLICA_BUFFER_SHARE: f64 = 0.25;

/// `client-output-buffer-limit replica`'s soft limit by default (64 MiB), where it cannot be
/// read (`CONFIG GET` needs `+config|get`).
pub const DEFAULT_REPLICA_BUFFER_SOFT: f64 = 64.0 * 1024.0 * 1024.0;

/// How a node stands at a moment against its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fit {
    /// At or under its limit less the headroom.
    Fits,
    /// Past its limit less the headroom, at or under the limit itself.
    InMargin,
    /// Past its limit.
    Crosses,
}

/// The way slots move, which decides when a source lets go of its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// `MIGRATE`, key batch by key batch, as `redis-cli --cluster rebalance` does: each key
    /// leaves the source as it lands on the target.
    PerKey,
    /// Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`), as `valkey-cli
    /// --cluster-use-atomic-slot-migration`: the source keeps its copy until the job's end.
    Atomic,
}

/// What a node is held to.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Held {
    /// Its `maxmemory`, bytes, and what passing it does under its policy (a replica: what it
    /// does once promoted).
    Maxmemory { maxmemory: f64, policy: Policy },
    /// Its host's RAM (`total_system_memory`, bytes), shared by `nodes` nodes there: what
    /// they all use is judged together.
    HostRam {
        host: String,
        system: f64,
        nodes: usize,
    },
}

/// One node at one moment against what it is held to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgement {
    /// The node (`ip:port`), and for a replica its master's address.
    pub node: String,
    pub replica_of: Option<String>,
    /// What is judged now and at that moment, bytes: what eviction counts on a master (its
    /// `used_memory` less `mem_not_counted_for_evict`), all it uses on a replica; against its
    /// host's RAM, what every node there uses.
    pub now: f64,
    pub would_reach: f64,
    /// What it is held to, and the limit itself in bytes.
    pub held: Held,
    pub limit: f64,
    /// The headroom, a fraction of the limit.
    pub headroom: f64,
    /// Against it.
    pub fit: Fit,
    /// The slot whose move takes it there (`None`: the node as it stands).
    pub slot: Option<u16>,
}

impl Judgement {
    /// Its limit less the headroom, bytes.
    pub fn within(&self) -> f64 {
        self.limit * (1.0 - self.headroom)
    }

    /// Its share of the limit at that moment (0.92: 92%).
    pub fn fill(&self) -> f64 {
        if self.limit > 0.0 {
            self.would_reach / self.limit
        } else {
            0.0
        }
    }

    /// Whether it is a master under an eviction policy (`allkeys-*`), whose crossing deletes
    /// keys.
    pub fn evicts(&self) -> bool {
        self.replica_of.is_none()
            && matches!(
                self.held,
                Held::Maxmemory {
                    policy: Policy::AllKeys(_),
                    ..
                }
            )
    }
}

/// One move of a plan as the budget weighs it.
#[derive(Debug, Clone, PartialEq)]
pub struct MoveSize {
    /// The slot, its source and its target (`ip:port`).
    pub slot: u16,
    pub from: String,
    pub to: String,
    /// What its keys take in memory (`MEMORY USAGE`), bytes: what the target gains and the
    /// source loses.
    pub memory: f64,
    /// Their `DUMP` bytes: what travels.
    pub payload: f64,
    /// Its biggest key's memory, which a `MIGRATE` carries whole (0: none past a batch).
    pub big: f64,
    /// The slots it carries (1 for a plan by weight's move, a step's for redis-cli's plan),
    /// those with keys counted: each takes [`slot_overhead`] on its target.
    pub slots: f64,
}

impl MoveSize {
    /// The most one `MIGRATE` of it carries: a batch of `batch` bytes, less where the slot
    /// holds less, its biggest key where that is more.
    pub fn transient(&self, batch: f64) -> f64 {
        self.memory
            .max(self.payload)
            .min(batch)
            .max(self.big)
            .max(0.0)
    }
}

/// One node of the cluster as last read.
#[derive(Debug, Clone, PartialEq)]
struct Member {
    memory: NodeMemory,
    replica_of: Option<String>,
}

impl Member {
    /// What its `maxmemory` is held against: what eviction counts on a master, all it uses on
    /// a replica (which never evicts on its own).
    fn base(&self) -> f64 {
        if self.replica_of.is_some() {
            self.memory.used
        } else {
            self.memory.counted
        }
    }
}

/// The cluster's nodes' memory and their limits: the one place a node's memory is judged.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// The part of each limit kept free, a fraction (`--headroom` / 100).
    pub headroom: f64,
    members: BTreeMap<String, Member>,
}

/// The host of an `ip:port` address (`[::1]:7000` gives `[::1]`).
pub fn host_of(address: &str) -> &str {
    address.rsplit_once(':').map_or(address, |(h, _)| h)
}

/// What a plan has done to each node so far: bytes gained (less: lost), by address.
type Deltas = BTreeMap<String, f64>;

/// Each node through a walk of a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeWalk {
    /// The node, and for a replica its master's address.
    pub address: String,
    pub replica_of: Option<String>,
    /// Its `used_memory` now, at its fullest moment on the way (a batch in flight included
    /// where it grows), and when the plan is done (its replication backlog filled where it
    /// took keys), bytes.
    pub now: f64,
    pub fullest: f64,
    pub end: f64,
    /// The slot whose move is its fullest moment (`None`: now).
    pub fullest_at: Option<u16>,
    /// Its `maxmemory` (0: none).
    pub maxmemory: f64,
    /// Its worst judgement at the plan's moments (`None`: nothing to hold it to: it takes
    /// no part, or no limit and no host RAM is known). A source is judged against its host's
    /// RAM only (the headroom is for growth): a master that only gives is `None` where its
    /// host's RAM is not known.
    pub worst: Option<Judgement>,
}

impl NodeWalk {
    /// Its fill (`used_memory` over `maxmemory`) now, at its fullest and at the end; `None`
    /// without `maxmemory`.
    pub fn fills(&self) -> Option<(f64, f64, f64)> {
        (self.maxmemory > 0.0).then(|| {
            (
                self.now / self.maxmemory,
                self.fullest / self.maxmemory,
                self.end / self.maxmemory,
            )
        })
    }
}

/// A plan walked through the budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Walk {
    /// How the slots were taken to move.
    pub method: Method,
    /// Every node known, masters first.
    pub nodes: Vec<NodeWalk>,
    /// The first moment, in the plan's order, that is not [`Fit::Fits`]: what `apply`
    /// refuses the plan for.
    pub first: Option<Judgement>,
}

impl Walk {
    /// The walk of the node at `address`.
    pub fn node(&self, address: &str) -> Option<&NodeWalk> {
        self.nodes.iter().find(|n| n.address == address)
    }
}

impl Budget {
    /// An empty budget keeping `headroom` (a fraction) of every limit free.
    pub fn new(headroom: f64) -> Budget {
        Budget {
            headroom,
            members: BTreeMap::new(),
        }
    }

    /// Adds (or reads again) a master.
    pub fn add_master(&mut self, memory: NodeMemory) {
        self.members.insert(
            memory.address.clone(),
            Member {
                memory,
                replica_of: None,
            },
        );
    }

    /// Adds (or reads again) a replica of the master at `master`.
    pub fn add_replica(&mut self, memory: NodeMemory, master: &str) {
        self.members.insert(
            memory.address.clone(),
            Member {
                memory,
                replica_of: Some(master.to_string()),
            },
        );
    }

    /// What the node at `address` holds for a move `m` it takes: its keys' memory by
    /// [`TARGET_GROWTH`] and its slots' tables ([`slot_overhead`] of its server).
    fn grows_by(&self, address: &str, m: &MoveSize) -> f64 {
        let server = self.memory(address).map_or("", |x| x.server.as_str());
        m.memory * TARGET_GROWTH + m.slots * slot_overhead(server)
    }

    /// What the replication backlog of the node at `address` may still grow by, bytes (its
    /// `repl_backlog_size` less what it holds): a node that takes keys streams their payloads
    /// to its backlog, which grows by them up to its size and stays (10 MiB by default on
    /// Valkey, 1 MiB on Redis: a joining master's backlog is nearly empty, its peers' full).
    pub fn backlog_to_come(&self, address: &str) -> f64 {
        self.memory(address)
            .and_then(|m| m.backlog)
            .map_or(0.0, |(size, held)| (size - held).max(0.0))
    }

    /// Takes a new reading of a node it knows (an unknown one is ignored).
    pub fn update(&mut self, memory: NodeMemory) {
        if let Some(m) = self.members.get_mut(&memory.address) {
            m.memory = memory;
        }
    }

    /// Forgets the node at `address` (a replica that follows another master now).
    pub fn forget(&mut self, address: &str) {
        self.members.remove(address);
    }

    /// The node at `address` as last read.
    pub fn memory(&self, address: &str) -> Option<&NodeMemory> {
        self.members.get(address).map(|m| &m.memory)
    }

    /// For a replica, its master's address; `None` for a master or a node not known.
    pub fn replica_of(&self, address: &str) -> Option<&str> {
        self.members.get(address)?.replica_of.as_deref()
    }

    /// The masters, by address.
    pub fn masters(&self) -> impl Iterator<Item = &NodeMemory> {
        self.members
            .values()
            .filter(|m| m.replica_of.is_none())
            .map(|m| &m.memory)
    }

    /// The replicas (each with its master's address), by address.
    pub fn replicas(&self) -> impl Iterator<Item = (&NodeMemory, &str)> {
        self.members
            .values()
            .filter_map(|m| Some((&m.memory, m.replica_of.as_deref()?)))
    }

    /// The replicas of the master at `master` it knows.
    pub fn replicas_of(&self, master: &str) -> Vec<String> {
        self.members
            .iter()
            .filter(|(_, m)| m.replica_of.as_deref() == Some(master))
            .map(|(a, _)| a.clone())
            .collect()
    }

    /// How `value` stands against `limit` less the headroom.
    fn fit(&self, value: f64, limit: f64) -> Fit {
        if value > limit {
            Fit::Crosses
        } else if value > limit * (1.0 - self.headroom) {
            Fit::InMargin
        } else {
            Fit::Fits
        }
    }

    /// The node at `address` judged at a moment where the plan has done `deltas` and the
    /// moment adds `extra` to it (a batch's payload and keys) and `host_extra` to its host's
    /// RAM besides (buffers and forks that `used_memory` of no node there shows in full): its
    /// `maxmemory` and its host's RAM, the worse of the two; `None` where it is held to
    /// neither (no `maxmemory`, no host RAM said) or not known.
    fn judge(
        &self,
        address: &str,
        deltas: &Deltas,
        extra: f64,
        host_extra: f64,
        slot: Option<u16>,
    ) -> Option<Judgement> {
        let m = self.members.get(address)?;
        self.judge_as(address, m, deltas, extra, host_extra, slot)
    }

    /// [`Budget::judge`] of the node at `address` as `m` says it is (a master drained by the
    /// plan is judged as the replica it turns into).
    fn judge_as(
        &self,
        address: &str,
        m: &Member,
        deltas: &Deltas,
        extra: f64,
        host_extra: f64,
        slot: Option<u16>,
    ) -> Option<Judgement> {
        let [limit, host] = self.judge_each(address, m, deltas, extra, host_extra, slot);
        match (limit, host) {
            (Some(limit), Some(host)) if host.fit > limit.fit => Some(host),
            (Some(limit), _) => Some(limit),
            (None, host) => host,
        }
    }

    /// The node at `address`, as `m` says it is, judged against its `maxmemory` (where it has
    /// one) and against its host's RAM (where it is said), in that order: see
    /// [`Budget::judge`].
    fn judge_each(
        &self,
        address: &str,
        m: &Member,
        deltas: &Deltas,
        extra: f64,
        host_extra: f64,
        slot: Option<u16>,
    ) -> [Option<Judgement>; 2] {
        let delta = deltas.get(address).copied().unwrap_or(0.0);
        let limit = (m.memory.maxmemory > 0.0).then(|| {
            let would_reach = (m.base() + delta).max(0.0) + extra;
            Judgement {
                node: address.to_string(),
                replica_of: m.replica_of.clone(),
                now: m.base(),
                would_reach,
                held: Held::Maxmemory {
                    maxmemory: m.memory.maxmemory,
                    policy: m.memory.policy.clone(),
                },
                limit: m.memory.maxmemory,
                headroom: self.headroom,
                fit: self.fit(would_reach, m.memory.maxmemory),
                slot,
            }
        });
        let host = self
            .host_judgement(address, deltas, extra + host_extra, slot)
            .map(|mut host| {
                host.replica_of.clone_from(&m.replica_of);
                host
            });
        [limit, host]
    }

    /// The host of the node at `address` judged as [`Budget::judge`] does: what every node
    /// there uses, with `deltas` and `extra`, against its RAM.
    fn host_judgement(
        &self,
        address: &str,
        deltas: &Deltas,
        extra: f64,
        slot: Option<u16>,
    ) -> Option<Judgement> {
        let m = self.members.get(address)?;
        let system = m.memory.system;
        if system <= 0.0 {
            return None;
        }
        let host = host_of(address);
        let on_host: Vec<(&String, &Member)> = self
            .members
            .iter()
            .filter(|(a, _)| host_of(a) == host)
            .collect();
        let now: f64 = on_host.iter().map(|(_, o)| o.memory.used).sum();
        let then: f64 = on_host
            .iter()
            .map(|(a, o)| (o.memory.used + deltas.get(a.as_str()).copied().unwrap_or(0.0)).max(0.0))
            .sum::<f64>()
            + extra;
        Some(Judgement {
            node: address.to_string(),
            replica_of: m.replica_of.clone(),
            now,
            would_reach: then,
            held: Held::HostRam {
                host: host.to_string(),
                system,
                nodes: on_host.len(),
            },
            limit: system,
            headroom: self.headroom,
            fit: self.fit(then, system),
            slot,
        })
    }

    /// The node at `address` as it stands, no move under way, against what holds it: its
    /// `maxmemory` where it has one, else its host's RAM. `status`'s near-full rule (a master
    /// at or past its limit less the headroom is [`Fit::InMargin`] or worse). `None` where
    /// nothing holds it or it is not known.
    pub fn standing(&self, address: &str) -> Option<Judgement> {
        let m = self.members.get(address)?;
        let [limit, host] = self.judge_each(address, m, &Deltas::new(), 0.0, 0.0, None);
        limit.or(host)
    }

    /// The most memory the master at `master` may still take by a plan's end, bytes: what
    /// keeps it and each of its replicas [`Fit::Fits`] with a batch of `batch` bytes in
    /// flight on top ([`PAYLOADS_IN_FLIGHT`] of it), against its `maxmemory` and its host's
    /// RAM both (the smaller room); `None` where nothing holds any of them. Its replication
    /// backlog's growth, which depends on what it takes, is left to the walk of the plan made.
    /// The plan by weight cuts a master's share to it.
    pub fn room(&self, master: &str, batch: f64) -> Option<f64> {
        let extra = PAYLOADS_IN_FLIGHT * batch;
        std::iter::once(master.to_string())
            .chain(self.replicas_of(master))
            .filter_map(|a| {
                let m = self.members.get(&a)?;
                self.judge_each(&a, m, &Deltas::new(), extra, 0.0, None)
                    .into_iter()
                    .flatten()
                    .map(|j| j.within() - j.would_reach)
                    .reduce(f64::min)
            })
            .reduce(f64::min)
    }

    /// The largest batch, bytes, a `MIGRATE` from the source at `source` should carry, of
    /// `batch` asked: `batch`, but for a source whose standing is not [`Fit::Fits`] (near or
    /// past its limit), at most [`SOURCE_SHARE_OF_FREE_RAM`] of its host's free RAM (its
    /// serialized batch is RAM there while the `MIGRATE` runs); and never more than
    /// [`REPLICA_BUFFER_SHARE`] of `replica_soft` (its target's replica output buffer soft
    /// limit, bytes) where the target has replicas. One key always goes, whatever its size.
    pub fn batch_bound(&self, source: &str, target: &str, batch: f64, replica_soft: f64) -> f64 {
        let mut bound = batch;
        let full = self
            .standing(source)
            .is_some_and(|j| j.fit != Fit::Fits && matches!(j.held, Held::Maxmemory { .. }));
        if full {
            if let Some(host) = self.host_judgement(source, &Deltas::new(), 0.0, None) {
                let free = (host.within() - host.now).max(0.0);
                bound = bound.min(free * SOURCE_SHARE_OF_FREE_RAM);
            }
        }
        if !self.replicas_of(target).is_empty() && replica_soft > 0.0 {
            bound = bound.min(replica_soft * REPLICA_BUFFER_SHARE);
        }
        bound.max(1.0)
    }

    /// Before a batch of `batch` bytes lands on the node at `address` (a target, or a replica
    /// of one) whose last reading is followed by `since` bytes moved to it (each grown by
    /// [`TARGET_GROWTH`]): its keys, its slot's tables, [`PAYLOADS_IN_FLIGHT`] payloads and
    /// the batch streamed to its replication backlog ([`Budget::backlog_to_come`]) on
    /// top (a target's host holds the payload once more for
    /// each of its replicas' output buffers), judged as the walk judges the last batch of a
    /// move. `None` where nothing holds it.
    pub fn before_batch(
        &self,
        address: &str,
        since: f64,
        batch: f64,
        slot: u16,
    ) -> Option<Judgement> {
        let deltas: Deltas = [(address.to_string(), since * TARGET_GROWTH)]
            .into_iter()
            .collect();
        let buffers = batch * self.replicas_of(address).len() as f64;
        let server = self.memory(address).map_or("", |x| x.server.as_str());
        let extra = (TARGET_GROWTH + PAYLOADS_IN_FLIGHT) * batch
            + slot_overhead(server)
            + self.backlog_to_come(address).min(batch);
        self.judge(address, &deltas, extra, buffers, Some(slot))
    }

    /// Walks `moves` (in the order they are carried out) from each node's memory as last
    /// read, by `method`, with batches of `batch` bytes; `drained`: the masters the plan
    /// empties, which turn replica of the target of their last move.
    ///
    /// Per key, at each move: the target and its replicas gain its memory (by [`TARGET_GROWTH`],
    /// and [`slot_overhead`] a slot) and are judged at that level with its batch in flight and its
    /// replication backlog's growth by the payloads streamed to it so far
    /// ([`Budget::backlog_to_come`] at most) on top ([`PAYLOADS_IN_FLIGHT`] payloads of
    /// [`MoveSize::transient`]); the host of the target takes the batch again for each replica's
    /// output buffer, the source's host the serialized batch; the source and its replicas then lose
    /// its memory (a source is never judged against its own limit). Atomic: a job is the moves of
    /// one pair in a row; the source keeps its copy until the job's end, its host holding the job's
    /// payload and the source's last fork's copy-on-write meanwhile. A drained master and its
    /// replicas, at its last move, take the target's level (a full sync), and the target's host its
    /// fork. Nodes the budget does not know start at 0 and are held to nothing.
    pub fn walk(&self, moves: &[MoveSize], batch: f64, method: Method, drained: &[String]) -> Walk {
        let mut deltas = Deltas::new();
        // The payloads each node has streamed to its replication backlog.
        let mut streamed = Deltas::new();
        let mut tracker = Tracker::new(self);
        let mut job_start = 0usize;
        for (i, m) in moves.iter().enumerate() {
            let t = m.transient(batch);
            let replicas = self.replicas_of(&m.to);
            *deltas.entry(m.to.clone()).or_default() += self.grows_by(&m.to, m);
            for r in &replicas {
                *deltas.entry(r.clone()).or_default() += self.grows_by(r, m);
            }
            let host_buffers = t * replicas.len() as f64;
            let flight = PAYLOADS_IN_FLIGHT * t;
            for node in std::iter::once(&m.to).chain(&replicas) {
                let s = streamed.entry(node.clone()).or_default();
                *s += m.payload;
                let extra = flight + self.backlog_to_come(node).min(*s);
                let buffers = if *node == m.to { host_buffers } else { 0.0 };
                tracker.moment(self, node, &deltas, extra, buffers, m.slot);
            }
            let job_ends = moves
                .get(i + 1)
                .is_none_or(|n| n.from != m.from || n.to != m.to);
            match method {
                Method::PerKey => {
                    tracker.host_moment(self, &m.from, &deltas, t, m.slot);
                    shrink(self, &mut deltas, &m.from, m.memory, m.slots);
                }
                Method::Atomic if job_ends => {
                    let job = moves.get(job_start..=i).unwrap_or_default();
                    let payload: f64 = job.iter().map(|j| j.payload).sum();
                    let cow = self.memory(&m.from).map_or(0.0, |x| x.fork_cow);
                    tracker.host_moment(self, &m.from, &deltas, payload + cow, m.slot);
                    let memory: f64 = job.iter().map(|j| j.memory).sum();
                    let slots: f64 = job.iter().map(|j| j.slots).sum();
                    shrink(self, &mut deltas, &m.from, memory, slots);
                }
                Method::Atomic => {}
            }
            if job_ends {
                job_start = i + 1;
            }
            let last_from_it = !moves.iter().skip(i + 1).any(|n| n.from == m.from);
            if last_from_it && drained.contains(&m.from) {
                self.drain(&mut tracker, &mut deltas, m);
            }
        }
        tracker.finish(self, &deltas, &streamed, method)
    }

    /// A drained master at its last move `m`: it and its replicas copy the target's data set
    /// (judged against their own limits, as replicas), and the target forks for them.
    fn drain(&self, tracker: &mut Tracker, deltas: &mut Deltas, m: &MoveSize) {
        let target_level = self.members.get(&m.to).map_or(0.0, |t| {
            (t.memory.used + deltas.get(&m.to).copied().unwrap_or(0.0)).max(0.0)
        });
        let cow = self.memory(&m.to).map_or(0.0, |x| x.fork_cow);
        tracker.host_moment(self, &m.to, deltas, cow, m.slot);
        let mut copies = vec![m.from.clone()];
        copies.extend(self.replicas_of(&m.from));
        for c in &copies {
            let Some(member) = self.members.get(c) else {
                continue;
            };
            deltas.insert(c.clone(), target_level - member.memory.used);
            // Judged as the replica it is then: all it uses, no eviction of its own.
            let as_replica = Member {
                memory: member.memory.clone(),
                replica_of: Some(m.to.clone()),
            };
            tracker.level(c, member.memory.used, deltas, 0.0, m.slot);
            if let Some(j) = self.judge_as(c, &as_replica, deltas, 0.0, 0.0, Some(m.slot)) {
                tracker.note(j);
            }
        }
    }

    /// With `--parallel`, where the moves of a master not in `kept` may go in any order (it
    /// only gives or only takes): each move's batch judged at that master's highest level
    /// whatever the order, a target's (and its replicas') after all the moves, a source's
    /// host before any. The first moment that is not [`Fit::Fits`], if any.
    pub fn any_order(
        &self,
        moves: &[MoveSize],
        batch: f64,
        kept: &BTreeSet<&str>,
    ) -> Option<Judgement> {
        let mut end = Deltas::new();
        for m in moves {
            for node in std::iter::once(m.to.clone()).chain(self.replicas_of(&m.to)) {
                let grows = self.grows_by(&node, m);
                *end.entry(node).or_default() += grows;
            }
        }
        // What each target takes over all the moves (streamed to its backlog).
        let mut streamed_to: BTreeMap<&str, f64> = BTreeMap::new();
        for m in moves {
            *streamed_to.entry(m.to.as_str()).or_default() += m.payload;
        }
        let none = Deltas::new();
        for m in moves {
            let t = m.transient(batch);
            let streamed = streamed_to.get(m.to.as_str()).copied().unwrap_or(0.0);
            if !kept.contains(m.to.as_str()) {
                let replicas = self.replicas_of(&m.to);
                let buffers = t * replicas.len() as f64;
                let judged = std::iter::once((m.to.clone(), buffers))
                    .chain(replicas.into_iter().map(|r| (r, 0.0)));
                for (node, host_extra) in judged {
                    let extra = PAYLOADS_IN_FLIGHT * t + self.backlog_to_come(&node).min(streamed);
                    if let Some(j) = self
                        .judge(&node, &end, extra, host_extra, Some(m.slot))
                        .filter(|j| j.fit != Fit::Fits)
                    {
                        return Some(j);
                    }
                }
            }
            if !kept.contains(m.from.as_str()) {
                if let Some(j) = self
                    .host_judgement(&m.from, &none, t, Some(m.slot))
                    .filter(|j| j.fit != Fit::Fits)
                {
                    return Some(j);
                }
            }
        }
        None
    }
}

/// Takes `memory` (its keys' `MEMORY USAGE`) and the tables of `slots` slots off the node at
/// `from` and its replicas ([`slot_freed`]).
fn shrink(budget: &Budget, deltas: &mut Deltas, from: &str, memory: f64, slots: f64) {
    for node in std::iter::once(from.to_string()).chain(budget.replicas_of(from)) {
        let server = budget.memory(&node).map_or("", |x| x.server.as_str());
        *deltas.entry(node).or_default() -= memory + slots * slot_freed(server);
    }
}

/// What a walk keeps of each node: its fullest `used_memory` and the slot then, its worst
/// judgement, and the first moment not [`Fit::Fits`].
struct Tracker {
    fullest: BTreeMap<String, (f64, Option<u16>)>,
    /// The nodes that took keys (their backlog fills).
    took: BTreeSet<String>,
    worst: BTreeMap<String, Judgement>,
    first: Option<Judgement>,
}

impl Tracker {
    fn new(budget: &Budget) -> Tracker {
        let fullest = budget
            .members
            .iter()
            .map(|(a, m)| (a.clone(), (m.memory.used, None)))
            .collect();
        Tracker {
            fullest,
            took: BTreeSet::new(),
            worst: BTreeMap::new(),
            first: None,
        }
    }

    /// A moment of the node at `address` that grows (a target or a replica of one): judged,
    /// and its level noted.
    fn moment(
        &mut self,
        budget: &Budget,
        address: &str,
        deltas: &Deltas,
        extra: f64,
        host_extra: f64,
        slot: u16,
    ) {
        let used = budget.members.get(address).map_or(0.0, |m| m.memory.used);
        self.took.insert(address.to_string());
        self.level(address, used, deltas, extra, slot);
        if let Some(j) = budget.judge(address, deltas, extra, host_extra, Some(slot)) {
            self.note(j);
        }
    }

    /// Notes the `used_memory` of the node at `address` (`used` now) at a moment: `deltas`
    /// and `extra` on top.
    fn level(&mut self, address: &str, used: f64, deltas: &Deltas, extra: f64, slot: u16) {
        let level = (used + deltas.get(address).copied().unwrap_or(0.0)).max(0.0) + extra;
        let e = self
            .fullest
            .entry(address.to_string())
            .or_insert((used, None));
        if level > e.0 {
            *e = (level, Some(slot));
        }
    }

    /// A moment of the host of the node at `address` alone (a source's serialized batch, a
    /// fork): `extra` bytes there besides what its nodes use.
    fn host_moment(
        &mut self,
        budget: &Budget,
        address: &str,
        deltas: &Deltas,
        extra: f64,
        slot: u16,
    ) {
        if let Some(j) = budget.host_judgement(address, deltas, extra, Some(slot)) {
            self.note(j);
        }
    }

    fn note(&mut self, j: Judgement) {
        if j.fit != Fit::Fits && self.first.is_none() {
            self.first = Some(j.clone());
        }
        match self.worst.get(&j.node) {
            Some(w) if w.fit > j.fit || (w.fit == j.fit && w.fill() >= j.fill()) => {}
            _ => {
                self.worst.insert(j.node.clone(), j);
            }
        }
    }

    fn finish(
        mut self,
        budget: &Budget,
        deltas: &Deltas,
        streamed: &Deltas,
        method: Method,
    ) -> Walk {
        let mut nodes: Vec<NodeWalk> = budget
            .members
            .iter()
            .map(|(a, m)| {
                let (fullest, fullest_at) = self.fullest.remove(a).unwrap_or((m.memory.used, None));
                // A node that took keys ends with their payloads in its replication backlog.
                let backlog = if self.took.contains(a) {
                    budget
                        .backlog_to_come(a)
                        .min(streamed.get(a).copied().unwrap_or(0.0))
                } else {
                    0.0
                };
                NodeWalk {
                    address: a.clone(),
                    replica_of: m.replica_of.clone(),
                    now: m.memory.used,
                    fullest,
                    end: (m.memory.used + deltas.get(a).copied().unwrap_or(0.0)).max(0.0) + backlog,
                    fullest_at,
                    maxmemory: m.memory.maxmemory,
                    worst: self.worst.remove(a),
                }
            })
            .collect();
        // The masters the plan names whose memory is not known: from 0, held to nothing.
        for (a, delta) in deltas {
            if budget.members.contains_key(a) {
                continue;
            }
            let (fullest, fullest_at) = self.fullest.remove(a).unwrap_or((0.0, None));
            nodes.push(NodeWalk {
                address: a.clone(),
                replica_of: None,
                now: 0.0,
                fullest: fullest.max(delta.max(0.0)),
                end: delta.max(0.0),
                fullest_at,
                maxmemory: 0.0,
                worst: None,
            });
        }
        // Masters first, each group by address.
        nodes.sort_by(|a, b| {
            (a.replica_of.is_some(), &a.address).cmp(&(b.replica_of.is_some(), &b.address))
        });
        Walk {
            method,
            nodes,
            first: self.first,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::memory::memory_of;

    /// A node's memory as `INFO` says it: `used_memory`, `maxmemory` and its policy, 1 GB of
    /// host RAM.
    fn node(address: &str, used: f64, maxmemory: f64, policy: &str) -> NodeMemory {
        let text = format!(
            "used_memory:{used}\r\nmaxmemory:{maxmemory}\r\nmaxmemory_policy:{policy}\r\n\
             total_system_memory:1000000000\r\n"
        );
        memory_of(address, &text, "")
    }

    /// Nodes as (address, used_memory, maxmemory, master of a replica), `allkeys-lru`.
    fn budget(nodes: &[(&str, f64, f64, Option<&str>)]) -> Budget {
        let mut b = Budget::new(0.1);
        for &(a, used, max, of) in nodes {
            let m = node(a, used, max, "allkeys-lru");
            match of {
                Some(master) => b.add_replica(m, master),
                None => b.add_master(m),
            }
        }
        b
    }

    fn mv(slot: u16, from: &str, to: &str, memory: f64) -> MoveSize {
        MoveSize {
            slot,
            from: from.into(),
            to: to.into(),
            memory,
            payload: memory / 2.0,
            big: 0.0,
            slots: 0.0,
        }
    }

    const MB: f64 = 1e6;

    #[test]
    fn a_plan_past_a_targets_limit_is_named_with_the_slot_that_takes_it_there() {
        // A joining master with maxmemory 10 MB, 2 MB used: 9 MB is its limit less 10%.
        let b = budget(&[
            ("a:1", 50.0 * MB, 0.0, None),
            ("j:1", 2.0 * MB, 10.0 * MB, None),
            ("j:2", 2.0 * MB, 0.0, Some("j:1")),
        ]);
        let moves: Vec<MoveSize> = (0..10).map(|i| mv(i, "a:1", "j:1", MB)).collect();
        // 2 MB + 4 moves of 1 MB (4.28 MB grown) + two payloads of 1 MB in flight = 8.28 MB:
        // under the limit less the headroom; a fifth takes it to 9.35 MB, past it.
        let w = b.walk(&moves[..4], MB, Method::PerKey, &[]);
        assert_eq!(w.first, None);
        let j1 = w.node("j:1").unwrap();
        let r = |x: f64| (x / 1e3).round() * 1e3;
        let grown = |moves: f64| 2.0 * MB + moves * MB * TARGET_GROWTH;
        assert_eq!(
            (j1.now, r(j1.fullest), r(j1.end)),
            (2.0 * MB, r(grown(4.0) + 2.0 * MB), r(grown(4.0)))
        );
        let first = b.walk(&moves, MB, Method::PerKey, &[]).first.unwrap();
        assert_eq!((first.node.as_str(), first.slot), ("j:1", Some(4)));
        assert_eq!(first.fit, Fit::InMargin);
        assert_eq!(r(first.would_reach), r(grown(5.0) + 2.0 * MB));
        // A replica with a lower maxmemory than its master's is held to its own, on all it
        // uses.
        let b = budget(&[
            ("a:1", 50.0 * MB, 0.0, None),
            ("j:1", 2.0 * MB, 100.0 * MB, None),
            ("j:2", 2.0 * MB, 5.0 * MB, Some("j:1")),
        ]);
        let first = b.walk(&moves, MB, Method::PerKey, &[]).first.unwrap();
        assert_eq!(
            (first.node.as_str(), first.replica_of.as_deref()),
            ("j:2", Some("j:1"))
        );
        // Keys moved away free room on a source that is a target later.
        let b = budget(&[
            ("a:1", 7.0 * MB, 10.0 * MB, None),
            ("b:1", MB, 100.0 * MB, None),
        ]);
        let there_and_back = [mv(1, "a:1", "b:1", 3.0 * MB), mv(2, "b:1", "a:1", 2.0 * MB)];
        assert_eq!(b.walk(&there_and_back, MB, Method::PerKey, &[]).first, None);
        let back = b.walk(&there_and_back[1..], MB, Method::PerKey, &[]).first;
        assert_eq!(
            back.map(|j| j.node),
            Some("a:1".to_string()),
            "7 + 2 + 1 > 9"
        );
    }

    #[test]
    fn a_full_master_is_relieved_not_refused() {
        // Three masters at 92% of 100 MB under noeviction, an empty fourth of the same
        // maxmemory: the run takes 23 MB off each (the cluster, scaled).
        let mut b = Budget::new(0.1);
        for a in ["a:1", "b:1", "c:1"] {
            b.add_master(node(a, 92.0 * MB, 100.0 * MB, "noeviction"));
        }
        b.add_master(node("d:1", 2.0 * MB, 100.0 * MB, "noeviction"));
        // As they stand, the three are past their limit less the headroom.
        let standing = b.standing("a:1").unwrap();
        assert_eq!((standing.fit, standing.fill()), (Fit::InMargin, 0.92));
        assert_eq!(b.standing("d:1").unwrap().fit, Fit::Fits);
        let moves: Vec<MoveSize> = ["a:1", "b:1", "c:1"]
            .iter()
            .flat_map(|a| (0..23).map(move |i| mv(i, a, "d:1", MB)))
            .collect();
        let w = b.walk(&moves, MB, Method::PerKey, &[]);
        assert_eq!(
            w.first, None,
            "a source is not judged against its own limit"
        );
        let a = w.node("a:1").unwrap();
        assert_eq!((a.fullest, a.end), (92.0 * MB, 69.0 * MB));
        assert_eq!(
            a.worst.as_ref().map(|j| j.fit),
            Some(Fit::Fits),
            "its host only"
        );
        // The target grows by TARGET_GROWTH times the memory it takes.
        let d = w.node("d:1").unwrap();
        let r = |x: f64| (x / 1e3).round() * 1e3;
        let end = 2.0 * MB + 69.0 * MB * TARGET_GROWTH;
        assert_eq!((r(d.end), r(d.fullest)), (r(end), r(end + 2.0 * MB)));
        // Atomic: the sources keep their copies until each job's end, judged on their host
        // only; the target as per key.
        assert_eq!(b.walk(&moves, MB, Method::Atomic, &[]).first, None);
        // A target near full is refused all the same: c gives to a, already at 92%.
        let first = b.walk(&[mv(1, "c:1", "a:1", MB)], MB, Method::PerKey, &[]);
        assert_eq!(
            first.first.map(|j| (j.node, j.fit)),
            Some(("a:1".into(), Fit::InMargin))
        );
    }

    #[test]
    fn a_full_source_gets_batches_bound_by_its_hosts_free_ram() {
        // Host RAM 1 GB, of which 10% is kept: 900 MB. Two nodes there use 800 MB; the full
        // one may hold a quarter of the 100 MB free as one batch.
        let mut b = Budget::new(0.1);
        b.add_master(node("h:1", 400.0 * MB, 420.0 * MB, "noeviction"));
        b.add_master(node("h:2", 400.0 * MB, 0.0, "noeviction"));
        b.add_master(node("o:1", 1.0 * MB, 420.0 * MB, "noeviction"));
        assert_eq!(b.batch_bound("h:1", "o:1", 64.0 * MB, 64.0 * MB), 25.0 * MB);
        // A source with room keeps the batch asked.
        assert_eq!(b.batch_bound("o:1", "h:1", 64.0 * MB, 64.0 * MB), 64.0 * MB);
        // A target with a replica: a quarter of its replica output buffer's soft limit.
        b.add_replica(node("o:2", 1.0 * MB, 0.0, "noeviction"), "o:1");
        assert_eq!(b.batch_bound("h:2", "o:1", 64.0 * MB, 64.0 * MB), 16.0 * MB);
    }

    #[test]
    fn a_host_without_maxmemory_counts_every_node_on_it() {
        // Two nodes without maxmemory on host h share its 1 GB: 420 + 420 used, so a target
        // there may take 60 MB less two payloads before the host passes 900 MB.
        let mut b = Budget::new(0.1);
        b.add_master(node("h:1", 420.0 * MB, 0.0, "noeviction"));
        b.add_master(node("h:2", 420.0 * MB, 0.0, "noeviction"));
        b.add_master(node("o:1", 100.0 * MB, 0.0, "noeviction"));
        let room = b.room("h:1", MB).unwrap();
        assert!((room - 58.0 * MB).abs() < 1.0, "{room}");
        let w = b.walk(&[mv(1, "o:1", "h:1", 60.0 * MB)], MB, Method::PerKey, &[]);
        let first = w.first.unwrap();
        assert!(
            matches!(first.held, Held::HostRam { nodes: 2, .. }),
            "{first:?}"
        );
        let r = |x: f64| (x / 1e3).round() * 1e3;
        assert_eq!(
            r(first.would_reach),
            r(420.0 * MB + 60.0 * MB * TARGET_GROWTH + 2.0 * MB + 420.0 * MB)
        );
    }

    #[test]
    fn a_big_key_counts_whole_and_a_drained_master_copies_its_target() {
        // A move of 1 MB to a master with 2 MB of its 9 MB limit: its batch fits; a big key
        // of 6.5 MB in it moves whole, two payloads of it in flight: past the limit.
        let b = budget(&[
            ("a:1", 50.0 * MB, 0.0, None),
            ("j:1", 2.0 * MB, 10.0 * MB, None),
        ]);
        let mut m = mv(1, "a:1", "j:1", MB);
        assert_eq!(
            b.walk(std::slice::from_ref(&m), MB, Method::PerKey, &[])
                .first,
            None
        );
        m.big = 6.5 * MB;
        assert!(b.walk(&[m], MB, Method::PerKey, &[]).first.is_some());
        // A master drained into a target of 30 MB becomes its replica and copies it all.
        let b = budget(&[
            ("a:1", 5.0 * MB, 10.0 * MB, None),
            ("t:1", 30.0 * MB, 100.0 * MB, None),
        ]);
        let drain = [mv(1, "a:1", "t:1", MB)];
        assert_eq!(b.walk(&drain, MB, Method::PerKey, &[]).first, None);
        let w = b.walk(&drain, MB, Method::PerKey, &["a:1".into()]);
        let first = w.first.clone().unwrap();
        assert_eq!(
            (first.node.as_str(), first.replica_of.as_deref()),
            ("a:1", Some("t:1"))
        );
        assert_eq!(w.node("a:1").unwrap().end, 30.0 * MB + MB * TARGET_GROWTH);
    }

    #[test]
    fn side_by_side_a_big_key_is_judged_on_top_of_its_targets_highest_memory() {
        // A target with 2 MB of its 9 MB limit takes four slots of 1 MB (1.07 MB grown each),
        // the first with a big key of 2.5 MB, two payloads of which are in flight: in the
        // plan's order 2 + 1.07 + 5 = 8.07 MB at most; moved last, as a parallel run may move
        // it, 2 + 4.28 + 5 = 11.28 MB.
        let b = budget(&[
            ("a:1", 50.0 * MB, 0.0, None),
            ("j:1", 2.0 * MB, 10.0 * MB, None),
        ]);
        let mut moves: Vec<MoveSize> = (0..4).map(|i| mv(i, "a:1", "j:1", MB)).collect();
        moves[0].big = 2.5 * MB;
        assert_eq!(b.walk(&moves, MB, Method::PerKey, &[]).first, None);
        let first = b.any_order(&moves, MB, &BTreeSet::new()).unwrap();
        assert_eq!((first.node.as_str(), first.slot), ("j:1", Some(0)));
        // A master kept in the plan's order is the walk's to judge.
        let kept: BTreeSet<&str> = ["j:1"].into_iter().collect();
        assert_eq!(b.any_order(&moves, MB, &kept), None);
    }

    #[test]
    fn a_batch_counts_three_times_on_its_target() {
        let b = budget(&[
            ("a:1", 8.0 * MB, 10.0 * MB, None),
            ("b:1", 8.0 * MB, 10.0 * MB, None),
        ]);
        // The target: 8 MB + its keys (grown by 1.07) and two payloads of 0.25 MB = 8.77 MB,
        // under its limit less the headroom; 0.4 MB three times passes it.
        assert_eq!(
            b.before_batch("b:1", 0.0, 0.25 * MB, 1).unwrap().fit,
            Fit::Fits
        );
        assert_eq!(
            b.before_batch("b:1", 0.0, 0.4 * MB, 1).unwrap().fit,
            Fit::InMargin
        );
        // What moved since the last reading counts.
        assert_eq!(
            b.before_batch("b:1", 0.5 * MB, 0.25 * MB, 1).unwrap().fit,
            Fit::InMargin
        );
        // Past the limit itself.
        assert_eq!(
            b.before_batch("b:1", 2.0 * MB, 0.5 * MB, 1).unwrap().fit,
            Fit::Crosses
        );
    }
}
