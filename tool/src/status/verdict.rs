//! The one-line verdict of `ringslot status`: what must be fixed first (a failing node, slots
//! no master serves, a migration under way or left open, a master near its `maxmemory`), then
//! how the masters are balanced by slots and by bytes, each with the command that acts on it.

use super::{MasterStatus, Status};
use crate::cluster::budget::{Budget, Fit, Held, DEFAULT_HEADROOM};
use crate::cluster::finding::Finding;
use crate::cluster::memory::{NodeMemory, Policy};
use crate::predict::options::DEFAULT_TOLERANCE;
use ringslot_engine::change::DEFAULT_THRESHOLD;

/// The verdict on `status`: its findings ([`findings`]), most pressing first, joined by `; `.
/// Where something must be fixed before any rebalance, the balance is said without a command
/// to act on it.
pub fn verdict(status: &Status) -> String {
    let mut said = pressing(status);
    let blocking = !said.is_empty();
    said.extend(status.findings.iter().filter_map(|f| match f {
        Finding::Memory { judgement } => Some(near_full(status, judgement)),
        _ => None,
    }));
    if !blocking {
        said.push(balance(status));
    } else {
        said.push(format!(
            "balance once that is done: peak-to-mean {:.2} by slots, {:.2} by bytes (run status \
             again)",
            status.balance.slots, status.balance.bytes
        ));
    }
    said.join("; ")
}

/// What `status` found, most pressing first: the nodes flagged failing (masters first), the
/// masters that could not be read, the slots no master serves, the replicas whose link is not
/// up, the atomic migrations under way (by their source first), the slots open (by their
/// source, then those importing alone), and the masters the memory model finds at or past
/// their limit less the default headroom.
pub fn findings(status: &Status) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut flagged: Vec<&super::FlaggedNode> = status.flagged.iter().collect();
    flagged.sort_by_key(|n| !n.master);
    for n in flagged {
        let id = status
            .masters
            .iter()
            .find(|m| m.address == n.address)
            .map_or_else(String::new, |m| m.id.clone());
        out.push(Finding::Flagged {
            node: n.address.clone(),
            id,
            flag: n.flag.clone(),
            master: n.master,
        });
    }
    for m in &status.masters {
        if !m.unread.is_empty() && !status.flagged.iter().any(|n| n.address == m.address) {
            out.push(Finding::Unread {
                node: m.address.clone(),
                why: m.unread.clone(),
            });
        }
    }
    if status.uncovered_slots > 0 {
        out.push(Finding::Uncovered {
            slots: status.uncovered_slots,
        });
    }
    for m in &status.masters {
        for r in m.replicas.iter().filter(|r| r.link != "up") {
            out.push(Finding::ReplicaDown {
                node: r.address.clone(),
                master: m.address.clone(),
                link: r.link.clone(),
                why: r.unread.clone(),
            });
        }
    }
    let mut jobs: Vec<(&str, &super::AtomicMigration)> = status
        .masters
        .iter()
        .flat_map(|m| m.atomic_migrations.iter().map(|j| (m.address.as_str(), j)))
        .collect();
    jobs.sort_by_key(|(_, j)| !j.operation.eq_ignore_ascii_case("export"));
    for (node, j) in jobs {
        out.push(Finding::AtomicJob {
            node: node.to_string(),
            name: String::new(),
            operation: j.operation.clone(),
            slots: j.slots.clone(),
            state: j.state.clone(),
            peer: j.peer.clone(),
        });
    }
    let migrating: Vec<(&str, &super::OpenSlot)> = status
        .masters
        .iter()
        .flat_map(|m| m.migrating.iter().map(|o| (m.address.as_str(), o)))
        .collect();
    for (node, o) in &migrating {
        out.push(Finding::OpenSlot {
            slot: o.slot,
            node: node.to_string(),
            importing: false,
            peer: Some(o.peer.clone()),
        });
    }
    // An importing slot whose source lists it migrating is the same move.
    for m in &status.masters {
        for o in m
            .importing
            .iter()
            .filter(|o| !migrating.iter().any(|(_, x)| x.slot == o.slot))
        {
            out.push(Finding::OpenSlot {
                slot: o.slot,
                node: m.address.clone(),
                importing: true,
                peer: Some(o.peer.clone()),
            });
        }
    }
    out.extend(near_maxmemory(status));
    out
}

