//! The memory limits and the replicas `ringslot apply` keeps to: before its first write, the
//! moves to go walked against every node's limit as it stands ([`Limits::check_plan`]); while
//! it runs, each target's and source's `used_memory` and `evicted_keys`, and their replicas'
//! `used_memory`, read again every [`WATCH_EVERY_BYTES`] moved to a node or every
//! [`WATCH_EVERY`], and at once before a batch that could cross ([`Limits::before_batch`]);
//! between slots, each replica of the next move's masters streaming and within
//! [`REPLICA_LAG_BOUND`] of its master ([`Limits::wait_for_replicas`]).
//!
//! A node's limit is its `maxmemory` less `--headroom` (a node checks `maxmemory` before each
//! command, so a `RESTORE` that starts just under it lands whole: a batch is counted twice on
//! its target, once as the payload in its query buffer and once restored); a node without
//! `maxmemory`, its host's RAM (`total_system_memory`) less the headroom and less what the
//! other nodes on that host use. A replica does not evict (`replica-ignore-maxmemory yes`):
//! it is held to its own `maxmemory` all the same, which it would grow past. Reads only: every
//! connection here is its own, and sends `INFO` alone.

use crate::cluster::connection::NodeConnection;
use crate::cluster::link::Link;
use crate::cluster::memory::{read_memory, replicas_of, NodeMemory, ReplicaLink};
use crate::cluster::topology::nodes_on;
use crate::plan::SlotMove;
use anyhow::{bail, Result};
use ringslot_engine::cluster::myself;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

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

/// A node the run watches, as last read.
#[derive(Debug, Clone)]
pub(crate) struct Stand {
    /// For a replica, its master's address.
    pub replica_of: Option<String>,
    /// Its memory when the run began (for a master, read again as the run starts: see
    /// [`Limits::mark_start`]).
    pub start: NodeMemory,
    /// Its memory as last read.
    pub last: NodeMemory,
}

impl Stand {
    /// What its limit is held against: what eviction counts on a master, `used_memory` on a
    /// replica (which never evicts on its own).
    fn base(&self) -> f64 {
        if self.replica_of.is_some() {
            self.last.used
        } else {
            self.last.counted
        }
    }
}

/// The watched nodes' memory and their limits (no connection: the judging part of
/// [`Limits`]).
#[derive(Debug, Clone)]
pub(crate) struct Standing {
    /// Part of each limit kept free (a fraction, `--headroom` / 100).
    pub headroom: f64,
    /// The nodes whose memory is watched, by address (`ip:port`).
    pub nodes: BTreeMap<String, Stand>,
    /// Replicas whose memory could not be read, with their master's address: only their
    /// master's view of their link and lag is checked.
    pub lag_only: Vec<(String, String)>,
}

/// A watched node's connection, when it was last read and the bytes moved to it since.
struct Reader {
    con: NodeConnection,
    read_at: Instant,
    moved_since: u64,
}

/// Why memory stops a run, or refuses a plan: the node, its memory, its limit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Crossing {
    /// The node would pass its limit less the headroom.
    Limit {
        node: String,
        replica_of: Option<String>,
        /// Its counted memory now, and what it would reach, bytes.
        now: f64,
        would_reach: f64,
        /// Its limit less the headroom, bytes, and what that limit is (`maxmemory 3.0 MiB
        /// (allkeys-lru)`, `the host's RAM`), and what crossing it means.
        limit: f64,
        of: String,
        means: &'static str,
        /// The slot whose move would take it there.
        slot: u16,
    },
    /// The master at `node` (`ip:port`) evicted `keys` keys since the run began.
    Evicted { node: String, keys: u64 },
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / 1048576.0)
}

