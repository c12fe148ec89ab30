//! What a node answered when a command failed, typed: the node, the command, the answer's
//! [`Code`] and its text. The tool branches on codes, never on an error's words, as redis-rs'
//! `RedisError::code()` allows: an error reply's first word is its code (`BUSYKEY`, `NOPERM`,
//! `LOADING`, `TRYAGAIN`, `OOM`, `NOREPLICAS` ...). Some answers carry their meaning inside an
//! `ERR` text instead (`MIGRATE` forwards its target's error as `ERR Target instance replied
//! with error: BUSYKEY ...`; a replica answers `CLUSTER SETSLOT` with `ERR Please use SETSLOT
//! only with masters.`); [`KNOWN_TEXTS`] is the one list of such texts, and [`Code::of`] the
//! one place that reads them (each meaning provoked on every server `make test` runs on).

use std::fmt;

/// What an error answer means to the tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code {
    /// `BUSYKEY`: the key is already there (`RESTORE`; `MIGRATE` forwards its target's).
    BusyKey,
    /// `NOPERM` for the command itself: the ACL user may not run it.
    NoPermCommand,
    /// `NOPERM` for a key or channel the command names: the command may run.
    NoPermKey,
    /// `LOADING`: the node is loading its data set.
    Loading,
    /// `TRYAGAIN`: a multi-key command over a slot being migrated.
    TryAgain,
    /// `OOM`: a write refused at `maxmemory` (`MIGRATE` forwards its target's).
    Oom,
    /// `MOVED` / `ASK`: the slot is served elsewhere.
    Moved,
    Ask,
    /// `NOREPLICAS` (Valkey 8 and later): a primary replicates `CLUSTER SETSLOT` to its
    /// replicas before applying it, and they did not acknowledge it in time (2 s by default):
    /// the command was not applied.
    NoReplicas,
    /// `UNBLOCKED` (Valkey 8 and later): the primary stopped waiting for its replicas (it was
    /// demoted meanwhile) and did not apply the command.
    Unblocked,
    /// `ERR Please use SETSLOT only with masters.` (or `primaries`): the node is a replica now.
    NotMaster,
    /// `ERR unknown command`: the server has no such command.
    UnknownCommand,
    /// `ERR unknown subcommand`: the server has the command but not the subcommand (Redis, or
    /// Valkey before 9, asked `CLUSTER GETSLOTMIGRATIONS`).
    UnknownSubcommand,
    /// ringslot's `RING.MOVES ... SLOTS`: a slot of the range is migrating or importing.
    SlotOpen,
    /// ringslot's `RING.MOVES ... SLOTS`: a slot of the range is served by another node.
    SlotElsewhere,
    /// No answer within the timeout.
    Timeout,
    /// The connection failed: refused, reset, closed, or a TLS failure.
    Io,
    /// The login was refused or is missing (`WRONGPASS`, a user that does not exist there;
    /// `NOAUTH`, a password the node asks for and was not given).
    Auth,
    /// Any other answer: its first word (`ERR`, `IOERR`, `CLUSTERDOWN` ...), or the client's
    /// description of what went wrong (`client`).
    Other(String),
}

/// Texts that carry a meaning inside an error answer of another code: `(code, words, meaning)`
/// where the answer's code is `code` and its text holds `words` (ASCII case ignored). The one
/// list of error texts the tool reads. This file's tests provoke each meaning on the server
/// under test (Redis 7.0.15, Valkey 9.1.2, Redis 8.2.3), in whichever words that server uses
/// (`masters` or `primaries`); a slot importing on the node that serves it, which ringslot's
/// `RING.MOVES` would name, is one no server lets happen.
pub const KNOWN_TEXTS: &[(&str, &str, Code)] = &[
    // MIGRATE forwards its target's error (redis cluster.c, migrateCommand).
    (
        "ERR",
        "Target instance replied with error: BUSYKEY",
        Code::BusyKey,
    ),
    ("ERR", "Target instance replied with error: OOM", Code::Oom),
    // CLUSTER SETSLOT on a replica (valkey-cli's clusterManagerMoveSlot lists both words).
    (
        "ERR",
        "Please use SETSLOT only with masters",
        Code::NotMaster,
    ),
    (
        "ERR",
        "Please use SETSLOT only with primaries",
        Code::NotMaster,
    ),
    ("ERR", "unknown subcommand", Code::UnknownSubcommand),
    ("ERR", "unknown command", Code::UnknownCommand),
    // ACL: `... no permissions to run the 'dump' command` against `... to access one of the
    // keys used as arguments`.
    ("NOPERM", "command", Code::NoPermCommand),
    // A script calling a command its user may not run (Redis 7.0: `ERR The user executing the
    // script can't run this command or subcommand script: ...`).
    (
        "ERR",
        "user executing the script can't run",
        Code::NoPermCommand,
    ),
    // ringslot's own RING.MOVES ... SLOTS (src/module/errors.rs).
    ("ERR", "is migrating to another node", Code::SlotOpen),
    ("ERR", "is importing from another node", Code::SlotOpen),
    ("ERR", "is served by", Code::SlotElsewhere),
];

