//! Known answers from named sources (engine/tests/vectors/, verbatim copies of the project's shared
//! vectors): Redis Cluster key slots, libmemcached's weighted-ketama test ring, and the FNV-1a
//! and CRC32 reference values.

mod common;

use common::{from_hex, vectors};

use ringslot_engine::flavour::{fmix64, fnv1a64, md5_le_u32, native_hash};
use ringslot_engine::Limits;
use ringslot_engine::{key_slot, Flavour, Topology};

#[test]
fn keyslot_vectors_match_cluster_keyslot() {
    let rows = vectors("keyslot.tsv");
    assert!(rows.len() >= 20, "keyslot.tsv has its rows");
    for row in rows {
        let member = from_hex(&row[0]);
        let slot: u16 = row[1].parse().expect("slot");
        assert_eq!(key_slot(&member), slot, "member {:?}", row[0]);
    }
}

#[test]
fn hash_vectors_match_fnv_and_crc32_references() {
    // fnv1a32 is not used by any flavour, so only the 64-bit and CRC32 columns are checked.
    let rows = vectors("hashes.tsv");
    assert!(rows.len() >= 7);
    for row in rows {
        let input = from_hex(&row[0]);
        let fnv64 = u64::from_str_radix(&row[2], 16).expect("fnv1a64");
        let crc = u32::from_str_radix(&row[3], 16).expect("crc32");
        assert_eq!(fnv1a64(&input), fnv64, "fnv1a64 of {:?}", row[0]);
        assert_eq!(Flavour::NativeFnv.member_hash(&input), fnv64);
        assert_eq!(crc32fast::hash(&input), crc, "crc32 of {:?}", row[0]);
        assert_eq!(Flavour::Groupcache.member_hash(&input), u64::from(crc));
    }
}

#[test]
fn native_hash_vectors_match_fmix64_of_fnv1a64() {
    let rows = vectors("fmix64.tsv");
    assert!(rows.len() >= 10);
    for row in rows {
        let output = u64::from_str_radix(&row[2], 16).expect("output");
        match row[0].as_str() {
            "fmix64" => {
                let x = u64::from_str_radix(&row[1], 16).expect("x");
                assert_eq!(fmix64(x), output, "fmix64 of {}", row[1]);
            }
            "native" => {
                let input = from_hex(&row[1]);
                assert_eq!(native_hash(&input), output, "native hash of {:?}", row[1]);
                assert_eq!(Flavour::Native.member_hash(&input), output);
            }
            other => panic!("unknown kind {other}"),
        }
    }
    // The seed article's virtual node labels are the native flavour's points.
    let mut points = Vec::new();
    Flavour::Native.push_points(b"127.0.0.1", 0, 0, 2, &mut points);
    assert_eq!(points, vec![0x7f49f8949983f0df, 0xad52ae5b5897fb33]);
}

/// The servers, weights and point counts stated in the header of ketama_libmemcached.tsv.
fn ketama_header() -> (Vec<(String, u32)>, Vec<u32>) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vectors/ketama_libmemcached.tsv"
    );
    let text = std::fs::read_to_string(path).expect("read ketama vectors");
    let mut servers = Vec::new();
    let mut counts = Vec::new();
    for line in text.lines().filter(|l| l.starts_with('#')) {
        let body = line.trim_start_matches('#').trim();
        if let Some(list) = body.strip_prefix("Points per server on that ring:") {
            let list = list.split('(').next().unwrap_or("");
            counts = list
                .split(',')
                .map(|c| c.trim().parse().expect("count"))
                .collect();
        } else if body.contains(":11211 ") {
            for item in body.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                let mut parts = item.split_whitespace();
                let name = parts.next().expect("server").to_string();
                let weight = parts.next().expect("weight").parse().expect("weight");
                servers.push((name, weight));
            }
        }
    }
    (servers, counts)
}

#[test]
fn ketama_ring_matches_libmemcached() {
    let (servers, counts) = ketama_header();
    assert_eq!(servers.len(), 8);
    let mut topology = Topology::new(Flavour::Ketama, None, false).expect("ketama ring");
    for (name, weight) in &servers {
        topology
            .add(&[name.as_bytes()], Some(i64::from(*weight)), Limits::NONE)
            .expect("add server");
    }
    let points: Vec<u32> = topology.nodes().iter().map(|n| n.points).collect();
    assert_eq!(points, counts, "points per server");
    assert_eq!(
        topology.ring().point_count() as u32,
        counts.iter().sum::<u32>()
    );

    let rows = vectors("ketama_libmemcached.tsv");
    assert!(rows.len() >= 40);
    let hashes: Vec<u64> = topology.ring().points().iter().map(|p| p.hash()).collect();
    for row in rows {
        let member = from_hex(&row[0]);
        let key_hash: u64 = row[1].parse().expect("key_hash");
        let point: u64 = row[2].parse().expect("point");
        assert_eq!(u64::from(md5_le_u32(&member, 0)), key_hash);
        assert_eq!(topology.ring().member_hash(&member), key_hash);
        let i = hashes.partition_point(|&p| p < key_hash) % hashes.len();
        assert_eq!(hashes[i], point, "point for {:?}", row[0]);
        let owner = topology.owner(&member).expect("owner");
        assert_eq!(
            owner,
            format!("{}:11211", row[3]).as_bytes(),
            "owner of {:?}",
            row[0]
        );
    }
}