impl fmt::Display for Crossing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Crossing::Limit {
                node,
                replica_of,
                now,
                would_reach,
                limit,
                of,
                means,
                slot,
            } => write!(
                f,
                "{node} ({}) would reach {} with slot {slot}, past {} ({of} less the \
                 headroom; it counts {} now): past its limit {means}",
                match replica_of {
                    Some(m) => format!("replica of {m}"),
                    None => "master".to_string(),
                },
                mib(*would_reach),
                mib(*limit),
                mib(*now),
            ),
            Crossing::Evicted { node, keys } => write!(
                f,
                "{node} evicted {keys} keys during the run (evicted_keys grew): it is past its \
                 maxmemory"
            ),
        }
    }
}

/// The nodes a run watches: the plan's masters and their replicas.
pub(crate) struct Limits {
    standing: Standing,
    readers: BTreeMap<String, Reader>,
    /// When each master's replicas were last found streaming and within the bound.
    lag_checked: BTreeMap<String, Instant>,
}

/// The host of an `ip:port` address.
fn host(address: &str) -> &str {
    address.rsplit_once(':').map_or(address, |(h, _)| h)
}

impl Standing {
    /// The replicas of the master at `master` whose memory is watched.
    fn replicas(&self, master: &str) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, w)| w.replica_of.as_deref() == Some(master))
            .map(|(a, _)| a.clone())
            .collect()
    }

    /// Every replica of the master at `master` the run knows: the watched ones and those only
    /// its master's view is checked for ([`Standing::lag_only`]).
    fn all_replicas(&self, master: &str) -> Vec<String> {
        let mut all = self.replicas(master);
        all.extend(
            self.lag_only
                .iter()
                .filter(|(_, m)| m == master)
                .map(|(r, _)| r.clone()),
        );
        all
    }

    /// Forgets the replica at `address` (it no longer replicates the master it did).
    fn forget(&mut self, address: &str) {
        self.nodes.remove(address);
        self.lag_only.retain(|(r, _)| r != address);
    }

    /// The limit of the node at `address` less the headroom, bytes, what it is, and what
    /// passing it means; `None` for a node the run does not watch.
    fn limit(&self, address: &str) -> Option<(f64, String, &'static str)> {
        let w = self.nodes.get(address)?;
        let m = &w.last;
        let keep = 1.0 - self.headroom;
        if m.maxmemory > 0.0 {
            let means = if w.replica_of.is_some() {
                "(a replica does not evict: it would grow past it, and evict once promoted)"
            } else {
                m.policy.crossing()
            };
            return Some((
                m.maxmemory * keep,
                format!("maxmemory {} ({})", mib(m.maxmemory), m.policy.name()),
                means,
            ));
        }
        if m.system <= 0.0 {
            // The node does not say its host's RAM: nothing to hold it to.
            return None;
        }
        // The other nodes of the host as last read (a target and its replica on one host are
        // each judged with the other as it stands, not as it will grow).
        let others: f64 = self
            .nodes
            .iter()
            .filter(|(a, _)| a.as_str() != address && host(a) == host(address))
            .map(|(_, o)| o.last.used)
            .sum();
        Some((
            m.system * keep - others,
            format!(
                "its host's RAM {} (no maxmemory; the other nodes there use {})",
                mib(m.system),
                mib(others)
            ),
            "(no maxmemory: the host runs out of memory)",
        ))
    }

    /// The crossing, if `would_reach` bytes pass the limit of the node at `address`.
    fn judge(&self, address: &str, would_reach: f64, slot: u16) -> Option<Crossing> {
        let (limit, of, means) = self.limit(address)?;
        let w = self.nodes.get(address)?;
        (would_reach > limit).then(|| Crossing::Limit {
            node: address.to_string(),
            replica_of: w.replica_of.clone(),
            now: w.base(),
            would_reach,
            limit,
            of,
            means,
            slot,
        })
    }

    /// Walks `moves` (the moves to go, in order) from each node's memory now: a target and
    /// its replicas grow by each move's memory on the target (its `memory`, or its `DUMP`
    /// bytes in a plan made before it had one), a source and its replicas shrink by it once
    /// the move is done; each node's peak has a batch on top (`batch`: the most a `MIGRATE`
    /// carries, or the slot's bytes where less, or its big keys, which move whole). A master
    /// in `drained` turns replica of the target of its last move, and copies the target's
    /// whole dataset: it and its replicas are judged at the target's memory then. The first
    /// node that would cross its limit, if any.
    pub(crate) fn check_plan(
        &self,
        moves: &[SlotMove],
        batch: u64,
        drained: &[String],
    ) -> Option<Crossing> {
        let mut memory: BTreeMap<&str, f64> = self
            .nodes
            .iter()
            .map(|(a, w)| (a.as_str(), w.base()))
            .collect();
        for (i, m) in moves.iter().enumerate() {
            let size = m.memory.unwrap_or(m.bytes).max(0.0);
            let transient = m
                .bytes
                .max(size)
                .min(batch as f64)
                .max(m.big.unwrap_or(0.0));
            let mut grows = vec![m.to.clone()];
            grows.extend(self.replicas(&m.to));
            for node in &grows {
                let Some(x) = memory.get_mut(node.as_str()) else {
                    continue;
                };
                *x += size;
                if let Some(c) = self.judge(node, *x + transient, m.slot) {
                    return Some(c);
                }
            }
            if let Some(&x) = memory.get(m.from.as_str()) {
                if let Some(c) = self.judge(&m.from, x + transient, m.slot) {
                    return Some(c);
                }
            }
            let mut shrinks = vec![m.from.clone()];
            shrinks.extend(self.replicas(&m.from));
            for node in &shrinks {
                if let Some(x) = memory.get_mut(node.as_str()) {
                    *x = (*x - size).max(0.0);
                }
            }
            let last_from_it = !moves.iter().skip(i + 1).any(|n| n.from == m.from);
            if last_from_it && drained.contains(&m.from) {
                let target = memory.get(m.to.as_str()).copied().unwrap_or(0.0);
                for node in &shrinks {
                    if let Some(c) = self.judge(node, target, m.slot) {
                        return Some(c);
                    }
                }
            }
        }
        None
    }

    /// With `--parallel`, where the moves of a master not in `kept` may go in any order (it
    /// only gives or only takes, [`super::lanes::kept_in_order`]): each move's batch on top
    /// (as [`Standing::check_plan`] counts it) judged at that master's highest memory whatever
    /// the order: a target's, and its replicas', after all the moves (`moves`, the moves to
    /// go); a source's before any. The first node that would cross its limit, if any.
    pub(crate) fn check_any_order(
        &self,
        moves: &[SlotMove],
        batch: u64,
        kept: &BTreeSet<&str>,
    ) -> Option<Crossing> {
        let start: BTreeMap<&str, f64> = self
            .nodes
            .iter()
            .map(|(a, w)| (a.as_str(), w.base()))
            .collect();
        let mut end = start.clone();
        let size = |m: &SlotMove| m.memory.unwrap_or(m.bytes).max(0.0);
        for m in moves {
            for node in std::iter::once(m.to.clone()).chain(self.replicas(&m.to)) {
                if let Some(x) = end.get_mut(node.as_str()) {
                    *x += size(m);
                }
            }
        }
        for m in moves {
            let transient = m
                .bytes
                .max(size(m))
                .min(batch as f64)
                .max(m.big.unwrap_or(0.0));
            if !kept.contains(m.to.as_str()) {
                for node in std::iter::once(m.to.clone()).chain(self.replicas(&m.to)) {
                    let Some(&x) = end.get(node.as_str()) else {
                        continue;
                    };
                    if let Some(c) = self.judge(&node, x + transient, m.slot) {
                        return Some(c);
                    }
                }
            }
            if !kept.contains(m.from.as_str()) {
                if let Some(&x) = start.get(m.from.as_str()) {
                    if let Some(c) = self.judge(&m.from, x + transient, m.slot) {
                        return Some(c);
                    }
                }
            }
        }
        None
    }

    /// Judges a batch of `batch` bytes from `m`'s source to its target: the node at
    /// `address` (`grows`: the target or one of its replicas, which take the payload and
    /// then the keys; else the source, which holds the payload while its MIGRATE runs), at
    /// its last reading plus `since` bytes moved to it since.
    fn judge_batch(
        &self,
        address: &str,
        grows: bool,
        since: u64,
        batch: u64,
        slot: u16,
    ) -> Option<Crossing> {
        let w = self.nodes.get(address)?;
        let on_top = if grows { 2 * batch } else { batch };
        self.judge(address, w.base() + since as f64 + on_top as f64, slot)
    }
}

