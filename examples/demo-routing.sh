#!/usr/bin/env bash
# Request routing end to end on the simulated cluster (examples/routing): frontend calls
# backend, both injected with the routing sidecar by ephemera's webhook; a sandbox forks
# backend with another VERSION and has an endpoint on frontend. A request through the preview
# gateway with the endpoint URL's host reaches the fork (frontend is the baseline; the router
# beside backend sent the call on by its routing key); the baseline URL reaches the baseline;
# once the sandbox is deleted its URL answers 404 and the same headers reach the baseline.
#   pnpm demo:routing          (Docker is installed and started if need be)
#   bash examples/demo-routing.sh --no-build    (the workspace is built already)
# kube-sim runs the pods as Docker containers with Services' ClusterIPs and cluster DNS, and
# Deployments' pods (EPHEMERA_KUBE_SIM_WORKLOAD_PODS=true). Pods reach the machine on
# Docker's bridge (host.kube-sim.internal), so the IO context and the Routes API listen
# there; the API and the gateway stay on loopback. Everything it made is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
. examples/lib.sh
bash scripts/ensure-servers.sh
bash scripts/ensure-docker.sh || { echo "demo:routing cannot run: Docker cannot run here (above)" >&2; exit 3; }
bash scripts/images.sh ${1:+"$1"}
bash scripts/images.sh --no-build example-echo

export EPHEMERA_PREFIX="${EPHEMERA_PREFIX:-demorouting}"
bridge=$(ip -4 -o addr show docker0 | awk '{split($4, a, "/"); print a[1]}')
[ -n "$bridge" ] || { echo "demo:routing: Docker's bridge (docker0) has no address" >&2; exit 1; }
api="127.0.0.1:${DEMO_API_PORT:-7620}"
io_port="${DEMO_IOCONTEXT_PORT:-7621}"
routes_port="${DEMO_ROUTES_PORT:-7627}"
gateway="127.0.0.1:${DEMO_GATEWAY_PORT:-7630}"
webhook="127.0.0.1:${DEMO_WEBHOOK_PORT:-7631}"
sim_listen="127.0.0.1:${DEMO_KUBE_SIM_PORT:-7643}"
domain="preview.ephemera.localhost"
work="$(mktemp -d /var/tmp/ephemera-demo-routing.XXXXXX)"
pids=()
cleanup() {
  status=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ $status -ne 0 ]; then for f in "$work"/*.log; do echo "--- $f" >&2; tail -n 25 "$f" >&2; done; fi
  node scripts/remove-prefix.mjs "$EPHEMERA_PREFIX" || true
  echo "(logs: $work)" >&2
}
trap cleanup EXIT


EPHEMERA_KUBE_SIM_RUNTIME=docker EPHEMERA_KUBE_SIM_WORKLOAD_PODS=true EPHEMERA_KUBE_SIM_LISTEN="$sim_listen" \
  EPHEMERA_KUBE_SIM_KUBECONFIG="$work/kubeconfig" EPHEMERA_KUBE_SIM_DATA="$work/kube-sim" \
  node services/kube-sim/dist/main.js >"$work/kube-sim.log" 2>&1 &
pids+=($!)
wait_for "$work/kube-sim.log" "kube-sim is up" "${pids[-1]}"
cat "$work/kube-sim.log" >&2
dns=$(sed -n 's/.*cluster DNS at \([0-9.]*\).*/\1/p' "$work/kube-sim.log" | head -1)
[ -n "$dns" ] || { echo "demo:routing: kube-sim routes no Services here (above)" >&2; exit 1; }
export KUBECONFIG="$work/kubeconfig"

# The stack with the Kubernetes driver, as `pnpm start` runs it: its webhook registers itself
# with the cluster, so annotated pods get the router, which follows the Routes API. The Routes
# API on the bridge is open without tokens to this machine's containers
# (EPHEMERA_API_ALLOW_OPEN: the bridge is not reachable from other machines).
EPHEMERA_RUNNER_DRIVER=kubernetes EPHEMERA_KUBE_NAMESPACE=default EPHEMERA_AGENT_IMAGE=ephemera/agent:0.1.0 \
  EPHEMERA_API_LISTEN="$api" EPHEMERA_IOCONTEXT_LISTEN="$bridge:$io_port" EPHEMERA_POD_IOCONTEXT="host.kube-sim.internal:$io_port" \
  EPHEMERA_ROUTES_LISTEN="$bridge:$routes_port" EPHEMERA_ROUTES_HTTP_LISTEN=127.0.0.1:0 EPHEMERA_API_ALLOW_OPEN=true \
  EPHEMERA_GATEWAY_LISTEN="$gateway" EPHEMERA_GATEWAY_DNS="$dns" EPHEMERA_PREVIEW_DOMAIN="$domain" EPHEMERA_CONSOLE_LISTEN=127.0.0.1:0 \
  EPHEMERA_WEBHOOK_LISTEN="$webhook" EPHEMERA_ROUTES="host.kube-sim.internal:$routes_port" \
  EPHEMERA_METRICS_LISTEN=127.0.0.1:0 EPHEMERA_LOG_FORMAT=pretty node services/stack/dist/main.js >"$work/stack.log" 2>&1 &
