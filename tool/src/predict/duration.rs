//! How long `redis-cli --cluster rebalance` takes on this cluster, from what the prediction
//! measures on it. A per-key rebalance is a sequence of round trips and config writes whose
//! cost the cluster sets (redis-cli 7.0's `clusterManagerMoveSlot`), so the estimate counts
//! them and prices each with what was measured on the live cluster while predicting:
//!
//! - per slot: `CLUSTER SETSLOT ... IMPORTING` on the target and `MIGRATING` on the source, a
//!   last `CLUSTER GETKEYSINSLOT` that finds the slot empty, and `CLUSTER SETSLOT ... NODE` on
//!   every master: `M + 3` round trips among `M` masters, and `M + 2` cluster config writes
//!   (each `SETSLOT` makes its node rewrite `nodes.conf`, with an fsync when the config epoch
//!   moves);
//! - per batch of `--cluster-pipeline` keys (10, redis-cli's default): a `GETKEYSINSLOT` and a
//!   `MIGRATE`, whose source sends the batch to the target and waits for it: 3 round trips;
//! - per key: `MIGRATE`'s server time (the source serializes the key, the target restores it,
//!   the source deletes it), priced from the server time of the `DUMP`s the prediction ran on
//!   the moving keys (`INFO commandstats`).
//!
//! The costs of a slot's masters, of a batch and of a key are constants of the server family
//! ([`per_key`], fitted to real rebalances on loopback: they hold redis-cli's own work, the
//! `SETSLOT`s and their config writes, the disk's cost, which a read-only tool cannot
//! measure). The `PING` round trip measured to the masters just before the keys are read adds
//! what it exceeds the fitted loopback's by to each round trip (a network's latency), and
//! `DUMP`'s server time on the moving keys prices each key. The estimate is a range
//! ([`PerKeyModel::spread`]).

use serde::Serialize;

/// `--cluster-pipeline`: the keys a `MIGRATE` of redis-cli carries (its default).
pub const PIPELINE: u64 = 10;

/// What the prediction measured on the cluster for the duration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ClusterTiming {
    /// The median over the masters of their median `PING` round trip, back to back, seconds
    /// (`None`: `PING` refused everywhere).
    pub rtt: Option<f64>,
    /// The same with the `PING`s 2 ms apart: a round trip that waits for idle CPUs to wake.
    pub rtt_spaced: Option<f64>,
    /// The server time of one `DUMP` of the moving keys, seconds (`None`: `INFO` refused, or
    /// no key measured).
    pub dump_per_key: Option<f64>,
    /// The server family of the seed (`None`: `INFO` refused; Redis 7's constants then).
    pub server: Option<ServerKind>,
}

/// What a rebalance consists of, counted from the plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Slots moved, and the masters redis-cli sends each slot's `SETSLOT ... NODE` to.
    pub slots: u64,
    pub masters: u64,
    /// Batches of keys (`MIGRATE`s), and keys.
    pub batches: u64,
    pub keys: u64,
    /// Round trips of redis-cli, and cluster config writes.
    pub round_trips: u64,
    pub config_writes: u64,
    /// Pairs of masters a slot's `SETSLOT ... NODE`s involve, over the slots: `slots x M x
    /// M` (each of the `M` masters told of the new owner rewrites its config and tells the
    /// others over the cluster bus).
    pub pairs: u64,
}

impl Counts {
    /// The counts of moving the slots whose key counts are `keys_per_slot` among `masters`
    /// masters, `pipeline` keys a `MIGRATE`.
    pub fn of(keys_per_slot: impl IntoIterator<Item = u64>, masters: u64, pipeline: u64) -> Counts {
        let mut c = Counts {
            masters,
            ..Counts::default()
        };
        for k in keys_per_slot {
            c.slots += 1;
            c.keys += k;
            c.batches += k.div_ceil(pipeline.max(1));
        }
        c.round_trips = c.slots * (masters + 3) + 3 * c.batches;
        c.config_writes = c.slots * (masters + 2);
        c.pairs = c.slots * masters * masters;
        c
    }
}

/// The server family a cluster runs, whose per-key rebalance costs differ (Valkey's
/// `SETSLOT` costs more than Redis 7.0's): told by `INFO server`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerKind {
    /// Redis 7.x (and anything not told apart).
    #[default]
    Redis7,
    /// Redis 8.x.
    Redis8,
    /// Valkey 8 and later.
    Valkey,
}

