//! mcrouter's `Ch3HashFunc`: `furc_hash()`, its seed and rehash (`mcrouter/lib/fbi/hash.c`),
//! and the part of a key it routes by (`Keys::update()` in `mcrouter/lib/Keys.cpp`). Its key
//! hash, MurmurHash64A, is in `murmur2.rs`.

use super::murmur_hash_64a;

/// mcrouter's furc_hash seed (`SEED` in `mcrouter/lib/fbi/hash.c`).
pub const MCROUTER_FURC_SEED: u32 = 4_193_360_111;

/// mcrouter's routing key of `key`: after a leading `/region/cluster/` (a `/` first and two
/// more), up to `|#|` (see [`Flavour::routing_key`](super::Flavour::routing_key)).
pub fn mcrouter_routing_key(key: &[u8]) -> &[u8] {
    let mut rest = key;
    if key.first() == Some(&b'/') {
        let mut pos = Some(1usize);
        for _ in 0..2 {
            pos = pos.and_then(|p| {
                key.get(p..)
                    .and_then(|tail| tail.iter().position(|&b| b == b'/'))
                    .map(|i| p + i + 1)
            });
        }
        if let Some(p) = pos {
            rest = key.get(p..).unwrap_or(&[]);
        }
    }
    match rest.windows(3).position(|w| w == b"|#|") {
        Some(end) => rest.get(..end).unwrap_or(rest),
        None => rest,
    }
}

/// mcrouter's `furc_hash()` (`mcrouter/lib/fbi/hash.c`) given the key's MurmurHash64A with
/// the furc seed (`hash0`): an index in `0..n` from a bit stream (64 bits of `hash0`, then of
/// each rehash of the previous 64 bits) walked as a binary decision tree of depth
/// `d = ceil(log2 n)`, bits `FURC_SHIFT` (23) apart, at most 32 tries, else 0.
pub fn furc_hash(hash0: u64, n: u32) -> u32 {
    const SHIFT: u32 = 23;
    const TRIES: u32 = 32;
    if n <= 1 {
        return 0;
    }
    let mut words = vec![hash0];
    let mut bit = |idx: u32| -> u32 {
        let ord = (idx >> 6) as usize;
        while words.len() <= ord {
            let prev = words.last().copied().unwrap_or(hash0);
            words.push(murmur_rehash_64a(prev));
        }
        words
            .get(ord)
            .map_or(0, |w| ((w >> (idx & 0x3f)) & 1) as u32)
    };
    let mut d = 0u32;
    while u64::from(n) > (1u64 << d) {
        d += 1;
    }
    let mut a = d;
    for _ in 0..TRIES {
        while bit(a) == 0 {
            d -= 1;
            if d == 0 {
                return 0;
            }
            a = d;
        }
        a += SHIFT;
        let mut num = 1u32;
        for _ in 0..d.saturating_sub(1) {
            num = (num << 1) | bit(a);
            a += SHIFT;
        }
        if num < n {
            return num;
        }
    }
    0
}

/// mcrouter's `murmur_rehash_64A()`: MurmurHash64A of the 8 bytes of `k` with the furc seed.
fn murmur_rehash_64a(k: u64) -> u64 {
    murmur_hash_64a(&k.to_le_bytes(), MCROUTER_FURC_SEED)
}
