//! Every scheme side by side on one ring key: where a member lands under each (`RING.OWNERS`),
//! and how evenly each spreads the key space (`RING.BALANCE`). All run on the ring key's
//! nodes, in order, with their weights; what a scheme keeps (a Maglev table, multi-probe
//! points) is built for the call.

use super::keyslot::key_slot;
use super::schemes::{bounded_loads, Placement, Scheme, SchemeParams};
use super::topology::Topology;
use super::whatif::BOUNDED_MAX_MEMBERS;

/// One scheme's peak-to-mean share on a ring key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SchemeBalance {
    /// The scheme.
    pub scheme: Scheme,
    /// The largest `share / (weight / total weight)` over the nodes with weight.
    pub peak_to_mean: f64,
    /// Whether it is exact (from the scheme's structure) or estimated over sample members.
    pub exact: bool,
}

impl Topology {
    /// The owner of `member` under every scheme, as node indices, in [`Scheme::ALL`] order.
    /// Bounded loads with no other member placed is the ring. Builds every [`Placement`] (a
    /// Maglev table, multi-probe points): see [`crate::cost::owners`].
    pub fn owners(&self, member: &[u8], params: &SchemeParams) -> Vec<(Scheme, Option<usize>)> {
        let nodes = self.names_and_weights();
        let count = nodes.len() as u64;
        let ring_hash = self.ring().member_hash(member);
        let kh = self.scheme_key_hash(member);
        Scheme::ALL
            .into_iter()
            .map(|s| {
                let owner = match s {
                    Scheme::Ring | Scheme::Bounded => self.ring().owner_of_hash(ring_hash),
                    Scheme::Slots => self.slot_table().owner(key_slot(member)),
                    Scheme::Modulo => ring_hash.checked_rem(count).map(|i| i as usize),
                    placement => {
                        Placement::build(placement, &nodes, params).and_then(|p| p.owner(kh))
                    }
                };
                (s, owner)
            })
            .collect()
    }

    /// Each scheme's peak-to-mean share (see [`SchemeBalance`]), in [`Scheme::ALL`] order:
    /// exact for the ring (its arcs), the slot table (its slots), modulo (1/N of the hash space
    /// each, whatever the weights) and the placements with a finite key space (Maglev's
    /// entries); estimated over `sample` for the other placements (jump, rendezvous,
    /// multi-probe) and bounded loads (placed in the sample's order).
    pub fn balance<I, M>(&self, sample: I, params: &SchemeParams) -> Vec<SchemeBalance>
    where
        I: IntoIterator<Item = M>,
        M: AsRef<[u8]>,
    {
        let nodes = self.names_and_weights();
        let count = nodes.len();
        let total: f64 = nodes.iter().map(|n| f64::from(n.1)).sum();
        // The largest share over the fair share, from per-node tallies of `of` units.
        let peak = |tally: &[f64], of: f64| -> f64 {
            if of <= 0.0 || total <= 0.0 {
                return 0.0;
            }
            nodes
                .iter()
                .zip(tally)
                .filter(|(n, _)| n.1 > 0)
                .map(|(n, &t)| (t / of) / (f64::from(n.1) / total))
                .fold(0.0, f64::max)
        };
        // The placements: exact shares where they have them, else tallied over the sample.
        let placements: Vec<(Scheme, Placement, Option<Vec<f64>>)> = Scheme::ALL
            .into_iter()
            .filter_map(|s| {
                let p = Placement::build(s, &nodes, params)?;
                let exact = p.exact_shares(count);
                Some((s, p, exact))
            })
            .collect();
        let mut tallies = vec![vec![0f64; count]; placements.len()];
        let mut bounded = vec![0f64; count];
        let mut ring_hashes = Vec::new();
        let mut sampled = 0f64;
        for member in sample {
            let member = member.as_ref();
            sampled += 1.0;
            let kh = self.scheme_key_hash(member);
            for ((_, p, exact), tally) in placements.iter().zip(tallies.iter_mut()) {
                if exact.is_none() {
                    if let Some(slot) = p.owner(kh).and_then(|o| tally.get_mut(o)) {
                        *slot += 1.0;
                    }
                }
            }
            if ring_hashes.len() < BOUNDED_MAX_MEMBERS {
                ring_hashes.push(self.ring().member_hash(member));
            }
        }
        let (hashes, owners) = self.ring().points();
        let points: Vec<(u64, u32)> = hashes.iter().copied().zip(owners.iter().copied()).collect();
        let weights: Vec<u32> = nodes.iter().map(|n| n.1).collect();
        for o in bounded_loads(&points, &weights, &ring_hashes, params.balance_factor)
            .into_iter()
            .flatten()
        {
            if let Some(slot) = bounded.get_mut(o as usize) {
                *slot += 1.0;
            }
        }
        let modulo = vec![1.0; count];
        let stats = self.node_stats();
        let ring_shares: Vec<f64> = stats.iter().map(|s| s.ring_share).collect();
        let slot_shares: Vec<f64> = stats.iter().map(|s| s.slot_share).collect();
        Scheme::ALL
            .into_iter()
            .map(|scheme| {
                let (peak_to_mean, exact) = match scheme {
                    Scheme::Ring => (peak(&ring_shares, 1.0), true),
                    Scheme::Slots => (peak(&slot_shares, 1.0), true),
                    Scheme::Modulo => (peak(&modulo, count as f64), true),
                    Scheme::Bounded => (peak(&bounded, sampled), false),
                    placement => {
                        let at = placements.iter().position(|(s, ..)| *s == placement);
                        match at.and_then(|i| Some((placements.get(i)?, tallies.get(i)?))) {
                            Some(((_, _, Some(exact)), _)) => (peak(exact, 1.0), true),
                            Some(((_, _, None), tally)) => (peak(tally, sampled), false),
                            None => (0.0, false),
                        }
                    }
                };
                SchemeBalance {
                    scheme,
                    peak_to_mean,
                    exact,
                }
            })
            .collect()
    }
}
