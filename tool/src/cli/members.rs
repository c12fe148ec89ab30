//! `ringslot members`: what a change of nodes costs a memcached fleet's keys
//! ([`crate::members`]).

use super::OutputArgs;
use crate::{members, output};
use anyhow::Result;
use clap::Args;

/// `ringslot members`'s options.
#[derive(Args, Debug)]
pub struct MembersArgs {
    #[command(flatten)]
    pub members: members::Args,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Evaluates the change and prints the report (or the JSON); files only under `--out`.
pub fn run(a: &MembersArgs) -> Result<()> {
    let e = members::evaluate(&a.members)?;
    if let Some(dir) = &a.out.out {
        let name = a.out.name.as_deref().unwrap_or("members");
        output::write(dir, &format!("{name}.md"), &e.markdown)?;
        output::write(dir, &format!("{name}.csv"), &e.table.csv())?;
    }
    if a.out.json {
        println!("{}", serde_json::to_string_pretty(&e)?);
    } else {
        println!("{}", e.markdown);
    }
    output::announce();
    Ok(())
}
