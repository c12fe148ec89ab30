//! `ringslot status`: how a live cluster stands, read only and cheaply. Per master: its slots,
//! keys (`DBSIZE`, as `redis-cli --cluster check` counts them), bytes (`MEMORY USAGE` of a
//! sample of each slot's keys, scaled to the slot's key count, with the error stated), memory
//! against `maxmemory` and its policy, its replicas with their link and lag, its open slots
//! (`MIGRATING`/`IMPORTING`) and Valkey 9's atomic slot migrations; the balance by slots, keys
//! and bytes (peak-to-mean); the biggest slots; big keys met in the sample; and a one-line
//! verdict that names the next command. With `--big-keys`, every key is screened for big keys
//! as `predict` does (`SCAN`, `MEMORY USAGE ... SAMPLES 5`, rate-limited): O(keys).
//!
//! Unlike `predict`, it refuses no cluster: a failing node, an open slot or a running
//! migration is what it reports. Its work does not grow with the keyspace: per master one
//! `CLUSTER NODES`, a few `INFO` sections, one `CLUSTER SLOT-STATS` (Valkey 8 and later, Redis
//! 8.2 and later) or a `COUNTKEYSINSLOT` per slot, and per slot with keys one `CLUSTER
//! GETKEYSINSLOT slot N` and N `MEMORY USAGE key SAMPLES 5` (each O(1)), pipelined.

pub mod picture;
pub(crate) mod read;
pub mod report;
pub(crate) mod verdict;

use crate::predict::estimate::Estimate;
use serde::Serialize;

pub use read::read_status;

/// The format of `ringslot status --json` (docs/cluster.md "How the cluster stands"): a field
/// renamed or removed, or one whose meaning changes, takes a new number; fields added keep it.
pub const STATUS_VERSION: u32 = 1;

/// Keys sized a slot by default (`--bytes-sample`).
pub const DEFAULT_KEYS_PER_SLOT: u64 = 8;

/// What `ringslot status` reads.
#[derive(Debug, Clone)]
pub struct StatusOptions {
    /// Keys sized a slot (`--bytes-sample`).
    pub keys_per_slot: u64,
    /// The biggest slots and big keys listed, at most (`--top`).
    pub top: usize,
    /// With `--big-keys`: screen every key for big keys, this many keys a second a master (0:
    /// no limit); `None`: the sample's big keys only.
    pub screen: Option<u64>,
}

/// How a cluster stands (`ringslot status --json`; docs/cluster.md "Status" lists the fields).
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// [`STATUS_VERSION`].
    pub version: u32,
    /// The node read first (`ip:port`), and its server and version (`redis 7.0.15`).
    pub seed: String,
    pub server: String,
    /// The one-line verdict: the most pressing finding and the command that acts on it.
    pub verdict: String,
    /// Every finding, most pressing first ([`verdict::findings`]), typed (`kind` and its
    /// fields: docs/cluster.md "Exit status").
    pub findings: Vec<crate::cluster::finding::Finding>,
    /// The masters: those that serve slots, then those without, each by address.
    pub masters: Vec<MasterStatus>,
    /// Nodes flagged failing (`fail`, `fail?`), in handshake or without an address (a failing
    /// master is among `masters` too, not read).
    pub flagged: Vec<FlaggedNode>,
    /// Slots no master serves.
    pub uncovered_slots: u64,
    /// The masters' peak-to-mean by slots, keys and bytes (1.0: even).
    pub balance: Balance,
    /// The slots with the most bytes, most first (at most `--top`).
    pub biggest_slots: Vec<SlotStatus>,
    /// Keys whose `MEMORY USAGE ... SAMPLES 5` is 512 KiB or more, biggest first (at most
    /// `--top`): of the sample, or of every key with `--big-keys`.
    pub big_keys: Vec<BigKeyStatus>,
    /// Keys sized a slot (`--bytes-sample`), and keys sized in all.
    pub keys_per_slot: u64,
    pub keys_sized: u64,
    /// Whether every key was screened for big keys (`--big-keys`), else only the sample's.
    pub big_keys_screened: bool,
    /// Seconds the reads took.
    pub seconds: f64,
    /// The owner (`ip:port`) of each of the 16384 slots, as the seed sees them (for the
    /// picture; not in the JSON, where each master's `slots` count stands).
    #[serde(skip)]
    pub owners: Vec<Option<String>>,
}

