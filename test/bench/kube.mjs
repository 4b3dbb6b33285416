// The Kubernetes driver's figures, on the simulated cluster: a chain of steps run as
// runner pods, watched on the simulator (every pod's ADDED and its end, as the watch
// delivers them), and the simulator's API call counts over the run.
// - step-to-step gap: from a pod's end (phase Succeeded seen on the watch) to the next
//   step's pod being created: what ephemera adds between two steps, container start
//   excluded (the kubelet's part, reported beside it);
// - API writes and reads per step (the driver's, and kubectl's none: nothing else calls).
import { request } from "node:http";
import { join } from "node:path";
import { Api } from "../../services/cli/dist/api.js";
import { startKubeSimProcess } from "../../services/kube-sim/dist/index.js";
import { startStack } from "./system.mjs";
import { chainPlugin, sandbox, watchReadiness } from "./workloads.mjs";

/** Every pod's times (performance.now) as the simulator's watch reports them. */
function watchPods(url) {
  const pods = new Map();
  const seen = (name) => pods.get(name) ?? pods.set(name, {}).get(name);
  let buffer = "";
  const req = request(`${url}/api/v1/pods?watch=true`, (res) => {
    res.setEncoding("utf8");
    res.on("data", (chunk) => {
      buffer += chunk;
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (!line.trim()) continue;
        const { type, object: pod } = JSON.parse(line);
        const at = performance.now();
        const p = seen(pod.metadata.name);
        p.labels ??= pod.metadata.labels;
        if (type === "ADDED") p.added ??= at;
        const main = pod.status?.containerStatuses?.find((c) => c.name === "main")?.state;
        if (main?.running || main?.terminated) p.mainStarted ??= at;
        if (pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed") p.ended ??= at;
      }
    });
  });
  req.end();
  return { pods, stop: () => req.destroy() };
}

const stats = async (url) => (await (await globalThis.fetch(`${url}/sim/stats`)).json()).calls;

/**
 * Runs `samples` (+1 warm-up) chains of `chain` steps with the Kubernetes driver; returns
 * the gaps between consecutive steps, container starts, and API calls per step.
 */
export async function kubeFigures({ natsUrl, redisUrl, scratch, chain, samples }) {
  // The process runtime, as the figures in performance.md were taken: the pods reach the stack's IO context on 127.0.0.1.
  const sim = await startKubeSimProcess({ kubeconfigPath: join(scratch, "kube-sim.kubeconfig"), dataDir: join(scratch, "kube-sim"), deadlineMs: 30_000, runtime: "process" });
  const pods = watchPods(sim.url);
  const stack = await startStack({
    natsUrl, redisUrl, scratch, tag: "kube",
    // No webhook: the figures are the step pods' own, as performance.md took them.
    env: { EPHEMERA_RUNNER_DRIVER: "kubernetes", KUBECONFIG: sim.kubeconfigPath, EPHEMERA_KUBE_NAMESPACE: "default", EPHEMERA_STACK_WEBHOOK: "false" },
  });
  const api = new Api(stack.api, { timeoutMs: 30_000 });
  const watch = watchReadiness(api);
  try {
    await api.applyPlugin(chainPlugin(chain));
    const gaps = [];
    const starts = [];
    let before;
    let steps = 0;
    for (let i = 0; i <= samples; i++) {
      if (i === 1) before = await stats(sim.url); // after the warm-up
      const name = `kchain-${i}`;
      await api.applySandbox(sandbox(name, `chain${chain}`));
      await watch.ready(name, 120_000);
      if (i === 0) continue;
      steps += chain;
      const ours = [...pods.pods.values()].filter((p) => p.labels?.["ephemera.dev/sandbox"] === name);
      const byStep = (n) => ours.find((p) => p.labels["ephemera.dev/step"] === `s${n}`);
      for (let n = 1; n <= chain; n++) {
        const p = byStep(n);
        if (p?.added !== undefined && p.mainStarted !== undefined) starts.push(p.mainStarted - p.added);
        const next = byStep(n + 1);
        if (n < chain && p?.ended !== undefined && next?.added !== undefined) gaps.push(next.added - p.ended);
      }
    }
    // The last pods are deleted once their results are recorded: counted once every delete is in.
    const deadline = Date.now() + 15_000;
    let after = await stats(sim.url);
    while ((after["delete pods"] ?? 0) - (before["delete pods"] ?? 0) < steps && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      after = await stats(sim.url);
    }
    const perStep = Object.fromEntries(Object.keys(after).map((k) => [k, ((after[k] ?? 0) - (before[k] ?? 0)) / steps]));
    const writes = Object.entries(perStep).filter(([k]) => /^(create|update|patch|delete) /.test(k)).reduce((a, [, v]) => a + v, 0);
    return { gaps, starts, perStep, writes, pollingReads: perStep["get pods"] ?? 0, steps };
  } finally {
    await watch.stop();
    await stack.stop();
    pods.stop();
    await sim.kill();
  }
}
