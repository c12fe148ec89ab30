//! `ringslot`: the operator's tool. `ringslot predict` says what a change of masters will cost
//! a live Redis Cluster (the slot plan of `redis-cli --cluster rebalance`, keys, bytes,
//! duration and memory per migration method, the rings and modulo beside it); `ringslot
//! members` what a change of nodes costs a memcached fleet's keys. The report goes to stdout,
//! `--json` prints one object for scripts instead, and files are written only under `--out`.

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use ringslot_engine::change::DEFAULT_THRESHOLD;
use ringslot_engine::Flavour;
use ringslot_tool::link::{Access, TlsFiles};
use ringslot_tool::predict::{
    self, report, MasterChange, Options, SizesBy, WeightBy, DEFAULT_TOLERANCE, INTERRUPTED,
};
use ringslot_tool::{apply, args, members, output};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "ringslot",
    version,
    about = "What a change of masters costs a live Redis Cluster, and a change of nodes a \
             memcached fleet"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Predicts a change of masters on the live cluster at --url: masters joining (--add),
    /// leaving (--del), or the rebalance pending after `redis-cli --cluster add-node`
    /// (--rebalance).
    Predict(PredictArgs),
    /// What a change of nodes costs keys that are not in Redis: memcached's, from a file (one
    /// key per line, or `lru_crawler metadump` lines) or a live memcached, weighed by their
    /// sizes.
    Members(MembersArgs),
    /// Carries out a plan by weight (`ringslot predict ... --by bytes --json > plan.json`) on
    /// the cluster at --url: each slot moved as redis-cli moves one (SETSLOT IMPORTING and
    /// MIGRATING, MIGRATE in batches, SETSLOT NODE everywhere). Writes: asks for a
    /// confirmation unless --yes; --dry-run prints the commands instead. Interrupted, it goes
    /// on when run again with the same plan.
    Apply(ApplyArgs),
}

#[derive(Args, Debug)]
struct ApplyArgs {
    /// The plan: the JSON `ringslot predict ... --by ... --json` printed.
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    #[command(flatten)]
    connection: Connection,
    /// Print the commands the run would send, from where the cluster stands, and change
    /// nothing.
    #[arg(long)]
    dry_run: bool,
    /// Do not ask for a confirmation.
    #[arg(long)]
    yes: bool,
    /// Keys a CLUSTER GETKEYSINSLOT asks for, and the most a MIGRATE carries.
    #[arg(long, default_value_t = apply::DEFAULT_BATCH_KEYS)]
    batch_keys: u32,
    /// The most bytes (MEMORY USAGE) a MIGRATE carries, one key at least: a MIGRATE blocks
    /// both nodes while it runs.
    #[arg(long, default_value_t = apply::DEFAULT_BATCH_BYTES)]
    batch_bytes: u64,
    /// The most bytes a second the run moves (MEMORY USAGE); 0: no limit.
    #[arg(long, default_value_t = 0)]
    max_bytes_per_sec: u64,
    /// When a key is already on the target with a different value, overwrite it with the
    /// source's (without it the run stops there; equal copies are always replaced).
    #[arg(long)]
    replace: bool,
    /// Move the slots by Valkey 9's atomic slot migration (CLUSTER MIGRATESLOTS, one job per
    /// run of moves between the same two masters) instead of key by key. Every master must be
    /// Valkey 9 or later (and a module loaded there must declare support for it).
    #[arg(long, conflicts_with_all = ["replace", "max_bytes_per_sec"])]
    atomic: bool,
    /// With --atomic: the most seconds one job is waited for (it goes on in the servers; run
    /// again to wait again).
    #[arg(long, value_name = "SECS", default_value_t = 3600, requires = "atomic")]
    atomic_wait: u64,
}

/// Where the output goes.
#[derive(Args, Debug)]
struct Out {
    /// Print one JSON object instead of the report.
    #[arg(long)]
    json: bool,
    /// Also write the report (Markdown) and its tables (CSV) into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Stem of the files written under --out.
    #[arg(long, requires = "out")]
    name: Option<String>,
}

