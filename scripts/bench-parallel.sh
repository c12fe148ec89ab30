#!/usr/bin/env bash
# make bench-parallel: 3 masters to 6, the same slots moved three ways on three identical
# throw-away clusters: `ringslot apply` one move at a time (A, ports 30401-30406),
# `ringslot apply --parallel N` (B, 30411-30416; PARALLEL=N, 3 by default) and `redis-cli
# --cluster rebalance --cluster-use-empty-masters` (C, 30421-30426); cluster buses 10000
# below. Each starts with 3 masters holding KEYS keys of 16 B to 1 KiB and HOT keys of 4 KiB in
# one hash tag (scripts/bench_apply_data.py), and 3 empty masters added. The plan applied is
# redis-cli's own (`ringslot predict --rebalance --by slots`, BY=bytes for the plan by bytes),
# so that the three movers move the same slots. Prints each run's time, slots a second and MB
# a second (the DUMP bytes the plan lists), the PING latency a client sees during it
# (scripts/bench_latency_client.py, RATE a second to each master, 200 by default) against its
# idle figures, and the host's cores. ATOMIC=1 (a server with atomic slot migration:
# REDIS_SERVER=.deps/valkey-9.1.2/valkey-server) makes A `ringslot apply --atomic` (one
# CLUSTER MIGRATESLOTS a source and target pair of redis-cli's plan, one after another, polled
# every 100 ms: the commands valkey-cli's --cluster-use-atomic-slot-migration sends) and B
# `--atomic --parallel N`; C stays redis-cli, key by key. PACE=MS paces B with `--max-latency
# MS` (PACE=auto: twice the client's idle p99 there, its worst master). REPLICAS=1 gives each
# master a replica (ports 50 above its master's), added once every master is, as production
# runs; the CPU lines then count the replicas' too. NETNS=1 (set by scripts/bench-netem.sh,
# which makes the namespaces) runs each server in the network namespace rs<port> at
# 10.77.(port/10%100).(port%10), the movers in rsmover and the client in rsclient. Every server
# is stopped at the end, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS="${KEYS:-300000}"
HOT="${HOT:-5000}"
PARALLEL="${PARALLEL:-3}"
atomic=()
[ "${ATOMIC:-0}" = 1 ] && atomic=(--atomic)
RATE="${RATE:-200}"
SERVER="${REDIS_SERVER:-redis-server}"
TOOL="${TOOL:-target/release/ringslot}"
bases=(3040 3041 3042)
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] && echo "bench-parallel: kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
# ports_of BASE: the cluster's ports, its masters' and (REPLICAS=1) their replicas', 50 above.
ports_of() {
  for i in 1 2 3 4 5 6; do echo "${1}$i"; done
  if [ "${REPLICAS:-0}" = 1 ]; then
    for i in 1 2 3 4 5 6; do echo "$((${1}$i + 50))"; done
  fi
}
nodes=6
[ "${REPLICAS:-0}" = 1 ] && nodes=12
# h PORT: the address of the server on PORT; at PORT: its host:port; cli PORT ARGS: redis-cli
# to it. mover and client: the commands' prefixes that run the movers and the client in their
# namespaces (NETNS=1).
h() {
  if [ -n "${NETNS:-}" ]; then echo "10.77.$(($1 / 10 % 100)).$(($1 % 10))"; else echo 127.0.0.1; fi
}
at() { echo "$(h "$1"):$1"; }
cli() { local port=$1; shift; redis-cli -h "$(h "$port")" -p "$port" "$@"; }
mover=()
client=()
if [ -n "${NETNS:-}" ]; then
  mover=(ip netns exec rsmover)
  client=(ip netns exec rsclient)
fi
for base in "${bases[@]}"; do
  for port in $(ports_of "$base"); do
    if cli "$port" ping >/dev/null 2>&1; then
      echo "bench-parallel: port $port is in use" >&2; exit 1
    fi
    mkdir -p "$work/$port"
    # In a namespace of its own, a server bound to its private address serves the others
    # without a password (protected mode would refuse them).
    ns=()
    [ -n "${NETNS:-}" ] && ns=(ip netns exec "rs$port")
    ${ns[@]+"${ns[@]}"} "$SERVER" --port "$port" --bind "$(h "$port")" --cluster-enabled yes \
      --protected-mode "$([ -n "${NETNS:-}" ] && echo no || echo yes)" \
      --cluster-node-timeout 15000 --cluster-port "$((port - 10000))" \
      --cluster-config-file "$work/$port/nodes.conf" --dir "$work/$port" --save "" \
      --appendonly no --daemonize no --logfile "$work/$port/log" &
    pids+=($!)
  done
done
for base in "${bases[@]}"; do
  for port in $(ports_of "$base"); do
    for _ in $(seq 100); do cli "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  done
