//! How a prediction runs, checked in one place ([`Options::check`]).

use anyhow::{bail, Result};

/// How a prediction runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Ring flavours evaluated besides the slot scheme (modulo comes with the first).
    pub flavours: Vec<ringslot_engine::Flavour>,
    /// Slots per `RING.MOVES ... SLOTS` call.
    pub chunk: u16,
    /// Seconds the ring copies live if the run dies.
    pub ttl_secs: u64,
    /// Predict with the module (`RING.MIRROR`, `RING.MOVES ... SLOTS` on ring copies, which
    /// writes keys with a TTL and deletes them); otherwise read-only, whatever the masters
    /// have loaded.
    pub with_module: bool,
    /// Keys a second read from each master; 0: no limit.
    pub max_keys_per_sec: u64,
    /// Keys a slot whose bytes are measured (`None`: every key the plan moves).
    pub bytes_sample: Option<u64>,
    /// `--bytes-sample` was not given: past [`AUTO_SAMPLE_PAST`] keys in the cluster, the
    /// prediction measures [`AUTO_SAMPLE_KEYS`] keys a slot instead of every key
    /// ([`Options::sampled_for`]).
    pub auto_sample: bool,
    /// The slots will move by Valkey 9's atomic slot migration (the report's verdict is for
    /// that method).
    pub atomic: bool,
    /// How the moving keys' sizes are read.
    pub sizes_by: SizesBy,
    /// Besides redis-cli's plan by slot counts, a plan by this weight (`--by`); by bytes,
    /// memory or keys it sizes every key of every slot (or `--bytes-sample N` of each).
    pub by: Option<WeightBy>,
    /// How far from its target each master may end under the plan by weight, as a fraction
    /// (`--tolerance`, given in percent).
    pub tolerance: f64,
    /// The part of each node's limit (`maxmemory`, or the host's RAM) kept free at its peak,
    /// a fraction (`--headroom`, given in percent).
    pub headroom: f64,
    /// The longest a big key's move may hold a master, seconds (`--max-hold`, given in ms): the
    /// plan by weight leaves the slots of keys past it where they are.
    pub max_hold: f64,
    /// Let the plan by weight move the slots of keys past `max_hold` too (`--move-big-keys`).
    pub move_big_keys: bool,
}

/// The keys in the cluster (every master's `INFO keyspace`, `db0`) past which a prediction that was not
/// told `--bytes-sample` measures a sample of each slot's keys: 2 million. At 2.5 million
/// keys (3 masters, docs/benchmarks/cluster.md) every key sized took 35-41 s and 50 a slot
/// 16-21 s; the walk that counts and hashes every key stays.
pub const AUTO_SAMPLE_PAST: u64 = 2_000_000;

/// The keys a slot measured past [`AUTO_SAMPLE_PAST`]: 50 (at 2 million keys, about 120 keys
/// a slot: the rest estimated with the error stated).
pub const AUTO_SAMPLE_KEYS: u64 = 50;

/// `--bytes-sample`: `all` or a number of keys a slot, at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BytesSample {
    /// Every key measured.
    All,
    /// This many keys a slot measured, the rest estimated.
    PerSlot(u64),
}

impl std::str::FromStr for BytesSample {
    type Err = String;

    /// `all`, or a whole number of keys a slot, at least 1.
    fn from_str(s: &str) -> Result<BytesSample, String> {
        if s.eq_ignore_ascii_case("all") {
            return Ok(BytesSample::All);
        }
        match s.parse::<u64>() {
            Ok(n) if n >= 1 => Ok(BytesSample::PerSlot(n)),
            _ => Err(format!(
                "`{s}` is not `all` nor a number of keys a slot (1 or more)"
            )),
        }
    }
}

/// `--tolerance`'s default, in percent.
pub const DEFAULT_TOLERANCE: f64 = 5.0;

/// `--max-hold`'s default, in milliseconds: a quarter of a second, far below the 15 s default
/// `cluster-node-timeout` (and the 5 s many clusters set), and about the longest a client's
/// command timeout of common libraries lets a request wait.
pub const DEFAULT_MAX_HOLD_MS: f64 = 250.0;

