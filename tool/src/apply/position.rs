//! Where a cluster stands in a plan (`ringslot apply`'s resume rule). A cluster is accepted
//! only in a state the plan reaches: in each of its lanes (the moves of one source and target
//! pair, [`crate::plan::Lane`]) the first `k` moves done (their targets own their slots) and
//! the others not begun (their sources own them), every other slot where the plan found it,
//! and open slots (`MIGRATING`/`IMPORTING`) only on a lane's last move done (killed before
//! every master was told) and its next one (killed while its keys moved). A run one move at a
//! time leaves the plan's first moves done, which is such a state; `--parallel` leaves each
//! lane at a move of its own.

pub(crate) use crate::cluster::finding::Unreached;
use crate::plan::{SlotMove, SlotPlan};
use ringslot_engine::cluster::{myself, ClusterNode};
use std::collections::{BTreeMap, BTreeSet};

/// Where a cluster stands in a plan (see [`position`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Position {
    /// Whether each move is done (its target claims its slot), by move.
    pub done: Vec<bool>,
    /// The moves done that must still be closed (`SETSLOT ... NODE` on every master): the
    /// source still claims the slot or a node still has it open. At most a lane's last.
    pub to_close: BTreeSet<usize>,
    /// The moves not done whose slot is open (migrating or importing). At most a lane's next.
    pub open: BTreeSet<usize>,
}

impl Position {
    /// The moves done.
    pub fn done_count(&self) -> usize {
        self.done.iter().filter(|d| **d).count()
    }

    /// What is left, by move, in the order a run takes it: the moves left half done first,
    /// those to close then those open (each is its lane's last done or its next, and no two
    /// share a master), so that no other move starts on their masters before them; then the
    /// others, in the plan's order.
    pub fn pending(&self) -> Vec<usize> {
        let fresh = (0..self.done.len())
            .filter(|i| !self.done.get(*i).copied().unwrap_or(true) && !self.open.contains(i));
        self.to_close
            .iter()
            .chain(&self.open)
            .copied()
            .chain(fresh)
            .collect()
    }

    /// Records move `i` done and closed.
    pub fn mark_done(&mut self, i: usize) {
        if let Some(d) = self.done.get_mut(i) {
            *d = true;
        }
        self.to_close.remove(&i);
        self.open.remove(&i);
    }
}

/// Where the cluster stands in `plan`. `seed_owners`: every slot's owner (`ip:port`) as the
/// seed sees it; `views`: each master's own `CLUSTER NODES` by address (a node lists its own
/// open slots, on its `myself` line, and its own claims are what a move changes first). Error
/// (the reason, naming the slot): a state no run of the plan reaches.
pub(crate) fn position(
    plan: &SlotPlan,
    seed_owners: &[Option<String>],
    views: &BTreeMap<String, Vec<ClusterNode>>,
) -> Result<Position, Unreached> {
    let me = |address: &str| views.get(address).and_then(|v| myself(v));
    let claims = |address: &str, slot: u16| me(address).is_some_and(|n| n.serves(slot));
    let planned: BTreeSet<u16> = plan.moves.iter().map(|m| m.slot).collect();
    for (slot, (now, then)) in seed_owners.iter().zip(&plan.start_owners()).enumerate() {
        let Ok(slot) = u16::try_from(slot) else { break };
        if !planned.contains(&slot) && now != then {
            return Err(Unreached::Changed(format!(
                "slot {slot} is served by {}, where the plan found it on {}",
                now.as_deref().unwrap_or("no master"),
                then.as_deref().unwrap_or("no master"),
            )));
        }
    }
    let lane_of = plan.lane_of_moves();
    let mut done = vec![false; plan.moves.len()];
    // Per lane: its first move not done, and its last move done.
    let mut head: BTreeMap<usize, usize> = BTreeMap::new();
    let mut last: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, m) in plan.moves.iter().enumerate() {
        let lane = lane_of.get(i).copied().unwrap_or(usize::MAX);
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
            if let Some(&h) = head.get(&lane) {
                return Err(Unreached::OutOfOrder(format!(
                    "slot {} (move {} of the plan) has moved but slot {} (move {}, the same \
                     lane {} -> {}) has not: a lane's moves are done in order, and this state \
                     is not one the plan reaches",
                    m.slot,
                    i + 1,
                    plan.moves.get(h).map(|d| d.slot).unwrap_or_default(),
                    h + 1,
                    m.from,
                    m.to
                )));
            }
            if let Some(d) = done.get_mut(i) {
                *d = true;
            }
            last.insert(lane, i);
        } else {
            head.entry(lane).or_insert(i);
        }
    }
    kept_order(plan, &done)?;
    let is_last = |i: usize| last.values().any(|&l| l == i);
    let is_head = |i: usize| head.values().any(|&h| h == i);
    let index: BTreeMap<u16, usize> = plan
        .moves
        .iter()
        .enumerate()
        .map(|(i, m)| (m.slot, i))
        .collect();
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
    let (mut to_close, mut open) = (BTreeSet::new(), BTreeSet::new());
    for (address, view) in views {
        let Some(n) = myself(view) else {
            continue;
        };
        let opened = n
            .migrating
            .iter()
            .map(|(slot, to)| (*slot, Some(to), None))
            .chain(
                n.importing
                    .iter()
                    .map(|(slot, from)| (*slot, None, Some(from))),
            );
        for (slot, to, from) in opened {
            let i = index.get(&slot).copied();
            let mv = i.and_then(|i| plan.moves.get(i).map(|m| (i, m)));
            match mv {
                Some((i, m)) if is_last(i) && own(m, address, to, from) => {
                    to_close.insert(i);
                }
                Some((i, m)) if is_head(i) && own(m, address, to, from) => {
                    open.insert(i);
                }
                _ => {
                    return Err(Unreached::Open(format!(
                        "slot {slot} is open (migrating or importing) on {address}, and not as \
                         the plan's next move opens it (from its source to its target): close \
                         it first (CLUSTER SETSLOT {slot} STABLE on that node if it holds no \
                         keys of it, else redis-cli --cluster fix)"
                    )));
                }
            }
        }
    }
    // A lane's last move done is closed once every master's view gives its slot to its target.
    for &i in last.values() {
        let Some(m) = plan.moves.get(i) else { continue };
        let elsewhere = views.values().any(|view| {
            view.iter()
                .find(|n| n.serves(m.slot))
                .is_some_and(|n| n.address != m.to)
        });
        if claims(&m.from, m.slot) || elsewhere {
            to_close.insert(i);
        }
    }
    one_move_a_master(plan, &to_close, &open)?;
    Ok(Position {
        done,
        to_close,
        open,
    })
}

