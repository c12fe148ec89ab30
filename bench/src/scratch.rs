//! The keys the benchmark program makes on a server, and only those: a server at `--url` may
//! hold a user's data, which the program never overwrites or deletes.
//!
//! - A ring is made with `RING.CREATE` (which refuses a key that exists) and given a TTL in the
//!   same script, so that a run that dies leaves nothing for long.
//! - Member keys are written with `SET ... NX PX`: a key that exists is never overwritten,
//!   and only the keys this run created are recorded.
//! - Only recorded keys are deleted: when the program is done with them, when it fails (the
//!   [`Scratch`] is dropped on every return path), and on Ctrl-C ([`interrupted`]).
//!
//! Evaluating a user's existing keys (`migration --reuse-keys`) writes nothing.

use crate::server::query;
use anyhow::{bail, Context, Result};
use ringslot_harness::client::error_text;
use ringslot_harness::redis::{self, Connection, Value};
use std::sync::Mutex;

/// How long the keys a run makes live if the run dies without deleting them.
pub const TTL_MS: u64 = 3_600_000;

/// Keys created and not yet deleted, by server URL, for the Ctrl-C handler.
static CREATED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

fn created() -> std::sync::MutexGuard<'static, Vec<(String, String)>> {
    CREATED.lock().unwrap_or_else(|e| e.into_inner())
}

/// The keys one run made on the server at `url`.
pub struct Scratch {
    url: String,
    /// Leave the keys at the end (they expire by their TTL).
    keep: bool,
}

impl Scratch {
    /// A run on the server at `url`; with `keep`, its keys stay (until their TTL) when it ends.
    pub fn new(url: &str, keep: bool) -> Scratch {
        Scratch {
            url: url.to_string(),
            keep,
        }
    }

    fn record(&self, key: &str) {
        created().push((self.url.clone(), key.to_string()));
    }

    /// Whether this run created `key` (and has not deleted it).
    pub fn owns(&self, key: &str) -> bool {
        created().iter().any(|(u, k)| *u == self.url && k == key)
    }

    /// Makes the ring `key` with `RING.CREATE key args...` and a TTL. A ring of this run at
    /// `key` is deleted first; any other key there is an error, and is left alone.
    pub fn ring(&self, con: &mut Connection, key: &str, args: &[String]) -> Result<()> {
        if self.owns(key) {
            self.delete(con, key)?;
        }
        // One script: RING.CREATE refuses an existing key, and a refusal stops the script
        // before PEXPIRE could touch that key.
        let made = redis::cmd("EVAL")
            .arg(
                "redis.call('RING.CREATE', KEYS[1], unpack(ARGV, 2)) \
                 redis.call('PEXPIRE', KEYS[1], ARGV[1]) return 1",
            )
            .arg(1)
            .arg(key)
            .arg(TTL_MS)
            .arg(args)
            .query::<i64>(con);
        if let Err(e) = made {
            bail!(
                "cannot make the ring {key}: {} (the benchmark changes no key it did not create: \
                 delete it yourself if an earlier run left it, or wait for its TTL)",
                error_text(&e)
            );
        }
        self.record(key);
        Ok(())
    }

    /// Writes each of `keys` that does not exist (`SET key v NX PX ttl`), `batch` to a
    /// pipeline; returns how many it created (the others exist and are left as they are).
    pub fn write_new(&self, con: &mut Connection, keys: &[String], batch: usize) -> Result<u64> {
        let mut made = 0u64;
        for chunk in keys.chunks(batch.max(1)) {
            let mut pipe = redis::pipe();
            for k in chunk {
                pipe.cmd("SET")
                    .arg(k)
                    .arg("v")
                    .arg("NX")
                    .arg("PX")
                    .arg(TTL_MS);
            }
            let replies: Vec<Value> = pipe.query(con).context("writing the member keys")?;
            for (k, r) in chunk.iter().zip(&replies) {
                if matches!(r, Value::Okay) {
                    self.record(k);
                    made += 1;
                }
            }
        }
        Ok(made)
    }

    /// Deletes `key` if this run created it; any other key is left alone.
    pub fn delete(&self, con: &mut Connection, key: &str) -> Result<()> {
        if self.owns(key) {
            query(con, &["DEL", key])?;
            created().retain(|(u, k)| !(*u == self.url && k == key));
        }
        Ok(())
    }

    /// Deletes every key this run created, unless the run keeps them.
    pub fn clean(&self) {
        if !self.keep {
            clean_url(&self.url);
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.clean();
    }
}

/// Deletes the keys created on `url` (best effort: a server that is gone keeps them until their
/// TTL).
fn clean_url(url: &str) {
    let keys: Vec<String> = {
        let mut all = created();
        let (mine, rest): (Vec<_>, Vec<_>) = all.drain(..).partition(|(u, _)| u == url);
        *all = rest;
        mine.into_iter().map(|(_, k)| k).collect()
    };
    if keys.is_empty() {
        return;
    }
    let Ok(mut con) = redis::Client::open(url).and_then(|c| c.get_connection()) else {
        return;
    };
    for chunk in keys.chunks(1000) {
        let _ = redis::cmd("UNLINK").arg(chunk).query::<Value>(&mut con);
    }
}

/// For the Ctrl-C handler: deletes every key the program created, on every server.
pub fn interrupted() {
    let urls: Vec<String> = {
        let mut urls: Vec<String> = created().iter().map(|(u, _)| u.clone()).collect();
        urls.dedup();
        urls
    };
    for url in urls {
        clean_url(&url);
    }
}