/// What must be fixed before any rebalance, in words: the first finding of each kind, and how
/// many more of it.
fn pressing(status: &Status) -> Vec<String> {
    let all = &status.findings;
    let of = |kind: &str| -> Vec<&Finding> { all.iter().filter(|f| f.kind() == kind).collect() };
    let mut out = Vec::new();
    let flagged = of("flagged");
    if let Some(Finding::Flagged {
        node, flag, master, ..
    }) = flagged.first()
    {
        let what = if *master {
            let slots = status
                .masters
                .iter()
                .find(|m| m.address == *node)
                .map_or(0, |m| m.slots);
            format!(
                "master {node} is flagged `{flag}` (its {slots} slots wait for a replica to take \
                 over)"
            )
        } else {
            format!("replica {node} is flagged `{flag}`")
        };
        out.push(format!(
            "not healthy: {what}{} (redis-cli --cluster check; no rebalance until it is fixed)",
            and_more(flagged.len().saturating_sub(1), "nodes flagged")
        ));
    }
    let unread = of("unread");
    if let Some(first) = unread.first() {
        out.push(format!(
            "{first}{}",
            and_more(unread.len().saturating_sub(1), "masters unread")
        ));
    }
    if let Some(first) = of("uncovered").first() {
        out.push(first.to_string());
    }
    let replicas = of("replica_down");
    if let Some(first) = replicas.first() {
        out.push(format!(
            "{first}{} (INFO replication there; `ringslot apply` waits for lagging replicas)",
            and_more(replicas.len().saturating_sub(1), "replicas")
        ));
    }
    // A job is listed on its source (export) and its target (import): counted once, by its
    // source where any is listed.
    let mut jobs = of("atomic_job");
    let exports: Vec<&Finding> = jobs
        .iter()
        .copied()
        .filter(|f| {
            matches!(f, Finding::AtomicJob { operation, .. } if operation.eq_ignore_ascii_case("export"))
        })
        .collect();
    if !exports.is_empty() {
        jobs = exports;
    }
    if let Some(Finding::AtomicJob {
        node,
        operation,
        slots,
        state,
        peer,
        ..
    }) = jobs.first()
    {
        out.push(format!(
            "an atomic slot migration is under way on {node} ({} of slots {slots} with {peer}, \
             {state}){}: wait for it to end",
            operation.to_lowercase(),
            and_more(jobs.len().saturating_sub(1), "jobs")
        ));
    }
    let open = of("open_slot");
    if let Some(Finding::OpenSlot {
        slot,
        node,
        importing,
        peer,
    }) = open.first()
    {
        let peer = peer.as_deref().unwrap_or("?");
        let what = if *importing {
            format!("slot {slot} is importing on {node} from {peer}")
        } else {
            format!("slot {slot} is migrating from {node} to {peer}")
        };
        out.push(format!(
            "{what}{}: a move under way, or left by a stopped run (`ringslot apply` with the \
             same plan goes on with it; else redis-cli --cluster fix)",
            and_more(open.len().saturating_sub(1), "open slots")
        ));
    }
    out
}

/// The masters the memory model finds at or past their limit less the default headroom
/// ([`Budget::standing`]: what eviction counts against `maxmemory`).
fn near_maxmemory(status: &Status) -> Vec<Finding> {
    let mut budget = Budget::new(DEFAULT_HEADROOM / 100.0);
    for m in &status.masters {
        budget.add_master(m.memory.clone().unwrap_or_else(|| NodeMemory {
            address: m.address.clone(),
            used: m.used_memory,
            counted: m.used_memory,
            maxmemory: m.maxmemory,
            policy: Policy::of(&m.policy),
            system: 0.0,
            evicted_keys: m.evicted_keys,
            fork_cow: 0.0,
            clients_normal: 0.0,
            server: String::new(),
            backlog: None,
            lazyfree_pending: 0,
        }));
    }
    status
        .masters
        .iter()
        .filter_map(|m| {
            budget
                .standing(&m.address)
                .filter(|j| j.fit != Fit::Fits && matches!(j.held, Held::Maxmemory { .. }))
        })
        .map(|judgement| Finding::Memory { judgement })
        .collect()
}

/// A master near full, in the verdict's words: a rebalance must not bring it bytes, and may
/// take them off it.
fn near_full(status: &Status, j: &crate::cluster::budget::Judgement) -> String {
    let policy = status
        .masters
        .iter()
        .find(|m| m.address == j.node)
        .map_or("", |m| m.policy.as_str());
    format!(
        "{} is at {:.0}% of its maxmemory ({policy}){}: a rebalance must not bring it bytes, \
         and may take them off it",
        j.node,
        100.0 * j.fill(),
        if j.fit == Fit::Crosses {
            if j.evicts() {
                ", past it: it evicts keys before every command"
            } else {
                ", past it: it refuses writes with OOM"
            }
        } else {
            ""
        }
    )
}

