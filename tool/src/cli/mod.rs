//! The command line: the program's subcommands and help ([`program`]), one file per
//! subcommand, each owning its options (`Args`) and its run (`run`), as cargo's
//! `commands/*.rs` do, and the exit status of a failed run ([`exit_status`]); `main.rs` only
//! parses, runs and exits. The option groups more
//! than one command takes are declared once, here: how to reach the cluster
//! ([`ConnectionArgs`]), where the output goes ([`OutputArgs`]), and how a prediction runs
//! ([`PredictionArgs`], which the benchmark program's local runs take too). Options are
//! checked where they become the library's types (`Options::check`, `MasterChange::check`,
//! `ApplyOptions::check`, `Access::new`), but for `--timeout`, checked here before it becomes a
//! `Duration` (which a negative or endless number of seconds cannot be).

pub mod apply;
pub mod members;
pub mod predict;
pub mod program;
pub mod status;
pub mod values;

use crate::cluster::budget::DEFAULT_HEADROOM;
use crate::cluster::finding::{Finding, EXIT_REFUSED as REFUSED};
use crate::cluster::link::{Access, TlsFiles, DEFAULT_TIMEOUT};
use crate::cluster::INTERRUPTED;
use crate::predict::options::{Options, SizesBy, WeightBy, DEFAULT_MAX_HOLD_MS, DEFAULT_TOLERANCE};
use anyhow::{bail, Context, Result};
use clap::Args;
use ringslot_engine::Flavour;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How to reach the cluster's nodes (`status`, `predict`, `apply`).
#[derive(Args, Debug)]
pub struct ConnectionArgs {
    /// A node of the cluster, `redis://[user[:password]@]host:port` or `rediss://` for TLS:
    /// the node `redis-cli --cluster rebalance` would be run against (it decides the order of
    /// ties). Every other node is reached the same way (user, password, TLS files). Without a
    /// password in the URL, REDISCLI_AUTH's, else --password-file's.
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// The ACL user (else the URL's, else `default`).
    #[arg(long)]
    pub user: Option<String>,
    /// A file whose first line is the password (keeps it off the command line).
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
    /// TLS: the CA certificate that signed the nodes' certificates (PEM; else the system's
    /// trust store). Each node's certificate is checked against the address the cluster
    /// announces for it.
    #[arg(long, value_name = "FILE")]
    pub tls_ca_cert: Option<PathBuf>,
    /// TLS: a client certificate (PEM), for nodes with `tls-auth-clients yes`.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS: the client certificate's key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The most seconds to wait for a node to accept a connection or to answer a command: a
    /// node that does not is named in an error and the run ends (`predict` having written
    /// nothing; `apply` leaving the slot under way open, to go on when run again).
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_TIMEOUT.as_secs_f64())]
    pub timeout: f64,
}

impl ConnectionArgs {
    /// The access these options describe. Errors: a timeout that is not from above 0 to 3600
    /// seconds, and those of [`Access::new`].
    pub fn access(&self) -> Result<Access> {
        if !(self.timeout.is_finite() && self.timeout > 0.0 && self.timeout <= 3600.0) {
            bail!("--timeout is in seconds, above 0 and at most 3600");
        }
        Access::new(
            &self.url,
            self.user.as_deref(),
            self.password_file.as_deref(),
            &TlsFiles {
                ca_cert: self.tls_ca_cert.clone(),
                cert: self.tls_cert.clone(),
                key: self.tls_key.clone(),
            },
            Duration::from_secs_f64(self.timeout),
        )
    }
}

/// Where the output goes (`status`, `predict`, `members`).
#[derive(Args, Debug)]
pub struct OutputArgs {
    /// Print one JSON object instead of the report.
    #[arg(long)]
    pub json: bool,
    /// Also write the report (Markdown) and its tables (CSV) into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Stem of the files written under --out.
    #[arg(long, requires = "out")]
    pub name: Option<String>,
}

