//! The what-if: what a change of a ring key's nodes would cost under any of the schemes
//! (`RING.MOVES`), over a list of members, changing nothing and copying nothing of the ring:
//! how many members change owner, how many of those move between two nodes that were there
//! before and after, and, where a scheme has one, the exact share of its key space that changes
//! owner.
//!
//! All schemes run on the nodes of the ring key, in order, with their weights, in the common
//! index space of [`super::ring::delta`] (the ring's node indices, the joining nodes after
//! them); for a pending rebalance, the ring's nodes are those that serve slots now, and those
//! the rebalance gives their first slots join. What a scheme keeps (a Maglev table, multi-probe points, the changed ring's points
//! for bounded loads) is built for the call and dropped after: nothing is stored in the ring.

use super::change::Change;
use super::error::EngineError;
use super::keyslot::{key_slot, SLOT_COUNT};
use super::schemes::{bounded_for, Placement, Scheme, SchemeParams};
use super::topology::{Limits, Topology};
use super::weigh::MemberWeight;
use std::borrow::Cow;

/// Members whose ring lookups a what-if sorts and makes together (512 KiB of hashes).
const RING_CHUNK: usize = 65536;

/// Members bounded loads keeps (one 8-byte hash each) for a what-if: it places every member
/// knowing how many there are, so it cannot stream them.
pub const BOUNDED_MAX_MEMBERS: usize = 10_000_000;

/// Moves under one scheme.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SchemeMoves {
    /// Members whose owner changed.
    pub moved: u64,
    /// Members that moved between two nodes none of which joined, left or was re-weighted:
    /// the moves a perfect scheme never makes.
    pub between_old: u64,
    /// `moved / members` (0.0 when there are no members).
    pub fraction: f64,
    /// The standard error `fraction` would have if the members were independent draws:
    /// `sqrt(fraction (1 - fraction) / members)` (0.0 when there are no members). Sequential
    /// members on a weak hash are not independent (see the native-fnv flavour), which is
    /// when `fraction` and the exact `space` disagree by more than a few of these.
    pub standard_error: f64,
    /// The bytes of the members whose owner changed (a weighted what-if; else 0).
    pub moved_bytes: u64,
    /// The hits of the members whose owner changed (a weighted what-if; else 0).
    pub moved_hits: u64,
}

/// Each node's load after the change under one scheme, in a weighted what-if: what the members
/// that node owns after the change add up to.
#[derive(Debug, Clone, PartialEq)]
pub struct Loads {
    /// Per node, in the scheme's index space after the change: members, bytes and hits owned.
    /// For every scheme but the slot table, the ring's nodes in order, then the joining ones
    /// (for a pending rebalance, only the nodes that serve slots now, then those it gives
    /// their first slots); for the slot table, the key's node indices, then the joining ones.
    pub nodes: Vec<[u64; 3]>,
    /// The largest `load share / weight share` over the nodes that serve after the change, for
    /// members, bytes and hits (1.0: as even as the weights; 0.0 when nothing weighs).
    pub peak_to_mean: [f64; 3],
}

/// The largest `(load_i / total) / (w_i / W)` over the nodes `i` with `serving(i)`, where `W`
/// is the weight of those nodes: 1.0 when each carries its fair share. 0.0 when nothing is
/// carried or nobody serves.
pub fn peak_to_mean(load: &[u64], weights: &[u32], serving: impl Fn(usize) -> bool) -> f64 {
    let total: f64 = load.iter().map(|&l| l as f64).sum();
    let weight: f64 = (0..weights.len())
        .filter(|&i| serving(i))
        .filter_map(|i| weights.get(i))
        .map(|&w| f64::from(w))
        .sum();
    if total <= 0.0 || weight <= 0.0 {
        return 0.0;
    }
    weights
        .iter()
        .enumerate()
        .filter(|&(i, &w)| serving(i) && w > 0)
        .map(|(i, &w)| {
            let l = load.get(i).map_or(0.0, |&l| l as f64);
            (l / total) / (f64::from(w) / weight)
        })
        .fold(0.0, f64::max)
}

