//! The report's first sections: the title, how the prediction ran, the plan move by move,
//! each scheme's moves, the masters before and after, what could not be measured, and what to
//! run.

use super::{fraction, mib};
use crate::output::{fixed, Table};
use crate::predict::change::MasterChange;
use crate::predict::options::Options;
use crate::predict::prediction::{Mode, Prediction};

/// The sentence that says how the prediction ran, and the table of what it did to each
/// master.
fn mode_line(p: &Prediction, opts_rate: Option<u64>) -> String {
    let rate = match opts_rate {
        Some(0) | None => "without a rate limit".to_string(),
        Some(r) => format!("at most {r} keys a second per master"),
    };
    let how = match &p.mode {
        Mode::ReadOnly => format!(
            "**Read-only**: nothing was loaded on the cluster and nothing written; the keys \
             were read with SCAN {rate} and hashed here"
        ),
        Mode::Module => {
            let mut wrote = String::from(
                "**With the module** (--with-module): each master evaluated its own keys \
                 (RING.MOVES ... SLOTS on a copy of the mirror); the moved slots' keys were \
                 read ",
            );
            wrote.push_str(&rate);
            wrote.push_str(". What the run wrote and removed, in order: ");
            wrote.push_str(&p.writes.join("; "));
            wrote
        }
    };
    let mut t = Table::new(&[
        "master",
        if p.by_weight.is_some() {
            "key reads (each key once by name, and again to size it)"
        } else {
            "key reads (each key once by name, each moving key again to size it)"
        },
        "longest round trip of the run's commands (the client's view: a RING.MOVES in the background waits here without holding the master)",
        "longest PING of another client",
    ]);
    for h in &p.holds {
        t.push(vec![
            h.address.clone(),
            h.keys_read.to_string(),
            format!("{:.1} ms", h.longest_seconds * 1000.0),
            p.waits
                .get(&h.address)
                .map_or("not measured (PING refused)".to_string(), |w| {
                    format!("{:.1} ms", w.longest * 1000.0)
                }),
        ]);
    }
    format!(
        "{how}. What the run did to each master (another client sent a PING every 10 ms \
         meanwhile; a RING.MOVES past ringslot.inline-limit runs in the background, where its \
         round trip waits without holding the server):\n\n{}",
        t.markdown()
    )
}

/// The title, how the prediction ran, and what the plan moves.
pub(super) fn head(p: &Prediction, change: &MasterChange, opts: &Options) -> String {
    let label = change.label();
    let slots_planned: usize = p.plan.iter().map(|m| m.slots.len()).sum();
    let sample_note = match p.sample {
        Some(n) => format!(
            " Bytes were measured for {n} keys a slot and estimated for the others: ± is two \
             standard errors (a 95% interval)."
        ),
        None => " Bytes were measured key by key.".to_string(),
    };
    let serving = p.masters.iter().filter(|m| m.slots_before > 0).count();
    let joining = match change {
        MasterChange::Add { nodes, .. } => nodes.len(),
        _ => 0,
    };
    let present = p.masters.len().saturating_sub(joining);
    let masters = if joining > 0 {
        format!("{serving} masters and {joining} joining")
    } else if serving < present {
        format!("{serving} masters serving slots ({present} in all)")
    } else {
        format!("{serving} masters")
    };
    // A pending rebalance under redis-cli's threshold moves nothing: say so as redis-cli does.
    let nothing = match (change, slots_planned) {
        (MasterChange::Rebalance { threshold }, 0) => format!(
            " Every master is within the {threshold}% threshold of its share: redis-cli \
             answers \"No rebalancing needed\" (a lower --threshold predicts a smaller \
             rebalance)."
        ),
        _ => String::new(),
    };
    let risks = super::risks::risks_list(p);
    format!(
        "# ringslot on a Redis Cluster: {label}\n\n## Before you run this\n\n{risks}\n{}\n\n\
         {masters}, {} live keys. The plan \
         (what redis-cli's rebalance does when run against {}: the commands are under \
         \"What to run\") moves {slots_planned} slots holding {} keys: {} bytes of DUMP \
         payloads ({}), taking {} bytes of memory on their targets.{nothing}{sample_note}",
        mode_line(p, Some(opts.max_keys_per_sec)),
        p.keys,
        p.entry,
        p.keys_moved,
        p.bytes.shown(),
        mib(p.bytes.value),
        p.memory.shown(),
    )
}

/// The plan, move by move.
pub(super) fn moves_table(p: &Prediction) -> Table {
    let mut moves = Table::new(&[
        "from",
        "to",
        "slots",
        "keys",
        "bytes (DUMP, what MIGRATE sends)",
        "memory on the target",
    ]);
    for m in &p.plan {
        moves.push(vec![
            m.from.clone().unwrap_or_else(|| "(unassigned)".into()),
            m.to.clone().unwrap_or_else(|| "(unassigned)".into()),
            m.slots.len().to_string(),
            m.keys.to_string(),
            m.bytes.shown(),
            m.memory.shown(),
        ]);
    }
    moves
}

