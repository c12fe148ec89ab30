//! The change of masters a prediction is for, in the forms `RING.PLAN`, the engine and a
//! report take.

use anyhow::{bail, Result};
use ringslot_engine::Change;

/// The largest weight a joining master may have (redis-cli's weights are relative: the
/// engine's limit on a node's weight is far above any real use).
pub const MAX_WEIGHT: u32 = 1_000_000;

/// The change of masters to predict.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum MasterChange {
    /// Masters (`ip:port`) join with `weight` (redis-cli's default 1): each `add-node`d, then
    /// one rebalance.
    Add {
        nodes: Vec<String>,
        weight: Option<u32>,
    },
    /// Masters (`ip:port`) are drained in one rebalance and leave.
    Del { nodes: Vec<String> },
    /// The rebalance pending now, with redis-cli's `--cluster-threshold`.
    Rebalance { threshold: f64 },
}

impl MasterChange {
    /// Refuses what cannot be meant, before anything is read: a master named twice, a name
    /// that is not `host:port` with a port from 1 to 65535, a weight of 0 or above
    /// [`MAX_WEIGHT`] for joining masters, a threshold that is not a percentage.
    pub fn check(&self) -> Result<()> {
        let mut seen = std::collections::BTreeSet::new();
        for n in self.named() {
            let port = n
                .rsplit_once(':')
                .filter(|(host, _)| !host.is_empty())
                .and_then(|(_, port)| port.parse::<u16>().ok())
                .filter(|p| *p != 0);
            if port.is_none() {
                bail!("`{n}` is not a master's address: give it as ip:port (as CLUSTER NODES shows it)");
            }
            if !seen.insert(n.as_str()) {
                bail!("{n} is named twice");
            }
        }
        match self {
            MasterChange::Add {
                weight: Some(w), ..
            } if *w == 0 || *w > MAX_WEIGHT => {
                bail!("--weight must be from 1 to {MAX_WEIGHT} for joining masters (a master that leaves is named with --del)")
            }
            MasterChange::Rebalance { threshold }
                if !threshold.is_finite() || !(0.0..=100.0).contains(threshold) =>
            {
                bail!("--threshold is a percentage, from 0 to 100 (got {threshold})")
            }
            _ => Ok(()),
        }
    }

    /// The change as `RING.MOVES` / `RING.PLAN` take it (node lists in the count form, which
    /// no node name can end early).
    pub fn args(&self) -> Vec<String> {
        let nodes = |list: &[String]| {
            let mut a = vec!["NODES".to_string(), list.len().to_string()];
            a.extend(list.iter().cloned());
            a
        };
        match self {
            MasterChange::Add {
                nodes: list,
                weight,
            } => {
                let mut a = vec!["ADD".to_string()];
                if let Some(w) = weight {
                    a.extend(["WEIGHT".to_string(), w.to_string()]);
                }
                a.extend(nodes(list));
                a
            }
            MasterChange::Del { nodes: list } => {
                let mut a = vec!["DEL".to_string()];
                a.extend(nodes(list));
                a
            }
            MasterChange::Rebalance { threshold } => {
                vec![
                    "REBALANCE".to_string(),
                    "THRESHOLD".to_string(),
                    threshold.to_string(),
                ]
            }
        }
    }

    /// The change for the engine.
    pub fn change(&self) -> Change {
        let bytes = |list: &[String]| list.iter().map(|n| n.as_bytes().to_vec()).collect();
        match self {
            MasterChange::Add { nodes, weight } => Change::Add {
                nodes: bytes(nodes),
                weight: weight.map(i64::from),
            },
            MasterChange::Del { nodes } => Change::Del {
                nodes: bytes(nodes),
            },
            MasterChange::Rebalance { threshold } => Change::Rebalance {
                threshold: *threshold,
                weights: Vec::new(),
            },
        }
    }

    /// The masters the change names (none for a rebalance).
    pub fn named(&self) -> &[String] {
        match self {
            MasterChange::Add { nodes, .. } | MasterChange::Del { nodes } => nodes,
            MasterChange::Rebalance { .. } => &[],
        }
    }

    /// The change as a title says it.
    pub fn label(&self) -> String {
        match self {
            MasterChange::Add { nodes, weight } => {
                let w = weight.map_or(String::new(), |w| format!(" (weight {w})"));
                format!("{} joining{w}: {}", plural(nodes.len()), nodes.join(", "))
            }
            MasterChange::Del { nodes } => {
                format!("{} leaving: {}", plural(nodes.len()), nodes.join(", "))
            }
            MasterChange::Rebalance { threshold } => {
                format!("the pending rebalance (threshold {threshold}%)")
            }
        }
    }
}

/// "1 master", "3 masters".
fn plural(n: usize) -> String {
    if n == 1 {
        "1 master".to_string()
    } else {
        format!("{n} masters")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_as_ring_plan_takes_it() {
        let add = MasterChange::Add {
            nodes: vec!["10.0.0.4:6379".into(), "10.0.0.5:6379".into()],
            weight: Some(2),
        };
        assert_eq!(
            add.args(),
            vec![
                "ADD",
                "WEIGHT",
                "2",
                "NODES",
                "2",
                "10.0.0.4:6379",
                "10.0.0.5:6379"
            ]
        );
        assert_eq!(add.named().len(), 2);
        assert_eq!(
            add.change(),
            Change::Add {
                nodes: vec![b"10.0.0.4:6379".to_vec(), b"10.0.0.5:6379".to_vec()],
                weight: Some(2)
            }
        );
        let del = MasterChange::Del {
            nodes: vec!["10.0.0.1:6379".into()],
        };
        assert_eq!(del.args(), vec!["DEL", "NODES", "1", "10.0.0.1:6379"]);
        assert_eq!(del.label(), "1 master leaving: 10.0.0.1:6379");
        let pending = MasterChange::Rebalance { threshold: 2.0 };
        assert_eq!(pending.args(), vec!["REBALANCE", "THRESHOLD", "2"]);
        assert!(pending.named().is_empty());
    }
}
