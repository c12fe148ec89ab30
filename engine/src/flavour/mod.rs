//! The ring flavours: how node points and member hashes are computed.
//!
//! - `Native`: the strong native hash, [`native_hash`]: FNV-1a-64 (the FNV reference, 64-bit
//!   offset basis and prime) followed by MurmurHash3's 64-bit finalizer `fmix64` (Austin
//!   Appleby, `MurmurHash3.cpp`, public domain), which spreads every input bit over the whole
//!   result. Point `k` (1-based) of a node is the hash of the label `node#k`, the form of the
//!   seed article (`127.0.0.1#1`, `127.0.0.1#2`); member hash = the hash of the member.
//! - `NativeFnv` (`native-fnv`): ringslot 0.1's native rule, kept so that rings saved by it
//!   keep their placement and so that users can see what a weak hash does: plain FNV-1a-64 of
//!   the label decimal virtual-node index + `#` + `node` + `#` + the same decimal index
//!   (0-based); member hash = plain FNV-1a-64 of the member. FNV-1a's last bytes move only the
//!   low and middle bits of the hash (each byte is followed by a single multiply by the prime
//!   `2^40 + 0x1b3`), so labels that differ only at their end land next to each other on the
//!   circle; the label puts the index at both ends to keep points apart (BENCHMARKS.md,
//!   "Figures behind the code", gives the balance of each label). Members that differ only at
//!   their end (`key:0`, `key:1`, ...) still land in small clusters, so a sample of them
//!   estimates moved fractions less precisely than its size suggests.
//! - `Ketama`: libmemcached's weighted ketama (`update_continuum()` in libmemcached
//!   `hosts.cc`, `MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED`): MD5 of `host-i` (port 11211 or none) or
//!   `host:port-i`, four little-endian u32 points per digest; member hash = first little-endian
//!   u32 of MD5(member).
//! - `Groupcache`: groupcache `consistenthash`: CRC32-IEEE of decimal `i` followed by the node
//!   name; member hash = CRC32-IEEE of the member.
//!
//! The rings of proxies and client libraries, each as the implementation named places keys
//! (checked key for key against the real one: `tests/compat_real.rs`):
//! - `Nginx`: nginx `hash $key consistent` (`ngx_http_upstream_init_chash()` in
//!   `src/http/modules/ngx_http_upstream_hash_module.c`, nginx 1.22): `160 x weight` points; the
//!   server text split into host and port at its last `:` when only digits follow (a `unix:`
//!   prefix leaves the path as host and no port); point `j` = CRC32-IEEE of host, one zero
//!   byte, port and point `j - 1` as four little-endian bytes (0 before the first); member hash
//!   = CRC32-IEEE of the key; the first point at or after it, wrapping. Equal points: the
//!   server declared first keeps it (glibc's `qsort` is a stable merge sort; nginx then keeps
//!   the first of equal points).
//! - `Predis`: Predis 1.1 `Cluster\Distributor\HashRing`: `round(weight / total x nodes x 128)`
//!   points (`VNODES` sets Predis's `$replicas`), point `i` = CRC32 of `node:i`; member hash =
//!   CRC32 of the key's hash tag (Predis always extracts it, as Redis does); the **last** point
//!   at or before the hash, wrapping to the last point; equal points go to the node added last.
//! - `PredisKetama`: Predis 1.1 `KetamaRing`: `floor(weight / total x nodes x 40)` MD5 digests
//!   of `node-i`, four little-endian points each; member hash = the first little-endian u32 of
//!   MD5 of the key's hash tag; the first point at or after it; equal points to the node added
//!   last.
//! - `RedisRb`: redis-rb 4.8 `Redis::HashRing` under `Redis::Distributed`: 160 points (`VNODES`
//!   sets its `replicas`) of CRC32 of `id:i`, where the id is the client's `redis://host:port/0`
//!   (a name with `://` is taken as the id itself, a name starting with `/` as a unix socket,
//!   `unix:///path/0`); member hash = CRC32 of the tag matched by `/^\{(.+?)\}/` (redis-rb's
//!   default, not Redis's rule), else of the whole key; the last point at or before the hash,
//!   wrapping to the last; equal points to the node added last; no weights.
//!
//! - `Haproxy`, `HaproxyCrc32`: HAProxy 2.6 `hash-type consistent` (`src/lb_chash.c`):
//!   `16 x weight` points keyed `puid x 4096 + i` through `full_hash()`, where `puid` is the
//!   server's place in the backend from 1 (so points follow a node's position, not its name);
//!   member hash = `full_hash(sdbm(key))` by default, plain CRC32 with `consistent crc32`; the
//!   owner is the nearer of the first point at or after the hash and the point before it, the
//!   one before winning a tie (`chash_get_server_hash()`).
//! - `EnvoyRing`, `EnvoyRedis`: Envoy `ring_hash` (`ring_hash_lb.cc`): the ring's size shared
//!   out by normalized weight ([`envoy_point_counts`]), point `i` of a host = xxHash64 of
//!   `<address>_<i>`; first point at or after the hash, wrapping. `envoy-ring` hashes a key with
//!   xxHash64 (a header or cookie hash policy); `envoy-redis` with Envoy's `murmurHash2`
//!   (libstdc++'s `_Hash_bytes`, which is [`murmur_hash_64a`]), as its `redis_proxy` does for
//!   an upstream of plain Redis servers. Checked against vectors computed from the source with independent hash
//!   libraries (`engine/tests/vectors/compat_published.tsv`): Envoy does not install here.
//!
//! The rings that take the last point at or before a hash keep their points on the mirrored
//! circle (`2^32 - 1 - x`, [`Flavour::on_circle`]), where that point is the first at or after
//! the mirrored hash: every lookup, share and what-if of the ring is then the one successor
//! rule, and arcs keep their lengths.
//!
//! The hashes and helpers of each implementation copied are in a file of their own, named for
//! it (`ketama.rs`, `nginx.rs`, `haproxy.rs`, `mcrouter.rs`, `envoy.rs`, ...; `murmur2.rs`,
//! `murmur3.rs`, `fnv.rs` and `crc.rs` for hashes several flavours share; `native.rs` for
//! ringslot's own) and re-exported here.