/// The scenarios stated in the header of compat_published.tsv: name -> (hosts with weights,
/// points per host).
type Scenarios = std::collections::BTreeMap<String, (Vec<(String, u32)>, Vec<u64>)>;

fn published_scenarios() -> Scenarios {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vectors/compat_published.tsv"
    );
    let text = std::fs::read_to_string(path).expect("read compat vectors");
    let mut out = Scenarios::new();
    for line in text.lines().filter(|l| l.starts_with("#   ")) {
        let body = line.trim_start_matches('#').trim();
        let (name, rest) = body.split_once(": ").expect("scenario");
        let (hosts, points) = rest.split_once("; points ").expect("points");
        let hosts = hosts
            .split(", ")
            .map(|h| {
                let (a, w) = h.rsplit_once(' ').expect("host weight");
                (a.to_string(), w.parse().expect("weight"))
            })
            .collect();
        let points = points
            .split(' ')
            .map(|p| p.parse().expect("count"))
            .collect();
        out.insert(name.to_string(), (hosts, points));
    }
    out
}

#[test]
fn envoy_rings_match_the_published_algorithm() {
    // Computed by scripts/compat_vectors.py from Envoy's ring_hash_lb.cc and redis_proxy's
    // key hash, with PyPI's xxhash and libstdc++'s std::_Hash_bytes: not ringslot's code.
    let scenarios = published_scenarios();
    assert_eq!(scenarios.len(), 4);
    let rows = vectors("compat_published.tsv");
    assert!(rows.len() >= 4000);
    for (name, (hosts, points)) in &scenarios {
        for compat in [Flavour::EnvoyRing, Flavour::EnvoyRedis] {
            let mut t = Topology::new(compat, None, false).expect("ring");
            for (host, weight) in hosts {
                t.add(&[host.as_bytes()], Some(i64::from(*weight)), Limits::NONE)
                    .expect("add");
            }
            let counts: Vec<u64> = t.nodes().iter().map(|n| u64::from(n.points)).collect();
            assert_eq!(&counts, points, "{compat} {name}: points per host");
            let mut checked = 0;
            for row in rows
                .iter()
                .filter(|r| r[0] == *name && r[1] == compat.name())
            {
                let key = row[2].as_bytes();
                let hash: u64 = row[3].parse().expect("key_hash");
                assert_eq!(
                    t.ring().member_hash(key),
                    hash,
                    "{compat} hash of {}",
                    row[2]
                );
                assert_eq!(
                    t.owner(key),
                    Some(row[4].as_bytes()),
                    "{compat} {name}: owner of {}",
                    row[2]
                );
                checked += 1;
            }
            assert_eq!(checked, 500, "{compat} {name}");
        }
    }
}

#[test]
fn placements_without_points_match_their_published_algorithms() {
    // Computed by scripts/compat_vectors.py from Envoy's maglev_lb.cc, go-redis's ring.go with
    // go-rendezvous, and mcrouter's hash.c (furc_hash, in scripts/compat_vectors_furc.js), with
    // PyPI's xxhash and npm's murmurhash-native: not ringslot's code.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vectors/compat_tables.tsv"
    );
    let text = std::fs::read_to_string(path).expect("read compat_tables.tsv");
    let mut lists = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("#   ")) {
        let body = line.trim_start_matches('#').trim();
        let (head, nodes) = body.split_once(": ").expect("list");
        let nodes: Vec<(String, i64)> = nodes
            .split(", ")
            .map(|n| {
                let (a, w) = n.rsplit_once(' ').expect("node weight");
                (a.to_string(), w.parse().expect("weight"))
            })
            .collect();
        lists.insert(head.to_string(), nodes);
    }
    assert_eq!(lists.len(), 12);
    let rows = vectors("compat_tables.tsv");
    let mut checked = 0;
    for (head, nodes) in &lists {
        let (compat, scenario) = head.split_once(' ').expect("compat scenario");
        let flavour = Flavour::from_name(compat.as_bytes()).expect("flavour");
        let mut t = Topology::new(flavour, None, false).expect("ring");
        for (name, weight) in nodes {
            let weight = (*weight != 1).then_some(*weight);
            t.add(&[name.as_bytes()], weight, Limits::NONE)
                .expect("add");
        }
        for row in rows.iter().filter(|r| r[0] == scenario && r[1] == compat) {
            assert_eq!(
                t.owner(row[2].as_bytes()),
                Some(row[3].as_bytes()),
                "{compat} {scenario}: owner of {}",
                row[2]
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 12 * 600);
}
