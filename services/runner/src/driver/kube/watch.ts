// One shared watch per namespace: the runner pods of this prefix, listed once and then
// watched from the list's resourceVersion (client-node's informer re-lists on 410 Gone).
// A watch that fails is started again with backoff; nothing polls a pod.
import * as k8s from "@kubernetes/client-node";
import { errorMessage, type Logger } from "@ephemera/kit";
import type { ApiCalls } from "./calls.js";

export type PodEvent = { type: "change"; pod: k8s.V1Pod } | { type: "delete"; pod: k8s.V1Pod };

/** Backoff of a failed watch: 250 ms doubling to 10 s. */
const RESTART_BASE_MS = 250;
const RESTART_MAX_MS = 10_000;

export class NamespaceWatch {
  private readonly informer: k8s.Informer<k8s.V1Pod> & k8s.ObjectCache<k8s.V1Pod>;
  private readonly listeners = new Set<(e: PodEvent) => void>();
  private failures = 0;
  private restart?: NodeJS.Timeout;
  private stopped = false;
  private lastError: unknown;
  private listedOnce!: () => void;
  /** Settles once the pods have been listed: until then the cache cannot say a pod is absent. */
  private readonly listed = new Promise<void>((resolve) => (this.listedOnce = resolve));

  constructor(kc: k8s.KubeConfig, readonly namespace: string, labelSelector: string, calls: ApiCalls, private readonly logger: Logger) {
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const list = async () => {
      const pods = await calls.count("list", "pods", () => core.listNamespacedPod({ namespace, labelSelector }));
      this.listedOnce();
      return pods;
    };
    this.informer = k8s.makeInformer(kc, `/api/v1/namespaces/${namespace}/pods`, list, labelSelector);
    this.informer.on("add", (pod) => this.emit({ type: "change", pod }));
    this.informer.on("update", (pod) => this.emit({ type: "change", pod }));
    this.informer.on("delete", (pod) => this.emit({ type: "delete", pod }));
    // Every (re)connection is a watch request; a list precedes it only when there is no resourceVersion.
    this.informer.on("connect", () => calls.counted("watch", "pods"));
    this.informer.on("error", (err) => this.failed(err));
    this.informer.start().catch((err: unknown) => this.failed(err));
  }

  /** Waits for the first list (the watch keeps trying meanwhile); past `timeoutMs`, fails with the last error. */
  async synced(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(this.lastError ? errorMessage(this.lastError) : `no answer within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([this.listed, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The pod as last seen, from the cache (no API call). */
  get(name: string): k8s.V1Pod | undefined {
    return this.informer.get(name, this.namespace);
  }

  pods(): readonly k8s.V1Pod[] {
    return this.informer.list(this.namespace);
  }

  subscribe(listener: (e: PodEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.restart);
    await this.informer.stop();
  }

  private emit(e: PodEvent): void {
    this.failures = 0;
    for (const l of this.listeners) l(e);
  }

  private failed(err: unknown): void {
    this.lastError = err;
    if (this.stopped) return;
    const delayMs = Math.min(RESTART_MAX_MS, RESTART_BASE_MS * 2 ** this.failures++);
    this.logger.warn({ namespace: this.namespace, err: errorMessage(err), retryInMs: delayMs }, "the watch of runner pods failed; starting it again");
    this.restart = setTimeout(() => {
      this.informer.start().catch((e: unknown) => this.failed(e));
    }, delayMs);
  }
}