/// How to reach the cluster's nodes.
#[derive(Args, Debug)]
struct Connection {
    /// A node of the cluster, `redis://[user[:password]@]host:port` or `rediss://` for TLS:
    /// the node `redis-cli --cluster rebalance` would be run against (it decides the order of
    /// ties). Every other node is reached the same way (user, password, TLS files). Without a
    /// password in the URL, REDISCLI_AUTH's, else --password-file's.
    #[arg(long, value_name = "URL")]
    url: String,
    /// The ACL user (else the URL's, else `default`).
    #[arg(long)]
    user: Option<String>,
    /// A file whose first line is the password (keeps it off the command line).
    #[arg(long, value_name = "FILE")]
    password_file: Option<PathBuf>,
    /// TLS: the CA certificate that signed the nodes' certificates (PEM; else the system's
    /// trust store). Each node's certificate is checked against the address the cluster
    /// announces for it.
    #[arg(long, value_name = "FILE")]
    tls_ca_cert: Option<PathBuf>,
    /// TLS: a client certificate (PEM), for nodes with `tls-auth-clients yes`.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS: the client certificate's key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The most seconds to wait for a node to accept a connection or to answer a command: a
    /// node that does not is named in an error and the run ends (`predict` having written
    /// nothing; `apply` leaving the slot under way open, to go on when run again).
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    timeout: f64,
}

impl Connection {
    fn access(&self) -> Result<Access> {
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

#[derive(Args, Debug)]
struct PredictArgs {
    #[command(flatten)]
    connection: Connection,
    /// Masters that join, as ip:port (comma-separated or repeated): each one `add-node`d,
    /// then one rebalance.
    #[arg(long, value_name = "IP:PORT", value_delimiter = ',')]
    add: Vec<String>,
    /// With --add: the joining masters' weight (redis-cli --cluster-weight; default 1).
    #[arg(long, requires = "add")]
    weight: Option<u32>,
    /// Masters that leave (comma-separated or repeated): drained in one rebalance (weight 0
    /// each), then `del-node`d.
    #[arg(
        long,
        value_name = "IP:PORT",
        value_delimiter = ',',
        conflicts_with = "add"
    )]
    del: Vec<String>,
    /// The rebalance pending now (after `add-node`: the masters without slots join), as
    /// `redis-cli --cluster rebalance <seed> --cluster-use-empty-masters` makes it.
    #[arg(long, conflicts_with_all = ["add", "del"])]
    rebalance: bool,
    /// redis-cli's --cluster-threshold for --rebalance, in percent.
    #[arg(long, default_value_t = DEFAULT_THRESHOLD)]
    threshold: f64,
    /// Predict with the module loaded on every master (RING.MIRROR, RING.MOVES ... SLOTS on
    /// ring copies: it writes keys with a TTL, deletes them, and says which). Without it the
    /// prediction is read-only.
    #[arg(long)]
    with_module: bool,
    /// Keys a second read from each master (SCAN, DUMP); 0: no limit.
    #[arg(long, default_value_t = 200_000)]
    max_keys_per_sec: u64,
    /// Measure the bytes of this many keys a slot (the rest estimated, with the error
    /// stated) instead of every key the plan moves.
    #[arg(long, value_name = "N")]
    bytes_sample: Option<u64>,
    /// How the moving keys' DUMP lengths are read: `script` (EVAL_RO returns the lengths,
    /// the payloads stay on the masters; DUMP where the user may not run scripts) or `dump`
    /// (the payloads travel to the tool: less of the masters' CPU, more network).
    #[arg(long, value_enum, default_value_t = SizesBy::Script)]
    sizes_by: SizesBy,
    /// Besides redis-cli's plan (even slot counts), a plan that evens this across the masters,
    /// moving as little of it as it can, side by side with redis-cli's: bytes (DUMP lengths),
    /// memory (MEMORY USAGE) or keys, which size every key (--bytes-sample N: N a slot), or load
    /// or network (CLUSTER SLOT-STATS cpu-usec, or network-bytes-in + network-bytes-out, with
    /// cluster-slot-stats-enabled yes). Read-only way only.
    #[arg(long, value_enum, conflicts_with = "with_module")]
    by: Option<WeightBy>,
    /// With --by: how far from its share each master may end, in percent.
    #[arg(long, default_value_t = DEFAULT_TOLERANCE, requires = "by")]
    tolerance: f64,
    /// Ring flavours evaluated, comma-separated (modulo comes with them).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "native,ketama,groupcache",
        value_parser = args::flavour
    )]
    flavours: Vec<Flavour>,
    /// With --with-module: slots per RING.MOVES ... SLOTS call (the work each call holds a
    /// master for).
    #[arg(long, default_value_t = 256)]
    chunk: u16,
    /// With --with-module: seconds the ring copies live on the masters if the run dies.
    #[arg(long, default_value_t = 600)]
    ttl: u64,
    /// The slots will move by Valkey 9's atomic slot migration (CLUSTER MIGRATESLOTS, as
    /// `valkey-cli --cluster rebalance --cluster-use-atomic-slot-migration` runs it): the
    /// report's verdict is for that method. Needs Valkey 9 or later on every master.
    #[arg(long)]
    atomic: bool,
    #[command(flatten)]
    out: Out,
}

