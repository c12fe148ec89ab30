//! `ringslot apply --dry-run`: the commands a key-by-key run would send from where the cluster
//! stands, one line each (`--atomic`'s are `Prepared::atomic_commands`, in atomic.rs).

use super::{ApplyOptions, Prepared};
use crate::plan::SlotMove;

impl Prepared {
    /// The commands the run would send, in order, one line each (`node: command`), with a
    /// comment line per move: what `--dry-run` prints.
    pub(crate) fn commands(&self, opts: &ApplyOptions) -> Vec<String> {
        let mut lines = Vec::new();
        let close = |lines: &mut Vec<String>, m: &SlotMove| {
            let to = self.masters.id(&m.to);
            lines.push(format!("{}: CLUSTER SETSLOT {} NODE {to}", m.to, m.slot));
            lines.push(format!("{}: CLUSTER SETSLOT {} NODE {to}", m.from, m.slot));
            for other in self
                .masters
                .nodes
                .keys()
                .filter(|a| **a != m.to && **a != m.from)
            {
                lines.push(format!("{other}: CLUSTER SETSLOT {} NODE {to}", m.slot));
            }
        };
        let total = self.plan.moves.len();
        for index in self.position.pending() {
            let Some(m) = self.plan.moves.get(index) else {
                continue;
            };
            if self.position.done.get(index).copied().unwrap_or(false) {
                lines.push(format!(
                    "# move {} (slot {}) has its keys on {}: it is closed first",
                    index + 1,
                    m.slot,
                    m.to
                ));
                close(&mut lines, m);
                continue;
            }
            lines.push(format!(
                "# move {} of {total}: slot {} {} -> {} ({} keys, {:.0} bytes by DUMP \
                 when planned){}",
                index + 1,
                m.slot,
                m.from,
                m.to,
                m.keys,
                m.bytes,
                if self.position.open.contains(&index) {
                    "; open: it goes on where it stopped"
                } else {
                    ""
                }
            ));
            lines.push(format!(
                "{}: CLUSTER SETSLOT {} IMPORTING {}",
                m.to,
                m.slot,
                self.masters.id(&m.from)
            ));
            lines.push(format!(
                "{}: CLUSTER SETSLOT {} MIGRATING {}",
                m.from,
                m.slot,
                self.masters.id(&m.to)
            ));
            let (host, port) = m.to.rsplit_once(':').unwrap_or((&m.to, ""));
            let mut migrate = vec![
                "MIGRATE".to_string(),
                host.to_string(),
                port.to_string(),
                "\"\"".into(),
                "0".into(),
                self.migrate_timeout_ms().to_string(),
            ];
            migrate.extend(self.auth(true));
            lines.push(format!(
                "{}: repeated until the slot is empty: CLUSTER GETKEYSINSLOT {} {}; MEMORY \
                 USAGE of each key; {} KEYS <keys> (at most {} keys and {} bytes a MIGRATE)",
                m.from,
                m.slot,
                opts.batch_keys,
                migrate.join(" "),
                opts.batch_keys,
                opts.batch_bytes
            ));
            close(&mut lines, m);
        }
        lines
    }
}
