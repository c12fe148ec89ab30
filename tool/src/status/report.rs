//! `ringslot status` as text: the verdict first, then a table of the masters, the balance, the
//! biggest slots and the big keys met (Markdown; the masters also as CSV under `--out`).

use super::Status;
use crate::output::{self, Table};
use crate::picture::mib;
use anyhow::Result;
use std::path::Path;

/// An error in MiB with two significant digits at least (`0.012`, `0.4`, `3.1`).
fn error_mib(bytes: f64) -> String {
    let x = bytes / (1024.0 * 1024.0);
    if x >= 0.1 {
        format!("{x:.1}")
    } else if x >= 0.001 {
        format!("{x:.3}")
    } else {
        "< 0.001".to_string()
    }
}

/// The masters' table: one row a master.
pub fn masters_table(status: &Status) -> Table {
    let mut t = Table::new(&[
        "master",
        "slots",
        "keys",
        "MiB (sampled)",
        "bytes / mean",
        "used_memory MiB",
        "maxmemory MiB",
        "policy",
        "replicas (link, lag bytes)",
        "open slots",
    ]);
    for m in &status.masters {
        let bytes = if !m.unread.is_empty() {
            "-".to_string()
        } else if m.bytes.exact {
            mib(m.bytes.value)
        } else if m.bytes.error == 0.0 {
            // Estimated, its error unknown (one key sized a slot, or a big key among them).
            format!("~{}", mib(m.bytes.value))
        } else {
            format!("{} ± {}", mib(m.bytes.value), error_mib(m.bytes.error))
        };
        let replicas: Vec<String> = m
            .replicas
            .iter()
            .map(|r| {
                let link = if r.link.is_empty() { "unread" } else { &r.link };
                let lag = r.lag_bytes.map_or_else(|| "-".into(), |l| l.to_string());
                format!("{} ({link}, {lag})", r.address)
            })
            .collect();
        let mut open: Vec<String> = m
            .migrating
            .iter()
            .map(|o| format!("{} migrating to {}", o.slot, o.peer))
            .chain(
                m.importing
                    .iter()
                    .map(|o| format!("{} importing from {}", o.slot, o.peer)),
            )
            .collect();
        open.extend(m.atomic_migrations.iter().map(|j| {
            format!(
                "atomic {} {} with {} ({})",
                j.operation.to_lowercase(),
                j.slots,
                j.peer,
                j.state
            )
        }));
        t.push(vec![
            m.address.clone(),
            m.slots.to_string(),
            m.keys.to_string(),
            bytes,
            format!("{:.2}", m.bytes_share),
            mib(m.used_memory),
            if m.maxmemory > 0.0 {
                mib(m.maxmemory)
            } else {
                "-".into()
            },
            m.policy.clone(),
            if replicas.is_empty() {
                "-".into()
            } else {
                replicas.join(", ")
            },
            if open.is_empty() {
                "-".into()
            } else {
                open.join(", ")
            },
        ]);
    }
    t
}

/// The report in Markdown.
pub fn markdown(status: &Status) -> String {
    let mut md = format!(
        "# Cluster status ({}, seed {})\n\n**{}**\n\n{}\n",
        status.server,
        status.seed,
        status.verdict,
        masters_table(status).markdown()
    );
    md.push_str(&format!(
        "\nBalance, peak-to-mean over the masters: slots {:.2}, keys {:.2}, bytes {:.2}. Bytes \
         are `MEMORY USAGE` of up to {} keys a slot ({} keys sized), scaled to each slot's \
         key count; ± is two standard errors.\n",
        status.balance.slots,
        status.balance.keys,
        status.balance.bytes,
        status.keys_per_slot,
        status.keys_sized
    ));
    for m in status.masters.iter().filter(|m| !m.unread.is_empty()) {
        md.push_str(&format!(
            "\nMaster {} was not read: {}.\n",
            m.address, m.unread
        ));
    }
    let alone: Vec<&str> = status
        .masters
        .iter()
        .filter(|m| m.slots > 0 && m.unread.is_empty() && m.replicas.is_empty())
        .map(|m| m.address.as_str())
        .collect();
    if !alone.is_empty() {
        md.push_str(&format!(
            "\nMasters without a replica (if one fails, no replica takes its slots over): {}.\n",
            alone.join(", ")
        ));
    }
    // (A flagged master is said above, among those not read.)
    for n in status.flagged.iter().filter(|n| !n.master) {
        md.push_str(&format!(
            "\nReplica {} is flagged `{}`.\n",
            n.address, n.flag
        ));
    }
    if status.uncovered_slots > 0 {
        md.push_str(&format!(
            "\n{} slots are served by no master.\n",
            status.uncovered_slots
        ));
    }
    if !status.biggest_slots.is_empty() {
        let mut t = Table::new(&["slot", "master", "keys", "MiB (sampled)"]);
        for s in &status.biggest_slots {
            t.push(vec![
                s.slot.to_string(),
                s.master.clone(),
                s.keys.to_string(),
                format!("{:.3}", s.bytes / (1024.0 * 1024.0)),
            ]);
        }
        md.push_str(&format!("\n## Biggest slots\n\n{}", t.markdown()));
    }
    if status.big_keys.is_empty() {
        md.push_str(if status.big_keys_screened {
            "\nNo big key (512 KiB or more): every key screened.\n"
        } else {
            "\nNo big key (512 KiB or more) met in the sample: `--big-keys` screens every key \
             (a big key the sample missed is not in the bytes either).\n"
        });
    } else {
        let mut t = Table::new(&["key", "slot", "master", "type", "length", "MiB"]);
        for k in &status.big_keys {
            t.push(vec![
                k.key.clone(),
                k.slot.to_string(),
                k.master.clone(),
                k.kind.clone(),
                k.length.to_string(),
                mib(k.memory),
            ]);
        }
        let (heading, note) = if status.big_keys_screened {
            ("Big keys (512 KiB or more), every key screened", "")
        } else {
            (
                "Big keys met in the sample (512 KiB or more)",
                "The sample sees some keys of each slot only: `--big-keys` screens every key.\n",
            )
        };
        md.push_str(&format!("\n## {heading}\n\n{}\n{note}", t.markdown()));
    }
    md.push_str(&format!("\nRead in {:.2} s.\n", status.seconds));
    md
}

/// Writes `<name>.md`, `<name>-masters.csv` and the picture `<name>.svg` into `dir`.
pub fn write(status: &Status, dir: &Path, name: &str) -> Result<()> {
    output::write(dir, &format!("{name}.md"), &markdown(status))?;
    output::write(
        dir,
        &format!("{name}.svg"),
        &super::picture::picture(status).svg()?,
    )?;
    output::write(
        dir,
        &format!("{name}-masters.csv"),
        &masters_table(status).csv(),
    )?;
    Ok(())
}
