//! The watch of a run: what `ringslot apply` reads of the cluster between writes, apart from
//! the writes themselves. The cluster's health (the snapshot read before the run, refreshed
//! between slots: failing flags, each master's own view and `cluster_state`,
//! [`Watch::full_check`]) and every node's memory and replication ([`Limits`]: the memory
//! model's judgement before each batch, the replicas' link and lag, the masters' fill said as
//! the run goes, [`Watch::tell_fill`]). Reads only.

use super::door::Masters;
use super::health::{drains, unhealthy, FULL_CHECK_EVERY};
use super::limits::{self, Limits};
use super::{Applied, Event, FILL_EVERY};
use crate::cluster::finding::{refuse, Finding};
use crate::cluster::link::{Access, Link};
use crate::cluster::snapshot::{Parts, Snapshot};
use crate::plan::SlotPlan;
use anyhow::{anyhow, bail, Result};
use ringslot_engine::cluster::{myself, ClusterNode};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// What [`Watch::read_limits`] could not watch: each replica not read, with why.
pub(crate) struct Unwatched {
    pub unread: Vec<String>,
}

/// The watch of one run (see the module docs); a worker of a parallel run has its own
/// snapshot and shares the limits ([`Watch::worker`]).
pub(crate) struct Watch {
    /// The cluster as read before the run (its memory, which [`Watch::read_limits`] takes),
    /// refreshed by the full checks: the seed's view of the other nodes' flags, the masters'
    /// own views and `cluster_state`.
    snapshot: Snapshot,
    /// When every master was last checked ([`Watch::full_check`]).
    last_full_check: Option<Instant>,
    /// The replicas of the plan's masters: (address, link, its master's address).
    replicas: Vec<(String, Link, String)>,
    /// The nodes' memory and replication, watched once [`Watch::read_limits`] has taken
    /// them; shared by the lanes of a parallel run ([`Watch::limits`]).
    limits: Option<Arc<Mutex<Limits>>>,
    /// When the masters' fill was last said ([`Event::Fill`]).
    fill_told: Option<Instant>,
}

impl Watch {
    /// The watch of a run on the cluster `snapshot` read, whose plan's masters have
    /// `replicas` (address, link, its master's address); nothing watched yet.
    pub(crate) fn new(snapshot: Snapshot, replicas: Vec<(String, Link, String)>) -> Watch {
        Watch {
            snapshot,
            last_full_check: None,
            replicas,
            limits: None,
            fill_told: None,
        }
    }

    /// Another worker's watch for a parallel run: its own snapshot (the seed's view only,
    /// read through `access`, refreshed by its checks), the limits shared. Error: the seed
    /// cannot be read.
    pub(crate) fn worker(&self, access: &Access) -> Result<Watch> {
        Ok(Watch {
            snapshot: Snapshot::read(access, Parts::NONE)?,
            last_full_check: None,
            replicas: self.replicas.clone(),
            limits: self.limits.clone(),
            fill_told: None,
        })
    }

    /// Takes the memory of `masters` (address, link) and of their replicas as the snapshot
    /// read it, and watches it from then on, keeping `headroom` (a fraction) of each limit
    /// free ([`Limits::read`]). Returns the replicas it cannot watch, with why. Error: a
    /// master that was not read or cannot be reached.
    pub(crate) fn read_limits(
        &mut self,
        masters: &[(String, Link)],
        headroom: f64,
    ) -> Result<Unwatched> {
        let (limits, unread) = Limits::read(&self.snapshot, masters, &self.replicas, headroom)?;
        self.limits = Some(Arc::new(Mutex::new(limits)));
        Ok(Unwatched { unread })
    }

    /// The watched limits, locked: the lanes of a parallel run share them. A lane that
    /// panicked holding them left them as they were. `None` before [`Watch::read_limits`].
    pub(crate) fn limits(&self) -> Option<MutexGuard<'_, Limits>> {
        self.limits
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether the next check is a full one ([`FULL_CHECK_EVERY`] since the last).
    pub(crate) fn full_check_due(&self) -> bool {
        self.last_full_check
            .is_none_or(|t| t.elapsed() >= FULL_CHECK_EVERY)
    }

    /// Makes the next check a full one (after a failed command: perhaps a failover).
    pub(crate) fn check_all_next(&mut self) {
        self.last_full_check = None;
    }

