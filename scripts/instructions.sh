#!/bin/sh
# make bench-instructions: what an owner lookup costs in instructions and cache misses, counted
# by valgrind's cachegrind (steady on a shared machine, where timings are not). Each flavour
# and ring size runs twice, with LOOKUPS lookups and with none; the difference over LOOKUPS is
# the cost of one lookup, the ring's construction left out. Writes bench/out/instructions.md.
# KEEP_PROFILES=DIR keeps the server's callgrind dumps there (callgrind_annotate reads them).
set -eu
cd "$(dirname "$0")/.."
LOOKUPS=${LOOKUPS:-200000}
command -v valgrind >/dev/null || { echo "bench-instructions: needs valgrind (apt-get install valgrind)"; exit 1; }
cargo build --release -q -p ringslot-engine --example lookup_instructions
bin=target/release/examples/lookup_instructions
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One cachegrind run: prints "instructions D1-misses LL-misses".
counts() {
    valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file="$tmp/out" \
        "$bin" "$1" "$2" "$3" >/dev/null 2>"$tmp/log"
    awk -F: '/I *refs/ {i=$2} /D1  misses/ {d=$2} /LLd misses/ {l=$2}
        END { gsub(/[ ,]/, "", i); gsub(/[ ,]/, "", d); gsub(/[ ,]/, "", l);
              sub(/\(.*/, "", d); sub(/\(.*/, "", l); print i, d, l }' "$tmp/log"
}
mkdir -p bench/out
{
    echo "# Instructions and cache misses per owner lookup (cachegrind)"
    echo
    echo "Rings of NODES x 160 points, members \`user:<i>:profile\` (1024, in turn), $LOOKUPS"
    echo "lookups less none; $(valgrind --version), simulated caches of this host."
    echo
    echo "| flavour | nodes | instructions | D1 misses | LL data misses |"
    echo "|---|---:|---:|---:|---:|"
    for nodes in 1 1000; do
        for flavour in native native-fnv ketama groupcache; do
            set -- $(counts "$flavour" "$nodes" 0)
            i0=$1 d0=$2 l0=$3
            set -- $(counts "$flavour" "$nodes" "$LOOKUPS")
            awk -v f="$flavour" -v n="$nodes" -v k="$LOOKUPS" -v i0="$i0" -v d0="$d0" -v l0="$l0" \
                -v i1="$1" -v d1="$2" -v l1="$3" 'BEGIN {
                printf "| %s | %d | %.1f | %.2f | %.3f |\n", f, n, (i1-i0)/k, (d1-d0)/k, (l1-l0)/k }'
        done
    done
} | tee bench/out/instructions.md

# The server's side: redis-server under callgrind with the release module, each command sent
# N times (redis-cli --pipe, members member:<i>), the counters zeroed before and dumped after
# each; per request: instructions and D1 read misses of the whole server, and the module's
# share. RING.GET of a missing ring key is the floor of any module command.
N=${N:-20000}
module=target/release/libringslot.so
[ -f "$module" ] || { echo "bench-instructions: build the module first (make release)"; exit 1; }
command -v callgrind_control >/dev/null || { echo "bench-instructions: needs valgrind's callgrind_control"; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file="$tmp/server.out" \
    "${RINGSLOT_SERVER:-redis-server}" --port "$port" --bind 127.0.0.1 --save '' \
    --appendonly no --dir "$tmp" --loadmodule "$PWD/$module" >"$tmp/server.log" 2>&1 &
vg=$!
trap 'kill $vg 2>/dev/null; wait $vg 2>/dev/null; rm -rf "$tmp"' EXIT
up=0
for _ in $(seq 1 240); do
    if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then up=1; break; fi
    sleep 0.5
done
[ "$up" = 1 ] || { echo "bench-instructions: the server under callgrind did not answer"; cat "$tmp/server.log"; exit 1; }
cli() { redis-cli -p "$port" "$@" >/dev/null; }
cli RING.ADD one 10.0.0.1:6379
cli RING.ADD ring $(i=0; while [ $i -lt 1000 ]; do printf '10.0.%d.%d:6379 ' $((i / 250)) $((i % 250)); i=$((i + 1)); done)
# N commands of one form in RESP, MEMBER replaced by member:<i>.
commands() {
    python3 - "$1" "$N" <<'PY'
import sys
words, n = sys.argv[1].split(), int(sys.argv[2])
out = []
for i in range(n):
    args = [w.replace("MEMBER", "member:%d" % (i * 7919 % 100000)) for w in words]
    out.append("*%d\r\n" % len(args) + "".join("$%d\r\n%s\r\n" % (len(a), a) for a in args))
sys.stdout.write("".join(out))
PY
}
{
    echo
    echo "# Server instructions per request (callgrind, $N requests each, redis-cli --pipe)"
    echo
    echo "$("${RINGSLOT_SERVER:-redis-server}" --version | cut -d' ' -f1-3) under $(valgrind --version);"
    echo "\`ring\`: 1000 nodes x 160 points; \`one\`: one node. The module's share is its command"
    echo "callback's, inclusive (the key's opening, the lookup, the reply)."
    echo
    echo "| request | instructions | D1 read misses | of which in the module | module's D1 read misses |"
    echo "|---|---:|---:|---:|---:|"
    n=0
    for form in "PING" "GET MEMBER" "RING.GET missing MEMBER" "RING.GET one MEMBER" \
        "RING.GET ring MEMBER" "RING.SLOT one MEMBER" "RING.SLOT ring MEMBER"; do
        callgrind_control -z "$vg" >/dev/null 2>&1
        commands "$form" | redis-cli -p "$port" --pipe >/dev/null
        callgrind_control -d "$vg" >/dev/null 2>&1
        [ -z "${KEEP_PROFILES:-}" ] || cp "$tmp/server.out.$((n + 1))" "$KEEP_PROFILES/"
        n=$((n + 1))
        out="$tmp/server.out.$n"
        total=$(grep -m1 '^summary:' "$out" | awk '{print $2, $6}')
        module=$(callgrind_annotate --threshold=100 --show=Ir,D1mr --inclusive=yes "$out" 2>/dev/null |
            grep -m1 'module::table::callback' | awk '{gsub(/,/, "", $1); gsub(/,/, "", $3); print $1, ($3 ~ /^[0-9]+$/ ? $3 : 0)}')
        echo "$total $module" | awk -v f="$form" -v n="$N" '{
            printf "| `%s` | %.0f | %.2f | %.0f | %.2f |\n", f, $1/n, $2/n, $3/n, $4/n }'
    done
} | tee -a bench/out/instructions.md
