//! What a local run found: the prediction of a change and what the real change then
//! measured, set beside each other in its report ([`super::report`]).

use ringslot_tool::predict::method::Method;
use ringslot_tool::predict::{MasterChange, Prediction};
use std::collections::HashMap;

/// A local run: the prediction, and what a report sets beside it.
pub struct Outcome {
    /// The prediction.
    pub prediction: Prediction,
    /// The read-only prediction of the same change, when both ways ran (`--both-modes`).
    pub read_only: Option<Prediction>,
    /// What the real change measured.
    pub real: Option<Real>,
    /// The change predicted.
    pub change: MasterChange,
}

/// What a real change measured, set beside its prediction in the report (the benchmark
/// program's local runs make the change and fill it).
#[derive(Debug, Clone)]
pub struct Real {
    /// Keys in slots whose owner changed, and those between masters there before and after.
    pub moved: u64,
    pub between: u64,
    /// Key by key (`SCAN` before and after, small keyspaces): keys whose master changed, and
    /// the sum of their `DUMP` lengths on their new master.
    pub scan_moved: Option<u64>,
    pub scan_bytes: Option<u64>,
    /// Bytes the masters that gained slots read from clients meanwhile
    /// (`total_net_input_bytes`: the `RESTORE-ASKING` commands `MIGRATE` sends, with their
    /// protocol, and redis-cli's own commands).
    pub net_in: u64,
    pub owner_after: Vec<Option<String>>,
    /// Keys per master after.
    pub keys_after: HashMap<String, u64>,
    /// Seconds of the `redis-cli --cluster rebalance` run, and of the whole change.
    pub rebalance_seconds: f64,
    pub seconds: f64,
    pub moves_printed: Vec<String>,
    /// How the slots moved.
    pub method: Method,
    /// Each master's memory around the moves.
    pub memory: Vec<RealMemory>,
    /// Atomic: the jobs' `cow_size` summed (bytes the forks copied on write).
    pub cow_bytes: u64,
    /// What each prediction (the way it ran, and per master) held the masters for, measured
    /// on the servers themselves.
    pub holds: Vec<(String, Vec<Hold>)>,
    /// The host's load average (1, 5 and 15 minutes) when the run ended, where known.
    pub load_average: Option<[f64; 3]>,
}

/// What a prediction held one master for, from the master's own records: its `SLOWLOG`
/// (threshold 10 ms) entries of the tool's connections, and its latency monitor's longest
/// `ringslot-slice` event (a background walk's hold of the main thread, threshold 10 ms).
#[derive(Debug, Clone, Default)]
pub struct Hold {
    /// The master.
    pub address: String,
    /// How many of the tool's commands took 10 ms or more.
    pub slow_commands: u64,
    /// The longest of them, in milliseconds (0: none).
    pub longest_command_ms: f64,
    /// Its words as `SLOWLOG` keeps them (at most 32 arguments, long ones cut).
    pub longest_command: String,
    /// The longest slice of a background walk of 10 ms or more (0: none).
    pub longest_slice_ms: f64,
}

/// One master's `used_memory` around the real moves, in bytes.
#[derive(Debug, Clone, Default)]
pub struct RealMemory {
    pub address: String,
    /// Just before the moves.
    pub before: f64,
    /// The highest of the samples taken every 100 ms while the slots moved (a peak between
    /// two samples is missed: a lower bound of the peak).
    pub sampled_peak: f64,
    /// `used_memory_peak` after the moves: the server's own peak over its whole life, loading
    /// included (these servers are fresh: an upper bound of the moves' peak).
    pub server_peak: f64,
    /// When the change is done.
    pub after: f64,
}
