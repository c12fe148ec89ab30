//! A live Redis Cluster as `CLUSTER NODES` describes it (the format of the Redis Cluster
//! specification, "CLUSTER NODES output format"): its nodes, which are masters, which slots
//! each serves, and which slots are open (migrating or importing); and the ring that mirrors
//! it (`RING.MIRROR`), made or refreshed from that description.

use super::error::EngineError;
use super::flavour::Flavour;
use super::keyslot::SLOT_COUNT;
use super::topology::{Limits, Topology};
use std::collections::HashSet;

/// One node of a `CLUSTER NODES` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// The node id (40 hex characters).
    pub id: String,
    /// `ip:port`, as `CLUSTER SLOTS` names the node (the address before `@cport`).
    pub address: String,
    /// Its flags: `myself`, `master`, `slave`, `fail?`, `fail`, `handshake`, `noaddr`, ...
    pub flags: Vec<String>,
    /// A replica's master (its node id); `None` for a master (`-`).
    pub master: Option<String>,
    /// The slots it serves, as inclusive ranges.
    pub slots: Vec<(u16, u16)>,
    /// Slots it is migrating away, with the id of the node they go to.
    pub migrating: Vec<(u16, String)>,
    /// Slots it is importing, with the id of the node they come from.
    pub importing: Vec<(u16, String)>,
}

/// The flags of a node that cannot serve: failing (`fail`, `fail?`), in handshake, or without
/// an address. `redis-cli --cluster` leaves such nodes out, and neither a prediction nor a
/// rebalance may run while one is listed.
pub const FAILING_FLAGS: [&str; 4] = ["fail", "fail?", "handshake", "noaddr"];

impl ClusterNode {
    /// Whether the node has the flag `flag`.
    pub fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// Whether this is the line of the node that answered (`myself`).
    pub fn is_myself(&self) -> bool {
        self.has("myself")
    }

    /// The first of [`FAILING_FLAGS`] the node has, if any.
    pub fn failing_flag(&self) -> Option<&'static str> {
        FAILING_FLAGS.into_iter().find(|f| self.has(f))
    }

    /// Whether the node is a master that can serve: flagged `master`, and none of
    /// [`FAILING_FLAGS`]. `redis-cli --cluster` leaves the others out too.
    pub fn is_master(&self) -> bool {
        self.has("master") && self.failing_flag().is_none()
    }

    /// A short form of its id (the first 8 characters), as messages name a node.
    pub fn short_id(&self) -> &str {
        self.id.get(..8).unwrap_or(&self.id)
    }

    /// Whether the node serves `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }
}

/// The line of the node that answered (flagged `myself`) in a parsed `CLUSTER NODES`.
pub fn myself(nodes: &[ClusterNode]) -> Option<&ClusterNode> {
    nodes.iter().find(|n| n.is_myself())
}

/// Parses a `CLUSTER NODES` reply. Error: a line that is not a node line.
pub fn parse_cluster_nodes(text: &str) -> Result<Vec<ClusterNode>, EngineError> {
    let bad = || EngineError::Corrupt("not a CLUSTER NODES reply");
    let slot = |s: &str| {
        s.parse::<u16>()
            .ok()
            .filter(|&n| usize::from(n) < SLOT_COUNT)
    };
    let mut nodes = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(id), Some(addr), Some(flags)) = (fields.first(), fields.get(1), fields.get(2))
        else {
            return Err(bad());
        };
        let mut node = ClusterNode {
            id: id.to_string(),
            address: addr.split('@').next().unwrap_or_default().to_string(),
            flags: flags.split(',').map(str::to_string).collect(),
            master: fields.get(3).filter(|m| **m != "-").map(|m| m.to_string()),
            slots: Vec::new(),
            migrating: Vec::new(),
            importing: Vec::new(),
        };
        for spec in fields.iter().skip(8) {
            if let Some(open) = spec.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                if let Some((s, to)) = open.split_once("->-") {
                    node.migrating
                        .push((slot(s).ok_or_else(bad)?, to.to_string()));
                } else if let Some((s, from)) = open.split_once("-<-") {
                    node.importing
                        .push((slot(s).ok_or_else(bad)?, from.to_string()));
                }
                continue;
            }
            let (a, b) = spec.split_once('-').unwrap_or((spec, spec));
            let (a, b) = (slot(a).ok_or_else(bad)?, slot(b).ok_or_else(bad)?);
            if a > b {
                return Err(bad());
            }
            node.slots.push((a, b));
        }
        nodes.push(node);
    }
    Ok(nodes)
}