mod crc;
mod envoy;
mod fnv;
mod go_redis;
mod groupcache;
mod haproxy;
mod ketama;
mod mcrouter;
mod murmur2;
mod murmur3;
mod native;
mod nginx;
mod predis;
mod python_memcached;
mod redis_rb;

pub use self::fnv::fnv1a64;
pub use envoy::{envoy_point_counts, ENVOY_HASH_SEED, ENVOY_MIN_RING_SIZE};
pub use go_redis::xorshift_mult64;
pub use groupcache::groupcache_label;
pub use haproxy::{haproxy_full_hash, sdbm, HAPROXY_POINTS_PER_WEIGHT};
pub use ketama::{
    ketama_host, ketama_label, ketama_point_counts, md5_le_u32, KETAMA_DEFAULT_PORT,
    KETAMA_POINTS_PER_SERVER,
};
pub use mcrouter::{furc_hash, mcrouter_routing_key, MCROUTER_FURC_SEED};
pub use murmur2::murmur_hash_64a;
pub use murmur3::{fmix64, murmur3_32};
pub use native::{native_fnv_label, native_hash, native_label};
pub use nginx::nginx_host_port;
pub use predis::predis_point_counts;
pub use python_memcached::python_memcached_hash;
pub use redis_rb::redis_rb_id;

use self::crc::CrcSpan;
use self::fnv::{fnv_state, FnvSpan, FNV_OFFSET};
use haproxy::HAPROXY_POINT_KEYS;
use ketama::push_md5_points;
use md5::{Digest, Md5};
use xxhash_rust::xxh64::xxh64;

/// A ring flavour. Points of every flavour are stored as `u64`; ketama and groupcache points
/// use only the low 32 bits (their hash space is `2^32`, native's is `2^64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavour {
    /// FNV-1a-64 + fmix64 points, ties broken by node name (bytewise, lower wins).
    Native,
    /// libmemcached weighted ketama; ties broken by server order, as libmemcached sorts them.
    Ketama,
    /// groupcache consistenthash; ties broken by node name (groupcache lets the last-added
    /// node win a collided point, which would make the ring depend on insertion order).
    Groupcache,
    /// ringslot 0.1's native rule: plain FNV-1a-64 points and members, ties by node name.
    NativeFnv,
    /// nginx `hash $key consistent`.
    Nginx,
    /// Predis `HashRing`.
    Predis,
    /// Predis `KetamaRing`.
    PredisKetama,
    /// redis-rb `Redis::Distributed`'s `HashRing`.
    RedisRb,
    /// HAProxy `hash-type consistent` (sdbm and avalanche).
    Haproxy,
    /// HAProxy `hash-type consistent crc32` (no avalanche).
    HaproxyCrc32,
    /// Envoy `ring_hash` with xxHash64 (its default), keys hashed with xxHash64.
    EnvoyRing,
    /// Envoy `redis_proxy` in front of a `ring_hash` cluster of plain Redis servers: keys
    /// hashed with Envoy's `murmurHash2`.
    EnvoyRedis,
    /// python-memcached's `Client`: modula over CRC32's bits 16-30, servers repeated by weight.
    PythonMemcached,
    /// go-redis v9 `Ring`: rendezvous over xxHash64 (dgryski/go-rendezvous).
    GoRedisRing,
    /// mcrouter `Ch3HashFunc`: furc_hash, an index into the server list.
    McrouterCh3,
    /// Envoy `maglev`: a 65537-entry table.
    EnvoyMaglev,
    /// pymemcache `HashClient`: rendezvous over murmur3_32 of `node-key`.
    Pymemcache,
}

