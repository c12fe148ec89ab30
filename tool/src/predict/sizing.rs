//! The bytes of the keys a slot plan moves: for each key, the length of its `DUMP` payload
//! (what `MIGRATE` sends: the value serialized as in an RDB file, its RDB version and a
//! CRC64) and `MEMORY USAGE key SAMPLES 0` (what it takes on the target, every element
//! counted), read from its master; every key, or the first `N` keys a slot with the rest
//! estimated from them, with the error of the estimate.
//!
//! A key that has expired meanwhile (`DUMP` replies nil) is not live, and is not counted: it
//! would not be migrated either.

use super::live::{Holds, Limiter, Master};
use anyhow::{anyhow, Result};
use ringslot_engine::key_slot;
use ringslot_harness::redis::{self, Connection, Value};
use std::collections::BTreeMap;

/// Live keys of one slot and their measured sizes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct SlotSize {
    /// Live keys.
    pub(super) keys: u64,
    /// Keys whose sizes were measured.
    pub(super) sampled: u64,
    /// Sum and sum of squares of their `DUMP` lengths.
    pub(super) dump: f64,
    pub(super) dump_sq: f64,
    /// Sum and sum of squares of their `MEMORY USAGE`.
    pub(super) memory: f64,
    pub(super) memory_sq: f64,
}

/// A total that may be estimated: its value and, when estimated, the half-width of its 95%
/// interval (two standard errors).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Estimate {
    pub(super) value: f64,
    /// Two standard errors; 0 when every key was measured.
    pub(super) error: f64,
    /// Every key measured.
    pub(super) exact: bool,
}

impl Estimate {
    /// The value as a report shows it: exact, or `value ± error`.
    pub(super) fn shown(&self) -> String {
        if self.exact || self.error == 0.0 {
            format!("{:.0}", self.value)
        } else {
            format!("{:.0} ± {:.0}", self.value, self.error)
        }
    }
}

/// The total of `sum` over the slots `sizes`, each slot's keys estimated from its measured
/// ones: `keys x mean`, with the variance of a sample without replacement,
/// `keys^2 s^2 / n (1 - n / keys)`.
fn total(sizes: &[&SlotSize], sum: impl Fn(&SlotSize) -> (f64, f64)) -> Estimate {
    let (mut value, mut variance, mut exact) = (0.0, 0.0, true);
    for s in sizes {
        let (x, x_sq) = sum(s);
        if s.sampled >= s.keys {
            value += x;
            continue;
        }
        exact = false;
        if s.sampled == 0 {
            continue;
        }
        let (n, k) = (s.sampled as f64, s.keys as f64);
        let mean = x / n;
        value += k * mean;
        if s.sampled > 1 {
            let var = ((x_sq - n * mean * mean) / (n - 1.0)).max(0.0);
            variance += k * k * var / n * (1.0 - n / k);
        }
    }
    Estimate {
        value,
        error: 2.0 * variance.sqrt(),
        exact,
    }
}

/// The bytes `MIGRATE` sends for the keys of `sizes` (their `DUMP` lengths).
pub(super) fn dump_bytes(sizes: &[&SlotSize]) -> Estimate {
    total(sizes, |s| (s.dump, s.dump_sq))
}

/// The memory the keys of `sizes` take (`MEMORY USAGE ... SAMPLES 0`).
pub(super) fn memory_bytes(sizes: &[&SlotSize]) -> Estimate {
    total(sizes, |s| (s.memory, s.memory_sq))
}

/// Sizes per slot, filled by [`Sizer::measure`].
pub(super) type Sizes = BTreeMap<u16, SlotSize>;

/// Measures keys on one master: `DUMP` and `MEMORY USAGE` for the first `sample` keys of each
/// slot (all with `None`), and for the others a check that they are live (`EXISTS`), unless
/// their names came from `SCAN` (which returns live keys only).
pub(super) struct Sizer<'a> {
    pub(super) master: &'a Master,
    pub(super) sample: Option<u64>,
    pub(super) holds: &'a Holds,
    pub(super) limiter: Limiter,
    pub(super) sizes: Sizes,
}

