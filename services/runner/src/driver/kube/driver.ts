// The Kubernetes driver: each step attempt is one runner pod (pod.ts) in its plugin's
// namespace, with the run's token in a Secret of the same name. The driver creates the
// Secret then the pod (or finds the pod, after a restart: the name comes from the run id),
// follows it through one shared watch per namespace, streams main's log while it runs,
// reads the outcome from the pod's status and the agents' termination messages, deletes
// the Secret once the pod has ended, reads a success's outputs back from the IO context,
// and deletes the pod once the runner has recorded the result: four API writes a step.
import { PassThrough } from "node:stream";
import * as k8s from "@kubernetes/client-node";
import { FailureReason, fetchStepOutputs, ioContextClient, parseStepReport, type StepReport } from "@ephemera/io-agent";
import { errorMessage, isValidationError, longTimeout, retry, type ClientTls, type Logger, type LongTimeout } from "@ephemera/kit";
import type * as pb from "@ephemera/proto";
import type { RunRequest, RunningStep, StepDriver } from "../driver.js";
import { ApiCalls, retryableApiError, statusOf } from "./calls.js";
import { PULL, podOutcome, type Graces, type PodOutcome, type PodStatus } from "./outcome.js";
import { buildPod, buildTokenSecret, labelValue, podName, RUN_ID_ANNOTATION, type PodRequest, type Resources } from "./pod.js";
import { NamespaceWatch, type PodEvent } from "./watch.js";

export interface KubeDriverOptions {
  kubeconfig: k8s.KubeConfig;
  /** Where runner pods go when the plugin names no `runner.namespace`. */
  namespace: string;
  /** Labels the pods (ephemera.dev/prefix) so that side-by-side installations never see each other's. */
  prefix: string;
  /** The image of ephemera-init and ephemera-sidecar. */
  agentImage: string;
  /** host:port of the IO context as the pods reach it. */
  podIOContext: string;
  /** host:port of the IO context as the runner reaches it (to read a success's outputs back). */
  iocontext: string;
  iocontextTls?: ClientTls;
  logger: Logger;
  graces?: Partial<Graces>;
  /** The containers' requests and limits when the plugin's overlay names none (pod.ts has the defaults). */
  resources?: { main?: Resources; agents?: Resources };
  /** Whether a run's result is recorded: pods of such runs that nobody follows are deleted. */
  isFinished?: (runId: string) => Promise<boolean>;
  now?: () => number;
}

/** Within the 30 s in which every outcome is to be named. */
export const DEFAULT_GRACES: Graces = { imagePullMs: 15_000, unknownMs: 15_000 };
/** After a pod has ended, how long its log stream may take to deliver the rest. */
const LOG_DRAIN_MS = 3000;
/** How long a namespace's pods may take to be listed the first time (the watch keeps trying meanwhile). */
const SYNC_TIMEOUT_MS = 30_000;
/** How often pods nobody follows are looked at (from the watch's cache: no API call). */
const SWEEP_MS = 60_000;
/** A call the API server refused for now (429, 5xx, no answer) is tried again this way. */
const API_RETRY = { attempts: 8, baseMs: 200, maxMs: 5000, retryable: retryableApiError };

interface Followed {
  onEvent(e: PodEvent): void;
}

export class KubeDriver implements StepDriver {
  readonly name = "kubernetes";
  readonly calls = new ApiCalls();
  private readonly core: k8s.CoreV1Api;
  private readonly watches = new Map<string, NamespaceWatch>();
  private readonly followed = new Map<string, Followed>();
  /** Pods this driver asked to delete (a DELETED event for another pod means someone else removed it). */
  private readonly deleting = new Set<string>();
  private readonly graces: Graces;
  private readonly now: () => number;
  private client?: pb.IOContextClient;
  private sweeper?: NodeJS.Timeout;

  constructor(private readonly o: KubeDriverOptions) {
    this.core = o.kubeconfig.makeApiClient(k8s.CoreV1Api);
    this.graces = { ...DEFAULT_GRACES, ...o.graces };
    this.now = o.now ?? Date.now;
  }

