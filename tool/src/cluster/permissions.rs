//! The commands a prediction or an apply needs, checked on every master before anything else
//! is read or written.
//! An unprivileged user may run neither `ACL DRYRUN` nor `ACL GETUSER` (both @admin), so
//! each command is probed once per master with harmless arguments (a key that does not
//! exist, a zero cursor): `NOPERM ... command` says the user may not run it, any other answer
//! that it may. ACL users exist per node, so every master is probed. Every refusal of a
//! needed command is gathered into one error that names the commands, the masters and the
//! `ACL SETUSER` rule that grants them; a refused optional one (what the run can do without)
//! becomes a note of what is then not measured.

use super::error::Code;
use super::link::Link;
use crate::cluster::finding::refuse;
use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// A command a way of predicting uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Need {
    /// The command as `ACL SETUSER` grants it (`memory|usage`).
    pub acl: &'static str,
    /// A harmless call of it.
    pub probe: &'static [&'static str],
    /// What is lost without it; `None` when the run cannot do without it.
    pub without: Option<&'static str>,
}

/// The key the probes name: it does not exist, and nothing writes it.
const PROBE_KEY: &str = "ringslot:acl-probe";

/// What a key-by-key `ringslot apply` runs on every master, each with a harmless probe (an out-of-range
/// slot, a key that does not exist, a payload no server accepts): the source's commands and,
/// since `MIGRATE` logs in to the target as the same user, the target's (`SELECT`, `ASKING`,
/// `RESTORE-ASKING`).
pub(crate) const APPLY_NEEDS: &[Need] = &[
    Need {
        acl: "cluster|info",
        probe: &["CLUSTER", "INFO"],
        without: None,
    },
    Need {
        acl: "cluster|setslot",
        probe: &["CLUSTER", "SETSLOT", "16384", "STABLE"],
        without: None,
    },
    Need {
        acl: "cluster|getkeysinslot",
        probe: &["CLUSTER", "GETKEYSINSLOT", "0", "0"],
        without: None,
    },
    Need {
        acl: "cluster|countkeysinslot",
        probe: &["CLUSTER", "COUNTKEYSINSLOT", "0"],
        without: None,
    },
    Need {
        acl: "memory|usage",
        probe: &["MEMORY", "USAGE", PROBE_KEY],
        without: None,
    },
    Need {
        acl: "dump",
        probe: &["DUMP", PROBE_KEY],
        without: None,
    },
    Need {
        acl: "migrate",
        probe: &["MIGRATE", "127.0.0.1", "1", PROBE_KEY, "0", "1"],
        without: None,
    },
    Need {
        acl: "select",
        probe: &["SELECT", "0"],
        without: None,
    },
    Need {
        acl: "asking",
        probe: &["ASKING"],
        without: None,
    },
    Need {
        acl: "restore-asking",
        probe: &["RESTORE-ASKING", PROBE_KEY, "0", "not-a-dump-payload"],
        without: None,
    },
    // Each node's memory and its replicas' offsets (INFO memory, stats, replication), which
    // the run is held to; and whether a master is Valkey 9 (INFO server).
    Need {
        acl: "info",
        probe: &["INFO", "server"],
        without: None,
    },
    // Valkey 9 (an unknown subcommand elsewhere, which no ACL refuses): a running atomic job
    // must be seen before slots are opened key by key.
    Need {
        acl: "cluster|getslotmigrations",
        probe: &["CLUSTER", "GETSLOTMIGRATIONS"],
        without: None,
    },
];

/// What `ringslot apply --atomic` runs besides [`APPLY_NEEDS`] on every master (Valkey 9).
pub(crate) const ATOMIC_NEEDS: &[Need] = &[Need {
    acl: "cluster|migrateslots",
    probe: &[
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        "16384",
        "16384",
        "NODE",
        "0",
    ],
    without: None,
}];