impl Sizer<'_> {
    /// Measures `names` (keys of this master in slots the plan moves); `live` says the names
    /// came from `SCAN` and need no check. One pipeline per call.
    pub(super) fn measure(
        &mut self,
        con: &mut Connection,
        names: &[Vec<u8>],
        live: bool,
    ) -> Result<()> {
        #[derive(Clone, Copy)]
        enum Ask {
            Size,
            Exists,
            Nothing,
        }
        let mut asks = Vec::with_capacity(names.len());
        let mut pipe = redis::pipe();
        // Keys of each slot's sample asked in this pipeline.
        let mut asking: BTreeMap<u16, u64> = BTreeMap::new();
        for name in names {
            let slot = key_slot(name);
            let sampled = self.sizes.get(&slot).map_or(0, |s| s.sampled);
            let now = asking.entry(slot).or_default();
            let ask = if self.sample.is_none_or(|n| sampled + *now < n) {
                *now += 1;
                pipe.cmd("DUMP").arg(name);
                pipe.cmd("MEMORY")
                    .arg("USAGE")
                    .arg(name)
                    .arg("SAMPLES")
                    .arg(0);
                Ask::Size
            } else if live {
                Ask::Nothing
            } else {
                pipe.cmd("EXISTS").arg(name);
                Ask::Exists
            };
            asks.push(ask);
        }
        let at = &self.master.address;
        let replies: Vec<Value> = if asks.iter().all(|a| matches!(a, Ask::Nothing)) {
            Vec::new()
        } else {
            self.holds
                .time(at, || pipe.query(con))
                .map_err(|e| anyhow!("{at}: DUMP / MEMORY USAGE: {e}"))?
        };
        self.holds.read(at, names.len() as u64);
        self.limiter.take(names.len() as u64);
        let mut replies = replies.into_iter();
        for (name, ask) in names.iter().zip(asks) {
            let entry = self.sizes.entry(key_slot(name)).or_default();
            match ask {
                Ask::Size => {
                    let dump = replies.next();
                    let memory = replies.next();
                    let Some(Value::BulkString(payload)) = dump else {
                        continue;
                    };
                    let memory = match memory {
                        Some(Value::Int(n)) => n.max(0) as f64,
                        _ => 0.0,
                    };
                    let d = payload.len() as f64;
                    entry.keys += 1;
                    entry.sampled += 1;
                    entry.dump += d;
                    entry.dump_sq += d * d;
                    entry.memory += memory;
                    entry.memory_sq += memory * memory;
                }
                Ask::Exists => {
                    if matches!(replies.next(), Some(Value::Int(1))) {
                        entry.keys += 1;
                    }
                }
                Ask::Nothing => entry.keys += 1,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(keys: u64, sizes: &[f64]) -> SlotSize {
        SlotSize {
            keys,
            sampled: sizes.len() as u64,
            dump: sizes.iter().sum(),
            dump_sq: sizes.iter().map(|x| x * x).sum(),
            ..SlotSize::default()
        }
    }

    #[test]
    fn every_key_measured_is_exact() {
        let a = slot(3, &[10.0, 20.0, 30.0]);
        let b = slot(1, &[5.0]);
        let e = dump_bytes(&[&a, &b]);
        assert_eq!(
            e,
            Estimate {
                value: 65.0,
                error: 0.0,
                exact: true
            }
        );
        assert_eq!(e.shown(), "65");
    }

    #[test]
    fn a_sample_is_scaled_with_its_error() {
        // 100 keys, 4 measured: 10, 20, 30, 40 (mean 25, s^2 = 166.67).
        let a = slot(100, &[10.0, 20.0, 30.0, 40.0]);
        let e = dump_bytes(&[&a]);
        assert!(!e.exact);
        assert!((e.value - 2500.0).abs() < 1e-9);
        let var = 100.0 * 100.0 * (500.0 / 3.0) / 4.0 * (1.0 - 4.0 / 100.0);
        assert!((e.error - 2.0 * f64::sqrt(var)).abs() < 1e-6, "{e:?}");
        assert!(e.shown().contains(" ± "));
        // A slot measured whole adds no error.
        let whole = slot(2, &[1.0, 1.0]);
        let both = dump_bytes(&[&a, &whole]);
        assert!((both.value - 2502.0).abs() < 1e-9);
        assert!((both.error - e.error).abs() < 1e-9);
    }
}