  /** Watches the default namespace before any work is taken, and deletes what earlier runners left finished. */
  async start(): Promise<void> {
    await this.watch(this.o.namespace);
    this.sweeper = setInterval(() => void this.sweep(), SWEEP_MS);
    this.sweeper.unref();
  }

  run(request: RunRequest): RunningStep {
    const d = request.dispatch;
    let stop: ((graceMs: number) => void) | undefined;
    let stopAsked: number | undefined;
    let mainExited!: () => void;
    let mainBegan!: () => void;
    const exited = new Promise<void>((resolve) => (mainExited = resolve));
    const began = new Promise<void>((resolve) => (mainBegan = resolve));
    const result = this.follow(request, (s) => {
      stop = s;
      if (stopAsked !== undefined) s(stopAsked);
    }, { began: () => mainBegan(), exited: () => mainExited() }).catch((err: unknown): StepReport => {
      this.o.logger.error({ runId: d.runId, err }, "the Kubernetes driver failed");
      return { outcome: "failed", reason: FailureReason.DriverError, message: `the Kubernetes driver failed: ${errorMessage(err)}` };
    });
    void result.then(() => { mainBegan(); mainExited(); });
    return {
      result,
      // The script's container started: its init (fetching the inputs, which waits out an IO
      // context or NATS failover) and the pod's start were not the step's time.
      began,
      // The script's container ended: the sidecar's storing of its outputs (which waits out an
      // IO context or NATS failover) is no longer the step's time.
      exited,
      stop: (graceMs) => {
        stopAsked = graceMs;
        stop?.(graceMs);
      },
    };
  }

  /** Whether the run has a pod: a restarted runner follows it rather than starting another. */
  async attached(d: pb.StepDispatch): Promise<boolean> {
    const ns = this.namespaceOf(d);
    return (await this.watch(ns)).get(podName(d.runId)) !== undefined;
  }

  async cleanup(runId: string): Promise<void> {
    const name = podName(runId);
    for (const w of this.watches.values()) {
      const pod = w.get(name);
      if (pod && !pod.metadata?.deletionTimestamp) await this.deletePod(w.namespace, name, 0);
    }
  }

