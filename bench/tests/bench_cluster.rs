//! `ringslot-bench cluster --local` on real clusters started here, at a size CI can afford:
//! the tool's predictions must be what the real `redis-cli --cluster` then does (keys from
//! per-slot counts and a SCAN of every master, bytes from the DUMP of every key that moved)
//! for three masters joining in one rebalance, two drained in one, and the rebalance pending
//! after add-node; the read-only way and the way with the module must give the same numbers;
//! on Valkey 9, the atomic way. (The tool on a live cluster: tool/tests/tool_predict.rs.)

mod common;

use common::bench;
use std::collections::HashMap;
use std::net::TcpListener;
use std::path::Path;

/// The rows of the CSV the program wrote, keyed by scheme.
fn csv_rows(path: &Path) -> HashMap<String, HashMap<String, String>> {
    ringslot_harness::programs::csv_rows(path, "scheme")
}

use ringslot_harness::programs::cell_int as n;

const SLOTS_ROW: &str = "slots (redis-cli --cluster rebalance)";
/// The predicted bytes' column (its header says how the rings' bytes are estimated).
const MOVED_BYTES: &str = "moved bytes (rings: moved keys x their mean size)";

/// A block of `n` consecutive free loopback ports below the ephemeral range, from `seed`.
fn free_block(n: u16, seed: u64) -> u16 {
    let mut x = seed | 1;
    loop {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let base = 20000 + ((x >> 33) % 11000) as u16;
        if (base..base + n).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return base;
        }
    }
}

/// Runs a local scenario (`extra`: the cluster and the change) with `masters` ports, on a free
/// block of ports (another one when a port was taken meanwhile by another process); returns
/// the report and the scheme rows.
fn local(
    extra: &[&str],
    masters: u16,
    name: &str,
) -> (String, HashMap<String, HashMap<String, String>>) {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    let seed = u64::from(std::process::id()) ^ (name.len() as u64 * 7919);
    for attempt in 0..5u64 {
        let base = free_block(masters, seed + attempt).to_string();
        let mut args = vec![
            "--out",
            dir,
            "cluster",
            "--name",
            name,
            "--base-port",
            &base,
        ];
        args.extend_from_slice(extra);
        let run = bench(&args);
        let err = String::from_utf8_lossy(&run.stderr).to_string();
        if !run.status.success() && (err.contains("is in use") || err.contains("already in use")) {
            continue;
        }
        assert!(
            run.status.success(),
            "ringslot-bench {args:?} failed:\n{err}"
        );
        let md = String::from_utf8(run.stdout).unwrap();
        let rows = csv_rows(&out.path().join(format!("{name}.csv")));
        return (md, rows);
    }
    panic!("no free block of {masters} ports");
}

/// "predicted X, real Y" of the bytes line, as (X, its error, Y).
fn bytes_line(md: &str) -> (f64, f64, f64) {
    let line = md
        .lines()
        .find(|l| l.starts_with("- bytes moved (DUMP): predicted "))
        .unwrap_or_else(|| panic!("no bytes line in\n{md}"));
    let rest = line.trim_start_matches("- bytes moved (DUMP): predicted ");
    let (predicted, rest) = rest.split_once(", real ").unwrap();
    let real: f64 = rest.split(';').next().unwrap().trim().parse().unwrap();
    let (value, error) = match predicted.split_once(" ± ") {
        Some((v, e)) => (v.parse().unwrap(), e.parse().unwrap()),
        None => (predicted.parse().unwrap(), 0.0),
    };
    (value, error, real)
}

#[test]
fn three_masters_join_in_one_rebalance_predicted_both_ways() {
    let (md, rows) = local(
        &[
            "--local",
            "3",
            "--join",
            "3",
            "--keys",
            "20000",
            "--hot-keys",
            "300",
            "--both-modes",
        ],
        6,
        "join3",
    );
    let slots = &rows[SLOTS_ROW];
    assert_eq!(n(slots, "keys"), 20300);
    assert_eq!(n(slots, "moved"), n(slots, "real moved"), "{md}");
    assert!(n(slots, "moved") > 9000, "{md}");
    // Bytes key by key: exact.
    assert_eq!(n(slots, MOVED_BYTES), n(slots, "real moved bytes"), "{md}");
    let (predicted, error, real) = bytes_line(&md);
    assert_eq!((predicted, error), (real, 0.0), "{md}");
    assert!(
        md.contains(&format!(
            "a SCAN of every master before and after: {}",
            n(slots, "moved")
        )),
        "{md}"
    );
    // Which new master takes which slots follows redis-cli's order after add-node; what each
    // master gives does not.
    assert!(
        md.contains("slot owners after the real rebalance: equal to the plan's")
            || md.contains("each master gives exactly the slots the plan says"),
        "{md}"
    );
    // Both ways, the same numbers.
    assert!(md.contains("## With the module and read-only"), "{md}");
    assert!(!md.contains("| **no** |"), "{md}");
    for scheme in [
        "ring (native)",
        "ring (ketama)",
        "ring (groupcache)",
        "modulo (hash mod N)",
    ] {
        assert_eq!(n(&rows[scheme], "keys"), 20300, "{scheme}");
    }
}

