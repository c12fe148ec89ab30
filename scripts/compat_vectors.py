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

Run: python3 scripts/compat_vectors.py (needs `pip install xxhash`).
"""

import ctypes
import math
import os

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
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
