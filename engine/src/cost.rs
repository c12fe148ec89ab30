//! What a read-only evaluation costs before it runs: the work of a what-if, of the owners
//! under every scheme and of the balance of every scheme on a ring key, estimated from the
//! ring's size and the change, so that the module can run it inline, in the background, or
//! refuse it, before it holds Redis' main thread for it.
//!
//! The unit is about 0.3 µs of Redis' main thread on the 2-vCPU development machine (release
//! build): a member of the default what-if (ring, slot table and modulo: its hash, one ring
//! lookup before and after the change, its slot, its index mod N) was measured at 0.2 µs and
//! costs 3/4 of one. `ringslot.inline-limit` counts in it, so that its default, 100000, is
//! about 30 ms, and the default what-if (100000 sample members) runs inline. Each part of an
//! evaluation is charged what it was measured to take there, rounded up, for N nodes, P
//! points, W multi-probe points (the total weight, at most 1M) and a Maglev table of M entries
//! (`make bench-limits` shows the longest inline hold of every command):
//!
//! | part | units |
//! |---|---|
//! | a member, made or read and hashed | 0.45 |
//! | ... under the ring / slot table / modulo | 0.15, 0.075, 0.075 |
//! | ... under jump / Maglev / bounded loads | 1, 1/4, 3/2 |
//! | ... under rendezvous (every node scored, before and after) | N / 8 |
//! | ... under multi-probe (a search per probe, before and after) | 2 probes / 3 |
//! | a key read by a keyspace walk | 3/2 |
//! | each point a change adds or removes (hashed, sorted, placed) | 1/2 |
//! | each point of the ring of the serving nodes (a pending rebalance) | 1/2 |
//! | the slot table's rebalance | N / 4 + 512 |
//! | the node lists of the strong-hash schemes | N / 16 |
//! | a Maglev table (filled a turn at a time through a heap of nodes) | M (2 + log2 N) / 32 + N / 3 |
//! | multi-probe's points | W / 3 |
//! | bounded loads' copies of the ring's points | P / 24 |
//! | the exact shares of the ring and the slot table (`RING.BALANCE`) | P / 64 + N / 4 |

use super::change::Change;
use super::flavour::Flavour;
use super::ring::delta::NodeChange;
use super::ring::Ring;
use super::schemes::{Scheme, SchemeParams};
use super::topology::{Limits, Topology};

/// Where the members of an evaluation come from, for its cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Sample members, made for the evaluation.
    Sample(u64),
    /// Keys read from the keyspace: `visited` keys walked (every key of the database for a
    /// `KEYS` walk, the keys of the slots for `SLOTS`), each of which may be a member.
    Walk(u64),
}

/// An estimate, in units (see the module docs), as a sum of parts so that a refusal can say
/// what costs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Work {
    /// Units spent before the first member: building what the schemes need.
    pub setup: f64,
    /// Units spent on the members.
    pub members: f64,
}

impl Work {
    /// The whole estimate, in units, rounded up.
    pub fn units(&self) -> u64 {
        (self.setup + self.members).ceil().max(0.0) as u64
    }
}

/// A member made (or read) and hashed.
const MEMBER: f64 = 0.45;

/// A point of a ring built for an evaluation (hashed, sorted): the ring of the nodes that
/// serve slots, for a pending rebalance.
const BUILT_POINT: f64 = 0.5;

/// A key a keyspace walk visits (`RedisModule_Scan` opens every key, and the glob, the expiry
/// and the caller's rights are checked for each): measured at 0.3-0.45 µs.
const WALKED: f64 = 1.5;

/// The total weight of the ring's nodes.
fn total_weight(topo: &Topology) -> u64 {
    topo.nodes().iter().map(|n| u64::from(n.weight)).sum()
}

/// The cost of one member under `scheme` on a ring of `nodes` nodes (beyond making and
/// hashing the member), in a what-if: a lookup before and one after the change.
fn per_member(scheme: Scheme, nodes: usize, params: &SchemeParams, ring: &Ring) -> f64 {
    match scheme {
        Scheme::Ring => ring_lookup_cost(ring, nodes),
        Scheme::Slots | Scheme::Modulo => 0.075,
        Scheme::Bounded => 1.5,
        placement => 2.0 * placement.lookup_cost(nodes, params),
    }
}

/// The cost of a ring's lookups of one member before and after a change, by its rule: the
/// points' lookup (0.15), or scoring every node for rendezvous (as the rendezvous scheme's
/// lookup), with the node's name hashed for pymemcache (a unit per 8 bytes).
fn ring_lookup_cost(ring: &Ring, nodes: usize) -> f64 {
    use crate::flavour::Rule;
    match ring.flavour().rule() {
        Rule::Rendezvous => 2.0 * Scheme::Rendezvous.lookup_cost(nodes, &SchemeParams::default()),
        Rule::KeyedRendezvous => {
            let names: usize = ring.nodes().iter().map(|n| n.name.len() + 16).sum();
            2.0 * names as f64 / 8.0
        }
        Rule::Index => 1.0,
        Rule::Ring | Rule::Modula | Rule::Table => 0.15,
    }
}

