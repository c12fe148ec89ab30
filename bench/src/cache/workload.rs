//! The cache workload: keys drawn from a Zipf law (rank `k` of `n` requested with probability
//! proportional to `1 / k^s`), read through a proxy in pipelined batches; a miss sets the key
//! (read-through, as a cache-aside client does after reading the database), with a TTL:
//! through twemproxy on a Redis connection, or through nginx over HTTP ([`HttpFront`]).

use anyhow::{anyhow, bail, Context, Result};
use ringslot_harness::lb::Nginx;
use ringslot_harness::redis::{self, Connection};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

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

/// A client's connections: one HTTP/1.1 keep-alive connection to nginx (requests
/// pipelined), and one to each backend it writes misses to.
pub struct HttpFront {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    backends: HashMap<String, (TcpStream, BufReader<TcpStream>)>,
}

impl HttpFront {
    /// Connects to `nginx`.
    pub fn connect(nginx: &Nginx) -> Result<HttpFront> {
        let (writer, reader) = open(&format!("127.0.0.1:{}", nginx.port))?;
        Ok(HttpFront {
            writer,
            reader,
            backends: HashMap::new(),
        })
    }

    /// `GET /?key=<key>` of each of `keys` through nginx: whether it hit, and the backend
    /// that answered (`X-Upstream`). Errors: an answer other than 200 or 404, a closed
    /// connection, 30 s without an answer.
    pub fn get(&mut self, keys: &[String]) -> Result<Vec<(bool, String)>> {
        let mut out = Vec::with_capacity(keys.len());
        // 64 in flight at most: nginx stops reading while its answers wait unread, and a
        // bigger batch could block both sides.
        for chunk in keys.chunks(64) {
            let mut request = String::new();
            for k in chunk {
                request.push_str(&format!("GET /?key={k} HTTP/1.1\r\nHost: cache\r\n\r\n"));
            }
            self.writer.write_all(request.as_bytes())?;
            for _ in chunk {
                out.push(read_answer(&mut self.reader)?);
            }
        }
        Ok(out)
    }

    /// Writes each `(backend, rank)` with `set <key> 0 <ttl> <len>` on that backend (values of
    /// the shape's size), pipelined per backend. Errors: a backend that refuses (`ERROR`,
    /// `CLIENT_ERROR`) or does not answer.
    pub fn set(&mut self, writes: &[(String, usize)], shape: &Shape) -> Result<()> {
        let mut by_backend: HashMap<&str, Vec<usize>> = HashMap::new();
        for (b, r) in writes {
            by_backend.entry(b.as_str()).or_default().push(*r);
        }
        for (backend, ranks) in by_backend {
            if !self.backends.contains_key(backend) {
                self.backends.insert(backend.to_string(), open(backend)?);
            }
            let Some((w, r)) = self.backends.get_mut(backend) else {
                continue;
            };
            let mut out = Vec::new();
            for &k in &ranks {
                let len = shape.value_len(k);
                out.extend_from_slice(
                    format!("set {} 0 {} {len}\r\n", key(k), shape.ttl).as_bytes(),
                );
                out.resize(out.len() + len, b'v');
                out.extend_from_slice(b"\r\n");
            }
            w.write_all(&out)?;
            for _ in &ranks {
                let mut line = String::new();
                if r.read_line(&mut line)? == 0 {
                    bail!("memcached {backend} closed the connection");
                }
                // STORED, or SERVER_ERROR out of memory (a full slab class: not stored).
                if line.starts_with("ERROR") || line.starts_with("CLIENT_ERROR") {
                    bail!("memcached {backend}: {}", line.trim_end());
                }
            }
        }
        Ok(())
    }
}

/// A connection to `address` with a 30 s read timeout: its writer and buffered reader.
fn open(address: &str) -> Result<(TcpStream, BufReader<TcpStream>)> {
    let s = TcpStream::connect(address).with_context(|| format!("connect to {address}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.set_nodelay(true)?;
    Ok((s.try_clone()?, BufReader::new(s)))
}

/// One answer of nginx: 200 (a hit) or 404 (a miss), and its `X-Upstream`.
fn read_answer(reader: &mut impl BufRead) -> Result<(bool, String)> {
    let mut status = String::new();
    if reader.read_line(&mut status)? == 0 {
        bail!("nginx closed the connection");
    }
    let code = status.split(' ').nth(1).unwrap_or_default().to_string();
    let (mut length, mut upstream) = (0usize, String::new());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            bail!("nginx closed the connection in the headers");
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            } else if name.eq_ignore_ascii_case("x-upstream") {
                upstream = value.trim().to_string();
            }
        }
    }
    std::io::copy(&mut reader.take(length as u64), &mut std::io::sink())?;
    match code.as_str() {
        "200" => Ok((true, upstream)),
        "404" => Ok((false, upstream)),
        _ => bail!("nginx answered {}", status.trim_end()),
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
