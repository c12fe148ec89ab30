#!/usr/bin/env bash
# `make test`: builds every test binary of the workspace once (one feature set, so nothing is
# compiled twice), runs them all on Redis 7.0.15 (Debian's redis-server, or $RINGSLOT_SERVER),
# then runs the ones that start servers again on Valkey 9.1.2 and on Redis 8.2.3 (fetched by
# scripts/servers.sh into .deps/), those two side by side: the live tests spend most of their
# time waiting on servers, so two passes at once take little longer than one.
# RINGSLOT_VALKEY=skip or RINGSLOT_REDIS8=skip leaves a server out.
# Each pass's output goes to target/test-<server>.log; a failing pass prints its failures.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
cargo="${CARGO:-cargo}"

# Every test binary: "package directory<TAB>binary<TAB>its name<TAB>live or local", from cargo's
# JSON messages. Local binaries (the engine's tests, run in-process) run on the first pass only.
list="$root/target/test-binaries.tsv"
mkdir -p target
"$cargo" test --workspace --lib --bins --tests --no-run --message-format=json-render-diagnostics |
  python3 -c '
import json, os, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m.get("profile", {}).get("test"):
        continue
    target = m["target"]
    package = os.path.dirname(m["manifest_path"])
    name = target["name"]
    src = os.path.basename(target["src_path"])
    # The module crate is a cdylib and an rlib: its kind lists both.
    library = any(k in ("lib", "rlib") for k in target["kind"])
    local = name.startswith("engine_") or (library and name in ("ringslot", "ringslot_engine"))
    label = name if target["kind"] == ["test"] else "unittests " + os.path.relpath(target["src_path"], os.path.dirname(package))
    print("\t".join([package, m["executable"], label, "local" if local else "live"]))
' >"$list"

# run_pass NAME SERVER_BINARY ONLY_LIVE SHOW: runs the binaries, output to target/test-NAME.log
# (and to stdout as it comes when SHOW is yes); the exit status says whether all passed.
run_pass() {
  local name="$1" server="$2" only_live="$3" show="$4" log="$root/target/test-$1.log" failed=0
  : >"$log"
  say() {
    echo "$1" >>"$log"
    if [ "$show" = yes ]; then echo "$1"; fi
  }
  say "== make test: on $("$server" --version | cut -d' ' -f1-3) (log: target/test-$name.log)"
  while IFS=$'\t' read -r dir exe label kind; do
    [ "$only_live" = yes ] && [ "$kind" = local ] && continue
    say "     Running $label"
    local status=0
    if [ "$show" = yes ]; then
      # pipefail: the pipe fails when the test binary does.
      (cd "$dir" && RINGSLOT_SERVER="$server" "$exe" </dev/null) 2>&1 | tee -a "$log" ||
        status=1
    else
      (cd "$dir" && RINGSLOT_SERVER="$server" "$exe" </dev/null) >>"$log" 2>&1 || status=1
    fi
    if [ $status -ne 0 ]; then
      failed=1
      say "== make test: $label FAILED on $name"
    fi
  done <"$list"
  say "== make test: $name: $(counts "$log")"
  return $failed
}

# counts LOG...: "N passed, N failed" summed over the "test result:" lines of the logs.
counts() {
  cat "$@" | awk '/^test result:/ {
      for (i = 1; i <= NF; i++) {
        if ($(i + 1) ~ /^passed/) p += $i
        if ($(i + 1) ~ /^failed/) f += $i
      }
    } END { printf "%d passed, %d failed\n", p, f }'
}

# show_failures NAME: the failing tests' output of a pass.
show_failures() {
  grep -E -B 2 -A 30 'panicked|FAILED' "$root/target/test-$1.log" | head -200 || true
}

status=0
redis7="${RINGSLOT_SERVER:-redis-server}"
rm -f "$root"/target/test-*.log
# The first pass prints as it goes (the others print their summaries when they end).
run_pass redis-7 "$redis7" no yes || { show_failures redis-7; status=1; }

pids=() names=()
if [ "${RINGSLOT_VALKEY:-}" = skip ]; then
  echo "== make test: Valkey left out (RINGSLOT_VALKEY=skip)"
else
  run_pass valkey-9 "$root/.deps/valkey-9.1.2/valkey-server" yes no &
  pids+=($!) names+=(valkey-9)
fi
if [ "${RINGSLOT_REDIS8:-}" = skip ]; then
  echo "== make test: Redis 8 left out (RINGSLOT_REDIS8=skip)"
else
  run_pass redis-8 "$root/.deps/redis-8.2.3/redis-server" yes no &
  pids+=($!) names+=(redis-8)
fi
for i in "${!pids[@]}"; do
  name="${names[$i]}"
  if ! wait "${pids[$i]}"; then
    show_failures "$name"
    status=1
  fi
  grep -E '^== make test' "$root/target/test-$name.log"
done
# The closing line, over every pass.
echo "total: $(counts "$root"/target/test-*.log)"
exit $status
