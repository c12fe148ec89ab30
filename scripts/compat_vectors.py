#!/usr/bin/env python3
"""Writes engine/tests/vectors/compat_published.tsv: where placements that cannot be installed
here (Envoy) send keys, computed from their published source with hash functions from
libraries other than ringslot's:

- xxHash64: PyPI's `xxhash` (the reference C library's binding);
- Envoy's `MurmurHash::murmurHash2`: libstdc++'s own `std::_Hash_bytes`, called through ctypes
  (Envoy's function is a copy of it, `source/common/common/hash.cc`).

The placement rules are written here from Envoy's source, independently of ringslot's Rust:
- `envoy-ring`: source/extensions/load_balancing_policies/ring_hash/ring_hash_lb.cc,
  `Ring::Ring` (ring size from the normalized weights, running totals, points `"<address>_<i>"`
  hashed with xxHash64 seed 0, sorted, the first point >= the hash wrapping to index 0) and
  `Ring::chooseHost`; the request hash of a header or cookie hash policy is xxHash64 of the
  value (source/common/http/hash_policy.cc).
- `envoy-redis`: the same ring, the key hashed by redis_proxy with `murmurHash2(key, 0xc70f6907)`
  (source/extensions/clusters/redis/redis_cluster_lb.cc, `RedisLoadBalancerContextImpl`), with
  hash tagging off.

- `envoy-maglev`: source/extensions/load_balancing_policies/maglev/maglev_lb.cc (Envoy 1.27+:
  hosts sorted by their key, offset xxHash64 seed 0, skip seed 1, the fill by normalized
  weights in doubles, table 65537, the entry at the key's xxHash64 modulo 65537).
- `go-redis-ring`: go-redis v9 ring.go (`rendezvous.New(shards, xxhash.Sum64String)`, keys by
  their `{hash tag}`, internal/hashtag) and dgryski/go-rendezvous `Lookup` (xorshiftMult64 of
  key hash ^ node hash, highest wins, the first on a tie).
- `mcrouter-ch3`: mcrouter/lib/fbi/hash.c `furc_hash` over the routing key
  (mcrouter/lib/Keys.cpp), computed by scripts/compat_vectors_furc.js with npm's
  `murmurhash-native` (MurmurHash64A).

Run: python3 scripts/compat_vectors.py (needs `pip install xxhash`, and `npm install
murmurhash-native` with MURMURHASH_NATIVE pointing at it for mcrouter).
"""

import ctypes
import json
import math
import os
import subprocess

import xxhash

_libstdcpp = ctypes.CDLL("libstdc++.so.6")
_hash_bytes = _libstdcpp._ZSt11_Hash_bytesPKvmm
_hash_bytes.restype = ctypes.c_size_t
_hash_bytes.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t]


def murmur2(data: bytes) -> int:
    return _hash_bytes(data, len(data), 0xC70F6907)


def xxh64(data: bytes) -> int:
    return xxhash.xxh64_intdigest(data, seed=0)


def envoy_ring(hosts):
    """hosts: [(address, weight)] in host-set order -> (sorted [(hash, address)], counts)."""
    total = sum(w for _, w in hosts)
    shares = [w * 1.0 / total for _, w in hosts]
    min_w = min([1.0] + shares)
    scale = min(math.ceil(min_w * 1024) / min_w, 1024 * 1024 * 8)
    ring, counts = [], []
    current = target = 0.0
    for (address, _), w in zip(hosts, shares):
        target += scale * w
        i = 0
        while current < target:
            ring.append((xxh64(f"{address}_{i}".encode()), address))
            i += 1
            current += 1.0
        counts.append(i)
    ring.sort(key=lambda p: p[0])
    return ring, counts


def choose(ring, h):
    lo, hi = 0, len(ring)
    while lo < hi:
        mid = (lo + hi) // 2
        if ring[mid][0] < h:
            lo = mid + 1
        else:
            hi = mid
    return ring[lo % len(ring)][1]


BASE = [("10.0.0.1:80", 1), ("10.0.0.2:80", 2), ("[::1]:8080", 3), ("10.0.0.4:11211", 1)]
SCENARIOS = {
    "base": BASE,
    "join": BASE + [("10.0.0.5:80", 1)],
    "leave": [BASE[0]] + BASE[2:],
    "ten": [(f"10.1.0.{i}:80", 1) for i in range(10)],
}


def key(i):
    return [f"user:{i}", f"session-{i * 7919}", f"{{tag{i % 31}}}:x{i}", f"k{i}"][i % 4]


M = 65537


def envoy_maglev(hosts):
    """hosts: [(address, weight)] -> table of addresses (Envoy 1.27+ fill, doubles)."""
    total = sum(w for _, w in hosts)
    entries = sorted((a, w * 1.0 / total) for a, w in hosts)
    max_w = max(w for _, w in entries)
    state = [
        {"a": a, "w": w, "offset": xxhash.xxh64_intdigest(a.encode(), 0) % M,
         "skip": xxhash.xxh64_intdigest(a.encode(), 1) % (M - 1) + 1, "target": 0.0, "next": 0}
        for a, w in entries
    ]
    table = [None] * M
    filled, iteration = 0, 1
    while filled < M:
        for e in state:
            if filled >= M:
                break
            if iteration * e["w"] < e["target"]:
                continue
            e["target"] += max_w
            while True:
                c = (e["offset"] + e["skip"] * e["next"]) % M
                if table[c] is None:
                    break
                e["next"] += 1
            table[c] = e["a"]
            e["next"] += 1
            filled += 1
        iteration += 1
    return table


