//! What a node says of its memory and its replication: `used_memory` and the part of it
//! eviction counts, `maxmemory` and its policy, the host's RAM, the keys evicted so far, its
//! last fork's copy-on-write and the frees still pending (`INFO memory`, `INFO stats`, `INFO
//! persistence`), and for a master its replicas' offsets (`INFO replication`). Reads only: how
//! that memory is judged is [`super::budget`]'s.

use super::connection::NodeConnection;
use super::error::NodeError;
use crate::reply::info_field;
use serde::Serialize;

/// What a node does when its counted memory passes `maxmemory` (`maxmemory-policy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "name")]
pub enum Policy {
    /// `allkeys-lru`, `allkeys-lfu`, `allkeys-random`: deletes any key, a migrated one too.
    AllKeys(String),
    /// `volatile-lru`, `volatile-lfu`, `volatile-random`, `volatile-ttl`: deletes keys with a
    /// TTL; where none is left, refuses writes (and `RESTORE`s) with `OOM` as `noeviction` does.
    Volatile(String),
    /// `noeviction`: refuses writes, and the `RESTORE` of a `MIGRATE`, with `OOM`.
    NoEviction,
}

impl Policy {
    /// The policy `maxmemory_policy` names (an unknown name is taken as `noeviction`'s kind:
    /// it cannot be counted on to delete).
    pub fn of(name: &str) -> Policy {
        if name.starts_with("allkeys-") {
            Policy::AllKeys(name.to_string())
        } else if name.starts_with("volatile-") {
            Policy::Volatile(name.to_string())
        } else {
            Policy::NoEviction
        }
    }

    /// Its name, as `CONFIG GET maxmemory-policy` gives it.
    pub fn name(&self) -> &str {
        match self {
            Policy::AllKeys(n) | Policy::Volatile(n) => n,
            Policy::NoEviction => "noeviction",
        }
    }
}

/// One node's memory, as it says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeMemory {
    /// The node (`ip:port`).
    pub address: String,
    /// `used_memory`, bytes.
    pub used: f64,
    /// What eviction counts: `used_memory` less `mem_not_counted_for_evict`.
    pub counted: f64,
    /// `maxmemory`, bytes (0: no limit but the host's RAM).
    pub maxmemory: f64,
    /// `maxmemory-policy`.
    pub policy: Policy,
    /// `total_system_memory`: the host's RAM, shared by every node on the host.
    pub system: f64,
    /// `evicted_keys` so far.
    pub evicted_keys: u64,
    /// The copy-on-write of its last fork, bytes (`rdb_last_cow_size`, or `current_cow_peak`
    /// while one runs; 0 where it never forked): what its next fork (a full sync, an atomic
    /// slot migration) is taken to cost its host besides `used_memory`.
    pub fork_cow: f64,
    /// What its normal clients' buffers take (`mem_clients_normal`), bytes: a `RESTORE`'s
    /// payload stays in its query buffer until the node's cron trims it.
    pub clients_normal: f64,
    /// Its replication backlog: what it may grow to (`repl_backlog_size`, bytes: 1 MiB by
    /// default on Redis, 10 MiB on Valkey 8 and later) and what it holds now
    /// (`repl_backlog_histlen`), where it has one (`repl_backlog_active`, once a replica has
    /// connected); `None` where it has none. A node fills its backlog with every write it
    /// streams, the keys a migration brings it among them: memory eviction counts.
    pub backlog: Option<(f64, f64)>,
    /// The server, as `INFO server` names it (`redis 7.0.15`, `valkey 9.1.2`; empty where
    /// not said).
    pub server: String,
    /// Objects still to be freed in the background (`lazyfree_pending_objects`): a node with
    /// `lazyfree-lazy-server-del yes` (Valkey 8 and later by default) frees a migrated key's
    /// memory after its `MIGRATE`, so that its `used_memory` falls late.
    pub lazyfree_pending: u64,
}

