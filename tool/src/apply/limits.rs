//! The memory limits and the replicas `ringslot apply` keeps to, judged by the one memory
//! model ([`crate::cluster::budget`]): before its first write, the moves to go walked against
//! every node's limit as it stands ([`Limits::check_plan`], the walk `predict` judges the plan
//! by); while it runs, each target's and source's memory and `evicted_keys`, and their
//! replicas' memory, read again every [`WATCH_EVERY_BYTES`] moved to a node or every
//! [`WATCH_EVERY`], and at once before a batch that could cross ([`Limits::before_batch`]);
//! between slots, each replica of the next move's masters streaming and within
//! [`REPLICA_LAG_BOUND`] of its master ([`Limits::replica_behind`]).
//!
//! A move that takes bytes off a master is never stopped because that master is full: the
//! headroom is for growth. A source near or past its limit gets batches no larger than the
//! budget's bound ([`Limits::batch_bound`]), and a master that evicts while the run has only
//! taken bytes off it is said, not stopped on (the run relieves it). Reads only: every
//! connection here is its own, and sends `INFO` (and `CONFIG GET client-output-buffer-limit`,
//! where allowed) alone.

use crate::cluster::budget::{
    Budget, Fit, Judgement, Method, MoveSize, DEFAULT_REPLICA_BUFFER_SOFT,
};
use crate::cluster::connection::NodeConnection;
use crate::cluster::error::{Code, NodeError};
use crate::cluster::finding::Finding;
use crate::cluster::link::Link;
use crate::cluster::memory::{read_memory, replicas_of, NodeMemory, ReplicaLink};
use crate::cluster::snapshot::Snapshot;
use crate::cluster::topology::nodes_on;
use crate::plan::SlotMove;
use anyhow::{anyhow, bail, Result};
use ringslot_engine::cluster::myself;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// What other clients' buffers may add to a target's `mem_clients_normal` while the run waits
/// for its query buffer's trim, bytes; the least a replica's link to it is let hold
/// ([`Limits::after_big_batch`]).
const TRIM_SLACK: f64 = 64.0 * 1024.0;

/// Bytes moved to (or from) a node after which its memory is read again.
pub(crate) const WATCH_EVERY_BYTES: u64 = 4 << 20;
/// Time after which a node the run moves keys to or from is read again, whatever was moved:
/// clients write meanwhile.
pub(crate) const WATCH_EVERY: Duration = Duration::from_millis(250);
/// How far a replica may lag its master, in bytes of the replication stream, before the run
/// waits for it between slots (a master learns its replicas' offsets once a second).
pub(crate) const REPLICA_LAG_BOUND: u64 = 32 << 20;
/// The most a run waits for a replica to stream again or catch up before it stops.
pub(crate) const REPLICA_WAIT: Duration = Duration::from_secs(60);
/// The most a run waits, after a big key's `MIGRATE`, for its target and its replicas to
/// trim the query buffers that held the payload ([`Limits::after_big_batch`]).
const TRIM_WAIT: Duration = Duration::from_secs(2);
/// The most the end of a run waits for the masters' background frees
/// (`lazyfree_pending_objects`) before it reads their memory for the summary.
pub(crate) const LAZYFREE_WAIT: Duration = Duration::from_secs(5);

/// A watched node's connection, when it was last read, the bytes moved to it since, and the
/// last batch it took.
struct Reader {
    con: NodeConnection,
    read_at: Instant,
    moved_since: u64,
    last_batch: u64,
}

impl Reader {
    /// The bytes moved to its node since its last reading, less what that reading holds of
    /// the last batch's payload in its query buffer (its `mem_clients_normal`, up to that
    /// batch: the node's cron trims it some 100 ms later) — the in-flight payloads are the
    /// model's to count ([`Budget::before_batch`]), not twice.
    fn since(&self, memory: Option<&NodeMemory>) -> f64 {
        let lingering = memory.map_or(0.0, |m| m.clients_normal.min(self.last_batch as f64));
        self.moved_since as f64 - lingering
    }
}

