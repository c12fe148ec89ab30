#!/usr/bin/env bash
# make bench-big-keys: the trial of issue 40 at full size, on a throw-away cluster (3 masters,
# a joining master with its replica; ports 30301-30305, their buses 10000 below): KEYS keys of
# 16 B to 1 KiB (scripts/bench_apply_data.py), a hash of FIELDS fields (400000: about 45 MB by
# MEMORY USAGE on Redis 7.0.15) and a string of STRING_MB MiB (48), both under the hash tag
# {big}, so on one master. It measures, from the masters' SLOWLOG at threshold 0 (the tool's
# connections are named `ringslot`):
#   A. `ringslot predict --rebalance --by memory` (read-only): the longest command of the tool
#      on each master, and the big keys' estimates (DUMP bytes, holds of source and target);
#   B. the big keys' real DUMP (its length and its time, from an EVAL of this script's own);
#   C. `ringslot apply` of that plan with the defaults (the big keys' slot stays where it is,
#      past --max-hold): the longest command of the tool on each master;
#   D. `ringslot predict --del <the big keys' master>` and its apply: every slot of that master
#      moves, the big keys too, each in a MIGRATE of its own: the MIGRATE's time on the source
#      and the RESTORE-ASKING's on the target, against the estimates.
# REDIS_SERVER=.../valkey-server or .../redis-server (8.2) for the other servers. Every server is
# stopped at the end, also on failure. Prints a report and writes bench/out/big-keys.md.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS="${KEYS:-150000}"
FIELDS="${FIELDS:-400000}"
STRING_MB="${STRING_MB:-48}"
SERVER="${REDIS_SERVER:-redis-server}"
TOOL="${TOOL:-target/release/ringslot}"
OUT="${OUT:-bench/out}"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] && echo "bench-big-keys: kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
ports=(30301 30302 30303 30304 30305)
for port in "${ports[@]}"; do
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    echo "bench-big-keys: port $port is in use" >&2; exit 1
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
version="$("$SERVER" --version | cut -d' ' -f1-3)"
echo "bench-big-keys: $version, $KEYS keys, a hash of $FIELDS fields, a string of $STRING_MB MiB"
python3 scripts/bench_apply_data.py "$KEYS" 0 7 "$work"
redis-cli --cluster create 127.0.0.1:30301 127.0.0.1:30302 127.0.0.1:30303 \
  --cluster-replicas 0 --cluster-yes >/dev/null
# Waits until the first N nodes say cluster_state:ok and agree on every node, its role, its
# master and its slots (full gossip convergence: the tool refuses to read a cluster otherwise).
converged() {
  local n=$1
  for _ in $(seq 600); do
    if python3 - "${ports[@]:0:$n}" <<'PY'
import subprocess, sys
views = set()
for port in sys.argv[1:]:
    run = lambda *a: subprocess.run(["redis-cli", "-p", port, *a], capture_output=True, text=True).stdout
    if "cluster_state:ok" not in run("cluster", "info"):
        sys.exit(1)
    rows = []
    for line in run("cluster", "nodes").splitlines():
        f = line.split()
        flags = set(f[2].split(",")) - {"myself"}
        if flags & {"handshake", "fail", "fail?", "noaddr"}:
            sys.exit(1)
        rows.append((f[0], "master" in flags, f[3], tuple(f[8:])))
    views.add(tuple(sorted(rows)))
sys.exit(0 if len(views) == 1 and len(next(iter(views))) == len(sys.argv) - 1 else 1)
PY
    then return 0; fi
    sleep 0.2
  done
  echo "bench-big-keys: the cluster did not converge" >&2; exit 1
}
converged 3
for i in 0 1 2; do redis-cli -p "$((30301 + i))" --pipe <"$work/node$i.resp" >/dev/null; done
big_port=$(python3 - <<'PY'
import subprocess
slot = int(subprocess.run(["redis-cli", "-p", "30301", "cluster", "keyslot", "{big}"],
                          capture_output=True, text=True).stdout)
print(30301 if slot <= 5460 else 30302 if slot <= 10922 else 30303)
PY
)
python3 - "$FIELDS" "$STRING_MB" "$work/big.resp" <<'PY'
import os, sys
fields, mb, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def cmd(*a):
    out = b"*%d\r\n" % len(a)
    for x in a:
        out += b"$%d\r\n%s\r\n" % (len(x), x)
    return out
