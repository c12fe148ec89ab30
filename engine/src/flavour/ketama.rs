//! libmemcached's weighted ketama (`update_continuum()` in libmemcached `hosts.cc`,
//! `MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED`): the points per server, the labels `host-i` or
//! `host:port-i`, and MD5 digests read as four little-endian u32 points, as its
//! `ketama_server_hash()` reads them (Predis `KetamaRing` reads its digests the same way).

use md5::{Digest, Md5};

use super::push_decimal;

/// libmemcached's `MEMCACHED_POINTS_PER_SERVER_KETAMA`: points per server at an equal share.
pub const KETAMA_POINTS_PER_SERVER: u32 = 160;
/// libmemcached's `MEMCACHED_DEFAULT_PORT`, dropped from ketama labels.
pub const KETAMA_DEFAULT_PORT: &[u8] = b"11211";

/// The little-endian u32 at byte `4 * alignment` of MD5(`bytes`), as libmemcached's
/// `ketama_server_hash()`; `alignment` 0 is its member hash. `alignment` must be 0..=3.
pub fn md5_le_u32(bytes: &[u8], alignment: usize) -> u32 {
    let digest = Md5::digest(bytes);
    let mut word = [0u8; 4];
    if let Some(src) = digest.get(alignment * 4..alignment * 4 + 4) {
        word.copy_from_slice(src);
    }
    u32::from_le_bytes(word)
}

/// Writes libmemcached's ketama label of digest `i` of `node` into `label`: `host-i` when the
/// node's port is 11211 or absent (libmemcached's default port), else `host:port-i`. The port is
/// the run of digits after the last `:`; a name without one is a host on the default port.
pub fn ketama_label(node: &[u8], i: u32, label: &mut Vec<u8>) {
    label.clear();
    label.extend_from_slice(ketama_host(node));
    label.push(b'-');
    push_decimal(label, i);
}

/// The part of a node name that prefixes its ketama labels (see [`ketama_label`]).
pub fn ketama_host(node: &[u8]) -> &[u8] {
    match node.iter().rposition(|&b| b == b':') {
        Some(colon) => {
            let (host, port) = (&node[..colon], &node[colon + 1..]);
            if port == KETAMA_DEFAULT_PORT {
                host
            } else {
                node
            }
        }
        None => node,
    }
}

/// Points per server on a weighted ketama ring, in server order, as libmemcached
/// `update_continuum()` computes them: `pct = weight / total_weight` in single precision, then
/// `floor(pct * 160 / 4 * servers + 1e-10) * 4` with every product in single precision. This is
/// why equal weights give some servers 156 points at certain server counts, and why a very light
/// server can get 0 points.
pub fn ketama_point_counts(weights: &[u32]) -> Vec<u32> {
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    let servers = weights.len() as f32;
    weights
        .iter()
        .map(|&w| {
            if total == 0 {
                return 0;
            }
            let pct = w as f32 / total as f32;
            let per_hash = pct * KETAMA_POINTS_PER_SERVER as f32 / 4.0f32 * servers;
            let labels = (f64::from(per_hash) + 0.000_000_000_1).floor();
            // A share is at most 1, so labels <= 40 * servers: the cast cannot saturate
            // for any ring that fits in memory.
            (labels as u32).saturating_mul(4)
        })
        .collect()
}

/// Appends the points of MD5 labels `from / 4 .. to / 4`: each label is `prefix` (an MD5
/// state) continued with its decimal index, and gives four little-endian u32 points, as
/// libmemcached's ketama and Predis `KetamaRing` read a digest.
pub(super) fn push_md5_points(prefix: &Md5, from: u32, to: u32, out: &mut Vec<u64>) {
    let mut digits = Vec::with_capacity(10);
    for i in from / 4..to / 4 {
        digits.clear();
        push_decimal(&mut digits, i);
        let mut md5 = prefix.clone();
        md5.update(&digits);
        let digest = md5.finalize();
        for chunk in digest.chunks_exact(4) {
            let word = [chunk[0], chunk[1], chunk[2], chunk[3]];
            out.push(u64::from(u32::from_le_bytes(word)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ketama_counts_single_precision() {
        // Expected counts computed independently in Python with every step rounded to IEEE
        // single precision (struct.pack('f')): equal servers get 160 points, except at server
        // counts such as 25, 47, 50 and 100, where the float product falls just under 40.
        assert_eq!(ketama_point_counts(&[1, 1]), vec![160, 160]);
        assert_eq!(ketama_point_counts(&[1; 10]), vec![160; 10]);
        assert_eq!(ketama_point_counts(&[1; 25]), vec![156; 25]);
        assert_eq!(ketama_point_counts(&[1; 50]), vec![156; 50]);
        assert_eq!(ketama_point_counts(&[1; 100]), vec![156; 100]);
    }
}
