//! The ring flavours: how node points and member hashes are computed.
//!
//! - `Native`: the strong native hash, [`native_hash`]: FNV-1a-64 (the FNV reference, 64-bit
//!   offset basis and prime) followed by MurmurHash3's 64-bit finalizer `fmix64` (Austin
//!   Appleby, `MurmurHash3.cpp`, public domain), which spreads every input bit over the whole
//!   result. Point `k` (1-based) of a node is the hash of the label `node#k`, the form of the
//!   seed article (`127.0.0.1#1`, `127.0.0.1#2`); member hash = the hash of the member.
//! - `NativeFnv` (`native-fnv`): ringslot 0.1's native rule, kept so that rings saved by it
//!   keep their placement and so that users can see what a weak hash does: plain FNV-1a-64 of
//!   the label decimal virtual-node index + `#` + `node` + `#` + the same decimal index
//!   (0-based); member hash = plain FNV-1a-64 of the member. FNV-1a's last bytes move only the
//!   low and middle bits of the hash (each byte is followed by a single multiply by the prime
//!   `2^40 + 0x1b3`), so labels that differ only at their end land next to each other on the
//!   circle; the label puts the index at both ends to keep points apart (BENCHMARKS.md,
//!   "Figures behind the code", gives the balance of each label). Members that differ only at
//!   their end (`key:0`, `key:1`, ...) still land in small clusters, so a sample of them
//!   estimates moved fractions less precisely than its size suggests.
//! - `Ketama`: libmemcached's weighted ketama (`update_continuum()` in libmemcached
//!   `hosts.cc`, `MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED`): MD5 of `host-i` (port 11211 or none) or
//!   `host:port-i`, four little-endian u32 points per digest; member hash = first little-endian
//!   u32 of MD5(member).
//! - `Groupcache`: groupcache `consistenthash`: CRC32-IEEE of decimal `i` followed by the node
//!   name; member hash = CRC32-IEEE of the member.

use md5::{Digest, Md5};
use std::hash::Hasher;

/// A ring flavour. Points of every flavour are stored as `u64`; ketama and groupcache points
/// use only the low 32 bits (their hash space is `2^32`, native's is `2^64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavour {
    /// FNV-1a-64 + fmix64 points, ties broken by node name (bytewise, lower wins).
    Native,
    /// libmemcached weighted ketama; ties broken by server order, as libmemcached sorts them.
    Ketama,
    /// groupcache consistenthash; ties broken by node name (groupcache lets the last-added
    /// node win a collided point, which would make the ring depend on insertion order).
    Groupcache,
    /// ringslot 0.1's native rule: plain FNV-1a-64 points and members, ties by node name.
    NativeFnv,
}

/// libmemcached's `MEMCACHED_POINTS_PER_SERVER_KETAMA`: points per server at an equal share.
pub const KETAMA_POINTS_PER_SERVER: u32 = 160;
/// libmemcached's `MEMCACHED_DEFAULT_PORT`, dropped from ketama labels.
pub const KETAMA_DEFAULT_PORT: &[u8] = b"11211";

impl Flavour {
    /// All flavours, in the order they are documented.
    pub const ALL: [Flavour; 4] = [
        Flavour::Native,
        Flavour::Ketama,
        Flavour::Groupcache,
        Flavour::NativeFnv,
    ];

