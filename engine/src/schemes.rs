//! The placement schemes engineers weigh beside the ring, the slot table and `hash mod N`,
//! each a pure function of the nodes (in order), their weights and the scheme's parameters,
//! over raw bytes with fixed hashes:
//!
//! - [`jump`]: jump consistent hash (Lamping & Veach, "A Fast, Minimal Memory, Consistent
//!   Hash Algorithm", 2014, arXiv 1406.2294), buckets = the nodes in order. It has no
//!   weights, and only the last bucket can be removed: removing another node is done as users
//!   do it, the last node taking the freed bucket.
//! - [`rendezvous_owner`]: rendezvous or highest-random-weight hashing (Thaler & Ravishankar,
//!   1996), weighted by the logarithmic method (Schindelhauer & Schomaker, 2005): node `j`
//!   scores `-w_j / ln(u_j)` with `u_j` uniform in (0, 1) from the member and the node, so it
//!   wins with probability `w_j / sum(w)`; its top k is the preference list.
//! - [`maglev_table`]: Maglev (Eisenbud et al., NSDI 2016) with a prime table size, node
//!   offsets and skips from xxHash64 of the node name with seeds 0 and 1 and weights by target
//!   weights, as Envoy builds it.
//! - [`MultiProbe`]: multi-probe consistent hashing (Appleton & O'Reilly, 2015, arXiv
//!   1505.00062): one point per unit of weight (at most [`MULTIPROBE_MAX_POINTS`] in all), the
//!   member hashed `probes` times, the nearest point clockwise of any probe wins.
//! - [`bounded_loads`]: consistent hashing with bounded loads (Mirrokni, Thorup &
//!   Zadimoghaddam, 2016, arXiv 1608.01350) over a ring: node capacity `ceil(f m w / W)` for
//!   balance factor `f` (a percentage, as HAProxy's `hash-balance-factor`), members placed in
//!   the order given, each on the first node clockwise with room; on HAProxy's rings,
//!   HAProxy's own rule ([`haproxy_bounded_loads`]: slots that grow with the requests in
//!   flight, the walk from the nearest point).
//!
//! Members are hashed with the native flavour's strong hash ([`super::flavour::native_hash`]),
//! the same for every scheme that takes a key hash, so that a comparison is fair.

use super::flavour::{fmix64, native_hash, Flavour, Lookup};
use super::ring::delta::NodeChange;
use super::topology::Topology;
use xxhash_rust::xxh64::xxh64;

/// A placement scheme, as `RING.MOVES ... SCHEMES` and `RING.OWNERS` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// The ring of the key (its flavour).
    Ring,
    /// The ring key's simulated Redis Cluster slot table.
    Slots,
    /// The ring's member hash mod the node count, nodes in order.
    Modulo,
    /// Jump consistent hash over the nodes in order.
    Jump,
    /// Weighted rendezvous (highest random weight).
    Rendezvous,
    /// Maglev with a prime table.
    Maglev,
    /// Multi-probe consistent hashing.
    MultiProbe,
    /// Bounded loads over the ring.
    Bounded,
}

impl Scheme {
    /// Every scheme, in the order replies list them.
    pub const ALL: [Scheme; 8] = [
        Scheme::Ring,
        Scheme::Slots,
        Scheme::Modulo,
        Scheme::Jump,
        Scheme::Rendezvous,
        Scheme::Maglev,
        Scheme::MultiProbe,
        Scheme::Bounded,
    ];

    /// The schemes `RING.MOVES` evaluates when none are named.
    pub const DEFAULT: [Scheme; 3] = [Scheme::Ring, Scheme::Slots, Scheme::Modulo];

    /// The work of building this scheme's [`Placement`] over `nodes` nodes of `total` weight,
    /// in the units of [`crate::cost`] (0 for the schemes that are not placements, and for
    /// those that build nothing but the node list): a Maglev table fills its entries a turn
    /// at a time through a heap of nodes; multi-probe hashes and sorts a point per unit of
    /// weight.
    pub fn build_cost(self, nodes: usize, total: u64, params: &SchemeParams) -> f64 {
        match self {
            Scheme::Maglev => {
                let log = (nodes.max(1) as f64).log2();
                f64::from(params.maglev_size) * (2.0 + log) / 32.0 + nodes as f64 / 3.0
            }
            Scheme::MultiProbe => total.min(MULTIPROBE_MAX_POINTS) as f64 / 3.0,
            _ => 0.0,
        }
    }

