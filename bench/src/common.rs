//! What the subcommands share: the global options, the module file, the server a run measures
//! (its own temporary one, or `--url`), progress bars, medians, the parsing of flavours and
//! schemes into the engine's types, and publishing a report.

use crate::report;
use crate::scratch::{self, Scratch};
use crate::server;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use ringslot_engine::Flavour;
use ringslot_harness::redis::Connection;
use ringslot_harness::server::{find_module, Profile};
use ringslot_harness::Server;
pub use ringslot_tool::cli::values::{flavour, other_schemes, schemes_of};
use std::path::PathBuf;

/// The options every subcommand takes.
#[derive(Args, Debug, Clone)]
pub struct Global {
    /// Use this running server (with the module loaded) instead of starting one.
    #[arg(long, global = true)]
    pub url: Option<String>,
    /// The module to load into the temporary server [default: target/release/libringslot.so,
    /// else target/debug/libringslot.so].
    #[arg(long, global = true)]
    pub module: Option<PathBuf>,
    /// The server binary of the temporary servers (redis-server, or valkey-server).
    #[arg(
        long,
        global = true,
        env = "RINGSLOT_SERVER",
        default_value = "redis-server"
    )]
    pub redis_server: String,
    /// Where to write the .md, .csv and .svg files.
    #[arg(long, global = true, default_value = "bench/out")]
    pub out: PathBuf,
}

/// The node names of the subcommands that make their own rings (migration, balance, spread).
#[derive(Args, Debug, Clone)]
pub struct NodeNames {
    /// Node names: `{}` is replaced by the node's number.
    #[arg(long, default_value = "10.0.0.{}:6379")]
    pub names: String,
}

impl Global {
    /// The module file: `--module` when given (made absolute: redis-server changes into its
    /// `--dir` before it loads modules), else the release build, else the debug build.
    pub fn module_path(&self) -> Result<PathBuf> {
        match self.module.as_deref() {
            Some(p) if !p.exists() => bail!("the module {} does not exist", p.display()),
            Some(p) => Ok(p.canonicalize().unwrap_or_else(|_| p.to_path_buf())),
            None => find_module(&[Profile::Release, Profile::Debug]).ok_or_else(|| {
                anyhow!(
                    "no module at target/release/libringslot.so or target/debug/libringslot.so: \
                     run `make release` (or `cargo build --lib`), or pass --module PATH"
                )
            }),
        }
    }

    /// A temporary server of the program's own, for a subcommand that may not run on `--url`
    /// (`why` says what it does to the server); stopped when dropped.
    pub fn own_server(&self, command: &str, why: &str) -> Result<Server> {
        if self.url.is_some() {
            bail!("{command} needs its own server ({why}): drop --url");
        }
        self.start_server()
    }

    /// A temporary server with the module loaded.
    pub fn start_server(&self) -> Result<Server> {
        let module = self.module_path()?;
        eprintln!("starting redis-server with {}", module.display());
        Ok(Server::builder()
            .binary(&self.redis_server)
            .module(&module)
            .start()?)
    }

    /// Writes a subcommand's Markdown report to `<out>/<name>.md` and prints it.
    pub fn publish(&self, name: &str, md: &str) -> Result<()> {
        report::write(&self.out, &format!("{name}.md"), md)?;
        println!("{md}");
        report::announce();
        Ok(())
    }
}

/// The server a run that may use `--url` measures: the one at `--url`, or a temporary one
/// (stopped when this is dropped), with a connection, and the [`Scratch`] that makes and
/// deletes the run's keys (a temporary server is thrown away whole, so `keep` is implied).
pub struct Target {
    /// The temporary server, if the run has its own (stopped when the target is dropped).
    pub _own: Option<Server>,
    /// A connection to the server.
    pub con: Connection,
    /// The keys the run makes there.
    pub scratch: Scratch,
}

impl Target {
    /// Connects to `--url`, or starts a server; `keep` leaves the run's keys (until their TTL).
    /// Ctrl-C deletes the keys the run made before the program exits.
    pub fn open(g: &Global, keep: bool) -> Result<Target> {
        let (own, url) = match &g.url {
            Some(url) => (None, url.clone()),
            None => {
                let own = g.start_server()?;
                let url = own.url();
                (Some(own), url)
            }
        };
        let con = server::connect(&url)?;
        ctrlc::set_handler(|| {
            eprintln!("ringslot-bench: interrupted; deleting the keys this run made");
            scratch::interrupted();
            std::process::exit(130);
        })
        .context("install the Ctrl-C handler")?;
        let scratch = Scratch::new(&url, keep || own.is_some());
        Ok(Target {
            _own: own,
            con,
            scratch,
        })
    }
}

/// A progress bar of `len` steps labelled `what`.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg:>24} [{bar:40}] {pos}/{len} {elapsed}, ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// The median of `values` (0 for none; the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A flavour by its name, or `none` (no flavour), for clap.
pub fn flavours_or_none(name: &str) -> Result<Vec<Flavour>, String> {
    if name == "none" {
        Ok(Vec::new())
    } else {
        flavour(name).map(|f| vec![f])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
