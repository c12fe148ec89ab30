//! The report of a prediction: the Markdown (the plan with the keys and bytes of each move,
//! each scheme's moves, the masters before and after, the duration and memory of each
//! migration method, and for a local run the real change beside the prediction) and the CSVs
//! (schemes; moves).

use super::by_weight::WeightComparison;
use super::change::MasterChange;
use super::duration::{network_seconds, PerKeyModel, DEFAULT_DUMP, DEFAULT_RTT, PIPELINE};
use super::method::Method;
use super::options::Options;
use super::prediction::{Mode, Prediction};
use super::real::Real;
use crate::output::{self, fixed, Table};
use anyhow::Result;
use std::path::Path;

pub fn fraction(moved: u64, keys: u64) -> f64 {
    if keys == 0 {
        0.0
    } else {
        moved as f64 / keys as f64
    }
}

/// Bytes as a report shows them: `12.3 MiB`.
pub fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

/// The sentence that says how the prediction ran, and the table of what it did to each
/// master.
fn mode_line(p: &Prediction, opts_rate: Option<u64>) -> String {
    let rate = match opts_rate {
        Some(0) | None => "without a rate limit".to_string(),
        Some(r) => format!("at most {r} keys a second per master"),
    };
    let how = match &p.mode {
        Mode::ReadOnly => format!(
            "**Read-only**: nothing was loaded on the cluster and nothing written; the keys \
             were read with SCAN {rate} and hashed here"
        ),
        Mode::Module => {
            let mut wrote = String::from(
                "**With the module** (--with-module): each master evaluated its own keys \
                 (RING.MOVES ... SLOTS on a copy of the mirror); the moved slots' keys were \
                 read ",
            );
            wrote.push_str(&rate);
            wrote.push_str(". What the run wrote and removed, in order: ");
            wrote.push_str(&p.writes.join("; "));
            wrote
        }
    };
    let mut t = Table::new(&[
        "master",
        if p.by_weight.is_some() {
            "key reads (each key once by name, and again to size it)"
        } else {
            "key reads (each key once by name, each moving key again to size it)"
        },
        "longest round trip of the run's commands (the client's view: a RING.MOVES in the background waits here without holding the master)",
        "longest PING of another client",
    ]);
    for (a, secs, keys) in &p.holds {
        t.push(vec![
            a.clone(),
            keys.to_string(),
            format!("{:.1} ms", secs * 1000.0),
            p.waits
                .get(a)
                .map_or("not measured (PING refused)".to_string(), |w| {
                    format!("{:.1} ms", w.longest * 1000.0)
                }),
        ]);
    }
    format!(
        "{how}. What the run did to each master (another client sent a PING every 10 ms \
         meanwhile; a RING.MOVES past ringslot.inline-limit runs in the background, where its \
         round trip waits without holding the server):\n\n{}",
        t.markdown()
    )
}

/// A prediction and what a report sets beside it.
pub struct Outcome {
    /// The prediction.
    pub prediction: Prediction,
    /// The read-only prediction of the same change, when both ways ran.
    pub read_only: Option<Prediction>,
    /// What the real change measured, when it was made (the benchmark's local runs).
    pub real: Option<Real>,
    /// The change predicted.
    pub change: MasterChange,
}

/// A prediction's report: the Markdown people read, and its two tables as CSV.
pub struct Report {
    /// The whole report.
    pub markdown: String,
    /// Each scheme's moved keys (`<name>.csv`).
    pub schemes: Table,
    /// The plan, move by move (`<name>-moves.csv`).
    pub moves: Table,
    /// Each master before and after (`<name>-masters.csv`).
    pub masters: Table,
}

impl Report {
    /// Writes `dir/name.md`, `dir/name.csv` (the schemes), `dir/name-moves.csv` and
    /// `dir/name-masters.csv`.
    pub fn write(&self, dir: &Path, name: &str) -> Result<()> {
        output::write(dir, &format!("{name}.md"), &self.markdown)?;
        output::write(dir, &format!("{name}.csv"), &self.schemes.csv())?;
        output::write(dir, &format!("{name}-moves.csv"), &self.moves.csv())?;
        output::write(dir, &format!("{name}-masters.csv"), &self.masters.csv())?;
        Ok(())
    }
}

