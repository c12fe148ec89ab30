//! The report's memory and big keys: every node's peak under each plan and method against its
//! limit, and the big keys found, with how long moving each would hold its masters.

use super::mib;
use crate::cluster::budget::{Fit, NodeWalk};
use crate::output::Table;
use crate::predict::prediction::Prediction;
use crate::render::held;

/// `12.3 MiB (92%)`: bytes, and over `maxmemory` where it has one.
fn level(bytes: f64, maxmemory: f64) -> String {
    if maxmemory > 0.0 {
        format!("{} ({:.0}%)", mib(bytes), 100.0 * bytes / maxmemory)
    } else {
        mib(bytes)
    }
}

/// "Memory against each node's limit", when the nodes' memory was read: each node now, at its
/// fullest moment and at the end of each plan (by the method the report is for), and its
/// verdict; the same walk `apply` checks its plan with.
pub(super) fn capacity_section(p: &Prediction) -> Option<String> {
    let c = p.capacity.as_ref()?;
    let walks: Vec<&crate::predict::capacity::PlanWalk> = c
        .walks
        .iter()
        .filter(|w| w.walk.method == p.method)
        .collect();
    let first = walks.first()?;
    let mut headers = vec![
        "node".to_string(),
        "role".to_string(),
        "limit".to_string(),
        "now".to_string(),
    ];
    for w in &walks {
        headers.push(format!("{}: fullest", w.plan));
        headers.push(format!("{}: end", w.plan));
    }
    headers.push("verdict".to_string());
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut t = Table::new(&headers);
    for n in &first.walk.nodes {
        let role = match &n.replica_of {
            Some(m) => format!("replica of {m}"),
            None => "master".to_string(),
        };
        let standing = c.standing(&n.address);
        let limit = standing.map_or_else(|| "not known".to_string(), held);
        let mut row = vec![n.address.clone(), role, limit, level(n.now, n.maxmemory)];
        for w in &walks {
            match w.walk.node(&n.address) {
                Some(x) => {
                    row.push(level(x.fullest, x.maxmemory));
                    row.push(level(x.end, x.maxmemory));
                }
                None => row.extend(["-".to_string(), "-".to_string()]),
            }
        }
        row.push(verdict(c, n, walks.iter().map(|w| w.walk.node(&n.address))));
        t.push(row);
    }
    Some(format!(
        "\n## Memory against each node's limit\n\nEach node's used_memory now, at its fullest \
         moment under each plan ({} method; a batch in flight included where it grows) and \
         when the plan is done, against its maxmemory less {:.0}% (--headroom), counted as the \
         node counts it (used_memory less mem_not_counted_for_evict); a replica follows its \
         master and is judged against its own limit, on all it uses; a node without maxmemory, \
         and every host, against the host's RAM. A source is not judged against its own limit: \
         a move takes bytes off it (the headroom is for growth). `ringslot apply` walks its \
         plan the same way before its first write, and refuses it where a node is past the \
         headroom.\n\n{}",
        p.method.short(),
        c.headroom * 100.0,
        t.markdown()
    ))
}

/// A node's verdict over the plans: its worst moment's, else how it stands now.
fn verdict<'a>(
    c: &crate::predict::capacity::Capacity,
    n: &NodeWalk,
    walks: impl Iterator<Item = Option<&'a NodeWalk>>,
) -> String {
    let worst = walks
        .flatten()
        .filter_map(|x| x.worst.as_ref().map(|j| j.fit))
        .max();
    let full_now = c
        .standing(&n.address)
        .is_some_and(|j| j.fit != Fit::Fits && j.replica_of.is_none());
    match worst {
        Some(Fit::Crosses) => "**crosses its limit**".to_string(),
        Some(Fit::InMargin) => "**past the headroom**".to_string(),
        // A full master judged by its host alone: a source (a target is judged against its
        // limit, where it is already past the headroom).
        Some(Fit::Fits) | None if full_now => "full now; only gives".to_string(),
        Some(Fit::Fits) => "fits".to_string(),
        None => "only gives, or takes no part".to_string(),
    }
}

/// "Big keys", when any was found.
pub(super) fn big_keys_section(p: &Prediction) -> Option<String> {
    if p.big_keys.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        "key",
        "slot",
        "master",
        "type",
        "encoding",
        "length",
        "memory (SAMPLES 5)",
        "DUMP (estimated)",
        "holds its source",
        "holds its target",
        "moved by",
    ]);
    for k in &p.big_keys {
        t.push(vec![
            format!("`{}`", k.key),
            k.slot.to_string(),
            k.master.clone(),
            k.kind.clone(),
            k.encoding.clone(),
            k.length.to_string(),
            mib(k.memory),
            mib(k.dump),
            format!("{:.0} ms", k.hold_source * 1000.0),
            format!("{:.0} ms", k.hold_target * 1000.0),
            if k.moved_by.is_empty() {
                "-".to_string()
            } else {
                k.moved_by.join(", ")
            },
        ]);
    }
    Some(format!(
        "\n## Big keys\n\nKeys of {} or more by MEMORY USAGE ... SAMPLES 5, never serialized to \
         be measured (a read of the tool asks a master for at most about 10 ms of work because of \
         one key): their length by STRLEN, HLEN, LLEN, SCARD, ZCARD or XLEN, their DUMP bytes \
         from the keys of their type and encoding measured on their master (DUMP bytes per \
         element, else per byte of memory; their memory where none was measured), and what their MIGRATE would hold the source \
         and their RESTORE the target at the master's own serializing rate (SAMPLES 5 reads the \
         first elements the key's iterator meets, not a random sample: a collection whose first \
         elements differ from the rest is misjudged in proportion).\n\n{}",
        mib(crate::predict::big_keys::BIG_KEY_MEMORY as f64),
        t.markdown()
    ))
}