/// " (and N more)" where `more` is above 0.
fn and_more(more: usize, what: &str) -> String {
    if more == 0 {
        String::new()
    } else {
        format!(" (and {more} more {what})")
    }
}

/// The master with the largest `share`.
fn peak(masters: &[MasterStatus], share: impl Fn(&MasterStatus) -> f64) -> Option<&MasterStatus> {
    masters.iter().max_by(|a, b| share(a).total_cmp(&share(b)))
}

/// How the masters stand by slots (redis-cli's rule: a master off its share by more than
/// `--cluster-threshold`, 2%), then by bytes (off by more than the plan by weight's tolerance,
/// 5%, beyond the estimate's error).
fn balance(status: &Status) -> String {
    let seed = &status.seed;
    let read: Vec<MasterStatus> = status
        .masters
        .iter()
        .filter(|m| m.unread.is_empty())
        .cloned()
        .collect();
    let masters = &read;
    if masters.is_empty() {
        return "no master could be read".into();
    }
    if let Some(empty) = masters.iter().find(|m| m.slots == 0) {
        return format!(
            "master {} holds no slots: `ringslot predict --url redis://{seed} --rebalance` \
             shows what `redis-cli --cluster rebalance --cluster-use-empty-masters` would move \
             (add `--by bytes` for a plan that evens bytes)",
            empty.address
        );
    }
    let off = |share: f64| (share - 1.0).abs() * 100.0;
    // The master with the most slots where it is off its share, else the one with the fewest.
    let most = peak(masters, |m| m.slots_share).filter(|m| off(m.slots_share) > DEFAULT_THRESHOLD);
    let fewest = masters
        .iter()
        .min_by(|a, b| a.slots_share.total_cmp(&b.slots_share))
        .filter(|m| off(m.slots_share) > DEFAULT_THRESHOLD);
    let by_slots = most.or(fewest);
    let total: f64 = masters.iter().map(|m| m.bytes.value).sum();
    let mean = total / masters.len() as f64;
    let tolerance = DEFAULT_TOLERANCE / 100.0;
    // Off by more than the tolerance even at the near end of the estimate's error.
    let beyond = |m: &MasterStatus| {
        mean > 0.0
            && ((m.bytes.value - m.bytes.error) / mean > 1.0 + tolerance
                || (m.bytes.value + m.bytes.error) / mean < 1.0 - tolerance)
    };
    let by_bytes =
        peak(masters, |m| if beyond(m) { m.bytes_share } else { 0.0 }).filter(|m| beyond(m));
    let predict = format!("`ringslot predict --url redis://{seed} --rebalance --by bytes`");
    match (by_slots, by_bytes) {
        (None, None) if total <= 0.0 => "balanced by slots; no keys yet".into(),
        (None, None) => format!(
            "balanced by slots and by bytes (peak-to-mean {:.2} and {:.2})",
            status.balance.slots, status.balance.bytes
        ),
        (_, Some(m)) if hot_slot(status, m, mean).is_some() => {
            let (slot, bytes) = hot_slot(status, m, mean).unwrap_or_default();
            format!(
                "not balanced by bytes: master {} holds {:.2}x its share, and slot {slot} alone \
                 ({:.1} MiB) is more than a master's share ({:.1} MiB): no plan that moves whole \
                 slots evens it (its hash tag would have to be split); {predict} evens the rest",
                m.address,
                m.bytes_share,
                bytes / MIB,
                mean / MIB
            )
        }
        (None, Some(m)) => format!(
            "balanced by slots, not by bytes: master {} holds {:.2}x its share; {predict} would \
             even it",
            m.address, m.bytes_share
        ),
        (Some(s), Some(m)) => format!(
            "balanced by neither slots nor bytes: master {} holds {:.2}x its share of bytes \
             ({} {:.2}x its share of slots); {predict} shows a plan that evens bytes beside \
             what `redis-cli --cluster rebalance` would move",
            m.address, m.bytes_share, s.address, s.slots_share
        ),
        (Some(s), None) => format!(
            "balanced by bytes, not by slots (master {} holds {:.2}x its share of slots), as a \
             plan by bytes leaves a cluster: `redis-cli --cluster rebalance` would even the \
             slot counts and undo it",
            s.address, s.slots_share
        ),
    }
}

/// Bytes in a MiB.
const MIB: f64 = 1024.0 * 1024.0;

