//! Valkey 9's atomic slot migrations as `CLUSTER GETSLOTMIGRATIONS` lists them on a node
//! (valkey-io/valkey `src/cluster_migrateslots.c`): each job's fields, whether it is over, and
//! the slots it moves. Redis, and Valkey before 9, have no such command: they run none.

use super::connection::NodeConnection;
use super::error::{Code, NodeError};
use crate::reply::{array as items, ReplyError};
use std::collections::{BTreeMap, BTreeSet};

/// One job of `CLUSTER GETSLOTMIGRATIONS`: its fields as text (`name`, `operation` `IMPORT` or
/// `EXPORT`, `slot_ranges` as `0-100 200-300`, `source_node`, `target_node`, `state`,
/// `message`, `cow_size` in bytes, the times in seconds, ...).
pub type Job = BTreeMap<String, String>;

/// Whether a job is over: `success`, `failed` or `cancelled` (the terminal states).
pub fn finished(job: &Job) -> bool {
    matches!(
        job.get("state").map(String::as_str),
        Some("success" | "failed" | "cancelled")
    )
}

/// The slots of a job's `slot_ranges` (`0-100 200-300`, or `5` for one slot).
pub(crate) fn job_slots(job: &Job) -> BTreeSet<u16> {
    let mut slots = BTreeSet::new();
    for range in job
        .get("slot_ranges")
        .map(String::as_str)
        .unwrap_or_default()
        .split([' ', ','])
        .filter(|r| !r.is_empty())
    {
        let (a, b) = range.split_once('-').unwrap_or((range, range));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<u16>(), b.trim().parse::<u16>()) {
            slots.extend(a..=b);
        }
    }
    slots
}

/// The jobs `CLUSTER GETSLOTMIGRATIONS` lists on the node (newest first). Error: a server
/// without atomic slot migration ([`Code::UnknownSubcommand`]), or a refusal.
pub fn list(con: &mut NodeConnection) -> Result<Vec<Job>, NodeError> {
    let reply = con.run(&["CLUSTER", "GETSLOTMIGRATIONS"])?;
    jobs_of(&reply).map_err(|e| NodeError {
        node: con.address().to_string(),
        command: "CLUSTER GETSLOTMIGRATIONS".into(),
        code: Code::Other("reply".into()),
        text: e.to_string(),
    })
}

/// The jobs of a `CLUSTER GETSLOTMIGRATIONS` reply (an array of maps, RESP2 or RESP3). Error:
/// a reply of another shape.
pub fn jobs_of(reply: &redis::Value) -> Result<Vec<Job>, ReplyError> {
    items(reply)?
        .iter()
        .map(|job| {
            let (pairs, _) = crate::reply::fields(job)?;
            Ok(pairs
                .into_iter()
                .map(|(k, v)| {
                    let value = crate::reply::text(v)
                        .or_else(|_| crate::reply::int(v).map(|n| n.to_string()))
                        .unwrap_or_default();
                    (k, value)
                })
                .collect())
        })
        .collect()
}

/// The first job on the node that is not over, if any; `None` on a server without atomic
/// slot migration (Redis, and Valkey before 9, do not know the subcommand). Error: any other
/// failure (`NOPERM`, a timeout, `LOADING`), which must not pass for "none".
pub(crate) fn running(con: &mut NodeConnection) -> Result<Option<Job>, NodeError> {
    match list(con) {
        Ok(jobs) => Ok(jobs.into_iter().find(|j| !finished(j))),
        Err(e) if e.is(&Code::UnknownSubcommand) => Ok(None),
        Err(e) => Err(e),
    }
}
