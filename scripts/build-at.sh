#!/bin/sh
# Builds the module (release) as it was at a commit, in a git worktree of its own, for
# benchmarks that measure an earlier build beside this one (make bench-throughput-ab).
# Usage: scripts/build-at.sh COMMIT DIR; prints the path of the built libringslot.so.
set -eu
commit=$1
dir=$2
cargo=${CARGO:-cargo}
git worktree prune
if [ -d "$dir/.git" ] || [ -f "$dir/.git" ]; then
  git -C "$dir" checkout --quiet --detach "$commit"
else
  rm -rf "$dir"
  git worktree add --quiet --detach "$dir" "$commit"
fi
(cd "$dir" && "$cargo" build --quiet --release --lib >&2)
echo "$dir/target/release/libringslot.so"
