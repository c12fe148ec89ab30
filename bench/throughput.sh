#!/usr/bin/env bash
# Throughput and memory of the RING.* read commands against plain GET and PING, on a
# temporary redis-server with the release module (issue 5).
#
# Measures with redis-benchmark (-c 50, with and without -P 16), interleaving the commands
# round after round and taking each one's median; then MEMORY USAGE of a 1000-node ring and the
# wall time of DEBUG RELOAD with 100 such rings. Prints a Markdown report and writes it to
# bench/out/throughput.md.
#
# Usage: bench/throughput.sh            (make bench-throughput builds the module first)
# Knobs (environment): MODULE, ROUNDS (5), CLIENTS (50), PIPELINE (16), N_SINGLE (150000),
# N_PIPELINED (1000000), N_MGET (30000), N_MGET_PIPELINED (60000), RELOADS (3), OUT,
# PIN (1: redis-server on CPU 0 and redis-benchmark on CPU 1 when taskset and 2+ CPUs exist).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODULE=${MODULE:-$ROOT/target/release/libringslot.so}
ROUNDS=${ROUNDS:-5}
CLIENTS=${CLIENTS:-50}
PIPELINE=${PIPELINE:-16}
N_SINGLE=${N_SINGLE:-150000}
N_PIPELINED=${N_PIPELINED:-1000000}
N_MGET=${N_MGET:-30000}
N_MGET_PIPELINED=${N_MGET_PIPELINED:-60000}
RELOADS=${RELOADS:-3}
PIN=${PIN:-1}
OUT=${OUT:-$ROOT/bench/out/throughput.md}
NODES=1000
RINGS=100
MGET_MEMBERS=100
KEYSPACE=100000
SLOT_TABLE_BYTES=$((16384 * 4))

for tool in redis-server redis-cli redis-benchmark awk; do
  command -v "$tool" >/dev/null || { echo "throughput: $tool not found (make deps)" >&2; exit 1; }
done
[[ -f $MODULE ]] || { echo "throughput: $MODULE missing (make release)" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ringslot-throughput.XXXXXX")
SERVER_PID=""
PORT=""
# The module is copied so that a rebuild during the run cannot change what is measured.
cp "$MODULE" "$WORK/libringslot.so"
SERVER_CPU=()
CLIENT_CPU=()
if [[ $PIN == 1 ]] && command -v taskset >/dev/null && (($(nproc) >= 2)); then
  SERVER_CPU=(taskset -c 0)
  CLIENT_CPU=(taskset -c 1)
fi

cleanup() {
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
    for _ in $(seq 50); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free loopback port, never 6379: the kernel's pick when python3 is there, else a probe.
free_port() {
  local p
  if command -v python3 >/dev/null; then
    p=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    if [[ $p != 6379 ]] && ! redis-cli -p "$p" ping >/dev/null 2>&1; then
      echo "$p"
      return
    fi
  fi
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 20000))
    if ! redis-cli -p "$p" ping >/dev/null 2>&1; then
      echo "$p"
      return
    fi
  done
  echo "throughput: no free port found" >&2
  return 1
}

cli() { redis-cli -p "$PORT" "$@"; }

# Nanoseconds since the epoch.
now_ns() { date +%s%N; }

# Median of the numbers given as arguments.
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Milliseconds between two now_ns readings, to 0.1 ms.
elapsed_ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }

PORT=$(free_port)
"${SERVER_CPU[@]}" redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --enable-debug-command yes --dir "$WORK" --dbfilename dump.rdb --logfile "$WORK/redis.log" \
  --daemonize no --loadmodule "$WORK/libringslot.so" &
SERVER_PID=$!
for _ in $(seq 100); do
  cli ping >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "throughput: redis-server died:" >&2; cat "$WORK/redis.log" >&2; exit 1; }
  sleep 0.1
done
cli ping >/dev/null || { echo "throughput: redis-server did not answer on $PORT" >&2; exit 1; }