/// The report of `outcome` (a prediction, and for a local run the real change beside it).
pub fn report(outcome: &Outcome, opts: &Options) -> Report {
    let p = &outcome.prediction;
    let real = outcome.real.as_ref();
    let label = outcome.change.label();
    let slots_planned: usize = p.plan.iter().map(|m| m.slots.len()).sum();
    let sample_note = match p.sample {
        Some(n) => format!(
            " Bytes were measured for {n} keys a slot and estimated for the others: ± is two \
             standard errors (a 95% interval)."
        ),
        None => " Bytes were measured key by key.".to_string(),
    };
    // The plan, move by move.
    let mut moves = Table::new(&[
        "from",
        "to",
        "slots",
        "keys",
        "bytes (DUMP, what MIGRATE sends)",
        "memory on the target",
    ]);
    for m in &p.plan {
        moves.push(vec![
            m.from.clone().unwrap_or_else(|| "(unassigned)".into()),
            m.to.clone().unwrap_or_else(|| "(unassigned)".into()),
            m.slots.len().to_string(),
            m.keys.to_string(),
            m.bytes.shown(),
            m.memory.shown(),
        ]);
    }
    // The schemes (the real change's columns only where one was made).
    let mut headers = vec![
        "scheme",
        "keys",
        "moved",
        "moved between old masters",
        "fraction",
        "ideal",
        "moved bytes (rings: moved keys x their mean size)",
    ];
    if real.is_some() {
        headers.extend(["real moved", "real fraction", "real moved bytes"]);
    }
    let mut t = Table::new(&headers);
    let real_cell = |r: Option<u64>| r.map_or("-".to_string(), |n| n.to_string());
    let real_fraction =
        |r: Option<u64>| r.map_or("-".to_string(), |n| fixed(fraction(n, p.keys), 4));
    let mut slots_row = vec![
        "slots (redis-cli --cluster rebalance)".into(),
        p.keys.to_string(),
        p.keys_moved.to_string(),
        p.keys_between_old.to_string(),
        fixed(fraction(p.keys_moved, p.keys), 4),
        fixed(p.ideal, 4),
        p.bytes.shown(),
    ];
    if let Some(r) = real {
        slots_row.extend([
            real_cell(Some(r.moved)),
            real_fraction(Some(r.moved)),
            real_cell(r.scan_bytes),
        ]);
    }
    t.push(slots_row);
    // The rings move other keys than the slot plan: their bytes at the measured mean.
    let approx = |moved: u64| format!("{:.0}", moved as f64 * p.mean_bytes);
    let not_real = |row: &mut Vec<String>| {
        if real.is_some() {
            row.extend(["-".to_string(), "-".into(), "-".into()]);
        }
    };
    for (flavour, sums) in &p.rings {
        let mut row = vec![
            format!("ring ({flavour})"),
            sums.members.to_string(),
            sums.ring_moved.to_string(),
            sums.ring_between.to_string(),
            fixed(fraction(sums.ring_moved, sums.members), 4),
            fixed(p.ideal, 4),
            approx(sums.ring_moved),
        ];
        not_real(&mut row);
        t.push(row);
    }
    if let Some((_, sums)) = p.rings.first() {
        let mut row = vec![
            "modulo (hash mod N)".into(),
            sums.members.to_string(),
            sums.modulo_moved.to_string(),
            sums.modulo_between.to_string(),
            fixed(fraction(sums.modulo_moved, sums.members), 4),
            fixed(p.ideal, 4),
            approx(sums.modulo_moved),
        ];
        not_real(&mut row);
        t.push(row);
    }
    // The slot scheme key by key: every pass's what-if counted the keys of the moved slots.
    let per_pass: Vec<String> = p
        .rings
        .iter()
        .map(|(_, sums)| sums.slots_moved.to_string())
        .collect();
    let agree = p
        .rings
        .iter()
        .all(|(_, sums)| sums.slots_moved == p.keys_moved);
    let mut check = format!(
        "The slot scheme evaluated key by key with each flavour's pass: {} keys moved; {} the \
         keys counted in the moved slots.\n",
        per_pass.join(", "),
        if agree {
            "equal to"
        } else {
            "**not equal to**"
        }
    );
    for (flavour, sums) in &p.rings {
        if sums.members != p.keys {
            check.push_str(&format!(
                "\n**The {flavour} pass evaluated {} keys where {} were counted**: keys were \
                 written or deleted during the run, or the user may not read some.\n",
                sums.members, p.keys
            ));
        }
    }
    // The masters.
    let mut headers = vec![
        "master",
        "slots before",
        "keys before",
        "slots after",
        "keys after (plan)",
        "bytes out",
        "bytes in",
    ];
    if real.is_some() {
        headers.push("keys after (real)");
    }
    let mut per = Table::new(&headers);
    for m in &p.masters {
        let mut row = vec![
            m.address.clone(),
            m.slots_before.to_string(),
            m.keys_before.to_string(),
            m.slots_after.to_string(),
            m.keys_after.to_string(),
            m.bytes_out.shown(),
            m.bytes_in.shown(),
        ];
        if let Some(r) = real {
            row.push(
                r.keys_after
                    .get(&m.address)
                    .copied()
                    .unwrap_or(0)
                    .to_string(),
            );
        }
        per.push(row);
    }
    let entry = &p.entry;
    let serving = p.masters.iter().filter(|m| m.slots_before > 0).count();
    let joining = match &outcome.change {
        super::change::MasterChange::Add { nodes, .. } => nodes.len(),
        _ => 0,
    };
    let present = p.masters.len().saturating_sub(joining);
    let masters = if joining > 0 {
        format!("{serving} masters and {joining} joining")
    } else if serving < present {
        format!("{serving} masters serving slots ({present} in all)")
    } else {
        format!("{serving} masters")
    };
    // A pending rebalance under redis-cli's threshold moves nothing: say so as redis-cli does.
    let nothing = match (&outcome.change, slots_planned) {
        (super::change::MasterChange::Rebalance { threshold }, 0) => format!(
            " Every master is within the {threshold}% threshold of its share: redis-cli \
             answers \"No rebalancing needed\" (a lower --threshold predicts a smaller \
             rebalance)."
        ),
        _ => String::new(),
    };
    let mut md = format!(
        "# ringslot on a Redis Cluster: {label}\n\n{}\n\n{masters}, {} live keys. The plan \
         (what redis-cli's rebalance does when run against {entry}: the commands are under \
         \"What to run\") moves {slots_planned} slots holding {} keys: {} bytes of DUMP \
         payloads ({}), taking {} bytes of memory on their targets.{nothing}{sample_note}\n\n\
         {}\n## Moves per scheme\n\n{}\n{check}\n## Masters (slot scheme)\n\n{}",
        mode_line(p, Some(opts.max_keys_per_sec)),
        p.keys,
        p.keys_moved,
        p.bytes.shown(),
        mib(p.bytes.value),
        p.memory.shown(),
        moves.markdown(),
        t.markdown(),
        per.markdown()
    );
    if let Some(c) = &p.by_weight {
        md.push_str(&by_weight_section(c));
    }
    if !p.notes.is_empty() {
        md.push_str("\n## Not measured, and what the run did\n\n");
        for n in &p.notes {
            md.push_str(&format!("- {n}\n"));
        }
    }
    if !p.commands.is_empty() {
        md.push_str("\n## What to run\n\n```\n");
        for c in &p.commands {
            md.push_str(c);
            md.push('\n');
        }
        md.push_str("```\n\n");
        for n in &p.command_notes {
            md.push_str(&format!("- {n}\n"));
        }
    }
    if let Some(ro) = &outcome.read_only {
        md.push_str(&both_ways(p, ro));
    }
    md.push_str(&format!(
        "\nThe rings' moved bytes are their moved keys at the mean size of the keys measured \
         ({:.0} bytes): they move other keys than the slot plan.\n",
        p.mean_bytes
    ));
    // The duration.
    md.push_str(&format!("\n## Duration\n\n{}\n", duration_text(p)));
    md.push_str(&methods_section(p, real));
    let mut times = Table::new(&["step", "seconds"]);
    for (step, secs) in &p.steps {
        times.push(vec![format!("- {step}"), fixed(*secs, 2)]);
    }
    times.push(vec!["prediction".into(), fixed(p.seconds, 2)]);
    if let Some(r) = real {
        times.push(vec![
            "real change (add-node, rebalance, del-node, convergence)".into(),
            fixed(r.seconds, 2),
        ]);
        times.push(vec![
            match r.method {
                Method::PerKey => "- of which the redis-cli rebalance".into(),
                Method::Atomic => "- of which the atomic jobs".to_string(),
            },
            fixed(r.rebalance_seconds, 2),
        ]);
        let same_owners = r.owner_after == p.owner_after;
        // What each master gives, in slots: the same whichever order redis-cli loads the
        // masters in (a donor gives its lowest slots, its surplus).
        let given = |after: &[Option<String>]| -> Vec<(String, usize)> {
            p.masters
                .iter()
                .map(|m| {
                    let n = p
                        .owner_before
                        .iter()
                        .zip(after)
                        .filter(|(b, a)| {
                            b.as_deref() == Some(m.address.as_str()) && b.as_deref() != a.as_deref()
                        })
                        .count();
                    (m.address.clone(), n)
                })
                .collect()
        };
        let same_given = given(&r.owner_after) == given(&p.owner_after);
        let owners_line = if same_owners {
            "equal to the plan's".to_string()
        } else if same_given {
            "differ from the plan's in which joining master takes which slots, but each master \
             gives exactly the slots the plan says (redis-cli pairs donors with receivers in \
             the order it loads the masters in, which for masters not yet added is unknown: \
             `add-node` first and predict `--rebalance` for the exact moves)"
                .to_string()
        } else {
            "**differ from** the plan's".to_string()
        };
        let estimate = p
            .methods
            .iter()
            .find(|c| c.method == r.method)
            .map_or(p.duration, |c| c.seconds);
        let error = (estimate - r.rebalance_seconds) / r.rebalance_seconds.max(1e-9);
        let (carried, printed) = match r.method {
            Method::PerKey => (
                "the RESTORE-ASKING commands with their protocol, and redis-cli's own",
                "redis-cli printed",
            ),
            Method::Atomic => (
                "the snapshot's commands and the job's own traffic",
                "the atomic jobs",
            ),
        };
        md.push_str(&format!(
            "\n## Predicted against real\n\n\
             - keys the slot scheme moves: predicted {}, real {} (per-slot counts before, slot \
             owners after){}\n\
             - bytes moved (DUMP): predicted {}, real {}; the receiving masters read {} bytes \
             from the network meanwhile ({carried})\n\
             - keys moved between old masters: predicted {}, real {}\n\
             - slot owners after the real rebalance: {}\n\
             - duration of the moves ({}): estimated {:.1} s, real {:.1} s (error {:+.0}%)\n\
             - {printed}: {}\n",
            p.keys_moved,
            r.moved,
            r.scan_moved.map_or(String::new(), |n| format!(
                "; a SCAN of every master before and after: {n}"
            )),
            p.bytes.shown(),
            r.scan_bytes
                .map_or("- (keyspace above --scan-limit)".to_string(), |b| b
                    .to_string()),
            r.net_in,
            p.keys_between_old,
            r.between,
            owners_line,
            r.method.label(),
            estimate,
            r.rebalance_seconds,
            error * 100.0,
            if r.moves_printed.is_empty() {
                "nothing moved".to_string()
            } else {
                r.moves_printed.join("; ")
            }
        ));
    }
    if let Some(r) = real.filter(|r| !r.holds.is_empty()) {
        md.push_str(&holds_section(r));
    }
    md.push_str(&format!("\n## Time\n\n{}", times.markdown()));
    Report {
        markdown: md,
        schemes: t,
        moves,
        masters: per,
    }
}