with open(path, "wb") as f:
    for i in range(fields):
        f.write(cmd(b"HSET", b"{big}:hash", b"field:%d" % i, b"value-%d-of-the-big-hash" % i))
    # Random bytes, which DUMP's LZF cannot shrink (a repeated byte would weigh little).
    f.write(cmd(b"SET", b"{big}:string", os.urandom(mb << 20)))
PY
redis-cli -p "$big_port" --pipe <"$work/big.resp" >/dev/null
redis-cli --cluster add-node 127.0.0.1:30304 127.0.0.1:30301 >/dev/null
converged 4
redis-cli --cluster add-node 127.0.0.1:30305 127.0.0.1:30301 --cluster-slave \
  --cluster-master-id "$(redis-cli -p 30304 cluster myid)" >/dev/null
converged 5
masters=(30301 30302 30303 30304)
slowlog_on() {
  for port in "${masters[@]}"; do
    redis-cli -p "$port" config set slowlog-max-len 1000000 >/dev/null
    redis-cli -p "$port" config set slowlog-log-slower-than 0 >/dev/null
    redis-cli -p "$port" slowlog reset >/dev/null
  done
}
# The tool's entries of each master's SLOWLOG, as JSON lines {port, usec, args}.
slowlog_dump() {
  for port in "${masters[@]}"; do
    redis-cli -p "$port" config set slowlog-log-slower-than 10000 >/dev/null
    python3 - "$port" <<'PY'
import json, subprocess, sys
port = sys.argv[1]
out = subprocess.run(["redis-cli", "-p", port, "--json", "slowlog", "get", "1000000"],
                     capture_output=True).stdout.decode("utf-8", errors="replace")
for e in json.loads(out or "[]"):
    if len(e) > 5 and e[5] == "ringslot":
        print(json.dumps({"port": port, "usec": e[2], "args": e[3]}))
PY
  done
}
longest() {
  python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    if r["usec"] > by.get(r["port"], {"usec": -1})["usec"]:
        by[r["port"]] = r
for port, r in sorted(by.items()):
    args = " ".join(r["args"][:4])
    print(f"| 127.0.0.1:{port} | {r['usec'] / 1000:.1f} ms | `{args[:60]}` |")
print(f"| all | {max(r['usec'] for r in rows) / 1000:.1f} ms | |" if rows else "| all | - | |")
PY
}
t() { date +%s.%N; }
since() { python3 -c "print(f'{$(t) - $1:.1f}')"; }
report="$work/report.md"
{
  echo "# Big keys and the tool's holds ($version)"
  echo
  echo "$KEYS keys of 16 B to 1 KiB, \`{big}:hash\` of $FIELDS fields and \`{big}:string\` of"
  echo "$STRING_MB MiB on 127.0.0.1:$big_port; a fourth master joins with its replica."
} >"$report"

slowlog_on
s=$(t)
"$TOOL" predict --url redis://127.0.0.1:30301 --rebalance --by memory --json >"$work/plan.json" \
  2>"$work/predict.log"
echo "A: ringslot predict (read-only): $(since "$s") s"
slowlog_dump >"$work/slow-a.jsonl"
{
  echo
  echo "## A. The read-only prediction: the longest command of the tool on each master"
  echo
  echo "| master | longest | command |"
  echo "|---|---:|---|"
  longest "$work/slow-a.jsonl"
} >>"$report"

