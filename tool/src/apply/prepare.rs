//! Before `ringslot apply` writes anything: the cluster read from the seed, every master the
//! plan names found, the cluster healthy, and where it stands in the plan
//! ([`super::position::position`]).

use super::door::{Masters, Node};
use super::health::{drains, unhealthy};
use super::pace::Pacing;
use super::position::position;
use super::watch::Watch;
use super::Prepared;
use crate::cluster::finding::{refuse, stop, Finding, Unreached};
use crate::cluster::link::Access;
use crate::cluster::snapshot::{Parts, Snapshot};
use crate::plan::SlotPlan;
use anyhow::{bail, Result};
use ringslot_engine::cluster::{myself, slot_owners, ClusterNode};
use std::collections::BTreeMap;
use std::time::Duration;

/// Reads the cluster from the seed and checks it against `plan`: every master the plan
/// names is a master of the cluster (joining masters `add-node`d first), the cluster is
/// healthy, and its state is one a run of the plan reaches (each lane at a move of its own).
/// Reads only.
pub(crate) fn prepare(access: &Access, plan: SlotPlan) -> Result<Prepared> {
    let mut snapshot = Snapshot::read(access, Parts::PLAN)?;
    let seed_view = snapshot.seed_view.clone();
    // A node flagged failing is not read: said as such before anything else.
    if let Some(why) = unhealthy(&seed_view, &[]) {
        return stop(
            why,
            "apply when the cluster is healthy (redis-cli --cluster check)".into(),
        );
    }
    let mut nodes = BTreeMap::new();
    let masters: Vec<String> = snapshot.masters().map(|n| n.node.address.clone()).collect();
    for address in masters {
        let Some(n) = snapshot.node(&address) else {
            continue;
        };
        // Its view is what the run needs here; its memory, where it was not read (`INFO`
        // refused), is asked for by the check of the run's permissions, and needed by the
        // check of its limits after that.
        let (view, link, id) = match &n.view {
            Some(view) => (view.clone(), n.link.clone(), n.node.id.clone()),
            None => bail!(n
                .why_unread()
                .unwrap_or_else(|| format!("{address}: not read"))),
        };
        // A node the seed still lists as a master that has become a replica (the news has
        // not reached the seed yet) is left out unless the plan moves slots to it: a source
        // drained by the plan, or failed over, which the position tells apart (a move from it
        // not done has no owner among the plan's masters).
        let master_itself = myself(&view).is_some_and(|m| m.has("master"));
        if !master_itself {
            if drains(&plan, &address, plan.moves.len()) {
                continue;
            }
            if !plan.moves.iter().any(|m| m.to == address) {
                refuse!(
                    "{address} is a replica by its own CLUSTER NODES while the seed lists it as \
                     a master (a failover under way?): apply when redis-cli --cluster check is \
                     clean"
                );
            }
        }
        let con = snapshot.connection(&address)?;
        nodes.insert(
            address,
            Node {
                link,
                id,
                con,
                view,
            },
        );
    }
    check_masters(&plan, &seed_view, &nodes)?;
    let own: Vec<(&str, &str, &[ClusterNode])> = nodes
        .iter()
        .map(|(a, n)| (a.as_str(), n.id.as_str(), n.view.as_slice()))
        .collect();
    if let Some(why) = unhealthy(&seed_view, &own) {
        return stop(
            why,
            "apply when the cluster is healthy (redis-cli --cluster check)".into(),
        );
    }
    let views: BTreeMap<String, Vec<ClusterNode>> = nodes
        .iter()
        .map(|(a, n)| (a.clone(), n.view.clone()))
        .collect();
    let position = position(&plan, &slot_owners(&seed_view), &views)
        .map_err(|why| Finding::Unreached { why })?;
    // The replicas of the plan's masters, which the run watches (healthy ones: a failing
    // replica stops the run at its first check anyway).
    let replicas = nodes
        .keys()
        .flat_map(|master| {
            snapshot
                .replicas_of(master)
                .map(|r| (r.node.address.clone(), r.link.clone(), master.clone()))
        })
        .collect();
    Ok(Prepared {
        plan,
        position,
        masters: Masters::new(nodes),
        access: access.clone(),
        watch: Watch::new(snapshot, replicas),
        pacing: Pacing::default(),
    })
}

/// Checks that every master `plan` names is one of the cluster's, `nodes` (the masters the
/// run reaches), and the node the plan was made on.
fn check_masters(
    plan: &SlotPlan,
    seed_view: &[ClusterNode],
    nodes: &BTreeMap<String, Node>,
) -> Result<()> {
    for address in plan.masters() {
        if nodes.contains_key(&address) {
            continue;
        }
        let is_target = plan.moves.iter().any(|m| m.to == address);
        if !is_target
            && seed_view
                .iter()
                .any(|n| n.address == address && !n.has("master"))
        {
            // A source that is a replica now: drained by the moves done (a master that loses
            // its last slot becomes a replica of the one that took it, Redis 7.0 and later with
            // cluster-allow-replica-migration), or failed over, which the position tells
            // apart (a move from it not done has no owner among the plan's masters).
            continue;
        }
        if seed_view.iter().any(|n| n.address == address) {
            refuse!(
                "{address}, a master when the plan was made, is not one now (a failover?): the \
                 plan's masters changed; once `redis-cli --cluster check` is clean, make a new \
                 plan"
            );
        }
        refuse!(
            "{address}, named by the plan, is not a master of the cluster: a joining master \
             is added first (redis-cli --cluster add-node {address} <seed>); a plan made on \
             another cluster does not apply here"
        );
    }
    // The plan's masters must be the nodes it was made on, not others at the same addresses.
    for (address, id) in &plan.ids {
        if let Some(now) = seed_view.iter().find(|n| n.address == *address) {
            if now.id != *id && plan.masters().contains(address) {
                refuse!(
                    "{address} is node {} now, where the plan was made on node {}: a cluster \
                     rebuilt on the same addresses, or a node replaced; make a new plan",
                    now.short_id(),
                    id.get(..8).unwrap_or(id)
                );
            }
        }
    }
    Ok(())
}

/// [`prepare`], read a second time a second later when the cluster's state is not one the
/// plan reaches because a slot is served elsewhere ([`Unreached::Changed`]): the masters'
/// views are read one after another, and a slot that changed owner between two reads (an
/// atomic job ending, gossip under way) looks like no state of the plan once. A state that is
/// truly foreign is refused both times.
pub(crate) fn prepare_settled(access: &Access, plan: SlotPlan) -> Result<Prepared> {
    let changed = |e: &anyhow::Error| {
        matches!(
            Finding::of(e),
            Some(Finding::Unreached {
                why: Unreached::Changed(_)
            })
        )
    };
    match prepare(access, plan.clone()) {
        Err(e) if changed(&e) => {
            std::thread::sleep(Duration::from_secs(1));
            prepare(access, plan)
        }
        other => other,
    }
}