/// Counts the moves of one scheme over members; owners are in the common index space of
/// [`crate::ring::delta`].
#[derive(Default)]
struct Counter {
    moved: u64,
    between_old: u64,
    moved_bytes: u64,
    moved_hits: u64,
    /// Per node after the change: members, bytes, hits (a weighted what-if only).
    load: Option<Vec<[u64; 3]>>,
}

impl Counter {
    fn new(weighed: bool) -> Counter {
        Counter {
            load: weighed.then(Vec::new),
            ..Counter::default()
        }
    }

    /// Counts one member of weight `w` whose owner was `before` and is `after`; `changed`
    /// marks the nodes that join, leave or are re-weighted.
    fn count(
        &mut self,
        before: Option<usize>,
        after: Option<usize>,
        changed: &[bool],
        w: MemberWeight,
    ) {
        if let (Some(load), Some(a)) = (&mut self.load, after) {
            if load.len() <= a {
                load.resize(a + 1, [0; 3]);
            }
            if let Some(l) = load.get_mut(a) {
                l[0] += 1;
                l[1] += w.bytes;
                l[2] += w.hits;
            }
        }
        if before == after {
            return;
        }
        self.moved += 1;
        self.moved_bytes += w.bytes;
        self.moved_hits += w.hits;
        let touched = |i: usize| changed.get(i).copied().unwrap_or(true);
        if let (Some(b), Some(a)) = (before, after) {
            if !touched(b) && !touched(a) {
                self.between_old += 1;
            }
        }
    }

    fn finish(&self, members: u64) -> SchemeMoves {
        let (fraction, standard_error) = if members == 0 {
            (0.0, 0.0)
        } else {
            let f = self.moved as f64 / members as f64;
            (f, (f * (1.0 - f) / members as f64).sqrt())
        };
        SchemeMoves {
            moved: self.moved,
            between_old: self.between_old,
            fraction,
            standard_error,
            moved_bytes: self.moved_bytes,
            moved_hits: self.moved_hits,
        }
    }
}

/// One scheme's part of a what-if.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemeResult {
    /// The scheme.
    pub scheme: Scheme,
    /// Its moves over the members.
    pub moves: SchemeMoves,
    /// The exact share of the key space whose owner changes, where the scheme has one: the
    /// ring's swept arcs, the slot table's slots moved / 16384, Maglev's entries changed / M.
    pub space: Option<f64>,
    /// Slots whose owner changes (the slot table only).
    pub slots_moved: Option<u32>,
    /// Each node's load after the change (a weighted what-if only).
    pub loads: Option<Loads>,
}

/// A what-if: what `RING.MOVES` replies.
#[derive(Debug, Clone, PartialEq)]
pub struct WhatIf {
    /// Members evaluated.
    pub members: u64,
    /// Their bytes (a weighted what-if; else 0).
    pub bytes: u64,
    /// Their hits (a weighted what-if; else 0).
    pub hits: u64,
    /// The fraction a perfect scheme moves: the share of the total weight the joining nodes
    /// gain or the leaving nodes had (in general, the total variation of the nodes' shares).
    pub ideal: f64,
    /// One result per scheme asked for, in the order asked.
    pub schemes: Vec<SchemeResult>,
}

impl WhatIf {
    /// The result of `scheme`, if it was asked for.
    pub fn scheme(&self, scheme: Scheme) -> Option<&SchemeResult> {
        self.schemes.iter().find(|r| r.scheme == scheme)
    }
}

