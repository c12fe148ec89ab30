//! `cache --local`: what a join (or a leave) costs a cache fleet, predicted by ringslot and
//! measured on a real one on loopback: backends (redis-servers with `maxmemory`,
//! `allkeys-lfu` and the module) behind twemproxy (`distribution: ketama` or `modula`, `hash:
//! md5`), or memcached servers (LRU) behind nginx (`hash $arg_key consistent`,
//! `memcached_pass`, [`nginx`]), a Zipf workload read through the proxy (a miss sets the key:
//! through twemproxy, or on the backend nginx names in `X-Upstream`, since nginx does not
//! write to memcached). The change is made as their users make it: a new pool, a new proxy.
//!
//! Definitions (what the report prints):
//! - **steady miss share** `m`: the misses over the requests of the last 10 intervals before
//!   the change, once the hit rate stopped moving (two successive 5-interval means within
//!   0.2 percentage points);
//! - **instantaneous extra miss share**: the share of requests that miss at the switch beyond
//!   those that missed just before it. Measured by two probes of `--probe` requests that
//!   refill nothing (so every probe request sees the cache as it is at that instant), one
//!   through the old proxy right before the switch and one through the new proxy right after:
//!   the difference of their miss shares. Predicted as the share of requests that go to
//!   cached keys that change owner: **exact**, the workload's probabilities (its Zipf law) of
//!   those keys; **counts**, the warm-up's own counts of them over all its requests; **LFU**,
//!   `RING.MOVES ... WEIGH HITS` on each backend (its keys' LFU counters turned into
//!   accesses), the moved share of the cached keys' hits times the hit share of the probe
//!   before the switch;
//! - **first interval**: the extra miss share (beyond `m`) of the first `--interval`
//!   read-through requests after the switch; predicted from the workload's probabilities as
//!   the moved keys requested at least once in it, `sum (1 - (1 - p)^I) / I`;
//! - **steady miss share after** `m'`: the read-through runs until the hit rate settles again
//!   (the warm-up's rule, or `--after-max` requests), and `m'` is the last 10 intervals' miss
//!   share: a leave loses a backend's memory, so the fleet settles at a level of its own.
//!   Predicted by a static LFU model ([`SteadyModel`]): each backend keeps the most
//!   requested of the keys it owns that fit in its effective memory (a share of what its
//!   cached keys used before, calibrated so that the model's miss share before is the
//!   measured `m`; a joining backend the mean), less what stale copies of keys that moved away
//!   keep holding (Redis' LFU; memcached's LRU lets them go); the model's miss share after is
//!   the prediction. For memcached, Che's approximation of an LRU ([`nginx::CheModel`]) is
//!   reported beside it.
//! - **cumulative extra misses** (the transient): the misses beyond `m'` per request summed
//!   over the intervals until the hit rate is within one percentage point of `m'`; that
//!   window `T` is printed as "requests to recover". Predicted as the keys the model keeps
//!   after the change that were not on their backend before (moved, or newly fitting),
//!   requested at least once within `T`, `sum (1 - (1 - p)^T)`, less the hits the keys a
//!   backend no longer keeps get before LFU evicts them. The steady loss `m' - m` per
//!   request comes on top, for as long as the fleet stays so.

mod fleet;
mod nginx;
mod slots;
mod workload;

use crate::common::Global;
use crate::report::{self, fixed, Chart, Panel, Series, Table};
use anyhow::{anyhow, bail, Result};
use clap::Args as ClapArgs;
use fleet::{ask_backends, Change, Fleet};
use nginx::{CheModel, MemcachedFleet};
use plotters::prelude::SeriesLabelPosition;
use ringslot_harness::lb::Nginx;
use ringslot_harness::proxy::{Distribution, Proxy};
use ringslot_harness::redis;
use ringslot_harness::Server;
use slots::{slot_cost, SlotCost};
use workload::{Client, Front, HttpFront, Rng, Shape, Tally, Zipf};

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Run the fleet on loopback (the only mode: a benchmark of a proxy fleet of one's own
    /// would write to it).
    #[arg(long)]
    pub local: bool,
    /// Backends before a join (a leave removes one of them).
    #[arg(long, default_value_t = 4)]
    pub backends: usize,
    /// Distinct keys of the workload.
    #[arg(long, default_value_t = 100_000)]
    pub keys: usize,
    /// Zipf exponent s (rank k requested with probability proportional to 1/k^s).
    #[arg(long, default_value_t = 0.99)]
    pub zipf: f64,
    /// Smallest value, bytes (each key's size is fixed, uniform in min..=max).
    #[arg(long, default_value_t = 100)]
    pub value_min: usize,
    /// Largest value, bytes.
    #[arg(long, default_value_t = 1000)]
    pub value_max: usize,
    /// Data each backend may hold above what it uses empty, MiB (`maxmemory`).
    #[arg(long, default_value_t = 8)]
    pub maxmemory_mb: u64,
    /// Requests per interval of the hit-rate series.
    #[arg(long, default_value_t = 10_000)]
    pub interval: u64,
    /// Fewest warm-up requests.
    #[arg(long, default_value_t = 300_000)]
    pub warmup_min: u64,
    /// Most warm-up requests (the hit rate may still move then: the report says so).
    #[arg(long, default_value_t = 3_000_000)]
    pub warmup_max: u64,
    /// Requests of the probe after the switch (which refills nothing).
    #[arg(long, default_value_t = 20_000)]
    pub probe: u64,
    /// Most read-through requests after the switch.
    #[arg(long, default_value_t = 1_000_000)]
    pub after_max: u64,
    /// Requests pipelined per round trip.
    #[arg(long, default_value_t = 200)]
    pub batch: usize,
    /// Placements: `ketama` and `modula` (twemproxy's distributions, `hash: md5`, in front of
    /// redis-server backends with LFU eviction), `nginx` (nginx's `hash $arg_key consistent`
    /// reading through `memcached_pass` from memcached backends, LRU, the client writing each
    /// miss to the backend nginx names).
    #[arg(long, value_delimiter = ',', default_value = "ketama,modula")]
    pub distributions: Vec<String>,
    /// Changes: join, leave.
    #[arg(long, value_delimiter = ',', default_value = "join,leave")]
    pub cases: Vec<String>,
    /// Skip the Redis Cluster side.
    #[arg(long)]
    pub no_cluster: bool,
    /// Seed of the workload.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// TTL of every key the run sets, seconds.
    #[arg(long, default_value_t = 3600)]
    pub ttl: u64,
    /// Base name of the output files.
    #[arg(long, default_value = "cache")]
    pub name: String,
}

