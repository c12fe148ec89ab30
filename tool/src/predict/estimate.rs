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

    /// The variance of its memory's estimate, bytes squared, as [`SlotSize::dump_variance`].
    pub fn memory_variance(&self) -> f64 {
        self.variance(self.memory, self.memory_sq)
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

/// `sizes` with each sampled slot's mean key (its `DUMP` bytes, and its memory) shrunk
/// towards the mean key of every sampled slot, as far as the slots' own means differ no more
/// than their sampling noise: empirical Bayes (James and Stein; Efron and Morris, "Stein's
/// estimation rule and its competitors", JASA 1973). A slot's mean `m` becomes
/// `mu + B (m - mu)`, `B = tau^2 / (tau^2 + se^2)`, where `se^2` is the variance of that
/// slot's mean (`s^2 / n (1 - n / keys)`), `mu` the pooled mean of the sampled keys, and
/// `tau^2` the spread of the slots' true means (the spread of their sample means less the
/// mean `se^2`, at least 0). A slot more than [`OUTLIER`] deviations (`sqrt(tau^2 + se^2)`)
/// from `mu` is unlike the rest and keeps its mean; so do slots sized whole, or from fewer
/// than two keys.
///
/// Why: a plan by weight picks slots by their weights, and from noisy estimates it picks
/// those that look heavy, more often over-estimated than not: their real total falls short
/// (2.5 million keys of 16 B-1 KiB, 50 a slot sized: the joining master was planned 320 MiB
/// and got 308, 0.913 of the mean where the tolerance allowed 0.95). Shrunk, slots that differ
/// only by noise weigh alike (the plan then follows their exact key counts), and slots that
/// truly differ (a hash tag of big values, measured precisely: shrunk with the rest, one such
/// slot among 16384 made the joining master get 17% more than planned) keep their own mean.
/// For the plan's choice only: the sums of squares are left as they were, so the variance of
/// a shrunk slot is not to be read from the result (take it from `sizes`), and the shrunk
/// total may differ from the estimate's (the pooled mean weighs slots by their sampled keys).
pub fn shrunk(sizes: &Sizes) -> Sizes {
    let mut out = sizes.clone();
    shrink(&mut out, |s| (&mut s.dump, s.dump_sq));
    shrink(&mut out, |s| (&mut s.memory, s.memory_sq));
    out
}

/// How many deviations from the pooled mean make a slot an outlier that [`shrunk`] keeps: 4
/// (a slot that differs by noise alone lies that far once in about 16000).
const OUTLIER: f64 = 4.0;

/// [`shrunk`] for one sum: `field` gives a slot's sum (to rewrite) and its sum of squares.
fn shrink(sizes: &mut Sizes, field: impl Fn(&mut SlotSize) -> (&mut f64, f64)) {
    // (slot, n, mean, se^2) of every sampled slot.
    let mut sampled: Vec<(u16, f64, f64, f64)> = Vec::new();
    for (&slot, s) in sizes.iter_mut() {
        let keys = s.keys.saturating_sub(s.big);
        if s.sampled < 2 || s.sampled >= keys {
            continue;
        }
        let (n, k) = (s.sampled as f64, keys as f64);
        let (x, x_sq) = {
            let (x, x_sq) = field(s);
            (*x, x_sq)
        };
        let mean = x / n;
        let var = ((x_sq - n * mean * mean) / (n - 1.0)).max(0.0);
        sampled.push((slot, n, mean, var / n * (1.0 - n / k)));
    }
    if sampled.len() < 2 {
        return;
    }
    // The pooled mean and the spread of the true means, over the slots not (yet) found to be
    // outliers; found again until the outliers stay the same (a few rounds at most).
    let mut outlier = vec![false; sampled.len()];
    let (mut mu, mut tau2) = (0.0, 0.0);
    for _ in 0..5 {
        let kept: Vec<&(u16, f64, f64, f64)> = sampled
            .iter()
            .zip(&outlier)
            .filter(|(_, o)| !**o)
            .map(|(s, _)| s)
            .collect();
        if kept.is_empty() {
            return;
        }
        let count = kept.len() as f64;
        let (total, keys) = kept
            .iter()
            .fold((0.0, 0.0), |(t, k), (_, n, m, _)| (t + n * m, k + n));
        mu = total / keys;
        let spread = kept
            .iter()
            .map(|(_, _, m, _)| (m - mu).powi(2))
            .sum::<f64>()
            / count;
        let noise = kept.iter().map(|(_, _, _, se2)| se2).sum::<f64>() / count;
        tau2 = (spread - noise).max(0.0);
        // A slot more than OUTLIER deviations (its own standard error and the slots' spread
        // together) from the pooled mean is unlike the rest, not noisy.
        let found: Vec<bool> = sampled
            .iter()
            .map(|(_, _, mean, se2)| {
                let deviation = (tau2 + se2).sqrt();
                if deviation > 0.0 {
                    (mean - mu).abs() > OUTLIER * deviation
                } else {
                    *mean != mu
                }
            })
            .collect();
        if found == outlier {
            break;
        }
        outlier = found;
    }
    // (After five rounds without settling, the last flags are used with the round's mean and
    // spread: a cluster whose slots keep changing sides is rare and any of them is fair.)
    for ((slot, n, mean, se2), outlier) in sampled.into_iter().zip(outlier) {
        let b = if tau2 + se2 > 0.0 {
            tau2 / (tau2 + se2)
        } else {
            1.0
        };
        let m = if outlier { mean } else { mu + b * (mean - mu) };
        if let Some(s) = sizes.get_mut(&slot) {
            *field(s).0 = n * m;
        }
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
    fn slots_that_differ_by_noise_are_shrunk_and_slots_that_differ_truly_are_not() {
        // 50 keys sized of 500 a slot, spread evenly from half to 1.5 times the slot's
        // mean (a standard error of its mean of about 0.98 at a mean of 25).
        let sampled = |mean: f64| -> SlotSize {
            let v: Vec<f64> = (0..50)
                .map(|j| mean * (0.5 + f64::from(j) / 49.0))
                .collect();
            slot(500, &v)
        };
        // Forty slots whose means differ by noise alone (25 +- 0.5): every mean ends at the
        // pooled 25, and each slot's estimate at 500 x 25.
        let mut sizes = Sizes::new();
        for i in 0..40u16 {
            sizes.insert(i, sampled(if i % 2 == 0 { 25.5 } else { 24.5 }));
        }
        let s = shrunk(&sizes);
        for x in s.values() {
            assert!((x.dump / 50.0 - 25.0).abs() < 1e-9, "{x:?}");
            assert!((x.dump_total() - 12_500.0).abs() < 1e-6);
        }
        // The sampling error is still stated, from the sums of squares kept.
        assert_eq!(s[&0].dump_sq, sizes[&0].dump_sq);
        // Half of the slots hold values 100 times bigger (a tag of big values): each mean stays
        // within 1% of its own.
        let mut mixed = Sizes::new();
        for i in 0..40u16 {
            mixed.insert(i, sampled(if i < 20 { 25.0 } else { 2500.0 }));
        }
        let s = shrunk(&mixed);
        assert!((s[&0].dump / 50.0 - 25.0).abs() < 0.25, "{:?}", s[&0]);
        assert!((s[&30].dump / 50.0 - 2500.0).abs() < 25.0, "{:?}", s[&30]);
        // One precise slot far from forty noisy ones (a hash tag of equal 4 KiB values: no
        // spread, its standard error about 0) keeps its mean, however the others shrink.
        let mut tag = sizes.clone();
        tag.insert(100, slot(20_000, &[4096.0; 50]));
        let s = shrunk(&tag);
        assert!((s[&100].dump / 50.0 - 4096.0).abs() < 1e-6, "{:?}", s[&100]);
        // The noisy ones still end at the pooled mean of the forty, the tag left out of it.
        assert!((s[&0].dump / 50.0 - 25.0).abs() < 1e-9, "{:?}", s[&0]);
        // A slot sized whole is kept.
        let mut one = Sizes::new();
        one.insert(0, slot(4, &[1.0, 2.0, 3.0, 4.0]));
        one.insert(1, sampled(25.0));
        one.insert(2, sampled(30.0));
        assert_eq!(shrunk(&one)[&0], one[&0]);
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
