//! The report's duration and memory: the per-key estimate and what it is made of, and each
//! migration method's duration and memory per master.

use super::{mib, MethodPart, MethodsSection};
use crate::output::Table;
use crate::predict::duration::{network_seconds, PerKeyModel, DEFAULT_DUMP, DEFAULT_RTT, PIPELINE};
use crate::predict::method::{Method, MethodCost};
use crate::predict::prediction::Prediction;

/// The section on how the slots will move: per method the estimated duration and each
/// master's `used_memory` now, at its peak and at the end.
pub(super) fn methods_section(p: &Prediction) -> MethodsSection {
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
            "\nThe fullest and end figures are the same walk as \"Memory against each node's \
             limit\". Atomic: a source keeps its whole copy until the trim that ends the job; \
             its fork's copy-on-write (as its last fork measured it) and, if the target falls \
             behind, up to the job's payload waiting in its output buffer are RAM on its host \
             that used_memory does not count for eviction (the memory model judges the host \
             for them; Valkey fails the job once that buffer passes its replica \
             client-output-buffer-limit); a target also holds the writes buffered while the \
             job runs (none on an idle cluster). Per key: a source shrinks and a target grows \
             as each key lands. The Valkey wheel allocates with libc malloc and the Redis \
             builds with jemalloc, so used_memory figures do not carry from one to the other.\n"
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
    let header = vec!["master", "used_memory now", "fullest", "at the end"];
    let mut t = Table::new(&header);
    for row in &cost.memory {
        t.push(vec![
            row.address.clone(),
            mib(row.now),
            mib(row.peak),
            mib(row.end),
        ]);
    }
    MethodPart {
        method: cost.method,
        heading,
        memory: t,
        after: String::new(),
    }
}

/// The duration section: the estimate, its range, and what it is made of.
pub(super) fn duration_text(p: &Prediction) -> String {
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
