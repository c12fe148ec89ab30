//! The cache fleet on loopback: backends (redis-servers with the module, `maxmemory` and
//! `allkeys-lfu`), a twemproxy pool in front of some of them, and what ringslot predicts from
//! them before a change: `RING.MOVES ... WEIGH BYTES HITS` on each backend (its LFU
//! counters), and which cached keys move, key by key, by the engine's ring and modulo.

use super::workload::{key, rank_of};
use anyhow::{anyhow, bail, Context, Result};
use ringslot_engine::{Flavour, Ring};
use ringslot_harness::client::scan_keys;
use ringslot_harness::proxy::{twemproxy_order, Distribution, Pool, PoolServer};
use ringslot_harness::redis::{self, Connection};
use ringslot_harness::{Server, ServerBuilder};
use ringslot_tool::reply::ring::Moves;

/// The ring key ringslot-bench makes on each backend for its what-if (deleted after, with a
/// TTL meanwhile).
const RING_KEY: &str = "ringslot-bench:cache-ring";

/// The backends, in twemproxy's order of their names (see [`twemproxy_order`]).
pub struct Fleet {
    /// The backends, stopped when the fleet is dropped.
    pub servers: Vec<Server>,
}

/// A change of the pool: the backends before and after (indices into the fleet, in
/// twemproxy's order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `join` or `leave`, for the report.
    pub name: &'static str,
    /// The pool's backends before the change.
    pub before: Vec<usize>,
    /// And after it.
    pub after: Vec<usize>,
}

impl Change {
    /// One backend joining `n`: the last in twemproxy's order, so that modula's table grows
    /// at its end as the what-if's modulo does.
    pub fn join(n: usize) -> Change {
        Change {
            name: "join",
            before: (0..n).collect(),
            after: (0..=n).collect(),
        }
    }

    /// One of `n` backends leaving: the middle one.
    pub fn leave(n: usize) -> Change {
        let gone = n / 2;
        Change {
            name: "leave",
            before: (0..n).collect(),
            after: (0..n).filter(|&i| i != gone).collect(),
        }
    }

    /// The backend that joins or leaves.
    pub fn changed(&self) -> Option<usize> {
        let only_after = self.after.iter().find(|i| !self.before.contains(i));
        let only_before = self.before.iter().find(|i| !self.after.contains(i));
        only_after.or(only_before).copied()
    }
}

impl Fleet {
    /// Starts `count` backends made by `builder`, each allowed `megabytes` of data above what
    /// it uses empty, evicting by LFU.
    pub fn start(
        count: usize,
        megabytes: u64,
        builder: impl Fn() -> ServerBuilder,
    ) -> Result<Fleet> {
        let mut servers = Vec::with_capacity(count);
        for _ in 0..count {
            let server = builder()
                .args(&["--maxmemory-policy", "allkeys-lfu"])
                .start()?;
            let mut con = server.client();
            let used = used_memory(&mut con)?;
            set_maxmemory(&mut con, used + megabytes * 1024 * 1024)?;
            servers.push(server);
        }
        servers.sort_by(|a, b| {
            let (a, b) = (a.address(), b.address());
            a.len().cmp(&b.len()).then_with(|| a.cmp(&b))
        });
        Ok(Fleet { servers })
    }

    /// The names (`127.0.0.1:port`) of backends `which`, in twemproxy's order.
    pub fn names(&self, which: &[usize]) -> Vec<String> {
        let mut names: Vec<String> = which
            .iter()
            .filter_map(|&i| self.servers.get(i).map(Server::address))
            .collect();
        twemproxy_order(&mut names);
        names
    }

    /// Empties every backend (their data is the run's own).
    pub fn flush(&self) -> Result<()> {
        for s in &self.servers {
            redis::cmd("FLUSHALL")
                .query::<()>(&mut s.client())
                .context("FLUSHALL")?;
        }
        Ok(())
    }

    /// The pool of backends `which` under `distribution`, keys hashed by MD5.
    pub fn pool(&self, distribution: Distribution, which: &[usize]) -> Pool {
        Pool {
            distribution,
            hash: "md5".into(),
            hash_tag: None,
            redis: true,
            servers: self
                .names(which)
                .into_iter()
                .map(|n| PoolServer::new(n, 1))
                .collect(),
        }
    }

