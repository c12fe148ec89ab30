//! The members of `RING.MOVES ... SAMPLE n`: synthetic member names, so that a what-if can be
//! asked without any data in the database.

/// Members evaluated when neither `SAMPLE` nor `KEYS` is given.
pub const DEFAULT_SAMPLE: u64 = 100_000;

/// The `count` sample members of the ring called `prefix`: `prefix:0`, `prefix:1`, ...,
/// `prefix:{count-1}` (the decimal index after a colon), in that order.
pub fn sample_members(prefix: &[u8], count: u64) -> impl Iterator<Item = Vec<u8>> + '_ {
    (0..count).map(move |i| {
        let mut member = Vec::with_capacity(prefix.len() + 21);
        member.extend_from_slice(prefix);
        member.push(b':');
        member.extend_from_slice(i.to_string().as_bytes());
        member
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_the_prefix_a_colon_and_the_index() {
        let members: Vec<Vec<u8>> = sample_members(b"cache", 3).collect();
        assert_eq!(members, [&b"cache:0"[..], b"cache:1", b"cache:2"]);
        assert_eq!(sample_members(b"x", 0).count(), 0);
    }
}
