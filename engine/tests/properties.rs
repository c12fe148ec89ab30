//! Property tests of the ring and the slot table (proptest).

use proptest::prelude::*;
use ringslot_engine::flavour::{Lookup, Rule};
use ringslot_engine::keyslot::SLOT_COUNT;
use ringslot_engine::Limits;
use ringslot_engine::{Change, Flavour, MemberWeight, Ring, Scheme, SchemeParams, Topology};
use std::collections::{BTreeSet, HashMap};

fn names(max: usize) -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::btree_set(prop::collection::vec(any::<u8>(), 1..12), 1..max)
        .prop_map(|s| s.into_iter().collect())
}

fn members() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..16), 1..200)
}

fn ring_of(flavour: Flavour, vnodes: u32, nodes: &[Vec<u8>]) -> Ring {
    let mut ring = Ring::new(flavour, vnodes, false);
    ring.set_nodes(nodes.iter().map(|n| (n.clone(), 1)).collect());
    ring
}

fn owner_names(ring: &Ring, members: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
    members
        .iter()
        .map(|m| ring.owner(m).map(|i| ring.nodes()[i].name.clone()))
        .collect()
}

/// The ring's points as (hash, owner name), which must not depend on node order.
fn named_points(ring: &Ring) -> Vec<(u64, Vec<u8>)> {
    ring.points()
        .iter()
        .map(|p| (p.hash(), ring.nodes()[p.owner() as usize].name.clone()))
        .collect()
}