impl Code {
    /// The code of an error answer whose first word is `code` and whose whole text is `text`.
    pub fn of(code: &str, text: &str) -> Code {
        let lower = text.to_ascii_lowercase();
        if let Some((_, _, known)) = KNOWN_TEXTS
            .iter()
            .find(|(c, words, _)| *c == code && lower.contains(&words.to_ascii_lowercase()))
        {
            return known.clone();
        }
        match code {
            "BUSYKEY" => Code::BusyKey,
            "NOPERM" => Code::NoPermKey,
            "LOADING" => Code::Loading,
            "TRYAGAIN" => Code::TryAgain,
            "OOM" => Code::Oom,
            "MOVED" => Code::Moved,
            "ASK" => Code::Ask,
            "NOREPLICAS" => Code::NoReplicas,
            "UNBLOCKED" => Code::Unblocked,
            "WRONGPASS" | "NOAUTH" => Code::Auth,
            other => Code::Other(other.to_string()),
        }
    }

    /// The code of a client error (an error answer, or a failure of the connection).
    pub fn of_client(e: &redis::RedisError) -> Code {
        if e.is_timeout() {
            Code::Timeout
        } else if e.kind() == redis::ErrorKind::AuthenticationFailed {
            Code::Auth
        } else if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
            Code::Io
        } else {
            match e.code() {
                Some(code) => Code::of(code, &crate::client::error_text(e)),
                None => Code::Other("client".to_string()),
            }
        }
    }
}

/// A command a node refused or did not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeError {
    /// The node (`ip:port`).
    pub node: String,
    /// The command, its first words (at most 8, each cut at 64 bytes); empty when the node
    /// could not be reached at all.
    pub command: String,
    /// What the answer means.
    pub code: Code,
    /// The answer as the server wrote it (`ERR syntax error`), or the client's description
    /// (a timeout says how long was waited).
    pub text: String,
}

impl NodeError {
    /// An error of the tool's own about `command` on `node`, not the node's answer (code
    /// `Other("tool")`): a command it did not send, say.
    pub fn tool(node: &str, command: &str, text: &str) -> NodeError {
        NodeError {
            node: node.to_string(),
            command: command.to_string(),
            code: Code::Other("tool".into()),
            text: text.to_string(),
        }
    }

    /// The error of `command` on `node` from a client error.
    pub fn of(node: &str, command: &str, e: &redis::RedisError) -> NodeError {
        NodeError {
            node: node.to_string(),
            command: command.to_string(),
            code: Code::of_client(e),
            text: crate::client::error_text(e),
        }
    }

    /// Whether the answer is `code`.
    pub fn is(&self, code: &Code) -> bool {
        self.code == *code
    }
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.command.is_empty() {
            write!(f, "cannot reach {}: {}", self.node, self.text)
        } else {
            write!(f, "{}: `{}` failed: {}", self.node, self.command, self.text)
        }
    }
}

impl std::error::Error for NodeError {}

