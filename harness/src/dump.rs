//! `DUMP` payloads of module values, taken apart and put together again, for the tests that
//! feed `RESTORE` damaged or crafted rings.
//!
//! The layout is Redis' (`rdb.c`, `cluster.c` `createDumpPayload` in Redis 7.0): the value's
//! RDB type (7, `RDB_TYPE_MODULE_2`), the module type id (a 64-bit length: `0x81` and 8 bytes
//! big-endian), the values the type's `rdb_save` wrote, each an opcode (`2` unsigned, `5`
//! string) and its RDB encoding, the module EOF opcode `0`, then a footer: the RDB version
//! (2 bytes, little-endian) and the CRC-64/REDIS of everything before it (8 bytes,
//! little-endian).

use crc::{Crc, CRC_64_REDIS};

const CRC: Crc<u64> = Crc::<u64>::new(&CRC_64_REDIS);

/// The bytes before the module's values: RDB type and module id.
const HEAD: usize = 10;
/// The footer: RDB version and CRC.
const FOOT: usize = 10;

/// One value a module type saves: `RedisModule_SaveUnsigned` or `RedisModule_SaveStringBuffer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    /// An unsigned integer (opcode 2).
    Unsigned(u64),
    /// A string (opcode 5).
    Bytes(Vec<u8>),
}

/// Appends Redis' RDB length encoding of `n` (`rdbSaveLen`).
fn push_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.extend([0x40 | (n >> 8) as u8, n as u8]);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend((n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend(n.to_be_bytes());
    }
}

/// The payload with its CRC recomputed over everything before it (a payload shorter than the
/// footer comes back unchanged).
pub fn with_fixed_crc(payload: &[u8]) -> Vec<u8> {
    let mut out = payload.to_vec();
    if let Some(body) = out.len().checked_sub(8) {
        let crc = CRC.checksum(&out[..body]);
        out[body..].copy_from_slice(&crc.to_le_bytes());
    }
    out
}

/// A module value's payload made from `fields`, with the type id and RDB version of
/// `template`, a real `DUMP` of a value of the same type.
pub fn module_payload(template: &[u8], fields: &[Field]) -> Vec<u8> {
    assert!(template.len() >= HEAD + FOOT, "not a module DUMP payload");
    let mut out = template[..HEAD].to_vec();
    for f in fields {
        match f {
            Field::Unsigned(n) => {
                out.push(2);
                push_len(&mut out, *n);
            }
            Field::Bytes(b) => {
                out.push(5);
                push_len(&mut out, b.len() as u64);
                out.extend_from_slice(b);
            }
        }
    }
    out.push(0);
    let version = &template[template.len() - FOOT..template.len() - 8];
    out.extend_from_slice(version);
    out.extend([0u8; 8]);
    with_fixed_crc(&out)
}

/// The range of a payload's bytes that a mutation may touch to reach the module's values
/// (not the type, the module id or the footer).
pub fn value_bytes(payload: &[u8]) -> std::ops::Range<usize> {
    HEAD.min(payload.len())..payload.len().saturating_sub(FOOT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_is_redis_crc64() {
        // The check value of CRC-64/REDIS (Redis `crc64.c` test: "123456789" ->
        // e9c6d914c4b8d9ca).
        assert_eq!(CRC.checksum(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn lengths_as_redis_encodes_them() {
        let enc = |n| {
            let mut v = Vec::new();
            push_len(&mut v, n);
            v
        };
        assert_eq!(enc(1), [0x01]);
        assert_eq!(enc(160), [0x40, 0xa0]);
        assert_eq!(enc(16383), [0x7f, 0xff]);
        assert_eq!(enc(16384), [0x80, 0, 0, 0x40, 0]);
        assert_eq!(enc(1 << 40), [0x81, 0, 0, 1, 0, 0, 0, 0, 0]);
    }
}
