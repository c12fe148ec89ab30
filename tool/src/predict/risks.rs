//! What the operator should know before running either plan, the worst first, as typed findings
//! ([`Risk`], in [`super::risk`]; the report says them in words, `--json` gives them as they are):
//! the nodes a plan would take past their limits (by the one memory model's walk, the same that
//! `apply` refuses a plan by), the masters full now that the plans relieve, the big keys a plan
//! moves (and how long they hold their masters), the nodes with no limit but their host's RAM, the
//! replicas, and the nodes whose memory could not be read.

use super::capacity::Capacity;
use super::nodes::NodeReads;
use super::options::Options;
use super::prediction::Prediction;
use super::risk::{PlanEnd, PlanJudgement, Risk, CLUSTER_NODE_TIMEOUT, PROTO_MAX_BULK_LEN};
use crate::cluster::budget::{Fit, Held, Judgement, DEFAULT_REPLICA_BUFFER_SOFT};
use crate::plan::WeightBy;

/// The risks of `p`, whose nodes stand as `capacity` says.
pub(crate) fn risks(
    p: &Prediction,
    capacity: &Capacity,
    opts: &Options,
    reads: &NodeReads,
) -> Vec<Risk> {
    let mut limits = limit_risks(capacity);
    // The worst first: past the limit, then within the margin.
    limits.sort_by_key(|r| match r {
        Risk::Limit { under, .. } => std::cmp::Reverse(
            under
                .iter()
                .map(|u| u.judgement.fit)
                .max()
                .unwrap_or(Fit::Fits),
        ),
        _ => std::cmp::Reverse(Fit::Fits),
    });
    let mut out = limits;
    out.extend(full_risks(capacity));
    out.extend(big_key_risks(p, opts));
    let unlimited: Vec<&Judgement> = capacity
        .standing
        .iter()
        .filter(|j| {
            matches!(j.held, Held::HostRam { .. })
                && capacity.worst(&j.node).is_none_or(|f| f == Fit::Fits)
        })
        .collect();
    if !unlimited.is_empty() {
        out.push(Risk::HostRamOnly {
            nodes: unlimited.iter().map(|j| j.node.clone()).collect(),
            system: unlimited.first().map_or(0.0, |j| j.limit),
        });
    }
    if !reads.replicas.is_empty() {
        out.push(Risk::Replicas {
            count: reads.replicas.len(),
        });
    }
    if !reads.unknown.is_empty() {
        out.push(Risk::Unread {
            nodes: reads.unknown.clone(),
            note: reads.note.clone(),
        });
    }
    out
}

/// A [`Risk::Limit`] for each node some plan takes past its limit less the headroom.
fn limit_risks(capacity: &Capacity) -> Vec<Risk> {
    let mut nodes: Vec<String> = Vec::new();
    for w in &capacity.walks {
        for n in &w.walk.nodes {
            let bad = n.worst.as_ref().is_some_and(|j| j.fit != Fit::Fits);
            if bad && !nodes.contains(&n.address) {
                nodes.push(n.address.clone());
            }
        }
    }
    nodes
        .into_iter()
        .map(|node| Risk::Limit {
            under: capacity
                .walks
                .iter()
                .filter_map(|w| {
                    let j = w.walk.node(&node)?.worst.clone()?;
                    (j.fit != Fit::Fits).then(|| PlanJudgement {
                        plan: w.plan.clone(),
                        method: w.walk.method,
                        judgement: j,
                    })
                })
                .collect(),
            node,
        })
        .collect()
}

/// A [`Risk::Full`] for each master at or past its limit less the headroom now.
fn full_risks(capacity: &Capacity) -> Vec<Risk> {
    capacity
        .standing
        .iter()
        .filter(|j| {
            j.replica_of.is_none() && j.fit != Fit::Fits && matches!(j.held, Held::Maxmemory { .. })
        })
        .map(|j| Risk::Full {
            judgement: j.clone(),
            ends: capacity
                .walks
                .iter()
                .filter_map(|w| {
                    let n = w.walk.node(&j.node)?;
                    Some(PlanEnd {
                        plan: w.plan.clone(),
                        method: w.walk.method,
                        end: n.end,
                        fill: n.fills()?.2,
                    })
                })
                .collect(),
            evicting: j.fit == Fit::Crosses && j.evicts(),
        })
        .collect()
}

/// A [`Risk::BigKey`] for each big key met.
fn big_key_risks(p: &Prediction, opts: &Options) -> Vec<Risk> {
    let atomic = p.methods.len() > 1;
    p.big_keys
        .iter()
        .map(|k| {
            let past_hold = k.hold_source > opts.max_hold;
            let weight = p.by_weight.as_ref();
            let pinned_by = weight
                .filter(|c| past_hold && c.pinned.contains(&k.slot))
                .map(|c| c.plan.by.name().to_string());
            let moved_by_slots = weight.is_some_and(|c| {
                past_hold
                    && c.plan.by == WeightBy::Slots
                    && c.plan.moves.iter().any(|m| m.slot == k.slot)
            });
            Risk::BigKey {
                key: k.key.clone(),
                slot: k.slot,
                pinned_by,
                moved_by_slots,
                past_node_timeout: k.hold_source > CLUSTER_NODE_TIMEOUT / 3.0,
                past_bulk_len: k.dump > PROTO_MAX_BULK_LEN,
                past_replica_buffer: k.dump > DEFAULT_REPLICA_BUFFER_SOFT,
                atomic_sends_pieces: atomic && !k.moved_by.is_empty(),
            }
        })
        .collect()
}
