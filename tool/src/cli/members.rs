//! `ringslot members`: what a change of nodes costs a memcached fleet's keys
//! ([`crate::members`]).

use super::values::{flavour, other_schemes, schemes_of};
use super::OutputArgs;
use crate::{members, output};
use anyhow::Result;
use clap::Args;
use ringslot_engine::{Flavour, Scheme};
use std::path::PathBuf;

/// `ringslot members`'s options.
#[derive(Args, Debug)]
pub struct MembersArgs {
    /// Members from this file: one key per line, or memcached `lru_crawler metadump` lines
    /// (`key=<URI-encoded key> ... size=<bytes>`), told apart line by line; `END` is skipped.
    #[arg(long, conflicts_with = "memcached")]
    pub file: Option<PathBuf>,
    /// Members dumped from this memcached (`host:port`) with `lru_crawler metadump hash`,
    /// which lists every item (a walk of the LRUs, `metadump all`, can miss items that move
    /// between LRUs meanwhile).
    #[arg(long)]
    pub memcached: Option<String>,
    /// The nodes now, `name[=weight]`, comma-separated, in order.
    #[arg(long, value_delimiter = ',', required = true)]
    pub nodes: Vec<String>,
    /// Nodes that join (or, already there, are re-weighted to --weight).
    #[arg(long, value_delimiter = ',')]
    pub add: Vec<String>,
    /// The weight of the nodes of --add.
    #[arg(long)]
    pub weight: Option<i64>,
    /// Nodes that leave.
    #[arg(long, value_delimiter = ',', conflicts_with = "add")]
    pub del: Vec<String>,
    /// The ring flavour (ketama: libmemcached's and twemproxy's ring).
    #[arg(long, default_value = "ketama", value_parser = flavour)]
    pub flavour: Flavour,
    /// Points per unit of weight (not for ketama, which fixes them).
    #[arg(long)]
    pub vnodes: Option<i64>,
    /// Members hash on the ring by their `{hash tag}`.
    #[arg(long)]
    pub hashtag: bool,
    /// Schemes beyond the ring, the slot table and modulo: a name, `all` or `none`.
    #[arg(long, value_delimiter = ',', value_parser = other_schemes, default_value = "none")]
    pub schemes: Vec<Vec<Scheme>>,
    #[command(flatten)]
    pub out: OutputArgs,
}

impl MembersArgs {
    /// What the options ask (checked when it is evaluated).
    pub fn query(&self) -> members::Query {
        members::Query {
            file: self.file.clone(),
            memcached: self.memcached.clone(),
            nodes: self.nodes.clone(),
            add: self.add.clone(),
            weight: self.weight,
            del: self.del.clone(),
            flavour: self.flavour,
            vnodes: self.vnodes,
            hashtag: self.hashtag,
            schemes: schemes_of(&self.schemes),
        }
    }
}

/// Evaluates the change and prints the report (or the JSON); files only under `--out`.
pub fn run(a: &MembersArgs) -> Result<()> {
    let e = members::evaluate(&a.query())?;
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
