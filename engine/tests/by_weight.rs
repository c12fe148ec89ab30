//! The plan by weight against an exact solver: on small instances (8 slots, 3 masters, every
//! one of the 3^8 assignments tried) how often the greedy plan reaches the tolerance when some
//! plan does, and how much more weight it moves than the cheapest plan that does. The
//! instances come from a fixed generator (splitmix64), so the figures are the same every run;
//! they are printed (`cargo test --test by_weight -- --nocapture`) and bounded below.

use ringslot_engine::by_weight::{plan_by_weight, WeightPlan, WeightProblem};

/// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The cheapest assignment within the tolerance (its moved weight), by trying them all; `None`
/// when none is within it.
fn exact(p: &WeightProblem) -> Option<u64> {
    let masters = p.capacities.len();
    let slots = p.weights.len();
    let total: u64 = p.weights.iter().sum();
    let capacity: u64 = p.capacities.iter().map(|&c| u64::from(c)).sum();
    let targets: Vec<f64> = p
        .capacities
        .iter()
        .map(|&c| total as f64 * f64::from(c) / capacity as f64)
        .collect();
    let mut best: Option<u64> = None;
    let mut assignment = vec![0usize; slots];
    loop {
        let mut loads = vec![0u64; masters];
        let mut moved = 0;
        for (s, &m) in assignment.iter().enumerate() {
            loads[m] += p.weights[s];
            if p.owners[s] != Some(m) {
                moved += p.weights[s];
            }
        }
        let within = loads.iter().zip(&targets).all(|(&l, &t)| {
            l as f64 <= t * (1.0 + p.tolerance) + 1e-9 && l as f64 >= t * (1.0 - p.tolerance) - 1e-9
        });
        if within && best.is_none_or(|b| moved < b) {
            best = Some(moved);
        }
        // The next assignment, as a number in base `masters`.
        let mut i = 0;
        loop {
            if i == slots {
                return best;
            }
            assignment[i] += 1;
            if assignment[i] < masters {
                break;
            }
            assignment[i] = 0;
            i += 1;
        }
    }
}

/// What a plan claims, checked against its own moves: each slot moved once, from its owner,
/// loads that add up, and `within` true exactly when every load is within the tolerance.
fn check_plan(p: &WeightProblem, plan: &WeightPlan) {
    let mut owners: Vec<Option<usize>> = p.owners.to_vec();
    let mut seen = std::collections::HashSet::new();
    for m in &plan.moves {
        assert!(seen.insert(m.slot), "slot {} moved twice", m.slot);
        assert_eq!(owners[m.slot], Some(m.from));
        assert_eq!(m.weight, p.weights[m.slot]);
        owners[m.slot] = Some(m.to);
    }
    let mut loads = vec![0u64; p.capacities.len()];
    for (s, o) in owners.iter().enumerate() {
        if let Some(m) = o {
            loads[*m] += p.weights[s];
        }
    }
    assert_eq!(loads, plan.loads_after);
    assert_eq!(plan.moved, plan.moves.iter().map(|m| m.weight).sum::<u64>());
    let within = loads.iter().zip(&plan.targets).all(|(&l, &t)| {
        l as f64 <= t * (1.0 + p.tolerance) + 1e-9 && l as f64 >= t * (1.0 - p.tolerance) - 1e-9
    });
    assert_eq!(within, plan.within);
}

#[test]
fn the_greedy_plan_against_the_cheapest_plan_on_small_instances() {
    let mut rng = SplitMix(31);
    let (mut feasible, mut reached, mut optimal) = (0u32, 0u32, 0u32);
    let mut ratios: Vec<f64> = Vec::new();
    let instances = 2000;
    for _ in 0..instances {
        let slots = 8;
        // Weights from 1 to 100, and now and then a hot slot of up to 400.
        let weights: Vec<u64> = (0..slots)
            .map(|_| {
                if rng.below(8) == 0 {
                    100 + rng.below(300)
                } else {
                    1 + rng.below(100)
                }
            })
            .collect();
        let capacities: Vec<u32> = match rng.below(4) {
            0 => vec![1, 1, 0], // a drain
            1 => vec![2, 1, 1], // unequal weights
            _ => vec![1, 1, 1],
        };
        let owners: Vec<Option<usize>> = (0..slots).map(|_| Some(rng.below(3) as usize)).collect();
        let tolerance = [0.05, 0.1, 0.2, 0.3][rng.below(4) as usize];
        let p = WeightProblem {
            weights: &weights,
            owners: &owners,
            capacities: &capacities,
            tolerance,
            pinned: &[],
        };
        let plan = plan_by_weight(&p).unwrap();
        check_plan(&p, &plan);
        let Some(best) = exact(&p) else {
            assert!(
                !plan.within,
                "the plan claims a tolerance no assignment reaches"
            );
            continue;
        };
        feasible += 1;
        if plan.within {
            reached += 1;
            assert!(plan.moved >= best);
            if plan.moved == best {
                optimal += 1;
            }
            if best > 0 {
                ratios.push(plan.moved as f64 / best as f64);
            }
        }
    }
    ratios.sort_by(f64::total_cmp);
    let quantile = |q: f64| ratios[((ratios.len() - 1) as f64 * q) as usize];
    println!(
        "{instances} instances, {feasible} where some plan reaches the tolerance: the greedy plan \
         reached it in {reached} ({:.1}%), at the optimum's cost in {optimal}; moved / optimum: \
         median {:.2}, 90th percentile {:.2}, worst {:.2}",
        100.0 * f64::from(reached) / f64::from(feasible),
        quantile(0.5),
        quantile(0.9),
        quantile(1.0)
    );
    // The bounds below are the figures of this generator with a margin: a change of the
    // heuristic that makes it worse fails here.
    // Measured (2026-12-02): reached in 1511 of 1571 (96.2%), the optimum's cost in 996;
    // moved / optimum median 1.00, 90th percentile 1.26, worst 2.80.
    assert!(f64::from(reached) >= 0.95 * f64::from(feasible));
    assert!(quantile(0.5) <= 1.05);
    assert!(quantile(0.9) <= 1.5);
}
