//! A connection to one node that names the node and the command in every error
//! ([`NodeError`]): the one way the tool sends commands to a cluster's nodes, opened by
//! [`Link::connect`].

use super::error::{command_words, Code, NodeError};
use super::link::{Link, CLIENT_NAME};
use redis::{FromRedisValue, Value};

impl Link {
    /// A plain connection (no cluster redirection) to the node, opened within the timeout,
    /// every reply then awaited at most the timeout. Errors name the node: unreachable,
    /// refused, no answer in time, a TLS failure, an authentication refused.
    pub fn connect(&self) -> Result<NodeConnection, NodeError> {
        let unreachable = |e: &redis::RedisError| NodeError {
            node: self.address.clone(),
            command: String::new(),
            code: Code::of_client(e),
            text: self.describe(e),
        };
        let client = redis::Client::open(self.info().clone()).map_err(|e| unreachable(&e))?;
        let mut con = client
            .get_connection_with_timeout(self.timeout())
            .map_err(|e| unreachable(&e))?;
        con.set_read_timeout(Some(self.timeout()))
            .and_then(|()| con.set_write_timeout(Some(self.timeout())))
            .map_err(|e| unreachable(&e))?;
        // Named, so that the node's SLOWLOG and CLIENT LIST tell the tool's commands apart; a
        // user who may not name its connection runs unnamed.
        let _ = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(CLIENT_NAME)
            .query::<()>(&mut con);
        Ok(NodeConnection::new(self.clone(), con))
    }
}

/// An open connection to one node (see [`Link::connect`]).
pub struct NodeConnection {
    link: Link,
    con: redis::Connection,
}

/// Arguments as owned strings, from words (`args(&["CLUSTER", "SETSLOT", &slot])`).
pub fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

impl NodeConnection {
    pub(crate) fn new(link: Link, con: redis::Connection) -> NodeConnection {
        NodeConnection { link, con }
    }

    /// The node's `ip:port`, as errors name it.
    pub fn address(&self) -> &str {
        &self.link.address
    }

    fn error(&self, command: String, e: &redis::RedisError) -> NodeError {
        let mut error = NodeError::of(&self.link.address, &command, e);
        if e.is_timeout() || e.kind() == redis::ErrorKind::AuthenticationFailed {
            error.text = self.link.describe(e);
        }
        error
    }

    /// Runs the command `args` (binary-safe; the first is the command's name).
    pub fn run<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Value, NodeError> {
        crate::client::cmd(args)
            .query::<Value>(&mut self.con)
            .map_err(|e| self.error(command_words(args), &e))
    }

    /// Sends the command `args` without reading its reply, which [`NodeConnection::receive`]
    /// reads: commands sent to several nodes before any reply is read run on them side by side.
    /// Error: the send failed.
    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<(), NodeError> {
        let packed = crate::client::cmd(args).get_packed_command();
        self.con
            .send_packed_command(&packed)
            .map_err(|e| self.error(command_words(args), &e))
    }

    /// The reply to the command `args` sent by [`NodeConnection::send`]; a server's error
    /// reply is an error, as from [`NodeConnection::run`].
    pub fn receive<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Value, NodeError> {
        self.con
            .recv_response()
            .and_then(Value::extract_error)
            .map_err(|e| self.error(command_words(args), &e))
    }

    /// Runs `cmd`, its reply converted to `T` (a reply of another type is an error too).
    pub fn query<T: FromRedisValue>(&mut self, cmd: &redis::Cmd) -> Result<T, NodeError> {
        cmd.query(&mut self.con).map_err(|e| {
            let words: Vec<&[u8]> = cmd
                .args_iter()
                .filter_map(|a| match a {
                    redis::Arg::Simple(a) => Some(a),
                    redis::Arg::Cursor => None,
                })
                .collect();
            self.error(command_words(&words), &e)
        })
    }

    /// Sends `pipe` and reads its replies as `T`; an error names the pipeline by `what` (its
    /// first command, say).
    pub fn pipeline<T: FromRedisValue>(
        &mut self,
        pipe: &redis::Pipeline,
        what: &str,
    ) -> Result<T, NodeError> {
        pipe.query(&mut self.con)
            .map_err(|e| self.error(what.to_string(), &e))
    }

    /// Runs `args` and reads a string reply (`CLUSTER NODES`, `INFO`).
    pub fn text<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<String, NodeError> {
        let reply = self.run(args)?;
        crate::reply::text(&reply).map_err(|e| NodeError {
            node: self.link.address.clone(),
            command: command_words(args),
            code: Code::Other("reply".into()),
            text: e.to_string(),
        })
    }

    /// Waits at most `wait` for each reply from now on (the link's timeout by default): a
    /// command known to run long (a big key's `MIGRATE`) is given more, then the wait is set
    /// back. Error: the socket refused the setting.
    pub fn set_reply_wait(&mut self, wait: std::time::Duration) -> Result<(), NodeError> {
        self.con
            .set_read_timeout(Some(wait))
            .map_err(|e| self.error("(setting the reply wait)".into(), &e))
    }

    /// The wait for a reply the link gives ([`Link::connect`]).
    pub fn link_wait(&self) -> std::time::Duration {
        self.link.timeout()
    }

    /// The connection itself, for a caller that reads replies its own way (the tests).
    pub fn raw(&mut self) -> &mut redis::Connection {
        &mut self.con
    }

    /// The connection itself, for a caller that sends its own commands (the benchmark
    /// program's loads and checks of its own servers).
    pub fn into_raw(self) -> redis::Connection {
        self.con
    }
}
