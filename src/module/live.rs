//! The live Redis Cluster as this node sees it, read from the module (`RedisModule_Call` of
//! `CLUSTER NODES` and `CLUSTER COUNTKEYSINSLOT`): its nodes, whether this node serves a range
//! of slots with none of them open, and how many keys a slot holds. `RING.MIRROR`,
//! `RING.MOVES ... SLOTS` and the keyspace walk of slots (`keys.rs`) use it; it imports no
//! handler.

use super::call::Call;
use super::errors::CommandError;
use crate::engine::cluster::{myself, parse_cluster_nodes, ClusterNode};
use redis_module::{Context, ContextFlags, RedisValue};

/// Slots holding at most this many keys are read whole (`CLUSTER GETKEYSINSLOT`, which has no
/// cursor: a slot is read in one call; what that holds: BENCHMARKS.md, "Figures behind the
/// code"); bigger ones are found by a walk
/// of the whole database in slices, keeping their keys, so that no slot, however big (a hot
/// hash tag), holds the server lock for more than one slice.
pub const SLOT_READ_WHOLE: u64 = 16384;

/// The nodes of the cluster as the node of `context` sees them (`CLUSTER NODES`).
pub fn nodes_seen(context: &Context) -> Result<Vec<ClusterNode>, CommandError> {
    let text = match context.call("CLUSTER", &["NODES"][..])? {
        RedisValue::BulkString(s) | RedisValue::SimpleString(s) => s,
        RedisValue::StringBuffer(b) => String::from_utf8_lossy(&b).into_owned(),
        other => {
            return Err(CommandError::UnexpectedReply {
                command: "CLUSTER NODES",
                reply: format!("{other:?}"),
            })
        }
    };
    Ok(parse_cluster_nodes(&text)?)
}

/// The nodes of the cluster as this node sees them. Error: not a cluster-enabled server.
pub fn live_nodes(call: &Call, command: &'static str) -> Result<Vec<ClusterNode>, CommandError> {
    if !call.flags().contains(ContextFlags::CLUSTER) {
        return Err(CommandError::NotClusterNode { command });
    }
    nodes_seen(&call.context())
}

/// A cluster node's view of the cluster at one step of a keyspace walk: `CLUSTER NODES`,
/// read under the same lock as the step's keys.
pub struct ClusterView {
    /// The nodes as this node sees them.
    pub nodes: Vec<ClusterNode>,
}

/// What a walk checks is still the same at every step: the slots this node serves, and the
/// ones it is migrating or importing the classic way (`CLUSTER SETSLOT`), within the walk's
/// slots.
pub type ServedSlots = (Vec<u16>, Vec<u16>, Vec<u16>);

impl ClusterView {
    /// The view of the node of `context`, or `None` outside cluster mode. On a server with
    /// Valkey's atomic slot migration, also checks that none of this node's touches `range`
    /// (every slot when `None`; see [`check_no_atomic_migration`]).
    pub fn read(
        context: &Context,
        range: Option<(u16, u16)>,
    ) -> Result<Option<ClusterView>, CommandError> {
        if !context.get_flags().contains(ContextFlags::CLUSTER) {
            return Ok(None);
        }
        if super::server::kind().has_valkey_atomic_migration() {
            check_no_atomic_migration(context, range)?;
        }
        Ok(Some(ClusterView {
            nodes: nodes_seen(context)?,
        }))
    }

    /// The slots of `range` (every slot when `None`) that the node marked `myself` serves,
    /// migrates and imports (empty when none is marked; a replica serves none itself).
    pub fn served(&self, range: Option<(u16, u16)>) -> ServedSlots {
        let (lo, hi) = range.unwrap_or((0, u16::MAX));
        let within = |s: u16| (lo..=hi).contains(&s);
        let Some(me) = myself(&self.nodes) else {
            return ServedSlots::default();
        };
        let served = me
            .slots
            .iter()
            .flat_map(|&(a, b)| a.max(lo)..=b.min(hi))
            .collect();
        let open = |list: &[(u16, String)]| {
            list.iter()
                .map(|(s, _)| *s)
                .filter(|&s| within(s))
                .collect()
        };
        (served, open(&me.migrating), open(&me.importing))
    }

    /// Checks one step of a walk of `range` (every slot when `None`): the first step records
    /// what [`ClusterView::served`] gives in `at_start`, every later one fails with
    /// `SlotsChanged` when it differs (a slot moved away or arrived, or began or ended a
    /// migration, while the walk ran, so that the keys counted would mix two owners).
    pub fn check_walk(
        &self,
        at_start: &mut Option<ServedSlots>,
        range: Option<(u16, u16)>,
    ) -> Result<(), CommandError> {
        let now = self.served(range);
        match at_start {
            None => {
                *at_start = Some(now);
                Ok(())
            }
            Some(before) if *before != now => Err(CommandError::SlotsChanged),
            Some(_) => Ok(()),
        }
    }
}

