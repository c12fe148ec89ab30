//! The one-line verdict of `ringslot status`: what must be fixed first (a failing node, slots
//! no master serves, a migration under way or left open, a master near its `maxmemory`), then
//! how the masters are balanced by slots and by bytes, each with the command that acts on it.

use super::{MasterStatus, Status};
use crate::cluster::budget::{Budget, Fit, Held, DEFAULT_HEADROOM};
use crate::cluster::memory::{NodeMemory, Policy};
use crate::predict::options::DEFAULT_TOLERANCE;
use ringslot_engine::change::DEFAULT_THRESHOLD;

/// The verdict on `status`: its findings, most pressing first, joined by `; `. Where something
/// must be fixed before any rebalance, the balance is said without a command to act on it.
pub fn verdict(status: &Status) -> String {
    let mut findings = pressing(status);
    let blocking = !findings.is_empty();
    findings.extend(near_maxmemory(status));
    if !blocking {
        findings.push(balance(status));
    } else {
        findings.push(format!(
            "balance once that is done: peak-to-mean {:.2} by slots, {:.2} by bytes (run status \
             again)",
            status.balance.slots, status.balance.bytes
        ));
    }
    findings.join("; ")
}

/// What must be fixed before any rebalance.
fn pressing(status: &Status) -> Vec<String> {
    let mut out = Vec::new();
    // A failing master first: its slots wait for a failover.
    let flagged = status
        .flagged
        .iter()
        .find(|n| n.master)
        .or_else(|| status.flagged.first());
    if let Some(n) = flagged {
        let what = if n.master {
            let slots = status
                .masters
                .iter()
                .find(|m| m.address == n.address)
                .map_or(0, |m| m.slots);
            format!(
                "master {} is flagged `{}` (its {slots} slots wait for a replica to take \
                 over)",
                n.address, n.flag
            )
        } else {
            format!("replica {} is flagged `{}`", n.address, n.flag)
        };
        out.push(format!(
            "not healthy: {what}{} (redis-cli --cluster check; no rebalance until it is fixed)",
            and_more(status.flagged.len().saturating_sub(1), "nodes flagged")
        ));
    }
    let unread: Vec<&MasterStatus> = status
        .masters
        .iter()
        .filter(|m| !m.unread.is_empty() && !status.flagged.iter().any(|n| n.address == m.address))
        .collect();
    if let Some(m) = unread.first() {
        out.push(format!(
            "master {} could not be read ({}){}",
            m.address,
            m.unread,
            and_more(unread.len().saturating_sub(1), "masters unread")
        ));
    }
    if status.uncovered_slots > 0 {
        out.push(format!(
            "{} slots are served by no master (redis-cli --cluster fix)",
            status.uncovered_slots
        ));
    }
    let replicas: Vec<(&str, &super::ReplicaStatus)> = status
        .masters
        .iter()
        .flat_map(|m| m.replicas.iter().map(|r| (m.address.as_str(), r)))
        .filter(|(_, r)| r.link != "up")
        .collect();
    if let Some((master, r)) = replicas.first() {
        let state = if r.unread.is_empty() {
            format!("its link is `{}`", r.link)
        } else {
            format!("it could not be read ({})", r.unread)
        };
        out.push(format!(
            "replica {} of {master}: {state}{} (INFO replication there; `ringslot apply` waits \
             for lagging replicas)",
            r.address,
            and_more(replicas.len().saturating_sub(1), "replicas")
        ));
    }
    out.extend(migrations(status));
    out.extend(open_slots(status));
    out
}

/// The masters the memory model finds at or past their limit less the default headroom
/// ([`Budget::standing`]: what eviction counts against `maxmemory`): a rebalance must not
/// bring them bytes, and may take them off.
fn near_maxmemory(status: &Status) -> Vec<String> {
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
    let mut out = Vec::new();
    for m in &status.masters {
        let Some(j) = budget
            .standing(&m.address)
            .filter(|j| j.fit != Fit::Fits && matches!(j.held, Held::Maxmemory { .. }))
        else {
            continue;
        };
        out.push(format!(
            "{} is at {:.0}% of its maxmemory ({}){}: a rebalance must not bring it bytes, and \
             may take them off it",
            m.address,
            100.0 * j.fill(),
            m.policy,
            if j.fit == Fit::Crosses {
                if j.evicts() {
                    ", past it: it evicts keys before every command"
                } else {
                    ", past it: it refuses writes with OOM"
                }
            } else {
                ""
            }
        ));
    }
    out
}

