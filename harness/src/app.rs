//! A cluster client as an application runs one, for the tests and benchmarks that move slots
//! under load: each command to its slot's owner, following `MOVED` and `ASK`, retrying
//! `TRYAGAIN`; any other error answer counted.

use crate::cluster::{cluster_nodes, owners, parse_cluster_nodes, Cluster};
use std::collections::HashMap;
use std::time::Duration;

/// A cluster client (see the module docs).
pub struct AppClient {
    /// A connection to each node, by address.
    pub cons: HashMap<String, redis::Connection>,
    /// Where it believes each slot is (learnt from `MOVED`).
    pub owner: Vec<String>,
    /// The error answers it met, as their text (`OOM command not allowed ...`).
    pub errors: Vec<String>,
    /// The redirections it followed.
    pub redirects: u64,
}

impl AppClient {
    /// A client of `cluster`, its slot table from node 0's `CLUSTER NODES`. Panics where a
    /// node does not answer (a test's cluster is broken).
    pub fn new(cluster: &Cluster) -> AppClient {
        let table = cluster_nodes(&cluster.nodes[0])
            .and_then(|t| parse_cluster_nodes(&t))
            .unwrap_or_else(|e| panic!("{e}"));
        AppClient {
            cons: cluster
                .nodes
                .iter()
                .map(|s| (s.address(), s.client()))
                .collect(),
            owner: owners(&table)
                .into_iter()
                .map(Option::unwrap_or_default)
                .collect(),
            errors: Vec::new(),
            redirects: 0,
        }
    }

    /// Runs `cmd` on the owner of `slot`, following redirections; its reply, or `None` after
    /// an error answer (in [`AppClient::errors`]).
    pub fn exec(&mut self, cmd: &redis::Cmd, slot: u16) -> Option<redis::Value> {
        let mut at = self
            .owner
            .get(usize::from(slot))
            .cloned()
            .unwrap_or_default();
        let mut asking = false;
        for _ in 0..1000 {
            let Some(con) = self.cons.get_mut(&at) else {
                self.errors.push(format!("no connection to {at:?}"));
                return None;
            };
            let reply = if asking {
                redis::pipe()
                    .cmd("ASKING")
                    .ignore()
                    .add_command(cmd.clone())
                    .query::<Vec<redis::Value>>(con)
                    .map(|mut v| v.pop().unwrap_or(redis::Value::Nil))
            } else {
                cmd.query::<redis::Value>(con)
            };
            asking = false;
            match reply {
                Ok(v) => return Some(v),
                Err(e) => {
                    let code = e.code().unwrap_or_default().to_string();
                    let target = e.redirect_node().map(|(a, _)| a.to_string());
                    match (code.as_str(), target) {
                        ("MOVED", Some(node)) => {
                            if let Some(o) = self.owner.get_mut(usize::from(slot)) {
                                o.clone_from(&node);
                            }
                            at = node;
                        }
                        ("ASK", Some(node)) => {
                            at = node;
                            asking = true;
                        }
                        ("TRYAGAIN", _) => {
                            std::thread::sleep(Duration::from_millis(2));
                            at = self
                                .owner
                                .get(usize::from(slot))
                                .cloned()
                                .unwrap_or_default();
                        }
                        _ => {
                            self.errors.push(format!("{e}"));
                            return None;
                        }
                    }
                    self.redirects += 1;
                }
            }
        }
        self.errors.push("over 1000 redirections".into());
        None
    }
}