/// The section on how the slots will move: per method the estimated duration and each
/// master's `used_memory` now, at its peak and at the end; for a local run, what the real
/// moves measured beside them.
fn methods_section(p: &Prediction, real: Option<&Real>) -> String {
    let mut md = String::from("\n## How the slots move: duration and memory\n\n");
    if p.methods.len() < 2 {
        md.push_str(
            "Every server here migrates per key (`MIGRATE`, as `redis-cli --cluster \
             rebalance` does); atomic slot migration needs Valkey 9 on every master.\n",
        );
    } else {
        md.push_str(&format!(
            "Every master has Valkey 9's atomic slot migration. This report is for the \
             **{}** method{}.\n",
            p.method.label(),
            if p.method == Method::PerKey {
                " (run the tool with --atomic for a rebalance by `valkey-cli --cluster \
                 rebalance --cluster-use-atomic-slot-migration`)"
            } else {
                ""
            }
        ));
    }
    if let Some(note) = &p.memory_note {
        // The cause as the error gives it: a refused INFO, or a node the user cannot log in to
        // (a joining master where the ACL user was not made).
        let hint = if note.contains("NOPERM") {
            " `INFO` needs `+info`."
        } else if note.contains("uthentication") || note.contains("WRONGPASS") {
            " The user could not log in there: make it on every node, the joining ones too."
        } else {
            ""
        };
        md.push_str(&format!(
            "\n**used_memory could not be read on every master** ({note}): those masters \
             start at 0 below.{hint}\n"
        ));
    }
    for cost in &p.methods {
        md.push_str(&format!(
            "\n### {}{}\n\nEstimated duration of the moves: {:.1} s ({} {}).\n\n",
            cost.method.label(),
            if cost.method == p.method {
                " (the method this report is for)"
            } else {
                ""
            },
            cost.seconds,
            cost.jobs,
            match cost.method {
                Method::PerKey => "moves, by the fitted model of slots and keys",
                Method::Atomic => "jobs, by the fitted model of jobs and bytes",
            },
        ));
        let shown_real = real.filter(|r| r.method == cost.method);
        let mut header = vec!["master", "used_memory now", "peak", "at the end"];
        if cost.method == Method::Atomic {
            header.push("peak if the target falls behind");
        }
        if shown_real.is_some() {
            header.extend([
                "real before",
                "real peak (sampled every 100 ms)",
                "used_memory_peak after",
                "real at the end",
            ]);
        }
        let mut t = Table::new(&header);
        for row in &cost.memory {
            let mut cells = vec![
                row.address.clone(),
                mib(row.now),
                mib(row.peak),
                mib(row.end),
            ];
            if cost.method == Method::Atomic {
                cells.push(mib(row.worst));
            }
            if let Some(r) = shown_real {
                match r.memory.iter().find(|m| m.address == row.address) {
                    Some(m) => cells.extend([
                        mib(m.before),
                        mib(m.sampled_peak),
                        mib(m.server_peak),
                        mib(m.after),
                    ]),
                    None => cells.extend(["-".to_string(), "-".into(), "-".into(), "-".into()]),
                }
            }
            t.push(cells);
        }
        md.push_str(&t.markdown());
        if let Some(r) = shown_real {
            let error = (cost.seconds - r.rebalance_seconds) / r.rebalance_seconds.max(1e-9);
            md.push_str(&format!(
                "\nReal moves: {:.1} s (estimate error {:+.0}%){}.\n",
                r.rebalance_seconds,
                error * 100.0,
                if r.method == Method::Atomic {
                    format!(
                        "; the forks copied {} on write (`cow_size` summed over the jobs)",
                        mib(r.cow_bytes as f64)
                    )
                } else {
                    String::new()
                }
            ));
        }
    }
    md.push_str(match p.methods.len() {
        0 | 1 => "",
        _ => {
            "\nAtomic: a source keeps its whole copy until the trim that ends the job, plus the \
             fork's copy-on-write (pages written while the child runs: a few MiB on an idle \
             cluster, more under writes; not in the peak above) and, if the target falls \
             behind, up to the job's payload waiting in its output buffer (the last column; \
             Valkey fails the job instead once that buffer passes its replica \
             client-output-buffer-limit); a target also holds the writes buffered while the \
             job runs (none on an idle cluster). Per key: a source shrinks and a target grows as each key lands. The \
             Valkey wheel allocates with libc malloc and the Redis builds with jemalloc, so \
             used_memory figures do not carry from one to the other.\n"
        }
    });
    md
}

