#!/usr/bin/env bash
# `make test` (and `make test-all` with RINGSLOT_TEST_ALL=1): fetches the other servers, builds
# every test binary of the workspace once (one cargo invocation, one feature set, the criterion
# benches compiled too), then runs them:
#   - on Redis 7.0.15 (Debian's redis-server, or $RINGSLOT_SERVER): every test binary;
#   - on Valkey 9.1.2 and Redis 8.2.3 (scripts/servers.sh fetches them into .deps/): the
#     binaries that start servers, but those listed in SAME_ON_EVERY_SERVER below (make
#     test-all runs those too).
# The runs go through one pool of $RINGSLOT_TEST_JOBS (default 4) binaries at a time, the
# longest first (by the times of the last run, target/test-times.tsv, else LONG below): live
# tests spend most of their time waiting on servers, so several at once take little longer
# than one. The
# binaries in ALONE (they measure time) run after the pool, one at a time.
# RINGSLOT_VALKEY=skip or RINGSLOT_REDIS8=skip leaves a server out.
# Output: a line per binary as it ends; each binary's output in
# target/test-logs/<server>/<binary>.log, each server's in target/test-<server>.log; the
# failures' output and the time of each phase at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
cargo="${CARGO:-cargo}"
jobs="${RINGSLOT_TEST_JOBS:-4}"
all="${RINGSLOT_TEST_ALL:-}"

# Binaries whose behaviour does not depend on the server (the module's replies, its error
# texts, its schemes, a proxy in front of plain servers, the benchmark program's reports):
# run on Redis 7.0.15 only, unless make test-all. Everything that touches a cluster, a
# keyspace walk, persistence, replication, ACL, DUMP payloads or memory is run everywhere.
SAME_ON_EVERY_SERVER="module_commands module_errors module_schemes module_soak module_limits
  keyslot_live cache_twemproxy compat_real bench_program tool_members docs layout"
# Binaries that measure how long the server takes: never beside other tests.
ALONE="module_limits bench_program"
# The longest binaries (cluster rebalances), started first when the last run's times are
# unknown (a fresh clone), so that the pool does not end on one of them.
LONG="bench_cluster module_cluster slots_redis_cli bench_cache tool_predict tool_apply tool_limits tool_relief
  tool_relief_cache properties"

phases=()
phase() { phases+=("$(printf '%-52s %6s s%s' "$1" "$2" "${3:-}")"); }
now() { date +%s; }
started_all=$(now)

# 1. The other servers (downloads).
t=$(now)
./scripts/servers.sh
phase "fetch the other servers" $(($(now) - t))

# 2. One compilation: every test binary and the benches, as "package dir<TAB>binary<TAB>name
# <TAB>local or live" from cargo's JSON messages. Local binaries (the engine's tests and the
# unit tests of the module's and the engine's libraries, all in-process) run on the first
# server only. The module (target/debug/libringslot.so, which the live tests load) is built by
# the same invocation: its cdylib, named in target/test-module.path, is copied there.
t=$(now)
# A fresh target/ gains nothing from incremental compilation's files (187 s instead of 210 s for
# this compilation without them, on a 2-core machine); later runs keep it.
[ -d "$root/target/debug" ] || export CARGO_INCREMENTAL=0
list="$root/target/test-binaries.tsv"
module_path="$root/target/test-module.path"
mkdir -p target
rm -f "$module_path"
"$cargo" test --workspace --lib --bins --tests --benches --no-run \
  --message-format=json-render-diagnostics |
  MODULE_PATH="$module_path" python3 -c '
import json, os, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "ringslot" \
            and "cdylib" in m["target"]["kind"] and not m["profile"]["test"]:
        for f in m["filenames"]:
            if f.endswith(".so"):
                with open(os.environ["MODULE_PATH"], "w") as out:
                    out.write(f)
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m.get("profile", {}).get("test"):
        continue
    target = m["target"]
    if "bench" in target["kind"]:
        continue  # compiled, not run
    package = os.path.dirname(m["manifest_path"])
    name = target["name"]
    # The module crate is a cdylib and an rlib: its kind lists both.
    library = any(k in ("lib", "rlib") for k in target["kind"])
    local = os.path.basename(package) == "engine" or (library and name == "ringslot")
    kind = "lib" if library else "bin"
    label = name if target["kind"] == ["test"] else "unittests-" + kind + "-" + name
    print("\t".join([package, m["executable"], label, "local" if local else "live"]))
' >"$list"
# Each binary is known by its name alone (its logs, its times, the lists above): two test
# targets of one name in two crates would mix their logs. Tests are named for their crate
# (tool_*, bench_*, module_* ...) so that they never do.
dups=$(cut -f3 "$list" | sort | uniq -d)
if [ -n "$dups" ]; then
  echo "make test: test binaries of the same name in two crates: $dups (rename one)" >&2
  exit 1
fi
# The workspace's build unifies the dependencies' features otherwise than `cargo build --lib`
# does, which would compile the module and the engine again (22 s): the module is the one this
# compilation made, built by `cargo build --lib` only where it made none.
if [ -s "$module_path" ]; then
  cp "$(cat "$module_path")" target/debug/libringslot.so.new
  mv target/debug/libringslot.so.new target/debug/libringslot.so
else
  "$cargo" build --lib
fi
phase "build (one compilation)" $(($(now) - t))

# The servers the tests start keep their files (nodes.conf, RDB, AOF) in memory when the machine
# has /dev/shm: a cluster node rewrites and fsyncs nodes.conf at every CLUSTER SETSLOT, which
# on a disk shared by several tests made Valkey's rebalances 1.4 times slower (52 s against
# 75 s for slots_redis_cli alone). Removed at the end, whatever happens.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  TMPDIR="$(mktemp -d /dev/shm/ringslot-test.XXXXXX)"
  export TMPDIR
  trap 'rm -rf "$TMPDIR"' EXIT
