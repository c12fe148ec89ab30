//! `whatif`: `RING.MOVES ... KEYS` over millions of real keys on the program's own server: the
//! background run's duration and keys per second, beside the inline run on the same keys
//! (up to `--inline-up-to` keys), and the latency another client sees meanwhile (a `PING`
//! every 10 ms: p99 and max), beside the same client's latency with nothing running.

use crate::common::Global;
use crate::report::{fixed, Table};
use crate::server;
use crate::server::{query, text};
use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use ringslot_harness::redis::{self, Connection, Value};
use ringslot_tool::reply::ring::Moves;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `ringslot-bench whatif`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Keyspace sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    keys: Vec<u64>,
    /// Nodes of the ring (one more joins).
    #[arg(long, default_value_t = 10)]
    nodes: usize,
    /// Measure the inline path too for keyspaces up to this size.
    #[arg(long, default_value_t = 1_000_000)]
    inline_up_to: u64,
    /// Seconds of PING with nothing running, for the baseline.
    #[arg(long, default_value_t = 2)]
    baseline_secs: u64,
    /// Stem of the output file.
    #[arg(long, default_value = "whatif")]
    name: String,
}

/// Runs `whatif` on a server of its own (it flushes it and fills it with keys) and writes the
/// report.
pub fn run(g: &Global, a: &Args) -> Result<()> {
    let own = g.own_server("whatif", "it flushes it and fills it with keys")?;
    let mut con = server::connect(&own.url())?;
    let opts = Options {
        keys: a.keys.clone(),
        nodes: a.nodes,
        inline_up_to: a.inline_up_to,
        baseline_secs: a.baseline_secs,
    };
    let md = measure(&mut con, &own.url(), &opts)?;
    g.publish(&a.name, &md)
}

/// What a whatif run measures.
#[derive(Debug, Clone)]
pub struct Options {
    /// Keyspace sizes (`DEBUG POPULATE`).
    pub keys: Vec<u64>,
    /// Nodes of the ring (one more joins).
    pub nodes: usize,
    /// The inline path is measured for keyspaces up to this size.
    pub inline_up_to: u64,
    /// Seconds of `PING` with nothing running, for the baseline.
    pub baseline_secs: u64,
}

/// `PING` round trips every 10 ms on its own connection until stopped; returns the latencies
/// in milliseconds.
fn pinger(url: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Result<Vec<f64>>> {
    std::thread::spawn(move || {
        let mut con = crate::server::connect(&url)?;
        let mut latencies = Vec::new();
        let tick = Duration::from_millis(10);
        let mut next = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            redis::cmd("PING").query::<String>(&mut con)?;
            latencies.push(t.elapsed().as_secs_f64() * 1e3);
            next += tick;
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            } else {
                next = Instant::now();
            }
        }
        Ok(latencies)
    })
}

