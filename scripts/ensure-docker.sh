#!/usr/bin/env bash
# Makes sure a Docker daemon answers, installing Debian's docker.io and starting dockerd in
# the background when there is none (as ensure-servers.sh does for NATS and Redis). A
# dockerd started here is left running for the next build; `--stop` stops the one this
# script started (its pid is in .ephemera/dockerd.pid) and nothing else.
# Exit 0: Docker answers. Exit 3: it cannot run here (the reason on stderr, one line).
set -euo pipefail
# apt-get one at a time on this machine: .ci/run runs these scripts side by side.
apt() { as_root flock /tmp/ephemera-apt.lock apt-get -o DPkg::Lock::Timeout=600 "$@"; }
cd "$(dirname "$0")/.."
pidfile=.ephemera/dockerd.pid
up() { docker info >/dev/null 2>&1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

if [ "${1:-}" = "--stop" ]; then
  [ -f "$pidfile" ] && as_root kill "$(cat "$pidfile")" 2>/dev/null || true
  rm -f "$pidfile"
  exit 0
fi
up && exit 0
if ! command -v dockerd >/dev/null; then
  echo "installing docker.io (Docker engine)" >&2
  { apt update -qq && apt install -y -qq docker.io >/dev/null; } \
    || { echo "Docker cannot run here: docker.io could not be installed (apt-get as root)" >&2; exit 3; }
fi
mkdir -p .ephemera
if ! pgrep -x dockerd >/dev/null; then
  echo "starting dockerd (log: .ephemera/dockerd.log)" >&2
  as_root sh -c 'dockerd >"$1" 2>&1 & echo $! >"$2"' sh .ephemera/dockerd.log "$pidfile" \
    || { echo "Docker cannot run here: dockerd could not be started (it needs root)" >&2; exit 3; }
fi
for _ in $(seq 1 300); do up && exit 0; sleep 0.1; done
echo "Docker cannot run here: dockerd did not answer within 30 s ($(tail -n 1 .ephemera/dockerd.log 2>/dev/null))" >&2
exit 3