/// How a prediction runs (`ringslot predict`, and the benchmark program's local runs).
#[derive(Args, Debug, Clone)]
pub struct PredictionArgs {
    /// Predict with the module loaded on every master (RING.MIRROR, RING.MOVES ... SLOTS on
    /// ring copies: it writes keys with a TTL, deletes them, and says which). Without it the
    /// prediction is read-only.
    #[arg(long)]
    pub with_module: bool,
    /// Keys a second read from each master (SCAN, DUMP); 0: no limit.
    #[arg(long, default_value_t = 200_000)]
    pub max_keys_per_sec: u64,
    /// Measure the bytes of this many keys a slot (the rest estimated, with the error
    /// stated; every key still screened for big keys) instead of every key the plan moves, or
    /// `all`. Unset: every key up to 2 million keys in the cluster, 50 a slot past that.
    #[arg(long, value_name = "N|all")]
    pub bytes_sample: Option<crate::predict::options::BytesSample>,
    /// How the moving keys' DUMP lengths are read: `script` (EVAL_RO returns the lengths,
    /// the payloads stay on the masters; DUMP where the user may not run scripts) or `dump`
    /// (the payloads travel to the tool: less of the masters' CPU, more network).
    #[arg(long, value_enum, default_value_t = SizesBy::Script)]
    pub sizes_by: SizesBy,
    /// Besides redis-cli's plan (even slot counts), a plan that evens this across the masters,
    /// moving as little of it as it can, side by side with redis-cli's: bytes (DUMP lengths),
    /// memory (MEMORY USAGE) or keys, which size every key (--bytes-sample N: N a slot), or load
    /// or network (CLUSTER SLOT-STATS cpu-usec, or network-bytes-in + network-bytes-out, with
    /// cluster-slot-stats-enabled yes); or slots: redis-cli's own plan as the plan file, for
    /// `ringslot apply` to carry out redis-cli's choice of slots. Read-only way only.
    #[arg(long, value_enum, conflicts_with = "with_module")]
    pub by: Option<WeightBy>,
    /// With --by: how far from its share each master may end, in percent.
    #[arg(long, default_value_t = DEFAULT_TOLERANCE, requires = "by")]
    pub tolerance: f64,
    /// Ring flavours evaluated, comma-separated (modulo comes with them).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "native,ketama,groupcache",
        value_parser = values::flavour
    )]
    pub flavours: Vec<Flavour>,
    /// With --with-module: slots per RING.MOVES ... SLOTS call (the work each call holds a
    /// master for).
    #[arg(long, default_value_t = 256)]
    pub chunk: u16,
    /// With --with-module: seconds the ring copies live on the masters if the run dies.
    #[arg(long, default_value_t = 600)]
    pub ttl: u64,
    /// The slots will move by Valkey 9's atomic slot migration (CLUSTER MIGRATESLOTS, as
    /// `valkey-cli --cluster rebalance --cluster-use-atomic-slot-migration` runs it): the
    /// report's verdict is for that method. Needs Valkey 9 or later on every master.
    #[arg(long)]
    pub atomic: bool,
    /// The part of each node's limit (maxmemory, or the host's RAM where it has none) a plan
    /// keeps free at the node's peak, in percent.
    #[arg(long, value_name = "PCT", default_value_t = DEFAULT_HEADROOM)]
    pub headroom: f64,
    /// The longest, in milliseconds, that moving one big key may hold a master (its MIGRATE on
    /// the source): the plan by weight leaves the slots of keys past it where they are.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_MAX_HOLD_MS)]
    pub max_hold: f64,
    /// Let the plan by weight move the slots of big keys past --max-hold too.
    #[arg(long)]
    pub move_big_keys: bool,
}

impl PredictionArgs {
    /// The options of the prediction (checked by [`Options::check`] when it runs).
    pub fn options(&self) -> Options {
        Options {
            flavours: self.flavours.clone(),
            chunk: self.chunk,
            ttl_secs: self.ttl,
            with_module: self.with_module,
            max_keys_per_sec: self.max_keys_per_sec,
            bytes_sample: match self.bytes_sample {
                Some(crate::predict::options::BytesSample::PerSlot(n)) => Some(n),
                _ => None,
            },
            auto_sample: self.bytes_sample.is_none(),
            atomic: self.atomic,
            sizes_by: self.sizes_by,
            by: self.by,
            tolerance: self.tolerance / 100.0,
            headroom: self.headroom / 100.0,
            max_hold: self.max_hold / 1000.0,
            move_big_keys: self.move_big_keys,
        }
    }
}

/// Installs the Ctrl-C handler of a long run: the first Ctrl-C sets [`INTERRUPTED`] (the
/// run stops at its next step and cleans up) and prints `message`; a second exits at once
/// with status 130.
pub(crate) fn on_ctrl_c(message: &'static str) -> Result<()> {
    ctrlc::set_handler(move || {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            std::process::exit(EXIT_INTERRUPTED);
        }
        eprintln!("ringslot: {message}");
    })
    .context("install the Ctrl-C handler")
}

