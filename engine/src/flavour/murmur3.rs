//! MurmurHash3 (Austin Appleby, `MurmurHash3.cpp`, public domain): the x86 32-bit hash, as
//! pymemcache's `murmur3_32()`, and the 64-bit finalizer `fmix64`, the second step of the
//! native hash (`native.rs`).

/// MurmurHash3's x86 32-bit hash (Austin Appleby, `MurmurHash3.cpp`), as pymemcache's
/// `murmur3_32()` computes it over a key's bytes.
pub fn murmur3_32(bytes: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    let mut blocks = bytes.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let rest = blocks.remainder();
    if !rest.is_empty() {
        let mut k = rest
            .iter()
            .rev()
            .fold(0u32, |acc, &b| (acc << 8) | u32::from(b));
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
    }
    h ^= bytes.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// MurmurHash3's 64-bit finalizer (`fmix64` in Austin Appleby's `MurmurHash3.cpp`): xor-shift
/// by 33, multiply by 0xff51afd7ed558ccd, xor-shift by 33, multiply by 0xc4ceb9fe1a85ec53,
/// xor-shift by 33. A bijection of `u64` in which every input bit affects every output bit.
pub fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}