    /// The work of one owner lookup under this scheme's [`Placement`], in the units of
    /// [`crate::cost`] (0 for the schemes that are not placements): rendezvous scores every
    /// node, multi-probe searches its points once per probe.
    pub fn lookup_cost(self, nodes: usize, params: &SchemeParams) -> f64 {
        match self {
            Scheme::Jump => 0.5,
            Scheme::Rendezvous => nodes as f64 / 16.0,
            Scheme::Maglev => 0.125,
            Scheme::MultiProbe => f64::from(params.probes) / 3.0,
            _ => 0.0,
        }
    }

    /// Whether the scheme is a [`Placement`]: a pure function of the nodes, their weights and
    /// the member's strong key hash.
    pub fn is_placement(self) -> bool {
        matches!(
            self,
            Scheme::Jump | Scheme::Rendezvous | Scheme::Maglev | Scheme::MultiProbe
        )
    }

    /// The scheme's name in commands and replies.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Ring => "ring",
            Scheme::Slots => "slots",
            Scheme::Modulo => "modulo",
            Scheme::Jump => "jump",
            Scheme::Rendezvous => "rendezvous",
            Scheme::Maglev => "maglev",
            Scheme::MultiProbe => "multiprobe",
            Scheme::Bounded => "bounded",
        }
    }

    /// The scheme named `name` (ASCII case-insensitive).
    pub fn from_name(name: &[u8]) -> Option<Scheme> {
        Scheme::ALL
            .into_iter()
            .find(|s| s.name().as_bytes().eq_ignore_ascii_case(name))
    }

    /// Whether a node joining never moves a member between two other nodes under this scheme
    /// (monotonicity). Maglev's table and `hash mod N` do not promise it; jump keeps it for a
    /// join (a removal of a node that is not the last moves the last node's members).
    pub fn monotone_on_join(self) -> bool {
        !matches!(self, Scheme::Modulo | Scheme::Maglev | Scheme::Bounded)
    }
}

/// The parameters of the schemes that take some.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemeParams {
    /// Maglev's table size, a prime (Envoy's default 65537).
    pub maglev_size: u32,
    /// Multi-probe's probes per member (21: peak-to-mean about 1.05 per the paper).
    pub probes: u32,
    /// Bounded loads' balance factor, a percentage over 100 (HAProxy's default 125... 200).
    pub balance_factor: u32,
}

impl SchemeParams {
    /// The defaults: Maglev's table of 65537 entries, 21 probes, bounded loads at 125%.
    pub const DEFAULT: SchemeParams = SchemeParams {
        maglev_size: 65537,
        probes: 21,
        balance_factor: 125,
    };
}

impl Default for SchemeParams {
    fn default() -> Self {
        SchemeParams::DEFAULT
    }
}

/// The strong key hash every scheme but the ring, the slot table and modulo uses: the native
/// flavour's hash of `key` (the member, or its hash tag on a `HASHTAG` ring).
pub fn key_hash(key: &[u8]) -> u64 {
    native_hash(key)
}

/// Jump consistent hash (Lamping & Veach 2014, Figure 1): the bucket in `0..buckets` of
/// `key`; `None` for 0 buckets. O(ln buckets) steps, no memory.
pub fn jump(mut key: u64, buckets: u32) -> Option<u32> {
    if buckets == 0 {
        return None;
    }
    let (mut b, mut j) = (-1i64, 0i64);
    while j < i64::from(buckets) {
        b = j;
        key = key.wrapping_mul(2862933555777941757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    u32::try_from(b).ok()
}

/// A node's seed for rendezvous scores: the strong hash of its name.
pub fn rendezvous_seed(name: &[u8]) -> u64 {
    native_hash(name)
}

/// The weighted rendezvous score of a member (its [`key_hash`]) on a node (its
/// [`rendezvous_seed`] and weight): `-w / ln(u)`, `u` in (0, 1) from the top 53 bits of
/// `fmix64(member ^ seed)`. Higher wins; weight 0 scores 0 (never wins against a weight).
pub fn rendezvous_score(member: u64, seed: u64, weight: u32) -> f64 {
    let h = fmix64(member ^ seed);
    let u = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    -f64::from(weight) / u.ln()
}

/// The rendezvous owner (index into `nodes`, given as seed and weight) of a member; `None`
/// when no node has weight. Ties go to the lower index.
pub fn rendezvous_owner(member: u64, nodes: &[(u64, u32)]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, &(seed, weight)) in nodes.iter().enumerate() {
        if weight == 0 {
            continue;
        }
        let score = rendezvous_score(member, seed, weight);
        if best.is_none_or(|(_, b)| score > b) {
            best = Some((i, score));
        }
    }
    best.map(|(i, _)| i)
}

/// The rendezvous preference list: the `k` highest-scoring nodes, best first.
pub fn rendezvous_top(member: u64, nodes: &[(u64, u32)], k: usize) -> Vec<usize> {
    let mut scored: Vec<(f64, usize)> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.1 > 0)
        .map(|(i, &(seed, w))| (rendezvous_score(member, seed, w), i))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(k).map(|(_, i)| i).collect()
}