/// One distribution under one change: predicted and measured.
#[derive(Debug, Clone)]
struct Outcome {
    case: &'static str,
    placement: Placement,
    warmup: u64,
    settled: bool,
    steady: Tally,
    cached: usize,
    /// The cached keys at the switch.
    cached_ranks: Vec<usize>,
    /// Exact: the workload's probabilities of the cached keys that move.
    predicted_exact: f64,
    /// The same from the warm-up's counts of those keys over all its requests.
    predicted_counts: f64,
    predicted_lfu: f64,
    /// `RING.MOVES` on the backends, summed.
    lfu: fleet::Weighed,
    /// The engine's moved keys, counted over the same cached keys.
    moved_keys: u64,
    /// The probe through the old proxy right before the switch, and the one after.
    probe_before: Tally,
    probe: Tally,
    first_predicted: f64,
    /// Hit rate per interval after the switch (read-through).
    series: Vec<Tally>,
    /// Hit rate per interval of the warm-up's last 30 intervals.
    before: Vec<Tally>,
    recovered_after: Option<u64>,
    cumulative: f64,
    cumulative_predicted: f64,
    /// The steady miss share after the change: predicted (LFU keeps each backend's most
    /// requested keys that fit) and measured (the last 10 intervals, once settled).
    steady_after_predicted: f64,
    steady_after: f64,
    settled_after: bool,
    /// The share of each backend's memory the model keeps its keys in (calibrated to the
    /// steady miss share before).
    memory_share: f64,
    /// For memcached backends, Che's approximation of an LRU: the steady miss share after and
    /// the transient's extra misses within the same window.
    /// (memory share, miss share after, transient).
    che: Option<(f64, f64, f64)>,
}

impl Outcome {
    fn steady_share(&self) -> f64 {
        self.steady.miss_share()
    }

    /// The measured instantaneous extra miss share and its standard error (the two probes'
    /// binomial errors combined).
    fn measured(&self) -> (f64, f64) {
        let var = |t: &Tally| {
            let p = t.miss_share();
            p * (1.0 - p) / t.requests().max(1) as f64
        };
        (
            self.probe.miss_share() - self.probe_before.miss_share(),
            (var(&self.probe) + var(&self.probe_before)).sqrt(),
        )
    }
}

/// What places the keys and keeps them: twemproxy (a distribution) in front of
/// redis-servers, or nginx in front of memcached servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// twemproxy's `ketama` or `modula`, `hash: md5`, redis-server backends with LFU.
    Twemproxy(Distribution),
    /// nginx's `hash $arg_key consistent` (`memcached_pass`), memcached backends with LRU.
    Nginx,
}

impl Placement {
    /// Its name in the reports.
    fn name(self) -> String {
        match self {
            Placement::Twemproxy(d) => format!("twemproxy {}", d.name()),
            Placement::Nginx => "nginx consistent".into(),
        }
    }

    /// Its short name (the chart's legend, `--distributions`).
    fn short(self) -> &'static str {
        match self {
            Placement::Twemproxy(d) => d.name(),
            Placement::Nginx => "nginx",
        }
    }
}

fn placement(name: &str) -> Result<Placement> {
    match name {
        "ketama" => Ok(Placement::Twemproxy(Distribution::Ketama)),
        "modula" => Ok(Placement::Twemproxy(Distribution::Modula)),
        "nginx" => Ok(Placement::Nginx),
        _ => bail!("unknown distribution `{name}` (ketama, modula, nginx)"),
    }
}

/// The scheme of `RING.MOVES` that models a twemproxy distribution.
fn scheme_of(d: Distribution) -> &'static str {
    match d {
        Distribution::Ketama => "ring",
        Distribution::Modula => "modulo",
    }
}

/// The two fleets: redis-servers for twemproxy, memcached servers for nginx (each started
/// only when a placement needs it).
struct Fleets {
    redis: Option<Fleet>,
    memcached: Option<MemcachedFleet>,
}

