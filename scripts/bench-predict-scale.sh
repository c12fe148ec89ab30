#!/usr/bin/env bash
# make bench-predict-scale: `ringslot predict --rebalance --by bytes` at SIZES keys (1M, 3M and
# 10M by default), with its default rate and sampling, on a throw-away cluster of 3 masters
# and one empty master added (ports 30501-30504, cluster buses 10000 below), made again for
# each size: keys of 16 B to 1 KiB and HOT keys of 4 KiB in one hash tag
# (scripts/bench_apply_data.py). For each size: the prediction's time, the plan's peak-to-mean
# by bytes as predicted (each master's bytes after with their sampling error), then the plan
# applied (`ringslot apply`) and the truth: every master's DUMP bytes after, every key sized
# (APPLY=0: the prediction alone). The CPU the prediction took in each process, and what that
# makes it with a core per master.
# 10M keys take about 7 GB of memory in the servers and 6 GB of disk for the load files.
# Every server is stopped at the end, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES="${SIZES:-1000000 3000000 10000000}"
HOT="${HOT:-20000}"
SERVER="${REDIS_SERVER:-redis-server}"
TOOL="${TOOL:-target/release/ringslot}"
base=3050
work="$(mktemp -d)"
pids=()
stop() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}
cleanup() {
  stop
  rm -rf "$work"
}
trap cleanup EXIT
t() { date +%s.%N; }
since() { python3 -c "print(f'{$(t) - $1:.1f}')"; }
# truth: each master's DUMP bytes now, every key sized (a plan by bytes with a tolerance of
# 100% moves nothing: its bytes after are the bytes now).
truth() {
  "$TOOL" predict --url "redis://127.0.0.1:${base}1" --rebalance --by bytes --tolerance 100 \
    --max-keys-per-sec 0 --bytes-sample all --json 2>/dev/null | python3 -c '
import json, sys
c = json.load(sys.stdin)["prediction"]["by_weight"]
b = c["plans"][1]["bytes_after"]
mean = sum(b) / len(b)
print("  truth after the apply, every key sized: " + ", ".join(
    f"{m} {x / 2**20:.1f} MiB ({x / mean:.3f})" for m, x in zip(c["masters"], b))
    + f"; peak-to-mean {max(b) / mean:.3f}")'
}
# cpu: each master's used_cpu_sys + used_cpu_user (INFO cpu), seconds, on one line.
cpu() {
  for i in 1 2 3; do
    redis-cli -p "${base}$i" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {s += $2}
      END {printf "%s ", s}'
  done
}
echo "bench-predict-scale: $("$SERVER" --version | cut -d' ' -f1-3), $(nproc) cores"
for keys in $SIZES; do
  for i in 1 2 3 4; do
    port="${base}$i"
    if redis-cli -p "$port" ping >/dev/null 2>&1; then
      echo "bench-predict-scale: port $port is in use" >&2; exit 1
    fi
    rm -rf "${work:?}/$port"
    mkdir -p "$work/$port"
    "$SERVER" --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
      --cluster-node-timeout 15000 --cluster-port "$((port - 10000))" \
      --cluster-config-file "$work/$port/nodes.conf" --dir "$work/$port" --save "" \
      --appendonly no --daemonize no --logfile "$work/$port/log" &
    pids+=($!)
  done
  for i in 1 2 3 4; do
    for _ in $(seq 100); do redis-cli -p "${base}$i" ping >/dev/null 2>&1 && break; sleep 0.1; done
  done
  s=$(t)
  python3 scripts/bench_apply_data.py "$keys" "$HOT" 7 "$work"
  redis-cli --cluster create "127.0.0.1:${base}1" "127.0.0.1:${base}2" "127.0.0.1:${base}3" \
    --cluster-replicas 0 --cluster-yes >/dev/null
  for _ in $(seq 300); do
    ok=1
    for i in 1 2 3; do
      redis-cli -p "${base}$i" cluster info | grep -q cluster_state:ok || ok=0
    done
    [ "$ok" = 1 ] && break; sleep 0.2
  done
  for i in 0 1 2; do
    redis-cli -p "${base}$((i + 1))" --pipe <"$work/node$i.resp" >/dev/null &
  done
  wait_pipes=$(jobs -p | grep -v -F -x -f <(printf '%s\n' "${pids[@]}") || true)
  for p in $wait_pipes; do wait "$p"; done
  rm -f "$work"/node*.resp
  # add-node refuses while the nodes do not agree on the configuration yet: tried again.
  for try in $(seq 50); do
    redis-cli --cluster add-node "127.0.0.1:${base}4" "127.0.0.1:${base}1" >"$work/add.log" \
      2>&1 && break
    [ "$try" = 50 ] && { cat "$work/add.log" >&2; exit 1; }
    sleep 0.2
  done
  for _ in $(seq 600); do
    ok=1
    for i in 1 2 3 4; do
      [ "$(redis-cli -p "${base}$i" cluster nodes | grep -vc handshake)" = 4 ] || ok=0
      redis-cli -p "${base}$i" cluster info | grep -q cluster_state:ok || ok=0
    done
    [ "$ok" = 1 ] && break; sleep 0.2
  done
  used=$(for i in 1 2 3; do redis-cli -p "${base}$i" info memory | tr -d '\r' \
    | awk -F: '/^used_memory:/ {print $2}'; done | awk '{s += $1} END {printf "%.1f", s / 2^30}')
  echo "$keys keys + $HOT hot keys: loaded in $(since "$s") s, ${used} GiB used_memory"
  before=$(cpu)
  s=$(t)
  /usr/bin/time -f "%U %S" -o "$work/time" "$TOOL" predict --url "redis://127.0.0.1:${base}1" \
    --rebalance --by bytes --json >"$work/plan.json" 2>"$work/predict.log"
  took=$(since "$s")
  echo "  ringslot predict --rebalance --by bytes (default rate and sampling): $took s"
  # The CPU each process spent, and the model for a core per master and the tool on a host
  # of its own with as many cores as masters: no less than the busiest master's CPU, the
  # tool's over 3 cores, or the SCAN at the default rate (200000 keys a second a master).
  python3 - "$before" "$(cpu)" "$(tail -1 "$work/time")" "$took" "$keys" <<'PY'
