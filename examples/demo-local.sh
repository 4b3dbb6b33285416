#!/usr/bin/env bash
# Local workloads end to end (examples/routing): the routing example on the simulated cluster,
# and a "workstation" — a network namespace of its own that reaches this machine only at the
# tunnel's address — running backend as a plain process on localhost:9090 and
# `eph local connect`. A sandbox with a `local` entry for backend: its endpoint URL, through
# the baseline frontend, reaches the workstation's backend; the baseline URL still reaches
# the baseline. Killing `eph local connect` (kill -9) makes the sandbox say the local is
# disconnected and its rule go; connecting again brings both back. From the workstation, the
# cluster's backend answers through the local proxy. Every tunnel connection is in `eph events`.
#   pnpm demo:local          (root: the workstation is a network namespace; Docker is started if need be)
#   bash examples/demo-local.sh --no-build
set -euo pipefail
cd "$(dirname "$0")/.."
. examples/lib.sh
[ "$(id -u)" = 0 ] || { echo "demo:local cannot run: the workstation is a network namespace, which needs root" >&2; exit 3; }
bash scripts/ensure-servers.sh
bash scripts/ensure-docker.sh || { echo "demo:local cannot run: Docker cannot run here (above)" >&2; exit 3; }
bash scripts/images.sh ${1:+"$1"}
bash scripts/images.sh --no-build example-echo

export EPHEMERA_PREFIX="${EPHEMERA_PREFIX:-demolocal}"
bridge=$(ip -4 -o addr show docker0 | awk '{split($4, a, "/"); print a[1]}')
[ -n "$bridge" ] || { echo "demo:local: Docker's bridge (docker0) has no address" >&2; exit 1; }
api="127.0.0.1:${DEMO_API_PORT:-7650}"
io_port="${DEMO_IOCONTEXT_PORT:-7651}"
routes_port="${DEMO_ROUTES_PORT:-7652}"
gateway="127.0.0.1:${DEMO_GATEWAY_PORT:-7653}"
webhook="127.0.0.1:${DEMO_WEBHOOK_PORT:-7654}"
tunnel_port="${DEMO_TUNNEL_PORT:-7655}"
sim_listen="127.0.0.1:${DEMO_KUBE_SIM_PORT:-7656}"
domain="preview.ephemera.localhost"
# The workstation's network: a /30 on a veth pair, nothing routed beyond it.
ws="ephws-$$"
net="${DEMO_WS_NET:-10.213.$(( $$ % 250 ))}"
host_ip="$net.1"
ws_ip="$net.2"
work="$(mktemp -d /var/tmp/ephemera-demo-local.XXXXXX)"
pids=()
cleanup() {
  status=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  ip netns pids "$ws" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  ip netns del "$ws" 2>/dev/null || true
  ip link del "$ws-h" 2>/dev/null || true
  if [ $status -ne 0 ]; then for f in "$work"/*.log "$work"/ws/local/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 25 "$f" >&2; }; done; fi
  node scripts/remove-prefix.mjs "$EPHEMERA_PREFIX" || true
  echo "(logs: $work)" >&2
}
trap cleanup EXIT

ip netns add "$ws"
ip link add "$ws-h" type veth peer name "$ws-w"
ip link set "$ws-w" netns "$ws"
ip addr add "$host_ip/30" dev "$ws-h"
ip link set "$ws-h" up
ip -n "$ws" addr add "$ws_ip/30" dev "$ws-w"
ip -n "$ws" link set "$ws-w" up
ip -n "$ws" link set lo up
# on the workstation: only what the veth reaches (the tunnel's address), no default route
wsx() { ip netns exec "$ws" "$@"; }

EPHEMERA_KUBE_SIM_RUNTIME=docker EPHEMERA_KUBE_SIM_WORKLOAD_PODS=true EPHEMERA_KUBE_SIM_LISTEN="$sim_listen" \
  EPHEMERA_KUBE_SIM_KUBECONFIG="$work/kubeconfig" EPHEMERA_KUBE_SIM_DATA="$work/kube-sim" \
  node services/kube-sim/dist/main.js >"$work/kube-sim.log" 2>&1 &
pids+=($!)
wait_for "$work/kube-sim.log" "kube-sim is up" "${pids[-1]}"
dns=$(sed -n 's/.*cluster DNS at \([0-9.]*\).*/\1/p' "$work/kube-sim.log" | head -1)
[ -n "$dns" ] || { echo "demo:local: kube-sim routes no Services here (above)" >&2; exit 1; }
export KUBECONFIG="$work/kubeconfig"

# The stack as in demo:routing, with the tunnel listening for workstations on the veth and
# taking the cluster's connections to local workloads on Docker's bridge (the pods' side).
EPHEMERA_RUNNER_DRIVER=kubernetes EPHEMERA_KUBE_NAMESPACE=default EPHEMERA_AGENT_IMAGE=ephemera/agent:0.1.0 \
  EPHEMERA_API_LISTEN="$api" EPHEMERA_IOCONTEXT_LISTEN="$bridge:$io_port" EPHEMERA_POD_IOCONTEXT="host.kube-sim.internal:$io_port" \
  EPHEMERA_ROUTES_LISTEN="$bridge:$routes_port" EPHEMERA_ROUTES_HTTP_LISTEN=127.0.0.1:0 EPHEMERA_API_ALLOW_OPEN=true \
  EPHEMERA_GATEWAY_LISTEN="$gateway" EPHEMERA_GATEWAY_DNS="$dns" EPHEMERA_PREVIEW_DOMAIN="$domain" EPHEMERA_CONSOLE_LISTEN=127.0.0.1:0 \
  EPHEMERA_WEBHOOK_LISTEN="$webhook" EPHEMERA_ROUTES="host.kube-sim.internal:$routes_port" \
  EPHEMERA_TUNNEL_LISTEN="$host_ip:$tunnel_port" EPHEMERA_TUNNEL_POD_ADDRESS="$bridge" EPHEMERA_TUNNEL_DNS="$dns" \
  EPHEMERA_METRICS_LISTEN=127.0.0.1:0 EPHEMERA_LOG_FORMAT=pretty node services/stack/dist/main.js >"$work/stack.log" 2>&1 &
pids+=($!)
wait_for "$work/stack.log" "ephemera is up" "${pids[-1]}"
wait_for "$work/stack.log" "webhook registered" "${pids[-1]}"

k() { echo "\$ kubectl $*" >&2; kubectl "$@"; }
eph() { echo "\$ eph $*" >&2; EPHEMERA_API="$api" node services/cli/dist/bundle/main.js "$@"; }
# eph on the workstation: it reaches the tunnel only.
ws_eph() { echo "(workstation) \$ eph $*" >&2; wsx env EPHEMERA_TUNNEL="$host_ip:$tunnel_port" EPHEMERA_HOME="$work/ws" node services/cli/dist/bundle/main.js "$@"; }
# GET through the gateway with a Host; retried until it answers as expected or 60 s pass.
ask() {
  local host=$1 want=$2
  echo "\$ curl -H 'Host: $host' http://$gateway/" >&2
  for _ in $(seq 1 300); do
    out=$(curl -s -m 5 -H "Host: $host" "http://$gateway/" || true)
    if grep -q "$want" <<<"$out"; then echo "$out"; return 0; fi
    sleep 0.2
  done
  echo "expected $want, got: $out" >&2; return 1
}
# A local workload's status in the sandbox view, until it is `want` (15 s).
local_status() {
  local want=$1 got=""
  for _ in $(seq 1 75); do
    got=$(EPHEMERA_API="$api" node services/cli/dist/bundle/main.js sandbox get local-demo -o json \
      | node -e 'const v = JSON.parse(require("fs").readFileSync(0, "utf8")); process.stdout.write((v.workloads || []).filter((w) => w.kind === "local").map((w) => w.status).join(","))')
    [ "$got" = "$want" ] && { echo "local workload backend-local: $got" ; return 0; }
    sleep 0.2
  done
  echo "expected the local workload $want within 15 s, it is ${got:-absent}" >&2; return 1
}

k apply -f examples/routing/baseline.yaml
k wait --for=condition=Ready pod -l app=backend -n demo-routing --timeout=60s
k wait --for=condition=Ready pod -l app=frontend -n demo-routing --timeout=60s

eph sandbox apply -f examples/routing/local-sandbox.yaml
key=$(eph sandbox get local-demo -o json | node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(0, "utf8")).routingKey)')

