//! The masters as `ringslot apply` reaches them, and the one door its writes go through: every
//! `CLUSTER SETSLOT`, `MIGRATE` and `CLUSTER MIGRATESLOTS` is a [`Write`] sent by
//! [`Masters::write`], which counts it for the kill-point test ([`EXIT_AFTER_WRITES_VAR`]).
//! Nothing else in `apply` sends a command that changes the cluster.

use crate::cluster::connection::NodeConnection;
use crate::cluster::error::NodeError;
use crate::cluster::link::Link;
use anyhow::{anyhow, Result};
use redis::Value;
use ringslot_engine::cluster::ClusterNode;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// For tests only: `RINGSLOT_APPLY_EXIT_AFTER_WRITES=N` makes a run exit at once (status
/// [`EXIT_AFTER_WRITES`], no clean-up, as a killed process leaves the cluster) after its N-th
/// write ([`Write`]), so that a test can interrupt an apply at every point of a slot's move for
/// certain rather than by timing.
pub(crate) const EXIT_AFTER_WRITES_VAR: &str = "RINGSLOT_APPLY_EXIT_AFTER_WRITES";
/// The exit status of a run stopped by [`EXIT_AFTER_WRITES_VAR`] (used by tests only).
pub(crate) const EXIT_AFTER_WRITES: i32 = 86;

/// A master of the cluster as the run reaches it.
pub(crate) struct Node {
    pub(crate) link: Link,
    pub(crate) id: String,
    pub(crate) con: NodeConnection,
    /// Its own `CLUSTER NODES`, as last read.
    pub(crate) view: Vec<ClusterNode>,
}

/// What a slot becomes on a node (`CLUSTER SETSLOT <slot> <state> <node id>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState<'a> {
    /// On the target: it accepts the slot's keys from the source (`ASKING` clients too).
    Importing { from: &'a str },
    /// On the source: it answers `ASK` for the slot's keys it no longer has.
    Migrating { to: &'a str },
    /// Everywhere, at the end: the slot is this node's.
    Node { owner: &'a str },
}

/// One write of `apply` to a master.
#[derive(Debug, Clone)]
pub(crate) enum Write<'a> {
    /// `CLUSTER SETSLOT <slot> IMPORTING|MIGRATING|NODE <id>`.
    SetSlot { slot: u16, state: SlotState<'a> },
    /// `MIGRATE host port "" 0 <timeout> [REPLACE] [AUTH ...] KEYS <keys>`: the keys go to the
    /// target, which restores them, and the source deletes them.
    Migrate {
        to: &'a str,
        timeout_ms: u128,
        replace: bool,
        auth: &'a [String],
        keys: &'a [Vec<u8>],
    },
    /// Valkey 9's `CLUSTER MIGRATESLOTS SLOTSRANGE a b ... NODE <id>`, sent to the source.
    MigrateSlots {
        ranges: &'a [(u16, u16)],
        to: &'a str,
    },
}

impl Write<'_> {
    /// The command's name, as messages give it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Write::SetSlot { .. } => "CLUSTER SETSLOT",
            Write::Migrate { .. } => "MIGRATE",
            Write::MigrateSlots { .. } => "CLUSTER MIGRATESLOTS",
        }
    }

    /// The command's arguments.
    pub(crate) fn args(&self) -> Result<Vec<Vec<u8>>> {
        let words = |w: &[&str]| w.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>();
        Ok(match self {
            Write::SetSlot { slot, state } => {
                let slot = slot.to_string();
                let (name, id) = match state {
                    SlotState::Importing { from } => ("IMPORTING", *from),
                    SlotState::Migrating { to } => ("MIGRATING", *to),
                    SlotState::Node { owner } => ("NODE", *owner),
                };
                words(&["CLUSTER", "SETSLOT", &slot, name, id])
            }
            Write::Migrate {
                to,
                timeout_ms,
                replace,
                auth,
                keys,
            } => {
                let (host, port) = to
                    .rsplit_once(':')
                    .ok_or_else(|| anyhow!("not an ip:port address: {to}"))?;
                let mut args = words(&["MIGRATE", host, port, "", "0", &timeout_ms.to_string()]);
                if *replace {
                    args.push(b"REPLACE".to_vec());
                }
                args.extend(auth.iter().map(|a| a.as_bytes().to_vec()));
                args.push(b"KEYS".to_vec());
                args.extend(keys.iter().cloned());
                args
            }
            Write::MigrateSlots { ranges, to } => {
                let mut args = words(&["CLUSTER", "MIGRATESLOTS", "SLOTSRANGE"]);
                for (a, b) in *ranges {
                    args.push(a.to_string().into_bytes());
                    args.push(b.to_string().into_bytes());
                }
                args.extend(words(&["NODE", to]));
                args
            }
        })
    }
}

/// The plan's masters, by address, and the writes sent to them so far.
pub(crate) struct Masters {
    pub(crate) nodes: BTreeMap<String, Node>,
    /// Writes answered so far, counted across the lanes of a parallel run (each lane reaches
    /// the masters by connections of its own, [`Masters::reconnect`]), and the test hook's
    /// bound on them: the N-th write of the run, in whichever lane it falls.
    writes: Arc<AtomicU64>,
    stop_after: Option<u64>,
}

