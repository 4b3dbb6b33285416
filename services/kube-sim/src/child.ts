// The simulator as a child process (`node dist/main.js`) on a free port, for tests of
// other packages: resolves once it prints its `kube-sim is up` line, or fails at the
// deadline with what it printed.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findRepoRoot } from "./repo.js";

export interface KubeSimProcess {
  url: string;
  kubeconfigPath: string;
  pid: number;
  /** The cluster DNS server, as `KubeSim.dnsServer`; undefined when Services are not routed. */
  dnsServer: string | undefined;
  /** SIGTERM (the simulator kills its containers and exits), SIGKILL if it has not exited within 5 s. */
  kill(): Promise<void>;
}

export interface KubeSimProcessOptions {
  /** Default: a new temp dir's `kubeconfig`. */
  kubeconfigPath?: string;
  dataDir?: string;
  /** EPHEMERA_KUBE_SIM_IMAGES. */
  images?: string;
  /** EPHEMERA_KUBE_SIM_RUNTIME; default docker when Docker answers. */
  runtime?: "docker" | "process";
  deadlineMs?: number;
  /** Where the ephemera checkout is; default found above the cwd. */
  repoRoot?: string;
  env?: Record<string, string>;
}

/** The built entry point, services/kube-sim/dist/main.js (`pnpm build` makes it). */
export const mainScript = (repoRoot = findRepoRoot()) => join(repoRoot, "services", "kube-sim", "dist", "main.js");

export function startKubeSimProcess(options: KubeSimProcessOptions = {}): Promise<KubeSimProcess> {
  const kubeconfigPath = options.kubeconfigPath ?? join(mkdtempSync(join(tmpdir(), "kube-sim-cfg-")), "kubeconfig");
  const child = spawn(process.execPath, [mainScript(options.repoRoot)], {
    env: {
      ...process.env, ...options.env,
      EPHEMERA_KUBE_SIM_LISTEN: "127.0.0.1:0",
      EPHEMERA_KUBE_SIM_KUBECONFIG: kubeconfigPath,
      ...(options.dataDir ? { EPHEMERA_KUBE_SIM_DATA: options.dataDir } : {}),
      ...(options.images ? { EPHEMERA_KUBE_SIM_IMAGES: options.images } : {}),
      ...(options.runtime ? { EPHEMERA_KUBE_SIM_RUNTIME: options.runtime } : {}),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    const t = setTimeout(() => child.kill("SIGKILL"), 5000);
    await exited;
    clearTimeout(t);
  };
  return new Promise((resolve, reject) => {
    let output = "";
    const fail = (why: string) => { void kill(); reject(new Error(`kube-sim did not come up: ${why}\n${output}`)); };
    const timer = setTimeout(() => fail(`no "kube-sim is up" line within ${options.deadlineMs ?? 15000} ms`), options.deadlineMs ?? 15000);
    child.stderr.on("data", (d: Buffer) => { output += d.toString(); });
    child.stdout.on("data", (d: Buffer) => {
      output += d.toString();
      const m = /kube-sim is up on (\S+) \(kubeconfig (.+)\)/.exec(output);
      if (!m) return;
      clearTimeout(timer);
      const dns = /cluster DNS at (\S+)/.exec(output)?.[1];
      resolve({ url: m[1]!, kubeconfigPath: m[2]!, pid: child.pid!, dnsServer: dns, kill });
    });
    child.once("exit", (code, signal) => { clearTimeout(timer); fail(`exited (${signal ?? code})`); });
  });
}