done
t() { date +%s.%N; }
since() { python3 -c "print(f'{$(t) - $1:.2f}')"; }
echo "bench-parallel: $("$SERVER" --version | cut -d' ' -f1-3), $KEYS keys + $HOT hot keys, \
3 masters to 6, $nodes servers a cluster, $(nproc) cores"
python3 scripts/bench_apply_data.py "$KEYS" "$HOT" 7 "$work"
for base in "${bases[@]}"; do
  redis-cli --cluster create "$(at "${base}1")" "$(at "${base}2")" "$(at "${base}3")" \
    --cluster-replicas 0 --cluster-yes >/dev/null
  for _ in $(seq 300); do
    ok=1
    for i in 1 2 3; do
      cli "${base}$i" cluster info | grep -q cluster_state:ok || ok=0
    done
    [ "$ok" = 1 ] && break; sleep 0.2
  done
  for i in 0 1 2; do
    cli "${base}$((i + 1))" --pipe <"$work/node$i.resp" >/dev/null
  done
  # add-node refuses while the nodes do not agree on the configuration yet: tried again.
  for i in 4 5 6; do
    for try in $(seq 50); do
      redis-cli --cluster add-node "$(at "${base}$i")" "$(at "${base}1")" >"$work/add.log" \
        2>&1 && break
      [ "$try" = 50 ] && { cat "$work/add.log" >&2; exit 1; }
      sleep 0.2
    done
  done
  # REPLICAS=1: a replica for each master, added once every node agrees (add-node refuses
  # before).
  if [ "${REPLICAS:-0}" = 1 ]; then
    for i in 1 2 3 4 5 6; do
      for try in $(seq 100); do
        redis-cli --cluster add-node "$(at "$((${base}$i + 50))")" "$(at "${base}1")" \
          --cluster-slave --cluster-master-id "$(cli "${base}$i" cluster myid)" \
          >"$work/add.log" 2>&1 && break
        [ "$try" = 100 ] && { cat "$work/add.log" >&2; exit 1; }
        sleep 0.2
      done
    done
  fi
  # Every node knows every other, and says cluster_state:ok (a master just added waits up to
  # 5 s before it does), and every replica streams, before anything moves.
  for _ in $(seq 900); do
    ok=1
    for port in $(ports_of "$base"); do
      [ "$(cli "$port" cluster nodes | grep -vc handshake)" = "$nodes" ] || ok=0
      cli "$port" cluster info | grep -q cluster_state:ok || ok=0
    done
    if [ "${REPLICAS:-0}" = 1 ]; then
      for i in 1 2 3 4 5 6; do
        cli "$((${base}$i + 50))" info replication | grep -q master_link_status:up \
          || ok=0
      done
    fi
    [ "$ok" = 1 ] && break; sleep 0.2
  done
done
# masters BASE: the six masters at BASE, as host:port.
masters() { for i in 1 2 3 4 5 6; do at "${1}$i"; done; }
# figures LABEL SECONDS SLOTS BYTES: a run's rates.
figures() {
  python3 -c "import sys; s, n, b = float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]); \
print(f'{sys.argv[1]}: {s:.2f} s, {n} slots ({n / s:.0f} a second), {b / 2**20:.1f} MiB by DUMP \
({b / 2**20 / s:.1f} MiB/s)')" "$@"
}
sync
for base in 3040 3041; do
  ${mover[@]+"${mover[@]}"} "$TOOL" predict --url "redis://$(at "${base}1")" --rebalance \
    --by "${BY:-slots}" \
    --max-keys-per-sec 0 --json >"$work/plan-$base.json" 2>/dev/null