impl ServerKind {
    /// The kind an `INFO server` text names.
    pub fn of_info(info: &str) -> ServerKind {
        let field = |name: &str| crate::reply::info_field(info, name);
        if field("server_name").as_deref() == Some("valkey") {
            ServerKind::Valkey
        } else if field("redis_version").is_some_and(|v| v.starts_with("8.")) {
            ServerKind::Redis8
        } else {
            ServerKind::Redis7
        }
    }

    /// Its name in reports.
    pub fn label(self) -> &'static str {
        match self {
            ServerKind::Redis7 => "Redis 7",
            ServerKind::Redis8 => "Redis 8",
            ServerKind::Valkey => "Valkey",
        }
    }
}

/// The per-key model's constants for one server family, fitted to real rebalances by
/// `ringslot-bench cluster-fit`:
/// `seconds = round trips x extra + slots x M x M x (per_pair + per_pair_rtt x rtt) + batches
/// x per_batch + keys x key_factor x dump`, where `extra` is the cluster's round trip beyond the loopback the
/// constants were fitted on ([`extra_round_trip`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerKeyModel {
    /// Seconds each pair of masters costs a slot beyond its round trips: the `SETSLOT ...
    /// NODE` each master gets, its config write (the disk) and what it tells the others
    /// (measured here: a slot took 1.1-1.5 ms among 4 masters and 2.5-2.8 ms among 6, about
    /// `M x M` times a constant, not `M`).
    pub per_pair: f64,
    /// How much a pair costs more per second of the back-to-back `PING` round trip: the
    /// wake-ups of idle CPUs a slot's chain of commands and bus messages waits for (here the
    /// round trip was 0.01 ms with another core busy and 0.08 ms with it idle, and Valkey's
    /// rebalance took 2-3 times longer idle).
    pub per_pair_rtt: f64,
    /// Seconds a batch (`GETKEYSINSLOT` and `MIGRATE` of up to 10 keys) costs beyond its
    /// three round trips.
    pub per_batch: f64,
    /// `MIGRATE`'s server time per key over `DUMP`'s (serialize, restore, delete).
    pub key_factor: f64,
    /// The range: low is the estimate with the fitted costs over `spread`, high with them
    /// times `spread` (at most 1.41, so that high is at most twice low).
    pub spread: f64,
}

/// `DUMP`'s server time per key where it could not be measured, and a round trip where
/// `PING` could not be, seconds.
pub const DEFAULT_DUMP: f64 = 0.000_010;
pub const DEFAULT_RTT: f64 = 0.000_150;

/// The constants of each server family, fitted on 2026-12-02 to 54 local rebalances
/// (loopback, 2 vCPUs, nodes on disk): the 18 of `make bench-cluster-fit` (per server, 3 -> 4
/// at 30k and 300k keys and 3 -> 6 at 30k, idle and with one core busy) and the 36 of `make
/// bench-cluster-duration` (3 -> 4 at 100k and 1M keys, idle and busy, three runs each); Redis
/// 8.2.3's round-trip term came out below 0 and is taken as 0. Their error on those runs, and
/// the earlier constants' on the 36 they were not fitted to: docs/benchmarks/cluster.md, "How
/// long a rebalance takes".
pub fn per_key(kind: ServerKind) -> PerKeyModel {
    match kind {
        ServerKind::Redis7 => PerKeyModel {
            per_pair: 0.000_052,
            per_pair_rtt: 0.395,
            per_batch: 0.000_095,
            key_factor: KEY_FACTOR,
            spread: std::f64::consts::SQRT_2,
        },
        ServerKind::Redis8 => PerKeyModel {
            per_pair: 0.000_100,
            per_pair_rtt: 0.0,
            per_batch: 0.000_410,
            key_factor: KEY_FACTOR,
            spread: std::f64::consts::SQRT_2,
        },
        ServerKind::Valkey => PerKeyModel {
            per_pair: 0.000_102,
            per_pair_rtt: 2.073,
            per_batch: 0.001_484,
            key_factor: KEY_FACTOR,
            spread: std::f64::consts::SQRT_2,
        },
    }
}

/// A duration estimate, seconds: a range and the value between.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Range {
    /// With the per-command costs at their low end and the median round trip.
    pub low: f64,
    /// At the fitted costs and the median round trip.
    pub mid: f64,
    /// With the costs at their high end and the round trip of `PING`s apart (at most twice
    /// `low`).
    pub high: f64,
}