/// The nodes a run watches: the plan's masters and their replicas.
pub(crate) struct Limits {
    /// Their memory as last read, judged by the one model.
    budget: Budget,
    /// Their memory when the run began (for a master, read again as it starts: see
    /// [`Limits::mark_start`]).
    start: BTreeMap<String, NodeMemory>,
    readers: BTreeMap<String, Reader>,
    /// Replicas whose memory could not be read, with their master's address: only their
    /// master's view of their link and lag is checked.
    lag_only: Vec<(String, String)>,
    /// When each master's replicas were last found streaming and within the bound.
    lag_checked: BTreeMap<String, Instant>,
    /// The masters the run has moved keys to: an eviction there stops it.
    received: BTreeSet<String>,
    /// Each master's `client-output-buffer-limit replica` soft limit, bytes (the default where
    /// `CONFIG GET` is refused).
    replica_soft: BTreeMap<String, f64>,
    /// Replicas that refused `CLIENT LIST` (refused once, not asked again).
    no_client_list: BTreeSet<String>,
}

/// The memory of the link to its master of the replica `con` reaches, bytes (`CLIENT LIST
/// TYPE master`, its `tot-mem`): its query buffer holds what the master streams until the
/// replica's cron trims it. `None`: no such link. Error: a refusal, or the connection lost or
/// timed out.
fn master_link_memory(con: &mut NodeConnection) -> Result<Option<f64>, NodeError> {
    let text = con.text(&["CLIENT", "LIST", "TYPE", "master"])?;
    Ok(largest_tot_mem(&text))
}

/// The largest `tot-mem` of a `CLIENT LIST` reply's lines, bytes; `None` where none has one.
fn largest_tot_mem(text: &str) -> Option<f64> {
    text.lines()
        .filter_map(|line| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix("tot-mem="))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .reduce(f64::max)
}

/// [`Limits::check_plan`] on `budget`: the plan's walk, and with `kept` its moves in any
/// order.
fn judge_plan(
    budget: &Budget,
    moves: &[SlotMove],
    batch: u64,
    atomic: bool,
    drained: &[String],
    kept: Option<&BTreeSet<&str>>,
) -> Option<Judgement> {
    let sizes: Vec<MoveSize> = moves.iter().map(SlotMove::size).collect();
    let method = if atomic {
        Method::Atomic
    } else {
        Method::PerKey
    };
    budget
        .walk(&sizes, batch as f64, method, drained)
        .first
        .or_else(|| budget.any_order(&sizes, batch as f64, kept?))
}

/// The soft limit, bytes, of `client-output-buffer-limit` as `CONFIG GET` gives it
/// (`normal 0 0 0 slave 268435456 67108864 60 pubsub ...`, or `replica` on Valkey); `None`
/// where the text has no such class.
fn replica_soft_limit(value: &str) -> Option<f64> {
    let words: Vec<&str> = value.split_whitespace().collect();
    let i = words
        .iter()
        .position(|w| w.eq_ignore_ascii_case("slave") || w.eq_ignore_ascii_case("replica"))?;
    words.get(i + 2)?.parse().ok()
}

