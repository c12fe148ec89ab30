//! The report of a prediction, for people: named sections ([`Report`]) that [`report`] fills
//! and [`Report::markdown`] puts in order: the plan with the keys and bytes of each move, each
//! scheme's moves, the masters before and after, a plan by weight beside redis-cli's, what to
//! run, the duration and memory of each migration method, and the time of each step; and the
//! tables as CSV. A caller may widen the tables and add sections of its own (the benchmark
//! program sets what a real change measured beside the prediction).

use super::by_weight::WeightComparison;
use super::change::MasterChange;
use super::duration::{network_seconds, PerKeyModel, DEFAULT_DUMP, DEFAULT_RTT, PIPELINE};
use super::method::{Method, MethodCost};
use super::options::Options;
use super::prediction::{Mode, Prediction};
use crate::output::{self, fixed, Table};
use anyhow::Result;
use std::path::Path;

/// `moved / keys`, 0 for no keys.
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
    for h in &p.holds {
        t.push(vec![
            h.address.clone(),
            h.keys_read.to_string(),
            format!("{:.1} ms", h.longest_seconds * 1000.0),
            p.waits
                .get(&h.address)
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

/// A prediction's report, section by section, in the order [`Report::markdown`] prints them.
pub struct Report {
    /// The title, how the prediction ran (with what it did to each master) and what the plan
    /// moves: everything above the moves' table.
    pub head: String,
    /// The plan, move by move (`<name>-moves.csv`).
    pub moves: Table,
    /// Each scheme's moved keys (`<name>.csv`), slots first, then the rings, then modulo.
    pub schemes: Table,
    /// The slot scheme counted key by key, against the keys counted in the moved slots.
    pub scheme_check: String,
    /// Each master before and after (`<name>-masters.csv`).
    pub masters: Table,
    /// "A plan by ..., beside redis-cli's" (`--by`).
    pub by_weight: Option<String>,
    /// "Not measured, and what the run did".
    pub notes: Option<String>,
    /// "What to run": the commands that carry the plan out.
    pub what_to_run: Option<String>,
    /// Sections a caller sets beside the prediction (each starting with a blank line and its
    /// heading).
    pub beside: Vec<String>,
    /// The rings' moved bytes, as estimated.
    pub rings_note: String,
    /// "Duration": the per-key estimate and what it is made of.
    pub duration: String,
    /// "How the slots move": each method's duration and memory.
    pub methods: MethodsSection,
    /// Sections a caller adds before the time (each starting with a blank line and its
    /// heading).
    pub after: Vec<String>,
    /// The time of each step.
    pub times: Table,
}

/// "How the slots move: duration and memory".
pub struct MethodsSection {
    /// What the servers offer, and any master whose memory could not be read.
    pub intro: String,
    /// One part per method.
    pub parts: Vec<MethodPart>,
    /// What the figures leave out (two methods).
    pub outro: String,
}

/// One method's part of [`MethodsSection`].
pub struct MethodPart {
    /// The method.
    pub method: Method,
    /// Its heading and estimated duration.
    pub heading: String,
    /// Each master's memory (its first cell the master's address).
    pub memory: Table,
    /// Text a caller adds under the table.
    pub after: String,
}

impl Report {
    /// The whole report in Markdown.
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "{}\n\n{}\n## Moves per scheme\n\n{}\n{}\n## Masters (slot scheme)\n\n{}",
            self.head,
            self.moves.markdown(),
            self.schemes.markdown(),
            self.scheme_check,
            self.masters.markdown()
        );
        for part in [&self.by_weight, &self.notes, &self.what_to_run]
            .into_iter()
            .flatten()
        {
            md.push_str(part);
        }
        for part in &self.beside {
            md.push_str(part);
        }
        md.push_str(&self.rings_note);
        md.push_str(&self.duration);
        md.push_str(&self.methods.markdown());
        for part in &self.after {
            md.push_str(part);
        }
        md.push_str(&format!("\n## Time\n\n{}", self.times.markdown()));
        md
    }

    /// Writes `dir/name.md`, `dir/name.csv` (the schemes), `dir/name-moves.csv` and
    /// `dir/name-masters.csv`.
    pub fn write(&self, dir: &Path, name: &str) -> Result<()> {
        output::write(dir, &format!("{name}.md"), &self.markdown())?;
        output::write(dir, &format!("{name}.csv"), &self.schemes.csv())?;
        output::write(dir, &format!("{name}-moves.csv"), &self.moves.csv())?;
        output::write(dir, &format!("{name}-masters.csv"), &self.masters.csv())?;
        Ok(())
    }
}

impl MethodsSection {
    /// The section in Markdown.
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "\n## How the slots move: duration and memory\n\n{}",
            self.intro
        );
        for part in &self.parts {
            md.push_str(&part.heading);
            md.push_str(&part.memory.markdown());
            md.push_str(&part.after);
        }
        md.push_str(&self.outro);
        md
    }
}

