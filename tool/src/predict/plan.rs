//! The slot plan: its moves, and what each carries.

use super::estimate::Estimate;
use serde::Serialize;

/// One move of the plan: slots from a master to another (`None`: unassigned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanStep {
    /// The master giving the slots (`ip:port`), `None` for unassigned slots.
    pub from: Option<String>,
    /// The master taking them, `None` when they become unassigned.
    pub to: Option<String>,
    /// The slots, ascending.
    pub slots: Vec<u16>,
}

/// One move of the plan with what it carries.
#[derive(Debug, Clone, Serialize)]
pub struct MoveCost {
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