def redis_tag(key):
    s = key.find("{")
    if s >= 0:
        e = key.find("}", s + 1)
        if e > s + 1:
            return key[s + 1:e]
    return key


def xorshift_mult64(x):
    x ^= x >> 12
    x ^= (x << 25) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 27
    return (x * 2685821657736338717) & 0xFFFFFFFFFFFFFFFF


def go_redis(shards, key):
    kh = xxh64(redis_tag(key).encode())
    best, winner = -1, None
    for name in shards:
        score = xorshift_mult64(kh ^ xxh64(name.encode()))
        if score > best:
            best, winner = score, name
    return winner


def mcrouter_routing_key(key):
    rest = key
    if key.startswith("/"):
        pos = 1
        for _ in range(2):
            i = key.find("/", pos)
            if i < 0:
                pos = None
                break
            pos = i + 1
        if pos is not None:
            rest = key[pos:]
    cut = rest.find("|#|")
    return rest if cut < 0 else rest[:cut]


def mcrouter_indices(keys, sizes):
    here = os.path.dirname(__file__)
    out = subprocess.run(
        ["node", os.path.join(here, "compat_vectors_furc.js")],
        input=json.dumps({"keys": [mcrouter_routing_key(k) for k in keys], "sizes": sizes}),
        capture_output=True, text=True, check=True,
    ).stdout
    return json.loads(out)


def main():
    out = os.path.join(os.path.dirname(__file__), "..", "engine", "tests", "vectors",
                       "compat_published.tsv")
    lines = [
        "# Envoy ring_hash (envoy-ring: keys by xxHash64) and redis_proxy over it (envoy-redis: keys",
        "# by murmurHash2 = libstdc++ std::_Hash_bytes, seed 0xc70f6907), computed by",
        "# scripts/compat_vectors.py from Envoy's source with PyPI xxhash and libstdc++ (not ringslot).",
        "# Scenarios (hosts in order, address weight):",
    ]
    for name, hosts in SCENARIOS.items():
        _, counts = envoy_ring(hosts)
        listed = ", ".join(f"{a} {w}" for a, w in hosts)
        lines.append(f"#   {name}: {listed}; points {' '.join(map(str, counts))}")
    lines.append("scenario\tcompat\tkey\tkey_hash\towner")
    for name, hosts in SCENARIOS.items():
        ring, _ = envoy_ring(hosts)
        for i in range(500):
            k = key(i).encode()
            for compat, h in (("envoy-ring", xxh64(k)), ("envoy-redis", murmur2(k))):
                lines.append(f"{name}\t{compat}\t{k.decode()}\t{h}\t{choose(ring, h)}")
    # The placements without points, in a second file.
    table_lines = [
        "# Envoy maglev (envoy-maglev), go-redis v9 Ring (go-redis-ring) and mcrouter Ch3",
        "# (mcrouter-ch3), computed by scripts/compat_vectors.py from their sources with PyPI",
        "# xxhash and npm murmurhash-native (not ringslot). Node lists (name weight, in order):",
    ]
    table_scenarios = {
        "envoy-maglev": {
            "base": BASE,
            "join": BASE + [("10.0.0.5:80", 1)],
            "leave": [BASE[0]] + BASE[2:],
            "ten": [(f"10.1.0.{i}:80", 1) for i in range(10)],
        },
        "go-redis-ring": {
            "base": [(f"shard-{c}", 1) for c in "abcd"],
            "join": [(f"shard-{c}", 1) for c in "abcde"],
            "leave": [(f"shard-{c}", 1) for c in "acd"],
            "ten": [(f"shard{i}", 1) for i in range(10)],
        },
        "mcrouter-ch3": {
            "base": [(f"10.0.0.{i}:11211", 1) for i in range(1, 5)],
            "join": [(f"10.0.0.{i}:11211", 1) for i in range(1, 6)],
            "leave": [(f"10.0.0.{i}:11211", 1) for i in (1, 3, 4)],
            "ten": [(f"10.1.0.{i}:11211", 1) for i in range(10)],
        },
    }
    for compat, scenarios in table_scenarios.items():
        for name, nodes in scenarios.items():
            listed = ", ".join(f"{a} {w}" for a, w in nodes)
            table_lines.append(f"#   {compat} {name}: {listed}")
    table_lines.append("scenario\tcompat\tkey\towner")
    keys = [key(i) for i in range(500)]
    keys += [f"/region{i % 3}/cluster{i % 5}/{key(i)}|#|suffix{i}" for i in range(100)]
    mc = mcrouter_indices(keys, sorted({len(n) for n in table_scenarios["mcrouter-ch3"].values()}))
    for compat, scenarios in table_scenarios.items():
        for name, nodes in scenarios.items():
            table = envoy_maglev(nodes) if compat == "envoy-maglev" else None
            for i, k in enumerate(keys):
                if compat == "envoy-maglev":
                    owner = table[xxh64(k.encode()) % M]
                elif compat == "go-redis-ring":
                    owner = go_redis([n for n, _ in nodes], k)
                else:
                    owner = nodes[mc["index"][str(len(nodes))][i]][0]
                table_lines.append(f"{name}\t{compat}\t{k}\t{owner}")
    with open(out.replace("compat_published.tsv", "compat_tables.tsv"), "w") as f:
        f.write("\n".join(table_lines) + "\n")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
