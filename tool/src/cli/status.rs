//! `ringslot status`: how the live cluster stands ([`crate::status`]). Reads only.

use super::{ConnectionArgs, OutputArgs};
use crate::output;
use crate::status::{self, report, DEFAULT_KEYS_PER_SLOT};
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
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Reads the cluster and prints the report (or the JSON); files only under `--out`.
pub fn run(a: &StatusArgs) -> Result<()> {
    let access = a.connection.access()?;
    let status = status::read_status(&access, a.bytes_sample, a.top)?;
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