/// The points that come and go with a change of the nodes of a ring of `topo`'s flavour whose
/// nodes hold `points` (before the change; `weights`: every node's after it, joining nodes
/// last). Ketama's counts depend on every weight, so every node's are compared there; the
/// other flavours' only the changed nodes'.
fn changed_points(topo: &Topology, points: &[u32], change: &NodeChange, weights: &[u32]) -> f64 {
    let ring = topo.ring();
    let flavour = ring.flavour();
    let vnodes = u64::from(ring.vnodes());
    if flavour != Flavour::Ketama {
        let changed: u64 = change
            .weights
            .iter()
            .map(|&(i, w)| {
                let before = points.get(i).map_or(0, |&p| u64::from(p));
                (vnodes * u64::from(w)).abs_diff(before)
            })
            .chain(change.joining.iter().map(|&(_, w)| vnodes * u64::from(w)))
            .sum();
        return changed as f64;
    }
    let present: Vec<u32> = weights.iter().copied().filter(|&w| w > 0).collect();
    let after: u64 = Ring::planned_points(flavour, ring.vnodes(), &present)
        .iter()
        .sum();
    let before: u64 = points.iter().map(|&p| u64::from(p)).sum();
    // Each node's count moves by a few points; the changed nodes' by all of their own.
    (after.abs_diff(before) + 4 * weights.len() as u64) as f64
}

/// The work of evaluating `change` under `schemes` over the members of `source` (a what-if,
/// `RING.MOVES`). A change the ring refuses costs nothing: the what-if refuses it before it
/// reads a member.
pub fn what_if(
    topo: &Topology,
    change: &Change,
    schemes: &[Scheme],
    params: &SchemeParams,
    source: Source,
) -> Work {
    let Ok(p) = topo.prepare(change, Limits::NONE) else {
        return Work::default();
    };
    let key_nodes = topo.nodes();
    let nodes = p.base_nodes.len();
    let wants = |s: Scheme| schemes.contains(&s);
    let mut setup = 0.0;
    let points: Vec<u32> = p
        .base_nodes
        .iter()
        .filter_map(|&i| key_nodes.get(i))
        .map(|n| n.points)
        .collect();
    if nodes < key_nodes.len() && schemes.iter().any(|&s| s != Scheme::Slots) {
        // The ring of the nodes that serve slots now, built for a pending rebalance.
        let built: u64 = points.iter().map(|&p| u64::from(p)).sum();
        setup += built as f64 * BUILT_POINT;
    }
    if wants(Scheme::Ring) || wants(Scheme::Bounded) {
        setup += changed_points(topo, &points, &p.node_change, &p.weights) / 2.0;
    }
    if wants(Scheme::Slots) {
        setup += key_nodes.len() as f64 / 4.0 + 512.0;
    }
    if schemes.iter().any(|s| s.is_placement()) {
        setup += nodes as f64 / 16.0;
    }
    // Each placement is built before and after the change.
    let total: u64 = p
        .base_nodes
        .iter()
        .filter_map(|&i| key_nodes.get(i))
        .map(|n| u64::from(n.weight))
        .sum();
    let after: u64 = p.weights.iter().map(|&w| u64::from(w)).sum();
    for s in schemes {
        setup += s.build_cost(nodes, total, params) + s.build_cost(p.weights.len(), after, params);
    }
    if wants(Scheme::Bounded) {
        setup += topo.ring().point_count() as f64 / 24.0;
    }
    let each: f64 = MEMBER
        + schemes
            .iter()
            .map(|&s| per_member(s, p.weights.len(), params, topo.ring()))
            .sum::<f64>();
    let members = match source {
        Source::Sample(n) => n as f64 * each,
        Source::Walk(keys) => keys as f64 * (each + WALKED),
    };
    Work { setup, members }
}

/// The work of one member's owner under every scheme (`RING.OWNERS`): a Maglev table, the
/// multi-probe points and one rendezvous score per node.
pub fn owners(topo: &Topology, params: &SchemeParams) -> Work {
    let nodes = topo.nodes().len();
    let total = total_weight(topo);
    let placements = Scheme::ALL.into_iter().filter(|s| s.is_placement());
    Work {
        setup: nodes as f64 / 16.0
            + placements
                .clone()
                .map(|s| s.build_cost(nodes, total, params))
                .sum::<f64>(),
        members: MEMBER
            + placements
                .map(|s| s.lookup_cost(nodes, params))
                .sum::<f64>(),
    }
}

