//! ringslot against a real proxy fleet, key for key: twemproxy (Debian's `nutcracker` 0.5.0)
//! in front of redis-servers. Each key's backend is read off the backends themselves (`SCAN`),
//! after writing through the proxy; a change of the pool is a new proxy, as twemproxy users
//! make it, and the keys whose `GET` through the new proxy misses are the keys that moved.
//!
//! - `distribution: ketama` with `hash: md5` places keys as ringslot's `ketama` flavour with the
//!   servers named `127.0.0.1:port` and their weights (libmemcached's ring: twemproxy hashes
//!   `host:port-i` for its points).
//! - `distribution: modula` with `hash: md5` is `md5(key)` (its first four bytes, little
//!   endian, as the ketama flavour hashes members) modulo the servers: ringslot's `modulo`
//!   scheme on a `ketama` ring whose nodes are in twemproxy's order, when every weight is 1
//!   (twemproxy repeats a server `weight` times in its modula table; ringslot's modulo ignores
//!   weights). twemproxy's order is not the listed one: it sorts a pool's servers by name
//!   (shorter names first, then byte order: `conf_validate_server`, `string_compare`), found
//!   here when listed order failed for every key. With twemproxy's default `hash: fnv1a_64`
//!   the member hash differs and only a statistical comparison holds.
//! - Two servers' ketama points can share a hash (32-bit points: about one pool of four servers
//!   in 20000, a few in a hundred at 100 servers). twemproxy then gives the keys before them to
//!   the server earlier in its order (it sorts the continuum by hash alone with glibc's stable
//!   `qsort` and its lookup takes the first of equal points); ringslot's `ketama` flavour
//!   gives them to the node earlier in the ring's order, so the rings here list their nodes in
//!   twemproxy's order. A random pool of CI once collided (13 keys of 20000 apart); the
//!   collision test pins two named servers whose points collide.
//! - A weighted ketama pool is not monotone: a server leaving changes every other server's
//!   point count (each gets `floor(weight share x 160 x servers / 4) x 4` points), so keys
//!   move between servers that stay; ringslot's `ketama` flavour does the same and predicts
//!   those moves too.

use ringslot_engine::{Flavour, Ring};
use ringslot_harness::client::scan_keys;
use ringslot_harness::prelude::*;
use ringslot_harness::proxy::{twemproxy_order, Distribution, Pool, PoolServer, Proxy};
use ringslot_harness::redis::{self, Connection};
use std::collections::{BTreeMap, BTreeSet};

const KEYS: usize = 20_000;

fn key(i: usize) -> Vec<u8> {
    // Varied shapes, all starting with `k` (the rings do not): plain, with separators, with
    // a hash tag (hashed whole: the pools have no hash_tag).
    match i % 3 {
        0 => format!("kuser:{i}").into_bytes(),
        1 => format!("ks{i}:{{t{}}}:x", i % 97).into_bytes(),
        _ => format!("k{}-{i}", i * 7919).into_bytes(),
    }
}