impl Limits {
    /// Connects to `masters` (address, link) and `replicas` (address, link, its master's
    /// address) and reads their memory; `headroom`, a fraction. A replica that cannot be read
    /// is not watched: it is returned, with why (its master's view of it, its link and lag,
    /// is still checked). Error: a master that cannot be reached or read (`INFO` needs
    /// `+info`).
    pub(crate) fn read(
        masters: &[(String, Link)],
        replicas: &[(String, Link, String)],
        headroom: f64,
    ) -> Result<(Limits, Vec<String>)> {
        let mut nodes = BTreeMap::new();
        let mut readers = BTreeMap::new();
        let mut unread = Vec::new();
        let mut lag_only = Vec::new();
        let all = masters
            .iter()
            .map(|(a, l)| (a, l, None))
            .chain(replicas.iter().map(|(a, l, m)| (a, l, Some(m.clone()))));
        for (address, link, replica_of) in all {
            let read = link
                .connect()
                .and_then(|mut con| read_memory(&mut con).map(|m| (con, m)));
            let (con, memory) = match (read, &replica_of) {
                (Ok(read), _) => read,
                (Err(e), Some(master)) => {
                    unread.push(format!("replica {address} of {master}: {e}"));
                    lag_only.push((address.clone(), master.clone()));
                    continue;
                }
                (Err(e), None) => return Err(e.into()),
            };
            nodes.insert(
                address.clone(),
                Stand {
                    replica_of,
                    start: memory.clone(),
                    last: memory,
                },
            );
            readers.insert(
                address.clone(),
                Reader {
                    con,
                    read_at: Instant::now(),
                    moved_since: 0,
                },
            );
        }
        let limits = Limits {
            standing: Standing {
                headroom,
                nodes,
                lag_only,
            },
            readers,
            lag_checked: BTreeMap::new(),
        };
        Ok((limits, unread))
    }

