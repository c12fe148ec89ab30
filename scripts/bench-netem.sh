#!/usr/bin/env bash
# make bench-netem: bench-parallel's comparison (3 masters to 6, the same slots moved one move
# at a time, with --parallel N and by redis-cli; scripts/bench-parallel.sh, whose variables
# apply) with each node, the mover and the client in a network namespace of its own, joined
# through a bridge by links that hold each packet DELAY_US microseconds on its way out (`tc
# netem`): a round trip between any two of them takes 2 x DELAY_US more than on loopback (150
# by default: 0.15 ms each way, a data centre's). DELAY_US=0 keeps the namespaces and adds no
# delay. Loopback round trips (tens of microseconds) flatter a mover one move at a time; this
# is the comparison without that. The namespaces (rs<port>, rsmover, rsclient), their links
# and the bridge (rsbr0, 10.77.0.254/16; a node on port P at 10.77.(P/10%100).(P%10)) are
# set up here and torn down at the end, also on failure. Skipped with a message (status 0)
# where the host cannot: no root, no `ip netns`, or a kernel without the netem queueing
# discipline.
set -euo pipefail
cd "$(dirname "$0")/.."
DELAY_US="${DELAY_US:-150}"
skip() {
  echo "bench-netem: skipped: $*" >&2
  exit 0
}
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip >/dev/null && command -v tc >/dev/null || skip "ip and tc (iproute2) are needed"
# The namespaces: every port bench-parallel starts a server on, the mover and the client, and
# two to probe the host with.
ports=()
for base in 3040 3041 3042; do
  for i in 1 2 3 4 5 6; do
    ports+=("${base}$i")
    [ "${REPLICAS:-0}" = 1 ] && ports+=("$((${base}$i + 50))")
  done
done
names=(rsmover rsclient rsprobe1 rsprobe2)
for port in "${ports[@]}"; do names+=("rs$port"); done
# Every name this script may make, removed (a run killed before its teardown left them).
teardown() {
  for n in "${names[@]}"; do
    ip netns del "$n" 2>/dev/null || true
    ip link del "e$n" 2>/dev/null || true
  done
  ip link del rsbr0 2>/dev/null || true
}
trap teardown EXIT
teardown
ip link add rsbr0 type bridge 2>/dev/null || skip "ip link add ... type bridge failed (no bridges here)"
ip addr add 10.77.0.254/16 dev rsbr0
ip link set rsbr0 up
# add NAME IP: a namespace with a link to the bridge at IP, its packets out delayed.
add() {
  local name=$1 addr=$2
  ip netns add "$name"
  ip link add "v$name" type veth peer name "e$name"
  ip link set "e$name" master rsbr0 up
  ip link set "v$name" netns "$name"
  ip -n "$name" addr add "$addr/16" dev "v$name"
  ip -n "$name" link set "v$name" up
  ip -n "$name" link set lo up
  if [ "$DELAY_US" != 0 ]; then
    ip netns exec "$name" tc qdisc add dev "v$name" root netem delay "${DELAY_US}us"
  fi
}
# Two namespaces first: can the host delay a link, and does it pass traffic between them (a
# host that filters bridged traffic, br_netfilter with a FORWARD DROP policy, does not)?
if ! err=$(add rsprobe1 10.77.2.1 2>&1); then
  skip "this host cannot make a delayed link in a namespace ($err); run with a kernel that has \
sch_netem, or DELAY_US=0 for the namespaces alone"
fi
add rsprobe2 10.77.2.2
# A connection to a closed port is refused at once where packets pass, and times out where not.
reach=$(ip netns exec rsprobe1 timeout 3 bash -c 'exec 3<>/dev/tcp/10.77.2.2/9' 2>&1 || true)
case "$reach" in
  *refused*) ;;
  *) skip "the bridge does not pass traffic between namespaces here (bridged traffic filtered?)" ;;
esac
for port in "${ports[@]}"; do
  add "rs$port" "10.77.$((port / 10 % 100)).$((port % 10))"
done
add rsmover 10.77.1.1
add rsclient 10.77.1.2
echo "bench-netem: ${#names[@]} namespaces joined by rsbr0, ${DELAY_US} us out of each"
NETNS=1 ./scripts/bench-parallel.sh
