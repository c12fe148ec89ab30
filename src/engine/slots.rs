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

    /// Gives slots `start..=end` to node `owner`. Callers check `start <= end <= 16383`; slots
    /// outside the table are ignored.
    pub fn assign(&mut self, start: u16, end: u16, owner: usize) {
        let owner = u32::try_from(owner).unwrap_or(NONE);
        if let Some(range) = self.owners.get_mut(usize::from(start)..=usize::from(end)) {
            range.fill(owner);
        }
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
    /// (see the module docs). Returns the number of slots that changed owner. No-op when the
    /// total weight is 0.
    pub fn rebalance(&mut self, weights: &[u32]) -> usize {
        let total_weight: f32 = weights.iter().map(|&w| w as f32).sum();
        if weights.is_empty() || total_weight <= 0.0 {
            return 0;
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
        let mut order: Vec<usize> = (0..weights.len()).collect();
        order.sort_by_key(|&i| balance.get(i).copied().unwrap_or(0));

        let mut moved = 0;
        let (mut dst_i, mut src_i) = (0usize, order.len() - 1);
        while dst_i < src_i {
            let (Some(&dst), Some(&src)) = (order.get(dst_i), order.get(src_i)) else {
                break;
            };
            let db = balance.get(dst).map_or(0, |b| b.abs());
            let sb = balance.get(src).map_or(0, |b| b.abs());
            let num = db.min(sb);
            if num > 0 {
                moved += self.move_lowest(src, dst, num as usize);
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
        moved
    }

    /// Moves the `count` lowest-numbered slots of `src` to `dst`; returns how many moved.
    fn move_lowest(&mut self, src: usize, dst: usize, count: usize) -> usize {
        let (src, dst) = (src as u32, dst as u32);
        let mut moved = 0;
        for o in self.owners.iter_mut() {
            if moved >= count {
                break;
            }
            if *o == src {
                *o = dst;
                moved += 1;
            }
        }
        moved
    }

    /// Renumbers owners after node `removed` left the node list: its slots become unassigned
    /// and higher indices shift down by one.
    pub fn remove_node(&mut self, removed: usize) {
        let removed = removed as u32;
        for o in self.owners.iter_mut() {
            if *o == NONE {
                continue;
            }
            if *o == removed {
                *o = NONE;
            } else if *o > removed {
                *o -= 1;
            }
        }
    }

    /// Heap bytes used by the table.
    pub fn memory_bytes(&self) -> usize {
        self.owners.capacity() * 4
    }
}

/// The order in which `redis-cli --cluster create` deals nodes to masters: grouped by host
/// (the name before its last `:`; hosts in order of first appearance), then taken round-robin
/// across hosts, so that consecutive masters sit on different hosts where possible.
pub fn create_master_order(names: &[&[u8]]) -> Vec<usize> {
    let host = |name: &[u8]| -> Vec<u8> {
        match name.iter().rposition(|&b| b == b':') {
            Some(colon) => name.get(..colon).unwrap_or(name).to_vec(),
            None => name.to_vec(),
        }
    };
    let mut groups: Vec<(Vec<u8>, std::collections::VecDeque<usize>)> = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let h = host(name);
        match groups.iter_mut().find(|(g, _)| *g == h) {
            Some((_, members)) => members.push_back(i),
            None => groups.push((h, std::collections::VecDeque::from([i]))),
        }
    }
    let mut order = Vec::with_capacity(names.len());
    while order.len() < names.len() {
        for (_, members) in groups.iter_mut() {
            if let Some(i) = members.pop_front() {
                order.push(i);
            }
        }
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
    }

    #[test]
    fn rebalance_to_four_equal_nodes() {
        let mut t = SlotTable::new();
        t.create_layout(&[0, 1, 2]);
        t.rebalance(&[1, 1, 1, 1]);
        assert_eq!(t.counts(4), vec![4096, 4096, 4096, 4096]);
    }
}
