#!/usr/bin/env bash
# make bench-apply: the plan by bytes carried out by `ringslot apply` beside redis-cli's
# rebalance, on two identical throw-away clusters (3 masters + 1 added empty, ports 30101-30104
# and 30201-30204, their cluster buses 10000 below, out of the ephemeral port range): KEYS keys of 16 B to 1 KiB and a hot hash tag of HOT keys of 4 KiB, loaded
# identically into both (scripts/bench_apply_data.py). On cluster A: `ringslot predict
# --rebalance --by bytes --json` (BY=memory or keys for another weight) then `ringslot apply
# --yes` (ATOMIC=1: --atomic, needs
# REDIS_SERVER=valkey-server 9); on cluster B: `redis-cli --cluster rebalance
# --cluster-use-empty-masters`. Prints the time of each step and each master's keys and
# used_memory after, with the peak-to-mean of used_memory (data only: an empty master's
# used_memory is subtracted). REPLICAS=1 gives every master a replica (ports 30105-30108 and
# 30205-30208; the added master's replica added with it), as production runs. PACE=MS adds a
# third identical cluster C (ports 30301-30308) where the same plan by weight is applied with
# `--max-latency MS` (PACE=auto: twice the client's idle p99 there, its worst master).
# SIZE_ALL=1 also times the prediction with every key sized, on cluster B. During each run a
# client sends RATE PINGs a second to each master (scripts/bench_latency_client.py, 200 by
# default) and prints their latency, and before it the same client's idle figures. Every server is stopped at the end, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS="${KEYS:-1000000}"
HOT="${HOT:-20000}"
REPLICAS="${REPLICAS:-0}"
ports=(30101 30102 30103 30104 30201 30202 30203 30204)
[ "$REPLICAS" = 1 ] && ports+=(30105 30106 30107 30108 30205 30206 30207 30208)
bases=(3010 3020)
if [ -n "${PACE:-}" ]; then
  bases+=(3030)
  ports+=(30301 30302 30303 30304)
  [ "$REPLICAS" = 1 ] && ports+=(30305 30306 30307 30308)
fi
RATE="${RATE:-200}"
nodes=4
[ "$REPLICAS" = 1 ] && nodes=8
SERVER="${REDIS_SERVER:-redis-server}"
TOOL="${TOOL:-target/release/ringslot}"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] && echo "bench-apply: kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
for port in "${ports[@]}"; do
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    echo "bench-apply: port $port is in use" >&2; exit 1
  fi
  mkdir -p "$work/$port"
  "$SERVER" --port "$port" --bind 127.0.0.1 --cluster-enabled yes --cluster-node-timeout 15000 \
    --cluster-port "$((port - 10000))" \
    --cluster-config-file "$work/$port/nodes.conf" --dir "$work/$port" --save "" \
    --appendonly no --daemonize no --logfile "$work/$port/log" &
  pids+=($!)
done
for port in "${ports[@]}"; do
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
t() { date +%s.%N; }
since() { python3 -c "print(f'{$(t) - $1:.1f}')"; }
echo "bench-apply: $("$SERVER" --version | cut -d' ' -f1-3), $KEYS keys + $HOT hot keys"
python3 scripts/bench_apply_data.py "$KEYS" "$HOT" 7 "$work"
for base in "${bases[@]}"; do
  if [ "$REPLICAS" = 1 ]; then
    redis-cli --cluster create "127.0.0.1:${base}1" "127.0.0.1:${base}2" "127.0.0.1:${base}3" \
      "127.0.0.1:${base}5" "127.0.0.1:${base}6" "127.0.0.1:${base}7" \
      --cluster-replicas 1 --cluster-yes >/dev/null
  else
    redis-cli --cluster create "127.0.0.1:${base}1" "127.0.0.1:${base}2" "127.0.0.1:${base}3" \
      --cluster-replicas 0 --cluster-yes >/dev/null
  fi
  for _ in $(seq 300); do
    ok=1
    for i in 1 2 3; do
      redis-cli -p "${base}$i" cluster info | grep -q cluster_state:ok || ok=0
    done
    [ "$ok" = 1 ] && break; sleep 0.2
  done
  for i in 0 1 2; do
    redis-cli -p "${base}$((i + 1))" --pipe <"$work/node$i.resp" >/dev/null
  done
  empty=$(redis-cli -p "${base}4" info memory | grep '^used_memory:' | cut -d: -f2 | tr -d '\r')
  redis-cli --cluster add-node "127.0.0.1:${base}4" "127.0.0.1:${base}1" >/dev/null
  if [ "$REPLICAS" = 1 ]; then
    # redis-cli adds a replica only once every node agrees on the configuration.
    for _ in $(seq 300); do
      ok=1
      for i in 1 2 3 4 5 6 7; do
        [ "$(redis-cli -p "${base}$i" cluster nodes | grep -vc handshake)" = 7 ] || ok=0
      done
      [ "$ok" = 1 ] && break; sleep 0.2
    done
    redis-cli --cluster add-node "127.0.0.1:${base}8" "127.0.0.1:${base}1" --cluster-slave \
      --cluster-master-id "$(redis-cli -p "${base}4" cluster myid)" >/dev/null
  fi
  # Every node knows every other before anything moves, and every replica is in sync.
  for _ in $(seq 600); do
    ok=1
    for i in $(seq "$nodes"); do
      [ "$(redis-cli -p "${base}$i" cluster nodes | grep -vc handshake)" = "$nodes" ] || ok=0
    done
    if [ "$REPLICAS" = 1 ]; then
      for i in 5 6 7 8; do
        redis-cli -p "${base}$i" info replication | grep -q 'master_link_status:up' || ok=0
      done
    fi
    [ "$ok" = 1 ] && break; sleep 0.2
  done