/// Runs every change under every distribution on one fleet, then the cluster side, and
/// publishes the report.
pub fn run(g: &Global, a: &Args) -> Result<()> {
    if !a.local || g.url.is_some() {
        bail!(
            "cache runs on a fleet of its own: give --local (and no --url; it writes to its \
             backends)"
        );
    }
    if a.backends < 3 || a.keys == 0 || a.interval == 0 || a.batch == 0 {
        bail!("cache needs --backends >= 3 (a Redis Cluster's minimum), --keys, --interval and --batch above 0");
    }
    let placements: Vec<Placement> = a
        .distributions
        .iter()
        .map(|d| placement(d))
        .collect::<Result<_>>()?;
    let module = g.module_path()?;
    let builder = || Server::builder().binary(&g.redis_server).module(&module);
    let fleets = Fleets {
        redis: if placements.iter().any(|p| *p != Placement::Nginx) {
            eprintln!(
                "cache: starting {} redis-server backends ...",
                a.backends + 1
            );
            Some(Fleet::start(a.backends + 1, a.maxmemory_mb, builder)?)
        } else {
            None
        },
        memcached: if placements.contains(&Placement::Nginx) {
            eprintln!("cache: starting {} memcached backends ...", a.backends + 1);
            Some(MemcachedFleet::start(a.backends + 1, a.maxmemory_mb)?)
        } else {
            None
        },
    };
    let zipf = Zipf::new(a.keys, a.zipf);
    let shape = Shape {
        batch: a.batch,
        value_min: a.value_min,
        value_max: a.value_max.max(a.value_min),
        ttl: a.ttl,
    };
    let mut outcomes = Vec::new();
    let mut slot_side: Vec<(&'static str, SlotCost)> = Vec::new();
    for case in &a.cases {
        let change = match case.as_str() {
            "join" => Change::join(a.backends),
            "leave" => Change::leave(a.backends),
            other => bail!("unknown case `{other}` (join, leave)"),
        };
        let mut cached_for_cluster = Vec::new();
        for &p in &placements {
            let o = run_one(&fleets, &change, p, &zipf, &shape, a)?;
            eprintln!(
                "cache: {} {}: predicted {:.4} (exact){}, measured {:.4}",
                change.name,
                p.name(),
                o.predicted_exact,
                if o.predicted_lfu.is_nan() {
                    String::new()
                } else {
                    format!(" {:.4} (LFU)", o.predicted_lfu)
                },
                o.measured().0
            );
            if cached_for_cluster.is_empty() {
                cached_for_cluster = o.cached_ranks.clone();
            }
            outcomes.push(o);
        }
        if !a.no_cluster {
            eprintln!(
                "cache: the same keys on a Redis Cluster of {} masters ({}) ...",
                a.backends, change.name
            );
            let cluster_builder = || Server::builder().binary(&g.redis_server).no_module();
            let cost = slot_cost(
                a.backends,
                change.name == "join",
                &cached_for_cluster,
                &shape,
                &cluster_builder,
            )?;
            slot_side.push((change.name, cost));
        }
    }
    publish(g, a, &outcomes, &slot_side)
}

/// A running proxy of either kind (stopped when dropped).
enum Running {
    Twemproxy(Proxy),
    Nginx(Nginx),
}

impl Running {
    /// Starts the proxy of `placement` in front of backends `which`.
    fn start(fleets: &Fleets, placement: Placement, which: &[usize]) -> Result<Running> {
        match (placement, &fleets.redis, &fleets.memcached) {
            (Placement::Twemproxy(d), Some(f), _) => {
                Ok(Running::Twemproxy(Proxy::start(&f.pool(d, which))?))
            }
            (Placement::Nginx, _, Some(m)) => Ok(Running::Nginx(
                Nginx::start_memcached(&m.names(which)).map_err(|e| anyhow!("{e}"))?,
            )),
            _ => bail!("no fleet for {}", placement.name()),
        }
    }

    /// A client's connection to it.
    fn connect(&self) -> Result<Front> {
        match self {
            Running::Twemproxy(p) => Ok(Front::Twemproxy(
                redis::Client::open(format!("redis://{}/", p.address()))?.get_connection()?,
            )),
            Running::Nginx(n) => Ok(Front::Nginx(HttpFront::connect(n)?)),
        }
    }
}

/// One placement under one change (see the module docs).
fn run_one(
    fleets: &Fleets,
    change: &Change,
    placement: Placement,
    zipf: &Zipf,
    shape: &Shape,
    a: &Args,
) -> Result<Outcome> {
    if let Some(f) = &fleets.redis {
        f.flush()?;
    }
    if let Some(m) = &fleets.memcached {
        m.flush()?;
    }
    let proxy = Running::start(fleets, placement, &change.before)?;
    let mut client = Client {
        con: proxy.connect()?,
        zipf,
        rng: Rng::new(a.seed),
        shape: shape.clone(),
        counts: Some(vec![0; a.keys]),
    };
    // Warm up until the hit rate stops moving.
    eprintln!(
        "cache: {} {}: warming up ...",
        change.name,
        placement.name()
    );
    let (warm, settled) = until_settled(&mut client, a.interval, a.warmup_min, a.warmup_max)?;
    let sent = warm.len() as u64 * a.interval;
    let steady = last_ten(&warm);
    let counts = client.counts.take().unwrap_or_default();
    // The cache as the switch finds it.
    let probe_before = client.send(a.probe, false)?;
    let all: Vec<usize> = (0..a.keys).collect();
    let (cached, pools, lfu) = match (placement, &fleets.redis, &fleets.memcached) {
        (Placement::Twemproxy(d), Some(fleet), _) => {
            // Predict, with room for the what-if's ring (nothing is evicted meanwhile).
            let held = fleet.hold(&change.before)?;
            let cached = fleet.cached(&change.before)?;
            let (before, after) = (fleet.names(&change.before), fleet.names(&change.after));
            let pools = Pools {
                own_before: fleet::owners(d, &before, &all)?,
                own_after: fleet::owners(d, &after, &all)?,
                before,
                after,
            };
            let lfu = ask_backends(fleet, change, scheme_of(d))?;
            fleet.release(&held)?;
            (cached, pools, Some(lfu))
        }
        (Placement::Nginx, _, Some(m)) => {
            let cached = m.cached(&change.before)?;
            let (before, after) = (m.names(&change.before), m.names(&change.after));
            let pools = Pools {
                own_before: nginx::owners(&before, &all)?,
                own_after: nginx::owners(&after, &all)?,
                before,
                after,
            };
            (cached, pools, None)
        }
        _ => bail!("no fleet for {}", placement.name()),
    };
    let moved = pools.moved(&cached);
    // memcached's LRU by Che's approximation too (reported beside the static LFU model, the
    // closer one to its segmented LRU, which takes from Che which keys it held at times).
    let che = (placement == Placement::Nginx)
        .then(|| CheModel::new(&pools, &cached, shape, zipf, steady.miss_share()));
    let model = SteadyModel::new(
        &pools,
        &cached,
        shape,
        zipf,
        steady.miss_share(),
        match placement {
            Placement::Twemproxy(_) => Eviction::Lfu,
            Placement::Nginx => Eviction::Lru,
        },
        che.as_ref().map(|c| c.present_before.as_slice()),
    );
    let p_hat = |r: usize| counts.get(r).copied().unwrap_or(0) as f64 / sent as f64;
    let moved_cached = || {
        cached
            .iter()
            .zip(&moved)
            .filter(|(_, &m)| m)
            .map(|(&r, _)| r)
    };
    let predicted_counts: f64 = moved_cached().map(p_hat).sum();
    let moved_law: Vec<f64> = moved_cached().map(|r| zipf.p(r)).collect();
    let predicted_exact: f64 = moved_law.iter().sum();
    let within = |t: u64| -> f64 {
        moved_law
            .iter()
            .map(|&p| 1.0 - (1.0 - p).powf(t as f64))
            .sum()
    };
    let first_predicted = within(a.interval) / a.interval as f64;
    let predicted_lfu = lfu.map_or(f64::NAN, |l| {
        l.hits_fraction() * (1.0 - probe_before.miss_share())
    });
    // The switch: a new pool, a new proxy; the old one stops.
    let new_proxy = Running::start(fleets, placement, &change.after)?;
    drop(proxy);
    client.con = new_proxy.connect()?;
    let probe = client.send(a.probe, false)?;
    // Read through until the hit rate settles again (the warm-up's rule), at a level of its
    // own: a leave loses a backend's memory, so the fleet settles lower than before.
    // At least as long as the warm-up and 20 intervals: a fleet refilling after a change
    // creeps back slowly enough that two early 5-interval means can agree.
    let (series, settled_after) = until_settled(
        &mut client,
        a.interval,
        a.warmup_min.max(20 * a.interval),
        a.after_max,
    )?;
    let after = series.len() as u64 * a.interval;
    let last10 = last_ten(&series);
    let m_after = last10.miss_share();
    // Recovered: the first interval within one percentage point of the new steady level; the
    // extra misses are those beyond that level until then (the transient), the steady loss
    // (m_after - m) being reported apart.
    let recovered_at = series
        .iter()
        .position(|t| t.miss_share() <= m_after + 0.01)
        .filter(|_| settled_after);
    let recovered_after = recovered_at.map(|i| (i as u64 + 1) * a.interval);
    let cumulative: f64 = series
        .iter()
        .take(recovered_at.map_or(series.len(), |i| i + 1))
        .map(|t| t.misses as f64 - m_after * t.requests() as f64)
        .sum();
    let window = recovered_after.unwrap_or(after);
    let (cumulative_predicted, steady_after_predicted, memory_share) = (
        model.transient_within(window),
        model.after_miss_share,
        model.memory_share,
    );
    drop(new_proxy);
    Ok(Outcome {
        case: change.name,
        placement,
        warmup: sent,
        settled,
        steady,
        cached: cached.len(),
        cached_ranks: cached.clone(),
        predicted_exact,
        predicted_counts,
        predicted_lfu,
        lfu: lfu.unwrap_or_default(),
        moved_keys: moved.iter().filter(|&&x| x).count() as u64,
        probe_before,
        probe,
        first_predicted,
        series,
        before: warm.iter().rev().take(30).rev().copied().collect(),
        recovered_after,
        cumulative,
        cumulative_predicted,
        steady_after_predicted,
        steady_after: m_after,
        settled_after,
        memory_share,
        che: che.map(|c| {
            (
                c.memory_share,
                c.after_miss_share,
                c.transient_within(window),
            )
        }),
    })
}

/// How the backends evict: Redis' `allkeys-lfu` (keys that moved away keep their counters,
/// the hottest of them their memory; a new key enters with a low counter and is evicted
/// first), or memcached's LRU (keys no longer read age out; every miss written pushes the
/// oldest out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Redis' `allkeys-lfu`.
    Lfu,
    /// memcached's (segmented) LRU.
    Lru,
}