  /** The API calls so far, by verb and resource. */
  apiCalls(): Record<string, number> {
    return this.calls.snapshot();
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const w of this.watches.values()) void w.stop();
    this.watches.clear();
    this.client?.close();
    this.client = undefined;
  }

  private namespaceOf(d: pb.StepDispatch): string {
    return d.runner?.namespace || this.o.namespace;
  }

  private async watch(namespace: string): Promise<NamespaceWatch> {
    let w = this.watches.get(namespace);
    if (!w) {
      w = new NamespaceWatch(this.o.kubeconfig, namespace, `ephemera.dev/prefix=${labelValue(this.o.prefix)}`, this.calls, this.o.logger);
      this.watches.set(namespace, w);
      w.subscribe((e) => this.followed.get(key(namespace, e.pod.metadata?.name ?? ""))?.onEvent(e));
      const created = w;
      w.synced(SYNC_TIMEOUT_MS).then(() => this.sweep(created)).catch(() => undefined);
    }
    try {
      await w.synced(SYNC_TIMEOUT_MS);
    } catch (err) {
      this.watches.delete(namespace);
      void w.stop();
      throw new Error(`cannot list the runner pods in namespace ${namespace}: ${errorMessage(err)}`, { cause: err });
    }
    return w;
  }

  private io(): pb.IOContextClient {
    return (this.client ??= ioContextClient(this.o.iocontext, this.o.iocontextTls));
  }

  private async follow(
    request: RunRequest, onStoppable: (stop: (graceMs: number) => void) => void, main: { began: () => void; exited: () => void },
  ): Promise<StepReport> {
    const d = request.dispatch;
    const podRequest: PodRequest = {
      dispatch: d, prefix: this.o.prefix, agentImage: this.o.agentImage, iocontext: this.o.podIOContext,
      defaultNamespace: this.o.namespace, env: request.env, ...(this.o.resources ? { resources: this.o.resources } : {}),
    };
    let pod: ReturnType<typeof buildPod>;
    try {
      pod = buildPod(podRequest);
    } catch (err) {
      if (isValidationError(err)) return failed(FailureReason.ConfigError, `the runner pod cannot be built: ${errorMessage(err)}`);
      throw err;
    }
    const name = podName(d.runId);
    const namespace = this.namespaceOf(d);
    const watch = await this.watch(namespace);
    const log = new LogFollower(this.o.kubeconfig, namespace, name, this.calls, skipping(request.skipLogBytes ?? 0, request.onLog));
    const ended = this.outcome(watch, name, log, main);
    // Stopped: the pod is deleted (SIGTERM, then SIGKILL after the grace); stopped before it exists: never made.
    let stopGrace: number | undefined;
    let exists = false;
    const remove = (graceMs: number) => void this.deletePod(namespace, name, Math.ceil(graceMs / 1000)).catch((err: unknown) => {
      this.o.logger.warn({ runId: d.runId, err: errorMessage(err) }, "cannot delete the pod of a stopped step");
    });
    onStoppable((graceMs) => {
      stopGrace ??= graceMs;
      if (exists) remove(graceMs);
    });
    if (watch.get(name)) {
      this.o.logger.info({ runId: d.runId, pod: name, namespace }, "following the run's existing pod");
    } else if (stopGrace === undefined) {
      // The Secret first: the pod mounts it, and would wait for it otherwise.
      const secret = buildTokenSecret({ ...podRequest, token: request.token });
      let refused = await this.createTokenSecret(namespace, secret);
      if (!refused) {
        refused = await this.createPod(namespace, pod);
        if (refused) await this.removeTokenSecret(namespace, name, d.runId);
      }
      if (refused) {
        ended.cancel();
        return refused;
      }
    }
    exists = true;
    if (stopGrace !== undefined) {
      if (!watch.get(name)) ended.cancel();
      remove(stopGrace);
    }
    const outcome = await ended.result;
    // The agents are done with the token (or the step is over without them): it goes now, whatever the outcome.
    await this.removeTokenSecret(namespace, name, d.runId);
    await log.drained(LOG_DRAIN_MS);
    return this.report(outcome, request);
  }

  /** Creates the pod; an existing one (a create retried after its answer was lost) is followed. */
  private async createPod(namespace: string, pod: unknown): Promise<StepReport | undefined> {
    try {
      await retry(() => this.calls.count("create", "pods", () => this.core.createNamespacedPod({ namespace, body: pod as k8s.V1Pod })), API_RETRY);
      return undefined;
    } catch (err) {
      return statusOf(err) === 409 ? undefined : refusal(err, "pod", namespace);
    }
  }

  /**
   * Creates the run's token Secret. One that exists (left by a runner that stopped before
   * making the pod, or a create retried) is replaced: its token may be older than this one.
   */
  private async createTokenSecret(namespace: string, secret: unknown): Promise<StepReport | undefined> {
    const body = secret as k8s.V1Secret;
    try {
      const create = () => this.core.createNamespacedSecret({ namespace, body });
      await retry(() => this.calls.count("create", "secrets", create), API_RETRY);
      return undefined;
    } catch (err) {
      if (statusOf(err) !== 409) return refusal(err, "token Secret", namespace);
    }
    try {
      const name = body.metadata!.name!;
      const replace = () => this.core.replaceNamespacedSecret({ namespace, name, body });
      await retry(() => this.calls.count("update", "secrets", replace), API_RETRY);
      return undefined;
    } catch (err) {
      return refusal(err, "token Secret", namespace);
    }
  }

  /** Deletes the run's token Secret (gone already: fine); a failure is logged, the leftovers sweep tries again. */
  private async removeTokenSecret(namespace: string, name: string, runId: string): Promise<void> {
    try {
      const remove = () => this.core.deleteNamespacedSecret({ namespace, name });
      await retry(() => this.calls.count("delete", "secrets", remove), API_RETRY);
    } catch (err) {
      if (statusOf(err) === 404) return;
      this.o.logger.warn({ runId, secret: name, namespace, err: apiMessage(err) }, "cannot delete the run's token Secret");
    }
  }

  private async deletePod(namespace: string, name: string, gracePeriodSeconds: number): Promise<void> {
    const k = key(namespace, name);
    this.deleting.add(k);
    try {
      await retry(() => this.calls.count("delete", "pods", () => this.core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds })), API_RETRY);
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
    } finally {
      // A pod deleted and later made again (a new attempt) has another name: the mark can go
      // once the watch has seen it gone, or after a while.
      setTimeout(() => this.deleting.delete(k), 10 * 60_000).unref();
    }
  }

  /** Settles with the pod's outcome, from the watch's events and the graces' timers. */
  private outcome(watch: NamespaceWatch, name: string, log: LogFollower, main: { began: () => void; exited: () => void }) {
    const k = key(watch.namespace, name);
    let settle!: (o: Ended) => void;
    const result = new Promise<Ended>((resolve) => (settle = resolve));
    let condition = "";
    let since = this.now();
    // Graces come from the pod (its deletion grace, in seconds) and the environment: any length.
    let timer: LongTimeout | undefined;
    const done = (o: Ended) => {
      timer?.clear();
      this.followed.delete(k);
      settle(o);
    };
    let deletedBySomeone = false;
    const look = (pod: k8s.V1Pod) => {
      const status = (pod.status ?? {}) as PodStatus;
      if (mainStarted(status)) {
        log.start();
        main.began();
      }
      if (mainEnded(status)) main.exited();
      if (pod.metadata?.deletionTimestamp) {
        // Being deleted: the kubelet stops the containers and may write Failed (exit 143)
        // before the pod goes; what ended it is the deletion, named when DELETED comes.
        // A pod on a lost node may never go: then the deletion is the outcome anyway.
        deletedBySomeone ||= !this.deleting.has(k);
        timer?.clear();
        const graceMs = ((pod.metadata.deletionGracePeriodSeconds ?? 30) + 30) * 1000;
        timer = longTimeout(() => done(this.deleting.has(k) ? { outcome: { kind: "Stopped" }, pod } : { outcome: { kind: "PodDeleted" }, pod }), graceMs);
        return;
      }
      // Graces count from when the pod entered its current waiting (or Unknown) condition.
      const now = this.now();
      const c = conditionOf(status);
      if (c !== condition) {
        condition = c;
        since = now;
      }
      const outcome = podOutcome(status, now, since, this.graces);
      if (outcome) return done({ outcome, pod });
      // Nothing may happen on the watch when a grace runs out: a timer looks again then.
      timer?.clear();
      if (c) {
        const grace = c.startsWith("Unknown") ? this.graces.unknownMs : this.graces.imagePullMs;
        timer = longTimeout(() => {
          const p = watch.get(name);
          if (p) look(p);
        }, Math.max(0, since + grace - now) + 20);
      }
    };
    this.followed.set(k, {
      onEvent: (e) => {
        if (e.type === "change") return look(e.pod);
        if (this.deleting.has(k)) return done({ outcome: { kind: "Stopped" }, pod: e.pod });
        if (deletedBySomeone) return done({ outcome: { kind: "PodDeleted" }, pod: e.pod });
        // Gone without our seeing its deletion start (a re-list): what its last status says, if it ended.
        const status = (e.pod.status ?? {}) as PodStatus;
        done({ outcome: podOutcome(status, this.now(), since, this.graces) ?? { kind: "PodDeleted" }, pod: e.pod });
      },
    });
    const seen = watch.get(name);
    if (seen) look(seen);
    return { result, cancel: () => done({ outcome: { kind: "Stopped" } }) };
  }

  /** The step's report, from the outcome and the agents' termination messages. */
  private async report(ended: Ended, request: RunRequest): Promise<StepReport> {
    const { outcome, pod } = ended;
    const d = request.dispatch;
    const statuses = [...(pod?.status?.initContainerStatuses ?? []), ...(pod?.status?.containerStatuses ?? [])];
    const agentReport = (container: string) => {
      const text = statuses.find((s) => s.name === container)?.state?.terminated?.message;
      return text ? parseStepReport(text) : undefined;
    };
    switch (outcome.kind) {
      case "Stopped":
        return failed(FailureReason.Cancelled, "the step's pod was deleted when the step was stopped");
      case "PodDeleted":
        return failed(FailureReason.PodDeleted, `the step's pod ${pod?.metadata?.name ?? ""} was deleted by someone else before it ended`);
      case "Failed": {
        // The agents say why (the script's exit code, a missing output, refused inputs); the pod only that something exited.
        const said = agentReport("ephemera-sidecar") ?? agentReport("ephemera-init");
        if (said?.outcome === "failed") return said;
        return { outcome: "failed", reason: FailureReason.Error, exitCode: outcome.exitCode, message: outcome.message };
      }
      case "Succeeded": {
        const said = agentReport("ephemera-sidecar");
        if (!said) return failed(FailureReason.DriverError, "the pod succeeded but ephemera-sidecar left no report in its termination message");
        if (said.outcome === "failed") return said;
        if (said.stored === false) {
          return failed(FailureReason.DriverError, "the step succeeded but its pod could not store the outputs in the IO context");
        }
        return this.readOutputs(d, request.token);
      }
      default:
        return failed(outcome.kind, outcome.message);
    }
  }

  /** A success's outputs, as the sidecar stored them (the runner journals them in the result). */
  private async readOutputs(d: pb.StepDispatch, token: string): Promise<StepReport> {
    let values: pb.OutputValue[];
    try {
      values = await fetchStepOutputs(this.io(), d.runId, token);
    } catch (err) {
      return failed(FailureReason.DriverError, `cannot read the step's outputs back from the IO context: ${errorMessage(err)}`);
    }
    const byName = new Map(values.map((v) => [v.name, v.value]));
    const missing = d.outputs.filter((n) => !byName.has(n));
    if (missing.length) return failed(FailureReason.DriverError, `the IO context holds no value for output(s) ${missing.join(", ")} of the run`);
    return {
      outcome: "succeeded",
      outputs: d.outputs.map((n) => {
        const value = Buffer.from(byName.get(n)!);
        return { name: n, size: value.length, base64: value.toString("base64") };
      }),
    };
  }

  /** Pods of this prefix nobody follows whose run is recorded: deleted (a runner that died between recording and deleting). */
  private async sweep(only?: NamespaceWatch): Promise<void> {
    if (!this.o.isFinished) return;
    for (const w of only ? [only] : [...this.watches.values()]) {
      for (const pod of w.pods()) {
        const name = pod.metadata?.name ?? "";
        const runId = pod.metadata?.annotations?.[RUN_ID_ANNOTATION];
        const k = key(w.namespace, name);
        // A pod this runner follows, or is deleting already (its delete being retried), is not a leftover.
        if (!runId || pod.metadata?.deletionTimestamp || this.followed.has(k) || this.deleting.has(k)) continue;
        try {
          if (await this.o.isFinished(runId)) {
            this.o.logger.info({ runId, pod: name, namespace: w.namespace }, "deleting the pod of a run already recorded");
            await this.removeTokenSecret(w.namespace, name, runId);
            await this.deletePod(w.namespace, name, 0);
          }
        } catch (err) {
          this.o.logger.warn({ runId, err: errorMessage(err) }, "cannot tidy a leftover runner pod");
        }
      }
    }
  }
}