/// Whether `n` is prime (trial division; table sizes are small).
pub fn is_prime(n: u32) -> bool {
    if n < 2 {
        return false;
    }
    let n = u64::from(n);
    (2u64..).take_while(|d| d * d <= n).all(|d| n % d != 0)
}

/// Fills a Maglev table of `size` entries (Eisenbud et al. 2016, Pseudocode 1): nodes, given
/// as (offset, skip, weight), take turns claiming their next preferred free entry, their j-th
/// preference being `(offset + j skip) mod size`. Weights as Envoy applies them: in turn `t`
/// (from 1) a node claims only while `t w >= its target`, which then grows by the largest
/// weight, so that a node claims about `w / max w` entries per turn. Returns the node index
/// of every entry (`u32::MAX` when no node has weight). `size` must be prime and each skip in
/// `1..size`, so that every node's preferences visit every entry.
pub fn maglev_fill(nodes: &[(u64, u64, u32)], size: u32) -> Vec<u32> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let m = u64::from(size);
    let mut table = vec![u32::MAX; size as usize];
    let max_weight = nodes.iter().map(|n| u64::from(n.2)).max().unwrap_or(0);
    if m == 0 || max_weight == 0 {
        return table;
    }
    let mut next = vec![0u64; nodes.len()];
    let mut target = vec![0u64; nodes.len()];
    // Each node's next turn to claim, in (turn, node) order: the order of the turns' loop over
    // the nodes, without visiting the nodes that may not claim yet (a light node among heavy
    // ones claims once in many turns).
    let mut turns: BinaryHeap<Reverse<(u64, usize)>> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.2 > 0)
        .map(|(i, _)| Reverse((1, i)))
        .collect();
    let mut filled = 0u64;
    while filled < m {
        let Some(Reverse((turn, i))) = turns.pop() else {
            break;
        };
        let (Some(&(offset, skip, weight)), Some(t), Some(n)) =
            (nodes.get(i), target.get_mut(i), next.get_mut(i))
        else {
            break;
        };
        let w = u64::from(weight);
        *t += max_weight;
        // The node's next preferred entry that is still free.
        while *n < m {
            let entry = (offset % m + *n % m * (skip % m)) % m;
            *n += 1;
            if let Some(slot) = table.get_mut(entry as usize) {
                if *slot == u32::MAX {
                    *slot = i as u32;
                    filled += 1;
                    break;
                }
            }
        }
        // It claims again in the first later turn t with t w >= its target (once a turn).
        turns.push(Reverse((t.div_ceil(w).max(turn + 1), i)));
    }
    table
}

/// The Maglev table of `nodes` (name, weight) at `size` entries (a prime): offset =
/// xxHash64(name, seed 0) mod size, skip = xxHash64(name, seed 1) mod (size - 1) + 1, nodes
/// taking turns in the order of their names (as Envoy sorts hosts), so that the table does not
/// depend on the order nodes were added. Entries hold indices into `nodes`.
pub fn maglev_table(nodes: &[(&[u8], u32)], size: u32) -> Vec<u32> {
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by(|&a, &b| nodes[a].0.cmp(nodes[b].0));
    let m = u64::from(size.max(2));
    let prefs: Vec<(u64, u64, u32)> = order
        .iter()
        .map(|&i| {
            let (name, weight) = nodes[i];
            (xxh64(name, 0) % m, xxh64(name, 1) % (m - 1) + 1, weight)
        })
        .collect();
    maglev_fill(&prefs, size)
        .into_iter()
        .map(|e| order.get(e as usize).map_or(u32::MAX, |&i| i as u32))
        .collect()
}