    /// The flavour's name as `RING.INFO` shows it and `COMPAT` takes it.
    pub const fn name(self) -> &'static str {
        match self {
            Flavour::Native => "native",
            Flavour::Ketama => "ketama",
            Flavour::Groupcache => "groupcache",
            Flavour::NativeFnv => "native-fnv",
        }
    }

    /// The flavour named `name` (ASCII case-insensitive), `None` for an unknown name.
    pub fn from_name(name: &[u8]) -> Option<Flavour> {
        Flavour::ALL
            .into_iter()
            .find(|f| f.name().as_bytes().eq_ignore_ascii_case(name))
    }

    /// The flavour's code in the RDB encoding of a ring (encoding version 2): 0 native,
    /// 1 ketama, 2 groupcache, 3 native-fnv.
    pub fn code(self) -> u64 {
        match self {
            Flavour::Native => 0,
            Flavour::Ketama => 1,
            Flavour::Groupcache => 2,
            Flavour::NativeFnv => 3,
        }
    }

    /// The flavour of RDB code `code` (see [`Flavour::code`]), `None` for an unknown code.
    pub fn from_code(code: u64) -> Option<Flavour> {
        Flavour::ALL.into_iter().find(|f| f.code() == code)
    }

    /// The flavour of code `code` in a payload of encoding version 1 (ringslot 0.1), whose
    /// code 0 was the native rule of that release, now `native-fnv`: a ring saved by 0.1
    /// loads with exactly the placement it had. `None` for an unknown code.
    pub fn from_code_v1(code: u64) -> Option<Flavour> {
        match code {
            0 => Some(Flavour::NativeFnv),
            1 => Some(Flavour::Ketama),
            2 => Some(Flavour::Groupcache),
            _ => None,
        }
    }

    /// Virtual nodes per unit of weight when `VNODES` is not given: 160 (native; and ketama's
    /// fixed 160 per equal share), 50 for groupcache (its tests' replica count).
    pub const fn default_vnodes(self) -> u32 {
        match self {
            Flavour::Native | Flavour::NativeFnv | Flavour::Ketama => KETAMA_POINTS_PER_SERVER,
            Flavour::Groupcache => 50,
        }
    }

    /// Whether the flavour fixes the points per node, so that `VNODES` cannot be set.
    pub fn fixes_vnodes(self) -> bool {
        self == Flavour::Ketama
    }

    /// Bits of the flavour's hash space: 64 (native, native-fnv) or 32 (ketama, groupcache).
    pub fn hash_bits(self) -> u32 {
        match self {
            Flavour::Native | Flavour::NativeFnv => 64,
            Flavour::Ketama | Flavour::Groupcache => 32,
        }
    }

    /// Number of distinct hash values: `2^hash_bits`.
    pub fn space(self) -> u128 {
        1u128 << self.hash_bits()
    }

    /// Whether equal points are ordered by node name (native, groupcache, native-fnv) rather
    /// than by the
    /// node's position in the ring (ketama).
    pub fn ties_by_name(self) -> bool {
        self != Flavour::Ketama
    }

    /// The hash of a member on this flavour's circle (see the module docs for each flavour).
    pub fn member_hash(self, member: &[u8]) -> u64 {
        match self {
            Flavour::Native => native_hash(member),
            Flavour::NativeFnv => fnv1a64(member),
            Flavour::Ketama => u64::from(md5_le_u32(member, 0)),
            Flavour::Groupcache => u64::from(crc32fast::hash(member)),
        }
    }

    /// Appends to `out` the points `from..to` of `node` (indices count points, not labels).
    /// For ketama, `from` and `to` are multiples of 4: label `i` yields points `4i..4i+4`.
    ///
    /// The node's name is hashed once for all its points, not once per label, so that the work
    /// does not multiply the name's length by its points (a 64 KiB name with 100000 points
    /// would hash 6.5 GB): the hash state after the label's fixed prefix is kept and continued
    /// with each label's digits (native: `node#`; ketama: `host-`, MD5's state), or the name's
    /// effect on the state is worked out once (groupcache: CRC32 is affine in its starting
    /// state over the name; native-fnv, whose labels start with the index: see
    /// [`FnvSpan`]). The points are bit for bit those of hashing each label whole.
    pub fn push_points(self, node: &[u8], from: u32, to: u32, out: &mut Vec<u64>) {
        let mut digits = Vec::with_capacity(24);
        match self {
            Flavour::Native => {
                let prefix = fnv_state(FNV_OFFSET, node, b"#");
                for i in from..to {
                    digits.clear();
                    push_decimal(&mut digits, i.saturating_add(1));
                    out.push(fmix64(fnv_state(prefix, &digits, b"")));
                }
            }
            Flavour::NativeFnv => {
                let span = FnvSpan::new(node);
                let mut offsets = [None; 256];
                for i in from..to {
                    digits.clear();
                    push_decimal(&mut digits, i);
                    let before = fnv_state(FNV_OFFSET, &digits, b"#");
                    let after = span.apply(before, &mut offsets);
                    out.push(fnv_state(after, b"#", &digits));
                }
            }
            Flavour::Groupcache => {
                let span = CrcSpan::new(node);
                for i in from..to {
                    digits.clear();
                    push_decimal(&mut digits, i);
                    out.push(u64::from(span.apply(crc32fast::hash(&digits))));
                }
            }
            Flavour::Ketama => {
                let mut prefix = Md5::new();
                prefix.update(ketama_host(node));
                prefix.update(b"-");
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
        }
    }
}

/// FNV-1a-64's offset basis and prime (the FNV reference).
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a-64's state after `a` then `b`, from `state`.
fn fnv_state(state: u64, a: &[u8], b: &[u8]) -> u64 {
    let mut hasher = fnv::FnvHasher::with_key(state);
    hasher.write(a);
    hasher.write(b);
    hasher.finish()
}

/// What FNV-1a-64 over a fixed byte string (a node name) does to any starting state, worked
/// out once per name. A step is `h -> (h xor byte) * prime`; `h xor byte` is `h + d` where
/// `d` depends only on the low 8 bits of `h`, and those bits after a step depend only on
/// those before it (a product's low bits come from the factors' low bits). So over `L` bytes,
/// `h -> h * prime^L + C(h mod 256)`, with one offset `C` per starting low byte, each found by
/// hashing the name once from that byte: at most 256 passes over the name per node, however
/// many labels (`i#node#i`, ringslot 0.1's native) it has.
struct FnvSpan<'a> {
    bytes: &'a [u8],
    /// `prime^len(bytes)`, wrapping.
    scale: u64,
}

