//! redis-cli's plan as the prediction costs it: each step of its rebalance
//! ([`RebalanceStep`], masters by address) with the keys, bytes and memory it carries
//! ([`StepCost`]).

use super::estimate::Estimate;
pub use ringslot_engine::RebalanceStep;
use serde::Serialize;

/// One step of redis-cli's rebalance with what it carries.
#[derive(Debug, Clone, Serialize)]
pub struct StepCost {
    /// The master giving the slots (`ip:port`), `None` for unassigned slots.
    pub from: Option<String>,
    /// The master taking them.
    pub to: Option<String>,
    /// The slots, ascending.
    pub slots: Vec<u16>,
    /// Live keys in those slots.
    pub keys: u64,
    /// Their `DUMP` bytes (what `MIGRATE` sends).
    pub bytes: Estimate,
    /// Their `MEMORY USAGE`.
    pub memory: Estimate,
}
