#!/usr/bin/env bash
# make bench-status: how long `ringslot status` takes as the keyspace grows, beside `redis-cli
# --cluster check`. One throw-away cluster of 3 masters (ports 30501-30503, cluster buses
# 10000 below), filled slot by slot with `DEBUG POPULATE` (each slot's keys under a hash tag
# of its own, values of SIZE bytes, 100 by default) to each count of SIZES (1000000 and
# 10000000 by default), and at each size `ringslot status` (default sample, 8 keys a slot)
# and `redis-cli --cluster check` are run RUNS times (3) side by side; prints the best and the
# median of each, the masters' used_memory, and the host's cores. REDIS_SERVER picks the
# server (Valkey 9 and Redis 8.2 answer the key counts with one CLUSTER SLOT-STATS; Redis 7.0
# with a COUNTKEYSINSLOT a slot). Every server is stopped at the end, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES="${SIZES:-1000000 10000000}"
SIZE="${SIZE:-100}"
RUNS="${RUNS:-3}"
SERVER="${REDIS_SERVER:-redis-server}"
TOOL="${TOOL:-target/release/ringslot}"
ports=(30501 30502 30503)
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "bench-status: failed at line $LINENO" >&2' ERR
[ -x "$TOOL" ] || cargo build --release -q -p ringslot-tool --bin ringslot
for port in "${ports[@]}"; do
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    echo "bench-status: port $port is in use" >&2; exit 1
  fi
  mkdir -p "$work/$port"
  "$SERVER" --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
    --cluster-port "$((port - 10000))" --cluster-config-file "$work/$port/nodes.conf" \
    --dir "$work/$port" --save "" --appendonly no --enable-debug-command yes \
    --daemonize no --logfile "$work/$port/log" &
  pids+=($!)
done
for port in "${ports[@]}"; do
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create 127.0.0.1:30501 127.0.0.1:30502 127.0.0.1:30503 \
  --cluster-replicas 0 --cluster-yes >/dev/null
for _ in $(seq 300); do
  ok=1
  for port in "${ports[@]}"; do
    [ "$(redis-cli -p "$port" cluster nodes | grep -vc handshake)" = 3 ] || ok=0
    redis-cli -p "$port" cluster info | grep -q cluster_state:ok || ok=0
  done
  [ "$ok" = 1 ] && break; sleep 0.2
done
echo "bench-status: $("$SERVER" --version | cut -d' ' -f1-3), 3 masters, values of $SIZE B," \
  "$(nproc) cores"
# populate KEYS: DEBUG POPULATE <KEYS/16384, the remainder spread> "{tag of slot}" SIZE on
# each slot's owner (a key count below what a slot holds adds the missing ones only).
populate() {
  python3 - "$1" "$SIZE" "$work" <<'PY'
import subprocess, sys
keys, size, work = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc
tags, i = {}, 0
while len(tags) < 16384:
    t = f"s{i}"
    tags.setdefault(crc16(t.encode()) % 16384, t)
    i += 1
owner = {}
for line in subprocess.check_output(["redis-cli", "-p", "30501", "cluster", "nodes"]).decode().splitlines():
    f = line.split()
    port = f[1].split("@")[0].split(":")[1]
    for r in f[8:]:
        a, _, b = r.partition("-")
        for s in range(int(a), int(b or a) + 1):
            owner[s] = port
per, extra = divmod(keys, 16384)
out = {}
for s in range(16384):
    n = per + (1 if s < extra else 0)
    args = ["DEBUG", "POPULATE", str(n), "{" + tags[s] + "}", size]
    cmd = f"*{len(args)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
    out.setdefault(owner[s], []).append(cmd)
for port, cmds in out.items():
    with open(f"{work}/populate-{port}.resp", "w") as fh:
        fh.write("".join(cmds))
PY
  for port in "${ports[@]}"; do
    redis-cli -p "$port" --pipe <"$work/populate-$port.resp" >/dev/null
  done
}
# timed NAME CMD...: runs CMD RUNS times; prints NAME, the best and the median seconds.
timed() {
  local name=$1; shift
  local times=()
  for _ in $(seq "$RUNS"); do
    local start end
    start=$(date +%s.%N)
    "$@" >"$work/out" 2>&1 || { echo "bench-status: $name failed:" >&2; cat "$work/out" >&2; exit 1; }
    end=$(date +%s.%N)
    times+=("$(python3 -c "print(f'{$end - $start:.3f}')")")
  done
  python3 -c "
import statistics, sys
t = sorted(map(float, sys.argv[2:]))
print(f'| {sys.argv[1]} | {t[0]:.2f} | {statistics.median(t):.2f} |', end='')
" "$name" "${times[@]}"
}
echo
echo "| keys | used_memory (MiB, all masters) | command | best (s) | median (s) |"
echo "|---:|---:|---|---:|---:|"
for keys in $SIZES; do
  populate "$keys"
  total=0
  for port in "${ports[@]}"; do
    total=$((total + $(redis-cli -p "$port" dbsize)))
  done
  used=$(for port in "${ports[@]}"; do redis-cli -p "$port" info memory \
    | tr -d '\r' | grep '^used_memory:' | cut -d: -f2; done | python3 -c \
    "import sys; print(f'{sum(map(int, sys.stdin)) / 1048576:.0f}')")
  printf '| %s | %s ' "$total" "$used"
  timed "ringslot status" "$TOOL" status --url redis://127.0.0.1:30501; echo
  printf '| %s | %s ' "$total" "$used"
  timed "redis-cli --cluster check" redis-cli --cluster check 127.0.0.1:30501; echo
done
echo
echo "The last status's verdict: $("$TOOL" status --url redis://127.0.0.1:30501 --json \
  | python3 -c 'import json, sys; s = json.load(sys.stdin); print(s["verdict"], "(keys sized:",
  s["keys_sized"], ")")')"