/// One master as `status` reads it.
#[derive(Debug, Clone, Serialize)]
pub struct MasterStatus {
    /// `ip:port` as the cluster announces it, and its node id.
    pub address: String,
    pub id: String,
    /// Slots it serves.
    pub slots: u64,
    /// Keys it holds (`DBSIZE`: keys of slots under migration included, as redis-cli counts).
    pub keys: u64,
    /// Keys in the slots it serves (`CLUSTER SLOT-STATS` or `COUNTKEYSINSLOT`).
    pub keys_in_slots: u64,
    /// Its keys' bytes by `MEMORY USAGE`, estimated from the sample, with two standard errors.
    pub bytes: Estimate,
    /// Keys of its slots sized for that estimate.
    pub sampled: u64,
    /// `used_memory` and `maxmemory` (0: none), bytes; `maxmemory-policy`; `evicted_keys`.
    pub used_memory: f64,
    pub maxmemory: f64,
    pub policy: String,
    pub evicted_keys: u64,
    /// All it said of its memory, which the memory model judges it by (`None`: not read).
    #[serde(skip)]
    pub memory: Option<crate::cluster::memory::NodeMemory>,
    /// Its replicas.
    pub replicas: Vec<ReplicaStatus>,
    /// Slots it is migrating away (to `peer`) or importing (from `peer`).
    pub migrating: Vec<OpenSlot>,
    pub importing: Vec<OpenSlot>,
    /// Atomic slot migrations not over (`CLUSTER GETSLOTMIGRATIONS`, Valkey 9 and later).
    pub atomic_migrations: Vec<AtomicMigration>,
    /// Why it could not be read (empty when it was; then its figures are 0 and it is left out
    /// of the balance).
    pub unread: String,
    /// Its share of the cluster's slots, keys and bytes over an even share (1.0: even).
    pub slots_share: f64,
    pub keys_share: f64,
    pub bytes_share: f64,
}

/// One replica of a master.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaStatus {
    /// `ip:port` as the cluster announces it.
    pub address: String,
    /// The replica's `master_link_status` (`up`, `down`; empty where it could not be read).
    pub link: String,
    /// Bytes of the replication stream it has not acknowledged (`master_repl_offset` less its
    /// offset), as its master reports it; `None` where the master does not list it.
    pub lag_bytes: Option<u64>,
    /// Why it could not be read (empty when it was).
    pub unread: String,
}

/// A slot left open on a master.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct OpenSlot {
    pub slot: u16,
    /// The other side (`ip:port`, or the node id where the cluster does not list it).
    pub peer: String,
}

/// An atomic slot migration not over.
#[derive(Debug, Clone, Serialize)]
pub struct AtomicMigration {
    /// `EXPORT` or `IMPORT`, its `slot_ranges`, its `state`, and the other side's node id.
    pub operation: String,
    pub slots: String,
    pub state: String,
    pub peer: String,
}

/// A node that cannot serve.
#[derive(Debug, Clone, Serialize)]
pub struct FlaggedNode {
    pub address: String,
    pub flag: String,
    /// Whether it is a master (its slots wait for a failover), else a replica.
    pub master: bool,
}

/// Peak-to-mean over the masters (the largest share over the mean; 1.0: even).
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Balance {
    pub slots: f64,
    pub keys: f64,
    pub bytes: f64,
}

/// One slot and what it holds.
#[derive(Debug, Clone, Serialize)]
pub struct SlotStatus {
    pub slot: u16,
    pub master: String,
    pub keys: u64,
    /// Its bytes, estimated from its sample.
    pub bytes: f64,
}

/// A big key met in the sample.
#[derive(Debug, Clone, Serialize)]
pub struct BigKeyStatus {
    /// The key (invalid UTF-8 shown with replacement characters), its slot and master.
    pub key: String,
    pub slot: u16,
    pub master: String,
    /// `TYPE`, and its elements (or a string's bytes; 0 for a type without an O(1) length).
    #[serde(rename = "type")]
    pub kind: String,
    pub length: u64,
    /// `MEMORY USAGE key SAMPLES 5`, bytes.
    pub memory: f64,
}

/// Peak-to-mean of `values` (the largest over the mean); 1.0 for none or all zero.
pub(crate) fn peak_to_mean(values: &[f64]) -> f64 {
    let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
    if mean <= 0.0 {
        return 1.0;
    }
    values.iter().fold(0.0f64, |a, &v| a.max(v)) / mean
}

/// Each of `values` over their mean (1.0 each where the mean is 0).
pub(crate) fn shares(values: &[f64]) -> Vec<f64> {
    let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
    values
        .iter()
        .map(|v| if mean > 0.0 { v / mean } else { 1.0 })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_to_mean_and_shares_are_over_the_mean() {
        assert_eq!(peak_to_mean(&[1.0, 1.0, 1.0]), 1.0);
        assert_eq!(peak_to_mean(&[3.0, 1.0, 2.0]), 1.5);
        assert_eq!(peak_to_mean(&[]), 1.0);
        assert_eq!(peak_to_mean(&[0.0, 0.0]), 1.0);
        assert_eq!(shares(&[3.0, 1.0]), vec![1.5, 0.5]);
        assert_eq!(shares(&[0.0]), vec![1.0]);
    }
}