echo "throughput: redis-server on 127.0.0.1:$PORT, building the ring ..." >&2
nodes=()
for ((i = 0; i < NODES; i++)); do
  nodes+=("10.0.$((i / 250)).$((i % 250 + 1)):6379")
done
[[ $(cli RING.ADD ring "${nodes[@]}") == "$NODES" ]] || { echo "throughput: RING.ADD failed" >&2; exit 1; }
cli SET plain value >/dev/null
[[ $(cli RING.ADD one 10.0.0.1:6379) == 1 ]] || { echo "throughput: RING.ADD failed" >&2; exit 1; }

# RING.INFO under RESP2: a flat array of field/value pairs, one per line from redis-cli.
info_field() { cli RING.INFO "$1" | awk -v f="$2" 'NR % 2 == 1 && $0 == f { getline; print; exit }'; }
POINTS=$(info_field ring points)
VNODES=$(info_field ring vnodes)

mget_args=(RING.MGET ring)
for ((i = 0; i < MGET_MEMBERS; i++)); do mget_args+=("member:__rand_int__"); done

# RING.GET-missing (no such key) and RING.GET-one (a one-node ring, 160 points, which stays in
# the CPU cache) split what a RING.GET costs: the module call, then the member's hash and the
# lookup, then the cache misses of a big ring.
NAMES=(PING GET RING.GET-missing RING.GET-one RING.GET RING.SLOT RING.MGET)
declare -A CMD=(
  [PING]="PING"
  [GET]="GET plain"
  [RING.GET-missing]="RING.GET missing member:__rand_int__"
  [RING.GET-one]="RING.GET one member:__rand_int__"
  [RING.GET]="RING.GET ring member:__rand_int__"
  [RING.SLOT]="RING.SLOT ring member:__rand_int__"
  [RING.MGET]="${mget_args[*]}"
)
declare -A RESULTS=() CPU=()

# Every command must answer without an error before it is timed (redis-benchmark would count
# error replies as requests).
for name in "${NAMES[@]}"; do
  read -r -a words <<<"${CMD[$name]//__rand_int__/000000000042}"
  reply=$(cli "${words[@]}" 2>&1 | head -n 1)
  [[ $name == RING.GET-missing && -z $reply ]] && continue # nil: no ring at that key
  if [[ -z $reply || $reply == ERR* || $reply == WRONGTYPE* || $reply == "(error)"* ]]; then
    echo "throughput: $name replied '$reply'" >&2
    exit 1
  fi
done

# Server CPU seconds so far (user + system, from INFO cpu).
server_cpu() { cli INFO cpu | awk -F: '$1 == "used_cpu_user" || $1 == "used_cpu_sys" { s += $2 } END { printf "%.6f", s }'; }

# One redis-benchmark run; prints requests per second and the server's CPU microseconds per
# request.
bench() {
  local name=$1 pipeline=$2 n words
  if [[ $name == RING.MGET ]]; then
    n=$N_MGET
    ((pipeline > 1)) && n=$N_MGET_PIPELINED
  else
    n=$N_SINGLE
    ((pipeline > 1)) && n=$N_PIPELINED
  fi
  read -r -a words <<<"${CMD[$name]}"
  local cpu0 rps cpu1
  cpu0=$(server_cpu)
  rps=$("${CLIENT_CPU[@]}" redis-benchmark -p "$PORT" -c "$CLIENTS" -P "$pipeline" -n "$n" -r "$KEYSPACE" \
    --csv "${words[@]}" | tail -n 1 | awk -F'","' '{ print $2 }')
  cpu1=$(server_cpu)
  echo "$rps $(awk -v a="$cpu0" -v b="$cpu1" -v n="$n" 'BEGIN { printf "%.3f", (b - a) * 1e6 / n }')"
}

# Warm-up: connections, caches, the CPU's clock.
for name in "${NAMES[@]}"; do
  N_SINGLE=20000 N_PIPELINED=100000 N_MGET=2000 N_MGET_PIPELINED=4000 bench "$name" "$PIPELINE" >/dev/null
done

