//! Each node's memory under each plan against its limit. A master's peak is its `used_memory`
//! walked through the plan's moves (per key: a target grows and a source shrinks as each key
//! lands; atomic: a source keeps its copy until the trim, [`super::method`]) plus one batch: a
//! node checks its limit before a command runs, so a `RESTORE` that starts just under it lands
//! whole, and a source holds a batch's payload while its `MIGRATE` runs. A replica follows its
//! master: its peak is its own `used_memory` plus what its master's peak adds. The limit is
//! `maxmemory` less a margin (`--headroom`), counted as the node counts it (`used_memory` less
//! `mem_not_counted_for_evict`); a node without `maxmemory` has no limit but its host's RAM
//! (`total_system_memory`), which every node on the host shares: their peaks are added up.

use super::method::{Method, MethodCost};
use crate::cluster::memory::{NodeMemory, Policy};
use serde::Serialize;
use std::collections::BTreeMap;

/// `--headroom`'s default, in percent: the part of `maxmemory` (or of the host's RAM) a plan
/// keeps free at every node's peak.
pub const DEFAULT_HEADROOM: f64 = 10.0;

/// The memory one batch adds at its peak where no big key moves: `ringslot apply`'s
/// `--batch-bytes` cap (1 MiB; redis-cli's batches of 10 keys are taken to be under it).
pub const BATCH_MARGIN: f64 = 1024.0 * 1024.0;

/// How a node stands at its peak under one plan and method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Under its limit less the margin.
    Fits,
    /// Past its limit less the margin, under the limit itself.
    InMargin,
    /// Past its limit (or the host's RAM).
    Crosses,
}

/// One node's peak under one plan and method.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanPeak {
    /// The plan (`redis-cli`, `by bytes`, ...).
    pub plan: String,
    /// How the slots move.
    pub method: Method,
    /// Its memory at the peak, bytes (`used_memory`, a batch included).
    pub peak: f64,
    /// Against its limit.
    pub verdict: Verdict,
}

/// One node against its limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeCapacity {
    /// Its memory now.
    pub memory: NodeMemory,
    /// For a replica, its master.
    pub replica_of: Option<String>,
    /// What it is judged against, bytes: `maxmemory`, or the host's RAM where it has none.
    pub limit: f64,
    /// Whether that is the host's RAM (`maxmemory 0`), shared by `host_nodes` nodes.
    pub limit_is_ram: bool,
    pub host_nodes: usize,
    /// Under each plan and method.
    pub peaks: Vec<PlanPeak>,
}

impl NodeCapacity {
    /// The worst of its verdicts.
    pub fn worst(&self) -> Verdict {
        let rank = |v: Verdict| match v {
            Verdict::Fits => 0,
            Verdict::InMargin => 1,
            Verdict::Crosses => 2,
        };
        self.peaks
            .iter()
            .map(|p| p.verdict)
            .max_by_key(|v| rank(*v))
            .unwrap_or(Verdict::Fits)
    }

    /// What crossing means for it, in words.
    pub fn consequence(&self) -> String {
        if self.replica_of.is_some() {
            return "a replica does not evict: it grows past its maxmemory towards its \
                    host's RAM, where the kernel's OOM killer ends it"
                .to_string();
        }
        if self.limit_is_ram {
            return "it has no maxmemory: it grows towards its host's RAM, where the kernel's \
                    OOM killer ends it"
                .to_string();
        }
        self.memory.policy.crossing().to_string()
    }
}

/// The cluster's memory against its limits under every plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capacity {
    /// The margin kept free under each limit, a fraction (`--headroom` / 100).
    pub headroom: f64,
    /// Every node whose memory was read: masters, then replicas.
    pub nodes: Vec<NodeCapacity>,
}

