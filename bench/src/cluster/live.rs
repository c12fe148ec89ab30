//! The live cluster, read from a seed address with plain connections (a cluster client would
//! follow `MOVED` and count a node twice): its masters and slots (`CLUSTER NODES`), checked to
//! be stable and to have the module loaded, and the key count of every slot.

use anyhow::{anyhow, bail, Context, Result};
use ringslot_engine::cluster::{parse_cluster_nodes, ClusterNode};
use ringslot_engine::{key_slot, SLOT_COUNT};
use ringslot_harness::client::error_text;
use ringslot_harness::redis::{self, Connection, ConnectionAddr, ConnectionInfo, Value};
use ringslot_harness::reply::{array as items, field};
use std::time::Duration;

/// One master of the cluster.
#[derive(Debug, Clone)]
pub(super) struct Master {
    pub(super) address: String,
    pub(super) slots: Vec<u16>,
    pub(super) info: ConnectionInfo,
}

/// The checked topology: its masters in the order of their first slot, and the owner of
/// every slot.
#[derive(Debug, Clone)]
pub(super) struct LiveCluster {
    pub(super) masters: Vec<Master>,
    pub(super) owner: Vec<Option<usize>>,
    /// The seed, when it is a master.
    pub(super) seed: Option<usize>,
}

/// `info` with its address replaced by `address` (`ip:port`): the seed's credentials and
/// database on another node.
pub(super) fn info_at(info: &ConnectionInfo, address: &str) -> Result<ConnectionInfo> {
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| anyhow!("not an ip:port address: {address}"))?;
    let port: u16 = port.parse().with_context(|| format!("port of {address}"))?;
    let mut info = info.clone();
    info.addr = match &info.addr {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host: host.to_string(),
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host.to_string(), port),
    };
    Ok(info)
}

/// A plain connection (no cluster redirection) to one node.
pub(super) fn connect(info: &ConnectionInfo) -> Result<Connection> {
    let client = redis::Client::open(info.clone())
        .map_err(|e| anyhow!("bad address {:?}: {e}", info.addr))?;
    client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(|e| anyhow!("cannot reach {}: {e}", info.addr))
}

/// Runs a command; an error names the node and the command and quotes the reply.
pub(super) fn run(con: &mut Connection, at: &str, args: &[String]) -> Result<Value> {
    let parts: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    ringslot_harness::client::cmd(&parts)
        .query::<Value>(con)
        .map_err(|e| {
            let line: Vec<&str> = args.iter().map(String::as_str).take(8).collect();
            anyhow!("{at}: `{}` failed: {}", line.join(" "), error_text(&e))
        })
}

