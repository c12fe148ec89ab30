//! What the engine's tests share: the known-answer files of engine/tests/vectors/ and a seeded
//! PRNG ([`known_answers`], which the test harness includes too).

#![allow(dead_code, unused_imports)]

#[path = "known_answers.rs"]
mod known_answers;

pub use known_answers::{from_hex, Rng};

/// The rows of `engine/tests/vectors/<name>` (see [`known_answers::rows`]).
pub fn vectors(name: &str) -> Vec<Vec<String>> {
    known_answers::rows(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/vectors")
            .join(name),
    )
}
