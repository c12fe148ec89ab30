//! Where a cluster stands in a plan (`ringslot apply`'s resume rule). A cluster is accepted
//! only in a state the plan reaches: the first `k` moves done (their targets own their slots),
//! the others not begun (their sources own them), every other slot where the plan found it,
//! and open slots (`MIGRATING`/`IMPORTING`) only on the last move done (killed before every
//! master was told) and the next one (killed while its keys moved).

use crate::plan::{SlotMove, SlotPlan};
use ringslot_engine::cluster::{myself, ClusterNode};
use std::collections::BTreeMap;
use std::fmt;

/// Where a cluster stands in a plan (see [`position`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Position {
    /// The moves done: `moves[..done]`.
    pub done: usize,
    /// Whether the last move done must be closed first (`SETSLOT ... NODE` on every master):
    /// its source still claims the slot or a node still has it open.
    pub close_last: bool,
    /// Whether the next move is open (its slot migrating or importing somewhere).
    pub next_open: bool,
}

/// Where the cluster stands in `plan`. `seed_owners`: every slot's owner (`ip:port`) as the
/// seed sees it; `views`: each master's own `CLUSTER NODES` by address (a node lists its own
/// open slots, on its `myself` line, and its own claims are what a move changes first). Error
/// (the reason, naming the slot): a state no prefix of the plan reaches.
pub(crate) fn position(
    plan: &SlotPlan,
    seed_owners: &[Option<String>],
    views: &BTreeMap<String, Vec<ClusterNode>>,
) -> Result<Position, Unreached> {
    let me = |address: &str| views.get(address).and_then(|v| myself(v));
    let claims = |address: &str, slot: u16| me(address).is_some_and(|n| n.serves(slot));
    let planned: BTreeMap<u16, usize> = plan
        .moves
        .iter()
        .enumerate()
        .map(|(i, m)| (m.slot, i))
        .collect();
    for (slot, (now, then)) in seed_owners.iter().zip(&plan.start_owners()).enumerate() {
        let Ok(slot) = u16::try_from(slot) else { break };
        if !planned.contains_key(&slot) && now != then {
            return Err(Unreached::Changed(format!(
                "slot {slot} is served by {}, where the plan found it on {}",
                now.as_deref().unwrap_or("no master"),
                then.as_deref().unwrap_or("no master"),
            )));
        }
    }
    let mut done = 0;
    for (i, m) in plan.moves.iter().enumerate() {
        let (to, from) = (claims(&m.to, m.slot), claims(&m.from, m.slot));
        if !to && !from {
            return Err(Unreached::Changed(format!(
                "slot {} (move {} of the plan, {} -> {}) is served by {}",
                m.slot,
                i + 1,
                m.from,
                m.to,
                seed_owners
                    .get(usize::from(m.slot))
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| "no master".into()),
            )));
        }
        if to {
            if done != i {
                return Err(Unreached::OutOfOrder(format!(
                    "slot {} (move {} of the plan) has moved but slot {} (move {}) has not: \
                     the plan's moves are done in order, and this state is not one it reaches",
                    m.slot,
                    i + 1,
                    plan.moves.get(done).map(|d| d.slot).unwrap_or_default(),
                    done + 1
                )));
            }
            done = i + 1;
        }
    }
    let last = done.checked_sub(1).and_then(|i| plan.moves.get(i));
    let next = plan.moves.get(done);
    let id = |address: &str| me(address).map(|n| n.id.as_str());
    // An open slot of a move is the move's own only: migrating on its source towards its
    // target, importing on its target from its source.
    let own = |m: &SlotMove, address: &str, to: Option<&String>, from: Option<&String>| {
        let (migrating_ok, importing_ok) = (
            address == m.from && to.map(String::as_str) == id(&m.to),
            address == m.to && from.map(String::as_str) == id(&m.from),
        );
        (to.is_some() && migrating_ok) || (from.is_some() && importing_ok)
    };
    let (mut close_last, mut next_open) = (false, false);
    for (address, view) in views {
        let Some(n) = myself(view) else {
            continue;
        };
        let open = n
            .migrating
            .iter()
            .map(|(slot, to)| (*slot, Some(to), None))
            .chain(
                n.importing
                    .iter()
                    .map(|(slot, from)| (*slot, None, Some(from))),
            );
        for (slot, to, from) in open {
            if last.is_some_and(|m| m.slot == slot && own(m, address, to, from)) {
                close_last = true;
            } else if next.is_some_and(|m| m.slot == slot && own(m, address, to, from)) {
                next_open = true;
            } else {
                return Err(Unreached::Open(format!(
                    "slot {slot} is open (migrating or importing) on {address}, and not as \
                     the plan's next move opens it (from its source to its target): close it \
                     first (CLUSTER SETSLOT {slot} STABLE on that node if it holds no keys of \
                     it, else redis-cli --cluster fix)"
                )));
            }
        }
    }
    // The last move done is closed once every master's view gives its slot to its target.
    if let Some(m) = last {
        let elsewhere = views.values().any(|view| {
            view.iter()
                .find(|n| n.serves(m.slot))
                .is_some_and(|n| n.address != m.to)
        });
        if claims(&m.from, m.slot) || elsewhere {
            close_last = true;
        }
    }
    Ok(Position {
        done,
        close_last,
        next_open,
    })
}

/// A state of the cluster no prefix of the plan reaches: why, naming the slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unreached {
    /// A slot is served by a master the plan does not lead it to: the cluster changed since
    /// the plan was made (or a view was read while a slot changed owner: worth reading again).
    Changed(String),
    /// A later move is done while an earlier one is not.
    OutOfOrder(String),
    /// A slot is open otherwise than as the plan's next move opens it.
    Open(String),
}