type Ended = { outcome: PodOutcome | { kind: "Stopped" } | { kind: "PodDeleted" }; pod?: k8s.V1Pod };

/**
 * main's log, streamed into the step's log from the moment main starts: one request that
 * follows it to its end. If that stream breaks, the whole log is fetched once and what was
 * not yet delivered is passed on.
 */
class LogFollower {
  private started = false;
  private received = 0;
  private ended?: Promise<boolean>;
  private abort?: AbortController;

  constructor(
    private readonly kc: k8s.KubeConfig, private readonly namespace: string, private readonly name: string,
    private readonly calls: ApiCalls, private readonly onLog: (chunk: Buffer) => void,
  ) {}

  start(): void {
    if (this.started) return;
    this.started = true;
    const stream = new PassThrough();
    stream.on("data", (chunk: Buffer) => {
      this.received += chunk.length;
      this.onLog(chunk);
    });
    this.ended = new Promise<boolean>((resolve) => {
      stream.on("end", () => resolve(true));
      stream.on("error", () => resolve(false));
      this.calls.count("get", "pods/log", () => new k8s.Log(this.kc).log(this.namespace, this.name, "main", stream, { follow: true }))
        .then((abort) => (this.abort = abort))
        .catch(() => resolve(false));
    });
  }

  /** Waits (at most `ms`) for the stream to deliver all; else fetches the log once and passes on the rest. */
  async drained(ms: number): Promise<void> {
    if (!this.started) return; // main never ran: there is no log
    let timer: NodeJS.Timeout | undefined;
    const whole = await Promise.race([this.ended!, new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)))]);
    clearTimeout(timer);
    if (whole) return;
    this.abort?.abort();
    try {
      const core = this.kc.makeApiClient(k8s.CoreV1Api);
      const text = await this.calls.count("get", "pods/log", () => core.readNamespacedPodLog({ namespace: this.namespace, name: this.name, container: "main" }));
      const rest = Buffer.from(text).subarray(this.received);
      if (rest.length) this.onLog(rest);
    } catch {
      // The pod is gone with its log: what was streamed is what there is.
    }
  }
}

