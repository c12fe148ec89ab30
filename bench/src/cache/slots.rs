//! The slot side of the same change: the keys a cache held, on a real Redis Cluster of as many
//! masters, and a master joining (`add-node`, `rebalance --cluster-use-empty-masters`) or
//! leaving (a rebalance with its weight 0, `del-node`). No request misses there; the cost is
//! the keys and bytes migrated, the rebalance's duration and what other clients wait
//! meanwhile. ringslot predicts the keys and bytes from the live cluster (its `CLUSTER NODES`
//! mirrored, as `RING.MIRROR` does) before the change.

use super::workload::{key, Shape};
use anyhow::{anyhow, Context, Result};
use ringslot_engine::cluster::{mirror, parse_cluster_nodes, MirrorOptions};
use ringslot_engine::{Change, Flavour, Limits, MemberWeight, Scheme, SchemeParams};
use ringslot_harness::client::scan_keys;
use ringslot_harness::cluster::{cluster_nodes, Cluster};
use ringslot_harness::redis;
use ringslot_harness::{Server, ServerBuilder};
use ringslot_tool::cluster::pacing::Prober;
use ringslot_tool::cluster::{read_topology, Access, LiveCluster, TlsFiles};
use std::collections::HashMap;
use std::time::Instant;

/// What the change cost on the cluster, and what ringslot said it would.
#[derive(Debug, Clone, Default)]
pub struct SlotCost {
    /// Keys on the cluster before the change.
    pub keys: u64,
    /// Keys ringslot said would move.
    pub predicted_keys: u64,
    /// Keys whose master changed (a `SCAN` of every master before and after).
    pub moved_keys: u64,
    /// Bytes (`MEMORY USAGE`, measured before the change) ringslot said would move.
    pub predicted_bytes: u64,
    /// The bytes of the keys that moved (their `MEMORY USAGE` before the change).
    pub moved_bytes: u64,
    /// Slots the plan moves.
    pub slots_moved: u64,
    /// The rebalance (and for a leave, the del-node), seconds.
    pub seconds: f64,
    /// The longest another client's `PING` waited on any master meanwhile, seconds.
    pub longest_ping: f64,
}

/// Every key of every master with its `MEMORY USAGE` and its master's address.
fn scan(topo: &LiveCluster) -> Result<HashMap<Vec<u8>, (String, u64)>> {
    let mut all = HashMap::new();
    for m in &topo.masters {
        let mut con = m.link.connect()?.into_raw();
        scan_keys(&mut con, "*", |con: &mut redis::Connection, batch| {
            let mut pipe = redis::pipe();
            for k in &batch {
                pipe.cmd("MEMORY").arg("USAGE").arg(k);
            }
            let sizes: Vec<Option<u64>> = pipe.query(con).context("MEMORY USAGE")?;
            for (k, size) in batch.into_iter().zip(sizes) {
                all.insert(k, (m.address.clone(), size.unwrap_or(0)));
            }
            anyhow::Ok(())
        })
        .context("SCAN")?;
    }
    Ok(all)
}

/// Runs `masters` cluster masters made by `builder`, stores `ranks` (values sized by
/// `shape`, with its TTL), predicts and then makes the change: one master joining (`join`) or
/// the middle one leaving.
pub fn slot_cost(
    masters: usize,
    join: bool,
    ranks: &[usize],
    shape: &Shape,
    builder: &dyn Fn() -> ServerBuilder,
) -> Result<SlotCost> {
    let mut cluster = Cluster::start(masters, builder)?;
    let seed = Access::new(
        &cluster.nodes[0].url(),
        None,
        None,
        &TlsFiles::default(),
        std::time::Duration::from_secs(300),
    )?;
    let topo = read_topology(&seed)?;
    // Each key to its master, pipelined.
    let mut per_master: Vec<Vec<usize>> = vec![Vec::new(); topo.masters.len()];
    for &r in ranks {
        let slot = ringslot_engine::key_slot(key(r).as_bytes());
        if let Some(Some(m)) = topo.owner.get(usize::from(slot)) {
            if let Some(list) = per_master.get_mut(*m) {
                list.push(r);
            }
        }
    }
    let filler = vec![b'v'; shape.value_max.max(1)];
    for (m, list) in topo.masters.iter().zip(&per_master) {
        let mut con = m.link.connect()?.into_raw();
        for part in list.chunks(2000) {
            let mut pipe = redis::pipe();
            for &r in part {
                let len = shape.value_len(r).min(filler.len());
                pipe.cmd("SET")
                    .arg(key(r))
                    .arg(filler.get(..len).unwrap_or_default())
                    .arg("EX")
                    .arg(shape.ttl)
                    .ignore();
            }
            pipe.query::<()>(&mut con)
                .map_err(|e| anyhow!("{}: SET: {e}", m.address))?;
        }
    }
    let before = scan(&topo)?;
    // The joining master, started now so that its address is known to the prediction.
    let joiner: Option<Server> = if join {
        Some(
            builder()
                .cluster()
                .args(&["--cluster-node-timeout", "5000"])
                .start()?,
        )
    } else {
        None
    };
    let leaving = masters / 2;
    let change = match &joiner {
        Some(s) => Change::Add {
            nodes: vec![s.address().into_bytes()],
            weight: None,
        },
        None => Change::Del {
            nodes: vec![cluster.nodes[leaving].address().into_bytes()],
        },
    };
    let text = cluster_nodes(&cluster.nodes[0]).map_err(|e| anyhow!("{e}"))?;
    let nodes = parse_cluster_nodes(&text)?;
    let options = MirrorOptions {
        flavour: Flavour::Native,
        vnodes: None,
        hashtag: false,
        given: false,
    };
    let mirrored = mirror(None, &nodes, &options, Limits::NONE)?.topology;
    let members = before.iter().map(|(k, (_, size))| {
        (
            k.as_slice(),
            MemberWeight {
                bytes: *size,
                hits: 0,
            },
        )
    });
    let w = mirrored.what_if_weighed(
        &change,
        members,
        &[Scheme::Slots],
        &SchemeParams::default(),
        Limits::NONE,
    )?;
    let predicted = w
        .scheme(Scheme::Slots)
        .ok_or_else(|| anyhow!("no slot table result"))?;
    let mut cost = SlotCost {
        keys: before.len() as u64,
        predicted_keys: predicted.moves.moved,
        predicted_bytes: predicted.moves.moved_bytes,
        slots_moved: u64::from(predicted.slots_moved.unwrap_or(0)),
        ..SlotCost::default()
    };
    let prober = Prober::start(&topo.masters);
    let started = Instant::now();
    match joiner {
        Some(server) => {
            cluster.add_server(server)?;
            let t = Instant::now();
            cluster.rebalance(&[])?;
            cost.seconds = t.elapsed().as_secs_f64();
        }
        None => {
            cluster.drain_and_remove(leaving, &[])?;
            cost.seconds = started.elapsed().as_secs_f64();
        }
    }
    cost.longest_ping = prober
        .finish()
        .values()
        .map(|p| p.longest)
        .fold(0.0, f64::max);
    let after = scan(&read_topology(&seed)?)?;
    for (k, (master, size)) in &before {
        if after.get(k).map(|a| &a.0) != Some(master) {
            cost.moved_keys += 1;
            cost.moved_bytes += size;
        }
    }
    Ok(cost)
}