/// Each scheme's moved keys: the slot scheme, each ring, modulo.
pub(super) fn schemes_table(p: &Prediction) -> Table {
    let mut t = Table::new(&[
        "scheme",
        "keys",
        "moved",
        "moved between old masters",
        "fraction",
        "ideal",
        "moved bytes (rings: moved keys x their mean size)",
    ]);
    t.push(vec![
        "slots (redis-cli --cluster rebalance)".into(),
        p.keys.to_string(),
        p.keys_moved.to_string(),
        p.keys_between_old.to_string(),
        fixed(fraction(p.keys_moved, p.keys), 4),
        fixed(p.ideal, 4),
        p.bytes.shown(),
    ]);
    // The rings move other keys than the slot plan: their bytes at the measured mean.
    let approx = |moved: u64| format!("{:.0}", moved as f64 * p.mean_bytes);
    for r in &p.rings {
        let sums = &r.sums;
        t.push(vec![
            format!("ring ({})", r.flavour),
            sums.members.to_string(),
            sums.ring_moved.to_string(),
            sums.ring_between.to_string(),
            fixed(fraction(sums.ring_moved, sums.members), 4),
            fixed(p.ideal, 4),
            approx(sums.ring_moved),
        ]);
    }
    if let Some(sums) = p.rings.first().map(|r| &r.sums) {
        t.push(vec![
            "modulo (hash mod N)".into(),
            sums.members.to_string(),
            sums.modulo_moved.to_string(),
            sums.modulo_between.to_string(),
            fixed(fraction(sums.modulo_moved, sums.members), 4),
            fixed(p.ideal, 4),
            approx(sums.modulo_moved),
        ]);
    }
    t
}

/// The slot scheme key by key: every pass's what-if counted the keys of the moved slots.
pub(super) fn scheme_check(p: &Prediction) -> String {
    let per_pass: Vec<String> = p
        .rings
        .iter()
        .map(|r| r.sums.slots_moved.to_string())
        .collect();
    let agree = p.rings.iter().all(|r| r.sums.slots_moved == p.keys_moved);
    let mut check = format!(
        "The slot scheme evaluated key by key with each flavour's pass: {} keys moved; {} the \
         keys counted in the moved slots.\n",
        per_pass.join(", "),
        if agree {
            "equal to"
        } else {
            "**not equal to**"
        }
    );
    for r in &p.rings {
        if r.sums.members != p.keys {
            check.push_str(&format!(
                "\n**The {} pass evaluated {} keys where {} were counted**: keys were \
                 written or deleted during the run, or the user may not read some.\n",
                r.flavour, r.sums.members, p.keys
            ));
        }
    }
    check
}

/// Each master before and after, under the slot scheme.
pub(super) fn masters_table(p: &Prediction) -> Table {
    let mut per = Table::new(&[
        "master",
        "slots before",
        "keys before",
        "slots after",
        "keys after (plan)",
        "bytes out",
        "bytes in",
    ]);
    for m in &p.masters {
        per.push(vec![
            m.address.clone(),
            m.slots_before.to_string(),
            m.keys_before.to_string(),
            m.slots_after.to_string(),
            m.keys_after.to_string(),
            m.bytes_out.shown(),
            m.bytes_in.shown(),
        ]);
    }
    per
}

/// "Not measured, and what the run did", when there is anything to say.
pub(super) fn notes_section(p: &Prediction) -> Option<String> {
    if p.notes.is_empty() {
        return None;
    }
    let mut md = String::from("\n## Not measured, and what the run did\n\n");
    for n in &p.notes {
        md.push_str(&format!("- {n}\n"));
    }
    Some(md)
}

/// "What to run": the commands that carry out redis-cli's plan, and their notes; with a plan by
/// weight, first a line that says these are redis-cli's, which its verdict may advise against.
pub(super) fn what_to_run(p: &Prediction) -> Option<String> {
    if p.commands.is_empty() {
        return None;
    }
    let mut md = String::from("\n## What to run\n\n");
    if let Some(c) = &p.by_weight {
        let by = c.plan.by.name();
        md.push_str(&format!(
            "These commands carry out redis-cli's plan. \"A plan by {by}\" above says which \
             plan to run: where it is the plan by {by} (or nothing to move), do not run these \
             (after a plan by {by}, redis-cli's rebalance undoes it); `ringslot apply` carries \
             out the plan by {by}.\n\n"
        ));
    }
    md.push_str("```\n");
    for c in &p.commands {
        md.push_str(c);
        md.push('\n');
    }
    md.push_str("```\n\n");
    for n in &p.command_notes {
        md.push_str(&format!("- {n}\n"));
    }
    Some(md)
}
