//! `cluster`: the operator tool's prediction (`ringslot predict`, [`ringslot_tool::predict`])
//! checked against the real change on a throw-away cluster: with `--local N`, the program
//! starts N masters on a fixed port block (stable names, so that the ring rows are the same
//! from run to run), loads keys, predicts, performs the change for real ([`local`]) and
//! compares in the tool's report, with a chart ([`chart`]) and the runs the duration models
//! are fitted to ([`model`]); `--busy` keeps a core busy meanwhile.

mod chart;
mod local;
pub mod model;
mod real;
mod report;

use crate::common::Global;
use anyhow::{bail, Context, Result};
use local::Local;
use ringslot_engine::change::DEFAULT_THRESHOLD;
use ringslot_harness::Server;
use ringslot_tool::cli::PredictionArgs;
use ringslot_tool::cluster::INTERRUPTED;
use std::sync::Mutex;

/// `ringslot-bench cluster`: a local run (the operator's prediction on a live cluster is
/// `ringslot predict`, the tool's, whose prediction options it takes: `--with-module`,
/// `--by`, `--flavours`, ...; with `--atomic` the real change is made by atomic slot
/// migration too).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// redis-cli's --cluster-threshold for a pending rebalance (--pending), in percent.
    #[arg(long, default_value_t = DEFAULT_THRESHOLD)]
    threshold: f64,
    /// masters of the throw-away cluster [default: 3].
    #[arg(long)]
    local: Option<usize>,
    /// masters that join in one rebalance [default: 1].
    #[arg(long, conflicts_with = "leave")]
    join: Option<usize>,
    /// the last masters leave (drained in one rebalance, then removed).
    #[arg(long)]
    leave: Option<usize>,
    /// the joining masters are `add-node`d before the prediction, which then
    /// predicts the pending rebalance.
    #[arg(long, conflicts_with = "leave")]
    pending: bool,
    /// keys loaded (`key:0` ..., values of 16 to 1024 bytes) [default: 1000000].
    #[arg(long)]
    keys: Option<u64>,
    /// keys of one hot hash tag (`{hot}:0` ..., 4 KiB values) [default: 0].
    #[arg(long)]
    hot_keys: Option<u64>,
    /// the first port of the masters (the others follow; joining masters
    /// last) [default: 30001].
    #[arg(long)]
    base_port: Option<u16>,
    #[command(flatten)]
    prediction: PredictionArgs,
    /// Predict both ways, with the module and read-only, and compare.
    #[arg(long, conflicts_with_all = ["with_module", "by"])]
    both_modes: bool,
    /// also SCAN every master before and after, up to this many keys, to
    /// count the keys and bytes that really moved key by key.
    #[arg(long, default_value_t = 200_000)]
    scan_limit: u64,
    /// redis-cli's --cluster-pipeline for the real rebalance.
    #[arg(long, default_value_t = 10)]
    pipeline: u32,
    /// Keep one core busy (a spinning thread) while the prediction and the change run: the
    /// condition of a busy host, which the duration estimate must hold on.
    #[arg(long)]
    busy: bool,
    /// Stem of the output files.
    #[arg(long, default_value = "cluster")]
    name: String,
}

/// Runs `cluster`: a local run (predicted, then made for real), and writes the report.
pub fn run(g: &Global, a: &Args) -> Result<()> {
    if g.url.is_some() {
        bail!(
            "`cluster` runs on a throw-away cluster of its own; on a live cluster, predict with \
             the operator's tool: ringslot predict --url redis://host:port --add ip:port"
        );
    }
    let mut opts = a.prediction.options();
    opts.with_module |= a.both_modes;
    opts.check()?;
    // Ctrl-C: the servers of the local run are killed at once. A second Ctrl-C exits.
    ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(130);
        }
        let pids: Vec<String> = CHILDREN
            .lock()
            .map(|c| c.iter().map(u32::to_string).collect())
            .unwrap_or_default();
        eprintln!("ringslot-bench: interrupted; stopping the servers of the local cluster");
        if !pids.is_empty() {
            let _ = std::process::Command::new("kill")
                .arg("-9")
                .args(&pids)
                .status();
        }
        std::process::exit(130);
    })
    .context("install the Ctrl-C handler")?;
    let module = g.module_path()?;
    let binary = g.redis_server.clone();
    let builder = move || Server::builder().binary(&binary).module(&module);
    let (join, leave) = match (a.join, a.leave) {
        (_, Some(k)) => (0, k),
        (Some(k), None) => (k, 0),
        (None, None) => (1, 0),
    };
    let plan = Local {
        masters: a.local.unwrap_or(3),
        join,
        leave,
        pending: a.pending,
        threshold: a.threshold,
        keys: a.keys.unwrap_or(1_000_000),
        hot_keys: a.hot_keys.unwrap_or(0),
        base_port: a.base_port.unwrap_or(30001),
        both_modes: a.both_modes,
        scan_limit: a.scan_limit,
        pipeline: a.pipeline,
    };
    let spinning = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(a.busy));
    let spinner = a.busy.then(|| {
        let spinning = spinning.clone();
        std::thread::spawn(move || {
            let mut x = 0u64;
            while spinning.load(std::sync::atomic::Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        })
    });
    let outcome = local::local(&plan, &builder, &opts);
    spinning.store(false, std::sync::atomic::Ordering::Relaxed);
    if let Some(s) = spinner {
        let _ = s.join();
    }
    let outcome = outcome?;
    let report = report::report(&outcome, &opts);
    report.write(&g.out, &a.name)?;
    let condition = if a.busy { "busy" } else { "idle" };
    model::write_run(&g.out, &a.name, &outcome, condition)?;
    chart::chart(&g.out, &a.name, &outcome)?;
    println!("{}", report.markdown());
    crate::report::announce();
    Ok(())
}

/// Processes started by a local run (their pids), killed by a Ctrl-C handler.
pub static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());
