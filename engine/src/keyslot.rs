//! Redis Cluster key slots: CRC16-XMODEM of the member (or of its hash tag) modulo 16384.
//!
//! The algorithm is the one of the Redis Cluster specification ("Keys distribution model"):
//! CRC16 in its XMODEM variant (polynomial 0x1021, initial value 0, no reflection, no final
//! XOR), taken of the whole key unless the key holds a hash tag, then `& 16383`.

/// Number of hash slots in a Redis Cluster: slots are numbered `0..SLOT_COUNT`.
pub const SLOT_COUNT: usize = 16384;

/// The hash tag of `member`, as Redis Cluster defines it: the bytes between the first `{` and
/// the first `}` after it, when that span is non-empty. `None` when the member has no such span
/// (no `{`, no `}` after it, or `{}` with nothing inside), in which case the whole member is
/// hashed. Binary-safe: any byte string is accepted.
pub fn hash_tag(member: &[u8]) -> Option<&[u8]> {
    let open = member.iter().position(|&b| b == b'{')?;
    let rest = member.get(open + 1..)?;
    let close = rest.iter().position(|&b| b == b'}')?;
    match rest.get(..close) {
        Some(tag) if !tag.is_empty() => Some(tag),
        _ => None,
    }
}

/// The bytes Redis Cluster hashes for `member`: its hash tag when it has one, else all of it.
pub fn hashed_part(member: &[u8]) -> &[u8] {
    hash_tag(member).unwrap_or(member)
}

/// The hash slot (`0..=16383`) of `member`, identical to `CLUSTER KEYSLOT member`:
/// CRC16-XMODEM (poly 0x1021, as in the Redis Cluster specification) of the member or of its
/// hash tag, `& 16383`.
pub fn key_slot(member: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(hashed_part(member)) & 0x3FFF
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_tag_follows_the_cluster_rule() {
        assert_eq!(hash_tag(b"user:{tag}:1"), Some(&b"tag"[..]));
        assert_eq!(hash_tag(b"{}"), None);
        assert_eq!(hash_tag(b"foo{}{bar}"), None);
        assert_eq!(hash_tag(b"foo{{bar}}zap"), Some(&b"{bar"[..]));
        assert_eq!(hash_tag(b"{bar"), None);
        assert_eq!(hash_tag(b""), None);
    }

    #[test]
    fn crc16_xmodem_check_value() {
        // The CRC catalogue's check value for CRC-16/XMODEM over "123456789" is 0x31C3.
        assert_eq!(
            crc16::State::<crc16::XMODEM>::calculate(b"123456789"),
            0x31C3
        );
        assert_eq!(key_slot(b"123456789"), 0x31C3 & 0x3FFF);
    }
}