/// Exit status: the run did what it was asked.
pub const EXIT_OK: i32 = 0;
/// Exit status: an error (a node unreachable or answering an error, a file unreadable, bad
/// input past the parser): the text says which.
pub const EXIT_ERROR: i32 = 1;
/// Exit status of a usage error: clap's own (an unknown option, a missing argument).
pub const EXIT_USAGE: i32 = 2;
/// Exit status: refused, or stopped between steps, by a safety rule (a [`Finding`]: an
/// unstable cluster, a plan the cluster's state does not fit, a node's limit, a rule in
/// words): nothing unsafe was done.
pub const EXIT_REFUSED: i32 = REFUSED;
/// Exit status after Ctrl-C (the run stopped at its next step, or at once on a second one).
pub const EXIT_INTERRUPTED: i32 = 130;
/// Exit status of `apply` stopped by its test hook (`RINGSLOT_APPLY_EXIT_AFTER_WRITES`), as
/// a killed process leaves the cluster: the tests' only.
pub const EXIT_TEST_HOOK: i32 = crate::apply::door::EXIT_AFTER_WRITES;

/// Every exit status the tool ends with (docs/cluster.md "Exit status", checked by
/// tests/docs.rs).
pub const EXIT_STATUSES: [i32; 6] = [
    EXIT_OK,
    EXIT_ERROR,
    EXIT_USAGE,
    EXIT_REFUSED,
    EXIT_INTERRUPTED,
    EXIT_TEST_HOOK,
];

/// The exit status of a run that ended with `e` (docs/cluster.md "Exit status").
pub fn exit_status(e: &anyhow::Error) -> i32 {
    if INTERRUPTED.load(Ordering::SeqCst) || interrupted_call(e) {
        EXIT_INTERRUPTED
    } else {
        Finding::of(e).map_or(EXIT_ERROR, Finding::exit_status)
    }
}

/// Whether `e` is a call a signal interrupted (`EINTR`, "Interrupted system call (os error
/// 4)"). Ctrl-C's is the only handler the tool installs, and a read with a timeout is not
/// restarted after it: the error can end the run before the handler's own thread has set
/// [`INTERRUPTED`] (seen once in tool_status, exit 1 instead of 130, on Valkey 9.1.2).
fn interrupted_call(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::Interrupted)
            || c.downcast_ref::<crate::cluster::error::NodeError>()
                .is_some_and(|n| {
                    matches!(n.code, crate::cluster::error::Code::Io)
                        && n.text.contains("(os error 4)")
                })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::finding::Unreached;
    use anyhow::Context;

    #[test]
    fn an_interrupted_call_exits_as_ctrl_c_does() {
        // As a read cut by Ctrl-C reached main once, before the handler's thread ran.
        let cut = crate::cluster::error::NodeError {
            node: "127.0.0.1:27601".into(),
            command: "CLUSTER NODES".into(),
            code: crate::cluster::error::Code::Io,
            text: "Interrupted system call (os error 4)".into(),
        };
        let e = anyhow::Error::new(cut).context("reading the topology");
        assert_eq!(exit_status(&e), EXIT_INTERRUPTED);
        let io = std::io::Error::from(std::io::ErrorKind::Interrupted);
        assert_eq!(exit_status(&anyhow::Error::new(io)), EXIT_INTERRUPTED);
        // Any other lost connection is an error.
        let lost = crate::cluster::error::NodeError {
            node: "127.0.0.1:27601".into(),
            command: "CLUSTER NODES".into(),
            code: crate::cluster::error::Code::Io,
            text: "Connection reset by peer (os error 104)".into(),
        };
        assert_eq!(exit_status(&anyhow::Error::new(lost)), EXIT_ERROR);
    }

    #[test]
    fn a_finding_exits_with_its_status_wrapped_or_not_and_anything_else_1() {
        let refused = || anyhow::Error::new(Finding::rule("not confirmed"));
        assert_eq!(exit_status(&refused()), EXIT_REFUSED);
        assert_eq!(exit_status(&refused().context("apply")), EXIT_REFUSED);
        let stale = anyhow::Error::new(Finding::Unreached {
            why: Unreached::Changed("slot 5".into()),
        });
        assert_eq!(exit_status(&stale), EXIT_REFUSED);
        let open = anyhow::Error::new(Finding::OpenSlot {
            slot: 1,
            node: "10.0.0.1:7000".into(),
            importing: false,
            peer: None,
        });
        assert_eq!(exit_status(&open), EXIT_REFUSED);
        let plain: Result<()> = Err(anyhow::anyhow!("cannot reach 10.0.0.1:7000"));
        assert_eq!(
            exit_status(&plain.context("status").unwrap_err()),
            EXIT_ERROR
        );
    }
}
