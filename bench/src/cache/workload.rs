//! The cache workload: keys drawn from a Zipf law (rank `k` of `n` requested with probability
//! proportional to `1 / k^s`), read through a proxy in pipelined batches; a miss sets the key
//! (read-through, as a cache-aside client does after reading the database), with a TTL.

use super::nginx::HttpFront;
use anyhow::{anyhow, Result};
use ringslot_harness::redis::{self, Connection};

/// A Zipf law over ranks `0..n` (rank 0 the hottest), sampled by inverse transform over its
/// cumulative table (8 bytes a key).
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// The law of exponent `s` over `n` keys (`n >= 1`).
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut sum = 0.0;
        for k in 1..=n.max(1) {
            sum += 1.0 / (k as f64).powf(s);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        Zipf { cdf }
    }

    /// The rank of a uniform draw `u` in `[0, 1)`.
    pub fn rank(&self, u: f64) -> usize {
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len().saturating_sub(1))
    }

    /// The probability of rank `k`.
    pub fn p(&self, k: usize) -> f64 {
        let at = |i: usize| self.cdf.get(i).copied().unwrap_or(1.0);
        match k.checked_sub(1) {
            Some(j) => at(k) - at(j),
            None => at(0),
        }
    }
}

/// SplitMix64 (Steele, Lea and Flood 2014): a seeded, reproducible stream of 64-bit values.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// A uniform draw in `[0, 1)` (53 bits).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// SplitMix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The name of rank `k`.
pub fn key(k: usize) -> String {
    format!("c:{k}")
}

/// The rank of a key name, if it is one of the workload's.
pub fn rank_of(name: &[u8]) -> Option<usize> {
    std::str::from_utf8(name.strip_prefix(b"c:")?)
        .ok()?
        .parse()
        .ok()
}

/// What the workload sends.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Requests pipelined per round trip.
    pub batch: usize,
    /// Value sizes: each key's size is fixed, uniform in `value_min..=value_max` bytes.
    pub value_min: usize,
    /// See `value_min`.
    pub value_max: usize,
    /// TTL of what a miss sets, seconds.
    pub ttl: u64,
}

impl Shape {
    /// The value size of rank `k`.
    pub fn value_len(&self, k: usize) -> usize {
        let span = self.value_max.saturating_sub(self.value_min) as u64 + 1;
        self.value_min + (mix(k as u64 ^ 0x5eed) % span) as usize
    }
}

/// Hits and misses of some requests.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tally {
    /// Requests that found their key.
    pub hits: u64,
    /// Requests that did not.
    pub misses: u64,
}

impl Tally {
    /// Hits and misses.
    pub fn requests(&self) -> u64 {
        self.hits + self.misses
    }

    /// The miss share (0 for no request).
    pub fn miss_share(&self) -> f64 {
        if self.requests() == 0 {
            0.0
        } else {
            self.misses as f64 / self.requests() as f64
        }
    }
}

/// How a client reaches the fleet.
pub enum Front {
    /// A Redis connection to twemproxy: `GET`, and `SET ... EX` of a miss through it.
    Twemproxy(Connection),
    /// HTTP to nginx (`memcached_pass`), a miss written to the backend nginx named.
    Nginx(HttpFront),
}

/// A client of the proxy sending the workload.
pub struct Client<'a> {
    /// Its connection to the proxy.
    pub con: Front,
    /// The law of the keys it reads.
    pub zipf: &'a Zipf,
    /// Its draws.
    pub rng: Rng,
    /// What it sends.
    pub shape: Shape,
    /// Requests per rank, counted while `Some`.
    pub counts: Option<Vec<u64>>,
}

impl Client<'_> {
    /// Sends `n` requests: `GET`s in batches, and with `read_through` a `SET ... EX ttl` of
    /// each key that missed. Errors: the proxy's.
    pub fn send(&mut self, n: u64, read_through: bool) -> Result<Tally> {
        let mut tally = Tally::default();
        let filler = vec![b'v'; self.shape.value_max.max(1)];
        let mut left = n;
        while left > 0 {
            let b = left.min(self.shape.batch as u64) as usize;
            left -= b as u64;
            let ranks: Vec<usize> = (0..b).map(|_| self.zipf.rank(self.rng.unit())).collect();
            if let Some(counts) = &mut self.counts {
                for &k in &ranks {
                    if let Some(c) = counts.get_mut(k) {
                        *c += 1;
                    }
                }
            }
            match &mut self.con {
                Front::Twemproxy(con) => {
                    let mut pipe = redis::pipe();
                    for &k in &ranks {
                        pipe.cmd("GET").arg(key(k));
                    }
                    let found: Vec<Option<Vec<u8>>> = pipe
                        .query(con)
                        .map_err(|e| anyhow!("GET through the proxy: {e}"))?;
                    let mut fill = redis::pipe();
                    let mut fills = 0;
                    for (&k, v) in ranks.iter().zip(&found) {
                        if v.is_some() {
                            tally.hits += 1;
                        } else {
                            tally.misses += 1;
                            if read_through {
                                let len = self.shape.value_len(k).min(filler.len());
                                fill.cmd("SET")
                                    .arg(key(k))
                                    .arg(filler.get(..len).unwrap_or_default())
                                    .arg("EX")
                                    .arg(self.shape.ttl)
                                    .ignore();
                                fills += 1;
                            }
                        }
                    }
                    if fills > 0 {
                        fill.query::<()>(con)
                            .map_err(|e| anyhow!("SET through the proxy: {e}"))?;
                    }
                }
                Front::Nginx(http) => {
                    let names: Vec<String> = ranks.iter().map(|&k| key(k)).collect();
                    let found = http
                        .get(&names)
                        .map_err(|e| anyhow!("GET through nginx: {e:#}"))?;
                    let mut writes = Vec::new();
                    for (&k, (hit, upstream)) in ranks.iter().zip(found) {
                        if hit {
                            tally.hits += 1;
                        } else {
                            tally.misses += 1;
                            if read_through {
                                writes.push((upstream, k));
                            }
                        }
                    }
                    http.set(&writes, &self.shape)?;
                }
            }
        }
        Ok(tally)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_probabilities_follow_the_law_and_sum_to_one() {
        let z = Zipf::new(1000, 1.0);
        let total: f64 = (0..1000).map(|k| z.p(k)).sum();
        assert!((total - 1.0).abs() < 1e-9);
        // Rank 1 (the second) is half as likely as rank 0 at s = 1.
        assert!((z.p(0) / z.p(1) - 2.0).abs() < 1e-9);
        // Draws land by the law: the hottest key's share within 4 standard errors.
        let mut rng = Rng::new(7);
        let n = 200_000;
        let hot = (0..n).filter(|_| z.rank(rng.unit()) == 0).count() as f64 / n as f64;
        let se = (z.p(0) * (1.0 - z.p(0)) / n as f64).sqrt();
        assert!((hot - z.p(0)).abs() < 4.0 * se, "{hot} vs {}", z.p(0));
        assert_eq!(z.rank(0.0), 0);
        assert_eq!(z.rank(0.999_999_999_999), 999);
        assert_eq!(rank_of(b"c:42"), Some(42));
        assert_eq!(rank_of(b"x:42"), None);
    }

    #[test]
    fn value_sizes_stay_in_range() {
        let s = Shape {
            batch: 10,
            value_min: 100,
            value_max: 200,
            ttl: 60,
        };
        assert!((0..10_000).all(|k| (100..=200).contains(&s.value_len(k))));
        assert_eq!(s.value_len(5), s.value_len(5));
    }
}