pids+=($!)
wait_for "$work/stack.log" "ephemera is up" "${pids[-1]}"
wait_for "$work/stack.log" "webhook registered" "${pids[-1]}"

k() { echo "\$ kubectl $*" >&2; kubectl "$@"; }
eph() { echo "\$ eph $*" >&2; EPHEMERA_API="$api" node services/cli/dist/bundle/main.js "$@"; }
# GET through the gateway with a Host (and more headers); retried until it answers as expected or 60 s pass.
ask() {
  local host=$1 want=$2; shift 2
  echo "\$ curl -H 'Host: $host' $* http://$gateway/" >&2
  for _ in $(seq 1 300); do
    out=$(curl -s -H "Host: $host" "$@" "http://$gateway/" || true)
    if grep -q "$want" <<<"$out"; then echo "$out"; return 0; fi
    sleep 0.2
  done
  echo "expected $want, got: $out" >&2; return 1
}
# The same, straight to a ClusterIP (reachable from this machine) with a routing-key header.
ask_direct() {
  local address=$1 header=$2 want=$3
  echo "\$ curl -H '$header' http://$address/" >&2
  for _ in $(seq 1 300); do
    out=$(curl -s -H "$header" "http://$address/" || true)
    if grep -q "$want" <<<"$out"; then echo "$out"; return 0; fi
    sleep 0.2
  done
  echo "expected $want, got: $out" >&2; return 1
}

k apply -f examples/routing/baseline.yaml
k wait --for=condition=Ready pod -l app=backend -n demo-routing --timeout=60s
k wait --for=condition=Ready pod -l app=frontend -n demo-routing --timeout=60s
echo "--- the baseline pods, each with the router the webhook injected:" >&2
k get pods -n demo-routing -o custom-columns='POD:.metadata.name,CONTAINERS:.spec.containers[*].name,INIT:.spec.initContainers[*].name'

eph sandbox apply -f examples/routing/sandbox.yaml --set version=v2
key=$(eph sandbox get routing-demo -o json | node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(0, "utf8")).routingKey)')
k get deploy,svc -n demo-routing
echo "--- the endpoint URL: through frontend (baseline) to backend's fork" >&2
ask "web--$key.$domain" '"version":"v2"'
echo "--- a route group of the routing-* sandboxes: its own key, its URL reaches the same fork" >&2
eph routegroup apply -f examples/routing/routegroup.yaml
group_key=$(eph routegroup get routing-group -o json | node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(0, "utf8")).routingKey)')
ask "web--$group_key.$domain" '"version":"v2"'
eph routegroup get routing-group
echo "--- the baseline URL: backend's baseline" >&2
ask "frontend-demo-routing-8080.$domain" '"backend":{"service":"backend","version":"baseline"}'
echo "--- the same key in a header, straight to frontend's ClusterIP from this machine: the fork" >&2
frontend_ip=$(kubectl get svc frontend -n demo-routing -o jsonpath='{.spec.clusterIP}')
ask_direct "$frontend_ip:8080" "uberctx-sd-routing-key: $key" '"version":"v2"'

eph sandbox delete routing-demo
echo "--- after the delete: the endpoint URL is gone, and the key's headers reach the baseline" >&2
echo "\$ curl -H 'Host: web--$key.$domain' http://$gateway/" >&2
code=$(curl -s -o "$work/gone.txt" -w '%{http_code}' -H "Host: web--$key.$domain" "http://$gateway/")
cat "$work/gone.txt"
[ "$code" = 404 ] || { echo "expected 404, got $code" >&2; exit 1; }
ask_direct "$frontend_ip:8080" "baggage: sd-routing-key=$key" '"backend":{"service":"backend","version":"baseline"}'
echo "--- the route group, its sandbox gone, routes nothing: its URL reaches the baseline" >&2
ask "web--$group_key.$domain" '"backend":{"service":"backend","version":"baseline"}'
eph routegroup delete routing-group
k delete -f examples/routing/baseline.yaml --wait=false 2>/dev/null || true
echo "demo finished" >&2
