//! Cross-checks `ringslot_engine::key_slot` against a real Redis: every expected slot here is
//! the reply of `CLUSTER KEYSLOT <member>` from a plain `redis-server --cluster-enabled yes`
//! (Debian redis-server 7.0.15), with the member sent as a binary-safe bulk string.
//!
//! The server (ringslot-harness) is started on a free loopback port in its own temporary
//! directory and stopped when the test ends (also on panic, through `Drop`).

use ringslot_harness::prelude::*;
use ringslot_harness::redis;

use ringslot_engine::key_slot;

/// Hand-written members exercising the hash-tag rules of the Redis Cluster specification
/// (first `{`, first `}` after it, non-empty span) and non-ASCII text.
fn tag_rule_members() -> Vec<Vec<u8>> {
    let text: &[&str] = &[
        "",
        "{}",
        "{{a}}",
        "a{b}c",
        "{a}{b}",
        "}{a}",
        "{",
        "}",
        "}{",
        "{}{a}",
        "a{}b",
        "a{}{b}",
        "{a",
        "a}",
        "{{}}",
        "{}}",
        "{{}",
        "{a}}",
        "{{a}",
        "}}{{a}}",
        "{ }",
        "{a}",
        "a",
        "user:{1000}.following",
        "user:{1000}.followers",
        "foo{}{bar}",
        "foo{{bar}}zap",
        "foo{bar}{zap}",
        "中文",
        "{中文}",
        "x{中文}y",
        "中{文}",
        "😀",
        "{😀}",
        "emoji:😀🎉",
        "ключ",
        "キー{タグ}",
        "🔑{🏷}",
        "{🏷}🔑",
        "Ünïcödé",
        "\u{0}",
        "{\u{0}}",
        "a\u{0}b",
        "\u{0}{a}",
        "{a\u{0}}",
    ];
    let mut out: Vec<Vec<u8>> = text.iter().map(|s| s.as_bytes().to_vec()).collect();
    // Raw (non-UTF-8) bytes around braces.
    out.push(vec![0xFF, b'{', 0xFE, b'}', 0x00]);
    out.push(vec![b'{', 0x00, b'}']);
    out.push(vec![b'{', 0x80, 0x81, b'}', b'{', 0x82, b'}']);
    out.push(vec![0x00; 64]);
    out.push(vec![0xFF; 64]);
    out.push(vec![b'{'; 100]);
    out.push(vec![b'}'; 100]);
    // Long members (the whole key is hashed, or only the short tag).
    out.push(vec![b'x'; 10_000]);
    let mut long_tag = vec![b'y'; 5_000];
    long_tag.extend_from_slice(b"{t}");
    long_tag.extend(vec![b'z'; 5_000]);
    out.push(long_tag);
    out
}

/// Generated members: ASCII, UTF-8, and random binary with `0x00`, `{` and `}` sprinkled in.
fn generated_members() -> Vec<Vec<u8>> {
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::new();
    for i in 0..1000 {
        out.push(format!("key:{i}").into_bytes());
        out.push(format!("user:{{{}}}:profile", i % 97).into_bytes());
    }
    let words = [
        "中文",
        "日本語",
        "😀",
        "🎉",
        "ключ",
        "ä",
        "{",
        "}",
        "x",
        "é",
        "\u{0}",
    ];
    for _ in 0..500 {
        let n = rng.below(8);
        let s: String = (0..n).map(|_| words[rng.below(words.len())]).collect();
        out.push(s.into_bytes());
    }
    for _ in 0..2000 {
        let n = rng.below(48);
        let bytes: Vec<u8> = (0..n)
            .map(|_| match rng.below(8) {
                0 => 0x00,
                1 => b'{',
                2 => b'}',
                _ => rng.next_u64() as u8,
            })
            .collect();
        out.push(bytes);
    }
    out
}

/// The members and expected slots of `tests/vectors/keyslot.tsv`.
fn vector_rows() -> Vec<(Vec<u8>, u16)> {
    vectors("keyslot.tsv")
        .into_iter()
        .map(|row| {
            let key = from_hex(row.first().map(String::as_str).unwrap_or(""));
            let slot: u16 = row
                .get(1)
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or_else(|| panic!("bad keyslot.tsv row {row:?}"));
            (key, slot)
        })
        .collect()
}

#[test]
fn vectors_match_engine_offline() {
    let rows = vector_rows();
    assert!(rows.len() >= 20, "keyslot.tsv has only {} rows", rows.len());
    for (key, slot) in rows {
        // Expected value: the vectors file, itself recorded from CLUSTER KEYSLOT on 7.0.15.
        assert_eq!(key_slot(&key), slot, "member {key:02x?}");
    }
}

#[test]
fn key_slot_matches_cluster_keyslot() {
    let server = Server::start_cluster_node(&[]);
    let mut con = server.client();

    let rows = vector_rows();
    let mut members: Vec<Vec<u8>> = rows.iter().map(|(k, _)| k.clone()).collect();
    members.extend(tag_rule_members());
    members.extend(generated_members());
    assert!(members.len() > 4000, "only {} members", members.len());

    // Ask the real server, pipelined in batches.
    let mut real: Vec<u16> = Vec::with_capacity(members.len());
    for batch in members.chunks(500) {
        let mut pipe = redis::pipe();
        for m in batch {
            pipe.cmd("CLUSTER").arg("KEYSLOT").arg(&m[..]);
        }
        let slots: Vec<u16> = pipe.query(&mut con).expect("CLUSTER KEYSLOT pipeline");
        assert_eq!(slots.len(), batch.len());
        real.extend(slots);
    }

    // The vectors file agrees with the live server too.
    for ((key, slot), live) in rows.iter().zip(&real) {
        assert_eq!(slot, live, "keyslot.tsv row {key:02x?} vs CLUSTER KEYSLOT");
    }

    // Every member: engine == CLUSTER KEYSLOT (the expected value is the server's reply).
    let mismatches: Vec<String> = members
        .iter()
        .zip(&real)
        .filter(|(m, &live)| key_slot(m) != live)
        .map(|(m, &live)| {
            format!(
                "member {:02x?} ({:?}): engine {} CLUSTER KEYSLOT {}",
                m,
                String::from_utf8_lossy(m),
                key_slot(m),
                live
            )
        })
        .take(20)
        .collect();
    assert!(
        mismatches.is_empty(),
        "key_slot differs from CLUSTER KEYSLOT:\n{}",
        mismatches.join("\n")
    );
}
