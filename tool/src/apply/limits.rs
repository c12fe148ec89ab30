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
use crate::cluster::memory::{read_memory, replicas_of, NodeMemory};
use crate::cluster::topology::nodes_on;
use crate::plan::SlotMove;
use anyhow::{bail, Result};
use ringslot_engine::cluster::myself;
use std::collections::BTreeMap;
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
    /// Its memory when the run began, and as last read.
    pub start: NodeMemory,
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
    pub nodes: BTreeMap<String, Stand>,
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
    /// The node evicted keys during the run.
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
}

/// The host of an `ip:port` address.
fn host(address: &str) -> &str {
    address.rsplit_once(':').map_or(address, |(h, _)| h)
}

impl Standing {
    /// The replicas of the master at `master`.
    fn replicas(&self, master: &str) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, w)| w.replica_of.as_deref() == Some(master))
            .map(|(a, _)| a.clone())
            .collect()
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
    /// carries, or the slot's bytes where less). The first node that would cross its limit,
    /// if any.
    pub(crate) fn check_plan(&self, moves: &[SlotMove], batch: u64) -> Option<Crossing> {
        let mut memory: BTreeMap<&str, f64> = self
            .nodes
            .iter()
            .map(|(a, w)| (a.as_str(), w.base()))
            .collect();
        for m in moves {
            let size = m.memory.unwrap_or(m.bytes).max(0.0);
            let transient = m.bytes.max(size).min(batch as f64);
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
            standing: Standing { headroom, nodes },
            readers,
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

    /// The `INFO replication` of the master at `master`, and its replicas the run watches;
    /// `None` where it is not a master now (a master the plan drained turns replica of the
    /// node that took its last slot). A watched replica that its master's `CLUSTER NODES`
    /// no longer lists as its own (it followed its drained master elsewhere) is watched no
    /// more.
    fn replication(&mut self, master: &str) -> Result<Option<(String, Vec<String>)>> {
        let Some(r) = self.readers.get_mut(master) else {
            return Ok(None);
        };
        let text = r.con.text(&["INFO", "replication"])?;
        if crate::reply::info_field(&text, "role").as_deref() != Some("master") {
            return Ok(None);
        }
        let listed = replicas_of(&text);
        let mut expected = self.standing.replicas(master);
        if expected
            .iter()
            .any(|e| !listed.iter().any(|l| l.address == *e))
        {
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
                self.standing.nodes.remove(g);
                self.readers.remove(g);
            }
            expected.retain(|e| !gone.contains(e));
        }
        Ok(Some((text, expected)))
    }

    /// Waits while a replica of `masters` is not streaming (`state` other than `online`, or
    /// absent from its master's `INFO replication`) or lags past [`REPLICA_LAG_BOUND`]
    /// bytes, at most [`REPLICA_WAIT`], calling `waiting` once with what it waits for.
    /// Error: still so after the wait (the node, its state, its lag), or a master that no
    /// longer answers.
    pub(crate) fn wait_for_replicas(
        &mut self,
        masters: &[&str],
        waiting: &mut dyn FnMut(String),
    ) -> Result<()> {
        let began = Instant::now();
        let mut told = false;
        loop {
            let Some(behind) = self.replica_behind(masters)? else {
                return Ok(());
            };
            if began.elapsed() >= REPLICA_WAIT {
                bail!(
                    "{behind} after {} s of waiting: the run stopped between slots (none left \
                     open). Once the replica streams again (INFO replication), run the same \
                     command to go on",
                    REPLICA_WAIT.as_secs()
                );
            }
            if !told {
                waiting(format!(
                    "waiting for a replica: {behind} (at most {} s)",
                    REPLICA_WAIT.as_secs()
                ));
                told = true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The first replica of `masters` that is not streaming or lags past
    /// [`REPLICA_LAG_BOUND`] bytes, in words.
    fn replica_behind(&mut self, masters: &[&str]) -> Result<Option<String>> {
        for master in masters {
            if self.standing.replicas(master).is_empty() {
                continue;
            }
            let Some((text, expected)) = self.replication(master)? else {
                continue;
            };
            let links = replicas_of(&text);
            for r in expected {
                match links.iter().find(|l| l.address == r) {
                    None => {
                        return Ok(Some(format!(
                            "replica {r} is not connected to its master {master}"
                        )))
                    }
                    Some(l) if l.state != "online" => {
                        return Ok(Some(format!(
                            "replica {r} of {master} is in state {} (not streaming)",
                            l.state
                        )))
                    }
                    Some(l) if l.lag_bytes > REPLICA_LAG_BOUND => {
                        return Ok(Some(format!(
                            "replica {r} of {master} lags {} bytes behind it (the bound is {})",
                            l.lag_bytes, REPLICA_LAG_BOUND
                        )))
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(None)
    }

    /// After the run: waits (at most [`REPLICA_WAIT`]) until every replica of `masters` has
    /// acknowledged its master's replication offset as it stood when the run ended, so that
    /// each holds what its master held then. Error: one that has not by then.
    pub(crate) fn settle_replicas(&mut self, masters: &[&str]) -> Result<()> {
        let offset_of = |text: &str| -> u64 {
            crate::reply::info_field(text, "master_repl_offset")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let mut marks: Vec<(String, u64)> = Vec::new();
        for master in masters {
            if self.standing.replicas(master).is_empty() {
                continue;
            }
            if let Some((text, _)) = self.replication(master)? {
                marks.push((master.to_string(), offset_of(&text)));
            }
        }
        let began = Instant::now();
        for (master, mark) in marks {
            loop {
                let Some((text, expected)) = self.replication(&master)? else {
                    break;
                };
                let now = offset_of(&text);
                // A replica's lag is counted from the offset now: it acknowledged the offset
                // now less its lag.
                let links = replicas_of(&text);
                let behind: Vec<String> = expected
                    .iter()
                    .filter(|r| {
                        links
                            .iter()
                            .find(|l| l.address == **r)
                            .is_none_or(|l| now.saturating_sub(l.lag_bytes) < mark)
                    })
                    .cloned()
                    .collect();
                if behind.is_empty() {
                    break;
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
        Ok(self.standing.check_plan(moves, batch))
    }

    /// Each watched master's `evicted_keys` growth since the run began, where it grew (each
    /// read again).
    pub(crate) fn evictions(&mut self) -> Result<Vec<(String, u64)>> {
        let addresses: Vec<String> = self.readers.keys().cloned().collect();
        let mut out = Vec::new();
        for a in addresses {
            self.reread(&a)?;
            if let Some(w) = self.standing.nodes.get(&a) {
                let grew = w.last.evicted_keys.saturating_sub(w.start.evicted_keys);
                if grew > 0 && w.replica_of.is_none() {
                    out.push((a, grew));
                }
            }
        }
        Ok(out)
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
        assert_eq!(s.check_plan(&moves[..6], 1 << 20), None);
        let Some(Crossing::Limit { node, slot, .. }) = s.check_plan(&moves, 1 << 20) else {
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
        }) = s.check_plan(&moves, 1 << 20)
        else {
            panic!("the plan crosses j:2's limit");
        };
        assert_eq!((node.as_str(), replica_of.as_deref()), ("j:2", Some("j:1")));
        // Moving keys away frees room on a source that is a target later.
        let s = standing(&[("a:1", 7e6, 10e6, None), ("b:1", 1e6, 100e6, None)]);
        let there_and_back = [mv(1, "a:1", "b:1", 3e6), mv(2, "b:1", "a:1", 2e6)];
        assert_eq!(s.check_plan(&there_and_back, 1 << 20), None);
        let Some(c) = s.check_plan(&[mv(2, "b:1", "a:1", 2e6)], 1 << 20) else {
            panic!("a:1 would pass 9 MB: 7 + 2 + a batch");
        };
        assert!(c.to_string().contains("a:1 (master) would reach"), "{c}");
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
