//! The module's configurations (`CONFIG GET/SET ringslot.<name>`, `ringslot.<name> <value>` in
//! the configuration file, or `<name> <value>` pairs after the module path on
//! `--loadmodule`): one table, registered in `init`, with the range every way of setting them
//! is checked against.

use super::errors::CommandError;
use crate::engine::topology::{Limits, MAX_POINTS_CEILING, MAX_VNODES};
use redis_module::configuration::{register_i64_configuration, ConfigurationFlags};
use redis_module::{raw, Context, RedisString};
use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};

/// One integer configuration.
pub struct Setting {
    /// Its name after `ringslot.`.
    pub name: &'static str,
    /// Its current value.
    pub value: &'static AtomicI64,
    /// The value it has unless set.
    pub default: i64,
    /// The smallest value accepted.
    pub min: i64,
    /// The largest value accepted.
    pub max: i64,
}

/// The current value of a setting, as a `u64` (no setting is negative).
pub fn get(value: &AtomicI64) -> u64 {
    u64::try_from(value.load(Ordering::Relaxed)).unwrap_or(0)
}

/// Each setting's default, written once: the statics below start at it and [`SETTINGS`]
/// reports it (`CONFIG GET`, the docs' table, checked by a test).
pub mod defaults {
    use crate::engine::{Flavour, SchemeParams};

    /// `ringslot.default-vnodes`: the native flavour's 160.
    pub const DEFAULT_VNODES: i64 = Flavour::Native.default_vnodes() as i64;
    /// `ringslot.max-points`.
    pub const MAX_POINTS: i64 = 1_000_000;
    /// `ringslot.max-nodes`.
    pub const MAX_NODES: i64 = 10_000;
    /// `ringslot.max-sample`.
    pub const MAX_SAMPLE: i64 = 1_000_000_000;
    /// `ringslot.inline-limit`.
    pub const INLINE_LIMIT: i64 = 100_000;
    /// `ringslot.max-background`.
    pub const MAX_BACKGROUND: i64 = 2;
    /// `ringslot.maglev-size`, `ringslot.probes`, `ringslot.balance-factor`: the engine's.
    pub const MAGLEV_SIZE: i64 = SchemeParams::DEFAULT.maglev_size as i64;
    /// See [`MAGLEV_SIZE`].
    pub const PROBES: i64 = SchemeParams::DEFAULT.probes as i64;
    /// See [`MAGLEV_SIZE`].
    pub const BALANCE_FACTOR: i64 = SchemeParams::DEFAULT.balance_factor as i64;
}

/// `ringslot.default-vnodes`: VNODES of the rings `RING.ADD` creates.
pub static DEFAULT_VNODES: AtomicI64 = AtomicI64::new(defaults::DEFAULT_VNODES);
/// `ringslot.max-points`: the most points a command may give one ring.
pub static MAX_POINTS: AtomicI64 = AtomicI64::new(defaults::MAX_POINTS);
/// `ringslot.max-nodes`: the most nodes a command may give one ring.
pub static MAX_NODES: AtomicI64 = AtomicI64::new(defaults::MAX_NODES);
/// `ringslot.max-sample`: the most members one `RING.MOVES` evaluates.
pub static MAX_SAMPLE: AtomicI64 = AtomicI64::new(defaults::MAX_SAMPLE);
/// `ringslot.inline-limit`: the most work, in the units of [`crate::engine::cost`] (about 0.3
/// µs each), a `RING.MOVES`, `RING.OWNERS` or `RING.BALANCE` does on Redis' main thread; past
/// it, it runs in the background.
pub static INLINE_LIMIT: AtomicI64 = AtomicI64::new(defaults::INLINE_LIMIT);
/// `ringslot.max-background`: the most `RING.MOVES` running in the background at once.
pub static MAX_BACKGROUND: AtomicI64 = AtomicI64::new(defaults::MAX_BACKGROUND);
/// `ringslot.maglev-size`: entries of a Maglev table; must be a prime (checked where used).
pub static MAGLEV_SIZE: AtomicI64 = AtomicI64::new(defaults::MAGLEV_SIZE);
/// `ringslot.probes`: multi-probe consistent hashing's probes per member.
pub static PROBES: AtomicI64 = AtomicI64::new(defaults::PROBES);
/// `ringslot.balance-factor`: bounded loads' capacity, in percent of the mean load.
pub static BALANCE_FACTOR: AtomicI64 = AtomicI64::new(defaults::BALANCE_FACTOR);

