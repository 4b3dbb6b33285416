#!/usr/bin/env bash
# The whole of ephemera on this machine, end to end: start the stack (process driver,
# cluster local) under its own prefix and ports, publish the hello-db plugin, create a
# sandbox that uses it and wait for it, show its outputs and a step's log, delete it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-servers.sh

export EPHEMERA_PREFIX="${EPHEMERA_PREFIX:-demo}"
export EPHEMERA_API_LISTEN="${EPHEMERA_API_LISTEN:-127.0.0.1:7410}"
export EPHEMERA_IOCONTEXT_LISTEN="${EPHEMERA_IOCONTEXT_LISTEN:-127.0.0.1:7411}"
export EPHEMERA_API="$EPHEMERA_API_LISTEN"
log="$(mktemp -t ephemera-demo.XXXXXX.log)"

EPHEMERA_LOG_FORMAT=pretty node services/stack/dist/main.js >"$log" 2>&1 &
stack=$!
cleanup() { kill "$stack" 2>/dev/null && wait "$stack" 2>/dev/null; echo "(service logs: $log)"; }
trap cleanup EXIT
for _ in $(seq 1 300); do
  grep -q "ephemera is up" "$log" && break
  kill -0 "$stack" 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done
grep -q "ephemera is up" "$log" || { echo "the stack did not come up in 30s"; cat "$log"; exit 1; }

eph() { echo "\$ eph $*" >&2; node services/cli/dist/bundle/main.js "$@"; }
eph plugin apply -f examples/hello-db/plugin.yaml
eph sandbox apply -f examples/hello-db/sandbox.yaml --set owner="${USER:-demo}"
eph sandbox get feature-x --show-outputs
eph logs --sandbox feature-x --resource db --step verify
eph sandbox delete feature-x
eph logs --sandbox feature-x --resource db --phase delete
eph plugin delete hello-db@1.0.0
echo "demo finished" >&2