# B. The big keys' real DUMP: its length, and its time from this script's own EVAL.
for port in "${masters[@]}"; do redis-cli -p "$port" slowlog reset >/dev/null; done
redis-cli -p "$big_port" config set slowlog-log-slower-than 0 >/dev/null
for key in "{big}:hash" "{big}:string"; do
  len=$(redis-cli -p "$big_port" eval "return #redis.call('DUMP', KEYS[1])" 1 "$key")
  # The EVAL's entry (redis-cli --json logs its own HELLO first).
  usec=$(redis-cli -p "$big_port" --json slowlog get 4 | python3 -c '
import json, sys
print(next(e[2] for e in json.load(sys.stdin) if e[3][0].lower() == "eval"))')
  echo "$key $len $usec" >>"$work/dump.txt"
done
redis-cli -p "$big_port" config set slowlog-log-slower-than 10000 >/dev/null
python3 - "$work/plan.json" "$work/dump.txt" >>"$report" <<'PY'
import json, sys
big = {k["key"]: k for k in json.load(open(sys.argv[1]))["prediction"]["big_keys"]}
print("\n## B. The big keys: estimated (predict, without serializing them) and measured (DUMP)\n")
print("| key | type | length | MEMORY USAGE (SAMPLES 5) | DUMP estimated | DUMP measured | DUMP time measured | hold of the source estimated |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for line in open(sys.argv[2]):
    key, length, usec = line.split()
    k = big.get(key)
    if not k:
        print(f"| `{key}` | not listed | | | | {int(length) / 2**20:.1f} MiB | {int(usec) / 1000:.0f} ms | |")
        continue
    print(f"| `{key}` | {k['type']} {k['encoding']} | {k['length']} | {k['memory'] / 2**20:.1f} MiB | "
          f"{k['dump'] / 2**20:.1f} MiB | {int(length) / 2**20:.1f} MiB | {int(usec) / 1000:.0f} ms | "
          f"{k['hold_source'] * 1000:.0f} ms |")
PY

# C. The plan by memory with the defaults: the big keys' slot stays where it is.
slowlog_on
s=$(t)
"$TOOL" apply "$work/plan.json" --url redis://127.0.0.1:30301 --yes 2>"$work/apply-c.log"
echo "C: ringslot apply (defaults): $(since "$s") s"
slowlog_dump >"$work/slow-c.jsonl"
python3 - "$work/plan.json" >>"$report" <<'PY'
import json, sys
w = json.load(open(sys.argv[1]))["prediction"]["by_weight"]
print(f"\n## C. `ringslot apply` of the plan by memory, with the defaults\n")
print(f"Slots left where they are past --max-hold: {w['pinned']}; {len(w['moves'])} slots moved. "
      "The longest command of the tool on each master:\n")
print("| master | longest | command |")
print("|---|---:|---|")
PY
longest "$work/slow-c.jsonl" >>"$report"

# D. The big keys' master drained: they move, each alone.
s=$(t)
"$TOOL" predict --url redis://127.0.0.1:30301 --del "127.0.0.1:$big_port" --by memory --json \
  >"$work/drain.json" 2>"$work/predict-d.log"
slowlog_on
"$TOOL" apply "$work/drain.json" --url redis://127.0.0.1:30301 --yes 2>"$work/apply-d.log"
echo "D: ringslot predict --del and apply: $(since "$s") s"
for port in "${masters[@]}"; do
  redis-cli -p "$port" config set slowlog-log-slower-than 10000 >/dev/null
  redis-cli -p "$port" --json slowlog get 1000000 >"$work/slow-d-$port.json"
done
python3 - "$work/drain.json" "$work" "$big_port" "${masters[@]}" >>"$report" <<'PY'
import json, sys
plan, work, big_port, ports = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
big = {k["key"]: k for k in json.load(open(plan))["prediction"]["big_keys"]}
print("\n## D. The big keys' master drained: each big key's MIGRATE and RESTORE-ASKING\n")
print("| key | MIGRATE on the source: estimated | measured | RESTORE-ASKING on the target: estimated | measured |")
print("|---|---:|---:|---:|---:|")
for key, k in sorted(big.items()):
    migrate = restore = None
    for port in ports:
        for e in json.load(open(f"{work}/slow-d-{port}.json", errors="replace")):
            args = e[3]
            if key not in args:
                continue
            name = args[0].upper()
            if name == "MIGRATE" and port == big_port:
                migrate = max(migrate or 0, e[2])
            if name == "RESTORE-ASKING":
                restore = max(restore or 0, e[2])
    ms = lambda u: "-" if u is None else f"{u / 1000:.0f} ms"
    print(f"| `{key}` | {k['hold_source'] * 1000:.0f} ms | {ms(migrate)} | {k['hold_target'] * 1000:.0f} ms | {ms(restore)} |")
PY
grep -h "moving big key" "$work/apply-d.log" | sed 's/^/    /' || true
mkdir -p "$OUT"
cp "$report" "$OUT/big-keys.md"
echo
cat "$report"
echo
echo "bench-big-keys: wrote $OUT/big-keys.md"