impl<'a> FnvSpan<'a> {
    /// The span of `bytes`.
    fn new(bytes: &'a [u8]) -> FnvSpan<'a> {
        let mut scale = 1u64;
        for _ in bytes {
            scale = scale.wrapping_mul(FNV_PRIME);
        }
        FnvSpan { bytes, scale }
    }

    /// FNV-1a-64's state after the span's bytes, from `state`; `offsets` caches the offset of
    /// each starting low byte (start with all `None`, keep it for the span's lifetime).
    fn apply(&self, state: u64, offsets: &mut [Option<u64>; 256]) -> u64 {
        let low = (state & 0xff) as usize;
        let offset = match offsets.get(low).copied().flatten() {
            Some(c) => c,
            None => {
                let c = fnv_state(low as u64, self.bytes, b"")
                    .wrapping_sub((low as u64).wrapping_mul(self.scale));
                if let Some(slot) = offsets.get_mut(low) {
                    *slot = Some(c);
                }
                c
            }
        };
        state.wrapping_mul(self.scale).wrapping_add(offset)
    }
}

/// What CRC32-IEEE over a fixed byte string (a node name) does to a CRC: the CRC of `x` then
/// the name is affine in the CRC of `x` over GF(2) (a CRC register is a linear shift register;
/// the initial and final inversions add constants), so it is worked out once per name from 33
/// passes over it (the zero CRC and each single bit) and applied as four byte tables.
struct CrcSpan<'a> {
    bytes: &'a [u8],
    /// `None` for a short name, which is simply hashed again (cheaper than the tables).
    tables: Option<Box<CrcTables>>,
}

/// The affine map of a [`CrcSpan`]: one table per byte of the starting CRC, and the constant.
struct CrcTables {
    bytes: [[u32; 256]; 4],
    constant: u32,
}

/// Names at least this long get [`CrcTables`].
const CRC_TABLES_FROM: usize = 64;