done
report() {
  local base=$1
  python3 - "$base" "$empty" <<'PY'
import subprocess, sys
base, empty = sys.argv[1], int(sys.argv[2])
rows = []
for i in range(1, 5):
    port = f"{base}{i}"
    info = subprocess.run(["redis-cli", "-p", port, "info", "memory"], capture_output=True, text=True).stdout
    used = int(next(l.split(":")[1] for l in info.splitlines() if l.startswith("used_memory:")))
    keys = int(subprocess.run(["redis-cli", "-p", port, "dbsize"], capture_output=True, text=True).stdout)
    rows.append((port, keys, used - empty))
mean = sum(r[2] for r in rows) / len(rows)
for port, keys, used in rows:
    print(f"  127.0.0.1:{port}: {keys} keys, {used / 2**20:.1f} MiB of data ({used / mean:.3f} of the mean)")
print(f"  peak-to-mean of used_memory: {max(r[2] for r in rows) / mean:.3f}")
PY
}
# commands BASE SLOTS: the commands every node of a cluster ran since its last CONFIG RESETSTAT
# (INFO commandstats), per slot moved, most frequent first: where a tool's time a slot goes.
resetstat() {
  for i in $(seq "$nodes"); do redis-cli -p "$1$i" config resetstat >/dev/null; done
}
commands() {
  python3 - "$1" "$nodes" "$2" <<'PY'
import subprocess, sys
base, nodes, slots = sys.argv[1], int(sys.argv[2]), max(int(sys.argv[3]), 1)
calls, usec = {}, {}
for i in range(1, nodes + 1):
    info = subprocess.run(["redis-cli", "-p", f"{base}{i}", "info", "commandstats"],
                          capture_output=True, text=True).stdout
    for line in info.splitlines():
        if not line.startswith("cmdstat_"):
            continue
        name, rest = line[len("cmdstat_"):].split(":", 1)
        fields = dict(f.split("=") for f in rest.split(","))
        calls[name] = calls.get(name, 0) + int(fields["calls"])
        usec[name] = usec.get(name, 0) + int(fields["usec"])
rows = sorted(calls.items(), key=lambda kv: -kv[1])
print("  commands a slot (every node, INFO commandstats): " + ", ".join(
    f"{name} {n / slots:.1f} ({usec[name] / slots / 1000:.2f} ms)" for name, n in rows[:12]))
PY
}
# plan BASE LABEL: the plan by weight of the cluster at BASE, in $work/plan-BASE.json.
plan() {
  s=$(t)
  "$TOOL" predict --url "redis://127.0.0.1:${1}1" --rebalance --by "${BY:-bytes}" \
    --max-keys-per-sec 0 --json >"$work/plan-$1.json" 2>"$work/predict-$1.log"
  echo "$2: ringslot predict --by ${BY:-bytes}: $(since "$s") s"
  python3 - "$work/plan-$1.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["prediction"]["by_weight"]
for p in c["plans"]:
    print(f"  plan {p['name']}: {p['slots_moved']} slots, {p['keys_moved']} keys, "
          f"{p['bytes_moved'] / 2**20:.1f} MiB moved; peak-to-mean by bytes after {p['peak_to_mean_bytes']:.3f}")
p = c["plans"][-1]
print("  its masters after, by DUMP bytes: " + ", ".join(
    f"{m} {b / 2**20:.1f} +- {e / 2**20:.1f} MiB"
    for m, b, e in zip(c["masters"], p["bytes_after"], p.get("bytes_after_error", [0] * len(p["bytes_after"])))))
PY
}
# client_start BASE LABEL / client_stop: the latency client on the four masters at BASE,
# its idle figures first (2 s).
client_start() {
  idle_line=$(python3 scripts/bench_latency_client.py "$2 idle" "$RATE" 2 "${1}1" "${1}2" \
    "${1}3" "${1}4")
  echo "$idle_line"
  python3 scripts/bench_latency_client.py "$2 during the moves" "$RATE" 3600 \
    "${1}1" "${1}2" "${1}3" "${1}4" &
  client=$!
  pids+=("$client")
}
client_stop() {
  kill -TERM "$client" 2>/dev/null || true
  wait "$client" || true
}
plan 3010 A
# SIZE_ALL=1: the same prediction on cluster B with every key sized (--bytes-sample all),
# beside A's (which samples past 2 million keys), before B changes.
if [ -n "${SIZE_ALL:-}" ]; then
  s=$(t)
  "$TOOL" predict --url redis://127.0.0.1:30201 --rebalance --by "${BY:-bytes}" \
    --max-keys-per-sec 0 --bytes-sample all --json >"$work/plan-all.json" 2>/dev/null
  echo "B: ringslot predict --by ${BY:-bytes} --bytes-sample all: $(since "$s") s"