impl Topology {
    /// Evaluates `change` over `members` under each of `schemes`, changing nothing and copying
    /// nothing of the ring: the ring side looks only at the points that change
    /// ([`crate::Ring::delta`]), the slot table rebalances a copy of its 16384 slots, each
    /// [`Placement`] is built before and after the change. Bounded loads places the members in
    /// the order given, before and after the change, knowing their number: it keeps one hash
    /// per member, at most [`BOUNDED_MAX_MEMBERS`]. Cost: see [`crate::cost::what_if`]. Errors:
    /// adding a node already in the ring without a weight, removing an unknown node, a bad
    /// weight, a ring that would pass `limits` after the change (checked before anything is
    /// built), too many members for bounded loads.
    pub fn what_if<I, M>(
        &self,
        change: &Change,
        members: I,
        schemes: &[Scheme],
        params: &SchemeParams,
        limits: Limits,
    ) -> Result<WhatIf, EngineError>
    where
        I: IntoIterator<Item = M>,
        M: AsRef<[u8]>,
    {
        let members = members.into_iter().map(|m| (m, MemberWeight::default()));
        self.evaluate(change, members, schemes, params, limits, false)
    }

    /// [`Topology::what_if`] over members that carry weights (bytes and hits,
    /// [`MemberWeight`]): each scheme's moves count the moved bytes and hits as well, and its
    /// [`Loads`] give each node's members, bytes and hits after the change, with their
    /// peak-to-mean (the fair share of a node is its weight over the weight of the nodes that
    /// serve after the change; for the slot table, the nodes that own slots after it). Cost
    /// and errors: as [`Topology::what_if`], plus 24 bytes a node a scheme.
    pub fn what_if_weighed<I, M>(
        &self,
        change: &Change,
        members: I,
        schemes: &[Scheme],
        params: &SchemeParams,
        limits: Limits,
    ) -> Result<WhatIf, EngineError>
    where
        I: IntoIterator<Item = (M, MemberWeight)>,
        M: AsRef<[u8]>,
    {
        self.evaluate(change, members, schemes, params, limits, true)
    }