echo "--- the workstation: backend as a plain process on localhost:9090, and eph local connect" >&2
# (the image's program, as CommonJS: the workspace's package.json says "module")
cp examples/routing/app/echo.js "$work/echo.cjs"
wsx env ROLE=backend VERSION=workstation PORT=9090 node "$work/echo.cjs" >"$work/ws-backend.log" 2>&1 &
pids+=($!)
wait_for "$work/ws-backend.log" "listening on 9090" "${pids[-1]}"
# --insecure: this tunnel has no certificate (plaintext HTTP/2 on a link private to this
# machine); a cluster's tunnel serves the API's, and eph then needs no flag.
ws_eph local connect --sandbox local-demo --insecure
ws_eph local status
local_status Connected
eph sandbox get local-demo
echo "--- the endpoint URL: through frontend (baseline) and the tunnel to the workstation's backend" >&2
ask "web--$key.$domain" '"backend":{"service":"backend","version":"workstation"}'
echo "--- the baseline URL: backend's baseline" >&2
ask "frontend-demo-routing-8080.$domain" '"backend":{"service":"backend","version":"baseline"}'
echo "--- from the workstation, the cluster's backend through the local proxy" >&2
echo "(workstation) \$ curl -x http://127.0.0.1:7786 http://backend.demo-routing.svc:8080/" >&2
wsx curl -s -m 10 -x http://127.0.0.1:7786 http://backend.demo-routing.svc:8080/

echo "--- kill -9 of eph local connect: the local is disconnected and its rule goes" >&2
daemon=$(node -e 'process.stdout.write(String(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).pid))' "$work/ws/local/state.json")
kill -9 "$daemon"
local_status Disconnected
ask "web--$key.$domain" '"backend":{"service":"backend","version":"baseline"}'
echo "--- connected again: both come back" >&2
ws_eph local connect --sandbox local-demo --insecure
local_status Connected
ask "web--$key.$domain" '"backend":{"service":"backend","version":"workstation"}'
ws_eph local disconnect
local_status Disconnected

echo "--- the tunnel's audit log: every connection with its sandbox and byte counts" >&2
eph events --sandbox local-demo --type 'ephemera.tunnel.*' -o json \
  | node -e 'for (const l of require("fs").readFileSync(0, "utf8").split("\n").filter(Boolean)) { const e = JSON.parse(l); const d = e.data || {}; console.log([e.type, d.direction || d.reason || "", d.sandbox || (d.sandboxes || []).join(","), d.target || "", d.bytesToWorkstation ?? "", d.bytesToCluster ?? ""].join("  ")); }'

eph sandbox delete local-demo
k delete -f examples/routing/baseline.yaml --wait=false 2>/dev/null || true
echo "demo finished" >&2
