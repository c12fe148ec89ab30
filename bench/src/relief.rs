//! `relief`: the job operators bring most, timed beside redis-cli. A cluster near full
//! (three masters with a replica each at `--fill` of their `maxmemory` under `--policy`,
//! `--keys` small keys under hash tags and a big string on each master, a fourth master and
//! its replica joined empty: the harness's [`FullCluster`]) with a client reading and writing
//! throughout, relieved two ways on two identical clusters, one after the other: `ringslot
//! predict --rebalance --by memory --json` then `ringslot apply --yes` (the `--tool` binary),
//! and `redis-cli --cluster rebalance --cluster-use-empty-masters`. Each way's wall time (the
//! whole job: predict and apply for ringslot), each master's fill after, the keys evicted and
//! what the client saw; `--runs` times on fresh clusters, the median and the ratio of the
//! medians at the end. The servers are the harness's, stopped when each run ends.

use crate::common::{median, Global};
use crate::report::{fixed, Table};
use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use ringslot_harness::relief::{FullCluster, Seen};
use ringslot_harness::Server;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `relief`'s options.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Runs, each on two fresh clusters; the medians are reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Small keys (64 B to 1.5 KiB, under 2000 hash tags, every fifth a hash).
    #[arg(long, default_value_t = 150_000)]
    pub keys: usize,
    /// The first master's big string, bytes (the next two 512 KiB larger each).
    #[arg(long, default_value_t = 1 << 20)]
    pub big: usize,
    /// The fill the three masters start at (used_memory over maxmemory).
    #[arg(long, default_value_t = 0.92)]
    pub fill: f64,
    /// Their maxmemory-policy (and the joining master's).
    #[arg(long, default_value = "noeviction")]
    pub policy: String,
    /// The operator tool's binary (`make bench-relief` builds it).
    #[arg(long, default_value = "target/release/ringslot")]
    pub tool: PathBuf,
    /// Stem of the report written under --out.
    #[arg(long, default_value = "relief")]
    pub name: String,
}

/// What one way of relieving one cluster did.
struct Outcome {
    /// The whole job's wall time, and (ringslot) the apply's alone, seconds.
    seconds: f64,
    apply_seconds: Option<f64>,
    /// Each master's fill after, the fullest, keys evicted, and what the client saw.
    fills: Vec<f64>,
    evicted: f64,
    seen: Seen,
}

