//! Every scheme of [`super::schemes`] on one ring key: a member's owner under each, a change
//! evaluated under any of them (`RING.MOVES ... SCHEMES`), and each one's balance.
//!
//! All run on the nodes of the ring key, in order, with their weights, in the common index
//! space of [`super::ring::delta`] (the ring's node indices, the joining node after them).
//! Schemes that keep state build it for the call (a Maglev table, multi-probe points, the
//! changed ring's points for bounded loads) and drop it after: nothing is stored in the ring.

use super::compare::{Change, Counter, SchemeMoves};
use super::error::EngineError;
use super::keyslot::{key_slot, SLOT_COUNT};
use super::ring::delta::NodeChange;
use super::schemes::{
    bounded_loads, jump, key_hash, maglev_owner, maglev_table, rendezvous_owner, rendezvous_seed,
    MultiProbe, Scheme, SchemeParams,
};
use super::topology::{follow_nodes, Limits, Topology};

/// Members whose ring lookups a what-if sorts and makes together (512 KiB of hashes).
const RING_CHUNK: usize = 65536;

/// Members bounded loads keeps (one 8-byte hash each) for a what-if: it places every member
/// knowing how many there are, so it cannot stream them.
pub const BOUNDED_MAX_MEMBERS: usize = 10_000_000;

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

/// A what-if under a list of schemes.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemesWhatIf {
    /// Members evaluated.
    pub members: u64,
    /// The fraction a perfect scheme moves.
    pub ideal: f64,
    /// One result per scheme asked for, in the order asked.
    pub schemes: Vec<SchemeResult>,
}

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

/// The work a scheme costs per member, in lookups of the ring (about 15 ns in the engine):
/// rendezvous scores every node (about 6 ns a node, counted as one lookup per 64 nodes, which
/// leaves a margin), multi-probe searches once per probe (counted one per 4); the others look
/// up once.
pub fn scheme_cost(scheme: Scheme, nodes: usize, params: &SchemeParams) -> u64 {
    match scheme {
        Scheme::Rendezvous => (nodes as u64 / 64).max(1),
        Scheme::MultiProbe => (u64::from(params.probes) / 4).max(1),
        _ => 1,
    }
}

/// The node names and weights of a ring key after a change, in the common index space.
fn after_nodes<'a>(
    topo: &'a Topology,
    change: &'a Change,
    weights: &[u32],
) -> Vec<(&'a [u8], u32)> {
    let mut names: Vec<&[u8]> = topo.nodes().iter().map(|n| n.name.as_slice()).collect();
    if let Change::Add { node, .. } = change {
        if names.len() < weights.len() {
            names.push(node.as_slice());
        }
    }
    names.into_iter().zip(weights.iter().copied()).collect()
}

/// The jump bucket table after a change: bucket -> node in the common index space. A node
/// that leaves frees its bucket to the last node (the last bucket goes), as users remove a
/// node from jump; a re-weight changes nothing (jump has no weights).
fn jump_after(count: usize, change: NodeChange) -> Vec<usize> {
    match change {
        NodeChange::Join { .. } => (0..=count).collect(),
        NodeChange::Reweight { .. } => (0..count).collect(),
        NodeChange::Leave { index } => {
            let last = count.saturating_sub(1);
            (0..last)
                .map(|b| if b == index { last } else { b })
                .collect()
        }
    }
}

impl Topology {
    /// The nodes as (name, weight), in order: what every scheme is a function of.
    pub fn names_and_weights(&self) -> Vec<(&[u8], u32)> {
        self.nodes()
            .iter()
            .map(|n| (n.name.as_slice(), n.weight))
            .collect()
    }

    /// The hash the strong-hash schemes use for `member`: [`key_hash`] of the member, or of its
    /// hash tag on a `HASHTAG` ring.
    pub fn scheme_key_hash(&self, member: &[u8]) -> u64 {
        key_hash(self.ring().key_bytes(member))
    }

