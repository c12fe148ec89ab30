//! The comparison figures the project exists for, checked against theory: balance of a
//! 10-node ring, and what an 11th node costs under the ring, the slot table and modulo (the
//! default what-if of `engine/src/whatif.rs`).

use ringslot_engine::flavour::Rule;
use ringslot_engine::{
    Change, EngineError, Flavour, Limits, Scheme, SchemeMoves, SchemeParams, SchemeResult,
    Topology, WhatIf,
};

/// The default what-if (ring, slot table, modulo) of `change` over `members`.
fn what_if(
    t: &Topology,
    change: &Change,
    members: Vec<Vec<u8>>,
    limits: Limits,
) -> Result<WhatIf, EngineError> {
    t.what_if(
        change,
        members,
        &Scheme::DEFAULT,
        &SchemeParams::default(),
        limits,
    )
}

/// The part of `scheme` in a what-if.
fn part(w: &WhatIf, scheme: Scheme) -> &SchemeResult {
    w.scheme(scheme).expect("the scheme was asked for")
}

/// The moves of the ring, the slot table and modulo, the ring's exact moved space and the
/// slots moved.
fn parts(w: &WhatIf) -> (SchemeMoves, f64, SchemeMoves, u32, SchemeMoves) {
    let ring = part(w, Scheme::Ring);
    let slots = part(w, Scheme::Slots);
    (
        ring.moves,
        ring.space.unwrap_or(f64::NAN),
        slots.moves,
        slots.slots_moved.expect("slots moved"),
        part(w, Scheme::Modulo).moves,
    )
}

fn ten_nodes(flavour: Flavour) -> Topology {
    let mut t = Topology::new(flavour, None, false).expect("ring");
    let names: Vec<String> = (1..=10).map(|i| format!("10.0.0.{i}:6379")).collect();
    let refs: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
    t.add(&refs, None, Limits::NONE).expect("add");
    t
}

fn sample(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("key:{i}").into_bytes()).collect()
}

#[test]
fn ten_node_native_ring_balance_is_near_1_1() {
    let t = ten_nodes(Flavour::Native);
    let p2m = t.ring_peak_to_mean();
    println!("native ring, 10 nodes x 160 points: peak-to-mean {p2m:.4}");
    // With 160 points per node the heaviest node's share is typically 5-15% over the mean.
    assert!(p2m > 1.0 && p2m < 1.25, "peak-to-mean {p2m}");
    // The create layout gives each of 10 masters 1638 or 1639 slots: 1639 / 1638.4.
    let slot_p2m = t.slot_peak_to_mean();
    assert!(
        (slot_p2m - 1639.0 / 1638.4).abs() < 1e-9,
        "slot peak-to-mean {slot_p2m}"
    );
    let shares: f64 = t.node_stats().iter().map(|s| s.ring_share).sum();
    assert!((shares - 1.0).abs() < 1e-12);
}

#[test]
fn an_eleventh_node_moves_about_one_eleventh() {
    let t = ten_nodes(Flavour::Native);
    let change = Change::Add {
        nodes: vec![b"10.0.0.11:6379".to_vec()],
        weight: Some(1),
    };
    let w = what_if(&t, &change, sample(100_000), Limits::NONE).expect("what-if");
    let (ring, ring_space, slots, slots_moved, modulo) = parts(&w);
    println!("{w:#?}");
    assert_eq!(w.members, 100_000);
    assert!((w.ideal - 1.0 / 11.0).abs() < 1e-12);
    // Ring: the new node's exact share of the space is about 1/11 (160 points give it a
    // spread of several percent), the sample follows it, and nothing moves between the old
    // nodes.
    assert!(
        (ring_space - 1.0 / 11.0).abs() < 0.03,
        "space {}",
        ring_space
    );
    assert!(
        (ring.fraction - ring_space).abs() < 0.02,
        "ring {}",
        ring.fraction
    );
    assert_eq!(ring.between_old, 0);
    assert!(
        (slots.fraction - 1.0 / 11.0).abs() < 0.01,
        "slots {}",
        slots.fraction
    );
    assert_eq!(slots.between_old, 0);
    // redis-cli gives the new node (int)(16384 / 11) = 1489 slots, plus the rounding surplus
    // of 16384 - 11 * 1489 = 5 at most.
    assert!(
        (1489..=1494).contains(&slots_moved),
        "slots moved {}",
        slots_moved
    );
    // Modulo: h mod 10 == h mod 11 for 1 in 11 hashes, so 10/11 move.
    assert!(
        (modulo.fraction - 10.0 / 11.0).abs() < 0.01,
        "modulo {}",
        modulo.fraction
    );
    assert!(modulo.between_old > 80_000);
    // When a node joins, the space that changes owner is exactly the space it takes.
    assert!((ring_space - t_share_after(&t)).abs() < 1e-12);
}

