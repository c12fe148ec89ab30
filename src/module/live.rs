//! The live Redis Cluster as this node sees it, read from the module (`RedisModule_Call` of
//! `CLUSTER NODES` and `CLUSTER COUNTKEYSINSLOT`): its nodes, whether this node serves a range
//! of slots with none of them open, and how many keys a slot holds. `RING.MIRROR`,
//! `RING.MOVES ... SLOTS` and the keyspace walk of slots (`keys.rs`) use it; it imports no
//! handler.

use super::call::Call;
use super::errors::CommandError;
use crate::engine::cluster::{parse_cluster_nodes, ClusterNode};
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

/// Checks that the node marked `myself` in `nodes` serves every slot of `start..=end` and
/// that none of them is migrating or importing. Errors name the first slot that fails and,
/// for a slot served elsewhere, who serves it.
pub fn check_slots(nodes: &[ClusterNode], start: u16, end: u16) -> Result<(), CommandError> {
    let me = nodes
        .iter()
        .find(|n| n.has("myself"))
        .ok_or(CommandError::NotInClusterNodes)?;
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
/// cluster mode is on: Valkey 8 and later take the slot of a key a command opens (and of its
/// expiry) from the command's first key (`getKeySlot` with the executing client's cached
/// slot), so a module that reads keys of other slots while its own command runs finds nothing
/// there; from a worker thread (no command executing) the key's own slot is used. Found when
/// `RING.MOVES ... SLOTS` counted no key on Valkey 9.1.2. Redis is said to take the same
/// shortcut from 7.4 (not tested here: no 7.4 binary runs on this machine), so it is assumed
/// there too. Only cluster mode caches the slot. Asked of `INFO server` (`server_name`,
/// `redis_version`) until it answers, then remembered; while it cannot be asked, assumed.
pub fn keys_read_in_own_slot(context: &Context) -> bool {
    static CACHES_SLOT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let caches = match CACHES_SLOT.get() {
        Some(&c) => c,
        None => {
            let text = match context.call("INFO", &["server"][..]) {
                Ok(RedisValue::BulkString(s)) | Ok(RedisValue::SimpleString(s)) => Some(s),
                Ok(RedisValue::StringBuffer(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
                _ => None,
            };
            match text {
                Some(t) => *CACHES_SLOT.get_or_init(|| caches_command_slot(&t)),
                None => true,
            }
        }
    };
    caches && context.get_flags().contains(ContextFlags::CLUSTER)
}

/// Whether `INFO server`'s text names a server that caches the executing command's slot:
/// Valkey, or Redis 7.4 and later.
fn caches_command_slot(info: &str) -> bool {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .map(str::to_string)
    };
    if field("server_name:").as_deref() == Some("valkey") {
        return true;
    }
    let version: Vec<u32> = field("redis_version:")
        .unwrap_or_default()
        .split('.')
        .filter_map(|p| p.parse().ok())
        .collect();
    matches!(version.as_slice(), [major, minor, ..] if (*major, *minor) >= (7, 4))
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
    use super::caches_command_slot;

    #[test]
    fn servers_that_cache_the_command_slot() {
        assert!(caches_command_slot(
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\n"
        ));
        assert!(caches_command_slot("redis_version:7.4.1\r\n"));
        assert!(caches_command_slot("redis_version:8.0.0\r\n"));
        assert!(!caches_command_slot("redis_version:7.0.15\r\n"));
        assert!(!caches_command_slot("redis_version:7.2.4\r\n"));
    }
}