#[derive(Args, Debug)]
struct MembersArgs {
    #[command(flatten)]
    members: members::Args,
    #[command(flatten)]
    out: Out,
}

/// `ringslot predict --json`: the change and what it costs.
#[derive(Serialize)]
struct PredictJson<'a> {
    change: &'a MasterChange,
    prediction: &'a predict::prediction::Prediction,
}

fn predict_run(a: &PredictArgs) -> Result<()> {
    if a.chunk == 0 {
        bail!("--chunk needs at least 1 slot");
    }
    if a.bytes_sample == Some(0) {
        bail!("--bytes-sample needs at least 1 key a slot");
    }
    if a.flavours.is_empty() {
        bail!("--flavours needs at least one flavour");
    }
    let change = if !a.add.is_empty() {
        MasterChange::Add {
            nodes: a.add.clone(),
            weight: a.weight,
        }
    } else if !a.del.is_empty() {
        MasterChange::Del {
            nodes: a.del.clone(),
        }
    } else if a.rebalance {
        MasterChange::Rebalance {
            threshold: a.threshold,
        }
    } else {
        bail!(
            "name the change: --add ip:port[,ip:port...] [--weight w], --del \
             ip:port[,ip:port...] or --rebalance (the one pending after add-node)"
        )
    };
    let opts = Options {
        flavours: a.flavours.clone(),
        chunk: a.chunk,
        ttl_secs: a.ttl,
        with_module: a.with_module,
        max_keys_per_sec: a.max_keys_per_sec,
        bytes_sample: a.bytes_sample,
        atomic: a.atomic,
        sizes_by: a.sizes_by,
        by: a.by,
        tolerance: a.tolerance / 100.0,
    };
    // Ctrl-C: the workers stop at their next chunk and the ring copies are deleted. A second
    // Ctrl-C exits.
    ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("ringslot: interrupted; removing what the run made");
    })
    .context("install the Ctrl-C handler")?;
    let access = a.connection.access()?;
    let outcome = predict::predict_at(&access, change, &opts)?;
    let report = report::report(&outcome, &opts);
    if let Some(dir) = &a.out.out {
        report.write(dir, a.out.name.as_deref().unwrap_or("predict"))?;
    }
    if a.out.json {
        let json = PredictJson {
            change: &outcome.change,
            prediction: &outcome.prediction,
        };
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        println!("{}", report.markdown);
    }
    output::announce();
    Ok(())
}

