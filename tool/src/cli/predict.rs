//! `ringslot predict`: what a change of masters costs a live Redis Cluster
//! ([`crate::predict`]). Reads only, unless `--with-module` (ring copies with a TTL).

use super::{on_ctrl_c, ConnectionArgs, OutputArgs, PredictionArgs};
use crate::output;
use crate::predict::{self, report, MasterChange, Prediction};
use anyhow::{bail, Result};
use clap::Args;
use ringslot_engine::change::DEFAULT_THRESHOLD;
use serde::Serialize;

/// `ringslot predict`'s options.
#[derive(Args, Debug)]
pub struct PredictArgs {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// Masters that join, as ip:port (comma-separated or repeated): each one `add-node`d,
    /// then one rebalance.
    #[arg(long, value_name = "IP:PORT", value_delimiter = ',')]
    pub add: Vec<String>,
    /// With --add: the joining masters' weight (redis-cli --cluster-weight; default 1).
    #[arg(long, requires = "add")]
    pub weight: Option<u32>,
    /// Masters that leave (comma-separated or repeated): drained in one rebalance (weight 0
    /// each), then `del-node`d.
    #[arg(
        long,
        value_name = "IP:PORT",
        value_delimiter = ',',
        conflicts_with = "add"
    )]
    pub del: Vec<String>,
    /// The rebalance pending now (after `add-node`: the masters without slots join), as
    /// `redis-cli --cluster rebalance <seed> --cluster-use-empty-masters` makes it.
    #[arg(long, conflicts_with_all = ["add", "del"])]
    pub rebalance: bool,
    /// redis-cli's --cluster-threshold for --rebalance, in percent.
    #[arg(long, default_value_t = DEFAULT_THRESHOLD)]
    pub threshold: f64,
    #[command(flatten)]
    pub prediction: PredictionArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

impl PredictArgs {
    /// The change the options name (checked by [`MasterChange::check`] when it runs). Error:
    /// none named.
    pub fn change(&self) -> Result<MasterChange> {
        Ok(if !self.add.is_empty() {
            MasterChange::Add {
                nodes: self.add.clone(),
                weight: self.weight,
            }
        } else if !self.del.is_empty() {
            MasterChange::Del {
                nodes: self.del.clone(),
            }
        } else if self.rebalance {
            MasterChange::Rebalance {
                threshold: self.threshold,
            }
        } else {
            bail!(
                "name the change: --add ip:port[,ip:port...] [--weight w], --del \
                 ip:port[,ip:port...] or --rebalance (the one pending after add-node)"
            )
        })
    }
}

/// The format of `ringslot predict --json` (docs/cluster.md "For scripts: `--json`"): a
/// field renamed or removed, or one whose meaning changes, takes a new number; fields added
/// keep it. The plan inside has its own ([`crate::plan::PLAN_VERSION`]). Version 2: `capacity`
/// holds the memory model's walks, `risks` typed findings, `methods` memory rows without `worst`.
pub const PREDICT_JSON_VERSION: u32 = 2;

/// `ringslot predict --json`: the change and what it costs (with `--by`, the plan file:
/// `prediction.by_weight`).
#[derive(Serialize)]
struct PredictJson<'a> {
    version: u32,
    change: &'a MasterChange,
    prediction: &'a Prediction,
}

/// Predicts the change and prints the report (or the JSON); files only under `--out`.
pub fn run(a: &PredictArgs) -> Result<()> {
    let change = a.change()?;
    let opts = a.prediction.options();
    // Ctrl-C: the workers stop at their next chunk and the ring copies are deleted. A second
    // Ctrl-C exits.
    on_ctrl_c("interrupted; removing what the run made")?;
    let access = a.connection.access()?;
    let prediction = predict::predict(&access, &change, &opts)?;
    let report = report::report(&prediction, &change, &opts);
    if let Some(dir) = &a.out.out {
        let name = a.out.name.as_deref().unwrap_or("predict");
        report.write(dir, name)?;
        let svg = predict::picture::picture(&prediction).svg()?;
        output::write(dir, &format!("{name}.svg"), &svg)?;
    }
    if a.out.json {
        let json = PredictJson {
            version: PREDICT_JSON_VERSION,
            change: &change,
            prediction: &prediction,
        };
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        println!("{}", report.markdown());
    }
    output::announce();
    Ok(())
}