/// " (and N more)" where `more` is above 0.
fn and_more(more: usize, what: &str) -> String {
    if more == 0 {
        String::new()
    } else {
        format!(" (and {more} more {what})")
    }
}

/// The atomic slot migrations under way, by their source (the export), else their target.
fn migrations(status: &Status) -> Option<String> {
    let jobs: Vec<(&str, &super::AtomicMigration)> = status
        .masters
        .iter()
        .flat_map(|m| m.atomic_migrations.iter().map(|j| (m.address.as_str(), j)))
        .collect();
    let exports: Vec<_> = jobs
        .iter()
        .filter(|(_, j)| j.operation.eq_ignore_ascii_case("export"))
        .collect();
    let (listed, count) = if exports.is_empty() {
        (jobs.first()?, jobs.len())
    } else {
        (*exports.first()?, exports.len())
    };
    let (address, job) = listed;
    Some(format!(
        "an atomic slot migration is under way on {address} ({} of slots {} with {}, {}){}: wait \
         for it to end",
        job.operation.to_lowercase(),
        job.slots,
        job.peer,
        job.state,
        and_more(count.saturating_sub(1), "jobs")
    ))
}

/// The slots left open, by their source (migrating), else their target (importing).
fn open_slots(status: &Status) -> Option<String> {
    let migrating: Vec<(&str, &super::OpenSlot)> = status
        .masters
        .iter()
        .flat_map(|m| m.migrating.iter().map(|o| (m.address.as_str(), o)))
        .collect();
    let importing: Vec<(&str, &super::OpenSlot)> = status
        .masters
        .iter()
        .flat_map(|m| m.importing.iter().map(|o| (m.address.as_str(), o)))
        .collect();
    // An importing slot whose source lists it migrating is the same move.
    let alone: Vec<_> = importing
        .iter()
        .filter(|(_, o)| !migrating.iter().any(|(_, m)| m.slot == o.slot))
        .collect();
    let more = migrating.len() + alone.len();
    let what = if let Some((address, open)) = migrating.first() {
        format!(
            "slot {} is migrating from {address} to {}",
            open.slot, open.peer
        )
    } else {
        let (address, open) = alone.first()?;
        format!(
            "slot {} is importing on {address} from {}",
            open.slot, open.peer
        )
    };
    Some(format!(
        "{what}{}: a move under way, or left by a stopped run (`ringslot apply` with the same \
         plan goes on with it; else redis-cli --cluster fix)",
        and_more(more.saturating_sub(1), "open slots")
    ))
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
        let v = verdict(&s);
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
            verdict(&s).starts_with("balanced by slots and by bytes"),
            "{}",
            verdict(&s)
        );
        let s = status(vec![
            master("a:1", 8192, 1e6),
            master("b:1", 8192, 1e6),
            master("c:1", 0, 0.0),
        ]);
        assert!(
            verdict(&s).starts_with("master c:1 holds no slots"),
            "{}",
            verdict(&s)
        );
    }

    #[test]
    fn a_plan_by_bytes_is_not_undone_and_a_slot_bigger_than_a_share_is_named() {
        // Even by bytes, not by slots: as a plan by bytes leaves a cluster.
        let s = status(vec![master("a:1", 10000, 1e6), master("b:1", 6384, 1e6)]);
        let v = verdict(&s);
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
        let v = verdict(&s);
        assert!(
            v.starts_with("not balanced by bytes: master a:1 holds 1.80x"),
            "{v}"
        );
        assert!(v.contains("slot 7 alone (2.4 MiB)"), "{v}");
        // Neither: both named.
        let s = status(vec![master("a:1", 10000, 3e6), master("b:1", 6384, 1e6)]);
        assert!(
            verdict(&s).starts_with("balanced by neither"),
            "{}",
            verdict(&s)
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
        let v = verdict(&status(vec![target, source]));
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
        let v = verdict(&status(vec![a, b]));
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
        let v = verdict(&status(vec![master("a:1", 8192, 1e6), b]));
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
        let v = verdict(&s);
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
