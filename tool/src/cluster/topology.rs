//! The live cluster's topology, read from a seed address with plain connections (a cluster
//! client would follow `MOVED` and count a node twice): its masters and slots (`CLUSTER
//! NODES`), each node reached by `Reach::link`, and checked to be stable: no node failing or
//! in handshake, no slot open, every node agreeing with the seed, no atomic slot migration
//! running.

use super::connection::NodeConnection;
use super::finding::Finding;
use super::link::{Access, Link};
use crate::reply::{array as items, field};
use anyhow::{anyhow, Result};
use ringslot_engine::cluster::{myself, parse_cluster_nodes, ClusterNode};
use std::collections::HashMap;

/// One master of the cluster.
#[derive(Debug, Clone)]
pub struct Master {
    /// `ip:port`, as `CLUSTER NODES` announces it.
    pub address: String,
    /// The slots it serves, ascending.
    pub slots: Vec<u16>,
    /// How the tool reaches it.
    pub link: Link,
}

/// One replica of the cluster.
#[derive(Debug, Clone)]
pub struct Replica {
    /// `ip:port`, as `CLUSTER NODES` announces it.
    pub address: String,
    /// Its master's `ip:port`.
    pub master: String,
    /// How the tool reaches it.
    pub link: Link,
}

/// The checked topology: its masters in the order of their first slot, and the owner of
/// every slot.
#[derive(Debug, Clone)]
pub struct LiveCluster {
    /// The masters, by their first slot (those without slots last, by address).
    pub masters: Vec<Master>,
    /// The replicas, by address.
    pub replicas: Vec<Replica>,
    /// The owner of each of the 16384 slots, an index into `masters`.
    pub owner: Vec<Option<usize>>,
    /// The seed, when it is a master.
    pub seed: Option<usize>,
    /// The seed's `CLUSTER NODES` (its own line marked `myself`): what `redis-cli --cluster`
    /// loads when run against it.
    pub nodes: Vec<ClusterNode>,
}

impl LiveCluster {
    /// The owner (`ip:port`) of every slot.
    pub fn owners(&self) -> Vec<Option<String>> {
        self.owner
            .iter()
            .map(|o| {
                o.and_then(|i| self.masters.get(i))
                    .map(|m| m.address.clone())
            })
            .collect()
    }

    /// The address of the node the seed is (its `myself` line).
    pub fn entry(&self) -> String {
        myself(&self.nodes).map_or_else(String::new, |n| n.address.clone())
    }
}

/// How every node of one cluster is reached: the access the seed was given, and over TLS each
/// node's TLS port, which `CLUSTER NODES` does not show when the cluster bus is plain
/// (`tls-cluster no`): `CLUSTER SHARDS` gives each node's `tls-port`.
#[derive(Debug, Clone)]
pub struct Reach {
    access: Access,
    tls_ports: HashMap<String, u16>,
}

impl Reach {
    /// The reach of the cluster `access`'s seed belongs to (`CLUSTER SHARDS` read over TLS).
    pub(crate) fn of(access: &Access) -> Reach {
        let tls_ports = if access.tls() {
            tls_ports(&access.seed())
        } else {
            HashMap::new()
        };
        Reach {
            access: access.clone(),
            tls_ports,
        }
    }

    /// The link to `node`, named by the address the cluster announces for it, over its TLS
    /// port where the cluster gives one. Error: an address that is not `host:port`.
    pub(crate) fn link(&self, node: &ClusterNode) -> Result<Link> {
        let mut link = match (self.tls_ports.get(&node.id), node.address.rsplit_once(':')) {
            (Some(port), Some((host, _))) => self.access.at(&format!("{host}:{port}"))?,
            _ => self.access.at(&node.address)?,
        };
        link.address = node.address.clone();
        Ok(link)
    }
}

/// Each node's TLS port by node id, from `CLUSTER SHARDS` on the node at `link` (Redis 7.0 and
/// later, Valkey); empty where the server has no such command or gives no `tls-port`.
fn tls_ports(link: &Link) -> HashMap<String, u16> {
    let mut ports = HashMap::new();
    let Ok(mut con) = link.connect() else {
        return ports;
    };
    let Ok(shards) = con.run(&["CLUSTER", "SHARDS"]) else {
        return ports;
    };
    for shard in items(&shards).unwrap_or_default() {
        let Ok(nodes) = field(shard, "nodes").and_then(items) else {
            continue;
        };
        for node in nodes {
            let id = field(node, "id").and_then(crate::reply::text);
            let port = field(node, "tls-port").and_then(crate::reply::int);
            if let (Ok(id), Ok(port)) = (id, port) {
                if let Ok(port) = u16::try_from(port) {
                    ports.insert(id, port);
                }
            }
        }
    }
    ports
}

/// `CLUSTER NODES` on `con`, parsed.
pub(crate) fn nodes_on(con: &mut NodeConnection) -> Result<Vec<ClusterNode>> {
    let text = con.text(&["CLUSTER", "NODES"])?;
    parse_cluster_nodes(&text).map_err(|e| anyhow!("{}: {e}", con.address()))
}

/// Every slot `node` serves, ascending.
pub(crate) fn slots_of(node: &ClusterNode) -> Vec<u16> {
    node.slots.iter().flat_map(|&(a, b)| a..=b).collect()
}