/// The owner (`ip:port`) of every slot as `nodes` (a parsed `CLUSTER NODES`) lists the
/// masters' slots: `SLOT_COUNT` entries, `None` for a slot no master serves.
pub fn slot_owners(nodes: &[ClusterNode]) -> Vec<Option<String>> {
    let mut owners = vec![None; SLOT_COUNT];
    for n in nodes.iter().filter(|n| n.has("master")) {
        for &(a, b) in &n.slots {
            for slot in a..=b {
                if let Some(o) = owners.get_mut(usize::from(slot)) {
                    *o = Some(n.address.clone());
                }
            }
        }
    }
    owners
}

/// The options of a mirror (`RING.MIRROR`'s `COMPAT`, `VNODES`, `HASHTAG`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MirrorOptions {
    /// The flavour of a new mirror.
    pub flavour: Flavour,
    /// Its `VNODES` (the flavour's default when `None`).
    pub vnodes: Option<i64>,
    /// Whether members hash by their hash tag.
    pub hashtag: bool,
    /// Whether any option was given (a refresh without options keeps the mirror's).
    pub given: bool,
}

/// A ring that mirrors a cluster, and what changed from the ring it replaces.
#[derive(Debug, Clone)]
pub struct Mirror {
    /// The ring: the masters as nodes (weight 1 for new ones), the live slot table.
    pub topology: Topology,
    /// Whether there was no ring before.
    pub created: bool,
    /// Masters that are new to the ring, in order.
    pub added: Vec<Vec<u8>>,
    /// Nodes of the old ring that are no longer masters, in order.
    pub removed: Vec<Vec<u8>>,
    /// Slots whose owner changed (every served slot for a new mirror).
    pub slots_changed: usize,
    /// Slot ranges no master serves (left unassigned).
    pub unserved: Vec<(u16, u16)>,
}

/// The masters of `nodes` in the order `redis-cli --cluster` loads them when run against the
/// node marked `myself` (`clusterManagerLoadInfoFromNode` in redis-cli.c: that node first,
/// then the others in `CLUSTER NODES` order, failing and handshaking ones left out, see
/// [`ClusterNode::is_master`]); an address listed twice (a node that rejoined under a new id)
/// counts once. A rebalance breaks ties of balance by this order.
pub fn masters_in_load_order(nodes: &[ClusterNode]) -> Vec<&ClusterNode> {
    let mut masters: Vec<&ClusterNode> = Vec::new();
    for n in nodes.iter().filter(|n| n.is_master()) {
        if !masters.iter().any(|m| m.address == n.address) {
            masters.push(n);
        }
    }
    masters.sort_by_key(|n| !n.is_myself());
    masters
}

