//! How gently the tool works on a live cluster, and what it measures of that: a rate limit
//! on the keys (or bytes) a reader takes ([`Limiter`]), the longest any of the run's commands
//! held each master ([`Holds`]), and what another client sees meanwhile ([`Prober`]: a `PING`
//! every few milliseconds on a connection of its own, read as it goes by `apply
//! --max-latency`; `ping_round_trips`: the round trips alone).

use super::link::Link;
use super::topology::Master;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Keeps a reader at most `rate` keys a second (0: no limit), from its first key.
#[derive(Debug)]
pub struct Limiter {
    rate: u64,
    started: Instant,
    taken: u64,
}

impl Limiter {
    /// A limiter of `rate` a second (0: no limit), starting now.
    pub fn new(rate: u64) -> Limiter {
        Limiter {
            rate,
            started: Instant::now(),
            taken: 0,
        }
    }

    /// Counts `keys` more keys and sleeps until the rate allows them.
    pub fn take(&mut self, keys: u64) {
        self.taken += keys;
        if self.rate == 0 {
            return;
        }
        let due = Duration::from_secs_f64(self.taken as f64 / self.rate as f64);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
    }
}

/// The longest any command of the run held each master, as the client timed it (a round trip:
/// an upper bound of the server's time), and the keys read from each.
#[derive(Debug, Default)]
pub struct Holds(Mutex<BTreeMap<String, (Duration, u64)>>);

impl Holds {
    /// Runs `f` (one command or pipeline to `at`) and notes how long it took.
    pub fn time<T>(&self, at: &str, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = f();
        let took = started.elapsed();
        if let Ok(mut map) = self.0.lock() {
            let e = map.entry(at.to_string()).or_default();
            e.0 = e.0.max(took);
        }
        out
    }

    /// Notes `keys` keys read from `at`.
    pub fn read(&self, at: &str, keys: u64) {
        if let Ok(mut map) = self.0.lock() {
            map.entry(at.to_string()).or_default().1 += keys;
        }
    }

    /// Per master, by address: the longest hold and the keys read.
    pub fn list(&self) -> Vec<MasterHold> {
        self.0.lock().map_or_else(
            |_| Vec::new(),
            |map| {
                map.iter()
                    .map(|(a, (d, k))| MasterHold {
                        address: a.clone(),
                        longest_seconds: d.as_secs_f64(),
                        keys_read: *k,
                    })
                    .collect()
            },
        )
    }
}

/// What a run did to one master ([`Holds::list`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MasterHold {
    /// The master (`ip:port`).
    pub address: String,
    /// The longest any of the run's commands took there, seconds (a round trip, as the
    /// client timed it: an upper bound of the server's time).
    pub longest_seconds: f64,
    /// The keys read there.
    pub keys_read: u64,
}

/// What another client sees of each master while the run works: a `PING` every `every` (10 ms
/// by [`Prober::start`]) on a connection of its own, the longest it waited for the answer (the
/// server busy with the run's commands, or with anything else), and the typical round trip.
/// The round trips can be taken as it goes ([`Prober::take_new`]), which drains them.
pub struct Prober {
    stop: Arc<AtomicBool>,
    /// Per master (address), its round trips not taken yet, in the order they were taken.
    samples: Vec<(String, Arc<Mutex<Vec<Duration>>>)>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

/// One master's `PING`s while the run worked.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Probe {
    /// The longest round trip, seconds.
    pub longest: f64,
    /// The median round trip, seconds.
    pub median: f64,
    /// The 90th percentile, seconds.
    pub p90: f64,
    /// The 99th percentile, seconds (with under 100 samples, about the longest).
    pub p99: f64,
    /// `PING`s answered.
    pub samples: usize,
}

impl Probe {
    /// The probe of `rtts` (round trips); `None` for none (the master refused `PING`, or could
    /// not be reached: not measured, never 0).
    pub fn of(rtts: &[Duration]) -> Option<Probe> {
        let mut v: Vec<f64> = rtts.iter().map(Duration::as_secs_f64).collect();
        v.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
            v.get(i).copied().unwrap_or(0.0)
        };
        (!v.is_empty()).then(|| Probe {
            longest: v.last().copied().unwrap_or(0.0),
            median: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            samples: v.len(),
        })
    }
}

impl Prober {
    /// Starts probing `masters`, a `PING` every 10 ms.
    pub fn start(masters: &[Master]) -> Prober {
        let nodes: Vec<(String, Link)> = masters
            .iter()
            .map(|m| (m.address.clone(), m.link.clone()))
            .collect();
        Prober::start_every(&nodes, Duration::from_millis(10))
    }

    /// Starts probing `masters` (address, link), a `PING` every `every` (from the end of one
    /// round trip to the start of the next). A master that cannot be reached, or refuses
    /// `PING`, gets no samples.
    pub fn start_every(masters: &[(String, Link)], every: Duration) -> Prober {
        let stop = Arc::new(AtomicBool::new(false));
        let samples: Vec<(String, Arc<Mutex<Vec<Duration>>>)> = masters
            .iter()
            .map(|(address, _)| (address.clone(), Arc::default()))
            .collect();
        let handles = masters
            .iter()
            .zip(&samples)
            .map(|((_, link), (_, rtts))| {
                let (link, stop, rtts) = (link.clone(), stop.clone(), rtts.clone());
                std::thread::spawn(move || {
                    let Ok(mut con) = link.connect() else {
                        return;
                    };
                    while !stop.load(Ordering::Relaxed) {
                        let started = Instant::now();
                        if con.run(&["PING"]).is_err() {
                            break;
                        }
                        if let Ok(mut v) = rtts.lock() {
                            v.push(started.elapsed());
                        }
                        std::thread::sleep(every);
                    }
                })
            })
            .collect();
        Prober {
            stop,
            samples,
            handles,
        }
    }