/** `onLog` without the first `skip` bytes of the stream. */
function skipping(skip: number, onLog: (chunk: Buffer) => void): (chunk: Buffer) => void {
  let left = skip;
  return (chunk) => {
    if (left >= chunk.length) {
      left -= chunk.length;
      return;
    }
    onLog(left ? chunk.subarray(left) : chunk);
    left = 0;
  };
}

const key = (namespace: string, name: string) => `${namespace}/${name}`;

const failed = (reason: string, message: string): StepReport => ({ outcome: "failed", reason: reason as FailureReason, message });

/** Why the cluster would not take the run's pod or token Secret, as the step's failure. */
function refusal(err: unknown, what: "pod" | "token Secret", namespace: string): StepReport {
  const code = statusOf(err);
  const why = apiMessage(err);
  const resource = what === "pod" ? "pods" : "secrets";
  if (code === 404) {
    return failed(FailureReason.ConfigError, `cannot create the runner ${what}: namespace ${namespace} does not exist (${why})`);
  }
  if (code === 403) {
    const rbac = "(see docs/kubernetes.md, RBAC)";
    return failed(FailureReason.ConfigError, `the runner may not create ${resource} in namespace ${namespace} ${rbac}: ${why}`);
  }
  if (code === 422 || code === 400) return failed(FailureReason.ConfigError, `the cluster refused the runner ${what}: ${why}`);
  return failed(FailureReason.DriverError, `cannot create the runner ${what} in namespace ${namespace}: ${why}`);
}