/// The first words of a command as errors name it: at most 8, each cut at 64 bytes (a key or
/// a payload can be long), binary shown lossily.
pub(crate) fn command_words<A: AsRef<[u8]>>(args: &[A]) -> String {
    args.iter()
        .take(8)
        .map(|a| {
            let a = a.as_ref();
            String::from_utf8_lossy(a.get(..64).unwrap_or(a)).into_owned()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::link::Access;
    use ringslot_harness::cluster::Cluster;
    use ringslot_harness::Server;

    #[test]
    fn codes_are_read_from_first_words_and_known_texts() {
        // Redis 7.0.15's texts.
        let busy =
            "ERR Target instance replied with error: BUSYKEY Target key name already exists.";
        assert_eq!(Code::of("ERR", busy), Code::BusyKey);
        assert_eq!(
            Code::of("IOERR", "IOERR error or timeout reading to target instance"),
            Code::Other("IOERR".into())
        );
        assert_eq!(
            Code::of(
                "NOPERM",
                "NOPERM this user has no permissions to run the 'dump' command"
            ),
            Code::NoPermCommand
        );
        assert_eq!(
            Code::of(
                "NOPERM",
                "NOPERM this user has no permissions to access one of the keys used as arguments"
            ),
            Code::NoPermKey
        );
        assert_eq!(
            Code::of("ERR", "ERR unknown subcommand 'NO-TOUCH'. Try CLIENT HELP."),
            Code::UnknownSubcommand
        );
        assert_eq!(
            Code::of("ERR", "ERR Please use SETSLOT only with primaries."),
            Code::NotMaster
        );
        assert_eq!(
            Code::of(
                "NOREPLICAS",
                "NOREPLICAS Not enough good replicas to write."
            ),
            Code::NoReplicas
        );
        assert_eq!(
            Code::of("ERR", "ERR syntax error"),
            Code::Other("ERR".into())
        );
    }

    /// Runs `args` on `server` and returns the error's code (the test fails if it succeeds).
    fn refused(server: &Server, args: &[&str]) -> (Code, String) {
        let access = Access::plain(&server.url()).unwrap();
        let mut con = access.seed().connect().unwrap();
        let e = con.run(args).expect_err("the command must fail");
        (e.code, e.text)
    }

    /// Runs `args` on `server`, which must accept it.
    fn ok(server: &Server, args: &[&str]) {
        let access = Access::plain(&server.url()).unwrap();
        let mut con = access.seed().connect().unwrap();
        con.run(args).unwrap();
    }

    /// The owner (`ip:port`) of every slot of `cluster`.
    fn owners(cluster: &Cluster) -> Vec<Option<String>> {
        use ringslot_harness::cluster::{cluster_nodes, owners, parse_cluster_nodes};
        owners(&parse_cluster_nodes(&cluster_nodes(&cluster.nodes[0]).unwrap()).unwrap())
    }

    /// A key whose slot `server` serves, named `prefix:N`.
    fn key_on(owners: &[Option<String>], server: &Server, prefix: &str) -> String {
        (0..)
            .map(|i| format!("{prefix}:{i}"))
            .find(|k| {
                owners[usize::from(ringslot_engine::key_slot(k.as_bytes()))].as_deref()
                    == Some(server.address().as_str())
            })
            .unwrap()
    }

    #[test]
    fn every_known_text_is_what_the_server_under_test_answers() {
        // Each text of KNOWN_TEXTS provoked on a real cluster of the server under test (make
        // test runs this on Redis 7.0.15, Valkey 9.1.2 and Redis 8.2.3), and lifted.
        let mut cluster = Cluster::start(3, Server::builder).unwrap();
        migrate_forwards_its_targets_busykey_and_oom(&cluster);
        unknown_commands_and_acl_refusals(&cluster);
        ring_moves_refuses_slots_elsewhere_or_open(&cluster);
        // SETSLOT on a replica.
        let replica = cluster.add_replica(0, Server::builder).unwrap();
        let (code, text) = refused(
            &cluster.nodes[replica],
            &["CLUSTER", "SETSLOT", "0", "STABLE"],
        );
        assert_eq!(code, Code::NotMaster, "{text}");
    }

    /// A key of one of B's slots, on B and (restored, its slot importing) on A as well:
    /// `MIGRATE` from B to A forwards A's `BUSYKEY`; with A at `maxmemory` under
    /// `noeviction`, its `OOM`.
    fn migrate_forwards_its_targets_busykey_and_oom(cluster: &Cluster) {
        let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
        let key = key_on(&owners(cluster), b, "busy");
        ok(b, &["SET", &key, "v"]);
        let slot = ringslot_engine::key_slot(key.as_bytes()).to_string();
        let b_id: String = redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut b.client())
            .unwrap();
        ok(a, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &b_id]);
        let payload: Vec<u8> = redis::cmd("DUMP").arg(&key).query(&mut b.client()).unwrap();
        let mut con_a = a.client();
        redis::pipe()
            .cmd("ASKING")
            .cmd("RESTORE")
            .arg(&key)
            .arg(0)
            .arg(payload)
            .exec(&mut con_a)
            .unwrap();
        let a_port = a.port.to_string();
        let migrate = ["MIGRATE", "127.0.0.1", &a_port, &key, "0", "5000"];
        let (code, text) = refused(b, &migrate);
        assert_eq!(code, Code::BusyKey, "{text}");
        redis::pipe()
            .cmd("ASKING")
            .cmd("DEL")
            .arg(&key)
            .exec(&mut con_a)
            .unwrap();
        ok(a, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
        ok(a, &["CONFIG", "SET", "maxmemory", "1"]);
        let (code, text) = refused(b, &migrate);
        ok(a, &["CONFIG", "SET", "maxmemory", "0"]);
        ok(a, &["CLUSTER", "SETSLOT", &slot, "STABLE"]);
        assert_eq!(code, Code::Oom, "{text}");
    }

    /// An unknown subcommand and an unknown command; a user who may not run `DUMP`, and one
    /// who may not read the key.
    fn unknown_commands_and_acl_refusals(cluster: &Cluster) {
        let a = &cluster.nodes[0];
        let (code, text) = refused(a, &["CLUSTER", "NO-SUCH-SUBCOMMAND"]);
        assert_eq!(code, Code::UnknownSubcommand, "{text}");
        let (code, text) = refused(a, &["NO-SUCH-COMMAND"]);
        assert_eq!(code, Code::UnknownCommand, "{text}");
        ok(
            a,
            &[
                "ACL", "SETUSER", "probe", "on", "nopass", "+@all", "-dump", "~*",
            ],
        );
        ok(
            a,
            &[
                "ACL",
                "SETUSER",
                "keyless",
                "on",
                "nopass",
                "+@all",
                "%R~other:*",
            ],
        );
        let key = key_on(&owners(cluster), a, "app");
        for (user, code) in [("probe", Code::NoPermCommand), ("keyless", Code::NoPermKey)] {
            let access = Access::plain(&format!("redis://{user}:pw@{}", a.address())).unwrap();
            let mut con = access.seed().connect().unwrap();
            let e = con.run(&["DUMP", &key]).expect_err("refused");
            assert_eq!(e.code, code, "{}", e.text);
        }
    }

    /// ringslot's `RING.MOVES ... SLOTS` on a slot the node does not serve, and on one it is
    /// migrating.
    fn ring_moves_refuses_slots_elsewhere_or_open(cluster: &Cluster) {
        let owners = owners(cluster);
        let ring = "{rs0}ring";
        let host_address = owners[usize::from(ringslot_engine::key_slot(ring.as_bytes()))].clone();
        let host = cluster
            .nodes
            .iter()
            .find(|n| Some(n.address()) == host_address)
            .unwrap();
        ok(host, &["RING.MIRROR", ring]);
        let slot_where = |mine: bool| {
            owners
                .iter()
                .position(|o| o.is_some() && (*o == host_address) == mine)
                .unwrap()
                .to_string()
        };
        let foreign = slot_where(false);
        let moves = |slot: &str| -> (Code, String) {
            refused(
                host,
                &["RING.MOVES", ring, "REBALANCE", "SLOTS", slot, slot],
            )
        };
        let (code, text) = moves(&foreign);
        assert_eq!(code, Code::SlotElsewhere, "{text}");
        let own = slot_where(true);
        let other = cluster
            .nodes
            .iter()
            .find(|n| Some(n.address()) != host_address)
            .unwrap();
        let other_id: String = redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut other.client())
            .unwrap();
        ok(host, &["CLUSTER", "SETSLOT", &own, "MIGRATING", &other_id]);
        let (code, text) = moves(&own);
        ok(host, &["CLUSTER", "SETSLOT", &own, "STABLE"]);
        assert_eq!(code, Code::SlotOpen, "{text}");
    }
}