fn members_run(a: &MembersArgs) -> Result<()> {
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

fn apply_run(a: &ApplyArgs) -> Result<()> {
    use std::io::{BufRead, IsTerminal, Write};
    if a.batch_keys == 0 {
        bail!("--batch-keys needs at least 1 key");
    }
    let text = std::fs::read_to_string(&a.plan)
        .with_context(|| format!("cannot read the plan {}", a.plan.display()))?;
    let plan = apply::plan::SlotPlan::from_json(&text)
        .with_context(|| format!("the plan {}", a.plan.display()))?;
    let access = a.connection.access()?;
    let opts = apply::ApplyOptions {
        batch_keys: a.batch_keys,
        batch_bytes: a.batch_bytes,
        max_bytes_per_sec: a.max_bytes_per_sec,
        replace: a.replace,
    };
    let mut prepared = apply::prepare_settled(&access, plan)?;
    prepared.check_permissions(a.atomic)?;
    let total = prepared.plan.moves.len();
    let remaining = prepared.remaining().to_vec();
    let (keys, bytes): (u64, f64) = remaining.iter().fold((0u64, 0.0), |(k, b), m| {
        (k.saturating_add(m.keys), b + m.bytes)
    });
    let done = prepared.position.done;
    if a.dry_run {
        println!(
            "# ringslot apply --dry-run: {done} of {total} moves done; {} to go ({keys} keys, \
             {:.1} MiB by DUMP when planned). Nothing was changed.",
            remaining.len(),
            bytes / 1048576.0
        );
        let lines = if a.atomic {
            prepared.atomic_commands()
        } else {
            prepared.commands(&opts)
        };
        for line in &lines {
            println!("{line}");
        }
        println!(
            "# end of the dry run: {} moves to go; run without --dry-run to carry them out",
            remaining.len()
        );
        return Ok(());
    }
    if remaining.is_empty() && !prepared.position.close_last {
        eprintln!("ringslot: every move of the plan is done ({total} slots); nothing to do");
        return Ok(());
    }
    eprintln!(
        "ringslot: {done} of {total} moves done; this run moves {} slots, {keys} keys, {:.1} \
         MiB by DUMP when planned{}.",
        remaining.len(),
        bytes / 1048576.0,
        if prepared.position.next_open {
            " (the first is open: it goes on where it stopped)"
        } else {
            ""
        }
    );
    if !a.yes {
        if !std::io::stdin().is_terminal() {
            bail!("apply writes to the cluster: give --yes to run without a prompt (or --dry-run)");
        }
        eprint!("Type yes to move them: ");
        std::io::stderr().flush().ok();
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if answer.trim() != "yes" {
            bail!("not confirmed; nothing was changed");
        }
    }
    ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!(
            "ringslot: interrupted; stopping once the slot under way is moved and closed \
             (Ctrl-C again exits at once, leaving it open)"
        );
    })
    .context("install the Ctrl-C handler")?;
    let tty = std::io::stderr().is_terminal();
    let bar = indicatif::ProgressBar::new(bytes.max(1.0) as u64);
    bar.set_message("0 slots, 0 keys");
    if tty {
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:30} {bytes}/{total_bytes} planned, {msg}, {eta} left",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
    } else {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let (mut moved_keys, mut moved_slots) = (0u64, 0usize);
    let started = std::time::Instant::now();
    let mut on = |event: apply::Event| {
        if let apply::Event::Slot {
            index,
            total,
            mv,
            keys,
            bytes,
        } = event
        {
            moved_keys += keys;
            moved_slots += 1;
            bar.inc(mv.bytes as u64);
            bar.set_message(format!("{moved_slots} slots, {moved_keys} keys"));
            if !tty {
                let share = bar.position() as f64 / bar.length().unwrap_or(1).max(1) as f64;
                let elapsed = started.elapsed().as_secs_f64();
                let left = if share > 0.0 {
                    elapsed * (1.0 - share) / share
                } else {
                    0.0
                };
                // A closed stderr (`| head`) must not end the run between two writes.
                let _ = writeln!(
                    std::io::stderr(),
                    "ringslot: moved slot {} {} -> {}: {keys} keys, {bytes} bytes by {} (move \
                     {} of {total}, ~{left:.0} s left)",
                    mv.slot,
                    mv.from,
                    mv.to,
                    if a.atomic {
                        "DUMP, as planned"
                    } else {
                        "MEMORY USAGE"
                    },
                    index + 1
                );
            }
        }
    };
    let outcome = if a.atomic {
        prepared.run_atomic(Duration::from_secs(a.atomic_wait), &mut on)
    } else {
        prepared.run(&opts, &mut on)
    };
    bar.finish_and_clear();
    let applied = outcome?;
    eprintln!(
        "ringslot: done: {} slots, {} keys, {:.1} MiB ({}) moved in {:.1} s; every \
         move of the plan is done",
        applied.slots,
        applied.keys,
        applied.bytes as f64 / 1048576.0,
        if a.atomic {
            "by DUMP, as planned"
        } else {
            "by MEMORY USAGE"
        },
        applied.seconds
    );
    if !applied.equal_copies.is_empty() {
        eprintln!(
            "ringslot: {} keys were already on their target as equal copies (an earlier \
             interrupted MIGRATE) and were replaced: {:?}",
            applied.equal_copies.len(),
            applied.equal_copies.iter().take(10).collect::<Vec<_>>()
        );
    }
    if !applied.replaced.is_empty() {
        eprintln!(
            "ringslot: --replace overwrote {} keys that differed on their target: {:?}",
            applied.replaced.len(),
            applied.replaced.iter().take(10).collect::<Vec<_>>()
        );
    }
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    let done = match &cli.command {
        Command::Predict(a) => predict_run(a),
        Command::Members(a) => members_run(a),
        Command::Apply(a) => apply_run(a),
    };
    if let Err(e) = done {
        eprintln!("ringslot: error: {e:#}");
        std::process::exit(1);
    }
}
