//! What the tool reads of a cluster's nodes besides the topology: what a node says of itself
//! (`INFO`: Valkey 9 or not, `used_memory`, `DUMP`'s statistics; `MODULE LIST`), the key
//! count of every slot, and every key name of a master (`SCAN`). Reads only.

use super::connection::NodeConnection;
use super::error::NodeError;
use super::link::Link;
use super::pacing::Holds;
use super::topology::{LiveCluster, Master};
use super::INTERRUPTED;
use crate::reply::{array as items, field};
use anyhow::{anyhow, bail, Result};
use redis::Value;
use ringslot_engine::{key_slot, SLOT_COUNT};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// What a node says of itself in `INFO server` and `INFO memory`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NodeFacts {
    /// Valkey 9 or later (`server_name:valkey`, `valkey_version`): it has atomic slot
    /// migration (`CLUSTER MIGRATESLOTS`).
    pub atomic: bool,
    /// `used_memory`, bytes.
    pub used_memory: f64,
}

/// [`NodeFacts`] of the node at `link`. Error: the node cannot be reached, or refuses `INFO`
/// (an ACL user without `+info`).
pub(crate) fn node_facts(link: &Link) -> Result<NodeFacts, NodeError> {
    let mut con = link.connect()?;
    let server = con.text(&["INFO", "server"])?;
    let memory = con.text(&["INFO", "memory"])?;
    Ok(NodeFacts {
        atomic: crate::reply::is_valkey_9(&server),
        used_memory: crate::reply::info_field(&memory, "used_memory")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0),
    })
}

/// `DUMP`'s calls and microseconds so far on each master (`INFO commandstats`), for the
/// server time of the prediction's own `DUMP`s; masters that refuse `INFO` are left out.
pub(crate) fn dump_stats(masters: &[Master]) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for m in masters {
        let Ok(info) = m
            .link
            .connect()
            .and_then(|mut con| con.text(&["INFO", "commandstats"]))
        else {
            continue;
        };
        let line = crate::reply::info_field(&info, "cmdstat_dump").unwrap_or_default();
        let field = |name: &str| {
            line.split(',')
                .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        out.insert(m.address.clone(), (field("calls"), field("usec")));
    }
    out
}

/// Whether `MODULE LIST` of the master names ringslot.
pub(crate) fn has_module(m: &Master) -> Result<bool> {
    let list = m.link.connect()?.run(&["MODULE", "LIST"])?;
    Ok(items(&list)?.iter().any(|module| {
        field(module, "name")
            .ok()
            .and_then(|n| crate::reply::text(n).ok())
            .is_some_and(|n| n == "ringslot")
    }))
}

/// The masters of `topo` without the module loaded.
pub(crate) fn without_module(topo: &LiveCluster) -> Result<Vec<String>> {
    let mut missing = Vec::new();
    for m in &topo.masters {
        if !has_module(m)? {
            missing.push(m.address.clone());
        }
    }
    Ok(missing)
}