/// The ring that mirrors the cluster of `nodes` as the node marked `myself` sees it: its nodes
/// the masters ([`masters_in_load_order`]), named `ip:port` as `CLUSTER SLOTS` names them, its
/// slot table the live one. A new mirror (`old` is `None`) takes `options`; a refresh keeps
/// the old ring's configuration, its nodes' order and weights, drops the nodes that are no
/// longer masters and appends new masters with weight 1. Errors: options given that differ
/// from the old ring's (`MirrorOptions`), bad options, a ring past `limits` (checked before
/// any point is made), a slot two masters claim.
pub fn mirror(
    old: Option<&Topology>,
    nodes: &[ClusterNode],
    options: &MirrorOptions,
    limits: Limits,
) -> Result<Mirror, EngineError> {
    let masters = masters_in_load_order(nodes);
    let (config, mut list) = match old {
        Some(t) => {
            let c = t.config();
            let differs = options.flavour != c.flavour
                || options.vnodes.is_some_and(|v| v != i64::from(c.vnodes))
                // A flavour that always hashes by hash tag has it whether given or not.
                || (options.hashtag || options.flavour.always_hash_tags()) != c.hashtag;
            if options.given && differs {
                return Err(EngineError::MirrorOptions {
                    flavour: c.flavour.name(),
                    vnodes: c.vnodes,
                    hashtag: c.hashtag,
                });
            }
            let live: HashSet<&[u8]> = masters.iter().map(|m| m.address.as_bytes()).collect();
            let kept: Vec<(Vec<u8>, u32)> = t
                .nodes()
                .iter()
                .filter(|n| live.contains(n.name.as_slice()))
                .map(|n| (n.name.clone(), n.weight))
                .collect();
            (c, kept)
        }
        None => {
            let t = Topology::new(options.flavour, options.vnodes, options.hashtag)?;
            (t.config(), Vec::new())
        }
    };
    let known: HashSet<Vec<u8>> = list.iter().map(|(n, _)| n.clone()).collect();
    let added: Vec<Vec<u8>> = masters
        .iter()
        .map(|m| m.address.as_bytes().to_vec())
        .filter(|a| !known.contains(a))
        .collect();
    list.extend(added.iter().map(|a| (a.clone(), 1)));
    let removed: Vec<Vec<u8>> = old.map_or_else(Vec::new, |t| {
        t.nodes()
            .iter()
            .filter(|n| !masters.iter().any(|m| m.address.as_bytes() == n.name))
            .map(|n| n.name.clone())
            .collect()
    });
    let weights: Vec<u32> = list.iter().map(|(_, w)| *w).collect();
    Topology::check_planned_points(config.flavour, config.vnodes, &weights, limits)?;
    let mut ranges: Vec<(u16, u16, usize)> = Vec::new();
    for m in &masters {
        if let Some(i) = list.iter().position(|(n, _)| n == m.address.as_bytes()) {
            ranges.extend(m.slots.iter().map(|&(a, b)| (a, b, i)));
        }
    }
    // In slot order, as a stored ring lists them (a slot two masters claim, in a stale view,
    // is refused as corrupt).
    ranges.sort_unstable();
    let topology =
        Topology::from_parts(config.flavour, config.vnodes, config.hashtag, list, &ranges)?;
    let owner = |t: &Topology, s: u16| {
        t.slot_table()
            .owner(s)
            .and_then(|i| t.nodes().get(i))
            .map(|n| n.name.clone())
    };
    let unserved = topology.slot_table().unassigned();
    let slots_changed = match old {
        Some(t) => (0..SLOT_COUNT as u16)
            .filter(|&s| owner(t, s) != owner(&topology, s))
            .count(),
        None => {
            SLOT_COUNT
                - unserved
                    .iter()
                    .map(|&(a, b)| usize::from(b - a) + 1)
                    .sum::<usize>()
        }
    };
    Ok(Mirror {
        topology,
        created: old.is_none(),
        added,
        removed,
        slots_changed,
        unserved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_nodes_reply() {
        // The format of the Redis Cluster specification ("CLUSTER NODES output format"),
        // with an open slot each way.
        let text = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922 [10923-<-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 myself,master - 0 1426238318243 3 connected 10923-16383 [10923->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 master - 0 0 1 connected 0-5459
";
        let nodes = parse_cluster_nodes(text).unwrap();
        assert_eq!(nodes.len(), 4);
        // Each slot's owner, a slot no master serves (5460) none.
        let owners = slot_owners(&nodes);
        assert_eq!(owners.len(), SLOT_COUNT);
        assert_eq!(owners[0].as_deref(), Some("127.0.0.1:30001"));
        assert_eq!(owners[5460], None);
        assert_eq!(owners[10923].as_deref(), Some("127.0.0.1:30003"));
        assert_eq!(nodes[0].address, "127.0.0.1:30004");
        assert!(!nodes[0].is_master());
        assert!(nodes[2].has("myself") && nodes[2].is_master());
        assert_eq!(nodes[2].slots, vec![(10923, 16383)]);
        assert_eq!(nodes[2].migrating[0].0, 10923);
        assert_eq!(nodes[1].importing[0].0, 10923);
        assert!(nodes[1].serves(5461) && !nodes[1].serves(5460));
        assert!(parse_cluster_nodes("garbage").is_err());
        assert!(parse_cluster_nodes("a b c d e f g h 99999").is_err());
    }

    /// Three masters (the spec's example, each serving its third), one a replica, and this node
    /// (`myself`) listed third.
    const THREE: &str = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 myself,master - 0 1426238318243 3 connected 10923-16383
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 master - 0 0 1 connected 0-5459
";

    fn names(t: &Topology) -> Vec<&[u8]> {
        t.nodes().iter().map(|n| n.name.as_slice()).collect()
    }

    fn native() -> MirrorOptions {
        MirrorOptions {
            flavour: Flavour::Native,
            vnodes: Some(10),
            hashtag: false,
            given: true,
        }
    }

    #[test]
    fn a_new_mirror_lists_masters_as_redis_cli_loads_them() {
        let nodes = parse_cluster_nodes(THREE).unwrap();
        let m = mirror(None, &nodes, &native(), Limits::NONE).unwrap();
        // myself first, then CLUSTER NODES order; the replica left out.
        assert_eq!(
            names(&m.topology),
            vec![
                &b"127.0.0.1:30003"[..],
                b"127.0.0.1:30002",
                b"127.0.0.1:30001"
            ]
        );
        assert!(m.created);
        assert_eq!(m.added.len(), 3);
        assert!(m.removed.is_empty());
        // Slot 5460 is served by nobody in this view.
        assert_eq!(m.unserved, vec![(5460, 5460)]);
        assert_eq!(m.slots_changed, 16383);
        assert_eq!(
            m.topology.slot(b"x").1.map(<[u8]>::to_vec),
            Some(b"127.0.0.1:30003".to_vec()),
            "CLUSTER KEYSLOT x is 16287"
        );
        assert_eq!(m.topology.config().vnodes, 10);
    }

    #[test]
    fn a_refresh_keeps_order_weights_and_options() {
        let nodes = parse_cluster_nodes(THREE).unwrap();
        let first = mirror(None, &nodes, &native(), Limits::NONE)
            .unwrap()
            .topology;
        // The same mirror with 30001 at weight 3 (a RING.ADD would also rebalance the table).
        let mut parts: Vec<(Vec<u8>, u32)> = first
            .nodes()
            .iter()
            .map(|n| (n.name.clone(), n.weight))
            .collect();
        parts[2].1 = 3;
        let weighted = Topology::from_parts(
            Flavour::Native,
            10,
            false,
            parts,
            &first.slot_table().ranges(),
        )
        .unwrap();
        // 30002 fails over to a new master at 30005, which took its slots.
        let later = THREE
            .replace(
                "127.0.0.1:30002@31002 master",
                "127.0.0.1:30002@31002 master,fail",
            )
            .replace(
                "127.0.0.1:30004@31004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected",
                "127.0.0.1:30005@31005 master - 0 1426238317239 4 connected 5461-10922",
            )
            .replace("connected 5461-10922\n292f", "connected\n292f");
        let nodes = parse_cluster_nodes(&later).unwrap();
        let keep = MirrorOptions {
            given: false,
            ..native()
        };
        let m = mirror(Some(&weighted), &nodes, &keep, Limits::NONE).unwrap();
        assert_eq!(
            names(&m.topology),
            vec![
                &b"127.0.0.1:30003"[..],
                b"127.0.0.1:30001",
                b"127.0.0.1:30005"
            ]
        );
        assert_eq!(m.topology.nodes()[1].weight, 3, "weights kept");
        assert_eq!(m.added, vec![b"127.0.0.1:30005".to_vec()]);
        assert_eq!(m.removed, vec![b"127.0.0.1:30002".to_vec()]);
        assert_eq!(m.slots_changed, 10922 - 5461 + 1);
        assert!(!m.created);
        // Options that differ from the mirror's are refused; the same ones are fine.
        let ketama = MirrorOptions {
            flavour: Flavour::Ketama,
            vnodes: None,
            hashtag: false,
            given: true,
        };
        assert_eq!(
            mirror(Some(&weighted), &nodes, &ketama, Limits::NONE).unwrap_err(),
            EngineError::MirrorOptions {
                flavour: "native",
                vnodes: 10,
                hashtag: false
            }
        );
        assert!(mirror(Some(&weighted), &nodes, &native(), Limits::NONE).is_ok());
        // And the limits are checked before any point is made.
        let small = Limits {
            points: 20,
            nodes: u64::MAX,
        };
        assert!(matches!(
            mirror(None, &nodes, &native(), small),
            Err(EngineError::TooManyPoints { .. })
        ));
    }
}
