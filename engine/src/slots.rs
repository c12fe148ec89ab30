//! A simulated Redis Cluster slot table: which node owns each of the 16384 hash slots, kept the
//! way `redis-cli --cluster` would keep it.
//!
//! - First nodes: contiguous ranges, as `clusterManagerCommandCreate` in redis-cli lays out
//!   masters (`slots_per_node = 16384 / masters` in single precision, each range ending at
//!   `lround(cursor + slots_per_node - 1)`, the last master taking the rest).
//! - Every later change: the moves of `redis-cli --cluster rebalance --cluster-use-empty-masters
//!   --cluster-threshold 0` (`clusterManagerCommandRebalance`): expected slots
//!   `(int)((16384.0f / total_weight) * weight)` in single precision, balance = owned - expected,
//!   the rounding surplus taken from the first nodes (in node order) with balance <= 0, nodes
//!   sorted by balance (ties by node order), then receivers from the front are fed by donors
//!   from the back, each donor giving its lowest-numbered slots first.
//!
//! One deliberate difference: redis-cli skips the whole rebalance when no node is more than
//! `threshold` percent off and its test is `threshold > 0`, so a literal threshold of 0 would
//! never move anything; ringslot reads "threshold 0" as "always rebalance".

use super::keyslot::SLOT_COUNT;
use fnv::FnvHashMap;
use std::collections::VecDeque;

/// Slot owner value meaning "no node".
const NONE: u32 = u32::MAX;

/// The owner of each of the 16384 hash slots, as an index into the ring's node list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotTable {
    owners: Vec<u32>,
}

impl Default for SlotTable {
    fn default() -> Self {
        SlotTable::new()
    }
}

impl SlotTable {
    /// A table with no slot assigned.
    pub fn new() -> SlotTable {
        SlotTable {
            owners: vec![NONE; SLOT_COUNT],
        }
    }

    /// The owner (node index) of `slot`, `None` when unassigned or out of range.
    pub fn owner(&self, slot: u16) -> Option<usize> {
        match self.owners.get(usize::from(slot)) {
            Some(&o) if o != NONE => Some(o as usize),
            _ => None,
        }
    }

    /// Whether no slot is assigned.
    pub fn is_empty(&self) -> bool {
        self.owners.iter().all(|&o| o == NONE)
    }

    /// Unassigns every slot.
    pub fn clear(&mut self) {
        self.owners.fill(NONE);
    }

    /// Slots owned by each of `nodes` nodes, in node order.
    pub fn counts(&self, nodes: usize) -> Vec<u32> {
        let mut counts = vec![0u32; nodes];
        for &o in &self.owners {
            if let Some(c) = counts.get_mut(o as usize) {
                *c += 1;
            }
        }
        counts
    }

    /// Contiguous ranges `(start, end, owner)` (inclusive, owner a node index), in slot order,
    /// skipping unassigned slots: the shape of `CLUSTER SLOTS`.
    pub fn ranges(&self) -> Vec<(u16, u16, usize)> {
        let mut ranges: Vec<(u16, u16, usize)> = Vec::new();
        for (slot, &o) in self.owners.iter().enumerate() {
            if o == NONE {
                continue;
            }
            let slot = slot as u16;
            match ranges.last_mut() {
                Some(last) if last.2 == o as usize && last.1 + 1 == slot => last.1 = slot,
                _ => ranges.push((slot, slot, o as usize)),
            }
        }
        ranges
    }

    /// Gives slots `start..=end` to node `owner` and returns whether any slot changed owner
    /// (O(end - start)). Callers check `start <= end <= 16383`; slots outside the table are
    /// ignored.
    pub fn assign(&mut self, start: u16, end: u16, owner: usize) -> bool {
        let owner = u32::try_from(owner).unwrap_or(NONE);
        let Some(range) = self.owners.get_mut(usize::from(start)..=usize::from(end)) else {
            return false;
        };
        let changed = range.iter().any(|&o| o != owner);
        range.fill(owner);
        changed
    }