/// The Maglev owner of a member (its [`key_hash`]) in `table`.
pub fn maglev_owner(member: u64, table: &[u32]) -> Option<usize> {
    let len = table.len() as u64;
    let entry = member.checked_rem(len)?;
    table
        .get(entry as usize)
        .filter(|&&e| e != u32::MAX)
        .map(|&e| e as usize)
}

/// A multi-probe ring: one point per unit of weight (point `k` of a node: the strong hash of
/// `name#k`, as the native ring labels points), searched from `probes` hashes of the member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiProbe {
    /// Points as (hash, node index), sorted.
    points: Vec<(u64, u32)>,
}

/// The most points a multi-probe ring gets: weights that add up to more are scaled down in
/// proportion (each node keeping at least one point), so that a ring of huge weights (ketama's
/// point counts do not grow with them) cannot make a command build millions of points.
pub const MULTIPROBE_MAX_POINTS: u64 = 1_000_000;

impl MultiProbe {
    /// The points of `nodes` (name, weight); see [`MULTIPROBE_MAX_POINTS`].
    pub fn new(nodes: &[(&[u8], u32)]) -> MultiProbe {
        let total: u64 = nodes.iter().map(|n| u64::from(n.1)).sum();
        let points_of = |w: u32| -> u32 {
            if total <= MULTIPROBE_MAX_POINTS || w == 0 {
                w
            } else {
                let scaled = u64::from(w) * MULTIPROBE_MAX_POINTS / total;
                u32::try_from(scaled.max(1)).unwrap_or(u32::MAX)
            }
        };
        let mut points = Vec::new();
        let mut hashes = Vec::new();
        for (i, &(name, weight)) in nodes.iter().enumerate() {
            hashes.clear();
            Flavour::Native.push_points(name, 0, 0, points_of(weight), &mut hashes);
            points.extend(hashes.iter().map(|&h| (h, i as u32)));
        }
        points.sort_unstable();
        MultiProbe { points }
    }

    /// Bytes the points take.
    pub fn memory_bytes(&self) -> usize {
        self.points.len() * std::mem::size_of::<(u64, u32)>()
    }

    /// The owner of a member (its [`key_hash`]): of the `probes` hashes `fmix64(member + j
    /// golden)` (j = 1..=probes, golden = 0x9e3779b97f4a7c15), the one whose next point
    /// clockwise is nearest; ties to the earlier probe. `None` without points.
    pub fn owner(&self, member: u64, probes: u32) -> Option<usize> {
        let first = self.points.first()?;
        let mut best: Option<(u64, u32)> = None;
        for j in 1..=u64::from(probes.max(1)) {
            let h = fmix64(member.wrapping_add(j.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
            let at = self.points.partition_point(|p| p.0 < h);
            let point = self.points.get(at).unwrap_or(first);
            let distance = point.0.wrapping_sub(h);
            if best.is_none_or(|(d, _)| distance < d) {
                best = Some((distance, point.1));
            }
        }
        best.map(|(_, o)| o as usize)
    }
}

/// The placement of one of the schemes that are pure functions of the nodes (in order), their
/// weights and the member's strong key hash ([`Scheme::is_placement`]): built once for a node
/// list, then asked for owners. Owners, what-ifs and balance loop over these instead of
/// handling each scheme apart; a new scheme of this kind is a variant here and its algorithm.
/// (The ring flavours hash members their own way, the slot table by CRC16, modulo by the
/// ring's hash, and bounded loads depends on the order members arrive: they keep their own
/// paths.)
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// Jump consistent hash: node of each bucket (the nodes in order; after a node leaves,
    /// the last node takes its bucket).
    Jump(Vec<usize>),
    /// Weighted rendezvous: each node's seed and weight.
    Rendezvous(Vec<(u64, u32)>),
    /// Maglev: the node of each table entry (`u32::MAX`: none).
    Maglev(Vec<u32>),
    /// Multi-probe: the points, and the probes per member.
    MultiProbe(MultiProbe, u32),
}

impl Placement {
    /// The placement of `scheme` over `nodes` (name, weight; weight 0: a node that is gone),
    /// in order; `None` for the schemes that are not placements.
    pub fn build(
        scheme: Scheme,
        nodes: &[(&[u8], u32)],
        params: &SchemeParams,
    ) -> Option<Placement> {
        Some(match scheme {
            Scheme::Jump => Placement::Jump((0..nodes.len()).collect()),
            Scheme::Rendezvous => Placement::Rendezvous(
                nodes
                    .iter()
                    .map(|&(n, w)| (rendezvous_seed(n), w))
                    .collect(),
            ),
            Scheme::Maglev => Placement::Maglev(maglev_table(nodes, params.maglev_size)),
            Scheme::MultiProbe => Placement::MultiProbe(MultiProbe::new(nodes), params.probes),
            Scheme::Ring | Scheme::Slots | Scheme::Modulo | Scheme::Bounded => return None,
        })
    }

