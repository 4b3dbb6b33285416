#!/usr/bin/env bash
# Jobs end to end on the simulated cluster (examples/jobs): a job runner group of two pods
# kept by the runner (a pod deleted by hand is replaced), a job in a sandbox's routing
# context followed with --attach (its output, its routing key, its exit code 3), its artifact
# and its stdout downloaded byte for byte, five jobs at once on the two pods, all ended.
#   pnpm demo:jobs          (Docker is installed and started if need be)
#   bash examples/demo-jobs.sh --no-build    (the workspace is built already)
# kube-sim runs the pods as Docker containers; they reach the machine on Docker's bridge
# (host.kube-sim.internal), so the IO context and the JobAgent server listen there; the API
# stays on loopback. Everything it made is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
. examples/lib.sh
bash scripts/ensure-servers.sh
bash scripts/ensure-docker.sh || { echo "demo:jobs cannot run: Docker cannot run here (above)" >&2; exit 3; }
bash scripts/images.sh ${1:+"$1"}

export EPHEMERA_PREFIX="${EPHEMERA_PREFIX:-demojobs}"
bridge=$(ip -4 -o addr show docker0 | awk '{split($4, a, "/"); print a[1]}')
[ -n "$bridge" ] || { echo "demo:jobs: Docker's bridge (docker0) has no address" >&2; exit 1; }
api="127.0.0.1:${DEMO_API_PORT:-7660}"
io_port="${DEMO_IOCONTEXT_PORT:-7661}"
jobs_port="${DEMO_JOBS_PORT:-7662}"
routes_port="${DEMO_ROUTES_PORT:-7663}"
sim_listen="127.0.0.1:${DEMO_KUBE_SIM_PORT:-7664}"
ns=demo-jobs
work="$(mktemp -d /var/tmp/ephemera-demo-jobs.XXXXXX)"
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

EPHEMERA_KUBE_SIM_RUNTIME=docker EPHEMERA_KUBE_SIM_LISTEN="$sim_listen" \
  EPHEMERA_KUBE_SIM_KUBECONFIG="$work/kubeconfig" EPHEMERA_KUBE_SIM_DATA="$work/kube-sim" \
  node services/kube-sim/dist/main.js >"$work/kube-sim.log" 2>&1 &
pids+=($!)
wait_for "$work/kube-sim.log" "kube-sim is up" "${pids[-1]}"
export KUBECONFIG="$work/kubeconfig"

# The stack with the Kubernetes driver, as `pnpm start` runs it, its JobAgent server on the
# bridge: the runner gives the group's pods EPHEMERA_POD_JOBS, the address they dial.
EPHEMERA_RUNNER_DRIVER=kubernetes EPHEMERA_KUBE_NAMESPACE=default EPHEMERA_AGENT_IMAGE=ephemera/agent:0.1.0 \
  EPHEMERA_API_LISTEN="$api" EPHEMERA_IOCONTEXT_LISTEN="$bridge:$io_port" EPHEMERA_POD_IOCONTEXT="host.kube-sim.internal:$io_port" \
  EPHEMERA_JOBS_LISTEN="$bridge:$jobs_port" EPHEMERA_POD_JOBS="host.kube-sim.internal:$jobs_port" \
  EPHEMERA_ROUTES_LISTEN="127.0.0.1:$routes_port" EPHEMERA_ROUTES_HTTP_LISTEN=127.0.0.1:0 \
  EPHEMERA_GATEWAY_LISTEN=127.0.0.1:0 EPHEMERA_WEBHOOK_LISTEN=127.0.0.1:0 EPHEMERA_CONSOLE_LISTEN=127.0.0.1:0 \
  EPHEMERA_METRICS_LISTEN=127.0.0.1:0 EPHEMERA_LOG_FORMAT=pretty node services/stack/dist/main.js >"$work/stack.log" 2>&1 &
pids+=($!)
wait_for "$work/stack.log" "ephemera is up" "${pids[-1]}"