    /// Lays out every slot over `masters` (node indices, in the order redis-cli deals them; see
    /// [`create_master_order`]) in contiguous ranges, as `redis-cli --cluster create` does:
    /// `slots_per_node = 16384 / masters` and a cursor in single precision, each range ending at
    /// `lround(cursor + slots_per_node - 1)`, the last master taking the rest. No-op for none.
    pub fn create_layout(&mut self, masters: &[usize]) {
        let count = masters.len();
        if count == 0 {
            return;
        }
        let per_node = SLOT_COUNT as f32 / count as f32;
        let mut cursor = 0.0f32;
        let mut first: i64 = 0;
        for (i, &node) in masters.iter().enumerate() {
            let mut last = (f64::from(cursor + per_node - 1.0)).round() as i64;
            if last > SLOT_COUNT as i64 || i == count - 1 {
                last = SLOT_COUNT as i64 - 1;
            }
            if last < first {
                last = first;
            }
            for slot in first..=last {
                if let Some(o) = self.owners.get_mut(slot as usize) {
                    *o = u32::try_from(node).unwrap_or(NONE);
                }
            }
            first = last + 1;
            cursor += per_node;
        }
    }

    /// Rebalances the table over nodes of the given weights (index = node; weight 0 drains a
    /// node), with the moves of `redis-cli --cluster rebalance --cluster-use-empty-masters`
    /// (see the module docs). Returns the moves in the order it made them, as redis-cli prints
    /// them ("Moving N slots from A to B"). No-op when the total weight is 0.
    pub fn rebalance(&mut self, weights: &[u32]) -> Vec<RebalanceStep> {
        let total_weight: f32 = weights.iter().map(|&w| w as f32).sum();
        if weights.is_empty() || total_weight <= 0.0 {
            return Vec::new();
        }
        let counts = self.counts(weights.len());
        let mut balance: Vec<i64> = weights
            .iter()
            .zip(&counts)
            .map(|(&w, &c)| {
                let expected = ((SLOT_COUNT as f32 / total_weight) * w as f32) as i64;
                i64::from(c) - expected
            })
            .collect();
        let mut total_balance: i64 = balance.iter().sum();
        while total_balance > 0 {
            for b in balance.iter_mut() {
                if *b <= 0 && total_balance > 0 {
                    *b -= 1;
                    total_balance -= 1;
                }
            }
        }
        let order = stable_order_by(&balance);

        let mut moves = Vec::new();
        // Where each donor's next slot is, from its first slot on: a donor only gives in one
        // rebalance, so its slots before this position are gone already, and each slot is
        // looked at once in all (16384 donors of one slot each do not each scan from slot 0).
        let mut next = vec![usize::MAX; weights.len()];
        for (slot, &o) in self.owners.iter().enumerate() {
            if let Some(n) = next.get_mut(o as usize) {
                if *n == usize::MAX {
                    *n = slot;
                }
            }
        }
        let (mut dst_i, mut src_i) = (0usize, order.len() - 1);
        while dst_i < src_i {
            let (Some(&dst), Some(&src)) = (order.get(dst_i), order.get(src_i)) else {
                break;
            };
            let db = balance.get(dst).map_or(0, |b| b.abs());
            let sb = balance.get(src).map_or(0, |b| b.abs());
            let num = db.min(sb);
            if num > 0 {
                if let Some(from) = next.get_mut(src) {
                    let slots = self.move_lowest(src, dst, num as usize, from);
                    moves.push(RebalanceStep {
                        from: Some(src),
                        to: Some(dst),
                        slots,
                    });
                }
            }
            if let Some(b) = balance.get_mut(dst) {
                *b += num;
                if *b == 0 {
                    dst_i += 1;
                }
            }
            if let Some(b) = balance.get_mut(src) {
                *b -= num;
                if *b == 0 {
                    src_i = src_i.saturating_sub(1);
                }
            }
        }
        moves
    }

    /// Moves the `count` lowest-numbered slots of `src` at or after slot `*from` to `dst`,
    /// leaves `*from` after the last one moved; returns the slots moved.
    fn move_lowest(&mut self, src: usize, dst: usize, count: usize, from: &mut usize) -> Vec<u16> {
        let (src, dst) = (src as u32, dst as u32);
        let mut moved = Vec::with_capacity(count.min(SLOT_COUNT));
        for (slot, o) in self.owners.iter_mut().enumerate().skip(*from) {
            if moved.len() >= count {
                break;
            }
            if *o == src {
                *o = dst;
                moved.push(slot as u16);
                *from = slot + 1;
            }
        }
        moved
    }