/// `ringslot.debug-pause-background`: for tests, as Redis' `key-load-delay`: while 1, every
/// background worker waits before each slice of members (see [`super::background`]).
pub static DEBUG_PAUSE: AtomicI64 = AtomicI64::new(0);

/// Every configuration. The defaults keep every read-only command within 50 ms of the main
/// thread on the development machine (README, Configuration, and `make bench-limits`).
pub static SETTINGS: [Setting; 10] = [
    Setting {
        name: "default-vnodes",
        value: &DEFAULT_VNODES,
        default: defaults::DEFAULT_VNODES,
        min: 1,
        max: MAX_VNODES as i64,
    },
    Setting {
        name: "max-points",
        value: &MAX_POINTS,
        default: defaults::MAX_POINTS,
        min: 1,
        max: MAX_POINTS_CEILING as i64,
    },
    Setting {
        name: "max-nodes",
        value: &MAX_NODES,
        default: defaults::MAX_NODES,
        min: 1,
        max: MAX_POINTS_CEILING as i64,
    },
    Setting {
        name: "max-sample",
        value: &MAX_SAMPLE,
        default: defaults::MAX_SAMPLE,
        min: 1,
        max: 1_000_000_000_000,
    },
    Setting {
        name: "inline-limit",
        value: &INLINE_LIMIT,
        default: defaults::INLINE_LIMIT,
        min: 1,
        max: 1_000_000_000,
    },
    Setting {
        name: "max-background",
        value: &MAX_BACKGROUND,
        default: defaults::MAX_BACKGROUND,
        min: 1,
        max: 64,
    },
    Setting {
        name: "maglev-size",
        value: &MAGLEV_SIZE,
        default: defaults::MAGLEV_SIZE,
        min: 7,
        max: 1_000_003,
    },
    Setting {
        name: "probes",
        value: &PROBES,
        default: defaults::PROBES,
        min: 1,
        max: 1000,
    },
    Setting {
        name: "balance-factor",
        value: &BALANCE_FACTOR,
        default: defaults::BALANCE_FACTOR,
        min: 100,
        max: 1000,
    },
    Setting {
        name: "debug-pause-background",
        value: &DEBUG_PAUSE,
        default: 0,
        min: 0,
        max: 1,
    },
];

/// The limits a command's ring must keep (`ringslot.max-points`, `ringslot.max-nodes`).
pub fn limits() -> Limits {
    Limits {
        points: get(&MAX_POINTS),
        nodes: get(&MAX_NODES),
    }
}

/// The schemes' parameters as configured.
pub fn scheme_params() -> crate::engine::SchemeParams {
    crate::engine::SchemeParams {
        maglev_size: u32::try_from(get(&MAGLEV_SIZE))
            .unwrap_or(crate::engine::SchemeParams::DEFAULT.maglev_size),
        probes: u32::try_from(get(&PROBES)).unwrap_or(crate::engine::SchemeParams::DEFAULT.probes),
        balance_factor: u32::try_from(get(&BALANCE_FACTOR))
            .unwrap_or(crate::engine::SchemeParams::DEFAULT.balance_factor),
    }
}

/// Checks that `params` give Maglev a prime table size (only Maglev uses it).
pub fn check_maglev_size(params: &crate::engine::SchemeParams) -> Result<(), CommandError> {
    let size = params.maglev_size;
    if crate::engine::schemes::is_prime(size) {
        Ok(())
    } else {
        Err(CommandError::MaglevSize { size })
    }
}

/// Why the `--loadmodule` arguments were refused: the log line names the argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgsError {
    /// A name that is no setting.
    Unknown(String),
    /// A name without a value after it.
    MissingValue(&'static str),
    /// A value that is no integer, or out of the setting's range.
    BadValue {
        /// The setting.
        name: &'static str,
        /// The value given.
        value: String,
        /// Its range.
        min: i64,
        /// Its range.
        max: i64,
    },
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
        match self {
            ArgsError::Unknown(name) => write!(
                f,
                "unknown module argument '{name}' (ringslot takes {}, each followed by its value)",
                names.join(", ")
            ),
            ArgsError::MissingValue(name) => write!(f, "module argument '{name}' needs a value"),
            ArgsError::BadValue {
                name,
                value,
                min,
                max,
            } => write!(
                f,
                "module argument '{name}' is '{value}': it must be an integer from {min} to {max}"
            ),
        }
    }
}

