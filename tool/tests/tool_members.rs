//! `ringslot members` against a real memcached (Debian's 1.6.18), dumped live (`lru_crawler
//! metadump hash`) and from a file of `lru_crawler metadump all`: its figures checked against
//! the engine's ring evaluated key by key with the item sizes memcached reports.

mod common;

use common::{csv_table, ok, ringslot};
use ringslot_engine::{Flavour, Ring};
use ringslot_harness::proxy::{text_command, Memcached};
use std::collections::HashMap;

/// Stores `key` with a value of `len` bytes (text protocol `set`).
fn set(m: &Memcached, key: &str, len: usize) {
    let line = format!("set {key} 0 3600 {len}\r\n{}", "x".repeat(len));
    let answer = text_command(&m.address(), &line, |l| !l.is_empty()).unwrap();
    assert_eq!(answer.last().map(String::as_str), Some("STORED"), "{key}");
}

/// Every item by `lru_crawler metadump all`: the raw lines (ending with END), and each key
/// (URI-decoded by hand: the dump escapes `%`, `:` and bytes outside ASCII letters and digits)
/// with its size.
fn metadump_all(m: &Memcached) -> (Vec<String>, HashMap<Vec<u8>, u64>) {
    let lines = text_command(&m.address(), "lru_crawler metadump all", |l| l == "END").unwrap();
    let mut items = HashMap::new();
    for l in &lines {
        let Some(rest) = l.strip_prefix("key=") else {
            continue;
        };
        let mut parts = rest.split(' ');
        let enc = parts.next().unwrap().as_bytes();
        let mut key = Vec::new();
        let mut i = 0;
        while i < enc.len() {
            if enc[i] == b'%' {
                let hex = std::str::from_utf8(&enc[i + 1..i + 3]).unwrap();
                key.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            } else {
                key.push(enc[i]);
                i += 1;
            }
        }
        let size = parts
            .find_map(|p| p.strip_prefix("size="))
            .unwrap()
            .parse()
            .unwrap();
        items.insert(key, size);
    }
    (lines, items)
}

#[test]
fn members_of_a_real_memcached_weigh_their_item_sizes() {
    let m = Memcached::start(64).unwrap_or_else(|e| panic!("{e}"));
    let mut keys = Vec::new();
    for i in 0..3000usize {
        // Keys memcached escapes in its dump: ':' and '%' and UTF-8.
        let key = match i % 3 {
            0 => format!("user:{i}"),
            1 => format!("k%20{i}"),
            _ => format!("caf\u{e9}-{i}"),
        };
        set(&m, &key, 10 + (i * 37) % 900);
        keys.push(key);
    }
    let (lines, items) = metadump_all(&m);
    assert_eq!(items.len(), keys.len(), "metadump all lists every item");
    let nodes = ["10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"];
    let joining = "10.0.0.4:11211";
    // The expected figures: the ketama ring before and after, key by key.
    let ring_of = |names: &[&str]| {
        let mut ring = Ring::new(Flavour::Ketama, 160, false);
        ring.set_nodes(names.iter().map(|n| (n.as_bytes().to_vec(), 1)).collect());
        ring
    };
    let before = ring_of(&nodes);
    let after = ring_of(&[nodes[0], nodes[1], nodes[2], joining]);
    let name = |r: &Ring, k: &[u8]| r.owner(k).map(|i| r.nodes()[i].name.clone());
    let (mut moved, mut moved_bytes, mut bytes) = (0u64, 0u64, 0u64);
    for (k, size) in &items {
        bytes += size;
        if name(&before, k) != name(&after, k) {
            moved += 1;
            moved_bytes += size;
        }
    }
    assert!(moved > 0 && moved_bytes > 0);
    let out = tempfile::tempdir().unwrap();
    let dump = out.path().join("dump.txt");
    std::fs::write(&dump, lines.join("\n")).unwrap();
    let address = m.address();
    for (source, value) in [
        ("--memcached", address.as_str()),
        ("--file", dump.to_str().unwrap()),
    ] {
        let stdout = ok(&[
            "members",
            "--out",
            out.path().to_str().unwrap(),
            source,
            value,
            "--nodes",
            &nodes.join(","),
            "--add",
            joining,
        ]);
        assert!(
            stdout.contains(&format!("{} members", keys.len())),
            "{stdout}"
        );
        assert!(stdout.contains(&format!("{bytes} bytes")), "{stdout}");
        let rows = csv_table(&out.path().join("members.csv"));
        let ring = rows
            .iter()
            .find(|r| r["scheme"] == "ring")
            .expect("a ring row");
        assert_eq!(ring["moved keys"], moved.to_string(), "{source}");
        assert_eq!(ring["moved bytes"], moved_bytes.to_string(), "{source}");
    }
    // --json: one object with the same figures.
    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "members",
        "--json",
        "--file",
        dump.to_str().unwrap(),
        "--nodes",
        &nodes.join(","),
        "--add",
        joining,
    ]))
    .expect("a JSON object");
    assert_eq!(json["members"], keys.len() as u64);
    assert_eq!(json["bytes"], bytes);
    let ring = json["schemes"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["scheme"] == "ring"))
        .expect("a ring row");
    assert_eq!(ring["moved"], moved);
    assert_eq!(ring["moved_bytes"], moved_bytes);
    // The tool names every file it wrote.
    let run = ringslot(&[
        "members",
        "--out",
        out.path().to_str().unwrap(),
        "--file",
        dump.to_str().unwrap(),
        "--nodes",
        &nodes.join(","),
        "--del",
        nodes[0],
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains("members.csv") && stderr.contains("members.md"),
        "{stderr}"
    );
    // A memcached that is not there is an error that names it.
    let out2 = ringslot(&[
        "members",
        "--memcached",
        "127.0.0.1:1",
        "--nodes",
        "a",
        "--add",
        "b",
    ]);
    assert!(!out2.status.success());
    assert!(String::from_utf8_lossy(&out2.stderr).contains("127.0.0.1:1"));
}
