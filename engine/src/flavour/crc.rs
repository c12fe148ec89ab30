//! CRC32-IEEE (through the `crc32fast` crate) over a node name, worked out once per name
//! ([`CrcSpan`]), for groupcache's labels, which put the name after the index.

/// What CRC32-IEEE over a fixed byte string (a node name) does to a CRC: the CRC of `x` then
/// the name is affine in the CRC of `x` over GF(2) (a CRC register is a linear shift register;
/// the initial and final inversions add constants), so it is worked out once per name from 33
/// passes over it (the zero CRC and each single bit) and applied as four byte tables.
pub(super) struct CrcSpan<'a> {
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
    pub(super) fn new(bytes: &'a [u8]) -> CrcSpan<'a> {
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
    pub(super) fn apply(&self, crc: u32) -> u32 {
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