/// The states of `CLUSTER GETSLOTMIGRATIONS` in which a job is over (valkey-io/valkey
/// `src/cluster_migrateslots.c`, `slotMigrationJobStateToString`).
const FINISHED_MIGRATION_STATES: [&str; 3] = ["success", "cancelled", "failed"];

/// Fails with `AtomicMigration` when `CLUSTER GETSLOTMIGRATIONS` (Valkey 9) lists a job of
/// this node that is not over and moves a slot of `range` (any slot when `None`): while it
/// runs, the target holds keys of slots it does not own yet and the source still holds the
/// keys it is sending. The log it reads keeps at most `cluster-slot-migration-log-max-len`
/// jobs (1000 by default).
pub fn check_no_atomic_migration(
    context: &Context,
    range: Option<(u16, u16)>,
) -> Result<(), CommandError> {
    let reply = context.call("CLUSTER", &["GETSLOTMIGRATIONS"][..])?;
    match running_migration(&reply, range)? {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The `AtomicMigration` error for the first job of a `CLUSTER GETSLOTMIGRATIONS` reply (RESP2:
/// an array of flat field/value arrays) that is not over and touches `range`; `None` when
/// there is none. Error: a reply of another shape.
pub fn running_migration(
    reply: &RedisValue,
    range: Option<(u16, u16)>,
) -> Result<Option<CommandError>, CommandError> {
    let unexpected = |reply: &RedisValue| CommandError::UnexpectedReply {
        command: "CLUSTER GETSLOTMIGRATIONS",
        reply: format!("{reply:?}"),
    };
    let RedisValue::Array(jobs) = reply else {
        return Err(unexpected(reply));
    };
    for job in jobs {
        let fields = match job {
            RedisValue::Array(f) => f.as_slice(),
            _ => return Err(unexpected(job)),
        };
        let field = |name: &str| {
            fields.chunks(2).find_map(|pair| match pair {
                [k, v] if as_text(k).as_deref() == Some(name) => as_text(v),
                _ => None,
            })
        };
        let state = field("state").unwrap_or_default();
        if FINISHED_MIGRATION_STATES.contains(&state.as_str()) {
            continue;
        }
        let slots = field("slot_ranges").unwrap_or_default();
        if let Some((lo, hi)) = range {
            if !slot_ranges_touch(&slots, lo, hi) {
                continue;
            }
        }
        return Ok(Some(CommandError::AtomicMigration {
            operation: field("operation").unwrap_or_default().to_lowercase(),
            slots,
            state,
        }));
    }
    Ok(None)
}

/// Whether `CLUSTER GETSLOTMIGRATIONS`' `slot_ranges` text (`0-100 200-300`) has a slot in
/// `lo..=hi`; a text it cannot read counts as touching (the walk is then refused, not wrong).
fn slot_ranges_touch(text: &str, lo: u16, hi: u16) -> bool {
    let ranges: Option<Vec<(u16, u16)>> = text
        .split_whitespace()
        .map(|r| {
            let (a, b) = r.split_once('-')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect();
    match ranges {
        Some(ranges) if !ranges.is_empty() => ranges.iter().any(|&(a, b)| a <= hi && lo <= b),
        _ => true,
    }
}

/// The text of a string reply.
fn as_text(value: &RedisValue) -> Option<String> {
    match value {
        RedisValue::SimpleString(s) | RedisValue::BulkString(s) => Some(s.clone()),
        RedisValue::StringBuffer(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// Checks that the node marked `myself` in `nodes` serves every slot of `start..=end` and
/// that none of them is migrating or importing. Errors name the first slot that fails and,
/// for a slot served elsewhere, who serves it.
pub fn check_slots(nodes: &[ClusterNode], start: u16, end: u16) -> Result<(), CommandError> {
    let me = myself(nodes).ok_or(CommandError::NotInClusterNodes)?;
    for slot in start..=end {
        if !me.serves(slot) {
            let owner = nodes
                .iter()
                .find(|n| n.serves(slot))
                .map_or_else(|| "no node".to_string(), |n| n.address.clone());
            return Err(CommandError::SlotElsewhere {
                slot,
                owner,
                me: me.address.clone(),
            });
        }
    }
    let open = |list: &[(u16, String)]| {
        list.iter()
            .find(|(s, _)| (start..=end).contains(s))
            .map(|(s, _)| *s)
    };
    if let Some(slot) = open(&me.migrating) {
        return Err(CommandError::SlotMigrating { slot });
    }
    if let Some(slot) = open(&me.importing) {
        return Err(CommandError::SlotImporting { slot });
    }
    Ok(())
}

/// The key count of `slot` on the node of `context` (`CLUSTER COUNTKEYSINSLOT`).
pub fn keys_in_slot(context: &Context, slot: u16) -> Result<u64, CommandError> {
    match context.call("CLUSTER", &["COUNTKEYSINSLOT", &slot.to_string()][..])? {
        RedisValue::Integer(n) => Ok(u64::try_from(n).unwrap_or(0)),
        other => Err(CommandError::UnexpectedReply {
            command: "CLUSTER COUNTKEYSINSLOT",
            reply: format!("{other:?}"),
        }),
    }
}

/// Whether this server looks a module command's keys up in the command's own hash slot when
/// cluster mode is on, so that a module command opening keys of other slots finds nothing
/// while it runs (see [`super::server::ServerKind::reads_keys_in_command_slot`]): Valkey, and
/// Redis 7.4 and later, on a cluster node.
pub fn keys_read_in_own_slot(context: &Context) -> bool {
    super::server::kind().reads_keys_in_command_slot()
        && context.get_flags().contains(ContextFlags::CLUSTER)
}

/// Checks that this node serves every slot of `start..=end` and none is migrating or
/// importing ([`check_slots`]), and returns how many keys it holds there and whether a slot
/// holds more than [`SLOT_READ_WHOLE`] (its keys are then found by a walk of the database).
pub fn own_slots(call: &Call, start: u16, end: u16) -> Result<(u64, bool), CommandError> {
    check_slots(&live_nodes(call, "RING.MOVES ... SLOTS")?, start, end)?;
    let context = call.context();
    let (mut keys, mut big) = (0u64, false);
    for slot in start..=end {
        let n = keys_in_slot(&context, slot)?;
        keys += n;
        big |= n > SLOT_READ_WHOLE;
    }
    Ok((keys, big))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cluster::parse_cluster_nodes;

    fn job(state: &str, ranges: &str) -> RedisValue {
        let text = |t: &str| RedisValue::SimpleString(t.to_string());
        RedisValue::Array(vec![
            text("name"),
            text("1a3feb7082f98dedfdc564705e68d9ea02416219"),
            text("operation"),
            text("EXPORT"),
            text("slot_ranges"),
            text(ranges),
            text("state"),
            text(state),
            text("cow_size"),
            RedisValue::Integer(0),
        ])
    }

    #[test]
    fn only_unfinished_jobs_that_touch_the_walk_refuse_it() {
        // As Valkey 9.1.2 answers CLUSTER GETSLOTMIGRATIONS (RESP2, fields as seen there).
        let reply = RedisValue::Array(vec![
            job("success", "0-100"),
            job("snapshotting", "200-300 500-600"),
        ]);
        let refused = running_migration(&reply, None).unwrap().expect("refused");
        assert_eq!(
            refused.to_string(),
            "ERR an atomic slot migration (export of slots 200-300 500-600, snapshotting) is \
             running on this node: evaluate its keys when CLUSTER GETSLOTMIGRATIONS shows it over"
        );
        assert!(running_migration(&reply, Some((0, 199))).unwrap().is_none());
        assert!(running_migration(&reply, Some((301, 499)))
            .unwrap()
            .is_none());
        assert!(running_migration(&reply, Some((250, 250)))
            .unwrap()
            .is_some());
        assert!(running_migration(&reply, Some((600, 700)))
            .unwrap()
            .is_some());
        let unreadable = RedisValue::Array(vec![job("snapshotting", "soon")]);
        assert!(running_migration(&unreadable, Some((0, 10)))
            .unwrap()
            .is_some());
        assert!(running_migration(&RedisValue::Integer(1), None).is_err());
        assert!(running_migration(&RedisValue::Array(vec![]), None)
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_walk_is_refused_when_its_slots_change_or_open_but_not_for_others() {
        let view = |line: &str| ClusterView {
            nodes: parse_cluster_nodes(&format!(
                "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master \
                 - 0 0 1 connected {line}"
            ))
            .unwrap(),
        };
        let mut whole = None;
        let mut part = None;
        let start = view("0-5460");
        start.check_walk(&mut whole, None).unwrap();
        start.check_walk(&mut part, Some((0, 100))).unwrap();
        // Slots 5000-5460 leave: a walk of every slot is refused, one of 0-100 is not.
        let later = view("0-4999");
        assert_eq!(
            later.check_walk(&mut whole, None),
            Err(CommandError::SlotsChanged)
        );
        later.check_walk(&mut part, Some((0, 100))).unwrap();
        // Slot 7 begins to migrate the classic way: both are refused.
        let open = view("0-4999 [7->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]");
        assert_eq!(
            open.check_walk(&mut part, Some((0, 100))),
            Err(CommandError::SlotsChanged)
        );
        assert_eq!(view("").served(None), ServedSlots::default());
    }
}