/// [`NodeMemory`] from the texts of `INFO memory` and `INFO stats` (and `INFO persistence`,
/// in either: the fields are looked up by name).
pub fn memory_of(address: &str, memory: &str, stats: &str) -> NodeMemory {
    let number = |text: &str, name: &str| -> f64 {
        info_field(text, name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let used = number(memory, "used_memory");
    NodeMemory {
        address: address.to_string(),
        used,
        counted: (used - number(memory, "mem_not_counted_for_evict")).max(0.0),
        maxmemory: number(memory, "maxmemory"),
        policy: Policy::of(&info_field(memory, "maxmemory_policy").unwrap_or_default()),
        system: number(memory, "total_system_memory"),
        evicted_keys: number(stats, "evicted_keys") as u64,
        fork_cow: number(stats, "rdb_last_cow_size").max(number(stats, "current_cow_peak")),
        clients_normal: number(memory, "mem_clients_normal"),
        server: server_of(memory),
        backlog: (number(memory, "repl_backlog_active") > 0.0).then(|| {
            (
                number(memory, "repl_backlog_size"),
                number(memory, "repl_backlog_histlen"),
            )
        }),
        lazyfree_pending: number(memory, "lazyfree_pending_objects") as u64,
    }
}

/// The memory of the node on `con` (`INFO memory stats persistence server replication`: one
/// call, the sections Redis 7.0 and later give together). Error: `INFO` refused (it needs
/// `+info`) or the node does not answer.
pub fn read_memory(con: &mut NodeConnection) -> Result<NodeMemory, NodeError> {
    read_memory_info(con).map(|(memory, _)| memory)
}

/// [`read_memory`], with the `INFO` text it was read from (its `replication` section too).
pub fn read_memory_info(con: &mut NodeConnection) -> Result<(NodeMemory, String), NodeError> {
    let info = con.text(&[
        "INFO",
        "memory",
        "stats",
        "persistence",
        "server",
        "replication",
    ])?;
    Ok((memory_of(con.address(), &info, &info), info))
}

/// `redis 7.0.15` or `valkey 9.1.2` from an `INFO server` text; empty where it says neither.
pub fn server_of(info: &str) -> String {
    match (
        info_field(info, "valkey_version"),
        info_field(info, "redis_version"),
    ) {
        (Some(v), _) => format!("valkey {v}"),
        (None, Some(v)) => format!(
            "{} {v}",
            info_field(info, "server_name").unwrap_or_else(|| "redis".into())
        ),
        (None, None) => String::new(),
    }
}

/// One replica of a master, as the master sees it (`INFO replication`, `slaveN:` lines).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplicaLink {
    /// The replica (`ip:port`).
    pub address: String,
    /// `state` (`online` once it streams).
    pub state: String,
    /// How far it lags, in bytes of the replication stream (`master_repl_offset` less its
    /// `offset`, which a master learns about once a second).
    pub lag_bytes: u64,
}

/// The replicas a master lists in the text of its `INFO replication`.
pub fn replicas_of(replication: &str) -> Vec<ReplicaLink> {
    let offset: u64 = info_field(replication, "master_repl_offset")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    replication
        .lines()
        .filter(|l| l.starts_with("slave") && l.contains("ip="))
        .filter_map(|l| {
            let (_, fields) = l.trim().split_once(':')?;
            let get = |name: &str| {
                fields
                    .split(',')
                    .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                    .map(str::to_string)
            };
            let theirs: u64 = get("offset")?.parse().ok()?;
            Some(ReplicaLink {
                address: format!("{}:{}", get("ip")?, get("port")?),
                state: get("state").unwrap_or_default(),
                lag_bytes: offset.saturating_sub(theirs),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_and_replicas_are_read_from_info() {
        // Redis 7.0.15's fields.
        let memory = "# Memory\r\nused_memory:5000000\r\nused_memory_human:4.77M\r\n\
                      total_system_memory:25276203008\r\nmaxmemory:4000000\r\n\
                      maxmemory_policy:allkeys-lru\r\nmem_not_counted_for_evict:1000000\r\n";
        let m = memory_of("10.0.0.1:7000", memory, "evicted_keys:12\r\n");
        assert_eq!(m.used, 5e6);
        assert_eq!(m.counted, 4e6);
        assert_eq!(m.maxmemory, 4e6);
        assert_eq!(m.policy, Policy::AllKeys("allkeys-lru".into()));
        assert_eq!(m.evicted_keys, 12);
        assert_eq!(Policy::of("volatile-ttl").name(), "volatile-ttl");
        assert_eq!(Policy::of("noeviction"), Policy::NoEviction);
        let replication = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n\
            slave0:ip=127.0.0.1,port=7004,state=online,offset=900,lag=0\r\n\
            master_repl_offset:1000\r\n";
        assert_eq!(
            replicas_of(replication),
            vec![ReplicaLink {
                address: "127.0.0.1:7004".into(),
                state: "online".into(),
                lag_bytes: 100
            }]
        );
    }
}