    /// The ranges of slots no node owns, in slot order.
    pub fn unassigned(&self) -> Vec<(u16, u16)> {
        let free: Vec<u16> = (0..SLOT_COUNT as u16)
            .filter(|&s| self.owner(s).is_none())
            .collect();
        slot_runs(&free)
    }

    /// Unassigns slots `start..=end`, as `CLUSTER DELSLOTSRANGE`; returns whether any slot had
    /// an owner. Callers check `start <= end <= 16383`.
    pub fn unassign(&mut self, start: u16, end: u16) -> bool {
        let Some(range) = self.owners.get_mut(usize::from(start)..=usize::from(end)) else {
            return false;
        };
        let changed = range.iter().any(|&o| o != NONE);
        range.fill(NONE);
        changed
    }

    /// Renumbers owners after the nodes marked in `gone` (by old index) left the node list:
    /// their slots become unassigned and the others take their new index (their position
    /// among the survivors). One pass over the table, however many nodes leave.
    pub fn remove_nodes(&mut self, gone: &[bool]) {
        let mut new_index = Vec::with_capacity(gone.len());
        let mut next = 0u32;
        for &g in gone {
            new_index.push(if g { NONE } else { next });
            next += u32::from(!g);
        }
        for o in self.owners.iter_mut() {
            if let Some(&n) = new_index.get(*o as usize) {
                *o = n;
            }
        }
    }

    /// Heap bytes used by the table.
    pub fn memory_bytes(&self) -> usize {
        self.owners.capacity() * 4
    }
}

/// One step of a rebalance, as `redis-cli --cluster rebalance` prints it ("Moving N slots
/// from A to B"): slots that change owner together, from a node (`None` for unassigned slots)
/// to a node (`None` when they become unassigned). `N` names the nodes: an index into the
/// ring's nodes (the slot table's own), a node's name ([`crate::Topology::plan`]), or an
/// address (the operator's tool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebalanceStep<N = usize> {
    /// The node that gives the slots.
    pub from: Option<N>,
    /// The node that takes them.
    pub to: Option<N>,
    /// The slots, ascending.
    pub slots: Vec<u16>,
}

impl<N> RebalanceStep<N> {
    /// The same step with its nodes named by `name` (a node it cannot name: `None`).
    pub fn named<M>(self, mut name: impl FnMut(N) -> Option<M>) -> RebalanceStep<M> {
        RebalanceStep {
            from: self.from.and_then(&mut name),
            to: self.to.and_then(&mut name),
            slots: self.slots,
        }
    }
}

/// `(start, end)` runs of consecutive slots, from slots in ascending order.
pub fn slot_runs(slots: &[u16]) -> Vec<(u16, u16)> {
    let mut runs: Vec<(u16, u16)> = Vec::new();
    for &s in slots {
        match runs.last_mut() {
            Some(last) if u32::from(last.1) + 1 == u32::from(s) => last.1 = s,
            _ => runs.push((s, s)),
        }
    }
    runs
}

