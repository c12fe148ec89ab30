//! `ringslot status`: how the live cluster stands ([`crate::status`]). Reads only.

use super::{ConnectionArgs, OutputArgs};
use crate::output;
use crate::status::{self, report, StatusOptions, DEFAULT_KEYS_PER_SLOT};
use anyhow::Result;
use clap::Args;

/// `ringslot status`'s options.
#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// Keys a slot sized (`CLUSTER GETKEYSINSLOT`, then `MEMORY USAGE ... SAMPLES 5` of each)
    /// for the bytes of each slot and master, estimated with their error.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_KEYS_PER_SLOT,
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub bytes_sample: u64,
    /// The biggest slots and big keys listed, at most.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Also screen every key for big keys (512 KiB or more), as `predict` does: `SCAN` and
    /// `MEMORY USAGE ... SAMPLES 5` of each key, at --max-keys-per-sec. Reads the whole
    /// keyspace (10 million keys: about 17 s a master at the default rate); without it, only
    /// the sample's keys are screened.
    #[arg(long)]
    pub big_keys: bool,
    /// With --big-keys: keys a second screened on each master; 0: no limit.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 200_000,
        requires = "big_keys"
    )]
    pub max_keys_per_sec: u64,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Reads the cluster and prints the report (or the JSON); files only under `--out`.
pub fn run(a: &StatusArgs) -> Result<()> {
    let access = a.connection.access()?;
    let opts = StatusOptions {
        keys_per_slot: a.bytes_sample,
        top: a.top,
        screen: a.big_keys.then_some(a.max_keys_per_sec),
    };
    if a.big_keys {
        // Ctrl-C: the screens stop at their next SCAN batch.
        super::on_ctrl_c("interrupted; stopping the screen of every key")?;
    }
    let status = status::read_status(&access, &opts)?;
    if let Some(dir) = &a.out.out {
        report::write(&status, dir, a.out.name.as_deref().unwrap_or("status"))?;
    }
    if a.out.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        println!("{}", report::markdown(&status));
    }
    output::announce();
    Ok(())
}