/// How a flavour finds a key's owner among the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Points on a circle ([`Lookup`]).
    Ring,
    /// A list of the nodes, each repeated by its weight, indexed by the key hash modulo its
    /// length (python-memcached).
    Modula,
    /// The node whose score of the key hash mixed with the node's hash is highest (go-redis).
    Rendezvous,
    /// An index into the node list computed from the key hash (mcrouter's furc_hash).
    Index,
    /// A lookup table filled by the nodes' permutations (Envoy's Maglev).
    Table,
    /// The node whose hash of `node-key` is highest: the key itself, not one hash of it, is
    /// scored with each node (pymemcache).
    KeyedRendezvous,
}

/// Which point of the ring owns a member's hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The first point at or after the hash, wrapping to the first (ketama, nginx, Karger).
    Successor,
    /// The last point at or before the hash, wrapping to the last (Predis `HashRing`,
    /// redis-rb): kept as [`Lookup::Successor`] on the mirrored circle.
    Predecessor,
    /// The closer of the first point at or after the hash and the point before that one,
    /// distances measured around the circle, the point before winning a tie (HAProxy
    /// `chash_get_server_hash()`).
    Nearest,
}

/// Which node owns a point that several nodes have at the same hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ties {
    /// The node whose name sorts first (bytewise), whatever the order of the nodes.
    Name,
    /// The node that comes first in the ring's node order (declared or added first).
    First,
    /// The node that comes last in the ring's node order (a later point overwrites an
    /// earlier one, as in a PHP or Ruby hash keyed by the point).
    Last,
}

/// Which bytes of a member are hashed when the ring hashes by hash tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagRule {
    /// Redis Cluster's: between the first `{` and the first `}` after it, when not empty.
    Redis,
    /// redis-rb's default `/^\{(.+?)\}/`: a `{` at the start of the key or of a line, then the
    /// shortest run of at least one byte other than a newline up to a `}`.
    LeadingBrace,
}

impl Flavour {
    /// All flavours, in the order they are documented.
    pub const ALL: [Flavour; 17] = [
        Flavour::Native,
        Flavour::Ketama,
        Flavour::Groupcache,
        Flavour::NativeFnv,
        Flavour::Nginx,
        Flavour::Predis,
        Flavour::PredisKetama,
        Flavour::RedisRb,
        Flavour::Haproxy,
        Flavour::HaproxyCrc32,
        Flavour::EnvoyRing,
        Flavour::EnvoyRedis,
        Flavour::PythonMemcached,
        Flavour::GoRedisRing,
        Flavour::McrouterCh3,
        Flavour::EnvoyMaglev,
        Flavour::Pymemcache,
    ];

    /// The flavours whose rule is a ring of points ([`Rule::Ring`]), in [`Flavour::ALL`]
    /// order.
    pub fn rings() -> impl Iterator<Item = Flavour> {
        Flavour::ALL.into_iter().filter(|f| f.rule() == Rule::Ring)
    }