fi

# The servers: name, binary.
servers=("redis-7" "${RINGSLOT_SERVER:-redis-server}")
[ "${RINGSLOT_VALKEY:-}" = skip ] || servers+=("valkey-9" "$root/.deps/valkey-9.1.2/valkey-server")
[ "${RINGSLOT_REDIS8:-}" = skip ] || servers+=("redis-8" "$root/.deps/redis-8.2.3/redis-server")

in_list() { case " $(echo $2) " in *" $1 "*) return 0 ;; esac; return 1; }

# The jobs: "seconds<TAB>server<TAB>binary path<TAB>label<TAB>package dir", longest first by
# the last run's times (a binary not timed yet counts as long).
times="$root/target/test-times.tsv"
touch "$times"
queue=() alone=()
for ((s = 0; s < ${#servers[@]}; s += 2)); do
  name="${servers[$s]}"
  while IFS=$'\t' read -r dir exe label kind; do
    if [ "$s" -gt 0 ]; then
      [ "$kind" = local ] && continue
      [ -z "$all" ] && in_list "$label" "$SAME_ON_EVERY_SERVER" && continue
    fi
    last=$(awk -F'\t' -v n="$name" -v l="$label" '$1 == n && $2 == l { print $3 }' "$times")
    if [ -z "$last" ]; then
      if in_list "$label" "$LONG"; then last=999; else last=1; fi
    fi
    job="$last"$'\t'"$name"$'\t'"$exe"$'\t'"$label"$'\t'"$dir"
    if in_list "$label" "$ALONE"; then alone+=("$job"); else queue+=("$job"); fi
  done <"$list"
done
if [ ${#queue[@]} -gt 0 ]; then
  mapfile -t queue < <(printf '%s\n' "${queue[@]}" | sort -t$'\t' -k1,1 -g -r)
fi

binary_of() { for ((s = 0; s < ${#servers[@]}; s += 2)); do
  [ "${servers[$s]}" = "$1" ] && echo "${servers[$((s + 1))]}"; done; }

rm -rf "$root/target/test-logs" "$root"/target/test-*.log
results="$root/target/test-logs/results.tsv"
mkdir -p "$root/target/test-logs"
: >"$results"

# run_job JOB: runs one binary on its server; appends "server label status seconds counts" to
# the results and prints one line.
run_job() {
  local _ name exe label dir
  IFS=$'\t' read -r _ name exe label dir <<<"$1"
  local log="$root/target/test-logs/$name/$label.log" start status=ok
  mkdir -p "$(dirname "$log")"
  start=$(now)
  # The CPU seconds of the binary and of what it waited for (its servers, redis-cli).
  local TIMEFORMAT='%U %S'
  { time (cd "$dir" && RINGSLOT_SERVER="$(binary_of "$name")" "$exe" </dev/null >"$log" 2>&1); } \
    2>"$log.cpu" || status=FAILED
  local took=$(($(now) - start)) counted cpu
  counted=$(counts "$log")
  cpu=$(awk '{ printf "%.0f", $1 + $2 }' "$log.cpu" 2>/dev/null || echo 0)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$label" "$status" "$took" "$counted" "$cpu" >>"$results"
  printf '%-6s %-9s %-36s %5ss %5ss CPU  %s\n' "$status" "$name" "$label" "$took" "$cpu" "$counted"
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

# 3. The pool, then the binaries that run alone.
t=$(now)
running=0
for job in "${queue[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_job "$job" &
  running=$((running + 1))
done
wait || true
phase "tests, $jobs at a time" $(($(now) - t))
t=$(now)
for job in "${alone[@]}"; do run_job "$job"; done
phase "tests that run alone ($(echo $ALONE))" $(($(now) - t))

# Each server's log, in the order of the binaries; the times for the next run's order.
status=0
for ((s = 0; s < ${#servers[@]}; s += 2)); do
  name="${servers[$s]}"
  out="$root/target/test-$name.log"
  echo "== make test: on $("$(binary_of "$name")" --version | cut -d' ' -f1-3)" >"$out"
  while IFS=$'\t' read -r _ _ label _; do
    f="$root/target/test-logs/$name/$label.log"
    [ -f "$f" ] && { echo "     Running $label"; cat "$f"; } >>"$out"
  done <"$list"
  secs=$(awk -F'\t' -v n="$name" '$1 == n { s += $4 } END { print s + 0 }' "$results")
  cpu=$(awk -F'\t' -v n="$name" '$1 == n { c += $6 } END { print c + 0 }' "$results")
  phase "  $name: $(counts "$out"), the binaries' time" "$secs" " ($cpu s CPU)"
done
awk -F'\t' '{ print $1 "\t" $2 "\t" $4 }' "$results" >"$times"

if grep -q $'\tFAILED\t' "$results"; then
  status=1
  echo
  echo "== make test: the failures"
  while IFS=$'\t' read -r name label st _; do
    [ "$st" = FAILED ] || continue
    echo "---- $label on $name (target/test-logs/$name/$label.log)"
    grep -E -B 2 -A 30 'panicked|FAILED|error' "$root/target/test-logs/$name/$label.log" | head -120 || true
  done <"$results"
fi

phase "total" $(($(now) - started_all))
echo
echo "== make test: time of each phase"
printf '%s\n' "${phases[@]}"
echo "total: $(counts "$root"/target/test-*.log)"
exit $status