impl PerKeyModel {
    /// The constants for the cluster measured as `timing` (its server family's).
    pub fn of(timing: &ClusterTiming) -> PerKeyModel {
        per_key(timing.server.unwrap_or_default())
    }

    /// The duration of a rebalance of `counts` on a cluster measured as `timing`.
    pub fn estimate(&self, counts: &Counts, timing: &ClusterTiming) -> Range {
        let extra = extra_round_trip(timing);
        let dump = timing.dump_per_key.unwrap_or(DEFAULT_DUMP);
        let trips = (counts.slots * (counts.masters + 3) + 3 * counts.batches) as f64;
        let rtt = timing.rtt.unwrap_or(FITTED_RTT);
        let at = |scale: f64| {
            trips * extra
                + scale
                    * (counts.pairs as f64 * (self.per_pair + self.per_pair_rtt * rtt)
                        + counts.batches as f64 * self.per_batch
                        + counts.keys as f64 * dump * self.key_factor)
        };
        let spread = self.spread.clamp(1.0, std::f64::consts::SQRT_2);
        Range {
            low: at(1.0 / spread),
            mid: at(1.0),
            high: at(spread),
        }
    }
}

/// The round trip of the loopback the constants were fitted on (`PING`s back to back, idle).
pub const FITTED_RTT: f64 = 0.000_080;

/// What a round trip of this cluster costs beyond the one the constants include: the
/// measured round trip (the mean of the median back-to-back and 2 ms apart `PING`s) less
/// [`FITTED_RTT`], never below 0. On loopback it is about 0 (the measured round trips swung
/// from 0.01 to 0.1 ms from run to run with the CPUs' idle states, which the fitted costs and
/// their range already hold); over a network it adds the network's latency to each of
/// redis-cli's round trips.
pub fn extra_round_trip(timing: &ClusterTiming) -> f64 {
    let rtt = match (timing.rtt, timing.rtt_spaced) {
        (Some(a), Some(b)) => (a + b) / 2.0,
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => FITTED_RTT,
    };
    (rtt - FITTED_RTT).max(0.0)
}

/// Seconds to send `bytes` at `megabits` Mbit/s.
pub fn network_seconds(bytes: f64, megabits: f64) -> f64 {
    bytes * 8.0 / (megabits * 1e6)
}

/// `MIGRATE`'s server time per key over `DUMP`'s: the source serializes the key (a `DUMP`),
/// the target restores it, the source deletes it (not fitted: the batches' count follows the
/// keys too closely for a fit to tell the two apart).
pub const KEY_FACTOR: f64 = 3.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_redis_cli_round_trips() {
        // Two slots of 25 and 0 keys among 4 masters, 10 keys a MIGRATE: 3 batches.
        let c = Counts::of([25, 0], 4, 10);
        assert_eq!(
            (
                c.slots,
                c.batches,
                c.keys,
                c.round_trips,
                c.config_writes,
                c.pairs
            ),
            (2, 3, 25, 2 * 7 + 9, 2 * 6, 2 * 16)
        );
    }

    #[test]
    fn the_range_holds_the_middle_within_twice_its_low() {
        // The range: low and high around the middle, high at most twice low when the spread
        // and the round trip's 90th percentile stay within their bounds.
        let counts = Counts::of([10; 100], 4, 10);
        let timing = ClusterTiming {
            rtt: Some(0.0001),
            rtt_spaced: Some(0.0009),
            dump_per_key: None,
            server: None,
        };
        let r = per_key(ServerKind::Redis7).estimate(&counts, &timing);
        assert!(
            r.low < r.mid && r.mid < r.high && r.high <= 2.0 * r.low,
            "{r:?}"
        );
        assert!((network_seconds(125e6, 1000.0) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn servers_are_told_by_name() {
        assert_eq!(
            ServerKind::of_info(
                "server_name:valkey\r\nvalkey_version:9.1.2\r\nredis_version:7.2.4"
            ),
            ServerKind::Valkey
        );
        assert_eq!(
            ServerKind::of_info("redis_version:8.2.3"),
            ServerKind::Redis8
        );
        assert_eq!(
            ServerKind::of_info("redis_version:7.0.15"),
            ServerKind::Redis7
        );
    }
}