impl Options {
    /// The keys a slot to measure on a cluster of `keys` keys: what `--bytes-sample` said, or
    /// without it [`AUTO_SAMPLE_KEYS`] past [`AUTO_SAMPLE_PAST`] keys, else every key
    /// (`None`).
    pub fn sampled_for(&self, keys: u64) -> Option<u64> {
        match self.bytes_sample {
            Some(n) => Some(n),
            None if self.auto_sample && keys > AUTO_SAMPLE_PAST => Some(AUTO_SAMPLE_KEYS),
            None => None,
        }
    }

    /// Refuses options that cannot be meant together, before anything is read: no flavour, a
    /// chunk of 0 slots, a sample of 0 keys a slot, `--by` with `--with-module`, a tolerance
    /// that is not a fraction from 0 to 1 (a percentage from 0 to 100 on the command line).
    pub fn check(&self) -> Result<()> {
        if self.chunk == 0 {
            bail!("--chunk needs at least 1 slot");
        }
        if self.bytes_sample == Some(0) {
            bail!("--bytes-sample needs at least 1 key a slot");
        }
        if self.flavours.is_empty() {
            bail!("--flavours needs at least one flavour");
        }
        if self.by.is_some() && self.with_module {
            bail!("--by plans read-only: drop --with-module");
        }
        if !self.tolerance.is_finite() || !(0.0..=1.0).contains(&self.tolerance) {
            bail!(
                "--tolerance is a percentage, from 0 to 100 (got {})",
                self.tolerance * 100.0
            );
        }
        if !self.headroom.is_finite() || !(0.0..0.9).contains(&self.headroom) {
            bail!(
                "--headroom is a percentage, from 0 to under 90 (got {})",
                self.headroom * 100.0
            );
        }
        if !self.max_hold.is_finite() || self.max_hold <= 0.0 {
            bail!("--max-hold is in milliseconds, above 0");
        }
        Ok(())
    }
}

pub use crate::plan::WeightBy;

/// How the moving keys' `DUMP` lengths are read (`--sizes-by`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SizesBy {
    /// A read-only script (`EVAL_RO`) returns each key's `DUMP` length: the payloads stay on
    /// the server (`DUMP` where the user may not run scripts).
    #[default]
    Script,
    /// `DUMP` itself: the payloads travel to the tool, which measures them (about 15% less
    /// of the masters' CPU on loopback, the payloads' bytes more on the network).
    Dump,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(bytes_sample: Option<u64>, auto_sample: bool) -> Options {
        Options {
            flavours: vec![ringslot_engine::Flavour::Ketama],
            chunk: 1,
            ttl_secs: 1,
            with_module: false,
            max_keys_per_sec: 0,
            bytes_sample,
            auto_sample,
            atomic: false,
            sizes_by: SizesBy::Script,
            by: None,
            tolerance: 0.05,
            headroom: 0.1,
            max_hold: 0.25,
            move_big_keys: false,
        }
    }

    #[test]
    fn past_two_million_keys_a_sample_of_each_slot_unless_told() {
        let auto = options(None, true);
        assert_eq!(auto.sampled_for(AUTO_SAMPLE_PAST), None);
        assert_eq!(
            auto.sampled_for(AUTO_SAMPLE_PAST + 1),
            Some(AUTO_SAMPLE_KEYS)
        );
        // --bytes-sample all: every key, whatever the count.
        assert_eq!(options(None, false).sampled_for(u64::MAX), None);
        // --bytes-sample 7: seven, whatever the count.
        assert_eq!(options(Some(7), false).sampled_for(10), Some(7));
        assert_eq!("all".parse(), Ok(BytesSample::All));
        assert_eq!("ALL".parse(), Ok(BytesSample::All));
        assert_eq!("20".parse(), Ok(BytesSample::PerSlot(20)));
        for bad in ["0", "-1", "x", ""] {
            assert!(bad.parse::<BytesSample>().is_err(), "{bad}");
        }
    }
}