/// The section that sets the read-only prediction beside the one with the module.
fn both_ways(p: &Prediction, ro: &Prediction) -> String {
    let mut t = Table::new(&["", "with the module", "read-only", "same"]);
    let mut row = |what: String, a: String, b: String| {
        let same = if a == b { "yes" } else { "**no**" };
        t.push(vec![what, a, b, same.to_string()]);
    };
    row("live keys".into(), p.keys.to_string(), ro.keys.to_string());
    row(
        "keys the slot plan moves".into(),
        p.keys_moved.to_string(),
        ro.keys_moved.to_string(),
    );
    row("their bytes".into(), p.bytes.shown(), ro.bytes.shown());
    let moves = |x: &Prediction| -> String {
        x.plan
            .iter()
            .map(|m| format!("{}/{}", m.slots.len(), m.keys))
            .collect::<Vec<_>>()
            .join(" ")
    };
    row("slots/keys per move".into(), moves(p), moves(ro));
    for ((f, a), (_, b)) in p.rings.iter().zip(&ro.rings) {
        row(
            format!("ring ({f}): moved, between old"),
            format!("{} {}", a.ring_moved, a.ring_between),
            format!("{} {}", b.ring_moved, b.ring_between),
        );
    }
    if let (Some((_, a)), Some((_, b))) = (p.rings.first(), ro.rings.first()) {
        row(
            "modulo: moved, between old".into(),
            format!("{} {}", a.modulo_moved, a.modulo_between),
            format!("{} {}", b.modulo_moved, b.modulo_between),
        );
    }
    let longest = |x: &Prediction| x.waits.values().map(|w| w.longest).fold(0.0f64, f64::max);
    format!(
        "\n## With the module and read-only\n\nThe same change predicted both ways on the same \
         cluster:\n\n{}\nThe longest another client's PING (one every 10 ms) waited on a \
         master: {:.1} ms with the module, {:.1} ms read-only (on this host that also measures \
         the scheduler: see the masters' own records below); the predictions took {:.2} s and \
         {:.2} s.\n",
        t.markdown(),
        longest(p) * 1000.0,
        longest(ro) * 1000.0,
        p.seconds,
        ro.seconds
    )
}

