//! Predis 1.1 `Cluster\Distributor\HashRing` and `KetamaRing` (`addNodeToRing()`): the points
//! of each node.

use super::{Flavour, KETAMA_POINTS_PER_SERVER};

/// Points per node of Predis's rings, in node order: `HashRing` takes
/// `round(weight / total x nodes x vnodes)` points, `KetamaRing` `floor(weight / total x nodes
/// x 40)` digests of four points (`addNodeToRing()` in Predis 1.1). PHP computes the share in
/// double precision, as here; its `round()` first rounds to 15 significant digits, so a
/// product within a rounding error of `.5` rounds up: the exact rational is rounded half up
/// instead (`2 w n v + W` over `2 W`, in integers), which agrees with PHP wherever the double
/// product is within 15 digits of it.
pub fn predis_point_counts(flavour: Flavour, vnodes: u32, weights: &[u32]) -> Vec<u64> {
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    let nodes = weights.len() as u64;
    weights
        .iter()
        .map(|&w| {
            if total == 0 {
                return 0;
            }
            match flavour {
                Flavour::PredisKetama => {
                    let share = f64::from(w) / total as f64 * nodes as f64;
                    let digests = (share * f64::from(KETAMA_POINTS_PER_SERVER / 4)).floor();
                    (digests as u64).saturating_mul(4)
                }
                _ => {
                    let scaled = u128::from(w) * u128::from(nodes) * u128::from(vnodes);
                    let rounded = (2 * scaled + u128::from(total)) / (2 * u128::from(total));
                    u64::try_from(rounded).unwrap_or(u64::MAX)
                }
            }
        })
        .collect()
}