/// The report of the prediction `p` of `change`, run with `opts`.
pub fn report(p: &Prediction, change: &MasterChange, opts: &Options) -> Report {
    Report {
        head: head(p, change, opts),
        moves: moves_table(p),
        schemes: schemes_table(p),
        scheme_check: scheme_check(p),
        masters: masters_table(p),
        by_weight: p.by_weight.as_ref().map(by_weight_section),
        notes: notes_section(p),
        what_to_run: what_to_run(p),
        beside: Vec::new(),
        rings_note: format!(
            "\nThe rings' moved bytes are their moved keys at the mean size of the keys \
             measured ({:.0} bytes): they move other keys than the slot plan.\n",
            p.mean_bytes
        ),
        duration: format!("\n## Duration\n\n{}\n", duration_text(p)),
        methods: methods_section(p),
        after: Vec::new(),
        times: times_table(p),
    }
}

/// The title, how the prediction ran, and what the plan moves.
fn head(p: &Prediction, change: &MasterChange, opts: &Options) -> String {
    let label = change.label();
    let slots_planned: usize = p.plan.iter().map(|m| m.slots.len()).sum();
    let sample_note = match p.sample {
        Some(n) => format!(
            " Bytes were measured for {n} keys a slot and estimated for the others: ± is two \
             standard errors (a 95% interval)."
        ),
        None => " Bytes were measured key by key.".to_string(),
    };
    let serving = p.masters.iter().filter(|m| m.slots_before > 0).count();
    let joining = match change {
        MasterChange::Add { nodes, .. } => nodes.len(),
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
    let nothing = match (change, slots_planned) {
        (MasterChange::Rebalance { threshold }, 0) => format!(
            " Every master is within the {threshold}% threshold of its share: redis-cli \
             answers \"No rebalancing needed\" (a lower --threshold predicts a smaller \
             rebalance)."
        ),
        _ => String::new(),
    };
    format!(
        "# ringslot on a Redis Cluster: {label}\n\n{}\n\n{masters}, {} live keys. The plan \
         (what redis-cli's rebalance does when run against {}: the commands are under \
         \"What to run\") moves {slots_planned} slots holding {} keys: {} bytes of DUMP \
         payloads ({}), taking {} bytes of memory on their targets.{nothing}{sample_note}",
        mode_line(p, Some(opts.max_keys_per_sec)),
        p.keys,
        p.entry,
        p.keys_moved,
        p.bytes.shown(),
        mib(p.bytes.value),
        p.memory.shown(),
    )
}

/// The plan, move by move.
fn moves_table(p: &Prediction) -> Table {
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
    moves
}

/// Each scheme's moved keys: the slot scheme, each ring, modulo.
fn schemes_table(p: &Prediction) -> Table {
    let mut t = Table::new(&[
        "scheme",
        "keys",
        "moved",
        "moved between old masters",
        "fraction",
        "ideal",
        "moved bytes (rings: moved keys x their mean size)",
    ]);
    t.push(vec![
        "slots (redis-cli --cluster rebalance)".into(),
        p.keys.to_string(),
        p.keys_moved.to_string(),
        p.keys_between_old.to_string(),
        fixed(fraction(p.keys_moved, p.keys), 4),
        fixed(p.ideal, 4),
        p.bytes.shown(),
    ]);
    // The rings move other keys than the slot plan: their bytes at the measured mean.
    let approx = |moved: u64| format!("{:.0}", moved as f64 * p.mean_bytes);
    for r in &p.rings {
        let sums = &r.sums;
        t.push(vec![
            format!("ring ({})", r.flavour),
            sums.members.to_string(),
            sums.ring_moved.to_string(),
            sums.ring_between.to_string(),
            fixed(fraction(sums.ring_moved, sums.members), 4),
            fixed(p.ideal, 4),
            approx(sums.ring_moved),
        ]);
    }
    if let Some(sums) = p.rings.first().map(|r| &r.sums) {
        t.push(vec![
            "modulo (hash mod N)".into(),
            sums.members.to_string(),
            sums.modulo_moved.to_string(),
            sums.modulo_between.to_string(),
            fixed(fraction(sums.modulo_moved, sums.members), 4),
            fixed(p.ideal, 4),
            approx(sums.modulo_moved),
        ]);
    }
    t
}

/// The slot scheme key by key: every pass's what-if counted the keys of the moved slots.
fn scheme_check(p: &Prediction) -> String {
    let per_pass: Vec<String> = p
        .rings
        .iter()
        .map(|r| r.sums.slots_moved.to_string())
        .collect();
    let agree = p.rings.iter().all(|r| r.sums.slots_moved == p.keys_moved);
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
    for r in &p.rings {
        if r.sums.members != p.keys {
            check.push_str(&format!(
                "\n**The {} pass evaluated {} keys where {} were counted**: keys were \
                 written or deleted during the run, or the user may not read some.\n",
                r.flavour, r.sums.members, p.keys
            ));
        }
    }
    check
}

/// Each master before and after, under the slot scheme.
fn masters_table(p: &Prediction) -> Table {
    let mut per = Table::new(&[
        "master",
        "slots before",
        "keys before",
        "slots after",
        "keys after (plan)",
        "bytes out",
        "bytes in",
    ]);
    for m in &p.masters {
        per.push(vec![
            m.address.clone(),
            m.slots_before.to_string(),
            m.keys_before.to_string(),
            m.slots_after.to_string(),
            m.keys_after.to_string(),
            m.bytes_out.shown(),
            m.bytes_in.shown(),
        ]);
    }
    per
}

/// "Not measured, and what the run did", when there is anything to say.
fn notes_section(p: &Prediction) -> Option<String> {
    if p.notes.is_empty() {
        return None;
    }
    let mut md = String::from("\n## Not measured, and what the run did\n\n");
    for n in &p.notes {
        md.push_str(&format!("- {n}\n"));
    }
    Some(md)
}

/// "What to run": the commands that carry out redis-cli's plan, and their notes.
fn what_to_run(p: &Prediction) -> Option<String> {
    if p.commands.is_empty() {
        return None;
    }
    let mut md = String::from("\n## What to run\n\n```\n");
    for c in &p.commands {
        md.push_str(c);
        md.push('\n');
    }
    md.push_str("```\n\n");
    for n in &p.command_notes {
        md.push_str(&format!("- {n}\n"));
    }
    Some(md)
}

/// The time of each step, and of the whole prediction.
fn times_table(p: &Prediction) -> Table {
    let mut times = Table::new(&["step", "seconds"]);
    for (step, secs) in &p.steps {
        times.push(vec![format!("- {step}"), fixed(*secs, 2)]);
    }
    times.push(vec!["prediction".into(), fixed(p.seconds, 2)]);
    times
}

/// The section on how the slots will move: per method the estimated duration and each
/// master's `used_memory` now, at its peak and at the end.
fn methods_section(p: &Prediction) -> MethodsSection {
    let mut intro = if p.methods.len() < 2 {
        "Every server here migrates per key (`MIGRATE`, as `redis-cli --cluster \
         rebalance` does); atomic slot migration needs Valkey 9 on every master.\n"
            .to_string()
    } else {
        format!(
            "Every master has Valkey 9's atomic slot migration. This report is for the \
             **{}** method{}.\n",
            p.method.label(),
            if p.method == Method::PerKey {
                " (run the tool with --atomic for a rebalance by `valkey-cli --cluster \
                 rebalance --cluster-use-atomic-slot-migration`)"
            } else {
                ""
            }
        )
    };
    if let Some(note) = &p.memory_note {
        let hint = p.memory_hint.map_or(String::new(), |h| format!(" {h}"));
        intro.push_str(&format!(
            "\n**used_memory could not be read on every master** ({note}): those masters \
             start at 0 below.{hint}\n"
        ));
    }
    let parts = p.methods.iter().map(|cost| method_part(p, cost)).collect();
    let outro = match p.methods.len() {
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
    };
    MethodsSection {
        intro,
        parts,
        outro: outro.to_string(),
    }
}

/// One method's heading, estimated duration and memory table.
fn method_part(p: &Prediction, cost: &MethodCost) -> MethodPart {
    let heading = format!(
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
    );
    let mut header = vec!["master", "used_memory now", "peak", "at the end"];
    if cost.method == Method::Atomic {
        header.push("peak if the target falls behind");
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
        t.push(cells);
    }
    MethodPart {
        method: cost.method,
        heading,
        memory: t,
        after: String::new(),
    }
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

/// The plan by weight beside redis-cli's (`--by`).
fn by_weight_section(c: &WeightComparison) -> String {
    let by = c.plan.by.name();
    let pct = c.plan.tolerance * 100.0;
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
    for m in &c.plan.moves {
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
    let carry = if c.plan.moves.is_empty() {
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