/// The backends before and after a change (names) and the owner of every rank of the
/// workload under each (an index into the names).
pub struct Pools {
    /// The backends' names before the change, in the proxy's order.
    pub before: Vec<String>,
    /// And after it.
    pub after: Vec<String>,
    /// The owner of rank `r` before (an index into `before`), for every rank of the workload.
    pub own_before: Vec<Option<usize>>,
    /// And after (into `after`).
    pub own_after: Vec<Option<usize>>,
}

impl Pools {
    /// The bytes ([`cached_bytes`]) of `cached` (ranks) on each backend before the change.
    fn memory_before(&self, cached: &[usize], shape: &Shape) -> Vec<u64> {
        let mut memory = vec![0u64; self.before.len()];
        for &r in cached {
            if let Some(m) = self
                .own_before
                .get(r)
                .copied()
                .flatten()
                .and_then(|b| memory.get_mut(b))
            {
                *m += cached_bytes(shape, r);
            }
        }
        memory
    }

    /// Which of `ranks` change backend (by name).
    fn moved(&self, ranks: &[usize]) -> Vec<bool> {
        let name = |names: &[String], o: &[Option<usize>], r: usize| {
            o.get(r)
                .copied()
                .flatten()
                .and_then(|i| names.get(i))
                .cloned()
        };
        ranks
            .iter()
            .map(|&r| {
                name(&self.before, &self.own_before, r) != name(&self.after, &self.own_after, r)
            })
            .collect()
    }
}

/// Reads through `interval` requests at a time until the hit rate settles (after at least
/// `min` requests and 10 intervals, two successive 5-interval mean miss shares within 0.2
/// percentage points) or `max` requests were sent; returns the intervals and whether it
/// settled.
fn until_settled(
    client: &mut Client,
    interval: u64,
    min: u64,
    max: u64,
) -> Result<(Vec<Tally>, bool)> {
    let mut series: Vec<Tally> = Vec::new();
    let mut sent = 0u64;
    loop {
        series.push(client.send(interval, true)?);
        sent += interval;
        let n = series.len();
        if sent >= min && n >= 10 {
            let mean = |s: &[Tally]| s.iter().map(Tally::miss_share).sum::<f64>() / s.len() as f64;
            let (prev, last) = (mean(&series[n - 10..n - 5]), mean(&series[n - 5..]));
            if (prev - last).abs() < 0.002 {
                return Ok((series, true));
            }
        }
        if sent >= max {
            return Ok((series, false));
        }
    }
}

/// The hits and misses of the last 10 intervals of `series`.
fn last_ten(series: &[Tally]) -> Tally {
    series
        .iter()
        .rev()
        .take(10)
        .fold(Tally::default(), |t, i| Tally {
            hits: t.hits + i.hits,
            misses: t.misses + i.misses,
        })
}

/// Bytes a cached key is taken to use beside its key and value (Redis' per-key overhead,
/// roughly: the dict entry, the object headers, the LFU field, allocator rounding; about
/// memcached's per item too: its header with CAS, the suffix, the slab class's rounding).
/// The models' calibrated memory share absorbs what this misses.
const PER_KEY_OVERHEAD: usize = 64;

/// The bytes rank `r` of the workload takes in a cache: key, value and [`PER_KEY_OVERHEAD`].
fn cached_bytes(shape: &Shape, r: usize) -> u64 {
    (shape.value_len(r) + workload::key(r).len() + PER_KEY_OVERHEAD) as u64
}

