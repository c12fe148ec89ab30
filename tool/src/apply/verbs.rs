//! The verbs of a slot's move, as valkey-cli names them (`clusterManagerSetSlot`,
//! `clusterManagerMigrateKeysInSlot`, `clusterManagerMoveSlot` in src/valkey-cli.c): open the
//! slot on its two masters, move its keys, close it everywhere. Each ordering rule is
//! commented where it is kept; every write goes through [`super::door::Masters::write`].
//!
//! On Valkey 8 and later a primary with replicas replicates `CLUSTER SETSLOT` to them before it
//! applies it, and waits for them (2 s by default): it answers `NOREPLICAS` when they do not
//! acknowledge in time (not applied: sent again, up to [`NOREPLICAS_TRIES`] times), and
//! `UNBLOCKED` when it was demoted meanwhile. Redis 7.0 and 8.2 never send either.

use super::door::{SlotState, Write};
use super::{claims, Applied, ApplyOptions, Event, Prepared};
use crate::cluster::error::{Code, NodeError};
use crate::cluster::finding::{refuse, stop};
use crate::cluster::pacing::Limiter;
use crate::plan::SlotMove;
use crate::predict::big_keys::{
    BIG_KEY_MEMORY, DEFAULT_SECONDS_PER_BYTE, MIGRATE_OVER_DUMP, RESTORE_OVER_MIGRATE,
};
use anyhow::{anyhow, bail, Result};
use std::time::Duration;

/// The errors a source may answer `CLUSTER SETSLOT ... NODE` with, as valkey-cli tolerates
/// them there (`clusterManagerMoveSlot`'s `acceptable`): a source that gave its last slot may
/// already be a replica of the target, told by gossip first (`NotMaster`, redis/redis#9223);
/// on Valkey 8 and later, while the source waited for its replicas, it was demoted
/// (`Unblocked`) or its replicas moved to another primary (`NoReplicas`). The news reaches it
/// by gossip from the target, which took the slot first.
pub(crate) const TOLERATED_ON_SOURCE: &[Code] =
    &[Code::NotMaster, Code::Unblocked, Code::NoReplicas];

/// The errors any other master may answer `CLUSTER SETSLOT ... NODE` with: one that has become
/// a replica meanwhile takes the news by gossip.
pub(crate) const TOLERATED_ON_OTHERS: &[Code] = &[Code::NotMaster];

/// How many times a `CLUSTER SETSLOT` answered `NOREPLICAS` (not applied: the primary's
/// replicas did not acknowledge it within its wait, 2 s by default) is sent in all before the
/// run stops: about a minute of waits.
pub(crate) const NOREPLICAS_TRIES: u32 = 30;

impl Prepared {
    /// Sends `CLUSTER SETSLOT slot <state>` to the master at `at`, again while it answers
    /// `NOREPLICAS` (at most [`NOREPLICAS_TRIES`] times in all); an answer in `tolerated` counts
    /// as done.
    fn set_slot(
        &mut self,
        at: &str,
        slot: u16,
        state: SlotState,
        tolerated: &[Code],
    ) -> Result<(), NodeError> {
        self.set_slot_after(at, slot, state, tolerated, 0)
    }

