//! The placements that are not points on a circle, as the rings of ringslot keep them: what a
//! flavour of [`Rule::Modula`], [`Rule::Rendezvous`], [`Rule::Index`], [`Rule::Table`] or
//! [`Rule::KeyedRendezvous`] builds from the node list (in order, with weights), the owner of a
//! key hash (or of the key itself), and each node's share of the hash space.
//!
//! - python-memcached (`Client._init_buckets()`, `_get_server()`): the servers, each repeated
//!   `weight` times, indexed by the key hash modulo their count;
//! - go-redis v9 `Ring` (dgryski/go-rendezvous `Lookup`): the node whose
//!   `xorshift_mult64(key hash ^ xxHash64(node))` is highest, the first on a tie;
//! - mcrouter `Ch3HashFunc`: [`furc_hash`] of the key hash over the node count;
//! - Envoy `maglev` ([`envoy_maglev_table`]): a table of 65537 entries filled by the nodes'
//!   permutations, hosts in the order of their names; the entry at the key hash modulo 65537;
//! - pymemcache `HashClient` (`RendezvousHash.get_node()`): the node whose [`murmur3_32`] of
//!   `node-key` is highest, the larger name on a tie.

use crate::flavour::{furc_hash, murmur3_32, xorshift_mult64, Flavour, Rule};
use crate::ring::Node;
use xxhash_rust::xxh64::xxh64;

/// Envoy maglev's default table size (`DefaultTableSize`, a prime).
pub const ENVOY_MAGLEV_TABLE_SIZE: u32 = 65537;

/// Most probes over which the shares of a placement without a closed form are estimated.
const SHARE_PROBES: u64 = 1 << 16;
/// The work of an estimate, in bytes hashed (rendezvous scores every node per probe): fewer
/// probes on a ring of many or long names, so that `RING.INFO` stays a few milliseconds.
const SHARE_WORK: u64 = 1 << 22;
/// Fewest probes of an estimate.
const SHARE_PROBES_MIN: u64 = 16;

/// The probes of an estimate over `nodes` (see [`SHARE_WORK`]): 65536 for furc_hash, whose
/// probe does not grow with the nodes; for rendezvous, as many as the work allows, at least
/// 16.
pub fn share_probes(table: &Table, nodes: &[Node]) -> u64 {
    let per_probe: u64 = match table {
        Table::Rendezvous(h) => 8 * h.len() as u64,
        Table::Keyed => nodes.iter().map(|n| n.name.len() as u64 + 16).sum(),
        _ => return SHARE_PROBES,
    };
    (SHARE_WORK / per_probe.max(1)).clamp(SHARE_PROBES_MIN, SHARE_PROBES)
}

/// What a non-ring placement keeps of its nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Table {
    /// The running totals of the weights, in node order (modula: a hash falls on the node
    /// whose range of the repeated list holds it, found by a binary search instead of a list
    /// with one entry per unit of weight).
    Modula(Vec<u64>),
    /// xxHash64 of each node's name (rendezvous).
    Rendezvous(Vec<u64>),
    /// The node count (furc_hash).
    Index(u32),
    /// Envoy's Maglev table: an entry per slot, a node index (`u32::MAX`: no node).
    Maglev(Vec<u32>),
    /// Nothing beyond the names (pymemcache scores each name with the key).
    Keyed,
}

impl Table {
    /// The table of `flavour` (not a ring rule) over `nodes`; `None` for a ring flavour.
    pub fn build(flavour: Flavour, nodes: &[Node]) -> Option<Table> {
        Some(match flavour.rule() {
            Rule::Ring => return None,
            Rule::Modula => Table::Modula(
                nodes
                    .iter()
                    .scan(0u64, |total, n| {
                        *total += u64::from(n.weight);
                        Some(*total)
                    })
                    .collect(),
            ),
            Rule::Rendezvous => {
                Table::Rendezvous(nodes.iter().map(|n| xxh64(&n.name, 0)).collect())
            }
            Rule::Index => Table::Index(u32::try_from(nodes.len()).unwrap_or(u32::MAX)),
            Rule::Table => Table::Maglev(envoy_maglev_table(nodes)),
            Rule::KeyedRendezvous => Table::Keyed,
        })
    }

