//! What the tool's tests share: running the `ringslot` binary and reading the CSV files it
//! writes under `--out`.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};

/// Runs `ringslot args...`.
pub fn ringslot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringslot"))
        .args(args)
        .output()
        .expect("run ringslot")
}

/// [`ringslot`] killed if it runs past `limit` (a hang: the test fails, naming it).
pub fn ringslot_within(args: &[&str], limit: std::time::Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringslot"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run ringslot");
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().expect("wait for ringslot").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ringslot {args:?} still ran after {limit:?}: it hangs");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().expect("ringslot's output")
}

/// [`ringslot`] that must succeed; returns its standard output.
pub fn ok(args: &[&str]) -> String {
    let out = ringslot(args);
    assert!(
        out.status.success(),
        "ringslot {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 stdout")
}

/// The rows of a CSV the tool wrote (its fields hold no commas or quotes), each a map from
/// column name to field.
pub fn csv_table(path: &Path) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(path).expect("read the CSV");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    lines
        .map(|l| {
            header
                .iter()
                .zip(l.split(','))
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// Values DUMP's LZF cannot compress (a repeated byte would weigh a few bytes), from a fixed
/// xorshift64 (Marsaglia, "Xorshift RNGs", 2003: shifts 13, 7, 17).
pub struct Noise(pub u64);

impl Noise {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}
