//! Data safety under random writes, short here and long in `make soak` (`RINGSLOT_SOAK=1`):
//! a replica stays equal to its master, and with `appendfsync always` no acknowledged write
//! is lost when the server is killed with SIGKILL. (The fuzzed calls that must leave rings
//! unchanged are `module_errors::random_and_malformed_calls_never_hurt`.)

use ringslot_harness::prelude::*;
use ringslot_harness::redis;

const RINGS: [&str; 3] = ["soak:a", "soak:b", "soak:k"];

/// A random write to one of the soak rings: creates (with any flavour), adds and re-weights,
/// removes, assigns. Some are refused (an existing key, an unknown node), as users' are.
fn random_write(rng: &mut Rng) -> Vec<Vec<u8>> {
    let key = rng.pick(&RINGS).as_bytes().to_vec();
    let node = format!("10.0.{}.{}:6379", rng.below(3), rng.below(12)).into_bytes();
    let mut args: Vec<Vec<u8>> = match rng.below(10) {
        0 => {
            let compat = *rng.pick(&["native", "ketama", "groupcache", "native-fnv"]);
            let mut a = vec![
                b"RING.CREATE".to_vec(),
                key,
                b"COMPAT".to_vec(),
                compat.into(),
            ];
            if compat != "ketama" {
                a.extend([
                    b"VNODES".to_vec(),
                    (1 + rng.below(40)).to_string().into_bytes(),
                ]);
            }
            a
        }
        1..=4 => vec![b"RING.ADD".to_vec(), key, node],
        5 => vec![
            b"RING.ADD".to_vec(),
            key,
            b"WEIGHT".to_vec(),
            (1 + rng.below(4)).to_string().into_bytes(),
            node,
        ],
        6 | 7 => vec![b"RING.DEL".to_vec(), key, node],
        8 => {
            let start = rng.below(16000);
            let end = start + rng.below(300);
            vec![
                b"RING.ASSIGN".to_vec(),
                key,
                start.to_string().into_bytes(),
                end.to_string().into_bytes(),
                node,
            ]
        }
        _ => vec![b"DEL".to_vec(), key],
    };
    args.shrink_to_fit();
    args
}

/// Runs `args`; whether the server accepted it.
fn send(con: &mut redis::Connection, args: &[Vec<u8>]) -> bool {
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    call(con, &refs).is_ok()
}

/// One ring's nodes, slots and configuration.
type RingState = (
    Vec<u8>,
    (redis::Value, redis::Value),
    Vec<(String, redis::Value)>,
);

/// What the soak rings look like.
fn state(con: &mut redis::Connection) -> Vec<RingState> {
    RINGS
        .iter()
        .map(|k| {
            let key = k.as_bytes();
            (key.to_vec(), snapshot(con, key), info_state(con, key))
        })
        .collect()
}

#[test]
fn a_replica_stays_equal_under_random_writes_and_restarts() {
    let master = Server::start();
    let mut m = master.client();
    let mut replica = Server::start();
    let mut r = connect_replica(&master, &replica);
    let mut rng = Rng::new(0x50a4_0001);
    let writes = soak(300, 20_000);
    for i in 1..=writes {
        send(&mut m, &random_write(&mut rng));
        if i % 100 == 0 || i == writes {
            assert_eq!(
                int(&q(&mut m, "WAIT 1 5000")),
                1,
                "the replica acknowledged"
            );
            assert_eq!(state(&mut r), state(&mut m), "after {i} writes");
        }
        // Now and then the replica restarts and resyncs (a full sync through RDB).
        if i % soak(150, 2_500) == 0 {
            drop(r);
            let dir = replica.stop();
            replica = Server::start_in(dir, &[], &[]);
            r = connect_replica(&master, &replica);
        }
    }
}

#[test]
fn no_acknowledged_write_is_lost_to_sigkill_with_appendfsync_always() {
    let aof = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        "no",
    ];
    // The reference applies exactly the writes the killed server acknowledged.
    let reference = Server::start();
    let mut expected = reference.client();
    let mut server = Server::start_with(&[], &aof);
    let mut rng = Rng::new(0x6b11_0002);
    for round in 0..soak(3, 20) {
        let mut con = server.client();
        wait_aof_rewrite(&mut con);
        for _ in 0..soak(150, 1_000) {
            let write = random_write(&mut rng);
            if send(&mut con, &write) {
                send(&mut expected, &write);
            }
        }
        let dir = server.kill();
        server = Server::start_in(dir, &[], &aof);
        let mut con = server.client();
        assert_eq!(state(&mut con), state(&mut expected), "after kill {round}");
    }
}
