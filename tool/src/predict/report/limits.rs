//! The report's memory and big keys: every node's peak under each plan and method against its
//! limit, and the big keys found, with how long moving each would hold its masters.

use super::mib;
use crate::output::Table;
use crate::predict::capacity::Verdict;
use crate::predict::prediction::Prediction;

/// "Memory against each node's limit", when the nodes' memory was read.
pub(super) fn capacity_section(p: &Prediction) -> Option<String> {
    let c = p.capacity.as_ref()?;
    // One column per plan and method, in the order met.
    let mut columns: Vec<(String, crate::predict::method::Method)> = Vec::new();
    for n in &c.nodes {
        for peak in &n.peaks {
            if !columns
                .iter()
                .any(|(p, m)| *p == peak.plan && *m == peak.method)
            {
                columns.push((peak.plan.clone(), peak.method));
            }
        }
    }
    let headers: Vec<String> = ["node", "role", "used_memory now", "limit"]
        .iter()
        .map(|h| h.to_string())
        .chain(
            columns
                .iter()
                .map(|(plan, method)| format!("peak: {plan}, {}", method.short())),
        )
        .chain(["worst".to_string()])
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut t = Table::new(&headers);
    for n in &c.nodes {
        let role = match &n.replica_of {
            Some(m) => format!("replica of {m}"),
            None => "master".to_string(),
        };
        let limit = if n.limit_is_ram {
            format!("host RAM {} (no maxmemory)", mib(n.limit))
        } else {
            format!("{} ({})", mib(n.limit), n.memory.policy.name())
        };
        let mut row = vec![n.memory.address.clone(), role, mib(n.memory.used), limit];
        for (plan, method) in &columns {
            row.push(
                n.peaks
                    .iter()
                    .find(|p| p.plan == *plan && p.method == *method)
                    .map_or("-".to_string(), |p| mib(p.peak)),
            );
        }
        row.push(
            match n.worst() {
                Verdict::Fits => "fits",
                Verdict::InMargin => "**within the margin**",
                Verdict::Crosses => "**crosses**",
            }
            .to_string(),
        );
        t.push(row);
    }
    Some(format!(
        "\n## Memory against each node's limit\n\nEach node's used_memory at its peak under each \
         plan and method, a batch included (a node checks its limit before a command runs, so a \
         RESTORE that starts just under it lands whole; a source holds a batch's payload while \
         its MIGRATE runs), against maxmemory less {:.0}% (--headroom), counted as the node \
         counts it (used_memory less mem_not_counted_for_evict); a replica follows its master \
         and is judged against its own limit; a node without maxmemory against its host's RAM, \
         with every such node of the host.\n\n{}",
        c.headroom * 100.0,
        t.markdown()
    ))
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
