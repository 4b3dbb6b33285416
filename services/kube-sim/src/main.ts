// `pnpm kube-sim`: the simulated cluster as a process, configured from the environment.
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { parseImageMap } from "./kubelet/images.js";
import { findRepoRoot } from "./repo.js";
import { RUNTIMES, startKubeSim, type RuntimeName } from "./start.js";

const env = process.env;
const listen = env["EPHEMERA_KUBE_SIM_LISTEN"] || "127.0.0.1:7443";
const runtime = env["EPHEMERA_KUBE_SIM_RUNTIME"] || undefined;
const sim = await Promise.resolve().then(() => {
  if (runtime !== undefined && !RUNTIMES.includes(runtime as RuntimeName)) {
    throw new Error(`EPHEMERA_KUBE_SIM_RUNTIME must be one of ${RUNTIMES.join(", ")} (or unset: docker when Docker answers), not "${runtime}"`);
  }
  return startKubeSim({
  listen,
  kubeconfigPath: env["EPHEMERA_KUBE_SIM_KUBECONFIG"] || ".ephemera/kube-sim.kubeconfig",
  ...(env["EPHEMERA_KUBE_SIM_DATA"] ? { dataDir: env["EPHEMERA_KUBE_SIM_DATA"] } : {}),
  ...(env["EPHEMERA_KUBE_SIM_WATCH_HISTORY"] ? { watchHistory: Number(env["EPHEMERA_KUBE_SIM_WATCH_HISTORY"]) } : {}),
  images: parseImageMap(env["EPHEMERA_KUBE_SIM_IMAGES"] ?? ""),
  repoRoot: findRepoRoot(dirname(fileURLToPath(import.meta.url))),
  ...(runtime ? { runtime: runtime as RuntimeName } : {}),
  workloadPods: env["EPHEMERA_KUBE_SIM_WORKLOAD_PODS"] === "true",
  });
}).catch((err: NodeJS.ErrnoException) => {
  // One line that says what to do, not a stack.
  const why = err.code === "EADDRINUSE" ? `${listen} is in use (another kube-sim? set EPHEMERA_KUBE_SIM_LISTEN to another address)` : err.message;
  console.error(`kube-sim cannot start: ${why}`);
  process.exit(1);
});
console.log(`kube-sim runs pods with the ${sim.runtime.name} runtime: ${sim.runtime.why}`);
console.log(sim.network.summary);
console.log(`kube-sim is up on ${sim.url} (kubeconfig ${sim.kubeconfigPath})`);

const shutdown = () => {
  void sim.stop().then(() => process.exit(0), (err: unknown) => {
    console.error(`kube-sim: stopping failed: ${(err as Error).message}`);
    process.exit(1);
  });
};
process.once("SIGTERM", shutdown);
process.once("SIGINT", shutdown);
