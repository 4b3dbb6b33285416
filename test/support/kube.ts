// The simulated cluster for the Kubernetes driver's tests: kube-sim as a process on a free
// port (its kubelet runs pods' containers as local processes: the pods reach the test's IO
// context on 127.0.0.1, which a Docker container could not), and the real kubectl pointed
// at it.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { startKubeSimProcess, type FaultSpec, type StatsSnapshot } from "@ephemera/kube-sim";

export interface Sim {
  url: string;
  kubeconfig: string;
  stats(): Promise<StatsSnapshot>;
  faults(spec: FaultSpec | null): Promise<void>;
  /** Forgets the change history (a watch from before now gets 410 Gone) and cuts every open watch. */
  compactAndDropWatches(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * `env`: kube-sim's settings, e.g. EPHEMERA_STEP_HOST_READONLY. `runtime`: the process
 * runtime unless asked (its pods reach the test's services on 127.0.0.1); with docker, a
 * pod reaches the host at host.kube-sim.internal (Docker's bridge gateway, bridgeGateway()).
 */
export async function startSim(env: Record<string, string> = {}, runtime: "process" | "docker" = "process"): Promise<Sim> {
  // Outside /tmp: containers get a private /tmp of their own.
  const dir = mkdtempSync("/var/tmp/ephemera-kube-sim-");
  const sim = await startKubeSimProcess({ kubeconfigPath: join(dir, "kubeconfig"), dataDir: join(dir, "data"), deadlineMs: 30_000, runtime, env });
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${sim.url}${path}`, { method, ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }) });
    if (!res.ok) throw new Error(`kube-sim ${method} ${path}: ${res.status} ${await res.text()}`);
    return res;
  };
  return {
    url: sim.url,
    kubeconfig: sim.kubeconfigPath,
    stats: async () => (await (await call("GET", "/sim/stats")).json()) as StatsSnapshot,
    faults: async (spec) => { await (spec ? call("POST", "/sim/faults", spec) : call("DELETE", "/sim/faults")); },
    compactAndDropWatches: async () => {
      await call("POST", "/sim/compact");
      return ((await (await call("POST", "/sim/watches/drop")).json()) as { dropped: number }).dropped;
    },
    stop: async () => {
      await sim.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface KubectlResult { code: number; stdout: string; stderr: string }

/**
 * `kubectl ARGS` against the simulated cluster, `stdin` on its standard input; a non-zero
 * exit is an error unless `allowFail`.
 */
export function kubectl(sim: Pick<Sim, "kubeconfig">, args: string[], { allowFail = false, stdin = "" } = {}): Promise<KubectlResult> {
  return new Promise((resolve, reject) => {
    const p = spawn("kubectl", ["--kubeconfig", sim.kubeconfig, ...args], { stdio: ["pipe", "pipe", "pipe"] });
    p.stdin.end(stdin);
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    p.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    p.on("error", reject);
    p.on("exit", (code) => {
      const r = { code: code ?? -1, stdout, stderr };
      if (r.code !== 0 && !allowFail) reject(new Error(`kubectl ${args.join(" ")} exited ${r.code}: ${stderr}`));
      else resolve(r);
    });
  });
}

/** The address of Docker's bridge on this machine (docker0): where a service listens for kube-sim's docker pods to reach it. */
export function bridgeGateway(): string {
  const out = execFileSync("ip", ["-4", "-o", "addr", "show", "docker0"], { encoding: "utf8" });
  const m = /inet (\d+\.\d+\.\d+\.\d+)\//.exec(out);
  if (!m) throw new Error(`Docker's bridge (docker0) has no IPv4 address: ${out.trim()}`);
  return m[1]!;
}