pub(super) fn s(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// `CLUSTER NODES` of the node at `info`, parsed.
pub(super) fn nodes_of(info: &ConnectionInfo) -> Result<Vec<ClusterNode>> {
    let mut con = connect(info)?;
    let at = format!("{:?}", info.addr);
    let text = ringslot_harness::reply::text(&run(&mut con, &at, &s(&["CLUSTER", "NODES"]))?)
        .map_err(|e| anyhow!("{at}: CLUSTER NODES: {e}"))?;
    parse_cluster_nodes(&text).map_err(|e| anyhow!("{at}: {e}"))
}

/// Every slot `node` serves, ascending.
pub(super) fn slots_of(node: &ClusterNode) -> Vec<u16> {
    node.slots.iter().flat_map(|&(a, b)| a..=b).collect()
}

/// The first slot `node` is migrating or importing, if any.
pub(super) fn first_open(node: &ClusterNode) -> Option<u16> {
    node.migrating
        .iter()
        .chain(&node.importing)
        .map(|(slot, _)| *slot)
        .min()
}

/// Reads and checks the topology from the seed (see the module docs).
pub(super) fn read_topology(seed: &ConnectionInfo, check_modules: bool) -> Result<LiveCluster> {
    let nodes = nodes_of(seed)?;
    for n in &nodes {
        for bad in ["fail", "fail?", "handshake", "noaddr"] {
            if n.has(bad) {
                bail!(
                    "node {} ({}) is flagged `{bad}`: predict when the cluster is healthy \
                     (redis-cli --cluster check)",
                    n.address,
                    n.id
                );
            }
        }
        if let Some(open) = first_open(n) {
            bail!(
                "slot {open} of {} is migrating or importing: run when the migration ends \
                 (redis-cli --cluster check, and --cluster fix if it is stuck)",
                n.address
            );
        }
    }
    let mut masters: Vec<Master> = nodes
        .iter()
        .filter(|n| n.has("master"))
        .map(|n| {
            Ok(Master {
                address: n.address.clone(),
                slots: slots_of(n),
                info: info_at(seed, &n.address)?,
            })
        })
        .collect::<Result<_>>()?;
    masters.sort_by(|a, b| {
        let first = |m: &Master| m.slots.first().copied().unwrap_or(u16::MAX);
        (first(a), &a.address).cmp(&(first(b), &b.address))
    });
    let mut owner = vec![None; SLOT_COUNT];
    for (i, m) in masters.iter().enumerate() {
        for &slot in &m.slots {
            if let Some(o) = owner.get_mut(usize::from(slot)) {
                *o = Some(i);
            }
        }
    }
    // Every node must see the same masters and slot table.
    let table = |nodes: &[ClusterNode]| -> Vec<(String, Vec<u16>)> {
        let mut t: Vec<(String, Vec<u16>)> = nodes
            .iter()
            .filter(|n| n.has("master"))
            .map(|n| (n.address.clone(), slots_of(n)))
            .collect();
        t.sort();
        t
    };
    let mine = table(&nodes);
    for n in &nodes {
        let theirs = nodes_of(&info_at(seed, &n.address)?)?;
        // A node lists its own open slots only (on its `myself` line).
        if let Some(open) = theirs.iter().find(|t| t.has("myself")).and_then(first_open) {
            bail!(
                "slot {open} of {} is migrating or importing: run when the migration ends \
                 (redis-cli --cluster check, and --cluster fix if it is stuck)",
                n.address
            );
        }
        if table(&theirs) != mine {
            bail!(
                "{} and the seed disagree on the masters or the slot table: run when the \
                 cluster has converged (redis-cli --cluster check)",
                n.address
            );
        }
    }
    if check_modules {
        let missing: Vec<&str> = masters
            .iter()
            .filter(|m| !has_module(m).unwrap_or(false))
            .map(|m| m.address.as_str())
            .collect();
        if !missing.is_empty() {
            bail!(
                "the ringslot module is not loaded on {}: load it on every master (a ring \
                 key cannot migrate to a master without it, and MIGRATE leaves the slot open)",
                missing.join(", ")
            );
        }
    }
    let seed = nodes
        .iter()
        .find(|n| n.has("myself"))
        .and_then(|me| masters.iter().position(|m| m.address == me.address));
    Ok(LiveCluster {
        masters,
        owner,
        seed,
    })
}

/// Whether `MODULE LIST` of the master names ringslot.
pub(super) fn has_module(m: &Master) -> Result<bool> {
    let mut con = connect(&m.info)?;
    let list = run(&mut con, &m.address, &s(&["MODULE", "LIST"]))?;
    Ok(items(&list)?.iter().any(|module| {
        field(module, "name")
            .ok()
            .and_then(|n| ringslot_harness::reply::text(n).ok())
            .is_some_and(|n| n == "ringslot")
    }))
}

/// For every slot, a hash tag `{...}` whose key slot it is.
pub(super) fn tags() -> Vec<String> {
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

/// The key count of every slot, from its master (pipelined per master).
pub(super) fn slot_counts(topo: &LiveCluster) -> Result<Vec<u64>> {
    let mut counts = vec![0u64; SLOT_COUNT];
    for m in &topo.masters {
        let mut con = connect(&m.info)?;
        for part in m.slots.chunks(1000) {
            let mut pipe = redis::pipe();
            for slot in part {
                pipe.cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(*slot);
            }
            let got: Vec<u64> = pipe
                .query(&mut con)
                .map_err(|e| anyhow!("{}: CLUSTER COUNTKEYSINSLOT: {e}", m.address))?;
            for (slot, n) in part.iter().zip(got) {
                counts[usize::from(*slot)] = n;
            }
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slot_gets_a_tag_of_its_own() {
        let tags = tags();
        assert_eq!(tags.len(), SLOT_COUNT);
        for (slot, tag) in tags.iter().enumerate() {
            assert_eq!(usize::from(key_slot(tag.as_bytes())), slot, "{tag}");
        }
    }

    #[test]
    fn slots_and_open_slots_of_a_node() {
        let nodes = parse_cluster_nodes(
            "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 \
             connected 0-2 7 [9->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1] \
             [4-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]",
        )
        .unwrap();
        assert_eq!(slots_of(&nodes[0]), vec![0, 1, 2, 7]);
        assert_eq!(first_open(&nodes[0]), Some(4));
    }
}
