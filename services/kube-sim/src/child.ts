// The simulator as a child process (`node dist/main.js`) on a free port, for tests of
// other packages: resolves once it prints its `kube-sim is up` line, or fails at the
// deadline with what it printed.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export interface KubeSimProcess {
  url: string;
  kubeconfigPath: string;
  pid: number;
  /** SIGTERM (the simulator kills its containers and exits), SIGKILL if it has not exited within 5 s. */
  kill(): Promise<void>;
}

export interface KubeSimProcessOptions {
  /** Default: a new temp dir's `kubeconfig`. */
  kubeconfigPath?: string;
  dataDir?: string;
  /** EPHEMERA_KUBE_SIM_IMAGES. */
  images?: string;
  deadlineMs?: number;
  env?: Record<string, string>;
}

/** services/kube-sim/dist/main.js, whether this module runs from src (tests) or dist. */
export const mainScript = () => join(dirname(fileURLToPath(import.meta.url)), "..", "dist", "main.js");

export function startKubeSimProcess(options: KubeSimProcessOptions = {}): Promise<KubeSimProcess> {
  const kubeconfigPath = options.kubeconfigPath ?? join(mkdtempSync(join(tmpdir(), "kube-sim-cfg-")), "kubeconfig");
  const child = spawn(process.execPath, [mainScript()], {
    env: {
      ...process.env, ...options.env,
      EPHEMERA_KUBE_SIM_LISTEN: "127.0.0.1:0",
      EPHEMERA_KUBE_SIM_KUBECONFIG: kubeconfigPath,
      ...(options.dataDir ? { EPHEMERA_KUBE_SIM_DATA: options.dataDir } : {}),
      ...(options.images ? { EPHEMERA_KUBE_SIM_IMAGES: options.images } : {}),
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
      resolve({ url: m[1]!, kubeconfigPath: m[2]!, pid: child.pid!, kill });
    });
    child.once("exit", (code, signal) => { clearTimeout(timer); fail(`exited (${signal ?? code})`); });
  });
}