k() { echo "\$ kubectl $*" >&2; kubectl "$@"; }
eph() { echo "\$ eph $*" >&2; EPHEMERA_API="$api" node services/cli/dist/bundle/main.js "$@"; }
json() { node -e 'const o=JSON.parse(require("fs").readFileSync(0, "utf8")); process.stdout.write(String(process.argv[1].split(".").reduce((v, k) => v[k], o)))' "$1"; }
selector="ephemera.dev/job-group=demo-runners"
# The names of the group's Running pods, one a line, sorted.
running() { kubectl get pods -n "$ns" -l "$selector" -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {.metadata.deletionTimestamp}{"\n"}{end}' | awk '$2 == "Running" && $3 == "" {print $1}' | sort; }
# wait_running N [NOT]: until N pods of the group are Running (none named NOT), 90 s at most.
wait_running() {
  for _ in $(seq 1 450); do
    names=$(running)
    if [ "$(grep -c . <<<"$names")" = "$1" ] && ! grep -qx "${2:-}" <<<"$names"; then return 0; fi
    sleep 0.2
  done
  echo "expected $1 Running pods of demo-runners${2:+ without $2}, got: $(running | tr '\n' ' ')" >&2; return 1
}

k create namespace "$ns"
eph sandbox apply -f examples/jobs/sandbox.yaml
key=$(eph sandbox get jobs-demo -o json | json routingKey)
echo "routing key of jobs-demo: $key"

eph jobrunnergroup apply -f examples/jobs/runners.yaml
wait_running 2
k wait --for=condition=Ready pod -l "$selector" -n "$ns" --timeout=90s
k get pods -n "$ns" -l "$selector"
eph jobrunnergroup get demo-runners

gone=$(running | head -1)
echo "--- a pod deleted by hand: the runner makes another" >&2
k delete pod "$gone" -n "$ns" --wait=false
wait_running 2 "$gone"
k wait --for=condition=Ready pod -l "$selector" -n "$ns" --timeout=90s
echo "pods after deleting $gone: $(running | tr '\n' ' ')"

echo "--- a job followed as it runs: its output, then its exit code" >&2
set +e
eph job submit -f examples/jobs/job.yaml --attach >"$work/attach.out" 2>"$work/attach.err"
code=$?
set -e
cat "$work/attach.out"; cat "$work/attach.err" >&2
echo "job exit code: $code"
[ "$code" = 3 ] || { echo "expected exit code 3, got $code" >&2; exit 1; }
grep -qx "routing key: $key" "$work/attach.out" || { echo "the job did not print its routing key $key" >&2; exit 1; }
job=$(sed -n 's/^job \(.*\) submitted$/\1/p' "$work/attach.err")
eph job get "$job"

echo "--- its artifact and its stdout, downloaded byte for byte" >&2
eph artifact download --job "$job" /tmp/report.txt -o "$work/report.txt"
printf 'report\nrouting key %s\nstatus 3\n' "$key" >"$work/report.want"
cmp "$work/report.txt" "$work/report.want" && echo "artifact /tmp/report.txt: the bytes the job wrote"
cat "$work/report.txt"
eph artifact download --job "$job" @stdout >"$work/stdout.txt"
cmp "$work/stdout.txt" "$work/attach.out" && echo "artifact @stdout: the bytes --attach printed"

echo "--- five jobs at once on the two pods" >&2
batch=()
for i in 1 2 3 4 5; do
  EPHEMERA_API="$api" node services/cli/dist/bundle/main.js job submit -f examples/jobs/job.yaml --attach >"$work/batch-$i.out" 2>"$work/batch-$i.err" &
  batch+=($!)
done
for i in 1 2 3 4 5; do
  set +e; wait "${batch[$((i - 1))]}"; code=$?; set -e
  echo "batch job $i: $(sed -n 's/^job \(.*\) submitted$/\1/p' "$work/batch-$i.err") exited $code"
  [ "$code" = 3 ] || { cat "$work/batch-$i.err" >&2; exit 1; }
done
eph job list --all

eph jobrunnergroup delete demo-runners
eph sandbox delete jobs-demo
k delete namespace "$ns" --wait=false 2>/dev/null || true
echo "demo finished" >&2
