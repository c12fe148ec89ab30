//! A live Redis Cluster as `CLUSTER NODES` describes it (the format of the Redis Cluster
//! specification, "CLUSTER NODES output format"): its nodes, which are masters, which slots
//! each serves, and which slots are open (migrating or importing).

use super::error::EngineError;
use super::keyslot::SLOT_COUNT;

/// One node of a `CLUSTER NODES` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// The node id (40 hex characters).
    pub id: String,
    /// `ip:port`, as `CLUSTER SLOTS` names the node (the address before `@cport`).
    pub address: String,
    /// Its flags: `myself`, `master`, `slave`, `fail?`, `fail`, `handshake`, `noaddr`, ...
    pub flags: Vec<String>,
    /// The slots it serves, as inclusive ranges.
    pub slots: Vec<(u16, u16)>,
    /// Slots it is migrating away, with the id of the node they go to.
    pub migrating: Vec<(u16, String)>,
    /// Slots it is importing, with the id of the node they come from.
    pub importing: Vec<(u16, String)>,
}

impl ClusterNode {
    /// Whether the node has the flag `flag`.
    pub fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// Whether the node is a master that can serve: not failing (`fail`, `fail?`), not in
    /// handshake, with an address. `redis-cli --cluster` leaves the others out too.
    pub fn is_master(&self) -> bool {
        self.has("master")
            && !["fail", "fail?", "handshake", "noaddr"]
                .iter()
                .any(|f| self.has(f))
    }

    /// Whether the node serves `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }
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
}
