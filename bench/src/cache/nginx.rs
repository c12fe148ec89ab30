//! The cache fleet behind nginx: memcached backends (LRU eviction) behind nginx's
//! `hash $arg_key consistent` (`memcached_pass`, read only); the client writes each miss to
//! the backend nginx names in `X-Upstream`, as a cache-aside client behind nginx does. What
//! ringslot predicts from it: which cached keys (listed by `lru_crawler metadump hash`) change
//! owner under the `nginx` flavour; the fleet after the change is predicted by the static
//! model with LRU eviction (`SteadyModel` with `Eviction::Lru`, which takes from [`CheModel`],
//! Che's approximation, which keys an LRU held before), Che's own prediction reported beside.

use super::workload::{key, rank_of, Shape, Zipf};
use super::{cached_bytes, Pools};
use anyhow::{anyhow, bail, Context, Result};
use ringslot_engine::{Flavour, Ring};
use ringslot_harness::proxy::Memcached;
use ringslot_tool::members::dump_memcached;
use std::time::{Duration, Instant};

/// The memcached backends, in the order they are started (nginx's ring does not depend on
/// the order of its servers).
pub struct MemcachedFleet {
    /// The backends, stopped when the fleet is dropped.
    pub servers: Vec<Memcached>,
}

impl MemcachedFleet {
    /// Starts `count` memcached servers of `megabytes` item memory each.
    /// Errors: fewer than 2 MiB (memcached's largest item, 1 MiB, may use at most half its
    /// memory), a memcached that does not start.
    pub fn start(count: usize, megabytes: u64) -> Result<MemcachedFleet> {
        if megabytes < 2 {
            bail!("memcached backends need --maxmemory-mb 2 or more (an item of up to 1 MiB may take at most half of it)");
        }
        let mb = u32::try_from(megabytes).context("--maxmemory-mb is too large for memcached")?;
        let servers = (0..count)
            .map(|_| Memcached::start(mb).map_err(|e| anyhow!("{e}")))
            .collect::<Result<Vec<_>>>()?;
        Ok(MemcachedFleet { servers })
    }

    /// The names (`127.0.0.1:port`) of backends `which`.
    pub fn names(&self, which: &[usize]) -> Vec<String> {
        which
            .iter()
            .filter_map(|&i| self.servers.get(i).map(Memcached::address))
            .collect()
    }

    /// Empties every backend (`flush_all`; their data is the run's own).
    pub fn flush(&self) -> Result<()> {
        for s in &self.servers {
            let answer = s.command("flush_all").map_err(|e| anyhow!("{e}"))?;
            if answer != "OK" {
                bail!("flush_all on {}: {answer}", s.address());
            }
        }
        Ok(())
    }

    /// The workload's keys cached on backends `which` now, as ranks (`lru_crawler metadump
    /// hash`, which walks the hash table, every item once, without touching the LRU; asked
    /// again while another crawler runs and the server answers `BUSY`, for at most 10 s).
    pub fn cached(&self, which: &[usize]) -> Result<Vec<usize>> {
        let mut ranks = Vec::new();
        for name in self.names(which) {
            let deadline = Instant::now() + Duration::from_secs(10);
            let items = loop {
                match dump_memcached(&name) {
                    Ok(items) => break items,
                    Err(e) if format!("{e}").contains("BUSY") && Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err(e) => return Err(e),
                }
            };
            ranks.extend(items.iter().filter_map(|i| rank_of(&i.key)));
        }
        Ok(ranks)
    }
}

/// The backend (an index into `names`) of each of `ranks` under nginx's `hash $arg_key
/// consistent` over `names` (weight 1 each): ringslot's `nginx` flavour.
pub fn owners(names: &[String], ranks: &[usize]) -> Result<Vec<Option<usize>>> {
    if names.is_empty() {
        bail!("a pool needs a backend");
    }
    let flavour = Flavour::Nginx;
    let mut ring = Ring::new(flavour, flavour.default_vnodes(), false);
    ring.set_nodes(names.iter().map(|n| (n.clone().into_bytes(), 1)).collect());
    Ok(ranks
        .iter()
        .map(|&r| ring.owner(key(r).as_bytes()))
        .collect())
}

