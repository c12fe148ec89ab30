//! The placement engine: hashes, key slots, the ring, the slot table and the comparisons.
//! No Redis type appears here, so everything is testable and benchmarkable in-process.

pub mod by_weight;
pub mod change;
pub mod cluster;
pub mod compare;
pub mod cost;
pub mod error;
pub mod flavour;
pub mod glob;
pub mod keyslot;
pub mod ring;
pub mod sample;
pub mod schemes;
pub mod slots;
pub mod topology;
pub mod weigh;
pub mod whatif;

pub use change::Change;
pub use compare::{balanced_peak_to_mean, SchemeBalance};
pub use error::EngineError;
pub use flavour::Flavour;
pub use glob::glob_match;
pub use keyslot::{hash_tag, key_slot, SLOT_COUNT};
pub use ring::{Node, Ring};
pub use sample::{sample_members, DEFAULT_SAMPLE};
pub use schemes::{Placement, Scheme, SchemeParams};
pub use slots::{slot_runs, RebalanceStep, SlotTable};
pub use topology::{Limits, NodeStats, Topology};
pub use weigh::{lfu_accesses, MemberWeight};
pub use whatif::{peak_to_mean, Loads, SchemeMoves, SchemeResult, WhatIf};
