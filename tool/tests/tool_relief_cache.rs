//! Relieving a full cache (issue 49): tool_relief.rs's job under `allkeys-lru`, every master
//! at 90% of its `maxmemory`, a client throughout; `predict --by memory` says the plan fits and
//! `apply` completes it with nothing evicted and every key intact. A binary of its own, so
//! that `make test` runs it beside the store's cases on each server.

mod common;

use common::relief::relieve;

#[test]
fn a_cache_near_full_is_relieved() {
    relieve("allkeys-lru", false);
}