impl Limits {
    /// The memory of `masters` (address, link) and `replicas` (address, link, its master's
    /// address) as `snapshot` read it, and a connection to each for the watch; `headroom`, a
    /// fraction. A replica that was not read, or cannot be reached, is not watched: it is
    /// returned, with why (its master's view of it, its link and lag, is still checked).
    /// Error: a master that was not read or cannot be reached (`INFO` needs `+info`).
    pub(crate) fn read(
        snapshot: &Snapshot,
        masters: &[(String, Link)],
        replicas: &[(String, Link, String)],
        headroom: f64,
    ) -> Result<(Limits, Vec<String>)> {
        let mut budget = Budget::new(headroom);
        let mut start = BTreeMap::new();
        let mut readers = BTreeMap::new();
        let mut unread = Vec::new();
        let mut lag_only = Vec::new();
        let mut replica_soft = BTreeMap::new();
        let all = masters
            .iter()
            .map(|(a, l)| (a, l, None))
            .chain(replicas.iter().map(|(a, l, m)| (a, l, Some(m.clone()))));
        for (address, link, replica_of) in all {
            let read = snapshot.node(address);
            let memory = read.and_then(|n| n.memory.clone()).ok_or_else(|| {
                let why = read.and_then(|n| n.unread.clone());
                anyhow!("{}", why.unwrap_or_else(|| "not read".into()))
            });
            let read = memory.and_then(|m| Ok((link.connect()?, m)));
            let (mut con, memory) = match (read, &replica_of) {
                (Ok(read), _) => read,
                (Err(e), Some(master)) => {
                    unread.push(format!("replica {address} of {master}: {e:#}"));
                    lag_only.push((address.clone(), master.clone()));
                    continue;
                }
                (Err(e), None) => return Err(e.context(address.clone())),
            };
            start.insert(address.clone(), memory.clone());
            match &replica_of {
                Some(master) => budget.add_replica(memory, master),
                None => {
                    let soft = con
                        .run(&["CONFIG", "GET", "client-output-buffer-limit"])
                        .ok()
                        .and_then(|v| {
                            crate::reply::array(&v)
                                .ok()?
                                .iter()
                                .filter_map(|i| crate::reply::text(i).ok())
                                .find_map(|t| replica_soft_limit(&t))
                        })
                        .unwrap_or(DEFAULT_REPLICA_BUFFER_SOFT);
                    replica_soft.insert(address.clone(), soft);
                    budget.add_master(memory);
                }
            }
            readers.insert(
                address.clone(),
                Reader {
                    con,
                    read_at: Instant::now(),
                    moved_since: 0,
                    last_batch: 0,
                },
            );
        }
        let limits = Limits {
            budget,
            start,
            readers,
            lag_only,
            lag_checked: BTreeMap::new(),
            received: BTreeSet::new(),
            replica_soft,
            no_client_list: BTreeSet::new(),
        };
        Ok((limits, unread))
    }

    /// Every replica of the master at `master` the run knows: the watched ones and those only
    /// its master's view is checked for.
    fn all_replicas(&self, master: &str) -> Vec<String> {
        let mut all = self.budget.replicas_of(master);
        all.extend(
            self.lag_only
                .iter()
                .filter(|(_, m)| m == master)
                .map(|(r, _)| r.clone()),
        );
        all
    }

    /// Walks `moves` (the moves to go, in order) from every node's memory now, as `predict`
    /// walks a plan ([`Budget::walk`], per key unless `atomic`), with batches of `batch` bytes;
    /// `drained`: the masters the plan empties. With `kept` (a `--parallel` run: the masters
    /// whose moves keep the plan's order), each other master's moves judged in any order too
    /// ([`Budget::any_order`]). The first moment that does not fit, if any.
    pub(crate) fn check_plan(
        &self,
        moves: &[SlotMove],
        batch: u64,
        atomic: bool,
        drained: &[String],
        kept: Option<&BTreeSet<&str>>,
    ) -> Option<Judgement> {
        judge_plan(&self.budget, moves, batch, atomic, drained, kept)
    }

    /// The most bytes one `MIGRATE` of `m` should carry, of `batch` asked
    /// ([`Budget::batch_bound`]: a source near or past its limit, a target with replicas).
    pub(crate) fn batch_bound(&self, m: &SlotMove, batch: u64) -> u64 {
        let soft = self
            .replica_soft
            .get(&m.to)
            .copied()
            .unwrap_or(DEFAULT_REPLICA_BUFFER_SOFT);
        self.budget.batch_bound(&m.from, &m.to, batch as f64, soft) as u64
    }

    /// Reads the node at `address` again.
    fn reread(&mut self, address: &str) -> Result<()> {
        if let Some(r) = self.readers.get_mut(address) {
            let memory = read_memory(&mut r.con)?;
            self.budget.update(memory);
            r.read_at = Instant::now();
            r.moved_since = 0;
        }
        Ok(())
    }

    /// The keys the master at `address` evicted since the run began.
    fn evicted(&self, address: &str) -> u64 {
        match (self.budget.memory(address), self.start.get(address)) {
            (Some(now), Some(then)) => now.evicted_keys.saturating_sub(then.evicted_keys),
            _ => 0,
        }
    }