/// The fleet under LRU eviction, before and after a change, by Che's approximation (Che,
/// Tung and Wang, "Hierarchical Web caching systems: modeling, design and experimental
/// results", IEEE JSAC 20(7), 2002; Fricker, Robert and Roberts, "A versatile and accurate
/// approximation for LRU cache performance", 2012, for keys of unequal sizes): a backend of
/// `C` bytes holds key `k` (probability `p`, `s` bytes) with probability `h = 1 - e^(-p T)`,
/// where its characteristic time `T` (in requests to the whole fleet) solves
/// `sum s (1 - e^(-p T)) = C` over the keys it owns.
///
/// - **Memory**: what each backend's cached keys used before the change, times one share for
///   every backend, calibrated so that the model's miss share before the change is the
///   measured one: memcached's slabs waste memory (a share below 1), and its segmented LRU
///   (hot, warm and cold queues) keeps hot keys better than a plain LRU does (above 1). A joining backend gets the mean. A key that moved away is never read
///   there again and falls out of the LRU: it holds nothing in the steady state.
/// - **The transient**: under LRU a key's next request after the switch sees the cache as
///   the switch left it, later ones the new steady state. A key that moved misses its first
///   request (steady: a hit with `h'`); a key that stayed finds itself with the old `h`
///   rather than `h'` during about one characteristic time `T'` of its backend. Extra misses
///   within `W` requests: `sum over moved h' (1 - (1-p)^W) + sum over stayed (h' - h)
///   (1 - (1-p)^min(W, T'))`.
pub struct CheModel {
    /// The share of each backend's memory the model uses (the calibration).
    pub memory_share: f64,
    /// The predicted miss share after the change.
    pub after_miss_share: f64,
    /// Per key that moved: (p, h').
    moved: Vec<(f64, f64)>,
    /// Per key that stayed: (p, h' - h, T' of its backend).
    stayed: Vec<(f64, f64, f64)>,
    /// Per rank: the probability it is cached on its backend before the change (`h`).
    pub present_before: Vec<f64>,
}

impl CheModel {
    /// The model of `keys` keys of `zipf` over the backends `before`, then `after` (names),
    /// whose memory is what `cached` (ranks cached at the switch) used, calibrated to the
    /// measured miss share `measured_before`.
    pub fn new(
        pools: &Pools,
        cached: &[usize],
        shape: &Shape,
        zipf: &Zipf,
        measured_before: f64,
    ) -> CheModel {
        let (before, after) = (&pools.before[..], &pools.after[..]);
        let (own_before, own_after) = (&pools.own_before[..], &pools.own_after[..]);
        let keys = own_before.len();
        let owner = |o: &[Option<usize>], r: usize| o.get(r).copied().flatten();
        let size = |r: usize| cached_bytes(shape, r) as f64;
        let memory: Vec<f64> = pools
            .memory_before(cached, shape)
            .into_iter()
            .map(|m| m as f64)
            .collect();
        // Each backend's keys as (p, bytes).
        let on = |owners: &[Option<usize>], n: usize| -> Vec<Vec<(f64, f64)>> {
            let mut v = vec![Vec::new(); n];
            for r in 0..keys {
                if let Some(b) = owner(owners, r).and_then(|b| v.get_mut(b)) {
                    b.push((zipf.p(r), size(r)));
                }
            }
            v
        };
        let keys_before = on(own_before, before.len());
        let keys_after = on(own_after, after.len());
        let times = |keys: &[Vec<(f64, f64)>], caps: &[f64]| -> Vec<f64> {
            keys.iter()
                .zip(caps)
                .map(|(k, &c)| characteristic_time(k, c))
                .collect()
        };
        let miss = |keys: &[Vec<(f64, f64)>], t: &[f64]| -> f64 {
            keys.iter()
                .zip(t)
                .map(|(k, &t)| k.iter().map(|&(p, _)| p * (-p * t).exp()).sum::<f64>())
                .sum()
        };
        // memcached's segmented LRU keeps hot keys better than a plain LRU of the same memory,
        // so the share may exceed 1.
        let (mut lo, mut hi) = (0.0f64, 8.0f64);
        for _ in 0..40 {
            let s = (lo + hi) / 2.0;
            let caps: Vec<f64> = memory.iter().map(|m| m * s).collect();
            if miss(&keys_before, &times(&keys_before, &caps)) > measured_before {
                lo = s;
            } else {
                hi = s;
            }
        }
        let memory_share = hi;
        let caps_before: Vec<f64> = memory.iter().map(|m| m * memory_share).collect();
        let mean = caps_before.iter().sum::<f64>() / caps_before.len().max(1) as f64;
        let caps_after: Vec<f64> = after
            .iter()
            .map(|n| {
                before
                    .iter()
                    .position(|b| b == n)
                    .and_then(|i| caps_before.get(i).copied())
                    .unwrap_or(mean)
            })
            .collect();
        let t_before = times(&keys_before, &caps_before);
        let t_after = times(&keys_after, &caps_after);
        let (mut moved, mut stayed) = (Vec::new(), Vec::new());
        let mut present_before = vec![0.0; keys];
        for r in 0..keys {
            let (Some(b), Some(a)) = (owner(own_before, r), owner(own_after, r)) else {
                continue;
            };
            let p = zipf.p(r);
            let (tb, ta) = (
                t_before.get(b).copied().unwrap_or(0.0),
                t_after.get(a).copied().unwrap_or(0.0),
            );
            if let Some(h) = present_before.get_mut(r) {
                *h = 1.0 - (-p * tb).exp();
            }
            let h_after = 1.0 - (-p * ta).exp();
            if before.get(b) == after.get(a) {
                stayed.push((p, h_after - (1.0 - (-p * tb).exp()), ta));
            } else {
                moved.push((p, h_after));
            }
        }
        CheModel {
            memory_share,
            after_miss_share: miss(&keys_after, &t_after),
            moved,
            stayed,
            present_before,
        }
    }