    /// Heap bytes the table holds.
    pub fn memory_bytes(&self) -> usize {
        match self {
            Table::Maglev(v) => v.capacity() * 4,
            Table::Modula(v) | Table::Rendezvous(v) => v.capacity() * 8,
            Table::Index(_) | Table::Keyed => 0,
        }
    }

    /// The owner (node index) of a key hash; `None` without nodes, and always for
    /// [`Table::Keyed`], whose owner needs the key ([`Table::owner_of_key`]).
    pub fn owner(&self, hash: u64) -> Option<usize> {
        match self {
            Table::Modula(totals) => {
                let len = totals.last().copied().unwrap_or(0);
                let at = hash.checked_rem(len)?;
                Some(totals.partition_point(|&t| t <= at))
            }
            Table::Rendezvous(hashes) => {
                let mut best: Option<(u64, usize)> = None;
                for (i, &h) in hashes.iter().enumerate() {
                    let score = xorshift_mult64(hash ^ h);
                    if best.is_none_or(|(s, _)| score > s) {
                        best = Some((score, i));
                    }
                }
                best.map(|(_, i)| i)
            }
            Table::Index(n) => (*n > 0).then(|| furc_hash(hash, *n) as usize),
            Table::Maglev(table) => {
                let at = hash.checked_rem(table.len() as u64)?;
                table
                    .get(at as usize)
                    .filter(|&&e| e != u32::MAX)
                    .map(|&e| e as usize)
            }
            Table::Keyed => None,
        }
    }

    /// The owner of `key` (the bytes the flavour hashes) for [`Table::Keyed`]: the node whose
    /// murmur3_32 of `name-key` is highest, the larger name on a tie; else the owner of `hash`.
    pub fn owner_of_key(&self, nodes: &[Node], key: &[u8], hash: u64) -> Option<usize> {
        if *self != Table::Keyed {
            return self.owner(hash);
        }
        let mut best: Option<(u32, usize)> = None;
        let mut label = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            label.clear();
            label.extend_from_slice(&n.name);
            label.push(b'-');
            label.extend_from_slice(key);
            let score = murmur3_32(&label, 0);
            let wins = match best {
                None => true,
                Some((s, j)) => {
                    score > s || (score == s && nodes.get(j).is_some_and(|b| n.name > b.name))
                }
            };
            if wins {
                best = Some((score, i));
            }
        }
        best.map(|(_, i)| i)
    }

    /// Each node's share of a hash space of `2^bits` values, as `u128` counts summing to it
    /// (zeros without nodes): exact for modula (python-memcached's hash keeps bits 16-30 of
    /// CRC32, so each of its 32768 values stands for `2^17` CRC32 values, 0 counting as 1) and
    /// Maglev (the 64-bit hashes falling on each entry); estimated for the others from up to
    /// 65536 probes ([`share_probes`]: hashes spread by `fmix64`, or keys `0`, `1`, ... for
    /// pymemcache).
    pub fn owned_values(&self, nodes: &[Node], bits: u32) -> Vec<u128> {
        let mut owned = vec![0u128; nodes.len()];
        let mut add = |o: Option<usize>, v: u128| {
            if let Some(slot) = o.and_then(|o| owned.get_mut(o)) {
                *slot += v;
            }
        };
        match self {
            Table::Modula(_) => {
                for v in 0..32768u64 {
                    add(self.owner(v.max(1)), 1 << 17);
                }
            }
            Table::Maglev(table) => {
                let m = table.len() as u128;
                let space = 1u128 << 64;
                for (r, &e) in table.iter().enumerate() {
                    // Hashes h < 2^64 with h mod m == r.
                    let r = r as u128;
                    let count = if r < space {
                        (space - 1 - r) / m + 1
                    } else {
                        0
                    };
                    add((e != u32::MAX).then_some(e as usize), count);
                }
            }
            Table::Rendezvous(_) | Table::Index(_) | Table::Keyed => {
                let probes = share_probes(self, nodes);
                let each = (1u128 << bits) / u128::from(probes);
                let mut digits = Vec::new();
                for i in 0..probes {
                    let owner = if *self == Table::Keyed {
                        digits.clear();
                        digits.extend_from_slice(i.to_string().as_bytes());
                        self.owner_of_key(nodes, &digits, 0)
                    } else {
                        self.owner(crate::flavour::fmix64(i))
                    };
                    add(owner, each);
                }
            }
        }
        owned
    }
}