    /// Gives backends `which` 4 MiB more `maxmemory` until [`Fleet::release`]: Redis evicts
    /// before any command while it is over its limit (a `SCAN` too), and the ring key of a
    /// what-if takes memory (its points, a 64 KiB slot table); with room, looking at the
    /// cache evicts none of it. Returns what to restore.
    pub fn hold(&self, which: &[usize]) -> Result<Vec<(usize, u64)>> {
        let mut held = Vec::new();
        for &i in which {
            let Some(s) = self.servers.get(i) else {
                continue;
            };
            let mut con = s.client();
            let (_, maxmemory): (String, u64) = redis::cmd("CONFIG")
                .arg("GET")
                .arg("maxmemory")
                .query(&mut con)
                .context("CONFIG GET maxmemory")?;
            set_maxmemory(&mut con, maxmemory + 4 * 1024 * 1024)?;
            held.push((i, maxmemory));
        }
        Ok(held)
    }

    /// Restores the `maxmemory` of [`Fleet::hold`].
    pub fn release(&self, held: &[(usize, u64)]) -> Result<()> {
        for &(i, maxmemory) in held {
            if let Some(s) = self.servers.get(i) {
                set_maxmemory(&mut s.client(), maxmemory)?;
            }
        }
        Ok(())
    }

    /// The workload's keys cached on backends `which` now (`SCAN`, which touches no key), as
    /// ranks.
    pub fn cached(&self, which: &[usize]) -> Result<Vec<usize>> {
        let mut ranks = Vec::new();
        for &i in which {
            let Some(s) = self.servers.get(i) else {
                continue;
            };
            let mut con = s.client();
            scan_keys(&mut con, "c:*", |_: &mut Connection, batch| {
                ranks.extend(batch.iter().filter_map(|k| rank_of(k)));
                Ok::<_, redis::RedisError>(())
            })
            .context("SCAN")?;
        }
        Ok(ranks)
    }
}

/// `CONFIG SET maxmemory bytes`.
fn set_maxmemory(con: &mut Connection, bytes: u64) -> Result<()> {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(bytes)
        .query::<()>(con)
        .context("CONFIG SET maxmemory")
}

/// `used_memory` of a server.
fn used_memory(con: &mut Connection) -> Result<u64> {
    let info: String = redis::cmd("INFO").arg("memory").query(con)?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| anyhow!("no used_memory in INFO memory"))
}

/// What `RING.MOVES ... WEIGH BYTES HITS` says, summed over the backends, for one scheme.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Weighed {
    /// Keys evaluated.
    pub members: u64,
    /// Their `MEMORY USAGE`, bytes.
    pub bytes: u64,
    /// Their LFU-estimated hits.
    pub hits: u64,
    /// Keys that change owner.
    pub moved: u64,
    /// Their bytes.
    pub moved_bytes: u64,
    /// Their hits.
    pub moved_hits: u64,
}

impl Weighed {
    /// The share of the hits that move.
    pub fn hits_fraction(&self) -> f64 {
        if self.hits == 0 {
            0.0
        } else {
            self.moved_hits as f64 / self.hits as f64
        }
    }
}

/// Asks each backend of `change.before` what the change costs its keys (`scheme`: `ring` for
/// ketama, `modulo` for modula), on a ketama ring of the pool's names in twemproxy's order,
/// weighing by bytes and LFU hits; sums the answers. The ring key is made, used and deleted
/// on each backend in turn, with a TTL of 10 minutes meanwhile. Errors: the server's.
pub fn ask_backends(fleet: &Fleet, change: &Change, scheme: &str) -> Result<Weighed> {
    let names = fleet.names(&change.before);
    let changed = change
        .changed()
        .and_then(|i| fleet.servers.get(i))
        .map(Server::address)
        .ok_or_else(|| anyhow!("the change names no backend"))?;
    let verb = if change.after.len() > change.before.len() {
        "ADD"
    } else {
        "DEL"
    };
    let mut sum = Weighed::default();
    for &i in &change.before {
        let Some(s) = fleet.servers.get(i) else {
            continue;
        };
        let mut con = s.client();
        let mut create = redis::cmd("RING.CREATE");
        create.arg(RING_KEY).arg("COMPAT").arg("ketama");
        create.query::<()>(&mut con).context("RING.CREATE")?;
        let answer = (|| -> Result<redis::Value> {
            let mut add = redis::cmd("RING.ADD");
            add.arg(RING_KEY);
            for n in &names {
                add.arg(n);
            }
            add.query::<()>(&mut con).context("RING.ADD")?;
            redis::cmd("EXPIRE")
                .arg(RING_KEY)
                .arg(600)
                .query::<()>(&mut con)?;
            redis::cmd("RING.MOVES")
                .arg(RING_KEY)
                .arg(verb)
                .arg(&changed)
                .arg("KEYS")
                .arg("c:*")
                .arg("SCHEMES")
                .arg(scheme)
                .arg("WEIGH")
                .arg("BYTES")
                .arg("HITS")
                .query(&mut con)
                .context("RING.MOVES ... WEIGH BYTES HITS")
        })();
        redis::cmd("DEL").arg(RING_KEY).query::<()>(&mut con)?;
        let answer = Moves::read(&answer?).map_err(|e| anyhow!("RING.MOVES: {e}"))?;
        let part = answer
            .scheme(scheme)
            .map_err(|e| anyhow!("RING.MOVES: {e}"))?;
        sum.members += answer.members;
        sum.bytes += answer.bytes.unwrap_or(0);
        sum.hits += answer.hits.unwrap_or(0);
        sum.moved += part.moved;
        sum.moved_bytes += part.moved_bytes.unwrap_or(0);
        sum.moved_hits += part.moved_hits.unwrap_or(0);
    }
    Ok(sum)
}