    /// The placement after `change`, given `after`, every node after it in the common index
    /// space of [`crate::ring::delta`] (weight 0 for a node that leaves, joining nodes last).
    /// Jump keeps its buckets in order: each joining node adds a bucket at the end, a
    /// re-weight changes nothing (jump has no weights), and a node that leaves frees its
    /// bucket to the node of the last bucket, as users remove a node from jump (only the last
    /// bucket can go); several leave one after the other, in the order given.
    pub fn after(
        &self,
        change: &NodeChange,
        after: &[(&[u8], u32)],
        params: &SchemeParams,
    ) -> Placement {
        match self {
            Placement::Jump(buckets) => {
                let mut buckets = buckets.clone();
                for leaving in change.leaving() {
                    if let Some(b) = buckets.iter().position(|&n| n == leaving) {
                        buckets.swap_remove(b);
                    }
                }
                let first_joining = after.len().saturating_sub(change.joining.len());
                buckets.extend(first_joining..after.len());
                Placement::Jump(buckets)
            }
            Placement::Rendezvous(_) => {
                Placement::build(Scheme::Rendezvous, after, params).unwrap_or(self.clone())
            }
            Placement::Maglev(_) => {
                Placement::build(Scheme::Maglev, after, params).unwrap_or(self.clone())
            }
            Placement::MultiProbe(..) => {
                Placement::build(Scheme::MultiProbe, after, params).unwrap_or(self.clone())
            }
        }
    }

    /// The owner (node index) of a member by its [`key_hash`]; `None` without nodes.
    pub fn owner(&self, key_hash: u64) -> Option<usize> {
        match self {
            Placement::Jump(buckets) => {
                let b = jump(key_hash, u32::try_from(buckets.len()).ok()?)?;
                buckets.get(b as usize).copied()
            }
            Placement::Rendezvous(seeds) => rendezvous_owner(key_hash, seeds),
            Placement::Maglev(table) => maglev_owner(key_hash, table),
            Placement::MultiProbe(points, probes) => points.owner(key_hash, *probes),
        }
    }

    /// The exact share of the key space whose owner differs between `self` and `after`, where
    /// the scheme has a finite key space (Maglev: entries changed / table size); `None`
    /// otherwise.
    pub fn changed_space(&self, after: &Placement) -> Option<f64> {
        match (self, after) {
            (Placement::Maglev(b), Placement::Maglev(a)) => {
                let changed = b.iter().zip(a).filter(|(x, y)| x != y).count();
                Some(changed as f64 / b.len().max(1) as f64)
            }
            _ => None,
        }
    }