/// The duration section: the estimate, its range, and what it is made of.
fn duration_text(p: &Prediction) -> String {
    let c = &p.counts;
    let t = &p.timing;
    let model = PerKeyModel::of(t);
    let ms = |s: f64| format!("{:.3} ms", s * 1000.0);
    let rtt = t.rtt.map_or_else(
        || {
            format!(
                "{} (not measured: PING refused; a default)",
                ms(DEFAULT_RTT)
            )
        },
        |r| {
            format!(
                "{} to {} (the median PING round trip to the masters, the lower of before and \
                 after the reads, back to back as redis-cli sends its commands, and 2 ms apart, \
                 when idle CPUs must wake)",
                ms(r),
                ms(t.rtt_spaced.unwrap_or(r))
            )
        },
    );
    let dump = t.dump_per_key.map_or_else(
        || {
            format!(
                "{:.1} µs (not measured: INFO commandstats refused or no key read; a default)",
                DEFAULT_DUMP * 1e6
            )
        },
        |d| format!("{:.1} µs (DUMP's server time on the moving keys)", d * 1e6),
    );
    let server = t.server.map_or_else(
        || "Redis 7 (INFO server refused: not told)".to_string(),
        |s| s.label().to_string(),
    );
    let r = &p.duration_range;
    format!(
        "Estimated `redis-cli --cluster rebalance` time (--cluster-pipeline {PIPELINE}): \
         **{:.1} s**, between {:.1} and {:.1} s. It is {} slots x ({} masters + 3) round trips \
         of redis-cli (the SETSLOTs and the last GETKEYSINSLOT of each slot) and {} batches of \
         up to {PIPELINE} keys (3 round trips each: GETKEYSINSLOT, MIGRATE and its copy), at \
         a round trip of {rtt}; plus {} and {:.3} times the round trip for each of the {} pairs \
         of masters a slot's SETSLOTs involve (each master told of the new owner rewrites its cluster config, the disk's \
         cost, assumed from the runs it was fitted to on {server} rather than taken here, and \
         tells the others) and {} a batch; and {} keys at {:.1} times a DUMP's {dump}. The \
         range takes the fitted costs {:.2} times lower and higher; identical local rebalances \
         varied up to 2.2 times, and the range held 38 of the 54 the costs were fitted to \
         (docs/benchmarks/cluster.md): a figure for planning, not a schedule. Over a network, \
         add the bytes at its bandwidth: {} at 1 Gbit/s is {:.1} s more.",
        r.mid,
        r.low,
        r.high,
        c.slots,
        c.masters,
        c.batches,
        ms(model.per_pair),
        model.per_pair_rtt,
        c.pairs,
        ms(model.per_batch),
        c.keys,
        model.key_factor,
        model.spread,
        mib(p.bytes.value),
        network_seconds(p.bytes.value, 1000.0)
    )
}

