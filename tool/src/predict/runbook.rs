//! What the operator runs to carry out the predicted plan: the `redis-cli --cluster` commands
//! in order, with the node ids they take, and what each does to the cluster besides moving
//! slots (a drained master turns into a replica).

use super::change::MasterChange;
use crate::cluster::link::Access;
use crate::cluster::topology::LiveCluster;
use ringslot_engine::change::DEFAULT_THRESHOLD;

/// The commands that carry out `change` on the cluster of `topo`, run against `seed` (the node
/// the prediction read: redis-cli loads the masters in its order, which decides ties), and
/// the notes that go with them. `atomic`: Valkey 9's atomic slot migration, by `valkey-cli`.
/// A joining master's id is read from it (`CLUSTER MYID`, a read) when it answers, else left
/// for the operator to fill in.
pub(crate) fn runbook(
    change: &MasterChange,
    topo: &LiveCluster,
    access: &Access,
    seed: &str,
    atomic: bool,
) -> (Vec<String>, Vec<String>) {
    let cli = if atomic { "valkey-cli" } else { "redis-cli" };
    let atomic_flag = if atomic {
        " --cluster-use-atomic-slot-migration"
    } else {
        ""
    };
    let id_of = |address: &str| -> Option<String> {
        topo.nodes
            .iter()
            .find(|n| n.address == address)
            .map(|n| n.id.clone())
    };
    let mut commands = Vec::new();
    let mut notes = Vec::new();
    match change {
        MasterChange::Add { nodes, weight } => {
            for n in nodes {
                commands.push(format!("{cli} --cluster add-node {n} {seed}"));
            }
            let mut weights = String::new();
            if let Some(w) = weight.filter(|w| *w != 1) {
                weights.push_str(" --cluster-weight");
                for n in nodes {
                    let id = access
                        .at(n)
                        .and_then(|link| Ok(link.connect()?.text(&["CLUSTER", "MYID"])?))
                        .unwrap_or_else(|_| format!("<id of {n}: CLUSTER MYID on it>"));
                    weights.push_str(&format!(" {id}={w}"));
                }
            }
            commands.push(format!(
                "{cli} --cluster rebalance {seed} --cluster-use-empty-masters{weights}{atomic_flag}"
            ));
            notes.push(
                "redis-cli pairs the masters in the order it loads them from the node it runs \
                 against, which for masters not added yet is unknown: the slots each master \
                 gives are as predicted, which new master takes which may differ. For the \
                 exact moves, add-node first and predict again with --rebalance."
                    .to_string(),
            );
        }
        MasterChange::Del { nodes } => {
            let ids: Vec<(String, String)> = nodes
                .iter()
                .map(|n| {
                    (
                        n.clone(),
                        id_of(n).unwrap_or_else(|| format!("<id of {n}>")),
                    )
                })
                .collect();
            let weights: Vec<String> = ids.iter().map(|(_, id)| format!("{id}=0")).collect();
            commands.push(format!(
                "{cli} --cluster rebalance {seed} --cluster-weight {}{atomic_flag}",
                weights.join(" ")
            ));
            for (_, id) in &ids {
                commands.push(format!("{cli} --cluster del-node {seed} {id}"));
            }
            notes.push(
                "A drained master turns into a replica of the master that took its last slot \
                 (cluster-allow-replica-migration, yes by default); del-node then removes it \
                 as a replica. To keep it a master until it is removed, run CONFIG SET \
                 cluster-allow-replica-migration no on it first."
                    .to_string(),
            );
        }
        MasterChange::Rebalance { threshold } => {
            let t = if (*threshold - DEFAULT_THRESHOLD).abs() > f64::EPSILON {
                format!(" --cluster-threshold {threshold}")
            } else {
                String::new()
            };
            commands.push(format!(
                "{cli} --cluster rebalance {seed} --cluster-use-empty-masters{t}{atomic_flag}"
            ));
        }
    }
    notes.push(format!(
        "Add the connection options you use with {cli} (-a/--user, --tls --cacert ...). \
         `{cli} --cluster rebalance ... --cluster-simulate` prints the same moves without \
         making them."
    ));
    (commands, notes)
}