/// The backend (an index into `names`) of each of `ranks` under the pool `names`, as
/// twemproxy places it: the `ketama` ring, or `modulo` over the names in their order.
pub fn owners(
    distribution: Distribution,
    names: &[String],
    ranks: &[usize],
) -> Result<Vec<Option<usize>>> {
    if names.is_empty() {
        bail!("a pool needs a backend");
    }
    let mut ring = Ring::new(Flavour::Ketama, 160, false);
    ring.set_nodes(names.iter().map(|n| (n.clone().into_bytes(), 1)).collect());
    Ok(ranks
        .iter()
        .map(|&r| {
            let k = key(r).into_bytes();
            match distribution {
                Distribution::Ketama => ring.owner(&k),
                Distribution::Modula => {
                    let i = ring.member_hash(&k) % names.len() as u64;
                    Some(i as usize)
                }
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which of `ranks` change owner under `distribution` when the pool goes from `before` to
    /// `after` (names in twemproxy's order): ringslot's `ketama` ring, or its `modulo` (the
    /// ketama member hash, MD5's first four bytes, modulo the servers in order), key by key.
    fn moved_ranks(
        distribution: Distribution,
        before: &[String],
        after: &[String],
        ranks: &[usize],
    ) -> Result<Vec<bool>> {
        let b = owners(distribution, before, ranks)?;
        let a = owners(distribution, after, ranks)?;
        Ok(b.iter()
            .zip(&a)
            .map(|(x, y)| x.and_then(|i| before.get(i)) != y.and_then(|i| after.get(i)))
            .collect())
    }

    #[test]
    fn changes_and_twemproxys_order() {
        let mut names = vec![
            "127.0.0.1:30000".to_string(),
            "127.0.0.1:9999".to_string(),
            "127.0.0.1:20000".to_string(),
        ];
        twemproxy_order(&mut names);
        assert_eq!(
            names,
            ["127.0.0.1:9999", "127.0.0.1:20000", "127.0.0.1:30000"]
        );
        let j = Change::join(4);
        assert_eq!(
            (j.before.len(), j.after.len(), j.changed()),
            (4, 5, Some(4))
        );
        let l = Change::leave(4);
        assert_eq!((l.after.clone(), l.changed()), (vec![0, 1, 3], Some(2)));
    }

    #[test]
    fn modula_moves_most_keys_and_ketama_a_fifth() {
        let before: Vec<String> = (0..4).map(|i| format!("127.0.0.1:2000{i}")).collect();
        let mut after = before.clone();
        after.push("127.0.0.1:20004".into());
        let ranks: Vec<usize> = (0..20_000).collect();
        let share = |d| {
            let moved = moved_ranks(d, &before, &after, &ranks).unwrap();
            moved.iter().filter(|&&m| m).count() as f64 / ranks.len() as f64
        };
        // A fifth node: the ring moves about 1/5, hash mod N about 4/5.
        assert!((share(Distribution::Ketama) - 0.2).abs() < 0.05);
        assert!((share(Distribution::Modula) - 0.8).abs() < 0.02);
    }
}