/// The steady state of an LFU fleet under the workload, before and after a change, and the
/// transient between them.
///
/// - **What a backend keeps**: the most requested of the keys it owns that fit in its
///   *effective memory* (with `allkeys-lfu` and a workload whose probabilities do not change,
///   LFU converges to the most frequent keys; this is its static form, in place of Che's
///   approximation for LRU). Redis' LFU samples its eviction candidates and counts
///   logarithmically, so it keeps a less ideal set than the most requested keys: the model
///   keeps them in a share of each backend's memory (the same share on every backend),
///   calibrated so that the model's miss share before the change is the measured one. A
///   backend's memory is what its cached keys used before the change (their keys, values
///   and [`PER_KEY_OVERHEAD`]); a joining backend gets the mean.
/// - **Stale copies**: the keys that move away stay where they were; no request reaches them
///   there any more, but their LFU counters decay by one a minute (`lfu-decay-time` 1), so
///   those requested more than the least requested key the backend keeps after the change
///   hold their memory (each backend's threshold found by bisection). Under an LRU
///   ([`Eviction::Lru`], memcached) they age out and hold nothing.
/// - **The transient**: each key the model keeps after the change that it did not keep on the
///   same backend before misses once before it is a steady hit; meanwhile the keys a backend
///   kept before and still owns but does not keep after (the *lost* keys) are not gone at
///   once: they are evicted least requested first as the arriving keys' bytes come in (under
///   an LRU, also the bytes of every miss written that the backend will not keep), and hit
///   until then. Under an LRU a key a backend newly keeps was there part of the time already
///   (Che's `h` before the change), and misses its first read only with `1 - h`. Extra misses
///   within `t` requests: `sum over arriving (1 - h) (1 - (1 - p)^t)`
///   less `sum over lost p * min(t_evicted, t)`.
struct SteadyModel {
    /// The share of each backend's memory the model keeps its keys in (the calibration).
    memory_share: f64,
    /// The predicted miss share after the change: `1 -` the probability of the keys kept.
    after_miss_share: f64,
    /// The keys the model keeps after the change that it did not keep on the same backend
    /// before (moved, or newly fitting): the probability of each, and the share of it still
    /// to arrive (1, or for a key an LRU already held at times, `1 - h` by Che).
    arriving: Vec<(f64, f64)>,
    /// The lost keys: the probability of each and the request (since the switch) by which it
    /// is evicted.
    lost: Vec<(f64, f64)>,
}

impl SteadyModel {
    /// The model of the keys of `zipf` placed by `pools`, whose backends' memory is what
    /// `cached` (ranks cached at the switch) used, calibrated to the measured miss share
    /// `measured_before`, under `eviction`; `present_before` (per rank, the probability it
    /// is cached before, for an LRU by Che) discounts the first miss of a key its backend
    /// newly keeps.
    fn new(
        pools: &Pools,
        cached: &[usize],
        shape: &Shape,
        zipf: &Zipf,
        measured_before: f64,
        eviction: Eviction,
        present_before: Option<&[f64]>,
    ) -> SteadyModel {
        let (before, after) = (&pools.before[..], &pools.after[..]);
        let (own_before, own_after) = (&pools.own_before[..], &pools.own_after[..]);
        let keys = own_before.len();
        let owner = |o: &[Option<usize>], r: usize| o.get(r).copied().flatten();
        let size = |r: usize| cached_bytes(shape, r);
        let memory = pools.memory_before(cached, shape);
        // Ranks are in order of probability: keep each backend's most requested keys that fit.
        let kept = |owners: &[Option<usize>], caps: &[u64]| -> Vec<bool> {
            let mut used = vec![0u64; caps.len()];
            (0..keys)
                .map(|r| {
                    let Some(b) = owner(owners, r) else {
                        return false;
                    };
                    match (used.get_mut(b), caps.get(b)) {
                        (Some(u), Some(&c)) if *u + size(r) <= c => {
                            *u += size(r);
                            true
                        }
                        _ => false,
                    }
                })
                .collect()
        };
        let hit = |k: &[bool]| -> f64 { (0..keys).filter(|&r| k[r]).map(|r| zipf.p(r)).sum() };
        let share_of =
            |s: f64| -> Vec<u64> { memory.iter().map(|&m| (m as f64 * s) as u64).collect() };
        // The effective share: the model's miss share falls as the share grows; bisect.
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..30 {
            let s = (lo + hi) / 2.0;
            if 1.0 - hit(&kept(own_before, &share_of(s))) > measured_before {
                lo = s;
            } else {
                hi = s;
            }
        }
        let memory_share = hi;
        let capacity = share_of(memory_share);
        let mean = capacity.iter().sum::<u64>() / capacity.len().max(1) as u64;
        let kept_before = kept(own_before, &capacity);
        let moved_away: Vec<(usize, usize)> = (0..keys)
            .filter(|&r| kept_before[r])
            .filter_map(|r| {
                let b = owner(own_before, r)?;
                let a = owner(own_after, r);
                (before.get(b) != a.and_then(|i| after.get(i))).then_some((b, r))
            })
            .collect();
        // Each backend of `after` as it was in `before`, if it was.
        let was: Vec<Option<usize>> = after
            .iter()
            .map(|n| before.iter().position(|b| b == n))
            .collect();
        let capacity_with = |threshold: &[f64]| -> Vec<u64> {
            let mut stale = vec![0u64; before.len()];
            for (j, &i) in was.iter().enumerate() {
                let t = threshold.get(j).copied().unwrap_or(0.0);
                for &(b, r) in moved_away.iter().filter(|(b, _)| Some(*b) == i) {
                    if zipf.p(r) > t {
                        if let Some(s) = stale.get_mut(b) {
                            *s += size(r);
                        }
                    }
                }
            }
            was.iter()
                .map(|&i| {
                    i.map_or(mean, |i| {
                        capacity[i].saturating_sub(stale.get(i).copied().unwrap_or(0))
                    })
                })
                .collect()
        };
        // The least requested key a backend keeps falls as its threshold rises (fewer stale
        // copies, more room): bisect each backend's threshold to where the two meet, on a
        // logarithmic scale (the backends are independent: a key has one owner).
        let least_kept = |kept_after: &[bool]| -> Vec<f64> {
            let mut least = vec![1.0f64; after.len()];
            for r in (0..keys).filter(|&r| kept_after[r]) {
                if let Some(l) = owner(own_after, r).and_then(|b| least.get_mut(b)) {
                    *l = l.min(zipf.p(r));
                }
            }
            least
        };
        let (mut lo, mut hi) = (vec![1e-15f64; after.len()], vec![1.0f64; after.len()]);
        for _ in 0..60 {
            let mid: Vec<f64> = lo.iter().zip(&hi).map(|(l, h)| (l * h).sqrt()).collect();
            let least = least_kept(&kept(own_after, &capacity_with(&mid)));
            for (j, (&m, &l)) in mid.iter().zip(&least).enumerate() {
                if l > m {
                    lo[j] = m;
                } else {
                    hi[j] = m;
                }
            }
        }
        // Without stale copies (an LRU lets keys no longer read go), no key stays.
        let threshold = match eviction {
            Eviction::Lfu => hi,
            Eviction::Lru => vec![1.0; after.len()],
        };
        let kept_after = kept(own_after, &capacity_with(&threshold));
        let name = |names: &[String], o: Option<usize>| o.and_then(|i| names.get(i).cloned());
        let stays =
            |r: usize| name(before, owner(own_before, r)) == name(after, owner(own_after, r));
        let arriving: Vec<usize> = (0..keys)
            .filter(|&r| kept_after[r])
            .filter(|&r| !kept_before[r] || !stays(r))
            .collect();
        // The share of each arriving key that is still to arrive: all of a key that moved; of
        // one its backend newly keeps, what an LRU did not hold of it already.
        let missing = |r: usize| -> f64 {
            match present_before {
                Some(h) if stays(r) => 1.0 - h.get(r).copied().unwrap_or(0.0),
                _ => 1.0,
            }
        };
        let mut lost = Vec::new();
        for (j, &i) in was.iter().enumerate() {
            let Some(i) = i else {
                continue;
            };
            lost.extend(eviction_times(
                (0..keys)
                    .filter(|&r| kept_before[r] && owner(own_before, r) == Some(i))
                    .filter_map(|r| {
                        let (p, still) = (zipf.p(r), owner(own_after, r) == Some(j));
                        let t = threshold.get(j).copied().unwrap_or(0.0);
                        // Lost, or moved away and not staying: both make room.
                        (still && !kept_after[r] || !still && p <= t).then_some((p, size(r), still))
                    })
                    .collect(),
                arriving
                    .iter()
                    .filter(|&&r| owner(own_after, r) == Some(j))
                    .map(|&r| (zipf.p(r), (size(r) as f64 * missing(r)) as u64))
                    .collect(),
                capacity.get(i).copied().unwrap_or(0).saturating_sub(
                    (0..keys)
                        .filter(|&r| kept_before[r] && owner(own_before, r) == Some(i))
                        .map(size)
                        .sum(),
                ),
                match eviction {
                    Eviction::Lfu => 0.0,
                    Eviction::Lru => (0..keys)
                        .filter(|&r| !kept_after[r] && owner(own_after, r) == Some(j))
                        .map(|r| zipf.p(r) * size(r) as f64)
                        .sum(),
                },
            ));
        }
        SteadyModel {
            memory_share,
            after_miss_share: 1.0 - hit(&kept_after),
            arriving: arriving.iter().map(|&r| (zipf.p(r), missing(r))).collect(),
            lost,
        }
    }

