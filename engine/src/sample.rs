//! The members of `RING.MOVES ... SAMPLE n`: synthetic member names, so that a what-if can be
//! asked without any data in the database.

/// Members evaluated when neither `SAMPLE` nor `KEYS` is given.
pub const DEFAULT_SAMPLE: u64 = 100_000;

/// The longest part of a ring's name that sample members carry: the work of a sample does not
/// grow with the name (a 64 KiB name would make every member 64 KiB long).
pub const SAMPLE_PREFIX_MAX: usize = 64;

/// The `count` sample members of the ring called `name`: `p:0`, `p:1`, ..., `p:{count-1}`,
/// where `p` is the name cut to its first [`SAMPLE_PREFIX_MAX`] bytes (all of it for names up
/// to 64 bytes), then a colon and the decimal index, in that order.
pub fn sample_members(name: &[u8], count: u64) -> impl Iterator<Item = Vec<u8>> + '_ {
    let prefix = name.get(..SAMPLE_PREFIX_MAX).unwrap_or(name);
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
        // A long name is cut to its first 64 bytes.
        let long = vec![b'n'; 65536];
        let first = sample_members(&long, 1).next().unwrap();
        assert_eq!(first, [vec![b'n'; 64], b":0".to_vec()].concat());
    }
}