    /// The round trips taken since the last call (all of them at the first), per master that
    /// has new ones: (address, round trips in the order taken). They are drained: the prober
    /// keeps none of them, so that a long run's memory stays bounded, and [`Prober::finish`]
    /// covers only what was not taken.
    pub fn take_new(&mut self) -> Vec<(String, Vec<Duration>)> {
        let mut out = Vec::new();
        for (address, rtts) in &self.samples {
            let Ok(mut v) = rtts.lock() else { continue };
            if !v.is_empty() {
                out.push((address.clone(), std::mem::take(&mut *v)));
            }
        }
        out
    }

    /// Stops probing; per master that answered `PING`, its probe over every round trip since
    /// the start not taken by [`Prober::take_new`] (masters without any are left out: not
    /// measured).
    pub fn finish(mut self) -> BTreeMap<String, Probe> {
        self.stop.store(true, Ordering::Relaxed);
        for h in std::mem::take(&mut self.handles) {
            let _ = h.join();
        }
        self.samples
            .iter()
            .filter_map(|(a, rtts)| {
                let v = rtts.lock().ok()?;
                Some((a.clone(), Probe::of(&v)?))
            })
            .collect()
    }
}

/// Round trips kept as a histogram of bounded size, for a run of any length: buckets 1% wide
/// from 1 µs to about 20 minutes (the longest round trip kept exactly), so that each
/// percentile is within 1% of the true one.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    counts: Vec<u64>,
    longest: Duration,
    samples: usize,
}

/// [`Latencies`]' bucket ratio, and its number of buckets (1.01^2100 µs: about 20 minutes).
const BUCKET_RATIO: f64 = 1.01;
const BUCKETS: usize = 2100;

impl Latencies {
    /// Adds the round trips `rtts`.
    pub fn add(&mut self, rtts: &[Duration]) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        for r in rtts {
            let us = r.as_secs_f64() * 1e6;
            let i = if us <= 1.0 {
                0
            } else {
                ((us.ln() / BUCKET_RATIO.ln()) as usize).min(BUCKETS - 1)
            };
            if let Some(c) = self.counts.get_mut(i) {
                *c += 1;
            }
            self.longest = self.longest.max(*r);
            self.samples += 1;
        }
    }

    /// The probe of the round trips added (each percentile the upper bound of its bucket,
    /// never past the longest); `None` for none.
    pub fn probe(&self) -> Option<Probe> {
        if self.samples == 0 {
            return None;
        }
        let longest = self.longest.as_secs_f64();
        let at = |q: f64| {
            let rank = ((self.samples as f64 * q).ceil() as u64).max(1);
            let mut seen = 0u64;
            for (i, c) in self.counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    let upper = BUCKET_RATIO.powi(i as i32 + 1) / 1e6;
                    return upper.min(longest);
                }
            }
            longest
        };
        Some(Probe {
            longest,
            median: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            samples: self.samples,
        })
    }
}

impl Drop for Prober {
    /// Stops the probing threads (they end after their round trip under way).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Each master's `PING` round trips, `count` of them `apart` (zero: back to back, as redis-cli
/// sends each command when the last is answered), one master after another. On a virtual
/// machine whose CPUs idle between round trips, waking them dominates: here back-to-back
/// `PING`s took 0.10 ms with the other core idle and 0.014 ms with it busy, and `PING`s 2 ms
/// apart 0.1 ms either way. A master that refuses `PING` or cannot be reached is left out.
pub(crate) fn ping_round_trips(
    masters: &[Master],
    count: usize,
    apart: Duration,
) -> BTreeMap<String, Probe> {
    let mut out = BTreeMap::new();
    for m in masters {
        let mut rtts = Vec::with_capacity(count);
        if let Ok(mut con) = m.link.connect() {
            for _ in 0..count {
                let started = Instant::now();
                if con.run(&["PING"]).is_err() {
                    break;
                }
                rtts.push(started.elapsed());
                if !apart.is_zero() {
                    std::thread::sleep(apart);
                }
            }
        }
        if let Some(p) = Probe::of(&rtts) {
            out.insert(m.address.clone(), p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_of_round_trips_gives_percentiles_within_one_percent() {
        // 1000 round trips of 1 to 1000 µs: the median 500 µs, the p99 990 µs, the longest
        // 1000 µs (nearest rank, as Probe::of).
        let rtts: Vec<Duration> = (1..=1000).map(Duration::from_micros).collect();
        let mut h = Latencies::default();
        h.add(&rtts);
        let p = h.probe().unwrap();
        let exact = Probe::of(&rtts).unwrap();
        assert_eq!(p.samples, 1000);
        assert_eq!(p.longest, exact.longest);
        for (got, want) in [
            (p.median, exact.median),
            (p.p90, exact.p90),
            (p.p99, exact.p99),
        ] {
            assert!((got - want).abs() <= want * 0.0101, "{got} against {want}");
        }
        assert!(Latencies::default().probe().is_none());
    }
}