/// The indices of `keys` sorted by key, equal keys in index order (a stable sort, as glibc's
/// `qsort` sorts redis-cli's balances), by counting: the keys of a rebalance lie within
/// -16384..=16384, so this is O(N + 32768) instead of O(N log N) for a ring of N nodes.
fn stable_order_by(keys: &[i64]) -> Vec<usize> {
    let (Some(&lo), Some(&hi)) = (keys.iter().min(), keys.iter().max()) else {
        return Vec::new();
    };
    let span = usize::try_from(i128::from(hi) - i128::from(lo)).unwrap_or(usize::MAX);
    if span > 4 * SLOT_COUNT + keys.len() {
        // Not a rebalance's balances: an ordinary stable sort.
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by_key(|&i| keys.get(i).copied().unwrap_or(0));
        return order;
    }
    let bucket = |k: i64| usize::try_from(i128::from(k) - i128::from(lo)).unwrap_or(0);
    let mut start = vec![0usize; span + 2];
    for &k in keys {
        if let Some(c) = start.get_mut(bucket(k) + 1) {
            *c += 1;
        }
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let mut order = vec![0usize; keys.len()];
    for (i, &k) in keys.iter().enumerate() {
        if let Some(at) = start.get_mut(bucket(k)) {
            if let Some(slot) = order.get_mut(*at) {
                *slot = i;
            }
            *at += 1;
        }
    }
    order
}

/// The order in which `redis-cli --cluster create` deals nodes to masters: grouped by host
/// (the name before its last `:`; hosts in order of first appearance), then taken round-robin
/// across hosts, so that consecutive masters sit on different hosts where possible.
pub fn create_master_order(names: &[&[u8]]) -> Vec<usize> {
    let host = |name: &'_ [u8]| -> Vec<u8> {
        match name.iter().rposition(|&b| b == b':') {
            Some(colon) => name.get(..colon).unwrap_or(name).to_vec(),
            None => name.to_vec(),
        }
    };
    // Hosts in order of first appearance, each with its nodes in order: O(N) with a map
    // from host to group.
    let mut group_of: FnvHashMap<Vec<u8>, usize> = FnvHashMap::default();
    let mut groups: Vec<VecDeque<usize>> = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let g = *group_of.entry(host(name)).or_insert_with(|| {
            groups.push(VecDeque::new());
            groups.len() - 1
        });
        if let Some(members) = groups.get_mut(g) {
            members.push_back(i);
        }
    }
    // Round-robin across hosts; a host with no node left drops out, so the rounds cost
    // O(N) in all, however unequal the hosts.
    let mut order = Vec::with_capacity(names.len());
    while !groups.is_empty() {
        for members in groups.iter_mut() {
            if let Some(i) = members.pop_front() {
                order.push(i);
            }
        }
        groups.retain(|members| !members.is_empty());
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_layout_matches_redis_cli() {
        // redis-cli --cluster create with 3 masters prints
        // "Master[0] -> Slots 0 - 5460", "Master[1] -> Slots 5461 - 10922",
        // "Master[2] -> Slots 10923 - 16383".
        let mut t = SlotTable::new();
        t.create_layout(&[0, 1, 2]);
        assert_eq!(
            t.ranges(),
            vec![(0, 5460, 0), (5461, 10922, 1), (10923, 16383, 2)]
        );
    }

    #[test]
    fn create_deals_masters_round_robin_by_host() {
        let names: [&[u8]; 4] = [b"a:1", b"a:2", b"b:1", b"b:2"];
        assert_eq!(create_master_order(&names), vec![0, 2, 1, 3]);
        // Unequal hosts: a host with nodes left keeps its turn after the others run out.
        let names: [&[u8]; 6] = [b"a:1", b"b:1", b"a:2", b"c:1", b"a:3", b"b:2"];
        assert_eq!(create_master_order(&names), vec![0, 1, 3, 2, 5, 4]);
    }

    #[test]
    fn counting_order_is_a_stable_sort() {
        let keys = [3, -1, 0, 3, -1, 16384, -16384, 0];
        let mut expected: Vec<usize> = (0..keys.len()).collect();
        expected.sort_by_key(|&i| keys[i]);
        assert_eq!(stable_order_by(&keys), expected);
        assert_eq!(stable_order_by(&[]), Vec::<usize>::new());
        let wide = [i64::MAX, i64::MIN, 0];
        assert_eq!(stable_order_by(&wide), vec![1, 2, 0]);
    }

    #[test]
    fn removing_nodes_renumbers_in_one_pass() {
        let mut t = SlotTable::new();
        t.create_layout(&[0, 1, 2, 3]);
        t.remove_nodes(&[false, true, false, true]);
        assert_eq!(t.ranges(), vec![(0, 4095, 0), (8192, 12287, 1)]);
    }

    #[test]
    fn rebalance_to_four_equal_nodes() {
        let mut t = SlotTable::new();
        t.create_layout(&[0, 1, 2]);
        let moves = t.rebalance(&[1, 1, 1, 1]);
        assert_eq!(t.counts(4), vec![4096, 4096, 4096, 4096]);
        // Each of the three gives its lowest 1365 or 1366 slots to the new node (redis-cli
        // prints "Moving 1366 slots from ... to ..." then 1365 twice; donors from the back of
        // its balance order).
        let given: Vec<(Option<usize>, Option<usize>, usize)> = moves
            .iter()
            .map(|m| (m.from, m.to, m.slots.len()))
            .collect();
        assert_eq!(given.iter().map(|g| g.2).sum::<usize>(), 4096);
        assert!(given.iter().all(|g| g.1 == Some(3)));
        assert_eq!(
            slot_runs(&moves[0].slots).len(),
            1,
            "the lowest slots, in one run"
        );
    }
}
