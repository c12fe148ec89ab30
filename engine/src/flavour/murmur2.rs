//! MurmurHash64A (Austin Appleby, `MurmurHash2.cpp`, public domain), the key hash of mcrouter
//! (`murmur_hash_64A()`) and of Envoy's `redis_proxy` (`MurmurHash::murmurHash2`, libstdc++'s
//! `std::_Hash_bytes`).

/// MurmurHash64A (Austin Appleby, `MurmurHash2.cpp`, public domain), as mcrouter's
/// `murmur_hash_64A()` and Envoy's `MurmurHash::murmurHash2` (libstdc++'s 64-bit
/// `std::_Hash_bytes`: the same steps, its `shift_mix(h) x m` then `shift_mix` being this
/// final mix; checked against both in `engine/tests/vectors/`): `m = 0xc6a4a7935bd1e995`, `r = 47`, `h = seed ^ (len x m)`; each
/// little-endian 8-byte block `k`: `k x= m; k ^= k >> r; k x= m; h ^= k; h x= m`; the 1-7 bytes
/// left as a little-endian integer: `h ^= t; h x= m`; then `h ^= h >> r; h x= m; h ^= h >> r`.
pub fn murmur_hash_64a(bytes: &[u8], seed: u32) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    let mut h = u64::from(seed) ^ (bytes.len() as u64).wrapping_mul(M);
    let mut blocks = bytes.chunks_exact(8);
    for block in &mut blocks {
        let mut word = [0u8; 8];
        word.copy_from_slice(block);
        let mut k = u64::from_le_bytes(word).wrapping_mul(M);
        k ^= k >> 47;
        h ^= k.wrapping_mul(M);
        h = h.wrapping_mul(M);
    }
    let rest = blocks.remainder();
    if !rest.is_empty() {
        h ^= rest
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
        h = h.wrapping_mul(M);
    }
    h ^= h >> 47;
    h = h.wrapping_mul(M);
    h ^ (h >> 47)
}