impl Masters {
    /// Each master's address and link, by address.
    pub(crate) fn links(&self) -> Vec<(String, Link)> {
        self.nodes
            .iter()
            .map(|(a, n)| (a.clone(), n.link.clone()))
            .collect()
    }

    /// The masters `nodes`, the test hook read from the environment.
    pub(crate) fn new(nodes: BTreeMap<String, Node>) -> Masters {
        Masters {
            nodes,
            writes: Arc::new(AtomicU64::new(0)),
            stop_after: std::env::var(EXIT_AFTER_WRITES_VAR)
                .ok()
                .and_then(|v| v.parse().ok()),
        }
    }

    /// The same masters by connections of their own (for a lane of a parallel run: its
    /// `MIGRATE`s then block only its own pair's), their views as last read, the writes
    /// counted with these. Error: a master that cannot be reached.
    pub(crate) fn reconnect(&self) -> Result<Masters> {
        let mut nodes = BTreeMap::new();
        for (address, n) in &self.nodes {
            nodes.insert(
                address.clone(),
                Node {
                    link: n.link.clone(),
                    id: n.id.clone(),
                    con: n.link.connect()?,
                    view: n.view.clone(),
                },
            );
        }
        Ok(Masters {
            nodes,
            writes: Arc::clone(&self.writes),
            stop_after: self.stop_after,
        })
    }

    /// The master at `address`. Error: not one of the plan's masters.
    pub(crate) fn node(&mut self, address: &str) -> Result<&mut Node> {
        self.nodes
            .get_mut(address)
            .ok_or_else(|| anyhow!("{address} is not a master of the cluster"))
    }

    /// The node id of the master at `address` (empty if it is not one).
    pub(crate) fn id(&self, address: &str) -> String {
        self.nodes
            .get(address)
            .map(|n| n.id.clone())
            .unwrap_or_default()
    }

    /// The one door of `apply`'s writes: sends `write` to the master at `at`, counts it, and
    /// returns the answer. The test hook ([`EXIT_AFTER_WRITES_VAR`]) may end the process right
    /// after the write is answered. Error: the node's answer, or `at` not a master of the plan
    /// (code `Other("tool")`).
    pub(crate) fn write(&mut self, at: &str, write: &Write) -> Result<Value, NodeError> {
        let refused =
            |text: String| NodeError::tool(at, &format!("{} (not sent)", write.name()), &text);
        let args = write.args().map_err(|e| refused(format!("{e:#}")))?;
        let node = self
            .nodes
            .get_mut(at)
            .ok_or_else(|| refused(format!("{at} is not a master of the cluster")))?;
        let reply = node.con.run(&args);
        self.answered();
        reply
    }

    /// Sends `write` to every master in `at` before reading any answer, so that they carry it
    /// out side by side (the `SETSLOT ... NODE` that closes a slot on the masters other than
    /// its source and target, which wait for nothing but their own `nodes.conf`), then reads
    /// the answers in `at`'s order, each counted as [`Masters::write`] counts one (the test
    /// hook's exit after the first answer leaves the others sent, applied or not: each is a
    /// `SETSLOT ... NODE` that a run closing the slot again repeats harmlessly). An answer
    /// per master, in `at`'s order; a master whose send failed has that error.
    pub(crate) fn write_at_once(
        &mut self,
        at: &[String],
        write: &Write,
    ) -> Vec<Result<Value, NodeError>> {
        let args = match write.args() {
            Ok(args) => args,
            Err(e) => {
                let text = format!("{e:#}");
                return at
                    .iter()
                    .map(|a| {
                        Err(NodeError::tool(
                            a,
                            &format!("{} (not sent)", write.name()),
                            &text,
                        ))
                    })
                    .collect();
            }
        };
        let sent: Vec<Result<(), NodeError>> = at
            .iter()
            .map(|a| match self.nodes.get_mut(a) {
                Some(node) => node.con.send(&args),
                None => Err(NodeError::tool(
                    a,
                    &format!("{} (not sent)", write.name()),
                    &format!("{a} is not a master of the cluster"),
                )),
            })
            .collect();
        let mut answers = Vec::with_capacity(at.len());
        for (a, sent) in at.iter().zip(sent) {
            let answer = sent.and_then(|()| match self.nodes.get_mut(a) {
                Some(node) => node.con.receive(&args),
                None => Err(NodeError::tool(
                    a,
                    write.name(),
                    "not a master of the cluster",
                )),
            });
            self.answered();
            answers.push(answer);
        }
        answers
    }

    /// Counts a write answered; the test hook ([`EXIT_AFTER_WRITES_VAR`]) may end the process
    /// here.
    fn answered(&mut self) {
        let writes = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if self.stop_after == Some(writes) {
            std::process::exit(EXIT_AFTER_WRITES);
        }
    }
}