/** main has ended (whatever its exit code): the script is done. */
const mainEnded = (s: PodStatus) => Boolean(s.containerStatuses?.find((c) => c.name === "main")?.state?.terminated);

/** main has started (or ended): its log exists. */
const mainStarted = (s: PodStatus) => {
  const main = s.containerStatuses?.find((c) => c.name === "main")?.state;
  return Boolean(main?.running || main?.terminated);
};

/**
 * Pure: the condition a grace counts in, "" for none: a container failing to get its image
 * (ErrImagePull and ImagePullBackOff alternate: one grace for both), or the pod Unknown.
 */
export function conditionOf(s: PodStatus): string {
  const pulling = [...(s.initContainerStatuses ?? []), ...(s.containerStatuses ?? [])]
    .filter((c) => PULL.has(c.state?.waiting?.reason ?? "")).map((c) => `${c.name}:pull`);
  if (s.phase === "Unknown") return `Unknown;${pulling.join(",")}`;
  return pulling.join(",");
}

function apiMessage(err: unknown): string {
  if (err instanceof k8s.ApiException) {
    const body = err.body as { message?: string } | string | undefined;
    const message = typeof body === "string" ? safeJson(body)?.message ?? body : body?.message;
    return `${err.code}${message ? `: ${message}` : ""}`;
  }
  return errorMessage(err);
}

function safeJson(text: string): { message?: string } | undefined {
  try {
    return JSON.parse(text) as { message?: string };
  } catch {
    return undefined;
  }
}