/// The share the new node would own: the exact moved space when a node joins a ring.
fn t_share_after(t: &Topology) -> f64 {
    let mut after = t.clone();
    after
        .add(&[b"10.0.0.11:6379".as_slice()], None, Limits::NONE)
        .expect("add");
    after.node_stats().last().expect("node").ring_share
}

#[test]
fn removing_a_node_moves_only_its_members() {
    for flavour in Flavour::ALL {
        let t = ten_nodes(flavour);
        let change = Change::Del {
            nodes: vec![b"10.0.0.4:6379".to_vec()],
        };
        let w = what_if(&t, &change, sample(20_000), Limits::NONE).expect("what-if");
        let (ring, _, slots, slots_moved, _) = parts(&w);
        assert!((w.ideal - 0.1).abs() < 1e-12);
        if flavour.points_by_position() {
            // HAProxy keys points by the server's place: the six servers after the one that
            // leaves are renumbered and all their points move (what `id` on each server
            // prevents).
            assert!(ring.between_old > 5_000, "{flavour:?} {}", ring.between_old);
        } else if flavour.rule() == Rule::Modula {
            // python-memcached: hash mod N moves most keys between the servers that stay.
            assert!(
                ring.between_old > 10_000,
                "{flavour:?} {}",
                ring.between_old
            );
        } else if !matches!(
            flavour,
            Flavour::Ketama
                | Flavour::EnvoyRing
                | Flavour::EnvoyRedis
                | Flavour::McrouterCh3
                | Flavour::EnvoyMaglev
        ) {
            // ketama's and Envoy's counts follow the node count, mcrouter's index shifts with
            // the list and Maglev's table refills: those move keys between old nodes too.
            assert_eq!(ring.between_old, 0, "{flavour:?}");
        }
        assert_eq!(slots.between_old, 0);
        let share = t.node_stats()[3].slots;
        assert_eq!(
            slots_moved, share,
            "the drained node's slots move, no others"
        );
    }
}

#[test]
fn ketama_reports_a_starved_server_with_zero_points() {
    // libmemcached's formula by hand: the light server gets floor(1/1000001 * 160/4 * 2) * 4
    // = 0 points; the heavy one floor(0.999999 * 160/4 * 2 = 79.99992) * 4 = 316.
    let mut t = Topology::new(Flavour::Ketama, None, false).expect("ring");
    t.add(&[b"heavy:11211".as_slice()], Some(1_000_000), Limits::NONE)
        .expect("add");
    t.add(&[b"light:11211".as_slice()], Some(1), Limits::NONE)
        .expect("add");
    let stats = t.node_stats();
    assert_eq!(stats[1].points, 0);
    assert_eq!(stats[1].ring_share, 0.0);
    assert_eq!(stats[0].points, 316);
}

