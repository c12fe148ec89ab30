//! Relieving a full cache (issue 49): tool_relief.rs's job under `allkeys-lru`, every master
//! at 90% of its `maxmemory`, a client throughout; `predict --by memory` says the plan fits and
//! `apply` completes it with nothing evicted and every key intact. On Redis 7.0.15 only, unless
//! `make test-all` (scripts/test.sh, SAME_ON_EVERY_SERVER): what an eviction policy changes in
//! a move (a full source or target evicts before every command) is the same on the three
//! servers, and tool_memory_facts.rs pins it on each; the relief itself runs on each in
//! tool_relief.rs.

mod common;

use common::relief::relieve;

#[test]
fn a_cache_near_full_is_relieved() {
    relieve("allkeys-lru", false);
}