    /// Before a `MIGRATE` of `batch` bytes (`MEMORY USAGE`) from `m`'s source to its target:
    /// the target, the source and their replicas read again where due (every
    /// [`WATCH_EVERY_BYTES`] moved, every [`WATCH_EVERY`], or at once where the batch could
    /// take a node past its limit by the last reading plus what moved since), then the target
    /// and its replicas judged ([`Budget::before_batch`]); a master the run has brought keys
    /// to that evicted keys since the run began stops it too. `Some` stops the run before the
    /// batch is sent. Error: a node that no longer answers.
    pub(crate) fn before_batch(&mut self, m: &SlotMove, batch: u64) -> Result<Option<Finding>> {
        self.received.insert(m.to.clone());
        let mut grows = vec![m.to.clone()];
        grows.extend(self.budget.replicas_of(&m.to));
        let mut gives = vec![m.from.clone()];
        gives.extend(self.budget.replicas_of(&m.from));
        let judged = |s: &Self, address: &str| -> Option<Judgement> {
            let r = s.readers.get(address)?;
            let since = r.since(s.budget.memory(address));
            s.budget
                .before_batch(address, since, batch as f64, m.slot)
                .filter(|j| j.fit != Fit::Fits)
        };
        for address in grows.iter().chain(&gives) {
            let Some(r) = self.readers.get(address.as_str()) else {
                continue;
            };
            let close = grows.contains(address) && judged(self, address).is_some();
            let due = r.moved_since >= WATCH_EVERY_BYTES
                || r.read_at.elapsed() >= WATCH_EVERY
                || batch >= WATCH_EVERY_BYTES;
            if close || due {
                self.reread(address)?;
            }
        }
        for address in &grows {
            let keys = self.evicted(address);
            if keys > 0 && self.budget.replica_of(address).is_none() {
                return Ok(Some(Finding::Evicted {
                    node: address.clone(),
                    keys,
                }));
            }
            if let Some(j) = judged(self, address) {
                return Ok(Some(Finding::Memory { judgement: j }));
            }
        }
        for address in &grows {
            if let Some(r) = self.readers.get_mut(address.as_str()) {
                r.moved_since += batch;
                r.last_batch = batch;
            }
        }
        Ok(None)
    }