/// One generated node change on a node list: op 0 adds `name` (or re-weights it when it is
/// there), op 1 re-weights it, op 2 removes it; a change of a missing node does nothing.
fn apply_op(nodes: &mut Vec<(Vec<u8>, u32)>, name: Vec<u8>, op: u8, weight: u32) {
    let at = nodes.iter().position(|(n, _)| *n == name);
    match (op, at) {
        (0, None) => nodes.push((name, weight)),
        (0 | 1, Some(i)) => nodes[i].1 = weight,
        (_, Some(i)) => {
            nodes.remove(i);
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Adding a node never moves a member between two old nodes (native, groupcache).
    #[test]
    fn adding_a_node_moves_members_only_to_it(
        nodes in names(8), extra in prop::collection::vec(any::<u8>(), 1..12),
        members in members(), vnodes in 1u32..40,
    ) {
        prop_assume!(!nodes.contains(&extra));
        for flavour in [Flavour::Native, Flavour::Groupcache] {
            let before = ring_of(flavour, vnodes, &nodes);
            let mut with_extra = nodes.clone();
            with_extra.push(extra.clone());
            let after = ring_of(flavour, vnodes, &with_extra);
            for (b, a) in owner_names(&before, &members).into_iter().zip(owner_names(&after, &members)) {
                prop_assert!(a == b || a.as_ref() == Some(&extra), "{:?} -> {:?}", b, a);
            }
        }
    }

    /// Adding then removing a node restores every owner and every point (all flavours,
    /// incrementally through set_nodes).
    #[test]
    fn removal_restores_previous_owners(
        nodes in names(8), extra in prop::collection::vec(any::<u8>(), 1..12),
        members in members(), weight in 1u32..5,
    ) {
        prop_assume!(!nodes.contains(&extra));
        for flavour in Flavour::ALL {
            let mut ring = ring_of(flavour, 20, &nodes);
            let before_points = named_points(&ring);
            let before = owner_names(&ring, &members);
            let mut grown: Vec<(Vec<u8>, u32)> = nodes.iter().map(|n| (n.clone(), 1)).collect();
            grown.push((extra.clone(), weight));
            ring.set_nodes(grown);
            ring.set_nodes(nodes.iter().map(|n| (n.clone(), 1)).collect());
            prop_assert_eq!(named_points(&ring), before_points.clone());
            prop_assert_eq!(owner_names(&ring, &members), before.clone());
        }
    }

    /// Lookups and points do not depend on the order nodes were added (native, groupcache),
    /// whether added at once or one at a time.
    #[test]
    fn lookups_do_not_depend_on_insertion_order(
        nodes in names(8), members in members(), seed in any::<u64>(),
    ) {
        let mut shuffled = nodes.clone();
        // A deterministic shuffle from the seed.
        let mut state = seed | 1;
        for i in (1..shuffled.len()).rev() {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17;
            shuffled.swap(i, (state % (i as u64 + 1)) as usize);
        }
        for flavour in [Flavour::Native, Flavour::Groupcache] {
            let a = ring_of(flavour, 10, &nodes);
            let mut b = Ring::new(flavour, 10, false);
            for i in 1..=shuffled.len() {
                b.set_nodes(shuffled[..i].iter().map(|n| (n.clone(), 1)).collect());
            }
            prop_assert_eq!(named_points(&a), named_points(&b));
            prop_assert_eq!(owner_names(&a, &members), owner_names(&b, &members));
        }
    }

    /// Any sequence of node changes on a big ring (joins, leaves, weight rises and falls)
    /// leaves the same points and owners as building the final ring from scratch (all
    /// flavours). Big enough that the incremental paths for few points run.
    #[test]
    fn changed_ring_equals_a_rebuild(
        ops in prop::collection::vec((0u8..3, 0u16..120, 1u32..4), 1..8),
        members in members(), vnodes in 8u32..20,
    ) {
        for flavour in Flavour::ALL {
            let mut nodes: Vec<(Vec<u8>, u32)> =
                (0..100).map(|i| (format!("cache-{i}").into_bytes(), 1)).collect();
            let mut ring = Ring::new(flavour, vnodes, false);
            ring.set_nodes(nodes.clone());
            for &(op, node, weight) in &ops {
                apply_op(&mut nodes, format!("cache-{node}").into_bytes(), op, weight);
                ring.set_nodes(nodes.clone());
            }
            let mut scratch = Ring::new(flavour, vnodes, false);
            scratch.set_nodes(nodes.clone());
            prop_assert_eq!(ring.points(), scratch.points());
            prop_assert_eq!(owner_names(&ring, &members), owner_names(&scratch, &members));
        }
    }

    /// After any sequence of node changes, a lookup through the bucket index (adjusted in
    /// place by each change where it can be) answers what a binary search over all the
    /// points answers, at every point, next to it and at random hashes (all flavours).
    #[test]
    fn indexed_lookups_equal_a_binary_search(
        ops in prop::collection::vec((0u8..3, 0u16..160, 1u32..4), 1..6),
        probes in prop::collection::vec(any::<u64>(), 1..64), vnodes in 1u32..12,
    ) {
        for flavour in Flavour::rings() {
            let mut nodes: Vec<(Vec<u8>, u32)> =
                (0..120).map(|i| (format!("shard-{i}").into_bytes(), 1)).collect();
            let mut ring = Ring::new(flavour, vnodes, false);
            ring.set_nodes(nodes.clone());
            for &(op, node, weight) in &ops {
                apply_op(&mut nodes, format!("shard-{node}").into_bytes(), op, weight);
                ring.set_nodes(nodes.clone());
                let points = ring.points();
                let mask = if flavour.hash_bits() == 32 { u64::from(u32::MAX) } else { u64::MAX };
                let near = points
                    .iter()
                    .flat_map(|p| [p.hash().wrapping_sub(1), p.hash(), p.hash().wrapping_add(1)]);
                for h in near.chain(probes.iter().copied()).map(|h| h & mask) {
                    let mut i = points.partition_point(|p| p.hash() < h) % points.len().max(1);
                    if flavour.lookup() == Lookup::Nearest && !points.is_empty() {
                        // HAProxy: the point before the first at or after wins when at most as far.
                        let prev = (i + points.len() - 1) % points.len();
                        let before = h.wrapping_sub(points[prev].hash()) & mask;
                        let after = points[i].hash().wrapping_sub(h) & mask;
                        if before <= after {
                            i = prev;
                        }
                    }
                    let expected = points.get(i).map(|p| p.owner() as usize);
                    prop_assert_eq!(ring.owner_of_hash(h), expected, "{:?} {}", flavour, h);
                }
            }
        }
    }

    /// Any weight >= 1 gets at least one point (native, groupcache), VNODES x weight exactly.
    #[test]
    fn every_weight_gets_points(weights in prop::collection::vec(1u32..50, 1..10), vnodes in 1u32..8) {
        for flavour in [Flavour::Native, Flavour::Groupcache] {
            let mut ring = Ring::new(flavour, vnodes, false);
            ring.set_nodes(weights.iter().enumerate().map(|(i, &w)| (format!("n{i}").into_bytes(), w)).collect());
            for (node, &w) in ring.nodes().iter().zip(&weights) {
                prop_assert_eq!(node.points, vnodes * w);
            }
            prop_assert_eq!(ring.point_count() as u32, vnodes * weights.iter().sum::<u32>());
        }
    }

    /// The slot table always covers 16384 slots with existing nodes, and after any sequence of
    /// changes each node holds what redis-cli's rebalance targets: its expected count
    /// `(int)((16384.0f / total_weight) * weight)` plus at most the rounding surplus.
    #[test]
    fn slot_table_covers_all_slots_and_matches_weights(
        ops in prop::collection::vec((0u8..3, 0u8..10, 1i64..6), 1..25),
    ) {
        let mut t = Topology::new(Flavour::Native, Some(4), false).unwrap();
        for (op, node, weight) in ops {
            let name = format!("10.0.0.{node}:6379");
            match op {
                0 => { t.add(&[name.as_bytes()], None, Limits::NONE).unwrap(); }
                1 => { t.add(&[name.as_bytes()], Some(weight), Limits::NONE).unwrap(); }
                _ => { t.del(&[name.as_bytes()]); }
            }
            let nodes = t.nodes();
            let counts = t.slot_table().counts(nodes.len());
            if nodes.is_empty() {
                prop_assert!(t.slot_table().is_empty());
                continue;
            }
            prop_assert_eq!(counts.iter().sum::<u32>() as usize, SLOT_COUNT);
            let total: f32 = nodes.iter().map(|n| n.weight as f32).sum();
            let expected: Vec<i64> = nodes.iter()
                .map(|n| ((SLOT_COUNT as f32 / total) * n.weight as f32) as i64)
                .collect();
            let surplus = SLOT_COUNT as i64 - expected.iter().sum::<i64>();
            // Right after the create layout (first nodes, equal weights) the ranges are
            // floor or ceil of 16384 / N, which satisfies the same bounds.
            for (&c, &e) in counts.iter().zip(&expected) {
                let c = i64::from(c);
                prop_assert!(e <= c && c <= e + surplus, "count {} expected {} surplus {}", c, e, surplus);
            }
            let owners: BTreeSet<usize> = t.slot_table().ranges().iter().map(|r| r.2).collect();
            prop_assert!(owners.iter().all(|&o| o < nodes.len()));
        }
    }

    /// The what-if (which looks only at the points that change) predicts exactly what the
    /// change does: for every member, the owner before and after under the ring, the slot
    /// table and modulo, compared by name with a copy of the topology changed through the
    /// writes (`add` / `del`), and the moved share of the hash space with a sweep over both
    /// rings' points. All flavours, joins, re-weights up and down, removals.
    #[test]
    fn what_if_predicts_the_change(
        start in prop::collection::vec(1u32..4, 1..12), op in 0u8..4, picks in prop::collection::vec(any::<u16>(), 1..4),
        weight in 1u32..5, members in members(), vnodes in 1u32..24,
    ) {
        for flavour in Flavour::ALL {
            let vnodes = (!flavour.fixes_vnodes()).then_some(i64::from(vnodes));
            let mut t = Topology::new(flavour, vnodes, false).unwrap();
            // redis-rb's ring has no weights: its nodes all weigh 1.
            let weigh = |w: u32| i64::from(if flavour.takes_weights() { w } else { 1 });
            for (i, &w) in start.iter().enumerate() {
                let name = format!("10.2.0.{i}:6379");
                t.add(&[name.as_bytes()], Some(weigh(w)), Limits::NONE).unwrap();
            }
            // One to three nodes of the ring (maybe the same one twice), or as many joiners.
            let targets: Vec<Vec<u8>> = picks
                .iter()
                .map(|&p| format!("10.2.0.{}:6379", usize::from(p) % start.len()).into_bytes())
                .collect();
            let joiners: Vec<Vec<u8>> = (0..picks.len()).map(|j| format!("joiner-{j}:6379").into_bytes()).collect();
            let change = match op {
                0 => Change::Add { nodes: joiners.clone(), weight: Some(weigh(weight)) },
                1 => Change::Add { nodes: targets.clone(), weight: Some(weigh(weight)) },
                // Joiners and re-weights in one change.
                2 => Change::Add {
                    nodes: [targets.clone(), joiners.clone()].concat(),
                    weight: Some(weigh(weight)),
                },
                _ => Change::Del { nodes: targets.clone() },
            };
            let w = t
                .what_if(&change, &members, &Scheme::DEFAULT, &SchemeParams::default(), Limits::NONE)
                .unwrap();
            let part = |s: Scheme| w.scheme(s).expect("asked for");
            let (w_ring, w_slots, w_modulo) = (part(Scheme::Ring), part(Scheme::Slots), part(Scheme::Modulo));
            let mut after = t.clone();
            let changed: Vec<Vec<u8>> = match &change {
                Change::Add { nodes, weight } => {
                    let refs: Vec<&[u8]> = nodes.iter().map(Vec::as_slice).collect();
                    after.add(&refs, *weight, Limits::NONE).unwrap();
                    // A re-weight to the weight a node has does not change it.
                    nodes
                        .iter()
                        .filter(|n| t.ring().node_index(n).is_none_or(|i| t.nodes()[i].weight != weight.unwrap_or(1) as u32))
                        .cloned()
                        .collect()
                }
                Change::Del { nodes } => {
                    let refs: Vec<&[u8]> = nodes.iter().map(Vec::as_slice).collect();
                    after.del(&refs);
                    nodes.clone()
                }
                Change::Rebalance { .. } => unreachable!(),
            };
            let changed: BTreeSet<Vec<u8>> = changed.into_iter().collect();
            let name = |topo: &Topology, i: Option<usize>| i.map(|i| topo.nodes()[i].name.clone());
            let (mut ring, mut slots, mut modulo) = ((0, 0), (0, 0), (0, 0));
            // The weighted what-if over the same members: moved bytes and hits, and each
            // node's load after, by name, against the changed copy.
            let weight_of = |i: usize, m: &[u8]| MemberWeight { bytes: 50 + m.len() as u64 * 7, hits: (i as u64 * 31) % 17 };
            let weighed = t
                .what_if_weighed(
                    &change,
                    members.iter().enumerate().map(|(i, m)| (m, weight_of(i, m))),
                    &Scheme::DEFAULT,
                    &SchemeParams::default(),
                    Limits::NONE,
                )
                .unwrap();
            let mut moved_weight: HashMap<Scheme, (u64, u64)> = HashMap::new();
            let mut load_after: HashMap<(Scheme, Vec<u8>), [u64; 3]> = HashMap::new();
            for (i, m) in members.iter().enumerate() {
                let wt = weight_of(i, m);
                let h = t.ring().member_hash(m);
                let modn = |topo: &Topology| {
                    let n = topo.nodes().len() as u64;
                    h.checked_rem(n).map(|i| topo.nodes()[i as usize].name.clone())
                };
                for (scheme, b, a) in [
                    (Scheme::Ring, name(&t, t.ring().owner(m)), name(&after, after.ring().owner(m))),
                    (Scheme::Slots, t.slot(m).1.map(<[u8]>::to_vec), after.slot(m).1.map(<[u8]>::to_vec)),
                    (Scheme::Modulo, modn(&t), modn(&after)),
                ] {
                    if b != a {
                        let e = moved_weight.entry(scheme).or_default();
                        e.0 += wt.bytes;
                        e.1 += wt.hits;
                    }
                    if let Some(a) = a {
                        let l = load_after.entry((scheme, a)).or_default();
                        l[0] += 1;
                        l[1] += wt.bytes;
                        l[2] += wt.hits;
                    }
                }
            }
            // The what-if's index space after the change: the ring's nodes, then the joiners.
            let mut space_names: Vec<Vec<u8>> = t.nodes().iter().map(|n| n.name.clone()).collect();
            for n in after.nodes() {
                if !space_names.contains(&n.name) {
                    space_names.push(n.name.clone());
                }
            }
            for scheme in Scheme::DEFAULT {
                let r = weighed.scheme(scheme).expect("asked for");
                prop_assert_eq!(r.moves.moved, part(scheme).moves.moved);
                let (bytes, hits) = moved_weight.get(&scheme).copied().unwrap_or_default();
                prop_assert_eq!((r.moves.moved_bytes, r.moves.moved_hits), (bytes, hits), "{:?} {:?}", flavour, scheme);
                let loads = r.loads.as_ref().expect("weighed");
                for (k, node) in space_names.iter().enumerate() {
                    let got = loads.nodes.get(k).copied().unwrap_or_default();
                    let want = load_after.get(&(scheme, node.clone())).copied().unwrap_or_default();
                    prop_assert_eq!(got, want, "{:?} {:?} node {}", flavour, scheme, k);
                }
                prop_assert!(loads.nodes.len() <= space_names.len());
            }
            prop_assert_eq!(weighed.bytes, members.iter().enumerate().map(|(i, m)| weight_of(i, m).bytes).sum::<u64>());
            let tally = |acc: &mut (u64, u64), b: Option<Vec<u8>>, a: Option<Vec<u8>>| {
                if b != a {
                    acc.0 += 1;
                    let touched = |n: &Option<Vec<u8>>| n.as_ref().is_some_and(|n| changed.contains(n));
                    if b.is_some() && a.is_some() && !touched(&b) && !touched(&a) {
                        acc.1 += 1;
                    }
                }
            };
            for m in &members {
                tally(&mut ring, name(&t, t.ring().owner(m)), name(&after, after.ring().owner(m)));
                tally(&mut slots, t.slot(m).1.map(<[u8]>::to_vec), after.slot(m).1.map(<[u8]>::to_vec));
                let h = t.ring().member_hash(m);
                let modn = |topo: &Topology| {
                    let n = topo.nodes().len() as u64;
                    h.checked_rem(n).map(|i| topo.nodes()[i as usize].name.clone())
                };
                tally(&mut modulo, modn(&t), modn(&after));
            }
            prop_assert_eq!((w_ring.moves.moved, w_ring.moves.between_old), ring, "{:?} ring", flavour);
            prop_assert_eq!((w_slots.moves.moved, w_slots.moves.between_old), slots, "{:?} slots", flavour);
            prop_assert_eq!((w_modulo.moves.moved, w_modulo.moves.between_old), modulo, "{:?} modulo", flavour);
            // The moved share: sweep the union of both rings' points (and, for a nearest-point
            // lookup, the half-way hashes where ownership also changes: every run's start).
            let mut bounds: Vec<u64> = t.ring().points().iter().chain(after.ring().points()).map(|p| p.hash()).collect();
            if flavour.lookup() == Lookup::Nearest {
                // Runs start where ownership changes; the sweep needs the hash before each.
                bounds.extend(t.ring().owner_runs().iter().chain(&after.ring().owner_runs()).map(|r| r.0.wrapping_sub(1) & u64::from(u32::MAX)));
            }
            bounds.sort_unstable();
            bounds.dedup();
            let space = flavour.space();
            let mut moved = 0u128;
            for (k, &x) in bounds.iter().enumerate() {
                let arc = match k.checked_sub(1) {
                    Some(j) => u128::from(x - bounds[j]),
                    None => u128::from(x) + space - u128::from(bounds[bounds.len() - 1]),
                };
                let by_hash = |topo: &Topology| name(topo, topo.ring().owner_of_hash(x));
                if by_hash(&t) != by_hash(&after) {
                    moved += arc;
                }
            }
            let expected = if bounds.is_empty() { 0.0 } else { moved as f64 / space as f64 };
            // A placement without points has no points to sweep (tables: engine/tests/compat).
            if flavour.rule() == Rule::Ring {
                let ring_space = w_ring.space.unwrap_or(f64::NAN);
                prop_assert!((ring_space - expected).abs() < 1e-12, "{:?}: {} vs {}", flavour, ring_space, expected);
            }
        }
    }

    /// The rebalance pending after `redis-cli --cluster add-node` (the new masters in the
    /// ring key, serving no slot) costs what adding them to the ring of the serving masters
    /// costs, under every scheme: the same moves, the same moves between old nodes, the same
    /// exact shares, wherever the new masters sit in the node list; and with the new masters
    /// last, the same slot plan.
    #[test]
    fn the_pending_rebalance_is_the_join_of_the_empty_masters(
        start in 1usize..8, joining in 1usize..4, at in prop::collection::vec(any::<u16>(), 3),
        weight in 1u32..3, members in members(),
    ) {
        for flavour in Flavour::ALL {
            let weight = if flavour.takes_weights() { weight } else { 1 };
            let mut serving = Topology::new(flavour, None, false).unwrap();
            let names: Vec<Vec<u8>> = (0..start).map(|i| format!("10.3.0.{i}:6379").into_bytes()).collect();
            let refs: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
            serving.add(&refs, None, Limits::NONE).unwrap();
            let joiners: Vec<Vec<u8>> = (0..joining).map(|j| format!("10.3.1.{j}:6379").into_bytes()).collect();
            // The mirror: every master, the empty ones at places of the list, the slots of the
            // serving ring.
            for last in [true, false] {
                // Where a node sits changes HAProxy's and Envoy's rings themselves.
                if !last && flavour.placement_follows_order() {
                    continue;
                }
                let mut parts: Vec<(Vec<u8>, u32)> = names.iter().map(|n| (n.clone(), 1)).collect();
                for (j, joiner) in joiners.iter().enumerate() {
                    let place = if last { parts.len() } else { usize::from(at[j]) % (parts.len() + 1) };
                    parts.insert(place, (joiner.clone(), weight));
                }
                let position = |name: &[u8]| parts.iter().position(|p| p.0 == name).unwrap();
                let ranges: Vec<(u16, u16, usize)> = serving
                    .slot_table()
                    .ranges()
                    .into_iter()
                    .map(|(a, b, o)| (a, b, position(&names[o])))
                    .collect();
                let vnodes = serving.config().vnodes;
                let mirror = Topology::from_parts(flavour, vnodes, false, parts.clone(), &ranges).unwrap();
                let rebalance = Change::Rebalance { threshold: 2.0, weights: Vec::new() };
                // The joiners in the mirror's order.
                let in_order: Vec<Vec<u8>> = parts.iter().map(|p| p.0.clone()).filter(|n| joiners.contains(n)).collect();
                let add = Change::Add { nodes: in_order, weight: Some(i64::from(weight)) };
                let params = SchemeParams::default();
                let pending = mirror.what_if(&rebalance, &members, &Scheme::ALL, &params, Limits::NONE).unwrap();
                let joined = serving.what_if(&add, &members, &Scheme::ALL, &params, Limits::NONE).unwrap();
                for (p, j) in pending.schemes.iter().zip(&joined.schemes) {
                    prop_assert_eq!(p.moves.moved, j.moves.moved, "{:?} {:?}", flavour, p.scheme);
                    prop_assert_eq!(p.moves.between_old, j.moves.between_old, "{:?} {:?}", flavour, p.scheme);
                    prop_assert_eq!(p.space.map(f64::to_bits), j.space.map(f64::to_bits), "{:?} {:?}", flavour, p.scheme);
                    prop_assert_eq!(p.slots_moved, j.slots_moved);
                }
                prop_assert!((pending.ideal - joined.ideal).abs() < 1e-12);
                if last {
                    prop_assert_eq!(mirror.plan(&rebalance, Limits::NONE).unwrap(), serving.plan(&add, Limits::NONE).unwrap());
                }
            }
        }
    }
}
