//! HAProxy 2.6 `hash-type consistent` (`src/lb_chash.c`): points per unit of weight and the
//! keys of a server's points, `full_hash()` (`include/haproxy/intops.h`) and `hash_sdbm()`
//! (`src/hash.c`).

/// HAProxy's `BE_WEIGHT_SCALE`: points per unit of weight of a consistent-hash server.
pub const HAPROXY_POINTS_PER_WEIGHT: u32 = 16;
/// HAProxy's `SRV_EWGHT_RANGE` (256 x 16): point `i` of server `puid` is keyed
/// `puid x 4096 + i` (`chash_init_server_tree()` in `src/lb_chash.c`).
pub(super) const HAPROXY_POINT_KEYS: u32 = 4096;

/// HAProxy's `full_hash()` (`include/haproxy/intops.h`): Bob Jenkins' six-step 32-bit integer
/// hash, then a multiply by `0xC0000001`; a bijection of `u32`. HAProxy keys its
/// consistent-hash points with it, and by default passes the request hash through it too.
pub fn haproxy_full_hash(mut a: u32) -> u32 {
    a = a.wrapping_add(0x7ed5_5d16).wrapping_add(a << 12);
    a = (a ^ 0xc761_c23c) ^ (a >> 19);
    a = a.wrapping_add(0x1656_67b1).wrapping_add(a << 5);
    a = a.wrapping_add(0xd3a2_646c) ^ (a << 9);
    a = a.wrapping_add(0xfd70_46c5).wrapping_add(a << 3);
    a = (a ^ 0xb55a_4f09) ^ (a >> 16);
    a.wrapping_mul(0xC000_0001)
}

/// The sdbm string hash as HAProxy's `hash_sdbm()` (`src/hash.c`): `h = h x 65599 + byte`
/// over unsigned bytes, in 32 bits, from 0.
pub fn sdbm(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0u32, |h, &c| {
        h.wrapping_mul(65599).wrapping_add(u32::from(c))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn haproxy_hashes_match_haproxy() {
        // Values of HAProxy 2.6's `full_hash()` and `hash_sdbm()` (include/haproxy/intops.h,
        // src/hash.c) worked out by hand from their definitions and confirmed against the
        // 2.6.12 binary through the points they place (tests/compat_real.rs).
        assert_eq!(haproxy_full_hash(0), 0xab4e_d927);
        assert_eq!(haproxy_full_hash(1), 0x3486_81b6);
        assert_eq!(haproxy_full_hash(4096), 0x49c2_008b);
        assert_eq!(sdbm(b""), 0);
        assert_eq!(sdbm(b"abc"), 0x3025_f862);
    }
}