/// A plan's costs per method, and the batch each master's peak adds (bytes, by address: a
/// master the plan neither sends from nor sends to has none, see [`batches`]).
pub struct PlanCosts<'a> {
    /// The plan's name (`redis-cli`, `by bytes`, ...).
    pub plan: &'a str,
    /// Its memory per master under each way of moving slots ([`super::method`]).
    pub methods: &'a [MethodCost],
    /// The batch on top of each master's peak, bytes, by address ([`batches`]).
    pub batches: &'a BTreeMap<String, f64>,
}

/// The capacity of `masters` and `replicas` (each replica with its master's address) under
/// `plans`, with `headroom` (a fraction) kept free.
pub fn capacity(
    masters: &[NodeMemory],
    replicas: &[(NodeMemory, String)],
    plans: &[PlanCosts],
    headroom: f64,
) -> Capacity {
    let host = |address: &str| {
        address
            .rsplit_once(':')
            .map_or(address, |(h, _)| h)
            .to_string()
    };
    // Every node's peaks before the limits: (plan, method, peak).
    let mut peaks: BTreeMap<String, Vec<(String, Method, f64)>> = BTreeMap::new();
    for plan in plans {
        for cost in plan.methods {
            for row in &cost.memory {
                let batch = plan.batches.get(&row.address).copied().unwrap_or(0.0);
                let top = if cost.method == Method::Atomic {
                    row.peak.max(row.worst)
                } else {
                    row.peak
                };
                peaks.entry(row.address.clone()).or_default().push((
                    plan.plan.to_string(),
                    cost.method,
                    top + batch,
                ));
                for (replica, _) in replicas.iter().filter(|(_, m)| *m == row.address) {
                    peaks.entry(replica.address.clone()).or_default().push((
                        plan.plan.to_string(),
                        cost.method,
                        replica.used + (top + batch - row.now).max(0.0),
                    ));
                }
            }
        }
    }
    let all: Vec<(&NodeMemory, Option<String>)> = masters
        .iter()
        .map(|m| (m, None))
        .chain(replicas.iter().map(|(r, m)| (r, Some(m.clone()))))
        .collect();
    // Nodes without maxmemory share their host's RAM: their peaks add up there.
    let mut shared: BTreeMap<(String, String, Method), f64> = BTreeMap::new();
    let mut on_host: BTreeMap<String, usize> = BTreeMap::new();
    for (m, _) in &all {
        if m.maxmemory <= 0.0 {
            *on_host.entry(host(&m.address)).or_default() += 1;
            for (plan, method, peak) in peaks.get(&m.address).into_iter().flatten() {
                *shared
                    .entry((host(&m.address), plan.clone(), *method))
                    .or_default() += peak;
            }
        }
    }
    let nodes = all
        .into_iter()
        .map(|(m, replica_of)| {
            let limit_is_ram = m.maxmemory <= 0.0;
            let limit = if limit_is_ram { m.system } else { m.maxmemory };
            let not_counted = m.used - m.counted;
            let judged = |plan: &str, method: Method, peak: f64| {
                let counted = if limit_is_ram {
                    shared
                        .get(&(host(&m.address), plan.to_string(), method))
                        .copied()
                        .unwrap_or(peak)
                } else if replica_of.is_some() {
                    // A replica does not evict: all it uses grows towards its limit.
                    peak
                } else {
                    peak - not_counted
                };
                if limit <= 0.0 {
                    Verdict::Fits
                } else if counted > limit {
                    Verdict::Crosses
                } else if counted > limit * (1.0 - headroom) {
                    Verdict::InMargin
                } else {
                    Verdict::Fits
                }
            };
            let node_peaks = peaks
                .get(&m.address)
                .into_iter()
                .flatten()
                .map(|(plan, method, peak)| PlanPeak {
                    plan: plan.clone(),
                    method: *method,
                    peak: *peak,
                    verdict: judged(plan, *method, *peak),
                })
                .collect();
            NodeCapacity {
                memory: m.clone(),
                replica_of,
                limit,
                limit_is_ram,
                host_nodes: if limit_is_ram {
                    on_host.get(&host(&m.address)).copied().unwrap_or(1)
                } else {
                    1
                },
                peaks: node_peaks,
            }
        })
        .collect();
    Capacity { headroom, nodes }
}