    /// The what-if of both: `weighed` keeps the loads after the change.
    fn evaluate<I, M>(
        &self,
        change: &Change,
        members: I,
        schemes: &[Scheme],
        params: &SchemeParams,
        limits: Limits,
        weighed: bool,
    ) -> Result<WhatIf, EngineError>
    where
        I: IntoIterator<Item = (M, MemberWeight)>,
        M: AsRef<[u8]>,
    {
        let p = self.prepare(change, limits)?;
        let wants = |s: Scheme| schemes.contains(&s);
        // The ring before the change (for a pending rebalance, without the nodes that serve no
        // slot yet), for every scheme but the slot table.
        let base = if schemes.iter().any(|&s| s != Scheme::Slots) {
            p.base(self)?
        } else {
            Cow::Borrowed(self)
        };
        let base = base.as_ref();
        let count = base.nodes().len();
        // Each scheme's state, built only when the scheme is asked for.
        let delta = (wants(Scheme::Ring) || wants(Scheme::Bounded))
            .then(|| base.ring().delta(&p.node_change));
        let slots_after = wants(Scheme::Slots).then(|| p.slots_after(self).0);
        // Modulo over the nodes in order, before and after (the nodes that stay, then those
        // that join), each index after the change mapped back to the common space.
        let modulo_after: Vec<usize> = (0..p.weights.len())
            .filter(|&i| p.weights.get(i).is_some_and(|&w| w > 0))
            .collect();
        let after_of = |hash: u64| -> Option<usize> {
            let i = hash.checked_rem(modulo_after.len() as u64)?;
            modulo_after.get(i as usize).copied()
        };
        let placements: Vec<(usize, Placement, Placement)> =
            if schemes.iter().any(|s| s.is_placement()) {
                let before = base.names_and_weights();
                let after = p.after_nodes();
                schemes
                    .iter()
                    .enumerate()
                    .filter_map(|(i, &s)| {
                        let b = Placement::build(s, &before, params)?;
                        let a = b.after(&p.node_change, &after, params);
                        Some((i, b, a))
                    })
                    .collect()
            } else {
                Vec::new()
            };

        let mut counters: Vec<Counter> = schemes.iter().map(|_| Counter::new(weighed)).collect();
        let ring_at = schemes.iter().position(|&s| s == Scheme::Ring);
        let slots_at = schemes.iter().position(|&s| s == Scheme::Slots);
        let modulo_at = schemes.iter().position(|&s| s == Scheme::Modulo);
        let bounded_at = schemes.iter().position(|&s| s == Scheme::Bounded);
        // Ring lookups go in hash order, a chunk at a time: on a ring bigger than the CPU's
        // caches, members spread evenly by a good hash would each cost several cache misses
        // in arrival order, and a sorted chunk walks the ring's points forward instead. The
        // counts do not depend on the order.
        let mut chunk: Vec<(u64, MemberWeight)> = Vec::new();
        let keyed = base.ring().owner_needs_key();
        let flush = |chunk: &mut Vec<(u64, MemberWeight)>, counters: &mut [Counter]| {
            chunk.sort_unstable_by_key(|c| c.0);
            if let (Some(d), Some(counter)) = (&delta, ring_at.and_then(|i| counters.get_mut(i))) {
                for &(hash, w) in chunk.iter() {
                    counter.count(
                        base.ring().owner_of_hash(hash),
                        d.owner_after(hash),
                        &p.changed,
                        w,
                    );
                }
            }
            chunk.clear();
        };
        let mut bounded_hashes: Vec<u64> = Vec::new();
        let mut bounded_weights: Vec<MemberWeight> = Vec::new();
        let (mut seen, mut bytes, mut hits) = (0u64, 0u64, 0u64);
        for (member, w) in members {
            let member = member.as_ref();
            seen += 1;
            bytes += w.bytes;
            hits += w.hits;
            let ring_hash = base.ring().member_hash(member);
            if keyed {
                // pymemcache scores the key itself with each node: no hash order to follow.
                if let (Some(d), Some(c)) = (&delta, ring_at.and_then(|i| counters.get_mut(i))) {
                    c.count(
                        base.ring().owner(member),
                        d.owner_after_member(member),
                        &p.changed,
                        w,
                    );
                }
            } else if ring_at.is_some() {
                chunk.push((ring_hash, w));
                if chunk.len() == RING_CHUNK {
                    flush(&mut chunk, &mut counters);
                }
            }
            if let (Some(i), Some(after)) = (slots_at, &slots_after) {
                let slot = key_slot(member);
                if let Some(c) = counters.get_mut(i) {
                    c.count(
                        self.slot_table().owner(slot),
                        after.owner(slot),
                        &p.slot_changed,
                        w,
                    );
                }
            }
            if let Some(c) = modulo_at.and_then(|i| counters.get_mut(i)) {
                let before = ring_hash.checked_rem(count as u64).map(|i| i as usize);
                c.count(before, after_of(ring_hash), &p.changed, w);
            }
            if !placements.is_empty() {
                let kh = base.scheme_key_hash(member);
                for (i, before, after) in &placements {
                    if let Some(c) = counters.get_mut(*i) {
                        c.count(before.owner(kh), after.owner(kh), &p.changed, w);
                    }
                }
            }
            if bounded_at.is_some() {
                if bounded_hashes.len() >= BOUNDED_MAX_MEMBERS {
                    return Err(EngineError::BoundedTooMany {
                        limit: BOUNDED_MAX_MEMBERS as u64,
                    });
                }
                bounded_hashes.push(ring_hash);
                if weighed {
                    bounded_weights.push(w);
                }
            }
        }
        flush(&mut chunk, &mut counters);
        // Bounded loads: placed now that the members are known.
        if let (Some(i), Some(d)) = (bounded_at, &delta) {
            let points_before: Vec<(u64, u32)> =
                base.ring().points().iter().map(|p| p.pair()).collect();
            let weights_before: Vec<u32> = base.nodes().iter().map(|n| n.weight).collect();
            let flavour = base.ring().flavour();
            let was = bounded_for(
                flavour,
                &points_before,
                &weights_before,
                &bounded_hashes,
                params.balance_factor,
            );
            drop(points_before);
            let now = bounded_for(
                flavour,
                &d.after_points(),
                &p.weights,
                &bounded_hashes,
                params.balance_factor,
            );
            if let Some(counter) = counters.get_mut(i) {
                for (i, (w, n)) in was.iter().zip(&now).enumerate() {
                    let weight = bounded_weights.get(i).copied().unwrap_or_default();
                    counter.count(
                        w.map(|o| o as usize),
                        n.map(|o| o as usize),
                        &p.changed,
                        weight,
                    );
                }
            }
        }
        let results = schemes
            .iter()
            .zip(&counters)
            .enumerate()
            .map(|(i, (&scheme, counter))| {
                let (space, slots_moved) = match scheme {
                    // Estimated shares are not given as the exact moved space.
                    Scheme::Ring => (
                        delta
                            .as_ref()
                            .filter(|_| base.ring().flavour().exact_shares())
                            .map(|d| d.moved_space()),
                        None,
                    ),
                    Scheme::Slots => {
                        let moved = slots_after.as_ref().map_or(0, |t| {
                            (0..SLOT_COUNT as u16)
                                .filter(|&s| self.slot_table().owner(s) != t.owner(s))
                                .count() as u32
                        });
                        (Some(f64::from(moved) / SLOT_COUNT as f64), Some(moved))
                    }
                    _ => (
                        placements
                            .iter()
                            .find(|(at, ..)| *at == i)
                            .and_then(|(_, b, a)| b.changed_space(a)),
                        None,
                    ),
                };
                let loads = counter.load.as_ref().map(|load| {
                    if scheme == Scheme::Slots {
                        let owns = slots_after
                            .as_ref()
                            .map(|t| t.counts(p.slot_weights.len()))
                            .unwrap_or_default();
                        // A node that keeps slots with weight 0 (a drain under the threshold)
                        // counts as weight 1, as on the rings.
                        let serves = |i: usize| owns.get(i).is_some_and(|&c| c > 0);
                        let weights: Vec<u32> = p
                            .slot_weights
                            .iter()
                            .enumerate()
                            .map(|(i, &w)| if serves(i) { w.max(1) } else { w })
                            .collect();
                        loads(load, &weights, serves)
                    } else {
                        loads(load, &p.weights, |i| {
                            p.weights.get(i).is_some_and(|&w| w > 0)
                        })
                    }
                });
                SchemeResult {
                    scheme,
                    moves: counter.finish(seen),
                    space,
                    slots_moved,
                    loads,
                }
            })
            .collect();
        Ok(WhatIf {
            members: seen,
            bytes,
            hits,
            ideal: p.ideal,
            schemes: results,
        })
    }
}