impl<'a> CrcSpan<'a> {
    fn new(bytes: &'a [u8]) -> CrcSpan<'a> {
        let tables = (bytes.len() >= CRC_TABLES_FROM).then(|| {
            let run = |crc: u32| {
                let mut h = crc32fast::Hasher::new_with_initial(crc);
                h.update(bytes);
                h.finalize()
            };
            let constant = run(0);
            let columns: Vec<u32> = (0..32).map(|bit| run(1 << bit) ^ constant).collect();
            let mut t = Box::new(CrcTables {
                bytes: [[0; 256]; 4],
                constant,
            });
            for (k, table) in t.bytes.iter_mut().enumerate() {
                for (value, entry) in table.iter_mut().enumerate() {
                    *entry = (0..8)
                        .filter(|bit| value >> bit & 1 == 1)
                        .filter_map(|bit| columns.get(8 * k + bit))
                        .fold(0, |acc, c| acc ^ c);
                }
            }
            t
        });
        CrcSpan { bytes, tables }
    }

    /// The CRC32 of `x` followed by the span's bytes, given `crc`, the CRC32 of `x`.
    fn apply(&self, crc: u32) -> u32 {
        match &self.tables {
            Some(t) => {
                let [b0, b1, b2, b3] = crc.to_le_bytes();
                t.constant
                    ^ t.bytes[0][usize::from(b0)]
                    ^ t.bytes[1][usize::from(b1)]
                    ^ t.bytes[2][usize::from(b2)]
                    ^ t.bytes[3][usize::from(b3)]
            }
            None => {
                let mut h = crc32fast::Hasher::new_with_initial(crc);
                h.update(self.bytes);
                h.finalize()
            }
        }
    }
}

impl std::fmt::Display for Flavour {
    /// The flavour's name, as `RING.INFO` shows it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The native flavour's hash: [`fmix64`] of [`fnv1a64`].
pub fn native_hash(bytes: &[u8]) -> u64 {
    fmix64(fnv1a64(bytes))
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

/// FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3), as the FNV reference.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

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

/// Writes the native label of virtual node `i` (0-based) of `node` into `label`: `node`, `#`,
/// decimal `i + 1`, as the seed article labels virtual nodes (`127.0.0.1#1`, `127.0.0.1#2`).
pub fn native_label(node: &[u8], i: u32, label: &mut Vec<u8>) {
    label.clear();
    label.extend_from_slice(node);
    label.push(b'#');
    push_decimal(label, i.saturating_add(1));
}

/// Writes the native-fnv label of virtual node `i` of `node` into `label`: decimal `i`, `#`,
/// `node`, `#`, decimal `i` (see the module docs for why the index is at both ends).
pub fn native_fnv_label(node: &[u8], i: u32, label: &mut Vec<u8>) {
    label.clear();
    push_decimal(label, i);
    label.push(b'#');
    label.extend_from_slice(node);
    label.push(b'#');
    push_decimal(label, i);
}

/// Writes groupcache's label of replica `i` of `node` into `label`: decimal `i` then the node,
/// as `strconv.Itoa(i) + key` in groupcache `consistenthash.Map.Add`.
pub fn groupcache_label(node: &[u8], i: u32, label: &mut Vec<u8>) {
    label.clear();
    push_decimal(label, i);
    label.extend_from_slice(node);
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

fn push_decimal(out: &mut Vec<u8>, value: u32) {
    let mut digits = [0u8; 10];
    let mut n = value;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[..len].iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        let mut l = Vec::new();
        // The seed article's form: point 1 of 127.0.0.1 is "127.0.0.1#1".
        native_label(b"127.0.0.1", 0, &mut l);
        assert_eq!(l, b"127.0.0.1#1");
        native_label(b"a#1", 22, &mut l);
        assert_eq!(l, b"a#1#23");
        native_fnv_label(b"node-1", 0, &mut l);
        assert_eq!(l, b"0#node-1#0");
        native_fnv_label(b"a#1", 23, &mut l);
        assert_eq!(l, b"23#a#1#23");
        groupcache_label(b"a", 12, &mut l);
        assert_eq!(l, b"12a");
        ketama_label(b"10.0.1.1:11211", 3, &mut l);
        assert_eq!(l, b"10.0.1.1-3");
        ketama_label(b"10.0.1.1:6379", 0, &mut l);
        assert_eq!(l, b"10.0.1.1:6379-0");
        ketama_label(b"cache", 4294967295, &mut l);
        assert_eq!(l, b"cache-4294967295");
    }

    /// The points of `node` as the labels define them: each label hashed whole.
    fn points_label_by_label(f: Flavour, node: &[u8], from: u32, to: u32) -> Vec<u64> {
        let mut label = Vec::new();
        let mut out = Vec::new();
        match f {
            Flavour::Ketama => {
                for i in from / 4..to / 4 {
                    ketama_label(node, i, &mut label);
                    out.extend((0..4).map(|a| u64::from(md5_le_u32(&label, a))));
                }
            }
            _ => {
                for i in from..to {
                    let h = match f {
                        Flavour::Native => {
                            native_label(node, i, &mut label);
                            native_hash(&label)
                        }
                        Flavour::NativeFnv => {
                            native_fnv_label(node, i, &mut label);
                            fnv1a64(&label)
                        }
                        _ => {
                            groupcache_label(node, i, &mut label);
                            u64::from(crc32fast::hash(&label))
                        }
                    };
                    out.push(h);
                }
            }
        }
        out
    }

    #[test]
    fn points_equal_their_labels_hashed_whole() {
        // Names short and long (past the CRC tables' threshold, and with every byte value),
        // ranges from 0 and from the middle, past 256 labels (every low byte of FNV's state).
        let mut names: Vec<Vec<u8>> = vec![
            b"a".to_vec(),
            b"10.0.0.1:6379".to_vec(),
            b"10.0.1.1:11211".to_vec(),
            (0..=255u8).collect(),
            vec![b'x'; 1000],
        ];
        names.push([b"host:".as_slice(), &[0xff; 70], b":11211"].concat());
        for f in Flavour::ALL {
            for name in &names {
                for (from, to) in [(0, 8), (4, 600), (996, 1000)] {
                    let mut out = Vec::new();
                    f.push_points(name, from, to, &mut out);
                    assert_eq!(
                        out,
                        points_label_by_label(f, name, from, to),
                        "{f:?} {} bytes {from}..{to}",
                        name.len()
                    );
                }
            }
        }
    }

    #[test]
    fn flavour_names_and_codes_round_trip() {
        for f in Flavour::ALL {
            assert_eq!(Flavour::from_code(f.code()), Some(f));
            assert_eq!(
                Flavour::from_name(f.name().to_uppercase().as_bytes()),
                Some(f)
            );
        }
        assert_eq!(Flavour::from_name(b"jump"), None);
        assert_eq!(Flavour::from_code(4), None);
        // Version-1 payloads: code 0 was 0.1's native, now native-fnv.
        assert_eq!(Flavour::from_code_v1(0), Some(Flavour::NativeFnv));
        assert_eq!(Flavour::from_code_v1(1), Some(Flavour::Ketama));
        assert_eq!(Flavour::from_code_v1(2), Some(Flavour::Groupcache));
        assert_eq!(Flavour::from_code_v1(3), None);
    }

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