/// The batch each master's peak adds under a plan whose moves go `(from, to)`: a target
/// receives one batch while it holds the rest, a source holds one batch's payload while its
/// `MIGRATE` runs; the batch is [`BATCH_MARGIN`], or a big key alone where one is bigger
/// (`big`: per slot moved, the memory and `DUMP` bytes of its biggest big key).
pub fn batches<'a>(
    moves: impl IntoIterator<Item = (&'a str, &'a str, u16)>,
    big: &BTreeMap<u16, (f64, f64)>,
) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for (from, to, slot) in moves {
        let (memory, dump) = big.get(&slot).copied().unwrap_or((0.0, 0.0));
        for (node, bytes) in [(to, memory), (from, dump)] {
            let e = out.entry(node.to_string()).or_insert(BATCH_MARGIN);
            *e = e.max(bytes);
        }
    }
    out
}

/// Whether `policy` can delete keys at all when a node crosses its limit.
pub fn evicts(policy: &Policy) -> bool {
    !matches!(policy, Policy::NoEviction)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::method::MemoryRow;

    fn memory(address: &str, used: f64, maxmemory: f64) -> NodeMemory {
        NodeMemory {
            address: address.into(),
            used,
            counted: used,
            maxmemory,
            policy: Policy::of("allkeys-lru"),
            system: 1000.0,
            evicted_keys: 0,
        }
    }

    fn row(address: &str, now: f64, peak: f64) -> MemoryRow {
        MemoryRow {
            address: address.into(),
            now,
            peak,
            worst: peak,
            end: peak,
        }
    }

    #[test]
    fn peaks_take_a_batch_and_replicas_follow_their_masters() {
        let masters = [memory("a:1", 100.0, 400.0), memory("b:1", 100.0, 200.0)];
        let replicas = [(memory("b:2", 90.0, 0.0), "b:1".to_string())];
        let cost = MethodCost {
            method: Method::PerKey,
            seconds: 1.0,
            jobs: 1,
            memory: vec![row("a:1", 100.0, 100.0), row("b:1", 100.0, 170.0)],
        };
        let margins: BTreeMap<String, f64> = [("b:1".to_string(), 20.0)].into_iter().collect();
        let c = capacity(
            &masters,
            &replicas,
            &[PlanCosts {
                plan: "by bytes",
                methods: std::slice::from_ref(&cost),
                batches: &margins,
            }],
            0.1,
        );
        // a takes no part: no batch, 100 under 360.
        assert_eq!(c.nodes[0].worst(), Verdict::Fits);
        // b: 170 + 20 = 190, past 180 (200 less 10%), under 200.
        assert_eq!(c.nodes[1].peaks[0].peak, 190.0);
        assert_eq!(c.nodes[1].worst(), Verdict::InMargin);
        // The replica: 90 + (190 - 100) = 180, against the host's RAM (1000) alone.
        let r = &c.nodes[2];
        assert_eq!(
            (r.peaks[0].peak, r.limit_is_ram, r.limit),
            (180.0, true, 1000.0)
        );
        assert_eq!(r.worst(), Verdict::Fits);
        assert!(r.consequence().contains("does not evict"));
        // A batch is 1 MiB, or a big key alone where one is bigger.
        let big: BTreeMap<u16, (f64, f64)> = [(7, (5e6, 3e6))].into_iter().collect();
        let b = batches([("a:1", "b:1", 7), ("a:1", "c:1", 8)], &big);
        assert_eq!(b["b:1"], 5e6);
        assert_eq!(b["a:1"], 3e6);
        assert_eq!(b["c:1"], BATCH_MARGIN);
    }
}