/// Refuses a state where a master kept in the plan's order
/// ([`crate::apply::lanes::kept_in_order`]) has a move done after one of its moves not done
/// (`done`, by move).
fn kept_order(plan: &SlotPlan, done: &[bool]) -> Result<(), Unreached> {
    for kept in crate::apply::lanes::kept_in_order(plan) {
        let mut waiting: Option<usize> = None;
        for (i, m) in plan.moves.iter().enumerate() {
            if m.from != kept && m.to != kept {
                continue;
            }
            match (done.get(i).copied().unwrap_or(false), waiting) {
                (false, None) => waiting = Some(i),
                (true, Some(w)) => {
                    return Err(Unreached::OutOfOrder(format!(
                        "slot {} (move {} of the plan) has moved but slot {} (move {}) has \
                     not, and both are of {kept}, whose moves are done in the plan's order \
                     (it gives and takes slots, or the plan drains it): this state is not \
                     one the plan reaches",
                        m.slot,
                        i + 1,
                        plan.moves.get(w).map(|d| d.slot).unwrap_or_default(),
                        w + 1
                    )));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Refuses a state where a master is in two moves left half done (`to_close` and `open`, by
/// move): a run moves a master's slots one at a time.
fn one_move_a_master(
    plan: &SlotPlan,
    to_close: &BTreeSet<usize>,
    open: &BTreeSet<usize>,
) -> Result<(), Unreached> {
    let mut half_done: BTreeMap<&str, usize> = BTreeMap::new();
    for &i in to_close.iter().chain(open) {
        let Some(m) = plan.moves.get(i) else { continue };
        for a in [m.from.as_str(), m.to.as_str()] {
            if let Some(&other) = half_done.get(a) {
                let how = |i: usize| {
                    let slot = plan.moves.get(i).map(|d| d.slot).unwrap_or_default();
                    if to_close.contains(&i) {
                        format!("slot {slot} (moved, not yet given to its target everywhere)")
                    } else {
                        format!("slot {slot} (open)")
                    }
                };
                return Err(Unreached::Open(format!(
                    "{} and {} are both half moved, and {a} is in both moves: a run moves a \
                     master's slots one at a time, so this state is not one the plan reaches; \
                     close one first (redis-cli --cluster fix)",
                    how(other),
                    how(i)
                )));
            }
            half_done.insert(a, i);
        }
    }
    Ok(())
}

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
            lanes: crate::plan::lanes_of(&[mv(0, A), mv(1, A), mv(8192, B)]),
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

    /// Where a run of one move at a time left the plan (the moves done are its first `done`):
    /// (`done`, the last of them to close, the next one open). `None`: a `--parallel` run
    /// left its lanes at different moves.
    fn prefix(pos: &Position) -> Option<(usize, bool, bool)> {
        let done = pos.done_count();
        if pos.done.iter().take(done).any(|d| !d)
            || pos.to_close.iter().any(|&i| i + 1 != done)
            || pos.open.iter().any(|&i| i != done)
        {
            return None;
        }
        Some((done, !pos.to_close.is_empty(), !pos.open.is_empty()))
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
        assert_eq!(prefix(&pos), Some((0, false, false)));
        // Slot 0 done, slot 1 open (killed while its keys moved).
        let v = views(
            "1-8191 [1->-3333333333333333333333333333333333333333]",
            "8192-16383",
            "0 [1-<-1111111111111111111111111111111111111111]",
        );
        let pos = position(&p, &owners(&[0]), &v).unwrap();
        assert_eq!(prefix(&pos), Some((1, false, true)));
        // Slot 1 given to C on C only (killed before the source was told).
        let v = views(
            "1-8191 [1->-3333333333333333333333333333333333333333]",
            "8192-16383",
            "0-1",
        );
        let pos = position(&p, &owners(&[0]), &v).unwrap();
        assert_eq!(prefix(&pos), Some((2, true, false)));
        // Every move done.
        let pos = position(
            &p,
            &owners(&[0, 1, 8192]),
            &views("2-8191", "8193-16383", "0-1 8192"),
        )
        .unwrap();
        assert_eq!(prefix(&pos), Some((3, false, false)));
        assert!(pos.pending().is_empty());
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
        assert_eq!(prefix(&pos), Some((2, true, false)));
        // Slot 1 migrating from A towards B, not towards the plan's target C: refused.
        let v = views(&format!("1-8191 [1->-{}]", id(B)), "8192-16383", "0");
        let e = position(&p, &owners(&[0]), &v).unwrap_err().to_string();
        assert!(e.contains("slot 1 ") && e.contains("10.0.0.1:7000"), "{e}");
    }

    #[test]
    fn each_lane_stands_at_a_move_of_its_own_as_a_parallel_run_leaves_it() {
        let p = plan();
        // Lane B -> C done (slot 8192) and lane A -> C at its second move, open (slot 1):
        // where a run with `--parallel 2` may stop, not one a run one move at a time leaves.
        let v = views(
            "1-8191 [1->-3333333333333333333333333333333333333333]",
            "8193-16383",
            "0 8192 [1-<-1111111111111111111111111111111111111111]",
        );
        let pos = position(&p, &owners(&[0, 8192]), &v).unwrap();
        assert_eq!(pos.done, vec![true, false, true]);
        assert_eq!(pos.open, [1].into_iter().collect());
        assert_eq!(prefix(&pos), None);
        assert_eq!(pos.pending(), vec![1]);
        // Lane B -> C's slot 8192 open (killed while its keys moved), lane A -> C not begun:
        // the open move first, before an earlier move of the plan on the same target.
        let v = views(
            "0-8191",
            "8192-16383 [8192->-3333333333333333333333333333333333333333]",
            "[8192-<-2222222222222222222222222222222222222222]",
        );
        let pos = position(&p, &owners(&[]), &v).unwrap();
        assert_eq!(pos.pending(), vec![2, 0, 1]);
        // Lane B -> C given to C on C only: closed first, with lane A -> C not begun.
        let v = views("0-8191", "8192-16383", "8192");
        let pos = position(&p, &owners(&[]), &v).unwrap();
        assert_eq!(pos.done, vec![false, false, true]);
        assert_eq!(pos.to_close, [2].into_iter().collect());
        assert_eq!(pos.pending(), vec![2, 0, 1], "the move to close first");
    }

    #[test]
    fn a_master_that_gives_and_takes_has_its_moves_done_in_the_plans_order() {
        // B takes slot 0 from A, then gives slot 8192 to C: two lanes, one master kept in order.
        let mut p = plan();
        p.moves = vec![p.moves[0].clone(), p.moves[2].clone()];
        p.moves[0].to = B.into();
        p.lanes = crate::plan::lanes_of(&p.moves);
        assert!(kept_order(&p, &[true, false]).is_ok());
        let e = kept_order(&p, &[false, true]).unwrap_err().to_string();
        assert!(
            e.contains("slot 8192") && e.contains("slot 0 ") && e.contains(B),
            "{e}"
        );
    }

    #[test]
    fn two_half_moves_on_one_master_are_refused() {
        let p = plan();
        // Slot 1 (lane A -> C) open, and slot 8192 (lane B -> C) given to C on C only: C in
        // two moves at once, which no run does.
        let v = views(
            "1-8191 [1->-3333333333333333333333333333333333333333]",
            "8192-16383",
            "0 8192 [1-<-1111111111111111111111111111111111111111]",
        );
        let e = position(&p, &owners(&[0]), &v).unwrap_err().to_string();
        assert!(
            e.contains("slot 8192 (moved, not yet given") && e.contains("slot 1 (open)"),
            "{e}"
        );
        assert!(e.contains(C), "{e}");
    }

    #[test]
    fn states_no_run_reaches_are_refused_naming_the_slot() {
        let p = plan();
        // Slot 1 moved before slot 0, of the same lane.
        let e = position(&p, &owners(&[1]), &views("0 2-8191", "8192-16383", "1"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("slot 1 ") && e.contains("slot 0 ") && e.contains("lane"),
            "{e}"
        );
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