    /// The nodes' memory as last read, and their limits.
    pub(crate) fn standing(&self) -> &Standing {
        &self.standing
    }

    /// Reads the node at `address` again.
    fn reread(&mut self, address: &str) -> Result<()> {
        if let (Some(r), Some(w)) = (
            self.readers.get_mut(address),
            self.standing.nodes.get_mut(address),
        ) {
            w.last = read_memory(&mut r.con)?;
            r.read_at = Instant::now();
            r.moved_since = 0;
        }
        Ok(())
    }

    /// Before a `MIGRATE` of `batch` bytes (`MEMORY USAGE`) from `m`'s source to its target:
    /// the target, the source and their replicas read again where due (every
    /// [`WATCH_EVERY_BYTES`] moved, every [`WATCH_EVERY`], or at once where the batch could
    /// take a node past its limit by the last reading plus what moved since), then judged; a
    /// master that evicted keys since the run began stops it too. `Some` stops the run before
    /// the batch is sent. Error: a node that no longer answers.
    pub(crate) fn before_batch(&mut self, m: &SlotMove, batch: u64) -> Result<Option<Crossing>> {
        let mut involved = vec![(m.to.clone(), true)];
        involved.extend(self.standing.replicas(&m.to).into_iter().map(|r| (r, true)));
        involved.push((m.from.clone(), false));
        involved.extend(
            self.standing
                .replicas(&m.from)
                .into_iter()
                .map(|r| (r, false)),
        );
        for (address, grows) in &involved {
            let Some(r) = self.readers.get(address.as_str()) else {
                continue;
            };
            let close = self
                .standing
                .judge_batch(address, *grows, r.moved_since, batch, m.slot)
                .is_some();
            let due = r.moved_since >= WATCH_EVERY_BYTES
                || r.read_at.elapsed() >= WATCH_EVERY
                || batch >= WATCH_EVERY_BYTES;
            if close || due {
                self.reread(address)?;
            }
            let (Some(r), Some(w)) = (
                self.readers.get(address.as_str()),
                self.standing.nodes.get(address.as_str()),
            ) else {
                continue;
            };
            let evicted = w.last.evicted_keys.saturating_sub(w.start.evicted_keys);
            if evicted > 0 && w.replica_of.is_none() {
                return Ok(Some(Crossing::Evicted {
                    node: address.clone(),
                    keys: evicted,
                }));
            }
            if let Some(c) =
                self.standing
                    .judge_batch(address, *grows, r.moved_since, batch, m.slot)
            {
                return Ok(Some(c));
            }
        }
        for (address, grows) in &involved {
            if let Some(r) = self.readers.get_mut(address.as_str()) {
                if *grows {
                    r.moved_since += batch;
                }
            }
        }
        Ok(None)
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
        let Some(r) = self.readers.get_mut(master) else {
            return Ok(None);
        };
        let text = r.con.text(&["INFO", "replication"])?;
        if crate::reply::info_field(&text, "role").as_deref() != Some("master") {
            return Ok(None);
        }
        let listed = replicas_of(&text);
        let mut expected = self.standing.all_replicas(master);
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
                self.standing.forget(g);
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
    /// ([`super::Prepared::wait_for_replicas`], which loops on it with the watch unlocked
    /// between looks, so that the other lanes of a parallel run go on meanwhile). Error: a
    /// master that no longer answers.
    pub(crate) fn replica_behind(&mut self, masters: &[&str]) -> Result<Option<String>> {
        for master in masters {
            if self.standing.all_replicas(master).is_empty() {
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
            if self.standing.all_replicas(master).is_empty() {
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
    /// and replicas read again, then the moves walked against their limits as for the plan
    /// ([`Standing::check_plan`], `batch` on top). Error: a node that no longer answers.
    pub(crate) fn before_job(
        &mut self,
        moves: &[SlotMove],
        batch: u64,
    ) -> Result<Option<Crossing>> {
        let mut involved: Vec<String> = Vec::new();
        for m in moves {
            for a in [&m.from, &m.to] {
                if !involved.contains(a) {
                    involved.push(a.clone());
                    involved.extend(self.standing.replicas(a));
                }
            }
        }
        for a in &involved {
            self.reread(a)?;
        }
        Ok(self.standing.check_plan(moves, batch, &[]))
    }

    /// Each watched master with a `maxmemory`, but those in `drained` (a master the plan
    /// drained turns replica): (address, `used_memory`, `maxmemory`), as last read.
    pub(crate) fn fill(&self, drained: &[String]) -> Vec<(String, f64, f64)> {
        self.standing
            .nodes
            .iter()
            .filter(|(a, w)| {
                w.replica_of.is_none() && w.last.maxmemory > 0.0 && !drained.contains(a)
            })
            .map(|(a, w)| (a.clone(), w.last.used, w.last.maxmemory))
            .collect()
    }

    /// The watched masters' addresses (not their replicas).
    fn masters(&self) -> Vec<String> {
        self.standing
            .nodes
            .iter()
            .filter(|(_, w)| w.replica_of.is_none())
            .map(|(a, _)| a.clone())
            .collect()
    }

    /// Reads the masters again and takes that as where the run begins: what they evicted
    /// while the operator was asked to confirm is not the run's. Error: a master that no
    /// longer answers.
    pub(crate) fn mark_start(&mut self) -> Result<()> {
        let masters = self.masters();
        for a in masters {
            self.reread(&a)?;
            if let Some(w) = self.standing.nodes.get_mut(&a) {
                w.start = w.last.clone();
            }
        }
        Ok(())
    }

    /// Each watched master's `evicted_keys` growth since the run began, where it grew, each
    /// master read again; a master that does not answer now is left out (the run is over: its
    /// moves are done).
    pub(crate) fn evictions(&mut self) -> Vec<(String, u64)> {
        let masters = self.masters();
        let mut out = Vec::new();
        for a in masters {
            if self.reread(&a).is_err() {
                continue;
            }
            if let Some(w) = self.standing.nodes.get(&a) {
                let grew = w.last.evicted_keys.saturating_sub(w.start.evicted_keys);
                if grew > 0 {
                    out.push((a, grew));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::memory::memory_of;

    /// Nodes as (address, used_memory, maxmemory, master of a replica).
    fn standing(nodes: &[(&str, f64, f64, Option<&str>)]) -> Standing {
        let nodes = nodes
            .iter()
            .map(|&(a, used, max, of)| {
                let text = format!(
                    "used_memory:{used}\r\nmaxmemory:{max}\r\nmaxmemory_policy:allkeys-lru\r\n\
                     total_system_memory:1000000000\r\n"
                );
                let memory = memory_of(a, &text, "");
                let stand = Stand {
                    replica_of: of.map(str::to_string),
                    start: memory.clone(),
                    last: memory,
                };
                (a.to_string(), stand)
            })
            .collect();
        Standing {
            headroom: 0.1,
            nodes,
            lag_only: Vec::new(),
        }
    }

    fn mv(slot: u16, from: &str, to: &str, memory: f64) -> SlotMove {
        SlotMove {
            slot,
            from: from.into(),
            to: to.into(),
            keys: 10,
            bytes: memory,
            memory: Some(memory),
            big: None,
        }
    }

    #[test]
    fn a_plan_past_a_limit_is_named_with_the_slot_that_takes_it_there() {
        // A joining master with maxmemory 10 MB, 2 MB used: 9 MB is its limit less 10%.
        let s = standing(&[
            ("a:1", 50e6, 0.0, None),
            ("j:1", 2e6, 10e6, None),
            ("j:2", 2e6, 0.0, Some("j:1")),
        ]);
        let moves: Vec<SlotMove> = (0..10).map(|i| mv(i, "a:1", "j:1", 1e6)).collect();
        // 2 MB + 6 moves of 1 MB + a batch of 1 MB = 9 MB: at the limit, not past it.
        assert_eq!(s.check_plan(&moves[..6], 1 << 20, &[]), None);
        let Some(Crossing::Limit { node, slot, .. }) = s.check_plan(&moves, 1 << 20, &[]) else {
            panic!("the plan crosses j:1's limit");
        };
        assert_eq!((node.as_str(), slot), ("j:1", 6));
        // A replica with a lower maxmemory than its master's is held to its own.
        let s = standing(&[
            ("a:1", 50e6, 0.0, None),
            ("j:1", 2e6, 100e6, None),
            ("j:2", 2e6, 5e6, Some("j:1")),
        ]);
        let Some(Crossing::Limit {
            node, replica_of, ..
        }) = s.check_plan(&moves, 1 << 20, &[])
        else {
            panic!("the plan crosses j:2's limit");
        };
        assert_eq!((node.as_str(), replica_of.as_deref()), ("j:2", Some("j:1")));
        // Moving keys away frees room on a source that is a target later.
        let s = standing(&[("a:1", 7e6, 10e6, None), ("b:1", 1e6, 100e6, None)]);
        let there_and_back = [mv(1, "a:1", "b:1", 3e6), mv(2, "b:1", "a:1", 2e6)];
        assert_eq!(s.check_plan(&there_and_back, 1 << 20, &[]), None);
        let Some(c) = s.check_plan(&[mv(2, "b:1", "a:1", 2e6)], 1 << 20, &[]) else {
            panic!("a:1 would pass 9 MB: 7 + 2 + a batch");
        };
        assert!(c.to_string().contains("a:1 (master) would reach"), "{c}");
    }

    #[test]
    fn side_by_side_a_big_key_is_judged_on_top_of_its_targets_highest_memory() {
        // A target with 2 MB of its 9 MB limit takes five slots of 1 MB, the first with a big
        // key of 5 MB: in the plan's order 2 + 1 + 5 = 8 MB at most; moved last, as a parallel
        // run may move it, 2 + 5 + 5 = 12 MB.
        let s = standing(&[("a:1", 50e6, 0.0, None), ("j:1", 2e6, 10e6, None)]);
        let mut moves: Vec<SlotMove> = (0..5).map(|i| mv(i, "a:1", "j:1", 1e6)).collect();
        moves[0].big = Some(5e6);
        assert_eq!(s.check_plan(&moves, 1 << 20, &[]), None);
        let none = BTreeSet::new();
        let Some(Crossing::Limit { node, slot, .. }) = s.check_any_order(&moves, 1 << 20, &none)
        else {
            panic!("j:1 past its limit when the big key moves last");
        };
        assert_eq!((node.as_str(), slot), ("j:1", 0));
        // A master kept in the plan's order is the walk's to judge.
        let kept: BTreeSet<&str> = ["j:1"].into_iter().collect();
        assert_eq!(s.check_any_order(&moves, 1 << 20, &kept), None);
    }

    #[test]
    fn a_big_key_counts_whole_and_a_drained_master_copies_its_target() {
        // A move of 1 MB to a master with 2 MB of its 9 MB limit: its batch fits; a big key
        // of 6.5 MB in it moves whole, past the limit.
        let s = standing(&[("a:1", 50e6, 0.0, None), ("j:1", 2e6, 10e6, None)]);
        let mut m = mv(1, "a:1", "j:1", 1e6);
        assert_eq!(s.check_plan(std::slice::from_ref(&m), 1 << 20, &[]), None);
        m.big = Some(6.5e6);
        assert!(s.check_plan(&[m], 1 << 20, &[]).is_some());
        // A master drained into a target of 30 MB becomes its replica and copies it all.
        let s = standing(&[("a:1", 5e6, 10e6, None), ("t:1", 30e6, 100e6, None)]);
        let drain = [mv(1, "a:1", "t:1", 1e6)];
        assert_eq!(s.check_plan(&drain, 1 << 20, &[]), None);
        let Some(Crossing::Limit { node, .. }) = s.check_plan(&drain, 1 << 20, &["a:1".into()])
        else {
            panic!("a:1 copies 31 MB into its 9 MB");
        };
        assert_eq!(node, "a:1");
    }

    #[test]
    fn a_batch_counts_twice_on_its_target_and_once_on_its_source() {
        let s = standing(&[("a:1", 8e6, 10e6, None), ("b:1", 8e6, 10e6, None)]);
        // The target: 8 MB + 2 x 0.5 MB = 9 MB, at its limit; 0.6 MB passes it.
        assert!(s.judge_batch("b:1", true, 0, 500_000, 1).is_none());
        assert!(s.judge_batch("b:1", true, 0, 600_000, 1).is_some());
        // The source holds the payload once.
        assert!(s.judge_batch("a:1", false, 0, 1_000_000, 1).is_none());
        // What moved since the last reading counts.
        assert!(s.judge_batch("b:1", true, 500_000, 500_000, 1).is_some());
    }
}