    /// The extra misses expected within `w` requests after the switch (see the type's docs).
    pub fn transient_within(&self, w: u64) -> f64 {
        let w = w as f64;
        let first = |p: f64, t: f64| 1.0 - (1.0 - p).powf(t);
        let moved: f64 = self.moved.iter().map(|&(p, h)| h * first(p, w)).sum();
        let stayed: f64 = self
            .stayed
            .iter()
            .map(|&(p, dh, t)| dh * first(p, w.min(t)))
            .sum();
        moved + stayed
    }
}

/// Che's characteristic time of a cache of `capacity` bytes over `keys` (probability,
/// bytes): the `T` with `sum bytes (1 - e^(-p T)) = capacity`, by bisection on a logarithmic
/// scale; infinite when every key fits.
fn characteristic_time(keys: &[(f64, f64)], capacity: f64) -> f64 {
    let held = |t: f64| -> f64 { keys.iter().map(|&(p, s)| s * (1.0 - (-p * t).exp())).sum() };
    if keys.iter().map(|&(_, s)| s).sum::<f64>() <= capacity {
        return f64::INFINITY;
    }
    let (mut lo, mut hi) = (1e-3f64, 1e15f64);
    for _ in 0..100 {
        let t = (lo * hi).sqrt();
        if held(t) < capacity {
            lo = t;
        } else {
            hi = t;
        }
    }
    (lo * hi).sqrt()
}

#[cfg(test)]
mod tests {
    use super::super::workload::HttpFront;
    use super::*;
    use ringslot_harness::lb::Nginx;

    #[test]
    fn che_time_fills_the_cache_and_equal_keys_share_it() {
        // Ten equal keys of 1 byte, room for 5: each is held with probability 1/2 by symmetry,
        // so 1 - e^(-p T) = 1/2 with p = 0.1: T = 10 ln 2.
        let keys = vec![(0.1, 1.0); 10];
        let t = characteristic_time(&keys, 5.0);
        assert!((t - 10.0 * std::f64::consts::LN_2).abs() < 1e-6, "{t}");
        assert_eq!(characteristic_time(&keys, 10.0), f64::INFINITY);
    }

    #[test]
    fn nginx_names_the_backend_ringslot_places_each_key_on_and_reads_it_back() {
        // Three memcached servers behind nginx: every key misses first, naming in X-Upstream
        // the backend of ringslot's nginx flavour; written there, it hits through nginx, and
        // metadump lists it.
        let fleet = MemcachedFleet::start(3, 8).unwrap();
        let which = [0, 1, 2];
        let names = fleet.names(&which);
        let nginx = Nginx::start_memcached(&names).unwrap();
        let mut front = HttpFront::connect(&nginx).unwrap();
        let shape = Shape {
            batch: 100,
            value_min: 10,
            value_max: 50,
            ttl: 60,
        };
        let ranks: Vec<usize> = (0..2000).collect();
        let owners = owners(&names, &ranks).unwrap();
        let mut writes = Vec::new();
        for chunk in ranks.chunks(100) {
            let keys: Vec<String> = chunk.iter().map(|&r| key(r)).collect();
            for (&r, (hit, upstream)) in chunk.iter().zip(front.get(&keys).unwrap()) {
                assert!(!hit, "{} hit in an empty fleet", key(r));
                let ours = owners[r].and_then(|i| names.get(i)).unwrap();
                assert_eq!(&upstream, ours, "{}", key(r));
                writes.push((upstream, r));
            }
        }
        front.set(&writes, &shape).unwrap();
        for chunk in ranks.chunks(100) {
            let keys: Vec<String> = chunk.iter().map(|&r| key(r)).collect();
            assert!(front.get(&keys).unwrap().iter().all(|(hit, _)| *hit));
        }
        let mut cached = fleet.cached(&which).unwrap();
        cached.sort_unstable();
        assert_eq!(cached, ranks);
        // Each backend got some of them (the ring spreads 2000 keys over three).
        for (i, name) in names.iter().enumerate() {
            let n = owners.iter().filter(|o| **o == Some(i)).count();
            assert!(n > 300, "{name} owns {n} of 2000");
        }
        fleet.flush().unwrap();
        assert!(fleet.cached(&which).unwrap().is_empty());
    }
}