/// The commands of the read-only way: `CLUSTER NODES` (the topology), `SCAN` (every key),
/// `DUMP` and `MEMORY USAGE` (the moving keys' bytes), `TYPE`, `OBJECT ENCODING` and the O(1)
/// lengths (big keys, described without being read whole); optionally `INFO` (memory and server
/// kind), `PING` (other clients' latency meanwhile), `EVAL_RO` (the sizes by a read-only
/// script, without carrying the payloads), `CLIENT SETNAME` (the connections named `ringslot`)
/// and `CLIENT NO-TOUCH` (reads that leave access times alone; Redis 7.2 and later, Valkey).
pub(crate) const READ_ONLY: &[Need] = &[
    Need {
        acl: "cluster|nodes",
        probe: &["CLUSTER", "NODES"],
        without: None,
    },
    Need {
        acl: "scan",
        probe: &["SCAN", "0", "COUNT", "1"],
        without: None,
    },
    Need {
        acl: "dump",
        probe: &["DUMP", PROBE_KEY],
        without: None,
    },
    Need {
        acl: "memory|usage",
        probe: &["MEMORY", "USAGE", PROBE_KEY],
        without: None,
    },
    // A big key is described without being read whole: its kind and its O(1) length.
    Need {
        acl: "type",
        probe: &["TYPE", PROBE_KEY],
        without: None,
    },
    Need {
        acl: "object|encoding",
        probe: &["OBJECT", "ENCODING", PROBE_KEY],
        without: None,
    },
    Need {
        acl: "strlen",
        probe: &["STRLEN", PROBE_KEY],
        without: None,
    },
    Need {
        acl: "hlen",
        probe: &["HLEN", PROBE_KEY],
        without: None,
    },
    Need {
        acl: "llen",
        probe: &["LLEN", PROBE_KEY],
        without: None,
    },
    Need {
        acl: "scard",
        probe: &["SCARD", PROBE_KEY],
        without: None,
    },
    Need {
        acl: "zcard",
        probe: &["ZCARD", PROBE_KEY],
        without: None,
    },
    Need {
        acl: "xlen",
        probe: &["XLEN", PROBE_KEY],
        without: None,
    },
    // Valkey 9 (an unknown subcommand elsewhere, which no ACL refuses).
    Need {
        acl: "cluster|getslotmigrations",
        probe: &["CLUSTER", "GETSLOTMIGRATIONS"],
        without: None,
    },
    Need {
        acl: "info",
        probe: &["INFO", "server"],
        without: Some("each master's used_memory and the migration method's memory figures"),
    },
    Need {
        acl: "ping",
        probe: &["PING"],
        without: Some("other clients' PING latency while the prediction ran"),
    },
    Need {
        acl: "eval_ro",
        probe: &["EVAL_RO", "return 1", "0"],
        without: Some(
            "the moving keys' sizes by script: their payloads were carried to the tool to be \
             measured, which is slower",
        ),
    },
    Need {
        acl: "client|setname",
        probe: &["CLIENT", "SETNAME", super::link::CLIENT_NAME],
        without: Some(
            "names on the tool's connections: a master's SLOWLOG and CLIENT LIST cannot tell \
             its commands apart (and its ACL LOG records each refused CLIENT SETNAME)",
        ),
    },
];

/// Besides [`READ_ONLY`], what `--with-module` runs: `MODULE LIST`, the ring commands, the
/// copies' `RESTORE` and `EXPIRE` (`DEL`, `EXISTS`, `WATCH` and `MULTI`/`EXEC` are not probed:
/// no call of `DEL` is harmless; a copy that cannot be deleted expires), `GET`, which the
/// module checks a key's read right with, and for the moved slots `CLUSTER COUNTKEYSINSLOT`
/// and `CLUSTER GETKEYSINSLOT`. Each probe fails on its arguments if it may run.
pub(crate) const WITH_MODULE: &[Need] = &[
    Need {
        acl: "module|list",
        probe: &["MODULE", "LIST"],
        without: None,
    },
    Need {
        acl: "ring.mirror",
        probe: &["RING.MIRROR", PROBE_KEY, "COMPAT", "no-such-flavour"],
        without: None,
    },
    Need {
        acl: "ring.plan",
        probe: &["RING.PLAN", PROBE_KEY, "REBALANCE"],
        without: None,
    },
    Need {
        acl: "ring.moves",
        probe: &["RING.MOVES", PROBE_KEY, "ADD", "probe"],
        without: None,
    },
    Need {
        acl: "restore",
        probe: &["RESTORE", PROBE_KEY, "0", "not-a-payload"],
        without: None,
    },
    Need {
        acl: "expire",
        probe: &["EXPIRE", PROBE_KEY, "1"],
        without: None,
    },
    Need {
        acl: "get",
        probe: &["GET", PROBE_KEY],
        without: None,
    },
    Need {
        acl: "cluster|countkeysinslot",
        probe: &["CLUSTER", "COUNTKEYSINSLOT", "0"],
        without: None,
    },
    Need {
        acl: "cluster|getkeysinslot",
        probe: &["CLUSTER", "GETKEYSINSLOT", "0", "1"],
        without: None,
    },
];

