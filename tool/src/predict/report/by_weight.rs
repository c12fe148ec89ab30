//! The report's plan by weight, beside redis-cli's (`--by`): both plans' figures, each
//! master after each, the verdict, and how to carry the plan out.

use super::mib;
use crate::output::{fixed, Table};
use crate::plan::WeightBy;
use crate::predict::by_weight::WeightComparison;

/// The plan by weight beside redis-cli's (`--by`); with `--by slots`, redis-cli's plan as the
/// plan file ([`redis_cli_plan_section`]).
pub(super) fn by_weight_section(c: &WeightComparison) -> String {
    if c.plan.by == WeightBy::Slots {
        redis_cli_plan_section(c)
    } else {
        weight_section(c)
    }
}

/// A plan by bytes, memory, keys, load or network beside redis-cli's.
fn weight_section(c: &WeightComparison) -> String {
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
    let per = per_master(c, by);
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
    let aimed = aimed_note(c, by, pct);
    let oversized = format!("{oversized}{aimed}");
    let verdict = verdict(c, by, pct);
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
         this plan evens {by} (each master within {pct:.1}% of its share by capacity: {}), \
         moving slots whole and as little {by} as its heuristic finds (within 2% of the least \
         any plan must move, on its tests).{oversized}{}{}\n\n{}\n{}\n\
         Its moves: {}. The slots \
         one by one are in the JSON (`--json`, field `prediction.by_weight.moves`).{carry} It evens \
         {by}, not keys (see the keys' peak-to-mean), and has no duration estimate yet.\n\n\
         {verdict}\n",
        if c.by_maxmemory {
            "each master's maxmemory, so that they end at even fill ratios, 0 for leaving ones"
        } else {
            "1 a master, --weight for joining ones, 0 for leaving ones"
        },
        if c.capped.is_empty() {
            String::new()
        } else {
            format!(
                " The shares of {} were cut so that the memory the plan sends each fits under \
                 its maxmemory (and its replicas') less the headroom, a batch kept free.",
                c.capped.join(", ")
            )
        },
        match c.pinned_cost {
            Some((free, pinned)) if (free - pinned).abs() < 0.0005 => format!(
                " Slot(s) {} stay where they are: a key in each is too big to move within \
                 --max-hold (see \"Big keys\"); moving them too would not even the masters \
                 more (peak-to-mean {:.3} by {by} either way).",
                c.pinned
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                pinned
            ),
            Some((free, pinned)) => format!(
                " Slot(s) {} stay where they are: a key in each is too big to move within \
                 --max-hold (see \"Big keys\"); moving them too would leave the masters at a \
                 peak-to-mean of {:.3} by {by} instead of {:.3} (--move-big-keys).",
                c.pinned
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                free,
                pinned
            ),
            None => String::new(),
        },
        plans.markdown(),
        per.markdown(),
        if moves.is_empty() {
            "none".to_string()
        } else {
            moves.join("; ")
        }
    )
}

/// What to run, in a sentence: the plan by weight, redis-cli's, or neither reaches the
/// tolerance (`pct`, percent) by `by`.
fn verdict(c: &WeightComparison, by: &str, pct: f64) -> String {
    match c.plans.as_slice() {
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
    }
}

/// `--by slots`: the plan file holds redis-cli's own plan, for `ringslot apply`.
fn redis_cli_plan_section(c: &WeightComparison) -> String {
    let (slots, keys, bytes, peak_bytes, peak_keys) =
        c.plans.first().map_or((0, 0, 0.0, 0.0, 0.0), |f| {
            (
                f.slots_moved,
                f.keys_moved,
                f.bytes_moved,
                f.peak_to_mean_bytes,
                f.peak_to_mean_keys,
            )
        });
    format!(
        "\n## redis-cli's plan as a plan file (--by slots)\n\nThe plan file (`--json`, \
         `by_weight`) holds redis-cli's own plan: the {slots} slots its rebalance would move \
         ({keys} keys, {}), grouped by source and target, the slots one by one in \
         `by_weight.moves`. `ringslot apply plan.json --url ...` carries it out with its \
         checks between slots, its memory limits and its resume rule (`--dry-run` first shows \
         the commands). It evens slot counts, as redis-cli does: after it, the peak-to-mean \
         by bytes is {peak_bytes:.3} and by keys {peak_keys:.3}; `--by bytes` or `--by \
         memory` evens what fills the masters.\n",
        mib(bytes)
    )
}

/// What the report says when the plan aimed inside the tolerance (sized from samples): the
/// tolerance it aimed at, and whether the sample can promise the real figures land within.
fn aimed_note(c: &WeightComparison, by: &str, pct: f64) -> String {
    if c.aimed_tolerance < c.plan.tolerance {
        // Aimed at half the tolerance: the sampling error is the larger, and the real figures
        // may land outside.
        let clamped = (c.aimed_tolerance - c.plan.tolerance / 2.0).abs() < 1e-12;
        format!(
            " Sized from samples, it aimed within {:.1}% ({}), so that the real {by} land within \
             {pct:.1}%{}.",
            c.aimed_tolerance * 100.0,
            if clamped {
                "half the tolerance: two standard errors of a master's share are more"
            } else {
                "the tolerance less two standard errors of a master's share"
            },
            if clamped {
                ", which the sample cannot promise: --bytes-sample with more keys a slot, or \
                 all, narrows the error"
            } else {
                ""
            }
        )
    } else {
        String::new()
    }
}

/// Each master's capacity, target, and slots, keys and bytes after redis-cli's plan and after
/// the plan by `by` (bytes with their 95% interval where a sample sized them).
fn per_master(c: &WeightComparison, by: &str) -> Table {
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
            // Bytes after, with the 95% interval where a sample sized them.
            let at = |v: &[f64], e: &[f64]| {
                let value = v.get(i).copied().unwrap_or(0.0);
                match e.get(i).copied().filter(|e| *e > 0.0) {
                    Some(e) => format!("{value:.0} ± {e:.0}"),
                    None => format!("{value:.0}"),
                }
            };
            let slots = |v: &[u64]| v.get(i).copied().unwrap_or(0).to_string();
            let keys = slots;
            per.push(vec![
                m.clone(),
                {
                    let c = c.capacities.get(i).copied().unwrap_or(0.0);
                    if c.fract() == 0.0 {
                        format!("{c:.0}")
                    } else {
                        format!("{c:.3}")
                    }
                },
                format!("{:.0}", c.targets.get(i).copied().unwrap_or(0.0)),
                slots(&cli.slots_after),
                keys(&cli.keys_after),
                at(&cli.bytes_after, &cli.bytes_after_error),
                slots(&weighted.slots_after),
                keys(&weighted.keys_after),
                at(&weighted.bytes_after, &weighted.bytes_after_error),
            ]);
        }
    }
    per
}