    /// The transient extra misses expected within `t` requests after the switch: the
    /// arriving keys requested at least once, `sum (1 - (1 - p)^t)`, less the hits of the
    /// lost keys before they are evicted, `sum p * min(t_evicted, t)`.
    fn transient_within(&self, t: u64) -> f64 {
        let t = t as f64;
        let arriving: f64 = self
            .arriving
            .iter()
            .map(|&(p, m)| m * (1.0 - (1.0 - p).powf(t)))
            .sum();
        let lost: f64 = self.lost.iter().map(|&(p, e)| p * e.min(t)).sum();
        arriving - lost
    }
}

/// When a backend evicts the keys that make room: `leaving` (probability, bytes, lost) go
/// least requested first, each once the bytes of `arriving` (probability, bytes) expected
/// within `t` requests, `sum bytes * (1 - (1 - p)^t)`, plus `churn` bytes a request (an LRU
/// also makes room for every miss it will not keep), pass `room` plus the bytes evicted
/// before it and its own. Returns (probability, request of eviction) of the lost ones, the
/// request on a geometric grid (4% steps; infinite if never).
fn eviction_times(
    mut leaving: Vec<(f64, u64, bool)>,
    arriving: Vec<(f64, u64)>,
    room: u64,
    churn: f64,
) -> Vec<(f64, f64)> {
    leaving.sort_by(|a, b| a.0.total_cmp(&b.0));
    let grid: Vec<(f64, f64)> = (0..600)
        .map(|k| {
            let t = 1.04f64.powi(k);
            let bytes = arriving
                .iter()
                .map(|&(p, s)| s as f64 * (1.0 - (1.0 - p).powf(t)))
                .sum::<f64>()
                + churn * t;
            (t, bytes)
        })
        .collect();
    let mut needed = room as f64;
    let mut at = grid.iter().peekable();
    let mut times = Vec::new();
    for (p, bytes, lost) in leaving {
        needed += bytes as f64;
        while at.peek().is_some_and(|&&(_, b)| b < needed) {
            at.next();
        }
        if lost {
            times.push((p, at.peek().map_or(f64::INFINITY, |&&(t, _)| t)));
        }
    }
    times
}

/// `text`, or `-` where the LFU side was not asked (`lfu` is NaN: memcached backends).
fn or_dash(lfu: f64, text: String) -> String {
    if lfu.is_nan() {
        "-".into()
    } else {
        text
    }
}

/// The relative error of `predicted` against `measured` (0 when both are 0).
fn relative(predicted: f64, measured: f64) -> f64 {
    if measured == 0.0 {
        if predicted == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (predicted - measured) / measured
    }
}