/// Runs `ringslot args...`; its standard output. Error: it failed (its stderr said).
fn tool(path: &PathBuf, args: &[&str]) -> Result<String> {
    let out = Command::new(path)
        .args(args)
        .output()
        .with_context(|| format!("run {} (make bench-relief builds it)", path.display()))?;
    if !out.status.success() {
        bail!(
            "ringslot {}: {}",
            args.first().copied().unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A cluster near full, as `a` asks, on the server binary of `g`.
fn full_cluster(g: &Global, a: &Args) -> Result<FullCluster> {
    let builder = || Server::builder().no_module().binary(&g.redis_server);
    let mut full = FullCluster::start(a.keys, a.big, builder)?;
    full.fill_up(a.fill, &a.policy, builder)?;
    Ok(full)
}

/// Relieves a fresh cluster one way (`ringslot`: predict and apply; else redis-cli's
/// rebalance), a client throughout and a second more after.
fn relieve(g: &Global, a: &Args, ringslot: bool) -> Result<Outcome> {
    let full = full_cluster(g, a)?;
    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let client = full.client(stop.clone(), done.clone());
    let url = full.cluster.nodes[0].url();
    let started = Instant::now();
    let job = if ringslot {
        (|| -> Result<Option<f64>> {
            let plan = tool(
                &a.tool,
                &[
                    "predict",
                    "--url",
                    &url,
                    "--rebalance",
                    "--by",
                    "memory",
                    "--json",
                ],
            )?;
            let dir = tempfile::tempdir()?;
            let path = dir.path().join("plan.json");
            std::fs::write(&path, plan)?;
            let applying = Instant::now();
            let path = path.to_string_lossy().into_owned();
            tool(&a.tool, &["apply", &path, "--url", &url, "--yes"])?;
            Ok(Some(applying.elapsed().as_secs_f64()))
        })()
    } else {
        full.cluster
            .rebalance(&[])
            .map_err(|e| anyhow::anyhow!("{e}"))
            .and_then(|run| {
                if run.success {
                    Ok(None)
                } else {
                    bail!(
                        "redis-cli --cluster rebalance: {}{}",
                        run.stdout,
                        run.stderr
                    )
                }
            })
    };
    let seconds = started.elapsed().as_secs_f64();
    done.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::SeqCst);
    let seen = client
        .join()
        .map_err(|_| anyhow::anyhow!("the client panicked"))?;
    let apply_seconds = job?;
    // The fills once the background frees are done (Valkey frees late).
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline
        && full.cluster.nodes.iter().any(|s| {
            ringslot_harness::relief::info_number(s, "memory", "lazyfree_pending_objects") > 0.0
        })
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Outcome {
        seconds,
        apply_seconds,
        fills: full.fills().into_values().collect(),
        evicted: full.evicted(),
        seen,
    })
}

/// Runs the benchmark (see the module docs) and publishes its report.
pub fn run(g: &Global, a: &Args) -> Result<()> {
    if a.runs == 0 {
        bail!("--runs is at least 1");
    }
    let mut t = Table::new(&[
        "run",
        "way",
        "seconds",
        "of which apply",
        "fills after (used_memory / maxmemory)",
        "fullest",
        "evicted",
        "client: acked writes, OOM during, OOM after, other errors",
    ]);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for run in 1..=a.runs {
        for ringslot in [true, false] {
            let way = if ringslot {
                "ringslot predict --by memory + apply"
            } else {
                "redis-cli --cluster rebalance"
            };
            eprintln!("ringslot-bench relief: run {run} of {}: {way} ...", a.runs);
            let o = relieve(g, a, ringslot)?;
            let fullest = o.fills.iter().copied().fold(0.0, f64::max);
            t.push(vec![
                run.to_string(),
                way.to_string(),
                fixed(o.seconds, 1),
                o.apply_seconds.map_or("-".into(), |s| fixed(s, 1)),
                o.fills
                    .iter()
                    .map(|f| format!("{:.0}%", 100.0 * f))
                    .collect::<Vec<_>>()
                    .join(" "),
                format!("{:.1}%", 100.0 * fullest),
                fixed(o.evicted, 0),
                format!(
                    "{}, {}, {}, {}",
                    o.seen.acked.len(),
                    o.seen.oom_during,
                    o.seen.oom_after,
                    o.seen.other.len()
                ),
            ]);
            if ringslot {
                ours.push(o.seconds);
            } else {
                theirs.push(o.seconds);
            }
        }
    }
    let (m_ours, m_theirs) = (median(&ours), median(&theirs));
    let ratio = if m_theirs > 0.0 {
        m_ours / m_theirs
    } else {
        0.0
    };
    let server = ringslot_harness::server::server_version(&g.redis_server);
    let md = format!(
        "# Relieving a full cluster: ringslot beside redis-cli\n\n{server}; three masters with a \
         replica each at {:.0}% of their maxmemory ({}), {} small keys and big strings of {:.2} \
         to {:.2} MiB, a fourth master and its replica joined empty, a client reading and \
         writing about 300 commands a second throughout; each way on a fresh cluster, \
         {} runs.\n\n{}\nMedian wall time: ringslot {} s (predict and apply), redis-cli {} s: \
         **{:.2} times redis-cli's** (the target: at most 1.2).\n",
        100.0 * a.fill,
        a.policy,
        a.keys,
        a.big as f64 / 1048576.0,
        (a.big + (1 << 20)) as f64 / 1048576.0,
        a.runs,
        t.markdown(),
        fixed(m_ours, 1),
        fixed(m_theirs, 1),
        ratio
    );
    g.publish(&a.name, &md)?;
    Ok(())
}
