//! What the operator should know before running either plan, a sentence each, the worst first:
//! the nodes that would cross their limits (and what that does under their policy), the big
//! keys a plan moves (and how long they hold their masters), the nodes with no limit but their
//! host's RAM, the replicas, and the nodes whose memory could not be read.

use super::capacity::{Capacity, NodeCapacity, Verdict};
use super::nodes::NodeReads;
use super::options::Options;
use super::prediction::Prediction;
use super::report::mib;
use crate::plan::WeightBy;

/// The soft limit of `client-output-buffer-limit replica` by default (64 MiB for 60 s; 256 MiB
/// hard): a `RESTORE` payload past it can disconnect a replica, which then resyncs in full.
const REPLICA_BUFFER_SOFT: f64 = 64.0 * 1024.0 * 1024.0;

/// `proto-max-bulk-len` by default (512 MB): a `RESTORE` payload past it is refused.
const PROTO_MAX_BULK_LEN: f64 = 512.0 * 1024.0 * 1024.0;

/// `cluster-node-timeout` by default, seconds: a master that holds its main thread past it is
/// taken for failed and its replica promoted (the tool cannot read the setting without
/// `+config|get`).
const CLUSTER_NODE_TIMEOUT: f64 = 15.0;

/// The risks of `p`, whose nodes stand as `capacity` says.
pub(crate) fn risks(
    p: &Prediction,
    capacity: &Capacity,
    opts: &Options,
    reads: &NodeReads,
) -> Vec<String> {
    let mut out = Vec::new();
    let pct = capacity.headroom * 100.0;
    for n in capacity
        .nodes
        .iter()
        .filter(|n| n.worst() == Verdict::Crosses)
    {
        out.push(crossing(n, "past its limit", pct));
    }
    for n in capacity
        .nodes
        .iter()
        .filter(|n| n.worst() == Verdict::InMargin)
    {
        out.push(crossing(
            n,
            "past its limit less the headroom (apply refuses such a plan)",
            pct,
        ));
    }
    let atomic = p.methods.len() > 1;
    for k in &p.big_keys {
        let ms = |s: f64| format!("{:.0} ms", s * 1000.0);
        let moved = if k.moved_by.is_empty() {
            "no plan moves it".to_string()
        } else {
            format!("moved by {}", k.moved_by.join(" and "))
        };
        let mut line = format!(
            "Big key `{}` (slot {}, {} {} of {} elements or bytes, {} by MEMORY USAGE SAMPLES 5, \
             about {} by DUMP) on {}: its MIGRATE would hold {} about {} and its target about \
             {}; {moved}.",
            k.key,
            k.slot,
            k.kind,
            k.encoding,
            k.length,
            mib(k.memory),
            mib(k.dump),
            k.master,
            k.master,
            ms(k.hold_source),
            ms(k.hold_target)
        );
        if k.hold_source > opts.max_hold {
            if let Some(c) = &p.by_weight {
                if c.pinned.contains(&k.slot) {
                    line.push_str(&format!(
                        " Past --max-hold ({}): the plan by {} leaves its slot where it is \
                         (--move-big-keys moves it).",
                        ms(opts.max_hold),
                        c.plan.by.name()
                    ));
                } else if c.plan.by == WeightBy::Slots
                    && c.plan.moves.iter().any(|m| m.slot == k.slot)
                {
                    line.push_str(&format!(
                        " Past --max-hold ({}): the plan by slots is redis-cli's own and moves \
                         its slot all the same (apply moves the key alone).",
                        ms(opts.max_hold)
                    ));
                }
            }
        }
        if k.hold_source > CLUSTER_NODE_TIMEOUT / 3.0 {
            line.push_str(&format!(
                " That is a third or more of the default cluster-node-timeout ({CLUSTER_NODE_TIMEOUT:.0} \
                 s): a master held past its timeout is taken for failed and failed over."
            ));
        }
        if k.dump > PROTO_MAX_BULK_LEN {
            line.push_str(
                " Its payload passes the default proto-max-bulk-len (512 MB): the target refuses \
                 its RESTORE.",
            );
        }
        if k.dump > REPLICA_BUFFER_SOFT {
            line.push_str(
                " Its payload passes the replicas' default output buffer soft limit (64 MiB): \
                 a replica of the target may be disconnected and resync in full (a fork and an \
                 RDB).",
            );
        }
        if atomic && !k.moved_by.is_empty() {
            line.push_str(
                " Every master has Valkey 9: --atomic sends big collections in pieces instead \
                 of one RESTORE.",
            );
        }
        out.push(line);
    }
    let unlimited: Vec<&NodeCapacity> = capacity
        .nodes
        .iter()
        .filter(|n| n.limit_is_ram && n.worst() == Verdict::Fits)
        .collect();
    if !unlimited.is_empty() {
        let names: Vec<&str> = unlimited
            .iter()
            .map(|n| n.memory.address.as_str())
            .collect();
        out.push(format!(
            "{} without maxmemory ({}): nothing bounds them but their host's RAM ({}, shared \
             by every node on it); their peaks stay under it, which is not to say they are safe: \
             other processes share that RAM.",
            plural(names.len(), "node"),
            names.join(", "),
            mib(unlimited.first().map_or(0.0, |n| n.limit))
        ));
    }
    if !reads.replicas.is_empty() {
        out.push(format!(
            "{}: each grows with its master and does not evict on its own; the table below \
             judges each against its own limit.",
            plural(reads.replicas.len(), "replica")
        ));
    }
    if !reads.unknown.is_empty() {
        out.push(format!(
            "The memory of {} could not be read ({}): {} not judged.",
            reads.unknown.join(", "),
            reads.note.as_deref().unwrap_or("no answer"),
            if reads.unknown.len() == 1 {
                "its limit is"
            } else {
                "their limits are"
            }
        ));
    }
    if out.is_empty() {
        out.push(format!(
            "Nothing found that should stop either plan: every node stays under its limit less \
             {pct:.0}% and no big key moves."
        ));
    }
    out
}

/// The sentence of a node whose peak is past its limit (`how`).
fn crossing(n: &NodeCapacity, how: &str, pct: f64) -> String {
    let plans: Vec<String> = n
        .peaks
        .iter()
        .filter(|p| p.verdict != Verdict::Fits)
        .map(|p| format!("{} {} ({})", p.plan, p.method.short(), mib(p.peak)))
        .collect();
    let limit = if n.limit_is_ram {
        format!("the host's RAM of {}", mib(n.limit))
    } else {
        format!("maxmemory {} ({})", mib(n.limit), n.memory.policy.name())
    };
    let role = match &n.replica_of {
        Some(m) => format!("replica of {m}"),
        None => "master".to_string(),
    };
    format!(
        "**{}** ({role}, {} now) would end {how} ({limit}, {pct:.0}% kept free) under: {}. \
         There, {}.",
        n.memory.address,
        mib(n.memory.used),
        plans.join("; "),
        n.consequence()
    )
}

/// "1 node", "3 nodes".
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