done
read -r slots bytes lanes < <(python3 -c 'import json,sys
c = json.load(open(sys.argv[1]))["prediction"]["by_weight"]
print(len(c["moves"]), sum(m["bytes"] for m in c["moves"]), len(c["lanes"]))' "$work/plan-3040.json")
echo "the plan (--by ${BY:-slots}): $slots slots in $lanes lanes"
# cpu BASE: each master's used_cpu_sys + used_cpu_user (INFO cpu), seconds, on one line; then
# (REPLICAS=1) their replicas' in all.
cpu() {
  local port
  for i in 1 2 3 4 5 6; do
    cli "${1}$i" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {s += $2}
      END {printf "%s ", s}'
  done
  if [ "${REPLICAS:-0}" = 1 ]; then
    for i in 1 2 3 4 5 6; do
      port=$((${1}$i + 50))
      cli "$port" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {s += $2}
        END {printf "%s\n", s}'
    done | awk '{s += $1} END {printf "%s", s}'
  fi
}
run() {
  local base=$1 label=$2
  shift 2
  ${client[@]+"${client[@]}"} python3 scripts/bench_latency_client.py "$label idle" "$RATE" 2 \
    $(masters "$base")
  ${client[@]+"${client[@]}"} python3 scripts/bench_latency_client.py \
    "$label during the moves" "$RATE" 3600 $(masters "$base") &
  local c=$!
  pids+=("$c")
  local before
  before=$(cpu "$base")
  s=$(t)
  /usr/bin/time -f "%U %S" -o "$work/time-$base" ${mover[@]+"${mover[@]}"} "$@" \
    >"$work/run-$base.log" 2>&1
  took=$(since "$s")
  kill -TERM "$c" 2>/dev/null || true
  wait "$c" || true
  if [ "$base" = 3042 ] && [ "${BY:-slots}" != slots ]; then
    echo "$label: $took s (its own plan, not the one above: no rates to compare)"
  else
    figures "$label" "$took" "$slots" "$bytes"
  fi
  grep -E "under way at once|paced to keep|PING to .* during the moves|pacing cost" \
    "$work/run-$base.log" | sed 's/^/  /' || true
  # The CPU each process spent: what one core per master would carry.
  python3 - "$before" "$(cpu "$base")" "$(tail -1 "$work/time-$base")" "$took" \
    >"$work/cpu-$base" <<'PY'
import sys
before, after = [float(x) for x in sys.argv[1].split()], [float(x) for x in sys.argv[2].split()]
tool = sum(float(x) for x in sys.argv[3].split())
took = float(sys.argv[4])
moved = [a - b for a, b in zip(after, before)]
masters, replicas = moved[:6], sum(moved[6:])
print(f"{took} {max(masters)} {sum(masters)} {tool} {replicas}")
PY
  read -r _ peak total tool replicas <"$work/cpu-$base"
  python3 -c "import sys; print('  CPU: the busiest master %.1f s, the six %.1f s, the mover \
(tool or redis-cli) %.1f s' % tuple(float(x) for x in sys.argv[1:4]) + ('' if sys.argv[4] == \
'-' else ', their replicas %.1f s' % float(sys.argv[4])))" "$peak" "$total" "$tool" \
    "$([ "${REPLICAS:-0}" = 1 ] && echo "$replicas" || echo -)"
}
run 3040 "A: ringslot apply${atomic[*]:+ --atomic}" "$TOOL" apply "$work/plan-3040.json" \
  --url "redis://$(at 30401)" --yes ${atomic[@]+"${atomic[@]}"}
paced=()
if [ -n "${PACE:-}" ]; then
  if [ "$PACE" = auto ]; then
    # Twice the client's idle p99 on cluster B (its worst master), at least the 1 ms floor.
    idle_line=$(${client[@]+"${client[@]}"} python3 scripts/bench_latency_client.py \
      "B idle, for PACE=auto" "$RATE" 2 $(masters 3041))
    echo "$idle_line"
    PACE=$(python3 -c 'import re,sys; p = [float(x) for x in re.findall(r"p99 ([0-9.]+)", sys.argv[1])]; print("%.1f" % max(1.0, 2 * max(p)))' "$idle_line")
  fi
  paced=(--max-latency "$PACE")
fi
run 3041 "B: ringslot apply${atomic[*]:+ --atomic} --parallel $PARALLEL${PACE:+ --max-latency \
$PACE}" "$TOOL" apply "$work/plan-3041.json" --url "redis://$(at 30411)" --yes \
  --parallel "$PARALLEL" ${atomic[@]+"${atomic[@]}"} ${paced[@]+"${paced[@]}"}
run 3042 "C: redis-cli --cluster rebalance" redis-cli --cluster rebalance "$(at 30421)" \
  --cluster-use-empty-masters
for base in "${bases[@]}"; do
  redis-cli --cluster check "$(at "${base}1")" >"$work/check-$base.log" 2>&1 || true
  echo "  ${base}x: redis-cli --cluster check: $(grep -c '\[OK\]' "$work/check-$base.log") OK, \
$(grep -c -E '\[(WARNING|ERR)\]' "$work/check-$base.log" || true) warnings or errors"
done
# The model for one core per master (and the mover on a host of its own): A's time divided by
# the moves at once (at most the lanes), no less than its busiest master's CPU, nor than the
# mover's CPU over its cores: what B's figure would be where each master has a core of its own.
read -r a_took a_peak _ a_tool _ <"$work/cpu-3040"
python3 -c "import sys; took, peak, tool, k = float(sys.argv[1]), float(sys.argv[2]), \
float(sys.argv[3]), min(int(sys.argv[4]), int(sys.argv[5])); w = max(took / k, peak, tool / k); \
print(f'model, one core per master: {k} moves at once would take ~{w:.1f} s \
({took / w:.1f}x A), from A: {took:.1f} s, busiest master {peak:.1f} s CPU, tool {tool:.1f} s CPU')" \
  "$a_took" "$a_peak" "$a_tool" "$PARALLEL" "$lanes"