/// Checks `<name> <value>` pairs (the `--loadmodule` arguments) against [`SETTINGS`], as
/// `CONFIG SET` would, and returns the values to set; nothing is set when any pair is wrong.
pub fn parse_args(args: &[&[u8]]) -> Result<Vec<(&'static Setting, i64)>, ArgsError> {
    let mut parsed = Vec::new();
    let mut rest = args.iter();
    while let Some(&name) = rest.next() {
        let text = String::from_utf8_lossy(name);
        let setting = SETTINGS
            .iter()
            .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
            .ok_or_else(|| ArgsError::Unknown(text.into_owned()))?;
        let value = rest.next().ok_or(ArgsError::MissingValue(setting.name))?;
        let bad = || ArgsError::BadValue {
            name: setting.name,
            value: String::from_utf8_lossy(value).into_owned(),
            min: setting.min,
            max: setting.max,
        };
        let n = super::args::parse_integer(value).ok_or_else(bad)?;
        if !(setting.min..=setting.max).contains(&n) {
            return Err(bad());
        }
        parsed.push((setting, n));
    }
    Ok(parsed)
}

/// Registers every setting, applies the configuration file's values (`LoadConfigs`), then the
/// `--loadmodule` arguments. Error: a message for the log; the module then does not load.
pub fn register(ctx: &Context, args: &[RedisString]) -> Result<(), String> {
    for s in &SETTINGS {
        register_i64_configuration(
            ctx,
            s.name,
            s.value,
            s.default,
            s.min,
            s.max,
            ConfigurationFlags::DEFAULT,
            None,
        );
    }
    // SAFETY: a plain read of a function-pointer static set by RedisModule_Init; called in
    // OnLoad, after the configurations are registered, as the API requires.
    if let Some(load) = unsafe { raw::RedisModule_LoadConfigs } {
        if unsafe { load(ctx.ctx) } != raw::Status::Ok as i32 {
            return Err("a ringslot.* setting of the configuration file was refused".into());
        }
    }
    let args: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    for (setting, value) in parse_args(&args).map_err(|e| e.to_string())? {
        setting.value.store(value, Ordering::Relaxed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(args: &[&'static str]) -> Vec<&'static [u8]> {
        args.iter().map(|a| a.as_bytes()).collect()
    }

    #[test]
    fn module_arguments_are_checked_like_config_set() {
        let ok = parse_args(&v(&["max-sample", "5", "DEFAULT-VNODES", "20"])).unwrap();
        assert_eq!(
            ok.iter().map(|(s, n)| (s.name, *n)).collect::<Vec<_>>(),
            vec![("max-sample", 5), ("default-vnodes", 20)]
        );
        for (args, text) in [
            (
                &["max-points", "0"][..],
                "module argument 'max-points' is '0': it must be an integer from 1 to 100000000",
            ),
            (
                &["max-points", "-5"],
                "module argument 'max-points' is '-5': it must be an integer from 1 to 100000000",
            ),
            (
                &["default-vnodes", "200000"],
                "module argument 'default-vnodes' is '200000': it must be an integer from 1 to 100000",
            ),
            (
                &["max-sample", "x"],
                "module argument 'max-sample' is 'x': it must be an integer from 1 to 1000000000000",
            ),
            (&["max-sample"], "module argument 'max-sample' needs a value"),
            (
                &["max_sample", "5"],
                "unknown module argument 'max_sample' (ringslot takes default-vnodes, max-points, \
                 max-nodes, max-sample, inline-limit, max-background, maglev-size, probes, balance-factor, \
                 debug-pause-background, each followed by its value)",
            ),
        ] {
            assert_eq!(
                parse_args(&v(args)).map(|_| ()).map_err(|e| e.to_string()),
                Err(text.to_string()),
                "{args:?}"
            );
        }
    }
}
