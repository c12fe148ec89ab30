//! go-redis v9 `Ring`: the rendezvous score mix of dgryski/go-rendezvous (`xorshiftMult64`);
//! the rendezvous itself is in `ring/table.rs`.

/// go-redis's rendezvous score mix (dgryski/go-rendezvous `xorshiftMult64`): xor-shifts by 12,
/// 25 and 27, then a multiply by 2685821657736338717.
pub fn xorshift_mult64(mut x: u64) -> u64 {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    x.wrapping_mul(2_685_821_657_736_338_717)
}