/// What each prediction held the masters for, from their own records (a local run's).
fn holds_section(r: &Real) -> String {
    let mut t = Table::new(&[
        "prediction",
        "master",
        "its commands of 10 ms or more (SLOWLOG)",
        "the longest",
        "longest background slice of the module (latency monitor)",
    ]);
    for (way, holds) in &r.holds {
        for h in holds {
            t.push(vec![
                way.clone(),
                h.address.clone(),
                h.slow_commands.to_string(),
                if h.slow_commands == 0 {
                    "-".into()
                } else {
                    format!("{:.1} ms ({})", h.longest_command_ms, h.longest_command)
                },
                if h.longest_slice_ms > 0.0 {
                    format!("{:.0} ms", h.longest_slice_ms)
                } else {
                    "under 10 ms".into()
                },
            ]);
        }
    }
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let load = r.load_average.map_or(String::new(), |l| {
        format!(
            " The host's load average at the end of the run: {:.2}, {:.2}, {:.2} ({cpus} \
             CPUs).",
            l[0], l[1], l[2]
        )
    });
    format!(
        "\n## What the prediction held the masters for\n\nFrom each master's own records, \
         reset before each prediction: its SLOWLOG (threshold 10 ms) entries of the tool's \
         connections (named `ringslot`), and its latency monitor's longest `ringslot-slice` \
         event (a background walk of the module holding the main thread; threshold 10 \
         ms).{load}\n\n{}",
        t.markdown()
    )
}