/// The p-th percentile (0..=100) of `v` (nearest rank).
fn percentile(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// Latencies while `f` runs on `con`, and `f`'s result and wall time in seconds.
fn while_pinging<T>(url: &str, f: impl FnOnce() -> Result<T>) -> Result<(T, f64, Vec<f64>)> {
    let stop = Arc::new(AtomicBool::new(false));
    let ping = pinger(url.to_string(), Arc::clone(&stop));
    std::thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    let out = f();
    let secs = t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let latencies = ping
        .join()
        .map_err(|_| anyhow::anyhow!("the pinger panicked"))??;
    Ok((out?, secs, latencies))
}

/// A field of `INFO ringslot`.
fn info_field(con: &mut Connection, name: &str) -> Result<u64> {
    let info = text(&query(con, &["INFO", "ringslot"])?).unwrap_or_default();
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix(&format!("ringslot_{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0))
}

/// The figures a what-if reply gives for the comparison: members and every scheme's moves.
fn figures(reply: &Value) -> Result<Vec<u64>> {
    let m = Moves::read(reply)?;
    let mut v = vec![m.members];
    for scheme in ["ring", "slots", "modulo"] {
        let s = m.scheme(scheme)?;
        v.push(s.moved);
        v.push(s.between_old);
    }
    Ok(v)
}

/// Runs every measurement on the server at `url` (ours: empty, `DEBUG` enabled) and returns
/// the Markdown report.
pub fn measure(con: &mut Connection, url: &str, opts: &Options) -> Result<String> {
    let mut t = Table::new(&[
        "keys",
        "path",
        "duration (s)",
        "keys/s",
        "PING p99 (ms)",
        "PING max (ms)",
        "PING p99 / max, nothing running (ms)",
    ]);
    let moves = ["RING.MOVES", "r", "ADD", "n11", "KEYS", "key:*"];
    for &keys in &opts.keys {
        eprintln!("whatif: {keys} keys ...");
        query(con, &["FLUSHALL"])?;
        query(con, &["CONFIG", "SET", "ringslot.inline-limit", "100000"])?;
        query(con, &["DEBUG", "POPULATE", &keys.to_string(), "key", "8"])?;
        let mut add = vec!["RING.ADD".to_string(), "r".to_string()];
        add.extend((1..=opts.nodes).map(|i| format!("n{i}")));
        query(con, &add)?;
        // The baseline: the same pinger with nothing running.
        let (_, _, idle) = while_pinging(url, || {
            std::thread::sleep(Duration::from_secs(opts.baseline_secs));
            Ok(())
        })?;
        let baseline = format!(
            "{} / {}",
            fixed(percentile(&idle, 99.0), 2),
            fixed(percentile(&idle, 100.0), 2)
        );
        // In the background, with a progress bar fed by INFO ringslot.
        let bar = ProgressBar::new(keys);
        bar.set_style(
            ProgressStyle::with_template(
                "{msg:>24} [{bar:40}] {pos}/{len} keys {per_sec} eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_message("what-if in the background");
        let done = Arc::new(AtomicBool::new(false));
        let watcher = {
            let (done, bar, url) = (Arc::clone(&done), bar.clone(), url.to_string());
            std::thread::spawn(move || -> Result<()> {
                let mut con = crate::server::connect(&url)?;
                while !done.load(Ordering::Relaxed) {
                    bar.set_position(info_field(&mut con, "background_evaluated")?);
                    std::thread::sleep(Duration::from_millis(100));
                }
                Ok(())
            })
        };
        let (reply, secs, busy) = while_pinging(url, || query(con, &moves))?;
        done.store(true, Ordering::Relaxed);
        let _ = watcher.join();
        bar.finish_and_clear();
        let evaluated = Moves::read(&reply)?.members as f64;
        if evaluated as u64 != keys {
            bail!("the background what-if evaluated {evaluated} keys of {keys}");
        }
        t.push(vec![
            keys.to_string(),
            "background".into(),
            fixed(secs, 2),
            fixed(evaluated / secs, 0),
            fixed(percentile(&busy, 99.0), 2),
            fixed(percentile(&busy, 100.0), 2),
            baseline.clone(),
        ]);
        if keys <= opts.inline_up_to {
            query(
                con,
                &[
                    "CONFIG",
                    "SET",
                    "ringslot.inline-limit",
                    &(keys + 100).to_string(),
                ],
            )?;
            let (inline, secs, busy) = while_pinging(url, || query(con, &moves))?;
            if figures(&inline)? != figures(&reply)? {
                bail!("inline and background answers differ: {inline:?} / {reply:?}");
            }
            t.push(vec![
                keys.to_string(),
                "inline (main thread)".into(),
                fixed(secs, 2),
                fixed(evaluated / secs, 0),
                fixed(percentile(&busy, 99.0), 2),
                fixed(percentile(&busy, 100.0), 2),
                baseline,
            ]);
        }
    }
    query(con, &["FLUSHALL"])?;
    Ok(format!(
        "# ringslot: RING.MOVES ... KEYS over real keys\n\n\
         `RING.MOVES r ADD n11 KEYS key:*` on a 10-node ring over `DEBUG POPULATE` keys, on one \
         redis-server; durations are the client's wall time; PING is another client's round trip \
         every 10 ms during the run (the last column: the same client with nothing running).\n\n{}",
        t.markdown()
    ))
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(percentile(&[5.0], 99.0), 5.0);
        assert_eq!(percentile(&[], 99.0), 0.0);
    }
}