#[test]
fn errors_leave_the_ring_unchanged() {
    let mut t = ten_nodes(Flavour::Native);
    let before = (t.node_stats().len(), t.slot_ranges().len());
    assert!(t.add(&[b"".as_slice()], None, Limits::NONE).is_err());
    assert!(t.add(&[b"x".as_slice()], Some(0), Limits::NONE).is_err());
    let points = |points| Limits {
        points,
        nodes: u64::MAX,
    };
    assert!(t.add(&[b"x".as_slice()], None, points(1000)).is_err());
    // Eleven nodes where ten are allowed.
    let ten = Limits {
        points: u64::MAX,
        nodes: 10,
    };
    assert_eq!(
        t.add(&[b"x".as_slice()], None, ten),
        Err(EngineError::TooManyNodes {
            nodes: 11,
            limit: 10
        })
    );
    assert!(t.assign(0, 16384, b"10.0.0.1:6379").is_err());
    assert!(t.assign(5, 4, b"10.0.0.1:6379").is_err());
    assert!(t.assign(0, 1, b"nope").is_err());
    // Adding a node of the ring without a WEIGHT (with one it is a re-weight).
    let add_existing = Change::Add {
        nodes: vec![b"10.0.0.1:6379".to_vec()],
        weight: None,
    };
    assert_eq!(
        what_if(&t, &add_existing, sample(1), Limits::NONE),
        Err(EngineError::NodeExists(b"10.0.0.1:6379".to_vec()))
    );
    // A what-if whose ring would pass the point limit is refused before it builds anything:
    // 10 nodes x 160 points now, plus 160 x 1000000 for the new node.
    let heavy = Change::Add {
        nodes: vec![b"heavy".to_vec()],
        weight: Some(1_000_000),
    };
    assert_eq!(
        what_if(&t, &heavy, sample(1), points(10_000_000)),
        Err(EngineError::TooManyPoints {
            points: 1600 + 160_000_000,
            limit: 10_000_000
        })
    );
    assert!(Topology::new(Flavour::Ketama, Some(10), false).is_err());
    assert_eq!(before, (t.node_stats().len(), t.slot_ranges().len()));
    assert_eq!(t.ring().point_count(), 1600);
}

/// A 4-node ring of `flavour` (160 points each) gaining a 5th, over `key:0` .. `key:99999`:
/// (sampled fraction, exact space, standard error).
fn fifth_node(flavour: Flavour) -> (f64, f64, f64) {
    let mut t = Topology::new(flavour, None, false).expect("ring");
    let names: Vec<String> = (1..=4).map(|i| format!("cache-{i}")).collect();
    let refs: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
    t.add(&refs, None, Limits::NONE).expect("add");
    let change = Change::Add {
        nodes: vec![b"cache-5".to_vec()],
        weight: None,
    };
    let w = what_if(&t, &change, sample(100_000), Limits::NONE).expect("what-if");
    let (ring, ring_space, ..) = parts(&w);
    (ring.fraction, ring_space, ring.standard_error)
}

#[test]
fn the_native_sample_of_sequential_keys_matches_the_exact_space() {
    // Statistical, with a generous bound: with the strong native hash, sequential members
    // behave as independent draws, so the sampled fraction lies within 5 standard errors of
    // the exact moved share of the hash space (deterministic: the same every run).
    let (fraction, space, se) = fifth_node(Flavour::Native);
    println!("native: fraction {fraction:.4} space {space:.4} se {se:.4}");
    assert!(
        (fraction - space).abs() < 5.0 * se,
        "native: fraction {fraction} space {space} se {se}"
    );
}

#[test]
fn placements_without_points_stay_small_and_bounded() {
    // A python-memcached ring of heavy weights keeps one running total a node, not an entry
    // a unit of weight (10 nodes of weight 1000000 would be 40 MB as a repeated list).
    let mut t = Topology::new(Flavour::PythonMemcached, None, false).expect("ring");
    let names: Vec<String> = (0..10).map(|i| format!("10.0.0.{i}:11211")).collect();
    let refs: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
    t.add(&refs, Some(1_000_000), Limits::NONE).expect("add");
    assert!(
        t.ring().memory_bytes() < 16 * 1024,
        "{}",
        t.ring().memory_bytes()
    );
    // Owners as the repeated list gives them: equal weights, so hash mod 10 million over
    // runs of a million.
    let h = t.ring().member_hash(b"some key");
    assert_eq!(
        t.ring().owner_of_hash(h),
        Some((h % 10_000_000 / 1_000_000) as usize)
    );
    // HAProxy's weights stop at 256; redis-rb has none.
    let mut hap = Topology::new(Flavour::Haproxy, None, false).expect("ring");
    assert_eq!(
        hap.add(&[b"s1".as_slice()], Some(257), Limits::NONE),
        Err(ringslot_engine::EngineError::BadWeight { max: 256 })
    );
    assert!(hap
        .add(&[b"s1".as_slice()], Some(256), Limits::NONE)
        .is_ok());
}