/// What the probes found: per optional command refused, the masters and what is lost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Granted {
    /// Notes of what the run will not measure, one per optional command refused somewhere.
    pub notes: Vec<String>,
}

/// Probes `needs` on every node of `nodes` (the seed first, then every master) as `user` (for
/// the message). Errors: a needed command refused somewhere (all of them named at once, with
/// the rule that grants them), a node that cannot be reached or does not answer.
pub(crate) fn check(nodes: &[&Link], needs: &[Need], user: &str) -> Result<Granted> {
    let mut refused: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for link in nodes {
        for need in probe(link, needs)? {
            refused
                .entry(need.acl)
                .or_default()
                .push(link.address.clone());
        }
    }
    let all = nodes.len();
    let on = |masters: &[String]| {
        if masters.len() == all && all > 1 {
            "every master".to_string()
        } else {
            masters.join(", ")
        }
    };
    let needed: Vec<(&str, &Vec<String>)> = refused
        .iter()
        .filter(|(acl, _)| needs.iter().any(|n| n.acl == **acl && n.without.is_none()))
        .map(|(acl, masters)| (*acl, masters))
        .collect();
    if !needed.is_empty() {
        let listed: Vec<String> = needed
            .iter()
            .map(|(acl, masters)| {
                format!(
                    "{} (on {})",
                    acl.to_uppercase().replace('|', " "),
                    on(masters)
                )
            })
            .collect();
        let grant: Vec<String> = needed.iter().map(|(acl, _)| format!("+{acl}")).collect();
        refuse!(
            "the user `{user}` may not run what the prediction needs: {}. Grant it on every \
             node (ACL users are per node): ACL SETUSER {user} {}",
            listed.join("; "),
            grant.join(" ")
        );
    }
    let notes = refused
        .iter()
        .filter_map(|(acl, masters)| {
            let need = needs.iter().find(|n| n.acl == *acl)?;
            Some(format!(
                "not measured: {} (the user `{user}` may not run {} on {}; +{acl} grants it)",
                need.without?,
                acl.to_uppercase().replace('|', " "),
                on(masters)
            ))
        })
        .collect();
    Ok(Granted { notes })
}

/// The needs the node at `link` refuses. Error: it cannot be reached or does not answer.
fn probe(link: &Link, needs: &[Need]) -> Result<Vec<Need>> {
    let mut con = link.connect()?;
    let mut refused = Vec::new();
    for need in needs {
        match con.run(need.probe) {
            Ok(_) => {}
            Err(e) if matches!(e.code, Code::Timeout | Code::Io) => {
                bail!("{}: {}", link.address, e.text)
            }
            Err(e) if e.is(&Code::NoPermCommand) => refused.push(*need),
            // Any other refusal (a key the user may not read, an unknown subcommand on an
            // older server) still says the command itself may run.
            Err(_) => {}
        }
    }
    Ok(refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_need_probes_its_own_command() {
        // Every need names its command as ACL SETUSER takes it, and probes that command.
        for need in READ_ONLY
            .iter()
            .chain(WITH_MODULE)
            .chain(APPLY_NEEDS)
            .chain(ATOMIC_NEEDS)
        {
            let first = need.acl.split('|').next().unwrap_or_default();
            assert!(
                need.probe[0].eq_ignore_ascii_case(first) || need.probe[0] == "COMMAND",
                "{need:?}"
            );
        }
    }
}