impl fmt::Display for Unreached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreached::Changed(why) => write!(
                f,
                "{why}: the cluster changed since the plan was made; make a new one"
            ),
            Unreached::OutOfOrder(why) | Unreached::Open(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Unreached {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::WeightBy;
    use crate::plan::{owned_ranges, PLAN_VERSION};
    use ringslot_engine::cluster::parse_cluster_nodes;
    use ringslot_engine::SLOT_COUNT;

    const A: &str = "10.0.0.1:7000";
    const B: &str = "10.0.0.2:7000";
    const C: &str = "10.0.0.3:7000";

    fn id(address: &str) -> String {
        address.chars().nth(7).unwrap().to_string().repeat(40)
    }

    /// A node's own `CLUSTER NODES` line: its `slots` (already formatted) and open slots.
    fn view(address: &str, slots: &str) -> Vec<ClusterNode> {
        let line = format!(
            "{} {address}@17000 myself,master - 0 0 1 connected {slots}\n",
            id(address)
        );
        parse_cluster_nodes(&line).unwrap()
    }

    fn plan() -> SlotPlan {
        let mut start = vec![Some(A.to_string()); SLOT_COUNT];
        for s in start.iter_mut().skip(8192) {
            *s = Some(B.to_string());
        }
        let mv = |slot: u16, from: &str| SlotMove {
            slot,
            from: from.into(),
            to: C.into(),
            keys: 1,
            bytes: 10.0,
            memory: None,
            big: None,
        };
        SlotPlan {
            version: PLAN_VERSION,
            by: WeightBy::Bytes,
            tolerance: 0.05,
            start: owned_ranges(&start),
            moves: vec![mv(0, A), mv(1, A), mv(8192, B)],
            ids: BTreeMap::new(),
        }
    }

    fn owners(moved: &[u16]) -> Vec<Option<String>> {
        let mut o = plan().start_owners();
        for &s in moved {
            o[usize::from(s)] = Some(C.into());
        }
        o
    }

    fn views(a: &str, b: &str, c: &str) -> BTreeMap<String, Vec<ClusterNode>> {
        [(A, a), (B, b), (C, c)]
            .into_iter()
            .map(|(addr, slots)| (addr.to_string(), view(addr, slots)))
            .collect()
    }

    #[test]
    fn prefixes_of_the_plan_are_accepted_with_the_open_slots_they_leave() {
        let p = plan();
        // Not begun.
        let pos = position(&p, &owners(&[]), &views("0-8191", "8192-16383", "")).unwrap();
        assert_eq!((pos.done, pos.close_last, pos.next_open), (0, false, false));
        // Slot 0 done, slot 1 open (killed while its keys moved).
        let v = views(
            "1-8191 [1->-3333333333333333333333333333333333333333]",
            "8192-16383",
            "0 [1-<-1111111111111111111111111111111111111111]",
        );
        let pos = position(&p, &owners(&[0]), &v).unwrap();
        assert_eq!((pos.done, pos.close_last, pos.next_open), (1, false, true));
        // Slot 1 given to C on C only (killed before the source was told).
        let v = views(
            "1-8191 [1->-3333333333333333333333333333333333333333]",
            "8192-16383",
            "0-1",
        );
        let pos = position(&p, &owners(&[0]), &v).unwrap();
        assert_eq!((pos.done, pos.close_last, pos.next_open), (2, true, false));
        // Every move done.
        let pos = position(
            &p,
            &owners(&[0, 1, 8192]),
            &views("2-8191", "8193-16383", "0-1 8192"),
        )
        .unwrap();
        assert_eq!((pos.done, pos.close_last, pos.next_open), (3, false, false));
    }

    #[test]
    fn a_move_told_to_some_masters_only_is_closed_and_open_slots_must_point_the_plans_way() {
        let p = plan();
        // Slot 1 given to C on C and A; B still sees A serving it: close it first.
        let mut v = views("2-8191", "8192-16383", "0-1");
        let stale = format!("{} {A}@17000 master - 0 0 1 connected 1-8191\n", id(A));
        v.get_mut(B)
            .unwrap()
            .extend(parse_cluster_nodes(&stale).unwrap());
        let pos = position(&p, &owners(&[0]), &v).unwrap();
        assert_eq!((pos.done, pos.close_last), (2, true));
        // Slot 1 migrating from A towards B, not towards the plan's target C: refused.
        let v = views(&format!("1-8191 [1->-{}]", id(B)), "8192-16383", "0");
        let e = position(&p, &owners(&[0]), &v).unwrap_err().to_string();
        assert!(e.contains("slot 1 ") && e.contains("10.0.0.1:7000"), "{e}");
    }

    #[test]
    fn states_no_prefix_reaches_are_refused_naming_the_slot() {
        let p = plan();
        // Slot 8192 moved before slot 1.
        let e = position(
            &p,
            &owners(&[0, 8192]),
            &views("1-8191", "8193-16383", "0 8192"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("slot 8192") && e.contains("slot 1 "), "{e}");
        // A slot outside the plan changed owner.
        let mut o = owners(&[]);
        o[5] = Some(B.into());
        let e = position(&p, &o, &views("0-4 6-8191", "5 8192-16383", ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("slot 5 ") && e.contains("make a new one"), "{e}");
        // A planned slot served by a third master.
        let e = position(&p, &owners(&[]), &views("1-8191", "0 8192-16383", ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("slot 0 "), "{e}");
        // An open slot that is not the next move.
        let v = views(
            "0-8191 [9->-3333333333333333333333333333333333333333]",
            "8192-16383",
            "",
        );
        let e = position(&p, &owners(&[]), &v).unwrap_err().to_string();
        assert!(
            e.contains("slot 9 ") && e.contains("the plan's next move"),
            "{e}"
        );
    }
}
