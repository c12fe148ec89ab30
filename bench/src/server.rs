//! The server the benchmark talks to: a temporary one it starts itself with the module loaded
//! (ringslot-harness, stopped when dropped), or a running one named by `--url`; and commands
//! whose errors name the command and quote the server.

use anyhow::{anyhow, Result};
use ringslot_harness::client::{self, error_text};
use ringslot_harness::redis::{self, Connection, Value};
pub use ringslot_harness::reply::{array as items, field, float, int};
use std::time::Duration;

/// A string reply (bulk or simple), `None` for nil or another type.
pub fn text(v: &Value) -> Option<String> {
    ringslot_harness::reply::text(v).ok()
}

/// A connection to `url`, checked to be a server with the ringslot module loaded.
/// Errors: the URL is malformed, the server is unreachable, or `RING.INFO` is unknown there.
pub fn connect(url: &str) -> Result<Connection> {
    let client = redis::Client::open(url).map_err(|e| anyhow!("bad server URL {url}: {e}"))?;
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(|e| anyhow!("cannot reach redis-server at {url}: {e}"))?;
    match client::call(&mut con, &["RING.INFO", "ringslot-bench:probe"]) {
        Ok(_) => Ok(con),
        Err(e) if e.to_ascii_lowercase().contains("unknown command") => Err(anyhow!(
            "the ringslot module is not loaded on {url} (it replied `{e}`); start redis-server \
             with --loadmodule target/release/libringslot.so, or drop --url"
        )),
        Err(e) => Err(anyhow!("RING.INFO on {url} failed: {e}")),
    }
}

/// Runs a command; an error names the command and quotes the server's reply.
pub fn query<S: AsRef<str>>(con: &mut Connection, args: &[S]) -> Result<Value> {
    client::cmd(
        &args
            .iter()
            .map(|a| a.as_ref().as_bytes())
            .collect::<Vec<_>>(),
    )
    .query::<Value>(con)
    .map_err(|e| {
        let line: Vec<&str> = args.iter().map(AsRef::as_ref).take(6).collect();
        anyhow!("`{}` failed: {}", line.join(" "), error_text(&e))
    })
}
