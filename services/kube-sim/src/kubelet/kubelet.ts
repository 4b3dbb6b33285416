// The simulated node: a PodRunner for every pod the store gains, the pods' directories
// under the data dir, and graceful deletion on the API's behalf. It writes to the store
// directly, so none of its updates count as API calls.
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { PodTerminator } from "../api/crud.js";
import { typeOf } from "../resources.js";
import type { Obj, Store } from "../store.js";
import { rfc3339 } from "../time.js";
import type { Lookup } from "./env.js";
import type { ImageEntry } from "./images.js";
import { PodRunner } from "./pod.js";
import type { ContainerRuntime } from "./runtime.js";

export class Kubelet implements PodTerminator {
  private readonly runners = new Map<string, PodRunner>();
  private readonly unsubscribe: () => void;
  containersStarted = 0;

  constructor(private readonly store: Store, private readonly dataDir: string, private readonly images: ImageEntry[], private readonly runtime: ContainerRuntime) {
    this.unsubscribe = store.subscribe((c) => {
      const kind = c.object["kind"];
      if (kind === "Pod" && c.type === "ADDED") {
        const pod = c.object;
        // Not inside the store's write: the runner's first status write would nest in it.
        setImmediate(() => this.admit(pod));
      } else if (kind === "Pod" && c.type === "DELETED") {
        const r = this.runners.get(c.object.metadata.uid);
        if (r) void r.kill().then(() => this.forget(r.uid));
      } else if (kind === "Secret" || kind === "ConfigMap") {
        setImmediate(() => { for (const r of this.runners.values()) r.kick(); });
      }
    });
  }

  private admit(pod: Obj): void {
    if (this.runners.has(pod.metadata.uid)) return;
    const current = this.store.get(typeOf("pods"), pod.metadata.namespace, pod.metadata.name);
    if (!current || current.metadata.uid !== pod.metadata.uid) return;
    const runner = new PodRunner(current, {
      store: this.store,
      dir: this.podDir(pod.metadata.uid),
      images: this.images,
      runtime: this.runtime,
      lookup: (ns) => this.lookup(ns),
      onContainerStarted: () => { this.containersStarted++; },
      onRemoved: (uid) => this.forget(uid),
    });
    this.runners.set(runner.uid, runner);
    runner.start();
  }

  private podDir(uid: string): string { return join(this.dataDir, "pods", uid); }

  /** A container's log file (it may not exist yet). */
  logFile(pod: Obj, container: string): string { return join(this.podDir(pod.metadata.uid), "logs", `${container}.log`); }

  private forget(uid: string): void {
    if (!this.runners.delete(uid)) return;
    void rm(this.podDir(uid), { recursive: true, force: true });
  }

  private lookup(ns: string): Lookup {
    return {
      secret: (name) => {
        const secret = this.store.get(typeOf("secrets"), ns, name);
        return secret ? ((secret["data"] ?? {}) as Record<string, string>) : undefined;
      },
      configMap: (name) => {
        const cm = this.store.get(typeOf("configmaps"), ns, name);
        if (!cm) return undefined;
        const binary = Object.entries((cm["binaryData"] ?? {}) as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]);
        return { ...((cm["data"] ?? {}) as Record<string, string>), ...Object.fromEntries(binary) };
      },
    };
  }

  deletePod(pod: Obj, graceSeconds: number | undefined): Obj {
    const runner = this.runners.get(pod.metadata.uid);
    if (!runner || runner.idle) {
      runner?.terminate(0);
      return this.store.remove(typeOf("pods"), pod.metadata.namespace, pod.metadata.name) ?? pod;
    }
    const spec = pod["spec"] as Record<string, unknown>;
    const grace = graceSeconds ?? (spec["terminationGracePeriodSeconds"] as number | undefined) ?? 30;
    const already = pod.metadata["deletionGracePeriodSeconds"] as number | undefined;
    // A second delete may shorten the grace period, never lengthen it.
    const effective = already !== undefined ? Math.min(already, grace) : grace;
    const updated = this.store.put(typeOf("pods"), {
      ...pod,
      metadata: { ...pod.metadata, deletionTimestamp: rfc3339(Date.now() + effective * 1000), deletionGracePeriodSeconds: effective },
    } as Obj);
    runner.terminate(effective);
    return this.store.get(typeOf("pods"), pod.metadata.namespace, pod.metadata.name) ?? updated;
  }

  podsRunning(): number {
    return this.store.list(typeOf("pods")).filter((p) => (p["status"] as Record<string, unknown> | undefined)?.["phase"] === "Running").length;
  }

  async stop(): Promise<void> {
    this.unsubscribe();
    await Promise.all([...this.runners.values()].map((r) => r.kill()));
    this.runners.clear();
    await this.runtime.stop();
  }
}