fn publish(
    g: &Global,
    a: &Args,
    outcomes: &[Outcome],
    slot_side: &[(&str, SlotCost)],
) -> Result<()> {
    let mut t = Table::new(&[
        "change",
        "placement",
        "warm-up requests",
        "steady hit rate",
        "cached keys",
        "moved cached keys",
        "instantaneous extra miss share: predicted (exact)",
        "predicted (counts)",
        "predicted (LFU)",
        "measured",
        "standard error",
        "exact error",
        "within 2 SE",
        "counts error",
        "LFU error",
        "first interval: predicted",
        "first interval: measured",
        "model's effective memory share",
        "steady miss share after: predicted",
        "steady miss share after: measured",
        "steady after: error",
        "cumulative extra misses: predicted",
        "cumulative extra misses: measured",
        "cumulative: error",
        "LRU (Che) model: steady after",
        "LRU (Che) model: cumulative",
        "requests to recover",
        "moved bytes (RING.MOVES)",
    ]);
    for o in outcomes {
        let (measured, se) = o.measured();
        let first = o
            .series
            .first()
            .map_or(0.0, |f| f.miss_share() - o.steady_share());
        t.push(vec![
            o.case.to_string(),
            o.placement.name(),
            o.warmup.to_string(),
            fixed(1.0 - o.steady_share(), 4),
            o.cached.to_string(),
            match o.placement {
                Placement::Twemproxy(_) => {
                    format!("{} ({} by RING.MOVES)", o.moved_keys, o.lfu.moved)
                }
                Placement::Nginx => o.moved_keys.to_string(),
            },
            fixed(o.predicted_exact, 4),
            fixed(o.predicted_counts, 4),
            or_dash(o.predicted_lfu, fixed(o.predicted_lfu, 4)),
            fixed(measured, 4),
            fixed(se, 4),
            format!("{:+.1}%", 100.0 * relative(o.predicted_exact, measured)),
            if (o.predicted_exact - measured).abs() <= 2.0 * se {
                "yes".into()
            } else {
                "no".into()
            },
            format!("{:+.1}%", 100.0 * relative(o.predicted_counts, measured)),
            or_dash(
                o.predicted_lfu,
                format!("{:+.1}%", 100.0 * relative(o.predicted_lfu, measured)),
            ),
            fixed(o.first_predicted, 4),
            fixed(first, 4),
            fixed(o.memory_share, 3),
            fixed(o.steady_after_predicted, 4),
            if o.settled_after {
                fixed(o.steady_after, 4)
            } else {
                format!("{} (not settled)", fixed(o.steady_after, 4))
            },
            format!(
                "{:+.1}%",
                100.0 * relative(o.steady_after_predicted, o.steady_after)
            ),
            fixed(o.cumulative_predicted, 0),
            fixed(o.cumulative, 0),
            format!(
                "{:+.1}%",
                100.0 * relative(o.cumulative_predicted, o.cumulative)
            ),
            o.che.map_or("-".into(), |(share, after, _)| {
                format!(
                    "{} ({:+.1}%; memory share {})",
                    fixed(after, 4),
                    100.0 * relative(after, o.steady_after),
                    fixed(share, 3)
                )
            }),
            o.che.map_or("-".into(), |(_, _, t)| {
                format!(
                    "{} ({:+.1}%)",
                    fixed(t, 0),
                    100.0 * relative(t, o.cumulative)
                )
            }),
            o.recovered_after.map_or_else(
                || format!("not settled in {}", a.after_max),
                |r| r.to_string(),
            ),
            or_dash(o.predicted_lfu, o.lfu.moved_bytes.to_string()),
        ]);
    }
    let mut c = Table::new(&[
        "change",
        "placement",
        "keys",
        "misses",
        "keys migrated: predicted",
        "keys migrated: real",
        "bytes migrated: predicted",
        "bytes migrated: real",
        "slots moved",
        "rebalance seconds",
        "longest PING wait, ms",
    ]);
    for (case, s) in slot_side {
        c.push(vec![
            case.to_string(),
            "Redis Cluster slot table".into(),
            s.keys.to_string(),
            "0".into(),
            s.predicted_keys.to_string(),
            s.moved_keys.to_string(),
            s.predicted_bytes.to_string(),
            s.moved_bytes.to_string(),
            s.slots_moved.to_string(),
            fixed(s.seconds, 2),
            fixed(1000.0 * s.longest_ping, 1),
        ]);
    }
    // Side by side: what each placement costs for the same change.
    let mut side = Table::new(&[
        "change",
        "placement",
        "requests that miss at once (beyond those just before)",
        "extra misses until recovered",
        "keys moved",
        "bytes moved",
        "migration seconds",
        "longest PING wait, ms",
    ]);
    let mut cases: Vec<&str> = outcomes.iter().map(|o| o.case).collect();
    cases.dedup();
    for case in cases {
        for o in outcomes.iter().filter(|o| o.case == case) {
            side.push(vec![
                case.to_string(),
                o.placement.name(),
                format!("{:.1}%", 100.0 * o.measured().0),
                match o.recovered_after {
                    Some(r) => format!("{:.0} (in {r} requests)", o.cumulative),
                    None => format!(
                        "{:.0} (not recovered in {after})",
                        o.cumulative,
                        after = a.after_max
                    ),
                },
                o.moved_keys.to_string(),
                or_dash(o.predicted_lfu, o.lfu.moved_bytes.to_string()),
                "-".into(),
                "-".into(),
            ]);
        }
        for (_, s) in slot_side.iter().filter(|(c, _)| *c == case) {
            side.push(vec![
                case.to_string(),
                "Redis Cluster slot table".into(),
                "0%".into(),
                "0".into(),
                s.moved_keys.to_string(),
                s.moved_bytes.to_string(),
                fixed(s.seconds, 2),
                fixed(1000.0 * s.longest_ping, 1),
            ]);
        }
    }
    let unsettled: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.settled)
        .map(|o| format!("{} {}", o.case, o.placement.name()))
        .collect();
    let mut md = format!(
        "## What a change costs a cache: {} backends, {} keys, Zipf s = {}, values {}-{} B, {} MiB a backend, {}\n\n\
         Instantaneous extra miss share: the share of requests that miss right after the switch beyond those that missed \
         right before it (two probes of {} requests that refill nothing), predicted exactly from the workload's probabilities \
         of the cached keys that move, from the warm-up's counts of them, and (redis-server backends) from their LFU counters \
         (`RING.MOVES ... WEIGH HITS`). Intervals of {} requests.\n\n{}\n### Predicted against measured\n\n{}",
        a.backends,
        a.keys,
        a.zipf,
        a.value_min,
        a.value_max,
        a.maxmemory_mb,
        {
            let mut kinds = Vec::new();
            if outcomes.iter().any(|o| o.placement != Placement::Nginx) {
                kinds.push("redis-server with LFU eviction behind twemproxy");
            }
            if outcomes.iter().any(|o| o.placement == Placement::Nginx) {
                kinds.push("memcached (LRU) behind nginx");
            }
            kinds.join("; ")
        },
        a.probe,
        a.interval,
        side.markdown(),
        t.markdown()
    );
    if !unsettled.is_empty() {
        md.push_str(&format!(
            "\nThe hit rate still moved at the end of the warm-up ({} requests) in: {}.\n",
            a.warmup_max,
            unsettled.join(", ")
        ));
    }
    if !slot_side.is_empty() {
        md.push_str(&format!(
            "\n### The same keys on a Redis Cluster of {} masters\n\nNo request misses; the cost is the migration.\n\n{}",
            a.backends,
            c.markdown()
        ));
    }
    report::write(&g.out, &format!("{}.csv", a.name), &t.csv())?;
    if !slot_side.is_empty() {
        report::write(&g.out, &format!("{}-cluster.csv", a.name), &c.csv())?;
    }
    chart(g, a, outcomes)?;
    g.publish(&a.name, &md)
}