/// The masters and their slots as one node's `CLUSTER NODES` lists them, sorted: what all
/// nodes must agree on.
fn table(nodes: &[ClusterNode]) -> Vec<(String, Vec<u16>)> {
    let mut t: Vec<(String, Vec<u16>)> = nodes
        .iter()
        .filter(|n| n.has("master"))
        .map(|n| (n.address.clone(), slots_of(n)))
        .collect();
    t.sort();
    t
}

/// The first slot `node` has open as a finding on `address` (`seed_view` names its peer).
fn open_slot(address: &str, node: &ClusterNode, seed_view: &[ClusterNode]) -> Option<Finding> {
    open_slots(address, node, seed_view).into_iter().next()
}

/// Every slot `node` has open (its line's `[slot->-peer]` and `[slot-<-peer]`), as findings
/// on `address` by slot; `seed_view` names the peer (its id where it lists no such node).
fn open_slots(address: &str, node: &ClusterNode, seed_view: &[ClusterNode]) -> Vec<Finding> {
    let mut open: Vec<(u16, &String, bool)> = node
        .migrating
        .iter()
        .map(|(s, p)| (*s, p, false))
        .chain(node.importing.iter().map(|(s, p)| (*s, p, true)))
        .collect();
    open.sort_by_key(|(s, _, _)| *s);
    open.into_iter()
        .map(|(slot, peer, importing)| Finding::OpenSlot {
            slot,
            node: address.to_string(),
            importing,
            peer: Some(
                seed_view
                    .iter()
                    .find(|n| n.id == *peer)
                    .map_or_else(|| peer.clone(), |n| n.address.clone()),
            ),
        })
        .collect()
}

/// Why a prediction must not run on the cluster the seed sees as `seed_view`, given every
/// node's own view (`views`: address, its `CLUSTER NODES`): a node flagged failing, in
/// handshake or without an address; a slot migrating or importing (a node lists its own open
/// slots only, on its `myself` line); a node whose masters or slot table differ from the
/// seed's. `None` when it may run.
pub(crate) fn refusal(
    seed_view: &[ClusterNode],
    views: &[(String, Vec<ClusterNode>)],
) -> Option<Finding> {
    for n in seed_view {
        if let Some(flag) = n.failing_flag() {
            return Some(Finding::Flagged {
                node: n.address.clone(),
                id: n.id.clone(),
                flag: flag.to_string(),
                master: n.has("master"),
            });
        }
        if let Some(open) = open_slot(&n.address, n, seed_view) {
            return Some(open);
        }
    }
    let mine = table(seed_view);
    for (address, theirs) in views {
        if let Some(open) = myself(theirs).and_then(|me| open_slot(address, me, seed_view)) {
            return Some(open);
        }
        if table(theirs) != mine {
            return Some(Finding::Disagree {
                node: address.clone(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_open_slots_of_a_node() {
        let nodes = parse_cluster_nodes(
            "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 \
             connected 0-2 7 [9->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1] \
             [4-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]",
        )
        .unwrap();
        assert_eq!(slots_of(&nodes[0]), vec![0, 1, 2, 7]);
        let Some(Finding::OpenSlot {
            slot, importing, ..
        }) = open_slot("127.0.0.1:30001", &nodes[0], &nodes)
        else {
            panic!("slot 4 is open");
        };
        assert_eq!((slot, importing), (4, true));
    }

    /// Three masters as node A sees them (its own line `myself`); `extra` is appended to B's
    /// line, `flags_c` replaces C's flags.
    fn view(myself: char, extra_b: &str, flags_c: &str) -> Vec<ClusterNode> {
        let line = |c: char, port: u16, flags: &str, slots: &str| {
            let id = c.to_string().repeat(40);
            let flags = if c == myself {
                format!("myself,{flags}")
            } else {
                flags.to_string()
            };
            format!("{id} 127.0.0.1:{port}@1{port} {flags} - 0 0 1 connected {slots}\n")
        };
        let text = line('a', 30001, "master", "0-5460")
            + &line('b', 30002, "master", &format!("5461-10922{extra_b}"))
            + &line('c', 30003, flags_c, "10923-16383");
        parse_cluster_nodes(&text).unwrap()
    }

    #[test]
    fn unhealthy_or_disagreeing_clusters_are_refused() {
        let seed = view('a', "", "master");
        let same = vec![
            ("127.0.0.1:30002".to_string(), view('b', "", "master")),
            ("127.0.0.1:30003".to_string(), view('c', "", "master")),
        ];
        assert_eq!(refusal(&seed, &same), None);
        // A failing node, as the seed sees it.
        let failing = view('a', "", "master,fail?");
        let why = refusal(&failing, &[]).unwrap().to_string();
        assert!(
            why.contains("127.0.0.1:30003") && why.contains("`fail?`"),
            "{why}"
        );
        // A node that sees a slot of its own migrating (only it lists that).
        let migrating = vec![(
            "127.0.0.1:30002".to_string(),
            view(
                'b',
                " [6000->-cccccccccccccccccccccccccccccccccccccccc]",
                "master",
            ),
        )];
        let why = refusal(&seed, &migrating).unwrap().to_string();
        assert!(
            why.starts_with("slot 6000 of 127.0.0.1:30002 is migrating"),
            "{why}"
        );
        // A node whose view of the slots differs from the seed's.
        let mut other = view('c', "", "master");
        other[1].slots = vec![(5461, 10900)];
        let why = refusal(&seed, &[("127.0.0.1:30003".to_string(), other)])
            .unwrap()
            .to_string();
        assert!(
            why.starts_with("127.0.0.1:30003 and the seed disagree"),
            "{why}"
        );
    }
}