    /// The flavour's name as `RING.INFO` shows it and `COMPAT` takes it.
    pub const fn name(self) -> &'static str {
        match self {
            Flavour::Native => "native",
            Flavour::Ketama => "ketama",
            Flavour::Groupcache => "groupcache",
            Flavour::NativeFnv => "native-fnv",
            Flavour::Nginx => "nginx",
            Flavour::Predis => "predis",
            Flavour::PredisKetama => "predis-ketama",
            Flavour::RedisRb => "redis-rb",
            Flavour::Haproxy => "haproxy",
            Flavour::HaproxyCrc32 => "haproxy-crc32",
            Flavour::EnvoyRing => "envoy-ring",
            Flavour::EnvoyRedis => "envoy-redis",
            Flavour::PythonMemcached => "python-memcached",
            Flavour::GoRedisRing => "go-redis-ring",
            Flavour::McrouterCh3 => "mcrouter-ch3",
            Flavour::EnvoyMaglev => "envoy-maglev",
            Flavour::Pymemcache => "pymemcache",
        }
    }

    /// The flavour named `name` (ASCII case-insensitive), `None` for an unknown name.
    pub fn from_name(name: &[u8]) -> Option<Flavour> {
        Flavour::ALL
            .into_iter()
            .find(|f| f.name().as_bytes().eq_ignore_ascii_case(name))
    }

    /// The flavour's code in the RDB encoding of a ring (encoding version 2): 0 native,
    /// 1 ketama, 2 groupcache, 3 native-fnv, 4 nginx, 5 predis, 6 predis-ketama, 7 redis-rb,
    /// 8 haproxy, 9 haproxy-crc32, 10 envoy-ring, 11 envoy-redis, 12 python-memcached,
    /// 13 go-redis-ring, 14 mcrouter-ch3, 15 envoy-maglev, 16 pymemcache.
    /// A code never changes meaning: a new placement is a new code.
    pub fn code(self) -> u64 {
        match self {
            Flavour::Native => 0,
            Flavour::Ketama => 1,
            Flavour::Groupcache => 2,
            Flavour::NativeFnv => 3,
            Flavour::Nginx => 4,
            Flavour::Predis => 5,
            Flavour::PredisKetama => 6,
            Flavour::RedisRb => 7,
            Flavour::Haproxy => 8,
            Flavour::HaproxyCrc32 => 9,
            Flavour::EnvoyRing => 10,
            Flavour::EnvoyRedis => 11,
            Flavour::PythonMemcached => 12,
            Flavour::GoRedisRing => 13,
            Flavour::McrouterCh3 => 14,
            Flavour::EnvoyMaglev => 15,
            Flavour::Pymemcache => 16,
        }
    }

    /// The flavour of RDB code `code` (see [`Flavour::code`]), `None` for an unknown code.
    pub fn from_code(code: u64) -> Option<Flavour> {
        Flavour::ALL.into_iter().find(|f| f.code() == code)
    }

    /// The flavour of code `code` in a payload of encoding version 1 (ringslot 0.1), whose
    /// code 0 was the native rule of that release, now `native-fnv`: a ring saved by 0.1
    /// loads with exactly the placement it had. `None` for an unknown code.
    pub fn from_code_v1(code: u64) -> Option<Flavour> {
        match code {
            0 => Some(Flavour::NativeFnv),
            1 => Some(Flavour::Ketama),
            2 => Some(Flavour::Groupcache),
            _ => None,
        }
    }

    /// Virtual nodes per unit of weight when `VNODES` is not given: 160 (native; ketama's,
    /// nginx's and Predis `KetamaRing`'s fixed 160 per equal share; redis-rb's
    /// `POINTS_PER_SERVER`), 50 for groupcache (its tests' replica count), 128 for Predis
    /// (`HashRing::DEFAULT_REPLICAS`), 16 for HAProxy (`BE_WEIGHT_SCALE`), and for Envoy its
    /// `minimum_ring_size`, 1024 (not per node: the ring's size); 1, unused, for the flavours
    /// without points ([`Rule`]).
    pub const fn default_vnodes(self) -> u32 {
        match self {
            Flavour::Native
            | Flavour::NativeFnv
            | Flavour::Ketama
            | Flavour::Nginx
            | Flavour::PredisKetama
            | Flavour::RedisRb => KETAMA_POINTS_PER_SERVER,
            Flavour::Groupcache => 50,
            Flavour::Predis => 128,
            Flavour::Haproxy | Flavour::HaproxyCrc32 => HAPROXY_POINTS_PER_WEIGHT,
            Flavour::EnvoyRing | Flavour::EnvoyRedis => ENVOY_MIN_RING_SIZE,
            Flavour::PythonMemcached
            | Flavour::GoRedisRing
            | Flavour::McrouterCh3
            | Flavour::EnvoyMaglev
            | Flavour::Pymemcache => 1,
        }
    }

    /// Whether the flavour fixes the points per node, so that `VNODES` cannot be set (ketama,
    /// nginx, Predis `KetamaRing` and HAProxy have no setting for it).
    pub fn fixes_vnodes(self) -> bool {
        matches!(
            self,
            Flavour::Ketama
                | Flavour::Nginx
                | Flavour::PredisKetama
                | Flavour::Haproxy
                | Flavour::HaproxyCrc32
                | Flavour::EnvoyRing
                | Flavour::EnvoyRedis
        ) || self.rule() != Rule::Ring
    }

    /// How the flavour finds a key's owner (see [`Rule`]).
    pub fn rule(self) -> Rule {
        match self {
            Flavour::PythonMemcached => Rule::Modula,
            Flavour::GoRedisRing => Rule::Rendezvous,
            Flavour::McrouterCh3 => Rule::Index,
            Flavour::EnvoyMaglev => Rule::Table,
            Flavour::Pymemcache => Rule::KeyedRendezvous,
            _ => Rule::Ring,
        }
    }

    /// Whether the share of the hash space each node owns, and the share a change moves, are
    /// exact: for every ring, and for modula and Maglev (counted over their table); estimated
    /// from 65536 probes for rendezvous and furc_hash, which have no closed form.
    pub fn exact_shares(self) -> bool {
        !matches!(
            self.rule(),
            Rule::Rendezvous | Rule::Index | Rule::KeyedRendezvous
        )
    }

    /// The part of a key the implementation routes by, before any hash tag: mcrouter drops a
    /// leading `/region/cluster/` and everything from `|#|` (`Keys::update()` in
    /// `mcrouter/lib/Keys.cpp`); every other flavour takes the whole key.
    pub fn routing_key(self, key: &[u8]) -> &[u8] {
        if !self.routes_by_part() {
            return key;
        }
        mcrouter_routing_key(key)
    }

    /// Whether [`Flavour::routing_key`] may take less than the whole key (mcrouter).
    pub fn routes_by_part(self) -> bool {
        self == Flavour::McrouterCh3
    }

    /// Whether a node's points follow from its position in the node order rather than its
    /// name (HAProxy keys them by the server's `puid`, its place in the backend counting from
    /// 1): a node before it leaving moves every point of it.
    pub fn points_by_position(self) -> bool {
        matches!(self, Flavour::Haproxy | Flavour::HaproxyCrc32)
    }

    /// Whether a node's point count depends on every node's weight and on the node count
    /// (ketama and Predis scale each node's share of `nodes x points`; Envoy shares out one
    /// ring size), not on its own weight alone.
    pub fn counts_follow_shares(self) -> bool {
        matches!(
            self,
            Flavour::Ketama
                | Flavour::Predis
                | Flavour::PredisKetama
                | Flavour::EnvoyRing
                | Flavour::EnvoyRedis
        )
    }

    /// Whether the order of the nodes changes the ring beyond ties: HAProxy keys points by
    /// position, Envoy shares its ring out with running totals in host order.
    pub fn placement_follows_order(self) -> bool {
        self.points_by_position() || matches!(self, Flavour::EnvoyRing | Flavour::EnvoyRedis)
    }

    /// The largest weight the implementation takes: HAProxy's 256 (`SRV_UWGHT_MAX`: past it a
    /// server's point keys, `puid x 4096 + i`, would run into the next server's), else
    /// `None` (ringslot's own limit).
    pub fn max_weight(self) -> Option<u32> {
        matches!(self, Flavour::Haproxy | Flavour::HaproxyCrc32).then_some(256)
    }

    /// Whether the flavour takes node weights (redis-rb's ring, go-redis's `Ring`, mcrouter's
    /// `Ch3` and pymemcache's `HashClient` have none).
    pub fn takes_weights(self) -> bool {
        !matches!(
            self,
            Flavour::RedisRb | Flavour::GoRedisRing | Flavour::McrouterCh3 | Flavour::Pymemcache
        )
    }

    /// Points each node has for these weights, in order, as the implementation counts them:
    /// `vnodes x weight` (native, native-fnv, groupcache; nginx with its fixed 160),
    /// libmemcached's weighted counts (ketama, [`ketama_point_counts`]), Predis's rounded and
    /// floored shares ([`predis_point_counts`]), `vnodes` whatever the weight (redis-rb).
    /// Units: points.
    pub fn point_counts(self, vnodes: u32, weights: &[u32]) -> Vec<u64> {
        match self {
            Flavour::Ketama => ketama_point_counts(weights)
                .into_iter()
                .map(u64::from)
                .collect(),
            Flavour::Predis | Flavour::PredisKetama => predis_point_counts(self, vnodes, weights),
            Flavour::RedisRb => vec![u64::from(vnodes); weights.len()],
            Flavour::EnvoyRing | Flavour::EnvoyRedis => envoy_point_counts(weights),
            Flavour::PythonMemcached
            | Flavour::GoRedisRing
            | Flavour::McrouterCh3
            | Flavour::EnvoyMaglev
            | Flavour::Pymemcache => vec![0; weights.len()],
            Flavour::Native
            | Flavour::NativeFnv
            | Flavour::Groupcache
            | Flavour::Nginx
            | Flavour::Haproxy
            | Flavour::HaproxyCrc32 => weights
                .iter()
                .map(|&w| u64::from(vnodes) * u64::from(w))
                .collect(),
        }
    }

    /// Bits of the flavour's hash space: 64 (native, native-fnv, Envoy's) or 32 (every other).
    pub fn hash_bits(self) -> u32 {
        match self {
            Flavour::Native
            | Flavour::NativeFnv
            | Flavour::EnvoyRing
            | Flavour::EnvoyRedis
            | Flavour::GoRedisRing
            | Flavour::McrouterCh3
            | Flavour::EnvoyMaglev => 64,
            _ => 32,
        }
    }

    /// Which point owns a hash (see [`Lookup`]).
    pub fn lookup(self) -> Lookup {
        match self {
            Flavour::Predis | Flavour::RedisRb => Lookup::Predecessor,
            Flavour::Haproxy | Flavour::HaproxyCrc32 => Lookup::Nearest,
            _ => Lookup::Successor,
        }
    }

    /// Where hash `x` of the flavour's hash function sits on the ring's circle: `x` itself, or
    /// `2^bits - 1 - x` for a [`Lookup::Predecessor`] flavour (see the module docs).
    #[inline]
    pub fn on_circle(self, x: u64) -> u64 {
        match self.lookup() {
            Lookup::Successor | Lookup::Nearest => x,
            Lookup::Predecessor => (u64::MAX >> (64 - self.hash_bits())) - x,
        }
    }

    /// Which node owns a point several nodes have (see [`Ties`]).
    pub fn ties(self) -> Ties {
        match self {
            Flavour::Native | Flavour::NativeFnv | Flavour::Groupcache => Ties::Name,
            Flavour::Ketama
            | Flavour::Nginx
            | Flavour::Haproxy
            | Flavour::HaproxyCrc32
            | Flavour::EnvoyRing
            | Flavour::EnvoyRedis
            | Flavour::PythonMemcached
            | Flavour::GoRedisRing
            | Flavour::McrouterCh3
            | Flavour::EnvoyMaglev => Ties::First,
            // pymemcache: equal scores go to the larger name.
            Flavour::Pymemcache => Ties::Name,
            Flavour::Predis | Flavour::PredisKetama | Flavour::RedisRb => Ties::Last,
        }
    }

    /// Whether the implementation always hashes a key by its hash tag (Predis's cluster
    /// strategy, redis-rb's `Distributed`), so that the ring does whatever `HASHTAG` says.
    pub fn always_hash_tags(self) -> bool {
        matches!(
            self,
            Flavour::Predis | Flavour::PredisKetama | Flavour::RedisRb | Flavour::GoRedisRing
        )
    }

    /// Which hash tag the flavour takes from a key (see [`TagRule`]).
    pub fn tag_rule(self) -> TagRule {
        match self {
            Flavour::RedisRb => TagRule::LeadingBrace,
            _ => TagRule::Redis,
        }
    }

    /// Number of distinct hash values: `2^hash_bits`.
    pub fn space(self) -> u128 {
        1u128 << self.hash_bits()
    }

    /// The hash of a member on this flavour's circle (see the module docs for each flavour),
    /// mirrored for a [`Lookup::Predecessor`] flavour ([`Flavour::on_circle`]).
    pub fn member_hash(self, member: &[u8]) -> u64 {
        self.on_circle(self.key_hash(member))
    }

    /// The flavour's hash of a key (the bytes it routes by), before
    /// [`Flavour::on_circle`].
    #[inline]
    pub fn key_hash(self, member: &[u8]) -> u64 {
        match self {
            Flavour::Native => native_hash(member),
            Flavour::NativeFnv => fnv1a64(member),
            Flavour::Ketama | Flavour::PredisKetama => u64::from(md5_le_u32(member, 0)),
            Flavour::Groupcache
            | Flavour::Nginx
            | Flavour::Predis
            | Flavour::RedisRb
            | Flavour::HaproxyCrc32 => u64::from(crc32fast::hash(member)),
            Flavour::Haproxy => u64::from(haproxy_full_hash(sdbm(member))),
            Flavour::EnvoyRing | Flavour::GoRedisRing | Flavour::EnvoyMaglev => xxh64(member, 0),
            Flavour::EnvoyRedis => murmur_hash_64a(member, ENVOY_HASH_SEED),
            Flavour::PythonMemcached => u64::from(python_memcached_hash(member)),
            Flavour::McrouterCh3 => murmur_hash_64a(member, MCROUTER_FURC_SEED),
            // Scored with each node's name instead ([`Rule::KeyedRendezvous`]); this hash only
            // orders members.
            Flavour::Pymemcache => u64::from(crc32fast::hash(member)),
        }
    }

    /// Appends to `out` the points `from..to` of `node` (indices count points, not labels).
    /// For ketama, `from` and `to` are multiples of 4: label `i` yields points `4i..4i+4`.
    ///
    /// The node's name is hashed once for all its points, not once per label, so that the work
    /// does not multiply the name's length by its points (a 64 KiB name with 100000 points
    /// would hash 6.5 GB): the hash state after the label's fixed prefix is kept and continued
    /// with each label's digits (native: `node#`; ketama: `host-`, MD5's state), or the name's
    /// effect on the state is worked out once (groupcache: CRC32 is affine in its starting
    /// state over the name; native-fnv, whose labels start with the index: see
    /// [`FnvSpan`]). The points are bit for bit those of hashing each label whole.
    ///
    /// `position` is the node's place in the ring's node order counting from 1, which only
    /// HAProxy's points depend on ([`Flavour::points_by_position`]).
    pub fn push_points(self, node: &[u8], position: u32, from: u32, to: u32, out: &mut Vec<u64>) {
        let mut digits = Vec::with_capacity(24);
        match self {
            Flavour::Native => {
                let prefix = fnv_state(FNV_OFFSET, node, b"#");
                for i in from..to {
                    digits.clear();
                    push_decimal(&mut digits, i.saturating_add(1));
                    out.push(fmix64(fnv_state(prefix, &digits, b"")));
                }
            }
            Flavour::NativeFnv => {
                let span = FnvSpan::new(node);
                let mut offsets = [None; 256];
                for i in from..to {
                    digits.clear();
                    push_decimal(&mut digits, i);
                    let before = fnv_state(FNV_OFFSET, &digits, b"#");
                    let after = span.apply(before, &mut offsets);
                    out.push(fnv_state(after, b"#", &digits));
                }
            }
            Flavour::Groupcache => {
                let span = CrcSpan::new(node);
                for i in from..to {
                    digits.clear();
                    push_decimal(&mut digits, i);
                    out.push(u64::from(span.apply(crc32fast::hash(&digits))));
                }
            }
            Flavour::Ketama => {
                let mut prefix = Md5::new();
                prefix.update(ketama_host(node));
                prefix.update(b"-");
                push_md5_points(&prefix, from, to, out);
            }
            Flavour::PredisKetama => {
                let mut prefix = Md5::new();
                prefix.update(node);
                prefix.update(b"-");
                push_md5_points(&prefix, from, to, out);
            }
            Flavour::Nginx => {
                let (host, port) = nginx_host_port(node);
                let mut base = crc32fast::Hasher::new();
                base.update(host);
                base.update(&[0]);
                base.update(port);
                // Each point continues from the one before it: the chain is walked from 0.
                let mut prev = 0u32;
                for j in 0..to {
                    let mut h = base.clone();
                    h.update(&prev.to_le_bytes());
                    prev = h.finalize();
                    if j >= from {
                        out.push(u64::from(prev));
                    }
                }
            }
            Flavour::EnvoyRing | Flavour::EnvoyRedis => {
                let mut label = Vec::with_capacity(node.len() + 11);
                for i in from..to {
                    label.clear();
                    label.extend_from_slice(node);
                    label.push(b'_');
                    push_decimal(&mut label, i);
                    out.push(xxh64(&label, 0));
                }
            }
            Flavour::PythonMemcached
            | Flavour::GoRedisRing
            | Flavour::McrouterCh3
            | Flavour::EnvoyMaglev
            | Flavour::Pymemcache => {}
            Flavour::Haproxy | Flavour::HaproxyCrc32 => {
                let base = position.wrapping_mul(HAPROXY_POINT_KEYS);
                for i in from..to {
                    out.push(u64::from(haproxy_full_hash(base.wrapping_add(i))));
                }
            }
            Flavour::Predis | Flavour::RedisRb => {
                let mut prefix = crc32fast::Hasher::new();
                match self {
                    Flavour::RedisRb => prefix.update(&redis_rb_id(node)),
                    _ => prefix.update(node),
                }
                prefix.update(b":");
                for i in from..to {
                    digits.clear();
                    push_decimal(&mut digits, i);
                    let mut h = prefix.clone();
                    h.update(&digits);
                    out.push(self.on_circle(u64::from(h.finalize())));
                }
            }
        }
    }
}