/// A slot of master `m` heavier than a master's mean share of bytes (`mean`), among the
/// biggest slots listed: `(slot, bytes)`.
fn hot_slot(status: &Status, m: &MasterStatus, mean: f64) -> Option<(u16, f64)> {
    status
        .biggest_slots
        .iter()
        .find(|s| s.master == m.address && s.bytes > mean)
        .map(|s| (s.slot, s.bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::estimate::Estimate;
    use crate::status::{Balance, OpenSlot, STATUS_VERSION};

    fn master(address: &str, slots: u64, bytes: f64) -> MasterStatus {
        // (A master read, with no replica.)
        MasterStatus {
            address: address.into(),
            id: "0".repeat(40),
            slots,
            keys: 0,
            keys_in_slots: 0,
            bytes: Estimate {
                value: bytes,
                error: 0.0,
                exact: true,
            },
            sampled: 0,
            used_memory: 1e6,
            maxmemory: 0.0,
            policy: "noeviction".into(),
            evicted_keys: 0,
            memory: None,
            replicas: Vec::new(),
            migrating: Vec::new(),
            importing: Vec::new(),
            atomic_migrations: Vec::new(),
            unread: String::new(),
            slots_share: 1.0,
            keys_share: 1.0,
            bytes_share: 1.0,
        }
    }

    /// The verdict on `s`, its findings made first (as `read_status` makes them).
    fn verdict_of(s: &Status) -> String {
        let mut s = s.clone();
        s.findings = findings(&s);
        verdict(&s)
    }

    fn status(mut masters: Vec<MasterStatus>) -> Status {
        let slots: Vec<f64> = masters.iter().map(|m| m.slots as f64).collect();
        let bytes: Vec<f64> = masters.iter().map(|m| m.bytes.value).collect();
        for (m, (s, b)) in masters.iter_mut().zip(
            super::super::shares(&slots)
                .into_iter()
                .zip(super::super::shares(&bytes)),
        ) {
            m.slots_share = s;
            m.bytes_share = b;
        }
        Status {
            version: STATUS_VERSION,
            seed: "10.0.0.1:7000".into(),
            server: "redis 7.0.15".into(),
            verdict: String::new(),
            findings: Vec::new(),
            masters,
            flagged: Vec::new(),
            uncovered_slots: 0,
            balance: Balance {
                slots: 1.0,
                keys: 1.0,
                bytes: 1.0,
            },
            biggest_slots: Vec::new(),
            big_keys: Vec::new(),
            keys_per_slot: 8,
            keys_sized: 0,
            big_keys_screened: false,
            seconds: 0.0,
            owners: Vec::new(),
        }
    }

    #[test]
    fn even_slots_and_uneven_bytes_name_the_heavy_master_and_the_plan_by_bytes() {
        let s = status(vec![
            master("a:1", 5462, 2.1e6),
            master("b:1", 5461, 0.45e6),
            master("c:1", 5461, 0.45e6),
        ]);
        let v = verdict_of(&s);
        assert!(
            v.starts_with("balanced by slots, not by bytes: master a:1 holds 2.10x"),
            "{v}"
        );
        assert!(v.contains("--rebalance --by bytes"), "{v}");
    }

    #[test]
    fn even_by_both_says_so_and_an_empty_master_asks_for_the_rebalance() {
        let s = status(vec![master("a:1", 8192, 1e6), master("b:1", 8192, 1.02e6)]);
        assert!(
            verdict_of(&s).starts_with("balanced by slots and by bytes"),
            "{}",
            verdict_of(&s)
        );
        let s = status(vec![
            master("a:1", 8192, 1e6),
            master("b:1", 8192, 1e6),
            master("c:1", 0, 0.0),
        ]);
        assert!(
            verdict_of(&s).starts_with("master c:1 holds no slots"),
            "{}",
            verdict_of(&s)
        );
    }

    #[test]
    fn a_plan_by_bytes_is_not_undone_and_a_slot_bigger_than_a_share_is_named() {
        // Even by bytes, not by slots: as a plan by bytes leaves a cluster.
        let s = status(vec![master("a:1", 10000, 1e6), master("b:1", 6384, 1e6)]);
        let v = verdict_of(&s);
        assert!(v.starts_with("balanced by bytes, not by slots"), "{v}");
        assert!(v.contains("would even the slot counts and undo it"), "{v}");
        // A slot heavier than a master's share: no plan of whole slots evens it.
        let mut s = status(vec![
            master("a:1", 5462, 3e6),
            master("b:1", 5461, 1e6),
            master("c:1", 5461, 1e6),
        ]);
        s.biggest_slots.push(crate::status::SlotStatus {
            slot: 7,
            master: "a:1".into(),
            keys: 1000,
            bytes: 2.5e6,
        });
        let v = verdict_of(&s);
        assert!(
            v.starts_with("not balanced by bytes: master a:1 holds 1.80x"),
            "{v}"
        );
        assert!(v.contains("slot 7 alone (2.4 MiB)"), "{v}");
        // Neither: both named.
        let s = status(vec![master("a:1", 10000, 3e6), master("b:1", 6384, 1e6)]);
        assert!(
            verdict_of(&s).starts_with("balanced by neither"),
            "{}",
            verdict_of(&s)
        );
    }

    #[test]
    fn a_migration_is_named_by_its_source_whichever_master_comes_first() {
        use crate::status::AtomicMigration;
        let job = |operation: &str, peer: &str| AtomicMigration {
            operation: operation.into(),
            slots: "0-9".into(),
            state: "snapshotting".into(),
            peer: peer.into(),
        };
        let mut target = master("a:1", 8192, 1e6);
        target.atomic_migrations.push(job("IMPORT", "b:1"));
        target.importing.push(OpenSlot {
            slot: 100,
            peer: "b:1".into(),
        });
        let mut source = master("b:1", 8192, 1e6);
        source.atomic_migrations.push(job("EXPORT", "a:1"));
        source.migrating.push(OpenSlot {
            slot: 100,
            peer: "a:1".into(),
        });
        let v = verdict_of(&status(vec![target, source]));
        assert!(
            v.starts_with("an atomic slot migration is under way on b:1 (export"),
            "{v}"
        );
        assert!(
            v.contains("; slot 100 is migrating from b:1 to a:1: a move"),
            "{v}"
        );
        assert!(!v.contains("more"), "{v}");
    }

    #[test]
    fn an_open_slot_and_a_full_master_come_before_the_balance() {
        let mut a = master("a:1", 8192, 1e6);
        a.migrating.push(OpenSlot {
            slot: 100,
            peer: "b:1".into(),
        });
        let mut b = master("b:1", 8192, 1e6);
        b.maxmemory = 1.05e6;
        let v = verdict_of(&status(vec![a, b]));
        assert!(
            v.starts_with("slot 100 is migrating from a:1 to b:1"),
            "{v}"
        );
        assert!(v.contains("b:1 is at 95% of its maxmemory"), "{v}");
        // Something to fix first: the balance without a command.
        assert!(v.ends_with("1.00 by bytes (run status again)"), "{v}");
        // A full master alone is no reason to wait: the balance keeps its command.
        let mut b = master("b:1", 8192, 1e6);
        b.maxmemory = 1.05e6;
        let v = verdict_of(&status(vec![master("a:1", 8192, 1e6), b]));
        assert!(v.starts_with("b:1 is at 95% of its maxmemory"), "{v}");
        assert!(v.ends_with("(peak-to-mean 1.00 and 1.00)"), "{v}");
    }

    #[test]
    fn a_failing_master_an_unread_one_and_a_replica_down_come_first() {
        use crate::status::{FlaggedNode, ReplicaStatus};
        let mut s = status(vec![master("a:1", 8192, 1e6), master("b:1", 8192, 1e6)]);
        s.flagged = vec![
            FlaggedNode {
                address: "r:1".into(),
                flag: "fail".into(),
                master: false,
            },
            FlaggedNode {
                address: "b:1".into(),
                flag: "fail?".into(),
                master: true,
            },
        ];
        s.masters[1].unread = "flagged `fail?`: not read".into();
        let mut c = master("c:1", 0, 0.0);
        c.unread = "no answer within 10 s (--timeout)".into();
        s.masters.push(c);
        s.masters[0].replicas.push(ReplicaStatus {
            address: "r:2".into(),
            link: "down".into(),
            lag_bytes: None,
            unread: String::new(),
        });
        let v = verdict_of(&s);
        assert!(
            v.starts_with("not healthy: master b:1 is flagged `fail?` (its 8192 slots wait"),
            "{v}"
        );
        assert!(v.contains("(and 1 more nodes flagged)"), "{v}");
        assert!(
            v.contains("; master c:1 could not be read (no answer within 10 s"),
            "{v}"
        );
        assert!(!v.contains("master b:1 could not be read"), "{v}");
        assert!(
            v.contains("; replica r:2 of a:1: its link is `down`"),
            "{v}"
        );
        assert!(v.ends_with("(run status again)"), "{v}");
    }
}
