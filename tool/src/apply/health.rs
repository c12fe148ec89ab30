//! The checks `ringslot apply` makes between slots, and what stops it (a [`Finding`]): a node
//! flagged failing, a master of the plan that is no longer the master it was (a failover), a
//! master that says the cluster is not ok; a master the plan drains may turn replica, which is
//! no failover ([`drains`]).

use super::Prepared;
use crate::cluster::finding::Finding;
use crate::plan::SlotPlan;
use anyhow::Result;
use ringslot_engine::cluster::{myself, ClusterNode};
use std::time::Duration;

/// How often a run reads the seed's view (failing flags), every master's own view and their
/// `cluster_state`; whether the next move's two masters are still masters (a failover) is read
/// before every slot. A second is far below the time a cluster takes to flag a node failing
/// (`cluster-node-timeout`, 15 s by default), and reading everything before every slot cost
/// five round trips a slot where the move itself takes about nine.
pub(crate) const FULL_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Why a node's state stops a run (a failing node, a failover); `None` when it may go on.
/// `seed_view`: the seed's `CLUSTER NODES`; `own`: a master's own view, with the id it had
/// when the run began.
pub(super) fn unhealthy(
    seed_view: &[ClusterNode],
    own: &[(&str, &str, &[ClusterNode])],
) -> Option<Finding> {
    for n in seed_view {
        if let Some(flag) = n.failing_flag() {
            return Some(Finding::Flagged {
                node: n.address.clone(),
                id: n.short_id().to_string(),
                flag: flag.to_string(),
                master: n.has("master"),
            });
        }
    }
    for &(address, id, view) in own {
        let Some(me) = myself(view) else {
            return Some(Finding::Unlisted {
                node: address.to_string(),
            });
        };
        if me.id != id || !me.has("master") {
            return Some(Finding::Failover {
                node: address.to_string(),
                replica: !me.has("master"),
                id: me.short_id().to_string(),
            });
        }
    }
    None
}

/// Whether `plan` drains the master at `address` by its move `upto` (exclusive):
/// [`SlotPlan::drains`].
pub(super) fn drains(plan: &SlotPlan, address: &str, upto: usize) -> bool {
    plan.drains(address, upto)
}

impl Prepared {
    /// Re-reads the seed's and each master's own view; the reason the run must stop, if any.
    /// `next`: the index of the next move. A master the plan drains ([`drains`]) that serves
    /// no slot and has become a replica leaves the run: no failover.
    ///
    /// Whether the next move's two masters are still masters is read every time
    /// ([`Prepared::roles`]); the seed's view (failing flags), every master's own view (the
    /// same id, still a master) and `CLUSTER INFO` at most every [`FULL_CHECK_EVERY`] (on a
    /// cluster of 100 masters they would cost more than the move).
    pub(super) fn health(&mut self, next: usize) -> Result<Option<Finding>> {
        if !self.watch.full_check_due() {
            return self.roles(next);
        }
        self.watch.full_check(&mut self.masters, &self.plan)
    }

    /// Between full checks: whether the next move's (`next`) two masters are still masters
    /// (`INFO replication`, `role:`, sent to both before either answer is read). A failover
    /// demotes a live master (its `role:` turns `slave`); a dead one does not answer, which
    /// stops the run too; a node restarted at the address with another id broke the
    /// connection. Their `CLUSTER NODES` cost each server about 0.3 ms a call with a dozen
    /// nodes (`INFO commandstats` in `make bench-apply`), more than the move's `MIGRATE`: they
    /// are read once a second with the rest. The slot claims a move reads from a master's own
    /// view stay true meanwhile: only the move of a slot changes it, and a view read before
    /// that move saw its slot as the plan left it.
    fn roles(&mut self, next: usize) -> Result<Option<Finding>> {
        let Some(m) = self.plan.moves.get(next) else {
            return Ok(None);
        };
        const INFO: [&str; 2] = ["INFO", "replication"];
        let pair = [m.from.clone(), m.to.clone()];
        for address in &pair {
            self.masters.node(address)?.con.send(&INFO)?;
        }
        // Both answers read before either is judged: a connection keeps no reply behind.
        let answers: Vec<_> = pair
            .iter()
            .map(|a| self.masters.node(a).map(|n| n.con.receive(&INFO)))
            .collect();
        for (address, answer) in pair.iter().zip(answers) {
            let info = crate::reply::text(&answer??)?;
            let role = crate::reply::info_field(&info, "role").unwrap_or_default();
            if role != "master" {
                // `slave` (Redis, Valkey) or `replica`; anything else is no master either.
                let n = self.masters.node(address)?;
                return Ok(Some(Finding::Failover {
                    node: address.clone(),
                    replica: role == "slave" || role == "replica",
                    id: n.id.chars().take(8).collect(),
                }));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringslot_engine::cluster::parse_cluster_nodes;

    #[test]
    fn a_failover_or_a_failing_node_stops_a_run() {
        let seed = parse_cluster_nodes(
            "aaaa 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-100\n\
             bbbb 10.0.0.2:7000@17000 master - 0 0 2 connected 101-200\n",
        )
        .unwrap();
        let own_a =
            parse_cluster_nodes("aaaa 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-100\n")
                .unwrap();
        assert_eq!(unhealthy(&seed, &[("10.0.0.1:7000", "aaaa", &own_a)]), None);
        // The master at the address is now a replica (its replica took over).
        let demoted =
            parse_cluster_nodes("aaaa 10.0.0.1:7000@17000 myself,slave cccc 0 0 3 connected\n")
                .unwrap();
        let why = unhealthy(&seed, &[("10.0.0.1:7000", "aaaa", &demoted)])
            .unwrap()
            .to_string();
        assert!(
            why.contains("failover") && why.contains("a replica"),
            "{why}"
        );
        // Another node at the address.
        let why = unhealthy(&seed, &[("10.0.0.1:7000", "dddd", &own_a)])
            .unwrap()
            .to_string();
        assert!(why.contains("failover"), "{why}");
        // A node flagged failing.
        let failing = parse_cluster_nodes(
            "aaaa 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-100\n\
             bbbb 10.0.0.2:7000@17000 master,fail? - 0 0 2 connected 101-200\n",
        )
        .unwrap();
        let why = unhealthy(&failing, &[]).unwrap().to_string();
        assert!(
            why.contains("10.0.0.2:7000") && why.contains("fail?"),
            "{why}"
        );
    }
}