/// The work of every scheme's balance over `sample` members (`RING.BALANCE`): the exact
/// shares of the ring and the slot table, a Maglev table, the multi-probe points, bounded
/// loads' copy of the points, then each member under jump, rendezvous, multi-probe and
/// bounded loads (once each: there is no change).
pub fn balance(topo: &Topology, params: &SchemeParams, sample: u64) -> Work {
    let nodes = topo.nodes().len();
    let points = topo.ring().point_count() as f64;
    let total = total_weight(topo);
    let placements = Scheme::ALL.into_iter().filter(|s| s.is_placement());
    let setup = points / 64.0
        + nodes as f64 / 4.0
        + nodes as f64 / 16.0
        + placements
            .clone()
            .map(|s| s.build_cost(nodes, total, params))
            .sum::<f64>()
        + points / 48.0;
    // One lookup under each placement (a placement with exact shares, Maglev, needs none:
    // counted all the same).
    let each = MEMBER
        + placements
            .map(|s| s.lookup_cost(nodes, params))
            .sum::<f64>()
        + per_member(Scheme::Bounded, nodes, params, topo.ring());
    // The perfectly balanced reference: its placements, measured at 16 ns each.
    let reference =
        sample as f64 * f64::from(crate::compare::balanced_draws(sample)) * BALANCED_PLACEMENT;
    Work {
        setup: setup + reference,
        members: sample as f64 * each,
    }
}

/// One placement of [`crate::compare::balanced_peak_to_mean`] (16 ns measured; 320000 took
/// 5.2 ms, release build).
const BALANCED_PLACEMENT: f64 = 0.06;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;

    fn ring(vnodes: i64, nodes: usize) -> Topology {
        let mut t = Topology::new(Flavour::Native, Some(vnodes), false).expect("ring");
        let names: Vec<Vec<u8>> = (0..nodes).map(|i| format!("n{i}").into_bytes()).collect();
        let refs: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
        t.add(&refs, None, Limits::NONE).expect("nodes");
        t
    }

    #[test]
    fn the_default_what_if_costs_three_quarters_of_a_unit_a_member() {
        let t = ring(160, 10);
        let join = Change::Add {
            nodes: vec![b"x".to_vec()],
            weight: None,
        };
        let w = what_if(
            &t,
            &join,
            &Scheme::DEFAULT,
            &SchemeParams::default(),
            Source::Sample(100_000),
        );
        assert!((w.members - 75_000.0).abs() < 1e-6, "{w:?}");
        assert!(w.units() <= 100_000, "the default what-if runs inline");
        // 160 points hashed, a rebalance of 11 nodes.
        assert!(
            (w.setup - (80.0 + 10.0 / 4.0 + 512.0)).abs() < 1e-9,
            "{w:?}"
        );
    }

    #[test]
    fn the_changed_points_are_charged() {
        // A node holding 999999 of the ring's points shrinking to weight 1: the points that go
        // cost, however few members are evaluated.
        let mut t = Topology::new(Flavour::Native, Some(1), false).expect("ring");
        t.add(&[b"a"], Some(999_999), Limits::NONE).expect("a");
        t.add(&[b"b"], None, Limits::NONE).expect("b");
        let shrink = Change::Add {
            nodes: vec![b"a".to_vec()],
            weight: Some(1),
        };
        let w = what_if(
            &t,
            &shrink,
            &[Scheme::Ring],
            &SchemeParams::default(),
            Source::Sample(1),
        );
        assert_eq!(w.setup, 999_998.0 / 2.0);
        let leave = Change::Del {
            nodes: vec![b"a".to_vec()],
        };
        let w = what_if(
            &t,
            &leave,
            &[Scheme::Ring],
            &SchemeParams::default(),
            Source::Sample(1),
        );
        assert_eq!(w.setup, 999_999.0 / 2.0);
    }

    #[test]
    fn rendezvous_costs_every_node_and_builds_are_charged() {
        let t = ring(10, 99_990);
        let params = SchemeParams::default();
        let join = Change::Add {
            nodes: vec![b"x".to_vec()],
            weight: None,
        };
        let w = what_if(
            &t,
            &join,
            &[Scheme::Rendezvous],
            &params,
            Source::Sample(191),
        );
        assert!(w.units() > 100_000, "{w:?}: past the default inline limit");
        let w = what_if(&t, &join, &[Scheme::Maglev], &params, Source::Sample(1));
        assert!(w.units() > 100_000, "{w:?}: two tables over 99991 nodes");
        assert!(owners(&t, &params).units() > 0);
        assert!(balance(&t, &params, 191).units() > 100_000);
    }
}