/// [`Loads`] from per-node tallies, with the weights after the change and who serves.
fn loads(load: &[[u64; 3]], weights: &[u32], serving: impl Fn(usize) -> bool) -> Loads {
    let mut nodes = load.to_vec();
    nodes.resize(nodes.len().max(weights.len()), [0; 3]);
    let column = |k: usize| -> Vec<u64> { nodes.iter().map(|n| n[k]).collect() };
    let peak = [0, 1, 2].map(|k| peak_to_mean(&column(k), weights, &serving));
    Loads {
        nodes,
        peak_to_mean: peak,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_to_mean_is_the_heaviest_share_over_its_fair_share() {
        // Loads that follow the weights are even.
        assert_eq!(peak_to_mean(&[10, 10, 20], &[1, 1, 2], |_| true), 1.0);
        // 30 of 40 on one of three equal nodes: 0.75 / (1/3).
        assert!((peak_to_mean(&[30, 10, 0], &[1, 1, 1], |_| true) - 2.25).abs() < 1e-12);
        // A node that does not serve is not part of the mean.
        assert!((peak_to_mean(&[30, 10, 0], &[1, 1, 1], |i| i < 2) - 1.5).abs() < 1e-12);
        // Nothing carried, or nobody serving.
        assert_eq!(peak_to_mean(&[0, 0], &[1, 1], |_| true), 0.0);
        assert_eq!(peak_to_mean(&[5, 5], &[0, 0], |_| true), 0.0);
    }
}
