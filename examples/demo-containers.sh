#!/usr/bin/env bash
# hello-db with everything in containers: the four services run from ephemera's images (as
# user 10001, read-only root filesystem, host network, this machine's NATS and Redis), and
# the simulated cluster's kubelet runs every step pod as Docker containers: ephemera-init
# and ephemera-sidecar from the agent image, main from the plugin's image
# (debian:bookworm-slim). Pods are on Docker's bridge and reach the IO context on its
# gateway address as host.kube-sim.internal. Docker's events show each pod container as it
# starts. Everything it made is removed at the end, also when it fails.
#   pnpm demo:containers        (Docker is installed and started if need be: scripts/ensure-docker.sh)
#   bash examples/demo-containers.sh --no-build    (the workspace is built already: the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
. examples/lib.sh
bash scripts/ensure-servers.sh
bash scripts/ensure-docker.sh || { echo "demo:containers cannot run: Docker cannot run here (above)" >&2; exit 3; }
# The workspace and the five images (kept when their files did not change).
bash scripts/images.sh ${1:+"$1"}

version=$(node -p 'require("./package.json").version')
prefix="${EPHEMERA_PREFIX:-democontainers}"
api="127.0.0.1:${DEMO_API_PORT:-7520}"
# Docker's bridge gateway: where a service must listen for pods to reach it.
gateway=$(ip -4 -o addr show docker0 | awk '{split($4, a, "/"); print a[1]}')
[ -n "$gateway" ] || { echo "demo:containers: Docker's bridge (docker0) has no address" >&2; exit 1; }
iocontext_port="${DEMO_IOCONTEXT_PORT:-7521}"
sim_listen="127.0.0.1:${DEMO_KUBE_SIM_PORT:-7543}"
work="$(mktemp -d /var/tmp/ephemera-demo-containers.XXXXXX)"
chmod 755 "$work"
containers=()
pids=()
cleanup() {
  status=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ ${#containers[@]} -gt 0 ]; then
    if [ $status -ne 0 ]; then for c in "${containers[@]}"; do echo "--- docker logs $c" >&2; docker logs --tail 20 "$c" >&2 || true; done; fi
    docker rm -f "${containers[@]}" >/dev/null 2>&1 || true
  fi
  node scripts/remove-prefix.mjs "$prefix" || true
  echo "(logs: $work)" >&2
}
trap cleanup EXIT


# kube-sim on the host, its kubelet on Docker; the runner container reads its kubeconfig.
# Its containers carry its data dir as a label: this demo's pods are told apart by it.
EPHEMERA_KUBE_SIM_RUNTIME=docker EPHEMERA_KUBE_SIM_LISTEN="$sim_listen" EPHEMERA_KUBE_SIM_KUBECONFIG="$work/kubeconfig" \
  EPHEMERA_KUBE_SIM_DATA="$work/kube-sim" \
  node services/kube-sim/dist/main.js >"$work/kube-sim.log" 2>&1 &
pids+=($!)
wait_for "$work/kube-sim.log" "kube-sim is up" "${pids[-1]}"
head -1 "$work/kube-sim.log" >&2
chmod 644 "$work/kubeconfig"
export KUBECONFIG="$work/kubeconfig"

# Every pod container Docker starts, as it starts (kube-sim labels each one with its pod).
pods="label=dev.ephemera.kube-sim.data=$work/kube-sim"
docker events --filter "$pods" --filter event=start \
  --format '{{index .Actor.Attributes "name"}}  image={{index .Actor.Attributes "image"}}' >"$work/pod-containers.log" 2>&1 &
pids+=($!)

# The four services, as a cluster runs them. The IO context listens on the bridge's gateway,
# where pods reach it; the others on loopback. Runner and IO context share a signing key.
signing_key="$(head -c 32 /dev/urandom | base64 | tr -d '=+/')"
common=(-e NATS_URL="${NATS_URL:-nats://127.0.0.1:4222}" -e REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}"
  -e EPHEMERA_PREFIX="$prefix" -e EPHEMERA_CLUSTER=local -e EPHEMERA_LOG_FORMAT=json -e EPHEMERA_SIGNING_KEY="$signing_key"
  -e EPHEMERA_IOCONTEXT_ADDR="$gateway:$iocontext_port" -e EPHEMERA_METRICS_LISTEN=127.0.0.1:0)
run() {
  local role=$1; shift
  local name="$prefix-$role"
  containers+=("$name")
  echo "\$ docker run ephemera/$role:$version" >&2
  docker run -d --name "$name" --network host --read-only --tmpfs /tmp "${common[@]}" "$@" "ephemera/$role:$version" >/dev/null
}
run iocontext -e EPHEMERA_IOCONTEXT_LISTEN="$gateway:$iocontext_port"
run scheduler -e EPHEMERA_SCHEDULER_LISTEN=127.0.0.1:0
run runner -e EPHEMERA_RUNNER_LISTEN=127.0.0.1:0 -e EPHEMERA_RUNNER_DRIVER=kubernetes -e KUBECONFIG=/kube/config \
  -v "$work/kubeconfig:/kube/config:ro" -e EPHEMERA_KUBE_NAMESPACE=default \
  -e EPHEMERA_POD_IOCONTEXT="host.kube-sim.internal:$iocontext_port" -e EPHEMERA_AGENT_IMAGE="ephemera/agent:$version"
run sandbox -e EPHEMERA_API_LISTEN="$api" -e EPHEMERA_ROUTES_LISTEN=127.0.0.1:0 -e EPHEMERA_ROUTES_HTTP_LISTEN=127.0.0.1:0 \
  -e EPHEMERA_GATEWAY_LISTEN=127.0.0.1:0 -e EPHEMERA_JOBS_LISTEN=127.0.0.1:0
node --input-type=module -e '
  const { checkHealth, waitFor } = await import("@ephemera/kit");
  for (const address of process.argv.slice(1))
    await waitFor(() => checkHealth(address), { timeoutMs: 60_000, intervalMs: 200, what: `${address} to report SERVING` });
' "$gateway:$iocontext_port" "$api"
docker ps --filter "name=^$prefix-" --format 'table {{.Names}}\t{{.Image}}\t{{.Status}}' >&2

k() { echo "\$ kubectl $*" >&2; kubectl "$@"; }
eph() { echo "\$ eph $*" >&2; EPHEMERA_API="$api" node services/cli/dist/bundle/main.js "$@"; }
k apply -f - <<<'{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ephemera"}}'
eph plugin apply -f examples/hello-db/plugin.yaml
eph sandbox apply -f examples/hello-db/sandbox.yaml --set owner="${USER:-demo}"
echo "--- the step pods' containers Docker started (docker events):" >&2
cat "$work/pod-containers.log"
eph sandbox get feature-x --show-outputs
eph logs --sandbox feature-x --resource db --step verify
eph sandbox delete feature-x
eph plugin delete hello-db@1.0.0
echo "--- pod containers left: $(docker ps -a -q --filter "$pods" | wc -l)" >&2
echo "demo finished" >&2