fn backends(n: usize) -> Vec<Server> {
    (0..n)
        .map(|_| {
            Server::builder()
                .no_module()
                .start()
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

/// Sorts servers into twemproxy's order by address ([`twemproxy_order`]), so that rings
/// built from them in this order break ties of points as twemproxy does, and a server that
/// joins last is last in twemproxy's table too.
fn in_twemproxy_order(fleet: &mut [Server]) {
    let mut order: Vec<String> = fleet.iter().map(Server::address).collect();
    twemproxy_order(&mut order);
    fleet.sort_by_key(|s| order.iter().position(|a| *a == s.address()));
}

fn pool(distribution: Distribution, servers: &[(&Server, u32)]) -> Pool {
    Pool {
        distribution,
        hash: "md5".into(),
        hash_tag: None,
        redis: true,
        servers: servers
            .iter()
            .map(|(s, w)| PoolServer::new(s.address(), *w))
            .collect(),
    }
}

fn proxy_client(proxy: &Proxy) -> Connection {
    redis::Client::open(format!("redis://{}/", proxy.address()))
        .and_then(|c| c.get_connection())
        .unwrap_or_else(|e| panic!("proxy: {e}"))
}

/// Writes every key through the proxy (pipelined), each with a TTL.
fn write_all(proxy: &Proxy, keys: &[Vec<u8>]) {
    let mut con = proxy_client(proxy);
    for chunk in keys.chunks(500) {
        let mut p = redis::pipe();
        for k in chunk {
            p.cmd("SET").arg(k).arg("v").arg("EX").arg(3600).ignore();
        }
        p.query::<()>(&mut con)
            .unwrap_or_else(|e| panic!("SET through the proxy: {e}"));
    }
}

/// The keys a GET through the proxy does not find.
fn misses(proxy: &Proxy, keys: &[Vec<u8>]) -> BTreeSet<Vec<u8>> {
    let mut con = proxy_client(proxy);
    let mut missed = BTreeSet::new();
    for chunk in keys.chunks(500) {
        let mut p = redis::pipe();
        for k in chunk {
            p.cmd("EXISTS").arg(k);
        }
        let found: Vec<i64> = p.query(&mut con).unwrap_or_else(|e| panic!("EXISTS: {e}"));
        for (k, f) in chunk.iter().zip(found) {
            if f == 0 {
                missed.insert(k.clone());
            }
        }
    }
    missed
}

/// Which backend holds each key, read off the backends (`SCAN`), by address.
fn holders(servers: &[&Server]) -> BTreeMap<Vec<u8>, String> {
    let mut out = BTreeMap::new();
    for s in servers {
        let mut con = s.client();
        scan_keys(&mut con, "*", |_: &mut Connection, batch| {
            for k in batch {
                assert!(
                    out.insert(k, s.address()).is_none(),
                    "a key on two backends"
                );
            }
            Ok::<_, redis::RedisError>(())
        })
        .expect("SCAN");
    }
    out
}

/// Fails with the number of keys whose backend differs, and the first few, when `got` (read
/// off the backends) differs from `want` (ringslot's owners).
fn same_owners(got: &BTreeMap<Vec<u8>, String>, want: &BTreeMap<Vec<u8>, String>, what: &str) {
    let differ: Vec<_> = want
        .iter()
        .filter(|(k, o)| got.get(*k) != Some(*o))
        .map(|(k, o)| {
            (
                String::from_utf8_lossy(k).into_owned(),
                o.clone(),
                got.get(k).cloned(),
            )
        })
        .collect();
    assert!(
        differ.is_empty() && got.len() == want.len(),
        "{what}: {} of {} keys on another backend than ringslot says ({} held), first: {:?}",
        differ.len(),
        want.len(),
        got.len(),
        &differ[..differ.len().min(3)]
    );
}

/// Fails with the sizes and a few keys of the difference when two key sets differ.
fn same_keys(got: &BTreeSet<Vec<u8>>, want: &BTreeSet<Vec<u8>>, what: &str) {
    let only_got: Vec<String> = got
        .difference(want)
        .take(3)
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    let only_want: Vec<String> = want
        .difference(got)
        .take(3)
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    assert!(
        got == want,
        "{what}: {} keys against {} predicted; only measured: {only_got:?}, only predicted: {only_want:?}",
        got.len(),
        want.len()
    );
}

/// The servers' names in twemproxy's order ([`twemproxy_order`]).
fn names_in_twemproxy_order(servers: &[(&Server, u32)]) -> Vec<String> {
    let mut names: Vec<String> = servers.iter().map(|(s, _)| s.address()).collect();
    twemproxy_order(&mut names);
    names
}

fn flush(servers: &[&Server]) {
    for s in servers {
        q(&mut s.client(), "FLUSHALL");
    }
}

/// Owners on ringslot's ring `ring` (RING.MGET), by key.
fn ring_owners(con: &mut Connection, ring: &str, keys: &[Vec<u8>]) -> BTreeMap<Vec<u8>, String> {
    let mut out = BTreeMap::new();
    for chunk in keys.chunks(1000) {
        let mut args: Vec<&[u8]> = vec![b"RING.MGET", ring.as_bytes()];
        args.extend(chunk.iter().map(Vec::as_slice));
        let owners = array(&call(con, &args).unwrap());
        for (k, o) in chunk.iter().zip(owners) {
            out.insert(k.clone(), text(&o));
        }
    }
    out
}

#[test]
fn ketama_through_twemproxy_is_ringslots_ketama_key_for_key() {
    let mut fleet = backends(5);
    in_twemproxy_order(&mut fleet);
    let keys: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
    // ringslot's side: a server with the module, the same keys (for RING.MOVES ... KEYS), and
    // the rings of each pool.
    let ringslot = Server::start();
    let mut rs = ringslot.client();
    for chunk in keys.chunks(1000) {
        let mut p = redis::pipe();
        for k in chunk {
            p.cmd("SET").arg(k).arg("v").arg("EX").arg(3600).ignore();
        }
        p.query::<()>(&mut rs).unwrap();
    }
    let weights = [1u32, 2, 1, 3];
    let ring_of = |rs: &mut Connection, name: &str, members: &[(&Server, u32)]| {
        q(rs, &format!("RING.CREATE {name} COMPAT ketama"));
        for (s, w) in members {
            q(rs, &format!("RING.ADD {name} WEIGHT {w} {}", s.address()));
        }
    };
    let four: Vec<(&Server, u32)> = fleet.iter().take(4).zip(weights).collect();
    ring_of(&mut rs, "ring:4", &four);

    // 1. Four weighted servers: each key is on the backend the ring names.
    let proxy = Proxy::start(&pool(Distribution::Ketama, &four)).unwrap_or_else(|e| panic!("{e}"));
    write_all(&proxy, &keys);
    let all: Vec<&Server> = fleet.iter().collect();
    let held = holders(&all);
    assert_eq!(held.len(), KEYS);
    same_owners(
        &held,
        &ring_owners(&mut rs, "ring:4", &keys),
        "ketama, 4 servers",
    );

    // 2. A fifth server joins (weight 2): a new proxy. The keys it misses are exactly those
    //    whose owner changes on the ring, and RING.MOVES counts them.
    let mut five = four.clone();
    five.push((&fleet[4], 2));
    let joined = Proxy::start(&pool(Distribution::Ketama, &five)).unwrap_or_else(|e| panic!("{e}"));
    let missed = misses(&joined, &keys);
    ring_of(&mut rs, "ring:5", &five);
    let before = ring_owners(&mut rs, "ring:4", &keys);
    let after = ring_owners(&mut rs, "ring:5", &keys);
    let moved: BTreeSet<Vec<u8>> = keys
        .iter()
        .filter(|k| before[*k] != after[*k])
        .cloned()
        .collect();
    assert!(!moved.is_empty());
    same_keys(&missed, &moved, "the keys that miss after the join");
    let what_if = q(
        &mut rs,
        &format!(
            "RING.MOVES ring:4 ADD WEIGHT 2 {} KEYS k* SCHEMES ring",
            fleet[4].address()
        ),
    );
    assert_eq!(
        int(&map(&map(&what_if)["ring"])["moved"]),
        missed.len() as i64
    );
    // The new proxy places every key where the new ring says.
    flush(&all);
    write_all(&joined, &keys);
    same_owners(&holders(&all), &after, "ketama, 5 servers");

    // 3. The weight-3 server leaves.
    flush(&all);
    write_all(&proxy, &keys);
    let three: Vec<(&Server, u32)> = four.iter().copied().filter(|(_, w)| *w != 3).collect();
    let left = Proxy::start(&pool(Distribution::Ketama, &three)).unwrap_or_else(|e| panic!("{e}"));
    let missed = misses(&left, &keys);
    ring_of(&mut rs, "ring:3", &three);
    let after = ring_owners(&mut rs, "ring:3", &keys);
    let moved: BTreeSet<Vec<u8>> = keys
        .iter()
        .filter(|k| before[*k] != after[*k])
        .cloned()
        .collect();
    let gone = fleet[3].address();
    let on_gone = before.values().filter(|o| **o == gone).count();
    // More than the leaving server's keys: weighted ketama is not monotone.
    assert!(
        moved.len() > on_gone,
        "{} moved, {on_gone} on the leaving server",
        moved.len()
    );
    same_keys(
        &missed,
        &moved,
        "the keys that miss after the weight-3 server leaves",
    );
    let what_if = q(
        &mut rs,
        &format!("RING.MOVES ring:4 DEL {gone} KEYS k* SCHEMES ring"),
    );
    assert_eq!(
        int(&map(&map(&what_if)["ring"])["moved"]),
        moved.len() as i64
    );
}

#[test]
fn modula_through_twemproxy_is_ringslots_modulo_with_md5() {
    let mut fleet = backends(4);
    // In twemproxy's order, so that the joining server is last in its table, as it is in
    // the what-if's (a joiner whose name sorts earlier shifts the others: more moves, as
    // ringslot's modulo with the nodes re-listed in that order would count).
    in_twemproxy_order(&mut fleet);
    let all: Vec<&Server> = fleet.iter().collect();
    let keys: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
    let three: Vec<(&Server, u32)> = fleet.iter().take(3).map(|s| (s, 1)).collect();
    let four: Vec<(&Server, u32)> = fleet.iter().map(|s| (s, 1)).collect();
    // ringslot's modulo on a ketama ring: the ketama member hash modulo the nodes, in
    // twemproxy's order.
    let modulo = |servers: &[(&Server, u32)]| -> BTreeMap<Vec<u8>, String> {
        let names = names_in_twemproxy_order(servers);
        let mut ring = Ring::new(Flavour::Ketama, 160, false);
        ring.set_nodes(names.iter().map(|n| (n.clone().into_bytes(), 1)).collect());
        keys.iter()
            .map(|k| {
                let i = ring.member_hash(k) % names.len() as u64;
                (k.clone(), names[i as usize].clone())
            })
            .collect()
    };
    let proxy = Proxy::start(&pool(Distribution::Modula, &three)).unwrap_or_else(|e| panic!("{e}"));
    write_all(&proxy, &keys);
    same_owners(&holders(&all), &modulo(&three), "modula, 3 servers");
    // A fourth joins: the misses are the keys whose modulo owner changes (about 3/4 of them),
    // as RING.MOVES ... SCHEMES modulo counts them.
    let joined = Proxy::start(&pool(Distribution::Modula, &four)).unwrap_or_else(|e| panic!("{e}"));
    let missed = misses(&joined, &keys);
    let (b, a) = (modulo(&three), modulo(&four));
    let moved: BTreeSet<Vec<u8>> = keys.iter().filter(|k| b[*k] != a[*k]).cloned().collect();
    same_keys(&missed, &moved, "the keys that miss after the modula join");
    let ringslot = Server::start();
    let mut rs = ringslot.client();
    q(&mut rs, "RING.CREATE m COMPAT ketama");
    for name in names_in_twemproxy_order(&three) {
        q(&mut rs, &format!("RING.ADD m {name}"));
    }
    for chunk in keys.chunks(1000) {
        let mut p = redis::pipe();
        for k in chunk {
            p.cmd("SET").arg(k).arg("v").arg("EX").arg(3600).ignore();
        }
        p.query::<()>(&mut rs).unwrap();
    }
    let what_if = q(
        &mut rs,
        &format!(
            "RING.MOVES m ADD {} KEYS k* SCHEMES modulo",
            fleet[3].address()
        ),
    );
    assert_eq!(
        int(&map(&map(&what_if)["modulo"])["moved"]),
        missed.len() as i64
    );
    flush(&all);
    write_all(&joined, &keys);
    same_owners(&holders(&all), &a, "modula, 4 servers");
}

/// Two server names whose ketama points collide: MD5 of `node-546-28` and of `node-699-28`
/// share their first little-endian u32, 1410088479 (found by a birthday search over the
/// points of `node-0` .. `node-4999` with Python's hashlib; with two servers of weight 1 each
/// has 160 points, from `name-0` to `name-39`, four a digest).
const COLLIDING: [&str; 2] = ["node-699", "node-546"];

#[test]
fn collided_points_go_to_the_server_first_in_twemproxys_order() {
    // The names are the servers' `name` fields, which twemproxy hashes instead of the
    // address and sorts the pool by: node-546 comes first in its order, whatever the
    // configuration's.
    let fleet = backends(2);
    let servers: Vec<PoolServer> = fleet
        .iter()
        .zip(COLLIDING)
        .map(|(s, name)| PoolServer {
            name: Some(name.to_string()),
            ..PoolServer::new(s.address(), 1)
        })
        .collect();
    let address_of: BTreeMap<String, String> = servers
        .iter()
        .filter_map(|s| Some((s.name.clone()?, s.address.clone())))
        .collect();
    // The keys on the tied arc are those whose owner depends on the order of the nodes.
    let ring_in = |names: [&str; 2]| {
        let mut ring = Ring::new(Flavour::Ketama, 160, false);
        ring.set_nodes(names.iter().map(|n| (n.as_bytes().to_vec(), 1)).collect());
        ring
    };
    let (listed, sorted) = (ring_in(COLLIDING), ring_in([COLLIDING[1], COLLIDING[0]]));
    let owner = |ring: &Ring, k: &[u8]| {
        let i = ring.owner(k)?;
        ring.nodes().get(i).map(|n| n.name.clone())
    };
    let tied: Vec<Vec<u8>> = (0..200_000)
        .map(|i| format!("tie:{i}").into_bytes())
        .filter(|k| owner(&listed, k) != owner(&sorted, k))
        .collect();
    assert!(!tied.is_empty(), "no key on the collided point's arc");

    let proxy = Proxy::start(&Pool {
        servers,
        ..pool(Distribution::Ketama, &[])
    })
    .unwrap_or_else(|e| panic!("{e}"));
    write_all(&proxy, &tied);
    let all: Vec<&Server> = fleet.iter().collect();
    let held = holders(&all);
    // twemproxy: every tied key on node-546, the first of its order.
    assert!(
        tied.iter()
            .all(|k| held.get(k) == address_of.get("node-546")),
        "{} tied keys, held: {:?}",
        tied.len(),
        held.values().collect::<BTreeSet<_>>()
    );
    // ringslot: the ring with its nodes added in twemproxy's order agrees key for key (and
    // the ring listed as configured does not, on every tied key).
    let ringslot = Server::start();
    let mut rs = ringslot.client();
    q(&mut rs, "RING.CREATE tw COMPAT ketama");
    q(
        &mut rs,
        &format!("RING.ADD tw {} {}", COLLIDING[1], COLLIDING[0]),
    );
    let want: BTreeMap<Vec<u8>, String> = ring_owners(&mut rs, "tw", &tied)
        .into_iter()
        .map(|(k, name)| (k, address_of[&name].clone()))
        .collect();
    same_owners(&held, &want, "keys on the collided point");
    assert!(tied
        .iter()
        .all(|k| owner(&listed, k).as_deref() == Some(b"node-699".as_slice())));
}
