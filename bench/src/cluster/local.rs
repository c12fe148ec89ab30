//! `--local`: a throw-away cluster on free loopback ports, loaded with keys, the change
//! predicted and then made for real (`redis-cli --cluster add-node` and `rebalance`, or a
//! drain and `del-node`), and what really moved counted.

use super::live::{connect, read_topology, s, LiveCluster};
use super::predict::predict;
use super::{MasterChange, Options, Outcome, CHILDREN};
use anyhow::{anyhow, bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use ringslot_engine::key_slot;
use ringslot_harness::cluster::Cluster;
use ringslot_harness::redis::{self, IntoConnectionInfo};
use ringslot_harness::{Server, ServerBuilder};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What really happened, in a local run.
#[derive(Debug, Clone)]
pub(super) struct Real {
    pub(super) moved: u64,
    pub(super) between: u64,
    pub(super) scan_moved: Option<u64>,
    pub(super) owner_after: Vec<Option<String>>,
    pub(super) seconds: f64,
    pub(super) moves_printed: Vec<String>,
}

/// Every key of every master (`SCAN`), with its master's address.
pub(super) fn scan_all(topo: &LiveCluster) -> Result<HashMap<Vec<u8>, String>> {
    let mut all = HashMap::new();
    for m in &topo.masters {
        let mut con = connect(&m.info)?;
        let keys: Vec<Vec<u8>> = redis::cmd("SCAN")
            .cursor_arg(0)
            .arg("COUNT")
            .arg(1000)
            .clone()
            .iter(&mut con)
            .map_err(|e| anyhow!("{}: SCAN: {e}", m.address))?
            .collect();
        for k in keys {
            all.insert(k, m.address.clone());
        }
    }
    Ok(all)
}

/// Writes `count` keys `key:0..` into their masters, masters in parallel.
pub(super) fn load_keys(topo: &LiveCluster, count: u64) -> Result<()> {
    let per_master: Vec<Vec<u64>> = {
        let mut v = vec![Vec::new(); topo.masters.len()];
        for i in 0..count {
            let slot = key_slot(format!("key:{i}").as_bytes());
            if let Some(Some(m)) = topo.owner.get(usize::from(slot)) {
                v[*m].push(i);
            }
        }
        v
    };
    let bar = ProgressBar::new(count);
    bar.set_style(
        ProgressStyle::with_template("cluster: loading keys [{bar:30}] {pos}/{len}, ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = topo
            .masters
            .iter()
            .zip(&per_master)
            .map(|(m, ids)| {
                let bar = bar.clone();
                scope.spawn(move || -> Result<()> {
                    let mut con = connect(&m.info)?;
                    for part in ids.chunks(10_000) {
                        let mut pipe = redis::pipe();
                        for i in part {
                            pipe.cmd("SET").arg(format!("key:{i}")).arg("v").ignore();
                        }
                        pipe.query::<()>(&mut con)
                            .map_err(|e| anyhow!("{}: SET: {e}", m.address))?;
                        bar.inc(part.len() as u64);
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a loader panicked")))
            })
            .collect()
    });
    bar.finish_and_clear();
    results.into_iter().collect()
}

/// A local run's cluster: servers started here, registered for the Ctrl-C handler.
pub(super) fn register(cluster: &Cluster) {
    if let Ok(mut c) = CHILDREN.lock() {
        c.extend(cluster.nodes.iter().map(Server::pid));
    }
}

/// `--local`: starts `masters` masters made by `builder`, loads `keys` keys, predicts the
/// change (a master joins, or with `remove` the last one leaves), performs it and counts what
/// really moved.
pub fn local(
    masters: usize,
    keys: u64,
    remove: bool,
    builder: &(dyn Fn() -> ServerBuilder + Sync),
    opts: &Options,
) -> Result<Outcome> {
    if masters < 1 || (remove && masters < 2) {
        bail!("--local needs at least 1 master (2 to remove one)");
    }
    eprintln!("cluster: starting {masters} masters ...");
    let mut cluster = Cluster::start(masters, builder)?;
    register(&cluster);
    let seed = cluster.nodes[0].url().into_connection_info()?;
    let topo = read_topology(&seed, true)?;
    let started = Instant::now();
    load_keys(&topo, keys)?;
    eprintln!(
        "cluster: loaded {keys} keys in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // The joining master: started now, so that its address is known, and joined after the
    // prediction.
    let joining = if remove {
        None
    } else {
        let server = builder()
            .cluster()
            .args(&["--cluster-node-timeout", "5000"])
            .start()?;
        if let Ok(mut c) = CHILDREN.lock() {
            c.push(server.pid());
        }
        Some(server)
    };
    let change = match &joining {
        Some(server) => MasterChange::Add {
            node: server.address(),
            weight: None,
        },
        None => MasterChange::Del {
            node: topo
                .masters
                .last()
                .map(|m| m.address.clone())
                .unwrap_or_default(),
        },
    };
    let prediction = predict(&seed, &change, opts)?;
    let before_scan = if keys <= opts.scan_limit {
        Some(scan_all(&topo)?)
    } else {
        None
    };
    eprintln!("cluster: performing the change for real ...");
    let pipeline = s(&["--cluster-pipeline", &opts.pipeline.to_string()]);
    let started = Instant::now();
    let run = match joining {
        Some(server) => {
            // add_node starts its own server: hand it ours instead.
            let address = server.address();
            cluster.nodes.push(server);
            ringslot_harness::cluster::redis_cli_ok(
                &s(&[
                    "--cluster",
                    "add-node",
                    &address,
                    &cluster.nodes[0].address(),
                ]),
                Duration::from_secs(60),
            )?;
            let deadline = Instant::now() + Duration::from_secs(60);
            while cluster.converge().is_err() {
                if Instant::now() > deadline {
                    cluster.converge()?;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            cluster.rebalance(&pipeline)?
        }
        None => {
            let last = topo.masters.len() - 1;
            let address = &topo.masters[last].address;
            let index = cluster
                .nodes
                .iter()
                .position(|n| n.address() == *address)
                .ok_or_else(|| anyhow!("{address} is not one of ours"))?;
            if index == 0 {
                bail!("the master to remove is the entry node");
            }
            cluster.drain_and_remove(index, &pipeline)?
        }
    };
    cluster.converge()?;
    let seconds = started.elapsed().as_secs_f64();
    let moves_printed: Vec<String> = run
        .stdout
        .lines()
        .filter(|l| l.contains("Moving") && l.contains("slots from"))
        .map(|l| strip_ansi(l).trim().trim_start_matches(">>> ").to_string())
        .collect();
    let after = read_topology(&cluster.nodes[0].url().into_connection_info()?, false)?;
    let owner_after: Vec<Option<String>> = after
        .owner
        .iter()
        .map(|o| o.map(|i| after.masters[i].address.clone()))
        .collect();
    let survivors: Vec<&String> = after.masters.iter().map(|m| &m.address).collect();
    let (mut moved, mut between) = (0u64, 0u64);
    let old = |n: Option<&String>| {
        n.is_some_and(|n| survivors.contains(&n) && topo.masters.iter().any(|m| m.address == *n))
    };
    for ((before, now), count) in prediction
        .owner_before
        .iter()
        .zip(&owner_after)
        .zip(&prediction.counts)
    {
        if before != now {
            moved += count;
            if old(before.as_ref()) && old(now.as_ref()) {
                between += count;
            }
        }
    }
    let scan_moved = match before_scan {
        Some(before) => {
            let now = scan_all(&after)?;
            if now.len() != before.len() {
                bail!(
                    "SCAN found {} keys after the change and {} before",
                    now.len(),
                    before.len()
                );
            }
            Some(
                before
                    .iter()
                    .filter(|(k, m)| now.get(*k) != Some(*m))
                    .count() as u64,
            )
        }
        None => None,
    };
    Ok(Outcome {
        prediction,
        real: Some(Real {
            moved,
            between,
            scan_moved,
            owner_after,
            seconds,
            moves_printed,
        }),
        change,
    })
}

/// `line` without its ANSI colour sequences (redis-cli colours its output).
pub(super) fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... letter
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_stripped_from_redis_cli_lines() {
        assert_eq!(
            strip_ansi("\u{1b}[29;1m>>> Rebalancing across 4 nodes.\u{1b}[0m"),
            ">>> Rebalancing across 4 nodes."
        );
        assert_eq!(strip_ansi("Moving 1366 slots"), "Moving 1366 slots");
    }
}