fi
atomic=()
[ "${ATOMIC:-}" = 1 ] && atomic=(--atomic)
# The replicas' initial syncs left RDB files to write back: `sync` first, so that neither
# tool's SETSLOTs (each saves and fsyncs nodes.conf) wait behind them. FIRST=redis-cli runs
# redis-cli's rebalance before the apply (to see whether the order favours either).
# run_apply BASE LABEL [ARGS...]: ringslot apply of the cluster's plan, with ARGS.
run_apply() {
  local base=$1 label=$2
  shift 2
  resetstat "$base"
  sync
  client_start "$base" "$label"
  s=$(t)
  "$TOOL" apply "$work/plan-$base.json" --url "redis://127.0.0.1:${base}1" --yes "${atomic[@]}" \
    "$@" 2>"$work/apply-$base.log"
  took=$(since "$s")
  client_stop
  moves=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["prediction"]["by_weight"]["moves"]))' "$work/plan-$base.json")
  echo "$label: ringslot apply ${atomic[*]} $*: $took s, $moves slots, $(python3 -c "print(f'{$took * 1000 / max($moves, 1):.2f}')") ms a slot"
  grep -E "ringslot: (done|PING|pacing)" "$work/apply-$base.log" | sed 's/^/  /'
  commands "$base" "$moves"
  redis-cli --cluster check "127.0.0.1:${base}1" >"$work/check-$base.log" 2>&1 || true
  echo "  redis-cli --cluster check: $(grep -c '\[OK\]' "$work/check-$base.log") OK, \
$(grep -c -E '\[(WARNING|ERR)\]' "$work/check-$base.log" || true) warnings or errors"
  sleep 2
  report "$base"
}
run_redis_cli() {
  resetstat 3020
  sync
  client_start 3020 B
  s=$(t)
  redis-cli --cluster rebalance 127.0.0.1:30201 --cluster-use-empty-masters >/dev/null
  took=$(since "$s")
  client_stop
  redis-cli --cluster check 127.0.0.1:30204 >"$work/check-b.log" 2>&1 || true
  moves=$(grep -m1 '^127.0.0.1:30204' "$work/check-b.log" | sed -E 's/.* ([0-9]+) slots.*/\1/' || true)
  echo "B: redis-cli --cluster rebalance: $took s, $moves slots to the added master, $(python3 -c "print(f'{$took * 1000 / max(${moves:-0}, 1):.2f}')") ms a slot"
  commands 3020 "${moves:-0}"
  sleep 2
  report 3020
}
# truth BASE LABEL: every master's DUMP bytes now, every key sized (a plan by bytes with a
# tolerance of 100% moves nothing: its bytes after are the bytes now).
truth() {
  "$TOOL" predict --url "redis://127.0.0.1:${1}1" --rebalance --by bytes --tolerance 100 \
    --max-keys-per-sec 0 --bytes-sample all --json 2>/dev/null | python3 -c '
import json, sys
c = json.load(sys.stdin)["prediction"]["by_weight"]
p = c["plans"][1]
b = p["bytes_after"]
mean = sum(b) / len(b)
print("  DUMP bytes now, every key sized: " + ", ".join(
    f"{m} {x / 2**20:.1f} MiB ({x / mean:.3f})" for m, x in zip(c["masters"], b))
    + f"; peak-to-mean {max(b) / mean:.3f}")'
  echo "  ($2)"
}
if [ "${FIRST:-}" = redis-cli ]; then
  run_redis_cli
  run_apply 3010 A
else
  run_apply 3010 A
  run_redis_cli
fi
[ -n "${SIZE_ALL:-}" ] && truth 3010 "A after its apply"
if [ -n "${PACE:-}" ]; then
  plan 3030 C
  if [ "$PACE" = auto ]; then
    # Twice the client's idle p99 on cluster C (its worst master), at least the 1 ms floor.
    idle_line=$(python3 scripts/bench_latency_client.py "C idle, for PACE=auto" "$RATE" 2 \
      30301 30302 30303 30304)
    echo "$idle_line"
    PACE=$(python3 -c 'import re,sys; p = [float(x) for x in re.findall(r"p99 ([0-9.]+)", sys.argv[1])]; print("%.1f" % max(1.0, 2 * max(p)))' "$idle_line")
  fi
  run_apply 3030 C --max-latency "$PACE"
fi