/// Hit rate per interval, before and after the switch, per distribution, one panel per
/// change, with each distribution's predicted level right after the switch.
fn chart(g: &Global, a: &Args, outcomes: &[Outcome]) -> Result<()> {
    let mut cases: Vec<&str> = outcomes.iter().map(|o| o.case).collect();
    cases.dedup();
    let k = a.interval as f64 / 1000.0;
    let mut panels = Vec::new();
    let titles: Vec<String> = cases
        .iter()
        .map(|c| {
            format!(
                "one backend {}s: hit rate (higher is better)",
                if *c == "join" { "join" } else { "leave" }
            )
        })
        .collect();
    for (case, title) in cases.iter().zip(&titles) {
        let mut series = Vec::new();
        for (i, o) in outcomes.iter().filter(|o| o.case == *case).enumerate() {
            let before = o.before.len() as f64;
            let mut points: Vec<(f64, f64)> = o
                .before
                .iter()
                .enumerate()
                .map(|(j, t)| ((j as f64 - before + 1.0) * k, 1.0 - t.miss_share()))
                .collect();
            points.extend(
                o.series
                    .iter()
                    .enumerate()
                    .map(|(j, t)| ((j as f64 + 1.0) * k, 1.0 - t.miss_share())),
            );
            let end = points.last().map_or(0.0, |p| p.0);
            let level = 1.0 - o.probe_before.miss_share() - o.predicted_exact;
            series.push(Series::line(
                format!("{} (measured)", o.placement.name()),
                points,
                i,
            ));
            let mut predicted = Series::line(
                format!("{}: predicted at the switch", o.placement.short()),
                vec![(0.0, level), (end.min(5.0 * k), level)],
                i,
            );
            predicted.dashed = true;
            series.push(predicted);
            let mut probe = Series::line(
                format!("{}: measured at the switch (probe)", o.placement.short()),
                vec![(0.0, 1.0 - o.probe.miss_share())],
                i,
            );
            probe.markers_only = true;
            series.push(probe);
        }
        panels.push(Panel {
            chart: Chart {
                title,
                x_label: "thousands of requests since the switch",
                y_label: "hit rate",
                x_log: false,
                y_log: false,
                x_names: Vec::new(),
                legend: SeriesLabelPosition::LowerRight,
            },
            series,
            width: 1,
        });
    }
    let path = g.out.join(format!("{}.svg", a.name));
    std::fs::create_dir_all(&g.out)?;
    report::svg_panels(
        &path,
        "A cache fleet behind a proxy: one backend changes",
        panels,
    )
}

#[cfg(test)]
mod tests {
    use super::eviction_times;

    #[test]
    fn evictions_go_least_requested_first_as_bytes_arrive() {
        // Two arriving keys of 100 bytes, one read every other request, one every 10000th;
        // three leaving keys of 100 bytes, two of them lost. No room: the least requested
        // leaving key goes with the first arrival, the next with the second.
        let arriving = vec![(0.5, 100), (1e-4, 100)];
        let leaving = vec![(0.01, 100, true), (0.001, 100, false), (0.1, 100, true)];
        let times = eviction_times(leaving, arriving, 0, 0.0);
        assert_eq!(times.len(), 2, "only the lost keys are returned");
        // 0.001 (not lost) is evicted first; 0.01 needs 200 bytes in: the hot key and all of
        // the cold one (its last bytes only once 1 - (1 - p)^t rounds to 1, about 4e5
        // requests); 0.1 needs 300 bytes, which never arrive.
        let (p, t) = times[0];
        assert_eq!(p, 0.01);
        assert!(t > 1000.0 && t < 1e6, "{t}");
        assert_eq!(times[1], (0.1, f64::INFINITY));
        // With room for one key, every eviction comes one arrival later.
        let later = eviction_times(
            vec![(0.01, 100, true)],
            vec![(0.5, 100), (1e-4, 100)],
            100,
            0.0,
        );
        assert!(later[0].1 > 1000.0);
        let sooner = eviction_times(
            vec![(0.01, 100, true)],
            vec![(0.5, 100), (1e-4, 100)],
            0,
            0.0,
        );
        // An LRU's churn (1 byte a request here) evicts a key no arrival would push out soon.
        let slow = eviction_times(vec![(0.01, 100, true)], vec![(1e-4, 100)], 0, 0.0);
        let churned = eviction_times(vec![(0.01, 100, true)], vec![(1e-4, 100)], 0, 1.0);
        assert!(slow[0].1 > 10_000.0, "{slow:?}");
        assert!(churned[0].1 > 50.0 && churned[0].1 < 200.0, "{churned:?}");
        assert!(sooner[0].1 < 100.0, "{:?}", sooner);
    }
}
