//! Owner lookups to be counted by valgrind's cachegrind (instructions, cache misses), which
//! are steady on a shared machine where timings are not: `make bench-instructions` runs it
//! under cachegrind for each flavour with `LOOKUPS` lookups and with none, and takes the
//! difference, so that building the ring does not count.
//!
//! Usage: `lookup_instructions FLAVOUR NODES LOOKUPS` (FLAVOUR as `RING.CREATE ... COMPAT`
//! takes it; NODES of weight 1 named `10.0.a.b:6379`, 160 points each where VNODES applies; the
//! members `user:<i>:profile`, 1024 of them taken in turn). Prints the owners' checksum so
//! that no lookup is optimised away.

use ringslot_engine::{Flavour, Ring};
use std::hint::black_box;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: lookup_instructions FLAVOUR NODES LOOKUPS";
    let (Some(flavour), Some(nodes), Some(lookups)) = (args.get(1), args.get(2), args.get(3))
    else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let Some(flavour) = Flavour::ALL.into_iter().find(|f| f.name() == flavour) else {
        eprintln!("unknown flavour {flavour}; {usage}");
        std::process::exit(2);
    };
    let (Ok(nodes), Ok(lookups)) = (nodes.parse::<usize>(), lookups.parse::<usize>()) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let names: Vec<Vec<u8>> = (0..nodes)
        .map(|i| format!("10.0.{}.{}:6379", i / 250, i % 250).into_bytes())
        .collect();
    let members: Vec<Vec<u8>> = (0..1024)
        .map(|i| format!("user:{i}:profile").into_bytes())
        .collect();
    let mut ring = Ring::new(flavour, 160, false);
    ring.set_nodes(names.into_iter().map(|n| (n, 1)).collect());
    let mut sum = 0usize;
    for i in 0..lookups {
        let member = &members[i % members.len()];
        sum = sum.wrapping_add(black_box(&ring).owner(black_box(member)).unwrap_or(0));
    }
    println!("{sum}");
}