    /// Refreshes the snapshot (the seed's view, and each master's of `masters` own view and
    /// `cluster_state`) and says why the run must stop, if it must: a node flagged failing,
    /// a master not ok, a master of the plan no longer the master it was
    /// ([`unhealthy`]). A master `plan` drains ([`drains`]) that serves no slot and has
    /// become a replica leaves `masters`: no failover. Each master's view in `masters` is the
    /// one read. Error: the seed or a master cannot be read.
    pub(crate) fn full_check(
        &mut self,
        masters: &mut Masters,
        plan: &SlotPlan,
    ) -> Result<Option<Finding>> {
        self.last_full_check = Some(Instant::now());
        let addresses: Vec<String> = masters.nodes.keys().cloned().collect();
        self.snapshot.refresh(Parts::HEALTH, &addresses)?;
        // A node flagged failing is not read: said as such first.
        if let Some(why) = unhealthy(&self.snapshot.seed_view, &[]) {
            return Ok(Some(why));
        }
        let mut drained = Vec::new();
        for (address, n) in masters.nodes.iter_mut() {
            let read = self
                .snapshot
                .node(address)
                .ok_or_else(|| anyhow!("{address} is no longer listed by the seed"))?;
            let (Some(view), None) = (&read.view, read.why_unread()) else {
                bail!(read
                    .why_unread()
                    .unwrap_or_else(|| format!("{address}: not read")));
            };
            n.view = view.clone();
            let me = myself(&n.view);
            // Drained by the moves done, whichever lanes they were in: it serves no slot.
            if me.is_some_and(|m| !m.has("master") && m.slots.is_empty())
                && drains(plan, address, plan.moves.len())
            {
                drained.push(address.clone());
                continue;
            }
            let state = read.state.clone().unwrap_or_default();
            if state != "ok" {
                return Ok(Some(Finding::ClusterState {
                    node: address.clone(),
                    state,
                }));
            }
        }
        for address in drained {
            masters.nodes.remove(&address);
        }
        let own: Vec<(&str, &str, &[ClusterNode])> = masters
            .nodes
            .iter()
            .map(|(a, n)| (a.as_str(), n.id.as_str(), n.view.as_slice()))
            .collect();
        Ok(unhealthy(&self.snapshot.seed_view, &own))
    }

    /// After the last move of `plan`: waits until every replica of its masters holds what its
    /// master held at the end ([`Limits::settle_replicas`]), and notes in `applied` the
    /// masters whose `evicted_keys` grew during the run and their fill. A wait is told once
    /// through `on`.
    pub(crate) fn settle(
        &self,
        plan: &SlotPlan,
        applied: &mut Applied,
        on: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let masters: Vec<String> = plan.masters().into_iter().collect();
        let drained = plan.drained();
        if let Some(mut limits) = self.limits() {
            let masters: Vec<&str> = masters.iter().map(String::as_str).collect();
            limits.settle_replicas(&masters, &mut |text| on(Event::Notice(text)))?;
            applied.evicted = limits.evictions();
            applied.fill = limits.fill(&drained);
        }
        Ok(())
    }

    /// Waits while a replica of `masters` is not streaming or lags
    /// ([`Limits::replica_behind`]), at most [`limits::REPLICA_WAIT`], saying once through `on`
    /// what it waits for; the limits are locked for each look only. Error: still so after the
    /// wait (the node, its state, its lag), or a master that no longer answers.
    pub(crate) fn wait_for_replicas(
        &self,
        masters: &[&str],
        on: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let began = Instant::now();
        let mut told = false;
        loop {
            let behind = match self.limits() {
                Some(mut limits) => limits.replica_behind(masters)?,
                None => None,
            };
            let Some(behind) = behind else {
                return Ok(());
            };
            if began.elapsed() >= limits::REPLICA_WAIT {
                refuse!(
                    "{behind} after {} s of waiting: the run stopped before its next slot (a \
                     slot it was moving stays as it was). Once the replica streams again (INFO \
                     replication), run the same command to go on",
                    limits::REPLICA_WAIT.as_secs()
                );
            }
            if !told {
                on(Event::Notice(format!(
                    "waiting for a replica: {behind} (at most {} s)",
                    limits::REPLICA_WAIT.as_secs()
                )));
                told = true;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// Says the masters' fill through `on` ([`Event::Fill`]) where [`FILL_EVERY`] has passed
    /// since it was last said (or `now`), each master read again where due; the masters
    /// `plan` drains whose moves are all `done` (replicas now) left out.
    pub(crate) fn tell_fill(
        &mut self,
        plan: &SlotPlan,
        done: &[bool],
        now: bool,
        on: &mut dyn FnMut(Event),
    ) {
        if !now && self.fill_told.is_some_and(|t| t.elapsed() < FILL_EVERY) {
            return;
        }
        self.fill_told = Some(Instant::now());
        let drained: Vec<String> = plan
            .drained()
            .into_iter()
            .filter(|a| {
                plan.moves
                    .iter()
                    .zip(done)
                    .all(|(m, done)| m.from != *a || *done)
            })
            .collect();
        let fill = self.limits().map(|mut l| {
            l.refresh_masters();
            l.fill(&drained)
        });
        if let Some(fill) = fill.filter(|f| !f.is_empty()) {
            on(Event::Fill(fill));
        }
    }
}
