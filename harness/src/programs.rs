//! The workspace's programs run by their tests (`ringslot`, `ringslot-bench`): run, run within
//! a time limit, run to success; the CSV files they write, read back; and values no
//! compression shrinks, for the keys the tests write.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `program args...` and returns what it printed and its status.
pub fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

/// [`run`] killed if it runs past `limit` (a hang: the test fails, naming it).
pub fn run_within(program: &str, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("wait for the program").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{program} {args:?} still ran after {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("the program's output")
}

/// [`run`] that must succeed; returns its standard output (UTF-8).
pub fn ok(program: &str, args: &[&str]) -> String {
    let out = run(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 stdout")
}

/// The rows of a CSV a program wrote (its fields hold no commas or quotes), each a map from
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

/// The rows of a CSV a program wrote, keyed by their cell in column `key` (`scheme`, say).
pub fn csv_rows(path: &Path, key: &str) -> HashMap<String, HashMap<String, String>> {
    csv_table(path)
        .into_iter()
        .map(|row| {
            let k = row
                .get(key)
                .unwrap_or_else(|| panic!("no column {key:?} in {}", path.display()))
                .clone();
            (k, row)
        })
        .collect()
}

/// The cell of column `col` of a CSV row as an integer (the test fails naming the column when
/// there is none, or when it holds no integer).
pub fn cell_int(row: &HashMap<String, String>, col: &str) -> i64 {
    let cell = row
        .get(col)
        .unwrap_or_else(|| panic!("no column {col:?} among {:?}", row.keys()));
    cell.parse().unwrap_or_else(|_| panic!("{col} = {cell:?}"))
}

/// Values DUMP's LZF cannot compress (a repeated byte would weigh a few bytes), from a fixed
/// xorshift64 (Marsaglia, "Xorshift RNGs", 2003: shifts 13, 7, 17).
pub struct Noise(pub u64);

impl Noise {
    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}
