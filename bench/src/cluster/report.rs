//! The report of a local run: the tool's report of the prediction ([`report::report`]), its
//! tables widened with what the real change measured, and the sections that set the two side
//! by side ("Predicted against real", what the prediction held the masters for, the
//! prediction with the module beside the read-only one).

use super::real::{Outcome, Real};
use crate::report::{fixed, Table};
use ringslot_tool::predict::method::Method;
use ringslot_tool::predict::report::{self, fraction, mib, Report};
use ringslot_tool::predict::{Options, Prediction};

/// The report of `outcome`, predicted with `opts`.
pub fn report(outcome: &Outcome, opts: &Options) -> Report {
    let p = &outcome.prediction;
    let mut r = report::report(p, &outcome.change, opts);
    if let Some(ro) = &outcome.read_only {
        r.beside.push(both_ways(p, ro));
    }
    let Some(real) = &outcome.real else {
        return r;
    };
    add_real_columns(&mut r, p, real);
    r.after.push(against_real(p, real));
    if !real.holds.is_empty() {
        r.after.push(holds_section(real));
    }
    r
}

/// The real change's columns: each scheme's real moves (the slot scheme's only), each
/// master's keys after, each master's real memory under the method used, and the real
/// change's time.
fn add_real_columns(r: &mut Report, p: &Prediction, real: &Real) {
    let cell = |n: Option<u64>| n.map_or("-".to_string(), |n| n.to_string());
    r.schemes.headers.extend(
        ["real moved", "real fraction", "real moved bytes"]
            .iter()
            .map(|h| h.to_string()),
    );
    for (i, row) in r.schemes.rows.iter_mut().enumerate() {
        if i == 0 {
            row.extend([
                cell(Some(real.moved)),
                fixed(fraction(real.moved, p.keys), 4),
                cell(real.scan_bytes),
            ]);
        } else {
            row.extend(["-".to_string(), "-".into(), "-".into()]);
        }
    }
    r.masters.headers.push("keys after (real)".into());
    for row in &mut r.masters.rows {
        let address = row.first().cloned().unwrap_or_default();
        row.push(
            real.keys_after
                .get(&address)
                .copied()
                .unwrap_or(0)
                .to_string(),
        );
    }
    for part in r
        .methods
        .parts
        .iter_mut()
        .filter(|part| part.method == real.method)
    {
        part.memory.headers.extend(
            [
                "real before",
                "real peak (sampled every 100 ms)",
                "used_memory_peak after",
                "real at the end",
            ]
            .iter()
            .map(|h| h.to_string()),
        );
        for row in &mut part.memory.rows {
            let address = row.first().cloned().unwrap_or_default();
            match real.memory.iter().find(|m| m.address == address) {
                Some(m) => row.extend([
                    mib(m.before),
                    mib(m.sampled_peak),
                    mib(m.server_peak),
                    mib(m.after),
                ]),
                None => row.extend(["-".to_string(), "-".into(), "-".into(), "-".into()]),
            }
        }
        let seconds = p
            .methods
            .iter()
            .find(|c| c.method == real.method)
            .map_or(p.duration, |c| c.seconds);
        let error = (seconds - real.rebalance_seconds) / real.rebalance_seconds.max(1e-9);
        part.after = format!(
            "\nReal moves: {:.1} s (estimate error {:+.0}%){}.\n",
            real.rebalance_seconds,
            error * 100.0,
            if real.method == Method::Atomic {
                format!(
                    "; the forks copied {} on write (`cow_size` summed over the jobs)",
                    mib(real.cow_bytes as f64)
                )
            } else {
                String::new()
            }
        );
    }
    r.times.push(vec![
        "real change (add-node, rebalance, del-node, convergence)".into(),
        fixed(real.seconds, 2),
    ]);
    r.times.push(vec![
        match real.method {
            Method::PerKey => "- of which the redis-cli rebalance".into(),
            Method::Atomic => "- of which the atomic jobs".to_string(),
        },
        fixed(real.rebalance_seconds, 2),
    ]);
}

/// "Predicted against real": keys, bytes, slot owners and duration, predicted and real.
fn against_real(p: &Prediction, r: &Real) -> String {
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
    format!(
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
    )
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
    for (a, b) in p.rings.iter().zip(&ro.rings) {
        let (f, a, b) = (&a.flavour, &a.sums, &b.sums);
        row(
            format!("ring ({f}): moved, between old"),
            format!("{} {}", a.ring_moved, a.ring_between),
            format!("{} {}", b.ring_moved, b.ring_between),
        );
    }
    if let (Some(a), Some(b)) = (p.rings.first(), ro.rings.first()) {
        let (a, b) = (&a.sums, &b.sums);
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
