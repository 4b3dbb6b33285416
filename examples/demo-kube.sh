#!/usr/bin/env bash
# hello-db with the Kubernetes driver, on the simulated cluster: kube-sim (its kubelet runs
# each pod's containers as local processes, which reach the IO context on 127.0.0.1), then the stack with
# EPHEMERA_RUNNER_DRIVER=kubernetes pointed at it. kubectl watches the runner pods come
# and go while the sandbox is created; the simulator's call counts show the cost. Then a
# sandbox forks a baseline Deployment: kubectl shows the fork, its Service and the outputs
# Secret, and the Routes API the rule for its routing key.
set -euo pipefail
cd "$(dirname "$0")/.."
. examples/lib.sh
bash scripts/ensure-servers.sh

export EPHEMERA_PREFIX="${EPHEMERA_PREFIX:-demokube}"
export EPHEMERA_API_LISTEN="${EPHEMERA_API_LISTEN:-127.0.0.1:7420}"
export EPHEMERA_IOCONTEXT_LISTEN="${EPHEMERA_IOCONTEXT_LISTEN:-127.0.0.1:7421}"
export EPHEMERA_API="$EPHEMERA_API_LISTEN"
export EPHEMERA_ROUTES_LISTEN="${EPHEMERA_ROUTES_LISTEN:-127.0.0.1:7427}"
export EPHEMERA_ROUTES_HTTP_LISTEN="${EPHEMERA_ROUTES_HTTP_LISTEN:-127.0.0.1:7428}"
export EPHEMERA_GATEWAY_LISTEN="${EPHEMERA_GATEWAY_LISTEN:-127.0.0.1:7430}"
export EPHEMERA_CONSOLE_LISTEN="${EPHEMERA_CONSOLE_LISTEN:-127.0.0.1:0}"
export EPHEMERA_JOBS_LISTEN="${EPHEMERA_JOBS_LISTEN:-127.0.0.1:7429}"
export EPHEMERA_KUBE_SIM_LISTEN="${EPHEMERA_KUBE_SIM_LISTEN:-127.0.0.1:7443}"
export EPHEMERA_KUBE_SIM_RUNTIME="${EPHEMERA_KUBE_SIM_RUNTIME:-process}"
export EPHEMERA_KUBE_SIM_KUBECONFIG="${EPHEMERA_KUBE_SIM_KUBECONFIG:-.ephemera/kube-sim.kubeconfig}"
export KUBECONFIG="$EPHEMERA_KUBE_SIM_KUBECONFIG"
export EPHEMERA_RUNNER_DRIVER=kubernetes
logs="$(mktemp -d -t ephemera-demo-kube.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  echo "(logs: $logs)"
}
trap cleanup EXIT


node services/kube-sim/dist/main.js >"$logs/kube-sim.log" 2>&1 &
pids+=($!)
wait_for "$logs/kube-sim.log" "kube-sim is up" "${pids[-1]}" 30
head -1 "$logs/kube-sim.log"; echo
EPHEMERA_LOG_FORMAT=pretty node services/stack/dist/main.js >"$logs/stack.log" 2>&1 &
pids+=($!)
wait_for "$logs/stack.log" "ephemera is up" "${pids[-1]}" 30

k() { echo "\$ kubectl $*" >&2; kubectl "$@"; }
eph() { echo "\$ eph $*" >&2; node services/cli/dist/bundle/main.js "$@"; }
# hello-db's runner pods go to namespace "ephemera" (its runner.namespace).
k apply -f - <<<'{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ephemera"}}'
kubectl get pods -n ephemera -w --output-watch-events >"$logs/pods-watch.log" 2>&1 &
pids+=($!)
eph plugin apply -f examples/hello-db/plugin.yaml
eph sandbox apply -f examples/hello-db/sandbox.yaml --set owner="${USER:-demo}"
echo "--- kubectl get pods -n ephemera -w, while the sandbox was created:" >&2
cat "$logs/pods-watch.log"
k get pods -n ephemera
eph sandbox get feature-x --show-outputs
eph logs --sandbox feature-x --resource db --step verify
eph sandbox delete feature-x

echo "--- forks: a sandbox forking the baseline orders Deployment" >&2
k apply -f examples/hello-db/baseline.yaml
eph sandbox apply -f examples/hello-db/sandbox-fork.yaml
k get deploy,svc,secret -n shop -l ephemera.dev/sandbox=feature-y
eph sandbox get feature-y
echo "\$ curl http://$EPHEMERA_ROUTES_HTTP_LISTEN/api/v1/workloads/routing-rules?baselineName=orders" >&2
curl -s "http://$EPHEMERA_ROUTES_HTTP_LISTEN/api/v1/workloads/routing-rules?baselineName=orders"; echo
eph sandbox delete feature-y
k get deploy,svc,secret -n shop
eph plugin delete hello-db@1.0.0
echo "--- the simulated cluster's API calls (GET /sim/stats):" >&2
curl -s "http://$EPHEMERA_KUBE_SIM_LISTEN/sim/stats"; echo
echo "demo finished" >&2