import sys
before, after = [float(x) for x in sys.argv[1].split()], [float(x) for x in sys.argv[2].split()]
tool = sum(float(x) for x in sys.argv[3].split())
took, keys = float(sys.argv[4]), int(sys.argv[5])
masters = [a - b for a, b in zip(after, before)]
scan = keys / 3 / 200000
model = max(max(masters), tool / 3, scan)
print(f"  CPU: the masters {', '.join(f'{m:.1f}' for m in masters)} s, the tool {tool:.1f} s "
      f"({(sum(masters) + tool) / took:.2f} cores busy); a core per master and 3 for the tool: "
      f"~{model:.1f} s (the SCAN at the default rate alone: {scan:.1f} s)")
PY
  python3 - "$work/plan.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["prediction"]["by_weight"]
p = c["plans"][-1]
print(f"  the plan: {p['slots_moved']} slots, {p['bytes_moved'] / 2**20:.1f} MiB; predicted "
      f"peak-to-mean by bytes {p['peak_to_mean_bytes']:.3f}; its masters after: " + ", ".join(
    f"{m} {b / 2**20:.1f} +- {e / 2**20:.1f} MiB"
    for m, b, e in zip(c["masters"], p["bytes_after"],
                       p.get("bytes_after_error", [0] * len(p["bytes_after"])))))
PY
  if [ "${APPLY:-1}" = 0 ]; then
    stop
    continue
  fi
  s=$(t)
  "$TOOL" apply "$work/plan.json" --url "redis://127.0.0.1:${base}1" --yes 2>"$work/apply.log" \
    || { tail -5 "$work/apply.log" >&2; exit 1; }
  echo "  ringslot apply: $(since "$s") s"
  truth
  stop
done