impl std::fmt::Display for Flavour {
    /// The flavour's name, as `RING.INFO` shows it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn push_decimal(out: &mut Vec<u8>, value: u32) {
    let mut digits = [0u8; 10];
    let mut n = value;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[..len].iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        let mut l = Vec::new();
        // The seed article's form: point 1 of 127.0.0.1 is "127.0.0.1#1".
        native_label(b"127.0.0.1", 0, &mut l);
        assert_eq!(l, b"127.0.0.1#1");
        native_label(b"a#1", 22, &mut l);
        assert_eq!(l, b"a#1#23");
        native_fnv_label(b"node-1", 0, &mut l);
        assert_eq!(l, b"0#node-1#0");
        native_fnv_label(b"a#1", 23, &mut l);
        assert_eq!(l, b"23#a#1#23");
        groupcache_label(b"a", 12, &mut l);
        assert_eq!(l, b"12a");
        ketama_label(b"10.0.1.1:11211", 3, &mut l);
        assert_eq!(l, b"10.0.1.1-3");
        ketama_label(b"10.0.1.1:6379", 0, &mut l);
        assert_eq!(l, b"10.0.1.1:6379-0");
        ketama_label(b"cache", 4294967295, &mut l);
        assert_eq!(l, b"cache-4294967295");
    }

    /// The points of `node` as the labels define them: each label hashed whole (nginx's
    /// chain from its start; HAProxy's keys at position 3).
    fn points_label_by_label(f: Flavour, node: &[u8], from: u32, to: u32) -> Vec<u64> {
        let mut label = Vec::new();
        let mut out = Vec::new();
        let md5_points = |label: &[u8], out: &mut Vec<u64>| {
            out.extend((0..4).map(|a| u64::from(md5_le_u32(label, a))));
        };
        match f {
            Flavour::Ketama => {
                for i in from / 4..to / 4 {
                    ketama_label(node, i, &mut label);
                    md5_points(&label, &mut out);
                }
            }
            Flavour::PredisKetama => {
                for i in from / 4..to / 4 {
                    let label = format!("{}-{i}", String::from_utf8_lossy(node));
                    if node.is_ascii() {
                        md5_points(label.as_bytes(), &mut out);
                    } else {
                        md5_points(&[node, format!("-{i}").as_bytes()].concat(), &mut out);
                    }
                }
            }
            Flavour::Nginx => {
                let (host, port) = nginx_host_port(node);
                let mut prev = 0u32;
                for j in 0..to {
                    let bytes = [host, &[0], port, &prev.to_le_bytes()].concat();
                    prev = crc32fast::hash(&bytes);
                    if j >= from {
                        out.push(u64::from(prev));
                    }
                }
            }
            Flavour::Haproxy | Flavour::HaproxyCrc32 => {
                out.extend((from..to).map(|i| u64::from(haproxy_full_hash(3 * 4096 + i))));
            }
            Flavour::EnvoyRing | Flavour::EnvoyRedis => {
                for i in from..to {
                    out.push(xxh64(&[node, format!("_{i}").as_bytes()].concat(), 0));
                }
            }
            _ if f.rule() != Rule::Ring => {}
            _ => {
                for i in from..to {
                    let h = match f {
                        Flavour::Native => {
                            native_label(node, i, &mut label);
                            native_hash(&label)
                        }
                        Flavour::NativeFnv => {
                            native_fnv_label(node, i, &mut label);
                            fnv1a64(&label)
                        }
                        Flavour::Predis => {
                            let l = [node, format!(":{i}").as_bytes()].concat();
                            u64::from(u32::MAX - crc32fast::hash(&l))
                        }
                        Flavour::RedisRb => {
                            let l = [&redis_rb_id(node)[..], format!(":{i}").as_bytes()].concat();
                            u64::from(u32::MAX - crc32fast::hash(&l))
                        }
                        _ => {
                            groupcache_label(node, i, &mut label);
                            u64::from(crc32fast::hash(&label))
                        }
                    };
                    out.push(h);
                }
            }
        }
        out
    }

    #[test]
    fn points_equal_their_labels_hashed_whole() {
        // Names short and long (past the CRC tables' threshold, and with every byte value),
        // ranges from 0 and from the middle, past 256 labels (every low byte of FNV's state).
        let mut names: Vec<Vec<u8>> = vec![
            b"a".to_vec(),
            b"10.0.0.1:6379".to_vec(),
            b"10.0.1.1:11211".to_vec(),
            (0..=255u8).collect(),
            vec![b'x'; 1000],
        ];
        names.push([b"host:".as_slice(), &[0xff; 70], b":11211"].concat());
        for f in Flavour::ALL {
            for name in &names {
                for (from, to) in [(0, 8), (4, 600), (996, 1000)] {
                    let mut out = Vec::new();
                    f.push_points(name, 3, from, to, &mut out);
                    assert_eq!(
                        out,
                        points_label_by_label(f, name, from, to),
                        "{f:?} {} bytes {from}..{to}",
                        name.len()
                    );
                }
            }
        }
    }

    #[test]
    fn flavour_names_and_codes_round_trip() {
        for f in Flavour::ALL {
            assert_eq!(Flavour::from_code(f.code()), Some(f));
            assert_eq!(
                Flavour::from_name(f.name().to_uppercase().as_bytes()),
                Some(f)
            );
        }
        assert_eq!(Flavour::from_name(b"jump"), None);
        assert_eq!(Flavour::from_code(17), None);
        // Version-1 payloads: code 0 was 0.1's native, now native-fnv.
        assert_eq!(Flavour::from_code_v1(0), Some(Flavour::NativeFnv));
        assert_eq!(Flavour::from_code_v1(1), Some(Flavour::Ketama));
        assert_eq!(Flavour::from_code_v1(2), Some(Flavour::Groupcache));
        assert_eq!(Flavour::from_code_v1(3), None);
    }

    #[test]
    fn redis_rb_ids_and_predis_counts() {
        assert_eq!(
            &redis_rb_id(b"10.0.0.1:6379")[..],
            b"redis://10.0.0.1:6379/0"
        );
        assert_eq!(&redis_rb_id(b"/tmp/r.sock")[..], b"unix:///tmp/r.sock/0");
        assert_eq!(&redis_rb_id(b"rediss://h:1/2")[..], b"rediss://h:1/2");
        // Predis 1.1 HashRing: round(w / W x n x 128); KetamaRing: floor(w / W x n x 40) x 4
        // (worked out by hand: 100/480 x 4 x 128 = 106.67 -> 107; 250/480 x 4 x 128 = 266.67
        // -> 267; 30/480 x 4 x 128 = 32; 100/480 x 4 x 40 = 33.3 -> 33 digests).
        let w = [100, 100, 250, 30];
        assert_eq!(
            predis_point_counts(Flavour::Predis, 128, &w),
            vec![107, 107, 267, 32]
        );
        assert_eq!(
            predis_point_counts(Flavour::PredisKetama, 160, &w),
            vec![132, 132, 332, 40]
        );
    }
}