    /// After a `MIGRATE` of a big key to `m`'s target: waits until the target has trimmed
    /// the query buffer that held its payload (its `mem_clients_normal` back within
    /// [`TRIM_SLACK`] of its last reading before the batch; a node's cron trims it some 100 ms
    /// later), then until each of its replicas has the batch (its `master_repl_offset` at the
    /// target's) and has trimmed the buffer of its link to the target ([`master_link_memory`]
    /// at most a quarter of the batch, or [`TRIM_SLACK`]): that buffer is in a replica's
    /// `used_memory` at once but in its `mem_clients_normal` only from its next cron on, 1.6
    /// to 1.75 times a 1.8 MB payload for 150 to 200 ms on the three servers. Where the user
    /// may not run `CLIENT LIST` (refused once a replica), the offset alone. All at most
    /// [`TRIM_WAIT`]; each node is then read again, so that the next batch is judged from
    /// readings without the buffers. Error: a node that no longer answers.
    pub(crate) fn after_big_batch(&mut self, m: &SlotMove) -> Result<()> {
        let before = self.budget.memory(&m.to).map_or(0.0, |x| x.clients_normal);
        let began = Instant::now();
        loop {
            self.reread(&m.to)?;
            let held = self.budget.memory(&m.to).map_or(0.0, |x| x.clients_normal);
            if held <= before + TRIM_SLACK || began.elapsed() >= TRIM_WAIT {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let Some(target) = self.readers.get_mut(&m.to) else {
            return Ok(());
        };
        let offset_of = |text: &str| {
            crate::reply::info_field(text, "master_repl_offset").and_then(|o| o.parse::<u64>().ok())
        };
        let offset = offset_of(&target.con.text(&["INFO", "replication"])?).unwrap_or(0);
        for replica in self.budget.replicas_of(&m.to) {
            while let Some(r) = self.readers.get_mut(&replica) {
                let bound = TRIM_SLACK.max(r.last_batch as f64 / 4.0);
                let has =
                    offset_of(&r.con.text(&["INFO", "replication"])?).is_some_and(|o| o >= offset);
                let trimmed = self.no_client_list.contains(&replica)
                    || match master_link_memory(&mut r.con) {
                        Ok(held) => held.is_none_or(|h| h <= bound),
                        Err(e) if matches!(e.code, Code::Io | Code::Timeout) => {
                            return Err(e.into())
                        }
                        // A refusal (NOPERM, or a server that knows no such type).
                        Err(_) => {
                            self.no_client_list.insert(replica.clone());
                            true
                        }
                    };
                if (has && trimmed) || began.elapsed() >= TRIM_WAIT {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            self.reread(&replica)?;
        }
        Ok(())
    }

    /// The `INFO replication` of the master at `master`, and each replica the run knows of it
    /// with its entry there: matched by address, else (a replica announced there under
    /// another address, as `replica-announce-ip` makes it) paired with an entry no known
    /// replica matched when as many are left on both sides; `None`: not connected. `None` for
    /// all where it is not a master now (a master the plan drained turns replica of the node
    /// that took its last slot). A replica that its master's `CLUSTER NODES` no longer lists
    /// as its own (it followed its drained master elsewhere) is forgotten.
    #[allow(clippy::type_complexity)]
    fn replication(
        &mut self,
        master: &str,
    ) -> Result<Option<(String, Vec<(String, Option<ReplicaLink>)>)>> {
        let mut expected = self.all_replicas(master);
        let Some(r) = self.readers.get_mut(master) else {
            return Ok(None);
        };
        let text = r.con.text(&["INFO", "replication"])?;
        if crate::reply::info_field(&text, "role").as_deref() != Some("master") {
            return Ok(None);
        }
        let listed = replicas_of(&text);
        let unlisted = |e: &String| !listed.iter().any(|l| l.address == *e);
        if expected.iter().any(unlisted) {
            let view = nodes_on(&mut r.con)?;
            let own = myself(&view).map(|m| m.id.clone());
            let gone: Vec<String> = expected
                .iter()
                .filter(|e| {
                    !view
                        .iter()
                        .any(|n| n.address == **e && n.master.is_some() && n.master == own)
                })
                .cloned()
                .collect();
            for g in &gone {
                self.budget.forget(g);
                self.lag_only.retain(|(r, _)| r != g);
                self.readers.remove(g);
            }
            expected.retain(|e| !gone.contains(e));
        }
        let spare: Vec<&ReplicaLink> = listed
            .iter()
            .filter(|l| !expected.contains(&l.address))
            .collect();
        let pair = expected.iter().filter(|e| unlisted(e)).count() == spare.len();
        let mut spare = spare.into_iter();
        let links = expected
            .into_iter()
            .map(|e| {
                let link = match listed.iter().find(|l| l.address == e) {
                    Some(l) => Some(l.clone()),
                    None if pair => spare.next().cloned(),
                    None => None,
                };
                (e, link)
            })
            .collect();
        Ok(Some((text, links)))
    }

    /// The first replica of `masters` that is not streaming (`state` other than `online`, or
    /// absent from its master's `INFO replication`) or lags past [`REPLICA_LAG_BOUND`] bytes,
    /// in words; `None` when none. A master is read at most every [`WATCH_EVERY`] unless a
    /// replica of it lagged when last read. One look of the wait before each slot
    /// ([`super::watch::Watch::wait_for_replicas`], which loops on it with the watch unlocked
    /// between looks, so that the other lanes of a parallel run go on meanwhile). Error: a
    /// master that no longer answers.
    pub(crate) fn replica_behind(&mut self, masters: &[&str]) -> Result<Option<String>> {
        for master in masters {
            if self.all_replicas(master).is_empty() {
                continue;
            }
            if self
                .lag_checked
                .get(*master)
                .is_some_and(|t| t.elapsed() < WATCH_EVERY)
            {
                continue;
            }
            let Some((_, links)) = self.replication(master)? else {
                continue;
            };
            let behind = links.into_iter().find_map(|(r, link)| match link {
                None => Some(format!(
                    "replica {r} is not connected to its master {master}"
                )),
                Some(l) if l.state != "online" => Some(format!(
                    "replica {r} of {master} is in state {} (not streaming)",
                    l.state
                )),
                Some(l) if l.lag_bytes > REPLICA_LAG_BOUND => Some(format!(
                    "replica {r} of {master} lags {} bytes behind it (the bound is {})",
                    l.lag_bytes, REPLICA_LAG_BOUND
                )),
                Some(_) => None,
            });
            match behind {
                Some(why) => {
                    self.lag_checked.remove(*master);
                    return Ok(Some(why));
                }
                None => {
                    self.lag_checked.insert(master.to_string(), Instant::now());
                }
            }
        }
        Ok(None)
    }

    /// After the run: waits (at most [`REPLICA_WAIT`]) until every replica of `masters` has
    /// acknowledged its master's replication offset as it stood when the run ended, so that
    /// each holds what its master held then; a wait is told once through `waiting`. Error:
    /// one that has not by then.
    pub(crate) fn settle_replicas(
        &mut self,
        masters: &[&str],
        waiting: &mut dyn FnMut(String),
    ) -> Result<()> {
        let offset_of = |text: &str| -> u64 {
            crate::reply::info_field(text, "master_repl_offset")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let mut marks: Vec<(String, u64)> = Vec::new();
        for master in masters {
            if self.all_replicas(master).is_empty() {
                continue;
            }
            if let Some((text, _)) = self.replication(master)? {
                marks.push((master.to_string(), offset_of(&text)));
            }
        }
        let began = Instant::now();
        let mut told = false;
        for (master, mark) in marks {
            loop {
                let Some((text, links)) = self.replication(&master)? else {
                    break;
                };
                let now = offset_of(&text);
                // A replica's lag is counted from the offset now: it acknowledged the offset
                // now less its lag.
                let behind: Vec<String> = links
                    .into_iter()
                    .filter(|(_, l)| {
                        l.as_ref()
                            .is_none_or(|l| now.saturating_sub(l.lag_bytes) < mark)
                    })
                    .map(|(r, _)| r)
                    .collect();
                if behind.is_empty() {
                    break;
                }
                if !told {
                    waiting(format!(
                        "waiting for replica(s) {} of {master} to acknowledge the run's last \
                         writes (every move is done; at most {} s)",
                        behind.join(", "),
                        REPLICA_WAIT.as_secs()
                    ));
                    told = true;
                }
                if began.elapsed() >= REPLICA_WAIT {
                    bail!(
                        "every move is done, but replica(s) {} of {master} had not acknowledged \
                         its stream up to the end of the run after {} s: look at INFO \
                         replication there",
                        behind.join(", "),
                        REPLICA_WAIT.as_secs()
                    );
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }
}

impl Limits {
    /// Before an atomic slot migration job of `moves` (one source, one target): their nodes
    /// and replicas read again, then the job walked as the plan is ([`Budget::walk`],
    /// atomic: the source keeps its copy until the trim). Error: a node that no longer
    /// answers.
    pub(crate) fn before_job(&mut self, moves: &[SlotMove]) -> Result<Option<Judgement>> {
        let mut involved: Vec<String> = Vec::new();
        for m in moves {
            self.received.insert(m.to.clone());
            for a in [&m.from, &m.to] {
                if !involved.contains(a) {
                    involved.push(a.clone());
                    involved.extend(self.budget.replicas_of(a));
                }
            }
        }
        for a in &involved {
            self.reread(a)?;
        }
        Ok(self.check_plan(moves, 0, true, &[], None))
    }

    /// Each watched master with a `maxmemory`, but those in `drained` (a master the plan
    /// drained turns replica): (address, `used_memory`, `maxmemory`), as last read.
    pub(crate) fn fill(&self, drained: &[String]) -> Vec<(String, f64, f64)> {
        self.budget
            .masters()
            .filter(|m| m.maxmemory > 0.0 && !drained.contains(&m.address))
            .map(|m| (m.address.clone(), m.used, m.maxmemory))
            .collect()
    }

    /// The watched masters read again where due ([`WATCH_EVERY`]), for the fill shown as the
    /// run goes; a master that does not answer keeps its last reading (the moves say why).
    pub(crate) fn refresh_masters(&mut self) {
        for a in self.masters() {
            let due = self
                .readers
                .get(&a)
                .is_some_and(|r| r.read_at.elapsed() >= WATCH_EVERY);
            if due {
                let _ = self.reread(&a);
            }
        }
    }

    /// The watched masters' addresses (not their replicas).
    fn masters(&self) -> Vec<String> {
        self.budget.masters().map(|m| m.address.clone()).collect()
    }

    /// Reads the masters again and takes that as where the run begins: what they evicted
    /// while the operator was asked to confirm is not the run's. Error: a master that no
    /// longer answers.
    pub(crate) fn mark_start(&mut self) -> Result<()> {
        for a in self.masters() {
            self.reread(&a)?;
            if let Some(m) = self.budget.memory(&a) {
                self.start.insert(a.clone(), m.clone());
            }
        }
        Ok(())
    }

    /// After the run: each watched master read again once its background frees are done (at
    /// most [`LAZYFREE_WAIT`]: a node with `lazyfree-lazy-server-del yes` frees migrated keys
    /// late), and its `evicted_keys` growth since the run began where it grew, with whether
    /// the run brought it keys; a master that does not answer now is left out (the run is
    /// over: its moves are done).
    pub(crate) fn evictions(&mut self) -> Vec<(String, u64, bool)> {
        let began = Instant::now();
        let mut out = Vec::new();
        for a in self.masters() {
            loop {
                if self.reread(&a).is_err() {
                    break;
                }
                let pending = self.budget.memory(&a).map_or(0, |m| m.lazyfree_pending);
                if pending == 0 || began.elapsed() >= LAZYFREE_WAIT {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let keys = self.evicted(&a);
            if keys > 0 {
                out.push((a.clone(), keys, self.received.contains(&a)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::budget::DEFAULT_BATCH;
    use crate::cluster::memory::memory_of;
    use crate::plan::{lanes_of, owned_ranges, SlotPlan, WeightBy, PLAN_VERSION};
    use crate::predict::capacity::{capacity, PlanMoves};
    use proptest::prelude::*;

    const MB: f64 = 1048576.0;

    #[test]
    fn a_replica_link_buffer_is_read_from_client_list() {
        // CLIENT LIST TYPE master on a replica of Redis 7.0.15 (a line of its shape, fields
        // cut), with the tot-mem measured right after its master streamed a 1.8 MB string
        // (3147520) and after its cron's trim (1800).
        let held = "id=3 addr=127.0.0.1:27201 laddr=127.0.0.1:41830 fd=8 name= age=9 \
                    flags=M db=0 qbuf=0 qbuf-free=0 argv-mem=0 obl=0 oll=0 omem=0 \
                    tot-mem=3147520 events=r cmd=set user=default\n";
        assert_eq!(largest_tot_mem(held), Some(3147520.0));
        assert_eq!(
            largest_tot_mem("id=3 flags=M tot-mem=1800 cmd=set\n"),
            Some(1800.0)
        );
        // No link (a master, or a replica between links): no line.
        assert_eq!(largest_tot_mem(""), None);
    }

    /// A cluster of `masters` (used and maxmemory in MB, `allkeys-lru`, a host of its own
    /// with plenty of RAM), each with a replica of the same memory, and a plan of `moves`
    /// (slot, source, target by index, memory in batches of [`DEFAULT_BATCH`]).
    fn cluster(masters: &[(f64, f64)], moves: &[(u16, usize, usize, u8)]) -> (Budget, SlotPlan) {
        let mut budget = Budget::new(0.1);
        let name = |i: usize| format!("10.0.0.{i}:7000");
        for (i, &(used, max)) in masters.iter().enumerate() {
            for (port, replica) in [(7000, false), (7001, true)] {
                let text = format!(
                    "used_memory:{}\r\nmaxmemory:{}\r\nmaxmemory_policy:allkeys-lru\r\n\
                     total_system_memory:100000000000\r\n",
                    used * MB,
                    max * MB
                );
                let address = format!("10.0.0.{i}:{port}");
                let memory = memory_of(&address, &text, "");
                if replica {
                    budget.add_replica(memory, &name(i));
                } else {
                    budget.add_master(memory);
                }
            }
        }
        let mut owners: Vec<Option<String>> = vec![None; 16384];
        let mut seen = BTreeSet::new();
        let mut plan_moves = Vec::new();
        for &(slot, from, to, batches) in moves {
            let (from, to) = (from % masters.len(), to % masters.len());
            if from == to || !seen.insert(slot) {
                continue;
            }
            owners[usize::from(slot)] = Some(name(from));
            let memory = f64::from(batches) * DEFAULT_BATCH;
            plan_moves.push(SlotMove {
                slot,
                from: name(from),
                to: name(to),
                keys: u64::from(batches),
                bytes: memory / 2.0,
                memory: Some(memory),
                big: None,
            });
        }
        let plan = SlotPlan {
            version: PLAN_VERSION,
            by: WeightBy::Memory,
            tolerance: 0.05,
            start: owned_ranges(&owners),
            ids: BTreeMap::new(),
            lanes: lanes_of(&plan_moves),
            moves: plan_moves,
        };
        (budget, plan)
    }

    /// `budget` read again as the walk of `done` (the moves carried out) leaves each node:
    /// what `apply` reads before a move, clients idle.
    fn after(budget: &Budget, done: &[SlotMove]) -> Budget {
        let sizes: Vec<MoveSize> = done.iter().map(SlotMove::size).collect();
        let walk = budget.walk(&sizes, DEFAULT_BATCH, Method::PerKey, &[]);
        let mut read = budget.clone();
        for n in &walk.nodes {
            if let Some(m) = budget.memory(&n.address) {
                let mut m = m.clone();
                m.used = n.end;
                m.counted = n.end;
                read.update(m);
            }
        }
        read
    }

    /// Where `apply`'s watch stops the run of `moves` from `budget`, batch by batch
    /// ([`Budget::before_batch`] on each target and its replicas, every batch of
    /// [`DEFAULT_BATCH`]), each move's nodes read again before it: the node and the slot.
    fn watch(budget: &Budget, moves: &[SlotMove]) -> Option<(String, u16)> {
        for (i, m) in moves.iter().enumerate() {
            let read = after(budget, moves.get(..i).unwrap_or_default());
            let batches = (m.memory.unwrap_or(0.0) / DEFAULT_BATCH).round() as u64;
            let mut grows = vec![m.to.clone()];
            grows.extend(read.replicas_of(&m.to));
            for b in 0..batches {
                for node in &grows {
                    let since = b as f64 * DEFAULT_BATCH;
                    if let Some(j) = read
                        .before_batch(node, since, DEFAULT_BATCH, m.slot)
                        .filter(|j| j.fit != Fit::Fits)
                    {
                        return Some((j.node, m.slot));
                    }
                }
            }
        }
        None
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// predict's judgement of a plan (its capacity walk) and apply's (its check before the
        /// first write, and from any move it resumes at) are the same on the same snapshot,
        /// and apply's watch batch by batch stops at the very move and node the walk names.
        #[test]
        fn predict_and_apply_judge_a_plan_alike_at_every_move(
            masters in prop::collection::vec((1.0f64..80.0, 20.0f64..100.0), 2..5),
            moves in prop::collection::vec((0u16..200, 0usize..5, 0usize..5, 1u8..5), 1..40),
        ) {
            let (budget, plan) = cluster(&masters, &moves);
            for k in 0..=plan.moves.len() {
                let read = after(&budget, plan.moves.get(..k).unwrap_or_default());
                let rest = SlotPlan {
                    moves: plan.moves.get(k..).unwrap_or_default().to_vec(),
                    ..plan.clone()
                };
                let predicted = capacity(
                    &read,
                    &[PlanMoves {
                        plan: "by memory".into(),
                        moves: rest.sizes(),
                        drained: Vec::new(),
                    }],
                    &[Method::PerKey],
                );
                let predicted = predicted.walks.first().and_then(|w| w.walk.first.clone());
                let applied =
                    judge_plan(&read, &rest.moves, DEFAULT_BATCH as u64, false, &[], None);
                prop_assert_eq!(&predicted, &applied);
                let watched = watch(&read, &rest.moves);
                prop_assert_eq!(
                    predicted.map(|j| (j.node, j.slot.unwrap_or_default())),
                    watched
                );
            }
        }
    }

    #[test]
    fn the_replica_soft_limit_is_read_from_config_get() {
        // Redis 7.0.15's and Valkey 9.1.2's CONFIG GET client-output-buffer-limit.
        assert_eq!(
            replica_soft_limit(
                "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
            ),
            Some(67108864.0)
        );
        assert_eq!(
            replica_soft_limit("normal 0 0 0 replica 268435456 1000 60 pubsub 0 0 0"),
            Some(1000.0)
        );
        assert_eq!(replica_soft_limit("normal 0 0 0"), None);
    }
}
