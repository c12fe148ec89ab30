//! python-memcached's `Client`: its key hash, `cmemcache_hash()` (CRC32's bits 16-30); the
//! modula over the servers repeated by weight is in `ring/table.rs`.

/// python-memcached's `cmemcache_hash()`: `((crc32(key) >> 16) & 0x7fff) or 1`.
pub fn python_memcached_hash(key: &[u8]) -> u32 {
    match (crc32fast::hash(key) >> 16) & 0x7fff {
        0 => 1,
        h => h,
    }
}