    /// Each node's exact share of the key space (of `nodes` nodes), where the scheme has a
    /// finite one (Maglev: entries / table size); `None` for the schemes whose balance is
    /// sampled.
    pub fn exact_shares(&self, nodes: usize) -> Option<Vec<f64>> {
        let Placement::Maglev(table) = self else {
            return None;
        };
        let mut entries = vec![0f64; nodes];
        for &e in table {
            if let Some(slot) = entries.get_mut(e as usize) {
                *slot += 1.0;
            }
        }
        let len = table.len().max(1) as f64;
        Some(entries.into_iter().map(|e| e / len).collect())
    }
}

/// Consistent hashing with bounded loads (Mirrokni, Thorup & Zadimoghaddam 2016): places the
/// members, given by their ring hashes in arrival order, on the ring `points` (sorted (hash,
/// owner) pairs), each on the owner of the first point at or after its hash whose node is
/// below capacity `ceil(factor/100 x m x w / W)` (m members, node weight w, total W).
/// Returns each member's node (`None` without points). Cost: O(log P) per member plus the
/// points skipped past full nodes, which the factor keeps few.
pub fn bounded_loads(
    points: &[(u64, u32)],
    weights: &[u32],
    members: &[u64],
    factor: u32,
) -> Vec<Option<u32>> {
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    let m = members.len() as u64;
    let capacity: Vec<u64> = weights
        .iter()
        .map(|&w| {
            let share = u128::from(factor) * u128::from(m) * u128::from(w);
            let denom = 100 * u128::from(total.max(1));
            u64::try_from(share.div_ceil(denom)).unwrap_or(u64::MAX)
        })
        .collect();
    let mut load = vec![0u64; weights.len()];
    let n = points.len();
    members
        .iter()
        .map(|&h| {
            if n == 0 {
                return None;
            }
            let start = points.partition_point(|p| p.0 < h);
            for step in 0..n {
                let i = (start + step) % n;
                let owner = points.get(i)?.1;
                let (Some(l), Some(&c)) =
                    (load.get_mut(owner as usize), capacity.get(owner as usize))
                else {
                    continue;
                };
                if *l < c {
                    *l += 1;
                    return Some(owner);
                }
            }
            None
        })
        .collect()
}

/// Bounded loads by the ring's own rule: HAProxy's ([`haproxy_bounded_loads`]) on the rings
/// of HAProxy's flavours (their nearest-point lookup), else [`bounded_loads`]'s. Same shapes.
pub fn bounded_for(
    flavour: Flavour,
    points: &[(u64, u32)],
    weights: &[u32],
    members: &[u64],
    factor: u32,
) -> Vec<Option<u32>> {
    if flavour.lookup() == Lookup::Nearest {
        haproxy_bounded_loads(points, weights, members, factor)
    } else {
        bounded_loads(points, weights, members, factor)
    }
}

/// HAProxy 2.6's `hash-balance-factor` (`src/lb_chash.c`, `chash_get_server_hash` and
/// `chash_server_is_eligible`, after Mirrokni, Thorup & Zadimoghaddam, adapted to weights):
/// the members are requests that arrive in the order given and all stay in flight; each
/// starts at the point nearest its hash on the 32-bit circle (the one before it on a tie) and
/// walks clockwise, point by point, to the first whose server is eligible: serving fewer than
/// its slots, where with `n` requests already in flight the slots in all are
/// `ceil((n + 1) f / 100)`, shared by effective weight (16 per unit of weight: `e_s`, total
/// `E`, `c_s` the effective weights of the servers before it in order) as
/// `e_s floor(T / E) + floor((c_s + e_s) r / E) - floor(c_s r / E)` with `r = T mod E`, at
/// least 1. Past a second wrap of the circle it stops on the server it checked last, as HAProxy
/// does (only a factor below 100 can leave every server full). `points`
/// are (hash, owner) sorted by hash, `weights` in the servers' declaration order. Returns each
/// member's server (`None` without points). Cost: O(log P) per member plus the points walked.
pub fn haproxy_bounded_loads(
    points: &[(u64, u32)],
    weights: &[u32],
    members: &[u64],
    factor: u32,
) -> Vec<Option<u32>> {
    // HAProxy's effective weight: the user weight times BE_WEIGHT_SCALE (16).
    let effective: Vec<u64> = weights.iter().map(|&w| 16 * u64::from(w)).collect();
    let total: u64 = effective.iter().sum();
    let before: Vec<u64> = effective
        .iter()
        .scan(0u64, |acc, &e| {
            let c = *acc;
            *acc += e;
            Some(c)
        })
        .collect();
    let mut served = vec![0u64; weights.len()];
    let mut in_flight = 0u64;
    let n = points.len();
    let eligible = |s: usize, served: &[u64], in_flight: u64| -> bool {
        let (Some(&e), Some(&c), Some(&now)) = (effective.get(s), before.get(s), served.get(s))
        else {
            return false;
        };
        if total == 0 {
            return false;
        }
        // In u128: no product can overflow whatever the counts.
        let (e, c, total) = (u128::from(e), u128::from(c), u128::from(total));
        let slots_all = (u128::from(in_flight + 1) * u128::from(factor)).div_ceil(100);
        let (per_weight, rest) = (slots_all / total, slots_all % total);
        let slots = (e * per_weight + (c + e) * rest / total - c * rest / total).max(1);
        u128::from(now) < slots
    };
    members
        .iter()
        .map(|&h| {
            let h = h & 0xffff_ffff;
            let next = points.partition_point(|p| p.0 < h);
            let next = if next >= n { 0 } else { next };
            let prev = next.checked_sub(1).unwrap_or(n.checked_sub(1)?);
            let (p, q) = (points.get(prev)?, points.get(next)?);
            let dp = h.wrapping_sub(p.0) & 0xffff_ffff;
            let dn = q.0.wrapping_sub(h) & 0xffff_ffff;
            let mut at = if dp <= dn { prev } else { next };
            let mut wraps = 0;
            loop {
                let s = points.get(at)?.1 as usize;
                if eligible(s, &served, in_flight) {
                    break;
                }
                if at + 1 >= n {
                    wraps += 1;
                    if wraps > 1 {
                        // HAProxy stops on the server it checked last.
                        break;
                    }
                    at = 0;
                } else {
                    at += 1;
                }
            }
            let s = points.get(at)?.1;
            if let Some(c) = served.get_mut(s as usize) {
                *c += 1;
            }
            in_flight += 1;
            Some(s)
        })
        .collect()
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jump_known_answers() {
        // ClickHouse's tests/queries/0_stateless/00580_consistent_hashing_functions.
        assert_eq!(jump(1, 1), Some(0));
        assert_eq!(jump(42, 57), Some(43));
        assert_eq!(jump(256, 1024), Some(520));
        assert_eq!(jump(0xDEAD10CC, 1), Some(0));
        assert_eq!(jump(0xDEAD10CC, 666), Some(361));
        assert_eq!(jump(16045690984833335023, 255), Some(237));
        assert_eq!(jump(7, 0), None);
    }

    #[test]
    fn maglev_paper_example() {
        // Eisenbud et al. 2016, Table 1: M = 7, B0 (offset 3, skip 4), B1 (0, 2), B2 (3, 1)
        // fill [B1, B0, B1, B0, B2, B2, B0]; without B1, [B0, B0, B0, B0, B2, B2, B2].
        let all = [(3, 4, 1), (0, 2, 1), (3, 1, 1)];
        assert_eq!(maglev_fill(&all, 7), vec![1, 0, 1, 0, 2, 2, 0]);
        let without_b1 = [(3, 4, 1), (3, 1, 1)];
        // Indices 0 and 1 here are B0 and B2.
        assert_eq!(maglev_fill(&without_b1, 7), vec![0, 0, 0, 0, 1, 1, 1]);
    }

    #[test]
    fn maglev_envoy_known_answer() {
        // Envoy's test/common/upstream/maglev_lb_test.cc: table size 7, hosts
        // 127.0.0.1:90 .. :95 keyed by address, equal weights: entries [2, 4, 0, 1, 5, 0, 3].
        let names: Vec<String> = (90..96).map(|p| format!("127.0.0.1:{p}")).collect();
        let nodes: Vec<(&[u8], u32)> = names.iter().map(|n| (n.as_bytes(), 1)).collect();
        assert_eq!(maglev_table(&nodes, 7), vec![2, 4, 0, 1, 5, 0, 3]);
        // The table follows the names, not the order nodes are given in.
        let reversed: Vec<(&[u8], u32)> = nodes.iter().rev().copied().collect();
        let table: Vec<u32> = maglev_table(&reversed, 7).iter().map(|&e| 5 - e).collect();
        assert_eq!(table, vec![2, 4, 0, 1, 5, 0, 3]);
    }

    #[test]
    fn maglev_weights_share_the_table() {
        // One node of weight 1000 among 5000 of weight 1 (turns where only the heavy node may
        // claim are skipped, not looped over): the heavy node gets about 1000/6000 of the
        // entries; the light ones claim in whole turns of 5000 entries, so within 5%.
        let names: Vec<String> = (0..5001).map(|i| format!("n{i}")).collect();
        let mut nodes: Vec<(&[u8], u32)> = names.iter().map(|n| (n.as_bytes(), 1)).collect();
        nodes[0].1 = 1000;
        let table = maglev_table(&nodes, 65537);
        assert!(
            table.iter().all(|&e| e != u32::MAX),
            "every entry has a node"
        );
        let heavy = table.iter().filter(|&&e| e == 0).count() as f64;
        let expected = 65537.0 * 1000.0 / 6000.0;
        assert!(
            (heavy - expected).abs() < 0.05 * expected,
            "{heavy} vs {expected}"
        );
    }

    #[test]
    fn xxh64_check_value() {
        // xxHash's reference: XXH64("", seed 0) = 0xef46db3751d8e999.
        assert_eq!(xxh64(b"", 0), 0xef46_db37_51d8_e999);
    }

    #[test]
    fn bounded_loads_by_hand() {
        // Points A at 10, B at 20, C at 30, equal weights; six members, capacity
        // ceil(1.25 x 6 / 3) = 3. Four members at 5 go to A until A is full, the fourth to B;
        // one at 15 to B, one at 25 to C.
        let points = [(10u64, 0u32), (20, 1), (30, 2)];
        let placed = bounded_loads(&points, &[1, 1, 1], &[5, 5, 5, 5, 15, 25], 125);
        assert_eq!(placed, [0, 0, 0, 1, 1, 2].map(Some).to_vec());
        // At 200%, capacity 4: all four at 5 stay on A; one at 35 wraps past the last point to
        // A, full, and goes on to B.
        let placed = bounded_loads(&points, &[1, 1, 1], &[5, 5, 5, 5, 35, 25], 200);
        assert_eq!(placed, [0, 0, 0, 0, 1, 2].map(Some).to_vec());
        assert_eq!(bounded_loads(&[], &[], &[1], 125), vec![None]);
    }

    #[test]
    fn haproxy_bounded_loads_by_hand() {
        // Servers 0 and 1 of weight 1 (16 effective each, 32 in all), points at 100 and 200,
        // factor 100, four requests at 100 (server 0's point). With n in flight the slots in
        // all are n + 1: 1, 2, 3, 4. Server 0's share floor(16 r / 32) is 0 (at least 1), 1, 1,
        // 2; server 1's floor(32 r / 32) - floor(16 r / 32): 1, 1, 2, 2. So: 0 (0 < 1), 1 (0
        // full at 1), 1 (0 full; 1 has 1 < 2), 0 (1 < 2).
        let points = [(100u64, 0u32), (200, 1)];
        let placed = haproxy_bounded_loads(&points, &[1, 1], &[100; 4], 100);
        assert_eq!(placed, [0, 1, 1, 0].map(Some).to_vec());
        // Mirrokni's fixed capacity ceil(4 x 1.0 / 2) = 2 fills server 0 first.
        let fixed = bounded_loads(&points, &[1, 1], &[100; 4], 100);
        assert_eq!(fixed, [0, 0, 1, 1].map(Some).to_vec());
        // The nearest point, the one before winning a tie: 150 is as far from both.
        assert_eq!(
            haproxy_bounded_loads(&points, &[1, 1], &[150, 160], 1000),
            [Some(0), Some(1)]
        );
        assert_eq!(
            bounded_for(Flavour::Haproxy, &points, &[1, 1], &[100; 4], 100),
            placed
        );
        assert_eq!(
            bounded_for(Flavour::Native, &points, &[1, 1], &[100; 4], 100),
            fixed
        );
        assert_eq!(haproxy_bounded_loads(&[], &[], &[1], 125), vec![None]);
    }

    #[test]
    fn multiprobe_points_are_bounded() {
        // Two nodes of weight 1,000,000 (a ketama ring allows it): 2M units of weight, scaled
        // to the cap in proportion.
        let heavy = [(&b"a"[..], 1_000_000u32), (&b"b"[..], 1_000_000)];
        let probe = MultiProbe::new(&heavy);
        assert_eq!(probe.points.len() as u64, MULTIPROBE_MAX_POINTS);
        let light = [(&b"a"[..], 3u32), (&b"b"[..], 1)];
        assert_eq!(MultiProbe::new(&light).points.len(), 4);
    }

    #[test]
    fn primes() {
        assert!(is_prime(7) && is_prime(65537) && is_prime(2));
        assert!(!is_prime(1) && !is_prime(65536) && !is_prime(9));
    }
}
