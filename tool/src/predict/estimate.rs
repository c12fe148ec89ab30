//! Totals of the keys' sizes over slots, exact or estimated from a sample of each slot's
//! keys with the error of the estimate.

use std::collections::BTreeMap;

/// Live keys of one slot and their measured sizes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SlotSize {
    /// Live keys.
    pub keys: u64,
    /// Keys whose sizes were measured.
    pub sampled: u64,
    /// Sum and sum of squares of their `DUMP` lengths.
    pub dump: f64,
    pub dump_sq: f64,
    /// Sum and sum of squares of their `MEMORY USAGE`.
    pub memory: f64,
    pub memory_sq: f64,
    /// Big keys among `keys`, never serialized to be measured: how many, their `DUMP` bytes
    /// and their memory as estimated ([`super::big_keys`]).
    pub big: u64,
    pub big_dump: f64,
    pub big_memory: f64,
}

impl SlotSize {
    /// Its `DUMP` bytes, its measured keys scaled to the keys not measured, and its big keys'
    /// estimates.
    pub fn dump_total(&self) -> f64 {
        self.scaled(self.dump) + self.big_dump
    }

    /// Its memory, the same way.
    pub fn memory_total(&self) -> f64 {
        self.scaled(self.memory) + self.big_memory
    }

    /// The variance of its `DUMP` bytes' estimate, bytes squared: 0 where every key that is
    /// not big was measured (or one key at most was: no spread is known), else as [`total`]
    /// has it.
    pub fn dump_variance(&self) -> f64 {
        self.variance(self.dump, self.dump_sq)
    }

    /// The variance of the estimate of the keys' total from `x` and `x_sq` (the measured keys'
    /// sum and sum of squares), a sample without replacement: `keys^2 s^2 / n (1 - n / keys)`
    /// (0 where every key that is not big was measured, or fewer than two were).
    fn variance(&self, x: f64, x_sq: f64) -> f64 {
        let keys = self.keys.saturating_sub(self.big);
        if self.sampled < 2 || self.sampled >= keys {
            return 0.0;
        }
        let (n, k) = (self.sampled as f64, keys as f64);
        let mean = x / n;
        let var = ((x_sq - n * mean * mean) / (n - 1.0)).max(0.0);
        k * k * var / n * (1.0 - n / k)
    }

    /// `x` (a sum over the measured keys) scaled to every key that is not big.
    fn scaled(&self, x: f64) -> f64 {
        let keys = self.keys.saturating_sub(self.big);
        if self.sampled == 0 || self.sampled >= keys {
            x
        } else {
            x * keys as f64 / self.sampled as f64
        }
    }
}

/// A total that may be estimated: its value and, when estimated, the half-width of its 95%
/// interval (two standard errors).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Estimate {
    pub value: f64,
    /// Two standard errors; 0 when every key was measured.
    pub error: f64,
    /// Every key measured.
    pub exact: bool,
}

impl Estimate {
    /// The value as a report shows it: exact, or `value ± error`.
    pub fn shown(&self) -> String {
        if self.exact || self.error == 0.0 {
            format!("{:.0}", self.value)
        } else {
            format!("{:.0} ± {:.0}", self.value, self.error)
        }
    }
}

/// The total of `sum` over the slots `sizes`, each slot's keys estimated from its measured
/// ones: `keys x mean`, with the variance of a sample without replacement,
/// `keys^2 s^2 / n (1 - n / keys)`; a slot's big keys add their estimates (no error is known
/// for them: the total is then not exact). `sum` gives the measured keys' sum, their sum of
/// squares and the big keys' estimate.
fn total(sizes: &[&SlotSize], sum: impl Fn(&SlotSize) -> (f64, f64, f64)) -> Estimate {
    let (mut value, mut variance, mut exact) = (0.0, 0.0, true);
    for s in sizes {
        let (x, x_sq, big) = sum(s);
        if s.big > 0 {
            value += big;
            exact = false;
        }
        let keys = s.keys.saturating_sub(s.big);
        if s.sampled >= keys {
            value += x;
            continue;
        }
        exact = false;
        if s.sampled == 0 {
            continue;
        }
        value += keys as f64 * x / s.sampled as f64;
        variance += s.variance(x, x_sq);
    }
    Estimate {
        value,
        error: 2.0 * variance.sqrt(),
        exact,
    }
}

/// The bytes `MIGRATE` sends for the keys of `sizes` (their `DUMP` lengths).
pub fn dump_bytes(sizes: &[&SlotSize]) -> Estimate {
    total(sizes, |s| (s.dump, s.dump_sq, s.big_dump))
}

/// The memory the keys of `sizes` take (`MEMORY USAGE ... SAMPLES 0`).
pub fn memory_bytes(sizes: &[&SlotSize]) -> Estimate {
    total(sizes, |s| (s.memory, s.memory_sq, s.big_memory))
}

/// Sizes per slot, filled by the sizing of the moving keys (`Sizer::measure`).
pub type Sizes = BTreeMap<u16, SlotSize>;

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
        // A slot's own variance is the total's, slot by slot.
        assert!((a.dump_variance() - var).abs() < 1e-6);
        assert_eq!(whole.dump_variance(), 0.0);
    }
}
