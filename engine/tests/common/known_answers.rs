//! Known-answer files and seeded randomness for tests: the rows of a vectors file (each
//! naming its source in its comments), hex-written members, and a small deterministic PRNG.
//! Shared by the engine's own tests (engine/tests/common) and the test harness (its prelude
//! includes this file), so that there is one reader of the vectors.

use std::path::Path;

/// A small deterministic PRNG (xorshift64*), so that failures replay.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is replaced).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// One element of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Bytes from a hex string (vectors files); panics on bad hex, which is a broken vectors file.
pub fn from_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The rows of the known-answer file at `path`, comment lines and header dropped, each row
/// split on tabs; panics when it cannot be read (a broken checkout).
pub fn rows(path: &Path) -> Vec<Vec<String>> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .skip(1)
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}