    /// The owner of `member` under every scheme, as node indices, in [`Scheme::ALL`] order.
    /// Bounded loads with no other member placed is the ring. Builds a Maglev table (O(M)) and
    /// the multi-probe points (O(W log W) for total weight W).
    pub fn owners_under_all(
        &self,
        member: &[u8],
        params: &SchemeParams,
    ) -> Vec<(Scheme, Option<usize>)> {
        let nodes = self.names_and_weights();
        let count = nodes.len();
        let ring_hash = self.ring().member_hash(member);
        let kh = self.scheme_key_hash(member);
        let seeds: Vec<(u64, u32)> = nodes
            .iter()
            .map(|&(n, w)| (rendezvous_seed(n), w))
            .collect();
        Scheme::ALL
            .into_iter()
            .map(|s| {
                let owner = match s {
                    Scheme::Ring | Scheme::Bounded => self.ring().owner_of_hash(ring_hash),
                    Scheme::Slots => self.slot_table().owner(key_slot(member)),
                    Scheme::Modulo => ring_hash.checked_rem(count as u64).map(|i| i as usize),
                    Scheme::Jump => jump(kh, count as u32).map(|b| b as usize),
                    Scheme::Rendezvous => rendezvous_owner(kh, &seeds),
                    Scheme::Maglev => maglev_owner(kh, &maglev_table(&nodes, params.maglev_size)),
                    Scheme::MultiProbe => MultiProbe::new(&nodes).owner(kh, params.probes),
                };
                (s, owner)
            })
            .collect()
    }