    /// [`Prepared::set_slot`] when `tried` tries were already sent (and answered `NOREPLICAS`)
    /// another way: at most [`NOREPLICAS_TRIES`] in all still.
    fn set_slot_after(
        &mut self,
        at: &str,
        slot: u16,
        state: SlotState,
        tolerated: &[Code],
        tried: u32,
    ) -> Result<(), NodeError> {
        let mut tries = tried;
        loop {
            tries += 1;
            match self.masters.write(at, &Write::SetSlot { slot, state }) {
                Ok(_) => return Ok(()),
                Err(e) if tolerated.contains(&e.code) => return Ok(()),
                Err(e) if e.is(&Code::NoReplicas) && tries < NOREPLICAS_TRIES => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Moves the keys of `m`'s slot and gives it to the target everywhere; (keys, bytes). A
    /// move whose target already claims the slot (a run killed after the target was told) is
    /// only closed, once its source holds none of the slot's keys.
    pub(super) fn move_slot(
        &mut self,
        m: &SlotMove,
        opts: &ApplyOptions,
        limiter: &mut Limiter,
        applied: &mut Applied,
        on: &mut dyn FnMut(Event),
    ) -> Result<(u64, u64)> {
        let target_claims = claims(&self.masters.node(&m.to)?.view, m.slot);
        let source_claims = claims(&self.masters.node(&m.from)?.view, m.slot);
        let moved = if target_claims {
            let left = self.keys_left(m)?;
            if left > 0 {
                bail!(
                    "{} already serves the slot but {} still holds {left} of its keys: move \
                     them to it by hand (MIGRATE) and run again",
                    m.to,
                    m.from
                );
            }
            (0, 0)
        } else {
            self.open_slot(m, source_claims)?;
            self.move_keys(m, opts, limiter, applied, on)?
        };
        self.close_slot(m)?;
        Ok(moved)
    }

    /// Opens `m`'s slot: `IMPORTING` on the target, then `MIGRATING` on the source (where it
    /// still claims the slot). The target first, as redis-cli does: once the source migrates,
    /// it answers `ASK` for the keys it no longer has, and the target must already take them.
    fn open_slot(&mut self, m: &SlotMove, source_claims: bool) -> Result<()> {
        let (from_id, to_id) = (self.masters.id(&m.from), self.masters.id(&m.to));
        self.set_slot(&m.to, m.slot, SlotState::Importing { from: &from_id }, &[])?;
        if source_claims {
            self.set_slot(&m.from, m.slot, SlotState::Migrating { to: &to_id }, &[])?;
        }
        Ok(())
    }

    /// Closes `m`'s slot: `NODE <target>` on the target first, then the source, then every
    /// other master. The target first, as redis-cli and valkey-cli do (redis/redis#7116): told
    /// first, it bumps its epoch and owns the slot, so that a crash of the source meanwhile
    /// leaves no slot without an owner. The source next, its refusals in
    /// [`TOLERATED_ON_SOURCE`]; the others last, so that none of them redirects clients to a
    /// source that no longer has the keys. The others are told at once
    /// ([`Masters::write_at_once`](super::door::Masters::write_at_once)): nothing orders them
    /// among themselves, and each answers only once it has saved its `nodes.conf` (an fsync;
    /// one after another, they cost a save each). One that answers `NOREPLICAS` is told again
    /// alone ([`Prepared::set_slot`]).
    fn close_slot(&mut self, m: &SlotMove) -> Result<()> {
        let to_id = self.masters.id(&m.to);
        let owner = SlotState::Node { owner: &to_id };
        self.set_slot(&m.to, m.slot, owner, &[])?;
        self.set_slot(&m.from, m.slot, owner, TOLERATED_ON_SOURCE)?;
        let others: Vec<String> = self
            .masters
            .nodes
            .keys()
            .filter(|a| **a != m.to && **a != m.from)
            .cloned()
            .collect();
        let write = Write::SetSlot {
            slot: m.slot,
            state: owner,
        };
        let answers = self.masters.write_at_once(&others, &write);
        for (other, answer) in others.iter().zip(answers) {
            match answer {
                Ok(_) => {}
                Err(e) if TOLERATED_ON_OTHERS.contains(&e.code) => {}
                Err(e) if e.is(&Code::NoReplicas) => {
                    // The broadcast was its first try.
                    self.set_slot_after(other, m.slot, owner, TOLERATED_ON_OTHERS, 1)?
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Moves every key of `m`'s slot from its source to its target, a batch at a time
    /// ([`Prepared::batch`]) until `GETKEYSINSLOT` finds none; (keys, bytes by `MEMORY
    /// USAGE`). A batch the target refuses with `BUSYKEY` is resolved key by key
    /// ([`Prepared::resolve_busy`]).
    fn move_keys(
        &mut self,
        m: &SlotMove,
        opts: &ApplyOptions,
        limiter: &mut Limiter,
        applied: &mut Applied,
        on: &mut dyn FnMut(Event),
    ) -> Result<(u64, u64)> {
        let (mut keys, mut bytes) = (0u64, 0u64);
        let (mut last_first, mut last_len): (Option<Vec<u8>>, usize) = (None, 0);
        // Paced, the caps are the pacer's; the first MIGRATE follows the pause before the slot
        // ([`Prepared::checked`]), each later one pauses first, its batch then cut to the caps
        // the pause left (the pacer may have slowed meanwhile).
        // A source near or past its limit, or a target with replicas, gets batches no larger
        // than the memory model's bound ([`super::limits::Limits::batch_bound`]).
        let caps = |s: &Self| {
            let (keys, bytes) = match s.pacing.lock() {
                Some(p) => p.caps(),
                None => (opts.batch_keys, opts.batch_bytes),
            };
            let bound = s.watch.limits().map_or(bytes, |l| l.batch_bound(m, bytes));
            (keys, bytes.min(bound))
        };
        let mut first_batch = true;
        loop {
            let mut batch = self.batch(m, caps(self))?;
            if batch.is_empty() {
                if let Some(mut p) = self.pacing.lock() {
                    p.slot_moved(keys, bytes, opts.batch_keys, opts.batch_bytes);
                }
                return Ok((keys, bytes));
            }
            if !first_batch && self.pacing.is_on() {
                self.pacing.pause();
                cut(&mut batch, caps(self));
            }
            first_batch = false;
            // MIGRATE answers NOKEY for a key that expired but is still listed (no write to
            // the source deletes it meanwhile): the same batch twice is no progress.
            let first: Option<Vec<u8>> = batch.first().map(|(k, _)| k.clone());
            if first.is_some() && first == last_first && batch.len() == last_len {
                bail!(
                    "{}: the same {} keys came back from GETKEYSINSLOT after a MIGRATE (keys \
                     that expired but are still listed?): stopped rather than loop",
                    m.from,
                    batch.len()
                );
            }
            last_first = first;
            last_len = batch.len();
            let batch_bytes: u64 = batch.iter().map(|(_, b)| b).sum();
            if let Some(mut limits) = self.watch.limits() {
                if let Some(why) = limits.before_batch(m, batch_bytes)? {
                    return stop(
                        why,
                        format!(
                            "stopped before a MIGRATE of {} keys ({batch_bytes} bytes by MEMORY \
                             USAGE; make room there, CONFIG SET maxmemory on the node and its \
                             replicas, or fewer keys, or lower the move's size, a plan by \
                             memory: ringslot predict --by memory, then run the same command \
                             again)",
                            batch.len()
                        ),
                    );
                }
            }
            let big = match batch.as_slice() {
                [(key, size)] if *size >= BIG_KEY_MEMORY => Some((key.clone(), *size)),
                _ => None,
            };
            let names: Vec<Vec<u8>> = batch.into_iter().map(|(k, _)| k).collect();
            let outcome = match &big {
                Some((key, size)) => self.migrate_big(m, key, *size, false, on),
                None => self.migrate(m, &names, false),
            };
            if let Some(mut p) = self.pacing.lock() {
                p.migrated();
                // A big key's wait is the big keys' rule (said, not paced).
                if big.is_some() {
                    p.forget();
                }
            }
            match outcome {
                Ok(()) => {
                    if big.is_some() {
                        if let Some(mut limits) = self.watch.limits() {
                            limits.after_big_batch(m)?;
                        }
                    }
                }
                Err(e) if e.is(&Code::BusyKey) => {
                    self.resolve_busy(m, &names, opts, applied, on)?
                }
                Err(e) => bail!("{}: MIGRATE to {}: {}", m.from, m.to, e.text),
            }
            keys += names.len() as u64;
            bytes += batch_bytes;
            limiter.take(batch_bytes);
        }
    }

    /// The next keys of `m`'s slot on its source, with their `MEMORY USAGE`: at most
    /// `caps.0` keys, and at most `caps.1` bytes unless the first key alone is bigger.
    fn batch(&mut self, m: &SlotMove, caps: (u32, u64)) -> Result<Vec<(Vec<u8>, u64)>> {
        let (batch_keys, batch_bytes) = caps;
        let n = self.masters.node(&m.from)?;
        let mut getkeys = redis::cmd("CLUSTER");
        getkeys
            .arg("GETKEYSINSLOT")
            .arg(m.slot)
            .arg(batch_keys.max(1));
        let names: Vec<Vec<u8>> = n.con.query(&getkeys)?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for k in &names {
            pipe.cmd("MEMORY").arg("USAGE").arg(k.as_slice());
        }
        let sizes: Vec<Option<u64>> = n.con.pipeline(&pipe, "MEMORY USAGE")?;
        let mut batch = Vec::new();
        let mut total = 0u64;
        for (k, size) in names.into_iter().zip(sizes) {
            let size = size.unwrap_or(0);
            // A big key goes alone, whatever --batch-bytes allows: its MIGRATE is given a
            // timeout of its own.
            let big = size >= BIG_KEY_MEMORY;
            if !batch.is_empty() && (total + size > batch_bytes || big) {
                break;
            }
            total += size;
            batch.push((k, size));
            if big {
                break;
            }
        }
        Ok(batch)
    }

    /// `MIGRATE` of `keys` from `m`'s source to its target.
    fn migrate(&mut self, m: &SlotMove, keys: &[Vec<u8>], replace: bool) -> Result<(), NodeError> {
        let auth = self.auth(false);
        let write = Write::Migrate {
            to: &m.to,
            timeout_ms: self.migrate_timeout_ms(),
            replace,
            auth: &auth,
            keys,
        };
        self.masters.write(&m.from, &write).map(|_| ())
    }

    /// `MIGRATE` of one big key (`size` bytes by `MEMORY USAGE`, at least
    /// [`BIG_KEY_MEMORY`]) in a batch of its own, said first through `on`: its `MIGRATE`
    /// timeout and the tool's wait for the source's reply are sized for it
    /// ([`big_key_waits`]) rather than the defaults, then set back.
    fn migrate_big(
        &mut self,
        m: &SlotMove,
        key: &[u8],
        size: u64,
        replace: bool,
        on: &mut dyn FnMut(Event),
    ) -> Result<(), NodeError> {
        let (hold, migrate_ms, reply_wait) =
            big_key_waits(size, self.migrate_timeout_ms(), self.access.timeout);
        let source = self
            .masters
            .node(&m.from)
            .map_err(|e| NodeError::tool(&m.from, "MIGRATE", &format!("{e:#}")))?;
        let valkey = source
            .con
            .text(&["INFO", "server"])
            .is_ok_and(|i| crate::reply::is_valkey_9(&i));
        on(Event::Notice(format!(
            "moving big key {:?} (slot {}, {:.1} MiB by MEMORY USAGE) alone from {} to {}: \
             its MIGRATE may hold {} about {:.0} ms (at {} ns a byte, the rate predict assumes \
             where it measured none), with a MIGRATE timeout of {migrate_ms} ms{}",
            String::from_utf8_lossy(key),
            m.slot,
            size as f64 / 1048576.0,
            m.from,
            m.to,
            m.from,
            hold.as_secs_f64() * 1000.0,
            DEFAULT_SECONDS_PER_BYTE * 1e9,
            if valkey {
                "; on Valkey 9, --atomic sends big collections in pieces instead (on a node \
                 with no slot left open by a key-by-key run)"
            } else {
                ""
            }
        )));
        source.con.set_reply_wait(reply_wait)?;
        let auth = self.auth(false);
        let keys = [key.to_vec()];
        let write = Write::Migrate {
            to: &m.to,
            timeout_ms: migrate_ms,
            replace,
            auth: &auth,
            keys: &keys,
        };
        let outcome = self.masters.write(&m.from, &write).map(|_| ());
        // The MIGRATE's own error first; a failure to set the wait back after it succeeded.
        let restored = match self.masters.node(&m.from) {
            Ok(source) => {
                let wait = source.con.link_wait();
                source.con.set_reply_wait(wait)
            }
            Err(_) => Ok(()),
        };
        outcome.and(restored)
    }

    /// After a `BUSYKEY`: each key of `keys` still on the source is compared with the target's
    /// copy (`DUMP` on both, `ASKING` on the target, which does not serve the slot yet) and
    /// moved with `REPLACE` when the payloads are equal (or with `--replace`); a key whose
    /// copies differ stops the run.
    fn resolve_busy(
        &mut self,
        m: &SlotMove,
        keys: &[Vec<u8>],
        opts: &ApplyOptions,
        applied: &mut Applied,
        on: &mut dyn FnMut(Event),
    ) -> Result<()> {
        for k in keys {
            let name = String::from_utf8_lossy(k).into_owned();
            let mut usage = redis::cmd("MEMORY");
            usage.arg("USAGE").arg(k.as_slice());
            let size: Option<u64> = self.masters.node(&m.from)?.con.query(&usage)?;
            let size = size.unwrap_or(0);
            // A big key's two DUMPs take their time: the waits are sized for it meanwhile.
            let big = size >= BIG_KEY_MEMORY;
            if big {
                let (_, _, wait) =
                    big_key_waits(size, self.migrate_timeout_ms(), self.access.timeout);
                self.masters.node(&m.from)?.con.set_reply_wait(wait)?;
                self.masters.node(&m.to)?.con.set_reply_wait(wait)?;
            }
            let compared = self.compare_copies(m, k, &name);
            if big {
                for at in [&m.from, &m.to] {
                    let node = self.masters.node(at)?;
                    let wait = node.con.link_wait();
                    node.con.set_reply_wait(wait)?;
                }
            }
            let Some((ours, theirs)) = compared? else {
                continue;
            };
            let replace = match theirs {
                None => false,
                Some(theirs) if theirs == ours => {
                    applied.equal_copies.push(name.clone());
                    true
                }
                Some(_) if opts.replace => {
                    applied.replaced.push(name.clone());
                    true
                }
                Some(_) => refuse!(
                    "key {name:?} is on both {} and {} with different values (their DUMP \
                     payloads differ: the values, or only their encodings); nothing was \
                     overwritten. Look at both copies; run again with --replace to keep {}'s \
                     copy and overwrite {}'s",
                    m.from,
                    m.to,
                    m.from,
                    m.to
                ),
            };
            let moved = if big {
                self.migrate_big(m, k, size, replace, on)
            } else {
                self.migrate(m, std::slice::from_ref(k), replace)
            };
            moved.map_err(|e| anyhow!("{}: MIGRATE {name} to {}: {}", m.from, m.to, e.text))?;
        }
        Ok(())
    }

    /// The `DUMP` payloads of key `k` (`name`) on `m`'s source and, by `ASKING`, on its
    /// target; `None` where the source no longer has it.
    #[allow(clippy::type_complexity)]
    fn compare_copies(
        &mut self,
        m: &SlotMove,
        k: &[u8],
        name: &str,
    ) -> Result<Option<(Vec<u8>, Option<Vec<u8>>)>> {
        let mut dump = redis::cmd("DUMP");
        dump.arg(k);
        let ours: Option<Vec<u8>> = self.masters.node(&m.from)?.con.query(&dump)?;
        let Some(ours) = ours else {
            return Ok(None);
        };
        let mut asking = redis::pipe();
        asking.cmd("ASKING").cmd("DUMP").arg(k);
        let (_, theirs): ((), Option<Vec<u8>>) = self
            .masters
            .node(&m.to)?
            .con
            .pipeline(&asking, &format!("ASKING + DUMP {name}"))?;
        Ok(Some((ours, theirs)))
    }
}

/// Cuts `batch` (keys and their `MEMORY USAGE`, in order) to at most `caps.0` keys and
/// `caps.1` bytes, one key at least.
fn cut(batch: &mut Vec<(Vec<u8>, u64)>, caps: (u32, u64)) {
    let (mut n, mut total) = (0usize, 0u64);
    for (_, size) in batch.iter() {
        let fits = n < caps.0 as usize && total.saturating_add(*size) <= caps.1;
        if n > 0 && !fits {
            break;
        }
        n += 1;
        total = total.saturating_add(*size);
    }
    batch.truncate(n.max(1));
}

/// The waits for a big key's `MIGRATE` of `size` bytes (`MEMORY USAGE`): its estimated hold
/// of the source (serializing at [`DEFAULT_SECONDS_PER_BYTE`] times [`MIGRATE_OVER_DUMP`]),
/// the `MIGRATE` timeout in ms (the target's `RESTORE` must answer within it: four times its
/// estimated hold, plus the payload at 10 MB/s, plus a second; never under `default_ms`), and
/// the tool's wait for the source's reply (the hold and the `MIGRATE` timeout, twice over;
/// never under `default_wait`).
pub(super) fn big_key_waits(
    size: u64,
    default_ms: u128,
    default_wait: Duration,
) -> (Duration, u128, Duration) {
    let hold = size as f64 * DEFAULT_SECONDS_PER_BYTE * MIGRATE_OVER_DUMP;
    let restore = hold * RESTORE_OVER_MIGRATE;
    let migrate_s = 4.0 * restore + size as f64 / 10e6 + 1.0;
    let migrate_ms = ((migrate_s * 1000.0).ceil() as u128).max(default_ms);
    let wait = Duration::from_secs_f64(2.0 * (hold + migrate_ms as f64 / 1000.0));
    (
        Duration::from_secs_f64(hold),
        migrate_ms,
        wait.max(default_wait),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_big_keys_migrate_waits_grow_with_it() {
        // A key of 1 MB: the MIGRATE timeout stays the default, the tool waits about as long.
        let (_, ms, wait) = big_key_waits(1_000_000, 5000, Duration::from_secs(10));
        assert_eq!(ms, 5000);
        assert!(wait.as_secs_f64() < 11.0, "{wait:?}");
        // 45 MB (the trial's hash): about 2.4 s of hold at 18 ns a byte and 3 times a DUMP.
        let (hold, ms, _) = big_key_waits(45_000_000, 5000, Duration::from_secs(10));
        assert!((2.3..2.5).contains(&hold.as_secs_f64()), "{hold:?}");
        assert!(ms > 5000, "{ms}");
        // 300 MB (redis/redis#13122): about 16 s, past the default cluster-node-timeout.
        let (hold, ms, wait) = big_key_waits(300_000_000, 5000, Duration::from_secs(10));
        assert!((15.0..17.0).contains(&hold.as_secs_f64()), "{hold:?}");
        assert!(ms as f64 > 4.0 * 0.33 * 15.0 * 1000.0, "{ms}");
        assert!(
            wait.as_secs_f64() > hold.as_secs_f64() + ms as f64 / 1000.0,
            "{wait:?}"
        );
    }

    #[test]
    fn a_batch_is_cut_to_the_pacers_caps_one_key_at_least() {
        let batch = |sizes: &[u64]| -> Vec<(Vec<u8>, u64)> {
            sizes.iter().map(|&s| (b"k".to_vec(), s)).collect()
        };
        let mut b = batch(&[10, 10, 10, 10]);
        cut(&mut b, (3, 1000));
        assert_eq!(b.len(), 3);
        let mut b = batch(&[10, 10, 10, 10]);
        cut(&mut b, (100, 25));
        assert_eq!(b.len(), 2);
        // A first key past the bytes cap still goes, alone.
        let mut b = batch(&[500, 10]);
        cut(&mut b, (100, 25));
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn the_source_tolerates_what_valkey_cli_tolerates_there() {
        // valkey-cli's clusterManagerMoveSlot accepts on the source: "ERR Please use SETSLOT
        // only with masters.", "ERR Please use SETSLOT only with primaries.", "UNBLOCKED",
        // "NOREPLICAS" (src/valkey-cli.c).
        for (code, text) in [
            ("ERR", "ERR Please use SETSLOT only with masters."),
            ("ERR", "ERR Please use SETSLOT only with primaries."),
            ("UNBLOCKED", "UNBLOCKED"),
            (
                "NOREPLICAS",
                "NOREPLICAS Not enough good replicas to write.",
            ),
        ] {
            assert!(
                TOLERATED_ON_SOURCE.contains(&Code::of(code, text)),
                "{text}"
            );
        }
        assert!(!TOLERATED_ON_SOURCE.contains(&Code::of("ERR", "ERR Unknown node x")));
        assert_eq!(TOLERATED_ON_OTHERS, &[Code::NotMaster]);
    }
}
