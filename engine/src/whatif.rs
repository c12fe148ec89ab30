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
use super::schemes::{bounded_loads, Placement, Scheme, SchemeParams};
use super::topology::{Limits, Topology};
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
}

/// Counts the moves of one scheme over members; owners are in the common index space of
/// [`crate::ring::delta`].
#[derive(Default)]
struct Counter {
    moved: u64,
    between_old: u64,
}

impl Counter {
    /// Counts one member whose owner was `before` and is `after`; `changed` marks the nodes
    /// that join, leave or are re-weighted.
    fn count(&mut self, before: Option<usize>, after: Option<usize>, changed: &[bool]) {
        if before == after {
            return;
        }
        self.moved += 1;
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
}

/// A what-if: what `RING.MOVES` replies.
#[derive(Debug, Clone, PartialEq)]
pub struct WhatIf {
    /// Members evaluated.
    pub members: u64,
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

        let mut counters: Vec<Counter> = schemes.iter().map(|_| Counter::default()).collect();
        let ring_at = schemes.iter().position(|&s| s == Scheme::Ring);
        let slots_at = schemes.iter().position(|&s| s == Scheme::Slots);
        let modulo_at = schemes.iter().position(|&s| s == Scheme::Modulo);
        let bounded_at = schemes.iter().position(|&s| s == Scheme::Bounded);
        // Ring lookups go in hash order, a chunk at a time: on a ring bigger than the CPU's
        // caches, members spread evenly by a good hash would each cost several cache misses
        // in arrival order, and a sorted chunk walks the ring's arrays forward instead. The
        // counts do not depend on the order.
        let mut chunk: Vec<u64> = Vec::new();
        let flush = |chunk: &mut Vec<u64>, counters: &mut [Counter]| {
            chunk.sort_unstable();
            if let (Some(d), Some(counter)) = (&delta, ring_at.and_then(|i| counters.get_mut(i))) {
                for &hash in chunk.iter() {
                    counter.count(
                        base.ring().owner_of_hash(hash),
                        d.owner_after(hash),
                        &p.changed,
                    );
                }
            }
            chunk.clear();
        };
        let mut bounded_hashes: Vec<u64> = Vec::new();
        let mut seen = 0u64;
        for member in members {
            let member = member.as_ref();
            seen += 1;
            let ring_hash = base.ring().member_hash(member);
            if ring_at.is_some() {
                chunk.push(ring_hash);
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
                    );
                }
            }
            if let Some(c) = modulo_at.and_then(|i| counters.get_mut(i)) {
                let before = ring_hash.checked_rem(count as u64).map(|i| i as usize);
                c.count(before, after_of(ring_hash), &p.changed);
            }
            if !placements.is_empty() {
                let kh = base.scheme_key_hash(member);
                for (i, before, after) in &placements {
                    if let Some(c) = counters.get_mut(*i) {
                        c.count(before.owner(kh), after.owner(kh), &p.changed);
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
            }
        }
        flush(&mut chunk, &mut counters);
        // Bounded loads: placed now that the members are known.
        if let (Some(i), Some(d)) = (bounded_at, &delta) {
            let (hashes, owners) = base.ring().points();
            let points_before: Vec<(u64, u32)> =
                hashes.iter().copied().zip(owners.iter().copied()).collect();
            let weights_before: Vec<u32> = base.nodes().iter().map(|n| n.weight).collect();
            let was = bounded_loads(
                &points_before,
                &weights_before,
                &bounded_hashes,
                params.balance_factor,
            );
            drop(points_before);
            let now = bounded_loads(
                &d.after_points(),
                &p.weights,
                &bounded_hashes,
                params.balance_factor,
            );
            if let Some(counter) = counters.get_mut(i) {
                for (w, n) in was.iter().zip(&now) {
                    counter.count(w.map(|o| o as usize), n.map(|o| o as usize), &p.changed);
                }
            }
        }
        let results = schemes
            .iter()
            .zip(&counters)
            .enumerate()
            .map(|(i, (&scheme, counter))| {
                let (space, slots_moved) = match scheme {
                    Scheme::Ring => (delta.as_ref().map(|d| d.moved_space()), None),
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
                SchemeResult {
                    scheme,
                    moves: counter.finish(seen),
                    space,
                    slots_moved,
                }
            })
            .collect();
        Ok(WhatIf {
            members: seen,
            ideal: p.ideal,
            schemes: results,
        })
    }
}