/// The plan by weight beside redis-cli's (`--by`).
fn by_weight_section(c: &WeightComparison) -> String {
    let by = c.by.name();
    let pct = c.tolerance * 100.0;
    let mut plans = Table::new(&[
        "plan",
        "slots moved",
        "keys moved",
        "bytes moved (DUMP)",
        "peak-to-mean after, by bytes",
        "by keys",
        &format!("every master within {pct:.1}% by {by}"),
    ]);
    for f in &c.plans {
        plans.push(vec![
            f.name.clone(),
            f.slots_moved.to_string(),
            f.keys_moved.to_string(),
            format!("{:.0} ({})", f.bytes_moved, mib(f.bytes_moved)),
            fixed(f.peak_to_mean_bytes, 3),
            fixed(f.peak_to_mean_keys, 3),
            if f.within { "yes" } else { "no" }.into(),
        ]);
    }
    let mut per = Table::new(&[
        "master",
        "capacity",
        &format!("target ({by})"),
        "redis-cli: slots",
        "keys",
        "bytes",
        &format!("by {by}: slots"),
        "keys",
        "bytes",
    ]);
    if let [cli, weighted] = c.plans.as_slice() {
        for (i, m) in c.masters.iter().enumerate() {
            let at = |v: &[f64]| format!("{:.0}", v.get(i).copied().unwrap_or(0.0));
            let slots = |v: &[u64]| v.get(i).copied().unwrap_or(0).to_string();
            let keys = slots;
            per.push(vec![
                m.clone(),
                c.capacities.get(i).copied().unwrap_or(0).to_string(),
                format!("{:.0}", c.targets.get(i).copied().unwrap_or(0.0)),
                slots(&cli.slots_after),
                keys(&cli.keys_after),
                at(&cli.bytes_after),
                slots(&weighted.slots_after),
                keys(&weighted.keys_after),
                at(&weighted.bytes_after),
            ]);
        }
    }
    let mut pairs: std::collections::BTreeMap<(&str, &str), u64> = Default::default();
    for m in &c.moves {
        *pairs.entry((m.from.as_str(), m.to.as_str())).or_default() += 1;
    }
    let moves: Vec<String> = pairs
        .iter()
        .map(|((from, to), n)| format!("{from} -> {to}: {n} slots"))
        .collect();
    let oversized = if c.oversized.is_empty() {
        String::new()
    } else {
        format!(
            " Slot(s) {} alone weigh more than any master's share allows (a hash tag bigger \
             than a share): no plan that moves whole slots can reach the tolerance; the plan \
             keeps each on a master of its own and evens the rest among the others.",
            c.oversized
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let verdict = match c.plans.as_slice() {
        [cli, weighted] if weighted.slots_moved == 0 && weighted.within => format!(
            "Nothing to move by {by}: every master is within {pct:.1}% of its share already. \
             redis-cli's rebalance would move {} slots ({}) to even slot counts{}: where {by} \
             is what fills the masters, do not run it (after a plan by {by} it undoes it).",
            cli.slots_moved,
            mib(cli.bytes_moved),
            if cli.within {
                String::new()
            } else {
                format!(
                    " and leave them outside it (peak-to-mean by bytes {:.3})",
                    cli.peak_to_mean_bytes
                )
            }
        ),
        [cli, weighted] if weighted.within && !cli.within => format!(
            "Run the plan by {by}: it leaves every master within {pct:.1}% of its share, \
             which redis-cli's plan does not (peak-to-mean by bytes {:.3} against {:.3}), \
             moving {} against {}.",
            weighted.peak_to_mean_bytes,
            cli.peak_to_mean_bytes,
            mib(weighted.bytes_moved),
            mib(cli.bytes_moved)
        ),
        [cli, weighted] if cli.within => format!(
            "redis-cli's plan already leaves every master within {pct:.1}% by {by}: run it \
             (it moves {}; the plan by {by} {}).",
            mib(cli.bytes_moved),
            mib(weighted.bytes_moved)
        ),
        [cli, weighted] => format!(
            "Neither plan reaches {pct:.1}% by {by}. The plan by {by} comes closer (peak-to-mean \
             by bytes {:.3} against {:.3}), moving {} against {}: prefer it where {by} is what \
             fills the masters.",
            weighted.peak_to_mean_bytes,
            cli.peak_to_mean_bytes,
            mib(weighted.bytes_moved),
            mib(cli.bytes_moved)
        ),
        _ => String::new(),
    };
    let carry = if c.moves.is_empty() {
        String::new()
    } else {
        " redis-cli cannot move chosen slots (its reshard picks them): to carry this plan \
         out, save the JSON (`ringslot predict ... --by BY --json > plan.json`), look at \
         `ringslot apply plan.json --url ... --dry-run`, then run it without --dry-run \
         (\"What to run\" above is redis-cli's plan)."
            .replace("BY", by)
    };
    format!(
        "\n## A plan by {by}, beside redis-cli's\n\nredis-cli's rebalance evens slot counts; \
         this plan evens {by} (each master within {pct:.1}% of its share by capacity: 1 a \
         master, --weight for joining ones, 0 for leaving ones), moving slots whole and as \
         little {by} as its heuristic finds (engine/src/by_weight.rs: within 2% of the least \
         any plan must move on its tests).{oversized}\n\n{}\n{}\nIts moves: {}. The slots \
         one by one are in the JSON (`--json`, field `by_weight.moves`).{carry} It evens \
         {by}, not keys (see the keys' peak-to-mean), and has no duration estimate yet.\n\n\
         {verdict}\n",
        plans.markdown(),
        per.markdown(),
        if moves.is_empty() {
            "none".to_string()
        } else {
            moves.join("; ")
        }
    )
}
