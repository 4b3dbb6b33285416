// What the kube-sim integration tests share: a simulator on a free port, client-node
// clients through its kubeconfig, and waiting on a condition with a deadline.
import { CoreV1Api, KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startKubeSim, type KubeSim, type KubeSimOptions } from "./start.js";

export interface Harness { sim: KubeSim; kc: KubeConfig; core: CoreV1Api; ns: string }

let counter = 0;
/** A fresh name per test, so tests of one run never share objects. */
export const fresh = (prefix: string) => `${prefix}-${process.pid}-${++counter}`;

/** A simulator of its own; the process runtime unless the options say otherwise. */
export async function startHarness(options: KubeSimOptions = { runtime: "process" }): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), "kube-sim-test-"));
  const sim = await startKubeSim({ listen: "127.0.0.1:0", kubeconfigPath: join(dir, "kubeconfig"), ...options });
  const kc = new KubeConfig();
  kc.loadFromFile(sim.kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  const ns = fresh("ns");
  await core.createNamespace({ body: { metadata: { name: ns } } });
  return { sim, kc, core, ns };
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, deadlineMs = 15000): Promise<T> {
  const until = Date.now() + deadlineMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (err) { last = err; }
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}${last ? `: ${String((last as Error).message ?? last)}` : ""}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export async function podWhere(h: Harness, name: string, ok: (p: V1Pod) => boolean, what: string, deadlineMs?: number): Promise<V1Pod> {
  let seen: V1Pod | undefined;
  try {
    return await waitFor(what, async () => {
      seen = await h.core.readNamespacedPod({ name, namespace: h.ns });
      return ok(seen) ? seen : undefined;
    }, deadlineMs);
  } catch (err) {
    throw new Error(`${(err as Error).message}; last status: ${JSON.stringify(seen?.status)}`, { cause: err });
  }
}

export const sim = (h: Harness, path: string, method = "GET", body?: unknown) =>
  fetch(`${h.sim.url}${path}`, { method, ...(body !== undefined ? { body: JSON.stringify(body), headers: { "Content-Type": "application/json" } } : {}) });

/** The parsed JSON body of a client-node ApiException (a Kubernetes Status). */
export function statusOf(err: unknown): Record<string, unknown> {
  const e = err as { code?: number; body?: unknown };
  return typeof e.body === "string" ? JSON.parse(e.body) as Record<string, unknown> : (e.body as Record<string, unknown>);
}

export async function rejection(p: Promise<unknown>): Promise<unknown> {
  try { await p; } catch (err) { return err; }
  throw new Error("expected a failure, got success");
}

export function pod(name: string, spec: Record<string, unknown>, annotations?: Record<string, string>): V1Pod {
  return { metadata: { name, ...(annotations ? { annotations } : {}) }, spec: { restartPolicy: "Never", ...spec } as V1Pod["spec"] };
}

export const sh = (name: string, script: string, extra: Record<string, unknown> = {}) => ({ name, image: "busybox", command: ["sh", "-c", script], ...extra });
