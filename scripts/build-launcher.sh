#!/usr/bin/env bash
# Compiles ephemera-launch, the process driver's step launcher, next to the runner's
# built modules (services/runner/dist). Only when its source is newer: builds stay quick.
set -euo pipefail
# apt-get one at a time on this machine: .ci/run runs these scripts side by side.
apt() { flock /tmp/ephemera-apt.lock apt-get -o DPkg::Lock::Timeout=600 "$@"; }
cd "$(dirname "$0")/.."
native=services/runner/native
out=services/runner/dist/ephemera-launch
newer() { for f in "$native"/*.c "$native"/*.h; do [ "$f" -nt "$out" ] && return 0; done; return 1; }
if [ ! -x "$out" ] || newer; then
  if ! command -v "${CC:-cc}" >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "build-launcher: installing gcc" >&2
    apt update -qq && apt install -y -qq gcc libc6-dev >/dev/null
  fi
  command -v "${CC:-cc}" >/dev/null || { echo "build-launcher: no C compiler (${CC:-cc}); install gcc (apt-get install -y gcc)" >&2; exit 1; }
  mkdir -p "$(dirname "$out")"
  "${CC:-cc}" -O2 -Wall -Wextra -Werror -o "$out.tmp" "$native/ephemera-launch.c" "$native/launch-server.c"
  mv "$out.tmp" "$out"
fi
