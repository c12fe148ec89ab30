//! Keys counted and moved under the ring of one flavour, the slot table and modulo ([`Sums`]),
//! from either way of predicting: the engine's what-if over keys read here, or the module's
//! `RING.MOVES ... SLOTS` reply on a master.

use crate::reply::ring::Moves;
use anyhow::Result;
use redis::Value;
use ringslot_engine::{Scheme, WhatIf};
use serde::Serialize;

/// Keys counted and moved under the ring of one flavour, the slot table and modulo, summed
/// over the masters (the fields of `RING.MOVES`'s reply, or of the engine's what-if).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Sums {
    /// Live keys evaluated.
    pub members: u64,
    /// Keys whose ring owner changes, and those of them moving between nodes there before
    /// and after.
    pub ring_moved: u64,
    pub ring_between: u64,
    /// Keys whose slot owner changes (under the slot table; not a count of slots).
    #[serde(rename = "slot_table_moved")]
    pub slots_moved: u64,
    /// Keys whose `hash mod N` owner changes, and those between old nodes.
    pub modulo_moved: u64,
    pub modulo_between: u64,
    /// The share of keys a perfect scheme moves (0 to 1).
    pub ideal: f64,
}

/// One flavour's sums.
#[derive(Debug, Clone, PartialEq)]
pub struct RingSums {
    /// The ring's flavour (`native`, `ketama`, ...).
    pub flavour: String,
    pub sums: Sums,
}

impl Sums {
    /// Adds `o`'s counts (the ideal is the same for every part: taken from `o`).
    pub fn add(&mut self, o: &Sums) {
        self.members += o.members;
        self.ring_moved += o.ring_moved;
        self.ring_between += o.ring_between;
        self.slots_moved += o.slots_moved;
        self.modulo_moved += o.modulo_moved;
        self.modulo_between += o.modulo_between;
        self.ideal = o.ideal;
    }

    /// The sums of one engine what-if over ring, slots and modulo.
    pub fn of_what_if(w: &WhatIf) -> Sums {
        let part = |s: Scheme| w.scheme(s).map(|r| r.moves).unwrap_or_default();
        Sums {
            members: w.members,
            ring_moved: part(Scheme::Ring).moved,
            ring_between: part(Scheme::Ring).between_old,
            slots_moved: part(Scheme::Slots).moved,
            modulo_moved: part(Scheme::Modulo).moved,
            modulo_between: part(Scheme::Modulo).between_old,
            ideal: w.ideal,
        }
    }

    /// The sums of one `RING.MOVES ... SLOTS` reply (ring, slots and modulo). Error: a reply
    /// without those schemes.
    pub fn of_reply(reply: &Value) -> Result<Sums> {
        let m = Moves::read(reply)?;
        let (ring, slots, modulo) = (m.scheme("ring")?, m.scheme("slots")?, m.scheme("modulo")?);
        Ok(Sums {
            members: m.members,
            ring_moved: ring.moved,
            ring_between: ring.between_old,
            slots_moved: slots.moved,
            modulo_moved: modulo.moved,
            modulo_between: modulo.between_old,
            ideal: m.ideal,
        })
    }
}

/// The flavours' sums as one JSON object keyed by flavour.
pub fn rings_as_map<S: serde::Serializer>(rings: &[RingSums], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(rings.iter().map(|r| (&r.flavour, &r.sums)))
}