#[test]
fn two_masters_drained_and_the_pending_rebalance() {
    // 6 -> 4, bytes sampled 4 keys a slot: the estimate's 95% interval holds the real bytes.
    let (md, rows) = local(
        &[
            "--local",
            "6",
            "--leave",
            "2",
            "--keys",
            "20000",
            "--bytes-sample",
            "4",
        ],
        6,
        "drain2",
    );
    let slots = &rows[SLOTS_ROW];
    assert_eq!(n(slots, "moved"), n(slots, "real moved"), "{md}");
    let (predicted, error, real) = bytes_line(&md);
    assert!(error > 0.0, "{md}");
    // The stated error is two standard errors (a 95% interval): which keys a slot's sample
    // takes follows the server's dictionary order (random hash seeds, per-slot dictionaries
    // on Redis 8), so the real total falls outside it in one run of twenty. Four standard
    // errors fail once in about 16000 runs (seen: 1480 bytes off against 1350 stated, Redis
    // 8.2.3).
    assert!((predicted - real).abs() <= 2.0 * error, "{md}");
    assert!(
        md.contains("slot owners after the real rebalance: equal to the plan's"),
        "{md}"
    );
    // The rebalance pending after add-node: its plan is redis-cli's, move for move.
    let (md, rows) = local(
        &[
            "--local",
            "3",
            "--join",
            "1",
            "--pending",
            "--keys",
            "10000",
        ],
        4,
        "pending",
    );
    let slots = &rows[SLOTS_ROW];
    assert_eq!(n(slots, "moved"), n(slots, "real moved"), "{md}");
    assert!(md.contains("the pending rebalance"), "{md}");
    assert!(
        md.contains("slot owners after the real rebalance: equal to the plan's"),
        "{md}"
    );
}

#[test]
fn atomic_slot_migration_is_predicted_and_made_on_valkey() {
    // On Valkey 9 the change is made as valkey-cli's atomic path makes it (one CLUSTER
    // MIGRATESLOTS a move): the same keys and bytes move as the plan says, and the report
    // sets the atomic method's estimates beside what the jobs really took. Elsewhere --atomic
    // is refused with the reason.
    let binary = ringslot_harness::server::server_binary();
    let version = ringslot_harness::server::server_version(&binary);
    let args = [
        "--local",
        "3",
        "--join",
        "1",
        "--keys",
        "20000",
        "--hot-keys",
        "300",
        "--atomic",
    ];
    let valkey_major = version
        .strip_prefix("Valkey server v=")
        .and_then(|v| v.split('.').next()?.parse::<u32>().ok());
    if valkey_major.is_none_or(|major| major < 9) {
        let out = tempfile::tempdir().unwrap();
        for attempt in 0..5u64 {
            let base = free_block(4, u64::from(std::process::id()) + attempt).to_string();
            let mut all = vec![
                "--out",
                out.path().to_str().unwrap(),
                "cluster",
                "--base-port",
                &base,
            ];
            all.extend_from_slice(&args);
            let run = bench(&all);
            let err = String::from_utf8_lossy(&run.stderr).to_string();
            if err.contains("is in use") || err.contains("already in use") {
                continue;
            }
            assert!(!run.status.success());
            assert!(
                err.contains("--atomic needs Valkey 9 or later on every master"),
                "{err}"
            );
            return;
        }
        panic!("no free block of 4 ports");
    }
    let (md, rows) = local(&args, 4, "atomic");
    let slots = &rows[SLOTS_ROW];
    assert_eq!(n(slots, "moved"), n(slots, "real moved"), "{md}");
    assert_eq!(n(slots, MOVED_BYTES), n(slots, "real moved bytes"), "{md}");
    assert!(
        md.contains("slot owners after the real rebalance: equal to the plan's"),
        "{md}"
    );
    assert!(md.contains("- the atomic jobs: MIGRATESLOTS of "), "{md}");
    assert!(
        md.contains("the method this report is for)")
            && md.contains("| real peak (sampled every 100 ms) |"),
        "{md}"
    );
}