START_BENCH=$(now_ns)
for ((round = 0; round < ROUNDS; round++)); do
  echo "throughput: round $((round + 1))/$ROUNDS ..." >&2
  for pipeline in 1 "$PIPELINE"; do
    # Rotate the order every round so that no command always runs first or last.
    for ((k = 0; k < ${#NAMES[@]}; k++)); do
      name=${NAMES[$(((k + round) % ${#NAMES[@]}))]}
      read -r rps cpu < <(bench "$name" "$pipeline")
      [[ -n $rps ]] || { echo "throughput: no figure for $name -P $pipeline" >&2; exit 1; }
      RESULTS[$name,$pipeline]+="$rps "
      CPU[$name,$pipeline]+="$cpu "
    done
  done
done
BENCH_SECONDS=$(awk -v a="$START_BENCH" -v b="$(now_ns)" 'BEGIN { printf "%.0f", (b - a) / 1e9 }')

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# MED: median req/s; RATIO: median over rounds of (req/s / GET's req/s in the same round);
# MCPU: median server CPU microseconds per request.
declare -A MED=() RATIO=() MCPU=()
for key in "${!RESULTS[@]}"; do
  read -r -a runs <<<"${RESULTS[$key]}"
  read -r -a gets <<<"${RESULTS[GET,${key#*,}]}"
  read -r -a cpus <<<"${CPU[$key]}"
  MED[$key]=$(median "${runs[@]}")
  MCPU[$key]=$(median "${cpus[@]}")
  ratios=()
  for ((r = 0; r < ${#runs[@]}; r++)); do ratios+=("$(awk -v a="${runs[$r]}" -v b="${gets[$r]}" 'BEGIN { print a / b }')"); done
  RATIO[$key]=$(ratio "$(median "${ratios[@]}")" 1)
done
fmt() { awk -v a="$1" 'BEGIN { printf "%.0f", a }'; }

# Memory of one ring.
MEMORY_USAGE=$(cli MEMORY USAGE ring)
MEMORY_BYTES=$(info_field ring memory_bytes)
PER_POINT=$(awk -v m="$MEMORY_USAGE" -v p="$POINTS" 'BEGIN { printf "%.2f", m / p }')
PER_POINT_NO_TABLE=$(awk -v m="$MEMORY_USAGE" -v p="$POINTS" -v t="$SLOT_TABLE_BYTES" 'BEGIN { printf "%.2f", (m - t) / p }')
MEMORY_BUDGET=$((16 * POINTS + SLOT_TABLE_BYTES))

# 100 rings: the first and 99 copies; the allocator's view of one ring from used_memory.
USED_BEFORE=$(cli INFO memory | awk -F: '$1 == "used_memory" { print $2 + 0 }')
for ((r = 2; r <= RINGS; r++)); do
  [[ $(cli COPY ring "ring:$r") == 1 ]] || { echo "throughput: COPY failed" >&2; exit 1; }
done
USED_AFTER=$(cli INFO memory | awk -F: '$1 == "used_memory" { print $2 + 0 }')
ALLOC_PER_RING=$(( (USED_AFTER - USED_BEFORE) / (RINGS - 1) ))
ALLOC_PER_POINT=$(awk -v m="$ALLOC_PER_RING" -v p="$POINTS" 'BEGIN { printf "%.2f", m / p }')
TOTAL_POINTS=$(( POINTS * RINGS ))

probe_before=$(cli RING.MGET ring:$RINGS member:1 member:2 member:3 | tr '\n' ' ')
t0=$(now_ns)
cli SAVE >/dev/null
SAVE_MS=$(elapsed_ms "$t0" "$(now_ns)")
RDB_BYTES=$(stat -c %s "$WORK/dump.rdb")
reload_runs=()
for ((r = 0; r < RELOADS; r++)); do
  t0=$(now_ns)
  [[ $(cli DEBUG RELOAD) == OK ]] || { echo "throughput: DEBUG RELOAD failed" >&2; exit 1; }
  reload_runs+=("$(elapsed_ms "$t0" "$(now_ns)")")
done
RELOAD_MS=$(median "${reload_runs[@]}")
LOAD_MS=$(awk -v a="$RELOAD_MS" -v b="$SAVE_MS" 'BEGIN { printf "%.1f", a - b }')
probe_after=$(cli RING.MGET ring:$RINGS member:1 member:2 member:3 | tr '\n' ' ')
DBSIZE=$(cli DBSIZE)
[[ $probe_before == "$probe_after" && $DBSIZE == $((RINGS + 2)) ]] \
  || { echo "throughput: rings differ after DEBUG RELOAD" >&2; exit 1; }

verdict() { if awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; then echo met; else echo "**missed**"; fi; }
GET_SINGLE_RATIO=${RATIO[RING.GET,1]}
GET_PIPE_RATIO=${RATIO[RING.GET,$PIPELINE]}

report() {
  echo "# ringslot throughput and memory"
  echo
  echo "- redis-server $(redis-server --version | awk '{ print $3 }' | cut -d= -f2), module \`${MODULE#"$ROOT"/}\`," \
    "commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- src/lib.rs src/engine src/module 2>/dev/null || echo ' (module sources modified)')"
  local pinning="not pinned"
  ((${#SERVER_CPU[@]})) && pinning="redis-server pinned to CPU 0, redis-benchmark to CPU 1"
  echo "- $(nproc) CPU(s): $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo); redis-benchmark on the same machine, loopback; $pinning;" \
    "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- ring: $NODES nodes x $VNODES vnodes = $POINTS points (native); members \`member:__rand_int__\` over $KEYSPACE values"
  echo "- redis-benchmark -c $CLIENTS, not pipelined (-n $N_SINGLE; RING.MGET $N_MGET) and -P $PIPELINE" \
    "(-n $N_PIPELINED; RING.MGET $N_MGET_PIPELINED); median of $ROUNDS interleaved rounds ($BENCH_SECONDS s)"
  echo
  echo "## Requests per second"
  echo
  echo "\"vs GET\" is the median over rounds of the ratio to GET in the same round; \"server µs\" is"
  echo "redis-server CPU time (user + system, \`INFO cpu\`) per request: what the server pays for one"
  echo "command whether or not the benchmark client is the bottleneck."
  echo
  echo "| command | not pipelined | vs GET | server µs | -P $PIPELINE | vs GET | server µs |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  for name in "${NAMES[@]}"; do
    local label="\`${CMD[$name]}\`"
    [[ $name == RING.MGET ]] && label="\`RING.MGET ring member:__rand_int__ ...\` ($MGET_MEMBERS members)"
    echo "| $label | $(fmt "${MED[$name,1]}") | ${RATIO[$name,1]} | ${MCPU[$name,1]} |" \
      "$(fmt "${MED[$name,$PIPELINE]}") | ${RATIO[$name,$PIPELINE]} | ${MCPU[$name,$PIPELINE]} |"
  done
  local l1 lp
  l1=$(awk -v a="${MED[RING.MGET,1]}" -v m="$MGET_MEMBERS" 'BEGIN { print a * m }')
  lp=$(awk -v a="${MED[RING.MGET,$PIPELINE]}" -v m="$MGET_MEMBERS" 'BEGIN { print a * m }')
  echo "| RING.MGET lookups/s (members x req/s) | $(fmt "$l1") | $(ratio "$l1" "${MED[GET,1]}") |" \
    "$(awk -v c="${MCPU[RING.MGET,1]}" -v m="$MGET_MEMBERS" 'BEGIN { printf "%.3f", c / m }') |" \
    "$(fmt "$lp") | $(ratio "$lp" "${MED[GET,$PIPELINE]}") |" \
    "$(awk -v c="${MCPU[RING.MGET,$PIPELINE]}" -v m="$MGET_MEMBERS" 'BEGIN { printf "%.3f", c / m }') |"
  echo
  echo "Every run (req/s, in round order):"
  echo
  for name in "${NAMES[@]}"; do
    echo "- $name: not pipelined ${RESULTS[$name,1]% }; -P $PIPELINE ${RESULTS[$name,$PIPELINE]% }"
  done
  echo
  echo "Server CPU per RING.GET over GET (medians): not pipelined" \
    "$(ratio "${MCPU[RING.GET,1]}" "${MCPU[GET,1]}")x, -P $PIPELINE $(ratio "${MCPU[RING.GET,$PIPELINE]}" "${MCPU[GET,$PIPELINE]}")x."
  echo
  local p=$PIPELINE
  diff_ns() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.0f", (a - b) * 1000 }'; }
  echo "Where a pipelined RING.GET's server time goes, over GET's (-P $p, medians, ns per request):"
  echo
  echo "- module call with one more argument, key missing (RING.GET-missing - GET):" \
    "$(diff_ns "${MCPU[RING.GET-missing,$p]}" "${MCPU[GET,$p]}")"
  echo "- member hash, lookup and reply on a ring in cache (RING.GET-one - RING.GET-missing):" \
    "$(diff_ns "${MCPU[RING.GET-one,$p]}" "${MCPU[RING.GET-missing,$p]}")"
  echo "- cache misses of a $POINTS-point ring (RING.GET - RING.GET-one):" \
    "$(diff_ns "${MCPU[RING.GET,$p]}" "${MCPU[RING.GET-one,$p]}")"
  echo
  echo "## Memory"
  echo
  echo "| figure | bytes | per point |"
  echo "|---|---:|---:|"
  echo "| \`MEMORY USAGE ring\` | $MEMORY_USAGE | $PER_POINT |"
  echo "| same, less the 64 KiB slot table | $((MEMORY_USAGE - SLOT_TABLE_BYTES)) | $PER_POINT_NO_TABLE |"
  echo "| \`RING.INFO ring\` memory_bytes | $MEMORY_BYTES | |"
  echo "| used_memory growth per ring (COPY x $((RINGS - 1)), allocator's view) | $ALLOC_PER_RING | $ALLOC_PER_POINT |"
  echo "| budget: 16 x points + 65536 | $MEMORY_BUDGET | |"
  echo
  echo "## DEBUG RELOAD with $RINGS rings ($TOTAL_POINTS points)"
  echo
  echo "- \`SAVE\`: $SAVE_MS ms (RDB $RDB_BYTES bytes)"
  echo "- \`DEBUG RELOAD\` (save + empty + load): median $RELOAD_MS ms over $RELOADS (${reload_runs[*]} ms)"
  echo "- load alone (reload - save), about $LOAD_MS ms, $(awk -v a="$LOAD_MS" -v r="$RINGS" 'BEGIN { printf "%.1f", a / r }') ms per ring"
  echo
  echo "## Targets"
  echo
  echo "| target | figure | verdict |"
  echo "|---|---:|---|"
  echo "| RING.GET >= 0.9 x GET, not pipelined | $GET_SINGLE_RATIO | $(verdict "$GET_SINGLE_RATIO" 0.9) |"
  echo "| RING.GET >= 0.9 x GET, -P $PIPELINE | $GET_PIPE_RATIO | $(verdict "$GET_PIPE_RATIO" 0.9) |"
  echo "| MEMORY USAGE <= 16 B/point + 64 KiB | $MEMORY_USAGE <= $MEMORY_BUDGET ($PER_POINT_NO_TABLE B/point) | $(verdict "$MEMORY_BUDGET" "$MEMORY_USAGE") |"
  echo "| allocator bytes per ring <= 16 B/point + 64 KiB | $ALLOC_PER_RING <= $MEMORY_BUDGET | $(verdict "$MEMORY_BUDGET" "$ALLOC_PER_RING") |"
}

mkdir -p "$(dirname "$OUT")"
report >"$WORK/report.md"
cp "$WORK/report.md" "$OUT"
cat "$OUT"
echo "throughput: written to ${OUT#"$ROOT"/}" >&2