    /// Evaluates `change` over `members` under each of `schemes` (see the module docs),
    /// changing nothing. Bounded loads places the members in the order given, before and after
    /// the change, knowing their number: it keeps one hash per member, at most
    /// [`BOUNDED_MAX_MEMBERS`]. Errors: those of [`Topology::what_if`]; too many members for
    /// bounded loads.
    pub fn what_if_schemes<I, M>(
        &self,
        change: &Change,
        members: I,
        schemes: &[Scheme],
        params: &SchemeParams,
        limits: Limits,
    ) -> Result<SchemesWhatIf, EngineError>
    where
        I: IntoIterator<Item = M>,
        M: AsRef<[u8]>,
    {
        let p = self.prepare(change, limits)?;
        let count = self.nodes().len();
        let wants = |s: Scheme| schemes.contains(&s);
        // Each scheme's state, built only when the scheme is asked for.
        let delta = (wants(Scheme::Ring) || wants(Scheme::Bounded))
            .then(|| self.ring().delta(p.node_change));
        let slots_after = wants(Scheme::Slots).then(|| {
            let mut t = self.slot_table().clone();
            // As the write would: a re-weight to the weight a node has changes nothing.
            if !p.same {
                follow_nodes(&mut t, &p.names, &p.weights);
            }
            t
        });
        // Modulo over the nodes in order, before and after; the index after the change mapped
        // back to the common space (past a node that leaves, one more).
        let n_after = p.weights.iter().filter(|&&w| w > 0).count() as u64;
        let modulo_after = |hash: u64| -> Option<usize> {
            let i = hash.checked_rem(n_after)? as usize;
            Some(match p.node_change {
                NodeChange::Leave { index } if i >= index => i + 1,
                _ => i,
            })
        };
        let strong = [
            Scheme::Jump,
            Scheme::Rendezvous,
            Scheme::Maglev,
            Scheme::MultiProbe,
        ];
        let (before, after) = if strong.iter().any(|&s| wants(s)) {
            (
                self.names_and_weights(),
                after_nodes(self, change, &p.weights),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let jump_table = wants(Scheme::Jump).then(|| jump_after(count, p.node_change));
        let seeds = wants(Scheme::Rendezvous).then(|| {
            let seeds = |nodes: &[(&[u8], u32)]| -> Vec<(u64, u32)> {
                nodes
                    .iter()
                    .map(|&(n, w)| (rendezvous_seed(n), w))
                    .collect()
            };
            (seeds(&before), seeds(&after))
        });
        let maglev = wants(Scheme::Maglev).then(|| {
            (
                maglev_table(&before, params.maglev_size),
                maglev_table(&after, params.maglev_size),
            )
        });
        let probe =
            wants(Scheme::MultiProbe).then(|| (MultiProbe::new(&before), MultiProbe::new(&after)));

        let mut counters: Vec<Counter> = schemes.iter().map(|_| Counter::default()).collect();
        let ring_at = schemes.iter().position(|&s| s == Scheme::Ring);
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
                        self.ring().owner_of_hash(hash),
                        d.owner_after(hash),
                        p.changed,
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
            let ring_hash = self.ring().member_hash(member);
            if ring_at.is_some() {
                chunk.push(ring_hash);
                if chunk.len() == RING_CHUNK {
                    flush(&mut chunk, &mut counters);
                }
            }
            let kh = if before.is_empty() && after.is_empty() {
                0
            } else {
                self.scheme_key_hash(member)
            };
            for (s, counter) in schemes.iter().zip(counters.iter_mut()) {
                let (was, now) = match s {
                    // In the chunks above.
                    Scheme::Ring => continue,
                    Scheme::Slots => {
                        let slot = key_slot(member);
                        (
                            self.slot_table().owner(slot),
                            slots_after.as_ref().and_then(|t| t.owner(slot)),
                        )
                    }
                    Scheme::Modulo => (
                        ring_hash.checked_rem(count as u64).map(|i| i as usize),
                        modulo_after(ring_hash),
                    ),
                    Scheme::Jump => match &jump_table {
                        Some(table) => (
                            jump(kh, count as u32).map(|b| b as usize),
                            jump(kh, table.len() as u32)
                                .and_then(|b| table.get(b as usize).copied()),
                        ),
                        None => (None, None),
                    },
                    Scheme::Rendezvous => match &seeds {
                        Some((b, a)) => (rendezvous_owner(kh, b), rendezvous_owner(kh, a)),
                        None => (None, None),
                    },
                    Scheme::Maglev => match &maglev {
                        Some((b, a)) => (maglev_owner(kh, b), maglev_owner(kh, a)),
                        None => (None, None),
                    },
                    Scheme::MultiProbe => match &probe {
                        Some((b, a)) => (b.owner(kh, params.probes), a.owner(kh, params.probes)),
                        None => (None, None),
                    },
                    Scheme::Bounded => {
                        if bounded_hashes.len() >= BOUNDED_MAX_MEMBERS {
                            return Err(EngineError::BoundedTooMany {
                                limit: BOUNDED_MAX_MEMBERS as u64,
                            });
                        }
                        bounded_hashes.push(ring_hash);
                        continue;
                    }
                };
                counter.count(was, now, p.changed);
            }
        }
        flush(&mut chunk, &mut counters);
        // Bounded loads: placed now that the members are known.
        if let (Some(i), Some(d)) = (schemes.iter().position(|&s| s == Scheme::Bounded), &delta) {
            let (hashes, owners) = self.ring().points();
            let points_before: Vec<(u64, u32)> =
                hashes.iter().copied().zip(owners.iter().copied()).collect();
            let weights_before: Vec<u32> = self.nodes().iter().map(|n| n.weight).collect();
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
                    counter.count(w.map(|o| o as usize), n.map(|o| o as usize), p.changed);
                }
            }
        }
        let results = schemes
            .iter()
            .zip(&counters)
            .map(|(&scheme, counter)| {
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
                    Scheme::Maglev => (
                        maglev.as_ref().map(|(b, a)| {
                            let changed = b.iter().zip(a).filter(|(x, y)| x != y).count();
                            changed as f64 / b.len().max(1) as f64
                        }),
                        None,
                    ),
                    _ => (None, None),
                };
                SchemeResult {
                    scheme,
                    moves: counter.finish(seen),
                    space,
                    slots_moved,
                }
            })
            .collect();
        Ok(SchemesWhatIf {
            members: seen,
            ideal: p.ideal,
            schemes: results,
        })
    }

    /// Each scheme's peak-to-mean share (see [`SchemeBalance`]): exact for the ring (its arcs),
    /// the slot table (its slots), Maglev (its entries) and modulo (1/N of the hash space each,
    /// whatever the weights); estimated over `sample` for jump, rendezvous, multi-probe and
    /// bounded loads (placed in the sample's order).
    pub fn balance_under_all<I, M>(&self, sample: I, params: &SchemeParams) -> Vec<SchemeBalance>
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
        let seeds: Vec<(u64, u32)> = nodes
            .iter()
            .map(|&(n, w)| (rendezvous_seed(n), w))
            .collect();
        let probe = MultiProbe::new(&nodes);
        let mut tallies = vec![vec![0f64; count]; 4];
        let mut ring_hashes = Vec::new();
        let mut sampled = 0f64;
        for member in sample {
            let member = member.as_ref();
            sampled += 1.0;
            let kh = self.scheme_key_hash(member);
            let owners = [
                jump(kh, count as u32).map(|b| b as usize),
                rendezvous_owner(kh, &seeds),
                probe.owner(kh, params.probes),
            ];
            for (t, o) in tallies.iter_mut().zip(owners) {
                if let Some(slot) = o.and_then(|o| t.get_mut(o)) {
                    *slot += 1.0;
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
            if let Some(slot) = tallies[3].get_mut(o as usize) {
                *slot += 1.0;
            }
        }
        let table = maglev_table(&nodes, params.maglev_size);
        let mut entries = vec![0f64; count];
        for &e in &table {
            if let Some(slot) = entries.get_mut(e as usize) {
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
                    Scheme::Maglev => (peak(&entries, table.len() as f64), true),
                    Scheme::Jump => (peak(&tallies[0], sampled), false),
                    Scheme::Rendezvous => (peak(&tallies[1], sampled), false),
                    Scheme::MultiProbe => (peak(&tallies[2], sampled), false),
                    Scheme::Bounded => (peak(&tallies[3], sampled), false),
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