/// For every slot, a hash tag `{...}` whose key slot it is (16384 entries, by slot).
pub fn tags() -> Vec<String> {
    let mut tags = vec![String::new(); SLOT_COUNT];
    let mut missing = SLOT_COUNT;
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

/// The key count of every slot, from its master: one `CLUSTER SLOT-STATS SLOTSRANGE 0 16383`
/// where the server has it (Valkey 8 and later, Redis 8.2 and later), else `CLUSTER
/// COUNTKEYSINSLOT` of each of its slots, pipelined. Both count what the slot's dictionary
/// holds: keys past their expiry that the server has not reclaimed yet are counted (a walk of
/// live keys skips them, and `MIGRATE` never moves them).
pub fn slot_counts(topo: &LiveCluster) -> Result<Vec<u64>> {
    let mut counts = vec![0u64; SLOT_COUNT];
    for m in &topo.masters {
        let mut con = m.link.connect()?;
        if let Some(stats) = slot_stats(&mut con) {
            for &slot in &m.slots {
                if let Some(c) = counts.get_mut(usize::from(slot)) {
                    *c = stats.get(&slot).copied().unwrap_or(0);
                }
            }
        } else {
            for (slot, n) in count_keys_in_slots(&mut con, &m.slots)? {
                if let Some(c) = counts.get_mut(usize::from(slot)) {
                    *c = n;
                }
            }
        }
    }
    Ok(counts)
}

/// `CLUSTER COUNTKEYSINSLOT` of each of `slots`, pipelined 1000 at a time.
pub(crate) fn count_keys_in_slots(
    con: &mut NodeConnection,
    slots: &[u16],
) -> Result<Vec<(u16, u64)>, NodeError> {
    let mut counts = Vec::with_capacity(slots.len());
    for part in slots.chunks(1000) {
        let mut pipe = redis::pipe();
        for slot in part {
            pipe.cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(*slot);
        }
        let got: Vec<u64> = con.pipeline(&pipe, "CLUSTER COUNTKEYSINSLOT")?;
        counts.extend(part.iter().copied().zip(got));
    }
    Ok(counts)
}

/// The key count of each slot this node serves, from `CLUSTER SLOT-STATS SLOTSRANGE 0 16383`
/// (one reply of `[slot, [key-count, n, ...]]` per served slot); `None` on a server without
/// the command (Redis before 8.2, Valkey before 8), or one that answers in another shape.
pub(crate) fn slot_stats(con: &mut NodeConnection) -> Option<BTreeMap<u16, u64>> {
    let last = (SLOT_COUNT - 1).to_string();
    let reply: Value = con
        .run(&["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "0", &last])
        .ok()?;
    let mut stats = BTreeMap::new();
    for row in items(&reply).ok()? {
        let (slot, n) = match items(row) {
            Ok([slot, fields]) => crate::reply::int(slot)
                .ok()
                .zip(field(fields, "key-count").ok())
                .and_then(|(slot, n)| {
                    Some((u16::try_from(slot).ok()?, crate::reply::int(n).ok()?))
                })?,
            _ => return None,
        };
        stats.insert(slot, u64::try_from(n).unwrap_or(0));
    }
    Some(stats)
}

/// Every live key name of master `m`, a `SCAN` batch at a time (about 1000 names), handed to
/// `visit` with the connection. Error: Ctrl-C ([`INTERRUPTED`]), `SCAN`'s or `visit`'s.
pub(crate) fn scan_master(
    m: &Master,
    con: &mut NodeConnection,
    holds: &Holds,
    mut visit: impl FnMut(&mut NodeConnection, Vec<Vec<u8>>) -> Result<()>,
) -> Result<()> {
    let mut cursor: u64 = 0;
    loop {
        if INTERRUPTED.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor).arg("COUNT").arg(1000);
        let (next, names): (u64, Vec<Vec<u8>>) = holds
            .time(&m.address, || con.query(&scan))
            .map_err(|e| anyhow!(e))?;
        visit(con, names)?;
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::link::Access;
    use crate::cluster::snapshot::read_topology;
    use std::time::{Duration, Instant};

    #[test]
    fn slot_stats_count_what_countkeysinslot_counts() {
        // A live cluster of the server under test: where it answers CLUSTER SLOT-STATS
        // (Valkey 9.1.2, Redis 8.2.3), one call per master gives every slot's key count as
        // 16384 pipelined COUNTKEYSINSLOT do, keys past their expiry included; Redis 7.0.15
        // has no such command, and the counts come from COUNTKEYSINSLOT.
        use ringslot_harness::cluster::Cluster;
        let cluster = Cluster::start(3, ringslot_harness::Server::builder).unwrap();
        let mut seed = cluster.nodes[0].client();
        let access = Access::plain(&cluster.nodes[0].url()).unwrap();
        let topo = read_topology(&access).unwrap();
        let tags = tags();
        for m in &topo.masters {
            let mut con = m.link.connect().unwrap();
            let mut pipe = redis::pipe();
            for (i, &slot) in m.slots.iter().enumerate().step_by(7) {
                let tag = &tags[usize::from(slot)];
                for k in 0..(i % 5) {
                    pipe.cmd("SET").arg(format!("{tag}k{k}")).arg(k).ignore();
                }
                pipe.cmd("SET")
                    .arg(format!("{tag}gone"))
                    .arg(1)
                    .arg("PX")
                    .arg(1)
                    .ignore();
            }
            con.run(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap();
            con.pipeline::<()>(&pipe, "SET").unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
        let valkey9 = ringslot_harness::cluster::has_atomic_slot_migration(&cluster.nodes[0]);
        let version: String = redis::cmd("INFO").arg("server").query(&mut seed).unwrap();
        let has_stats = valkey9 || version.contains("redis_version:8.");
        let (mut by_stats, mut by_count) = (Duration::ZERO, Duration::ZERO);
        for m in &topo.masters {
            let mut con = m.link.connect().unwrap();
            let started = Instant::now();
            let stats = slot_stats(&mut con);
            by_stats += started.elapsed();
            let started = Instant::now();
            let counted = count_keys_in_slots(&mut con, &m.slots).unwrap();
            by_count += started.elapsed();
            assert_eq!(stats.is_some(), has_stats, "{version}");
            if let Some(stats) = stats {
                let counted: BTreeMap<u16, u64> = counted.into_iter().collect();
                assert_eq!(stats, counted, "{}", m.address);
            }
        }
        eprintln!(
            "every slot's key count: CLUSTER SLOT-STATS {by_stats:?}, COUNTKEYSINSLOT \
             {by_count:?} (3 masters)"
        );
    }

    #[test]
    fn every_slot_gets_a_tag_of_its_own() {
        let tags = tags();
        assert_eq!(tags.len(), SLOT_COUNT);
        for (slot, tag) in tags.iter().enumerate() {
            assert_eq!(usize::from(key_slot(tag.as_bytes())), slot, "{tag}");
        }
    }
}
