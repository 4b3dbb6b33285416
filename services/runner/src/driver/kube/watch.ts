// One shared watch per namespace and kind: the runner pods of this prefix (or the forked
// workloads), listed once and then watched from the list's resourceVersion (client-node's
// informer re-lists on 410 Gone). A watch that fails is started again with backoff;
// nothing polls.
import * as k8s from "@kubernetes/client-node";
import { Backoff, errorMessage, type Logger } from "@ephemera/kit";
import type { ApiCalls } from "./calls.js";

export type PodEvent = { type: "change"; pod: k8s.V1Pod } | { type: "delete"; pod: k8s.V1Pod };

/** What an informer watches: a namespace's objects of one kind, by label. */
export interface WatchTarget<T extends k8s.KubernetesObject> {
  namespace: string;
  /** The collection's path, e.g. `/apis/apps/v1/namespaces/shop/deployments`. */
  path: string;
  /** As the API counts it (`pods`, `deployments`). */
  resource: string;
  labelSelector: string;
  list: () => Promise<k8s.KubernetesListObject<T>>;
  /** What the logs call them (`runner pods`); the resource when not given. */
  what?: string;
}

/** Backoff of a failed watch: 250 ms doubling to 10 s. */
const RESTART = { firstMs: 250, maxMs: 10_000 };

/** The runner pods of a namespace (see ObjectWatch). */
export class NamespaceWatch {
  private readonly objects: ObjectWatch<k8s.V1Pod>;

  constructor(kc: k8s.KubeConfig, readonly namespace: string, labelSelector: string, calls: ApiCalls, logger: Logger) {
    const core = kc.makeApiClient(k8s.CoreV1Api);
    this.objects = new ObjectWatch(kc, {
      namespace, path: `/api/v1/namespaces/${namespace}/pods`, resource: "pods", labelSelector, what: "runner pods",
      list: () => core.listNamespacedPod({ namespace, labelSelector }),
    }, calls, logger);
  }

  synced(timeoutMs: number): Promise<void> {
    return this.objects.synced(timeoutMs);
  }

  /** The pod as last seen, from the cache (no API call). */
  get(name: string): k8s.V1Pod | undefined {
    return this.objects.get(name);
  }

  pods(): readonly k8s.V1Pod[] {
    return this.objects.all();
  }

  subscribe(listener: (e: PodEvent) => void): () => void {
    return this.objects.subscribe((e) => listener(e.type === "change" ? { type: "change", pod: e.object } : { type: "delete", pod: e.object }));
  }

  stop(): Promise<void> {
    return this.objects.stop();
  }
}

export type ObjectEvent<T> = { type: "change" | "delete"; object: T };

/** One namespace's objects of one kind, by label: listed once, then watched. */
export class ObjectWatch<T extends k8s.KubernetesObject> {
  readonly namespace: string;
  private readonly informer: k8s.Informer<T> & k8s.ObjectCache<T>;
  private readonly listeners = new Set<(e: ObjectEvent<T>) => void>();
  private readonly restarts = new Backoff(RESTART);
  private restart?: NodeJS.Timeout;
  private stopped = false;
  private lastError: unknown;
  private listedOnce!: () => void;
  /** Settles once the objects have been listed: until then the cache cannot say one is absent. */
  private readonly listed = new Promise<void>((resolve) => (this.listedOnce = resolve));
  private readonly what: string;

  constructor(kc: k8s.KubeConfig, target: WatchTarget<T>, calls: ApiCalls, private readonly logger: Logger) {
    this.namespace = target.namespace;
    this.what = target.what ?? target.resource;
    const list = async () => {
      const objects = await calls.count("list", target.resource, target.list);
      this.listedOnce();
      return objects;
    };
    this.informer = k8s.makeInformer(kc, target.path, list, target.labelSelector);
    this.informer.on("add", (object) => this.emit({ type: "change", object }));
    this.informer.on("update", (object) => this.emit({ type: "change", object }));
    this.informer.on("delete", (object) => this.emit({ type: "delete", object }));
    // Every (re)connection is a watch request; a list precedes it only when there is no resourceVersion.
    this.informer.on("connect", () => calls.counted("watch", target.resource));
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

  /** The object as last seen, from the cache (no API call). */
  get(name: string): T | undefined {
    return this.informer.get(name, this.namespace);
  }

  all(): readonly T[] {
    return this.informer.list(this.namespace);
  }

  subscribe(listener: (e: ObjectEvent<T>) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.restart);
    await this.informer.stop();
  }

  private emit(e: ObjectEvent<T>): void {
    this.restarts.reset();
    for (const l of this.listeners) l(e);
  }

  private failed(err: unknown): void {
    this.lastError = err;
    if (this.stopped) return;
    const delayMs = this.restarts.next();
    this.logger.warn({ namespace: this.namespace, err: errorMessage(err), retryInMs: delayMs }, `the watch of ${this.what} failed; starting it again`);
    this.restart = setTimeout(() => {
      this.informer.start().catch((e: unknown) => this.failed(e));
    }, delayMs);
  }
}
