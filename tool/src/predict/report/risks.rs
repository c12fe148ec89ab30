//! "Before you run this": each of the prediction's risks ([`Risk`]) as a sentence, the worst
//! first.

use super::mib;
use crate::cluster::budget::{Fit, Judgement};
use crate::predict::prediction::Prediction;
use crate::predict::risk::{Risk, CLUSTER_NODE_TIMEOUT};
use crate::render::{consequence, held, role};

/// The sentences of `p`'s risks, a Markdown list item each.
pub(super) fn risks_list(p: &Prediction) -> String {
    let mut lines: Vec<String> = p.risks.iter().map(|r| sentence(p, r)).collect();
    if lines.is_empty() {
        let pct = p.capacity.as_ref().map_or(10.0, |c| c.headroom * 100.0);
        lines.push(format!(
            "Nothing found that should stop either plan: every node stays under its limit less \
             {pct:.0}% and no big key moves."
        ));
    }
    lines.iter().map(|l| format!("- {l}\n")).collect()
}

/// `92%` of its limit at that moment.
fn pct(j: &Judgement) -> String {
    format!("{:.0}%", 100.0 * j.fill())
}

/// One risk in words.
fn sentence(p: &Prediction, r: &Risk) -> String {
    match r {
        Risk::Limit { node, under } => {
            let Some(first) = under.first() else {
                return String::new();
            };
            let j = &first.judgement;
            let plans: Vec<String> = under
                .iter()
                .map(|u| {
                    format!(
                        "{} {} ({}, {}{}{})",
                        u.plan,
                        u.method.short(),
                        mib(u.judgement.would_reach),
                        pct(&u.judgement),
                        match u.judgement.slot {
                            Some(s) => format!(" with slot {s}"),
                            None => String::new(),
                        },
                        if u.judgement.fit == Fit::Crosses {
                            ", past the limit itself"
                        } else {
                            ""
                        }
                    )
                })
                .collect();
            format!(
                "**{node}** ({}, {} now) would pass its limit less the headroom ({}, {:.0}% kept \
                 free: {}) under: {}. `ringslot apply` refuses such a plan before its first \
                 write (redis-cli's rebalance does not look). Past its limit, {}.",
                role(j),
                mib(j.now),
                held(j),
                100.0 * j.headroom,
                mib(j.within()),
                plans.join("; "),
                consequence(j)
            )
        }
        Risk::Full {
            judgement: j,
            ends,
            evicting,
        } => {
            let ends: Vec<String> = ends
                .iter()
                .map(|e| {
                    format!(
                        "{} {} at {} ({:.0}%)",
                        e.plan,
                        e.method.short(),
                        mib(e.end),
                        100.0 * e.fill
                    )
                })
                .collect();
            let state = if *evicting {
                " It is past its maxmemory under an eviction policy: it evicts keys before every \
                 command, the run's and the clients' alike, until it is under; relieve it soon."
                    .to_string()
            } else if j.fit == Fit::Crosses {
                " It is past its maxmemory: it refuses the clients' writes with OOM until \
                 relieved."
                    .to_string()
            } else {
                String::new()
            };
            format!(
                "**{}** is at {} of its {} now, past its limit less the headroom: a rebalance \
                 must not bring it bytes, and may take them off it (MIGRATE is no denyoom \
                 command: a full source serves it; only a target's RESTORE is refused at its \
                 limit). It ends{}.{state}",
                j.node,
                pct(j),
                held(j),
                if ends.is_empty() {
                    " as it is".to_string()
                } else {
                    format!(" under {}", ends.join("; "))
                }
            )
        }
        Risk::BigKey {
            key,
            slot,
            pinned_by,
            moved_by_slots,
            past_node_timeout,
            past_bulk_len,
            past_replica_buffer,
            atomic_sends_pieces,
        } => big_key_sentence(
            p,
            key,
            *slot,
            pinned_by.as_deref(),
            *moved_by_slots,
            [
                *past_node_timeout,
                *past_bulk_len,
                *past_replica_buffer,
                *atomic_sends_pieces,
            ],
        ),
        Risk::HostRamOnly { nodes, system } => format!(
            "{} without maxmemory ({}): nothing bounds them but their host's RAM ({}, shared by \
             every node on it; total_system_memory ignores a container's memory limit); the \
             plans keep them under it, which is not to say they are safe: other processes \
             share that RAM.",
            plural(nodes.len(), "node"),
            nodes.join(", "),
            mib(*system)
        ),
        Risk::Replicas { count } => format!(
            "{}: each grows with its master and does not evict on its own; the table below \
             judges each against its own limit.",
            plural(*count, "replica")
        ),
        Risk::Unread { nodes, note } => format!(
            "The memory of {} could not be read ({}): {} not judged.",
            nodes.join(", "),
            note.as_deref().unwrap_or("no answer"),
            if nodes.len() == 1 {
                "its limit is"
            } else {
                "their limits are"
            }
        ),
    }
}

/// A big key's sentence: what moving it holds, and each limit it passes (`flags`: past the
/// node timeout's third, past `proto-max-bulk-len`, past the replicas' buffer, atomic sends
/// it in pieces).
fn big_key_sentence(
    p: &Prediction,
    key: &str,
    slot: u16,
    pinned_by: Option<&str>,
    moved_by_slots: bool,
    flags: [bool; 4],
) -> String {
    let Some(k) = p.big_keys.iter().find(|k| k.key == key && k.slot == slot) else {
        return format!("Big key `{key}` (slot {slot}).");
    };
    let ms = |s: f64| format!("{:.0} ms", s * 1000.0);
    let moved = if k.moved_by.is_empty() {
        "no plan moves it".to_string()
    } else {
        format!("moved by {}", k.moved_by.join(" and "))
    };
    let mut line = format!(
        "Big key `{}` (slot {}, {} {} of {} elements or bytes, {} by MEMORY USAGE SAMPLES 5, \
         about {} by DUMP) on {}: its MIGRATE would hold {} about {} and its target about {}; \
         {moved}.",
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
    if let Some(by) = pinned_by {
        line.push_str(&format!(
            " Past --max-hold: the plan by {by} leaves its slot where it is (--move-big-keys \
             moves it)."
        ));
    }
    if moved_by_slots {
        line.push_str(
            " Past --max-hold: the plan by slots is redis-cli's own and moves its slot all the \
             same (apply moves the key alone).",
        );
    }
    let [past_timeout, past_bulk, past_buffer, atomic] = flags;
    if past_timeout {
        line.push_str(&format!(
            " That is a third or more of the default cluster-node-timeout \
             ({CLUSTER_NODE_TIMEOUT:.0} s): a master held past its timeout is taken for failed \
             and failed over."
        ));
    }
    if past_bulk {
        line.push_str(
            " Its payload passes the default proto-max-bulk-len (512 MB): the target refuses its \
             RESTORE.",
        );
    }
    if past_buffer {
        line.push_str(
            " Its payload passes the replicas' default output buffer soft limit (64 MiB): a \
             replica of the target may be disconnected and resync in full (a fork and an RDB).",
        );
    }
    if atomic {
        line.push_str(
            " Every master has Valkey 9: --atomic sends big collections in pieces instead of one \
             RESTORE.",
        );
    }
    line
}

/// "1 node", "3 nodes".
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