/// Envoy's Maglev table over `nodes` (`maglev_lb.cc`, Envoy 1.27 and later, which sorts the
/// hosts by their key): offset = xxHash64(name, 0) mod 65537, skip = xxHash64(name, 1) mod
/// 65536 + 1; weights normalized to shares in doubles; in iteration `t` (from 1) each host in
/// name order claims its next free preferred entry unless `t x share < its target`, the target
/// then growing by the largest share. The double comparisons are Envoy's own (an integer form
/// of the same rule, as [`crate::schemes::maglev_table`] uses, differs where a product rounds:
/// `3 x 0.2` is above `0.6`). Entries hold node indices; all `u32::MAX` without weight. Cost:
/// O(65537 log nodes): hosts waiting for their turn sit in a heap, not in every iteration's
/// walk.
pub fn envoy_maglev_table(nodes: &[Node]) -> Vec<u32> {
    let m = u64::from(ENVOY_MAGLEV_TABLE_SIZE);
    let mut table = vec![u32::MAX; m as usize];
    let total: u64 = nodes.iter().map(|n| u64::from(n.weight)).sum();
    if total == 0 {
        return table;
    }
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by(|&a, &b| nodes[a].name.cmp(&nodes[b].name));
    struct Entry {
        node: u32,
        offset: u64,
        skip: u64,
        share: f64,
        target: f64,
        next: u64,
    }
    let mut entries: Vec<Entry> = order
        .iter()
        .filter_map(|&i| nodes.get(i).map(|n| (i, n)))
        .map(|(i, n)| Entry {
            node: i as u32,
            offset: xxh64(&n.name, 0) % m,
            skip: xxh64(&n.name, 1) % (m - 1) + 1,
            share: f64::from(n.weight) * 1.0 / total as f64,
            target: 0.0,
            next: 0,
        })
        .collect();
    let max_share = entries.iter().map(|e| e.share).fold(0.0f64, f64::max);
    if max_share <= 0.0 {
        return table;
    }
    // Envoy walks the hosts in order in every iteration; a host that may not claim yet is
    // skipped. The hosts' next iterations are kept in a heap of (iteration, place) instead, so
    // that light hosts among heavy ones cost nothing while they wait: the same claims in the
    // same order, each checked with Envoy's own comparison.
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut waiting: BinaryHeap<Reverse<(u64, usize)>> =
        (0..entries.len()).map(|k| Reverse((1, k))).collect();
    let mut filled = 0u64;
    while filled < m {
        let Some(Reverse((iteration, k))) = waiting.pop() else {
            break;
        };
        let Some(e) = entries.get_mut(k) else { break };
        if (iteration as f64) * e.share < e.target {
            // Not yet: the first later iteration that may pass, checked again when it comes.
            let guess = (e.target / e.share).floor() as u64;
            waiting.push(Reverse((guess.saturating_sub(1).max(iteration + 1), k)));
            continue;
        }
        e.target += max_share;
        loop {
            let c = (e.offset + e.skip * e.next) % m;
            match table.get_mut(c as usize) {
                Some(slot) if *slot == u32::MAX => {
                    *slot = e.node;
                    break;
                }
                Some(_) => e.next += 1,
                None => break,
            }
        }
        e.next += 1;
        filled += 1;
        waiting.push(Reverse((iteration + 1, k)));
    }
    table
}
