// One pod on the simulated node: its sandbox, its init containers in order, then its
// containers together, each run by the kubelet's container runtime (runtime.ts); every change of state written as the pod's
// status, one MODIFIED event each. Deletion, the active deadline and the injected faults
// end it early.
import { createHash } from "node:crypto";
import { mkdirSync, openSync, readSync, closeSync, writeFileSync, statSync, chmodSync } from "node:fs";
import { join, posix } from "node:path";
import { typeOf } from "../resources.js";
import type { Obj, Store } from "../store.js";
import { rfc3339 } from "../time.js";
import { ConfigError, containerCommand, containerEnv, type Lookup, type PodFacts } from "./env.js";
import { podFault, type PodFault } from "./faults.js";
import { mountsFor, type ImageEntry } from "./images.js";
import type { Mount } from "./launch.js";
import { CreateContainerError, isImagePullError, type ContainerRuntime, type PodSandbox, type RunningContainer } from "./runtime.js";
import { conditions, hasStarted, isRunning, isTerminated, type Condition, type ContainerState, type ContainerStatus } from "./status.js";
import { prepareVolumes } from "./volumes.js";

type Rec = Record<string, unknown>;

export const NODE_NAME = "kube-sim";
const RETRY_MS = 1000;
/** How long a container waits in ImagePullBackOff before its image is tried again. */
const PULL_BACKOFF_MS = 10_000;

export interface PodContext {
  store: Store;
  /** This pod's own directory (volumes, private /tmp, logs, termination files). */
  dir: string;
  images: ImageEntry[];
  runtime: ContainerRuntime;
  lookup: (namespace: string) => Lookup;
  onContainerStarted: () => void;
  onRemoved: (uid: string) => void;
}

interface Started { container: RunningContainer; startedAt: string; termFile: string; logFile: string }

/** A terminal state fixed by the kubelet, not by the containers' exits. */
interface Verdict { phase: "Failed" | "Unknown"; reason: string; message: string }

export class PodRunner {
  readonly uid: string;
  private readonly ns: string;
  private readonly name: string;
  private readonly spec: Rec;
  private readonly fault: PodFault | undefined;
  private readonly inits: ContainerStatus[];
  private readonly mains: ContainerStatus[];
  private readonly procs = new Map<string, RunningContainer>();
  private sandbox: PodSandbox | undefined;
  private sandboxRemoved: Promise<void> | undefined;
  private readonly oomKilled = new Set<string>();
  private readonly timers: NodeJS.Timeout[] = [];
  private conds: Condition[] = [];
  private verdict: Verdict | undefined;
  private phase: "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown" = "Pending";
  private readonly startTime = rfc3339();
  /** No container starts any more (deleted, past its deadline, evicted, lost, stopped). */
  private ended = false;
  /** The kubelet has stopped reporting this pod (NodeLost, or the simulator stopping). */
  private frozen = false;
  private deleting = false;
  private removed = false;
  /** Waits to cut short (a retry, a pull failure) when something changes. */
  private readonly wakers = new Set<() => void>();

  constructor(pod: Obj, private readonly ctx: PodContext) {
    this.uid = pod.metadata.uid;
    this.ns = pod.metadata.namespace!;
    this.name = pod.metadata.name;
    this.spec = pod["spec"] as Rec;
    this.fault = podFault(pod.metadata.annotations);
    const status = (c: Rec, reason: string): ContainerStatus => ({
      name: String(c["name"]), state: { waiting: { reason } }, lastState: {}, ready: false, restartCount: 0,
      image: String(c["image"]), imageID: "", started: false,
    });
    const hasInits = this.containers("initContainers").length > 0;
    this.inits = this.containers("initContainers").map((c) => status(c, "PodInitializing"));
    this.mains = this.containers("containers").map((c) => status(c, hasInits ? "PodInitializing" : "ContainerCreating"));
  }

  private containers(list: "initContainers" | "containers"): Rec[] {
    return (this.spec[list] ?? []) as Rec[];
  }

  start(): void {
    this.run().catch((err: unknown) => {
      this.verdict = { phase: "Failed", reason: "KubeSimError", message: String((err as Error)?.message ?? err) };
      this.write();
    });
  }

  /** The pod as the store holds it, unless it is gone or is another pod of the same name. */
  private current(): Obj | undefined {
    const pod = this.ctx.store.get(typeOf("pods"), this.ns, this.name);
    return pod && pod.metadata.uid === this.uid ? pod : undefined;
  }

  private write(spec?: Rec): void {
    const pod = this.current();
    if (!pod || this.frozen) return;
    const now = rfc3339();
    const completed = this.phase === "Succeeded" || this.phase === "Failed";
    this.conds = conditions(this.inits, this.mains, completed, this.conds, now, this.startTime);
    const extra = this.verdict?.reason === "Evicted"
      ? [{ type: "DisruptionTarget", status: "True", reason: "TerminationByKubelet", message: this.verdict.message, lastTransitionTime: now, lastProbeTime: null }]
      : [];
    const status: Rec = {
      phase: this.verdict?.phase ?? this.phase,
      ...(this.verdict ? { reason: this.verdict.reason, message: this.verdict.message } : {}),
      conditions: [...this.conds, ...extra],
      ...(this.sandbox ? { hostIP: this.sandbox.hostIP, hostIPs: [{ ip: this.sandbox.hostIP }], podIP: this.sandbox.podIP, podIPs: [{ ip: this.sandbox.podIP }] } : {}),
      startTime: this.startTime,
      ...(this.inits.length ? { initContainerStatuses: structuredClone(this.inits) } : {}),
      containerStatuses: structuredClone(this.mains),
      qosClass: (pod["status"] as Rec | undefined)?.["qosClass"] ?? "BestEffort",
    };
    this.ctx.store.put(typeOf("pods"), { ...pod, ...(spec ? { spec } : {}), status } as Obj);
  }

  private async run(): Promise<void> {
    const pod = this.current();
    if (!pod) return;
    this.write({ ...(pod["spec"] as Rec), nodeName: NODE_NAME });
    const deadline = this.spec["activeDeadlineSeconds"];
    if (typeof deadline === "number") this.timers.push(setTimeout(() => this.deadlineExceeded(), deadline * 1000));

    const volumes = await this.retrying(() => prepareVolumes(this.spec, join(this.ctx.dir, "volumes"), this.ctx.lookup(this.ns)), ({ message }) => {
      for (const c of [...this.inits, ...this.mains]) if ("waiting" in c.state) c.state = { waiting: { reason: "ContainerCreating", message } };
    });
    if (!volumes) return;
    this.sandbox = await this.ctx.runtime.sandbox({ uid: this.uid, namespace: this.ns, name: this.name, spec: this.spec });
    // Deleted or stopped while the sandbox was made: nothing else will remove it.
    if (this.ended) { await this.sandbox.remove().catch(() => undefined); return; }

    for (const [i, spec] of this.containers("initContainers").entries()) {
      const exitCode = await this.runContainer(spec, this.inits[i]!, volumes, true);
      if (exitCode === undefined) return;
      if (exitCode !== 0) {
        this.phase = "Failed";
        for (const c of this.mains) c.state = { waiting: { reason: "PodInitializing" } };
        this.finish();
        return;
      }
    }
    for (const c of this.mains) if ("waiting" in c.state) c.state = { waiting: { reason: "ContainerCreating" } };
    if (this.inits.length) this.write();
    const codes = await Promise.all(this.containers("containers").map((spec, i) => this.runContainer(spec, this.mains[i]!, volumes, false)));
    if (codes.some((c) => c === undefined)) return;
    this.phase = codes.every((c) => c === 0) ? "Succeeded" : "Failed";
    this.finish();
  }

  /** Calls `attempt` until it stops throwing a ConfigError (retried every second and when a secret or config map changes). */
  private async retrying<T>(attempt: () => T | Promise<T>, onError: (err: ConfigError) => void): Promise<T | undefined> {
    let lastMessage = "";
    for (;;) {
      if (this.ended) return undefined;
      try {
        return await attempt();
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        if (err.message !== lastMessage) { onError(err); this.write(); lastMessage = err.message; }
      }
      await new Promise<void>((resolve) => {
        const wake = () => { clearTimeout(t); this.wakers.delete(wake); resolve(); };
        const t = setTimeout(wake, RETRY_MS);
        this.wakers.add(wake);
      });
    }
  }

  /** A secret or config map of the namespace changed: retry what waits on one now. */
  kick(): void { for (const w of [...this.wakers]) w(); }

  /** Runs one container (restarting it as the restart policy says); its last exit code, or undefined when the pod ended first. */
  private async runContainer(spec: Rec, status: ContainerStatus, volumes: Map<string, string>, init: boolean): Promise<number | undefined> {
    const policy = String(this.spec["restartPolicy"] ?? "Always");
    for (;;) {
      if (this.ended) return undefined;
      if (this.fault?.kind === "ImagePullBackOff" && this.fault.container === status.name) {
        await this.delay(this.fault.afterMs);
        const image = status.image;
        await this.pullFailure(status, `failed to pull and unpack image "${image}": failed to resolve reference "${image}": pull access denied, repository does not exist or may require authorization`);
        return undefined;
      }
      const facts = this.facts();
      let exitCode: number | undefined;
      try {
        const started = await this.retrying(() => {
          const env = containerEnv(spec, facts, this.ctx.lookup(this.ns));
          return this.startContainer(spec, status, volumes, env, init);
        }, (err) => {
          status.state = { waiting: { reason: err instanceof CreateContainerError ? "CreateContainerError" : "CreateContainerConfigError", message: err.message } };
        });
        if (!started) return undefined;
        exitCode = await this.wait(spec, status, started);
      } catch (err) {
        if (!isImagePullError(err)) throw err;
        await this.pullFailure(status, err.message, PULL_BACKOFF_MS);
        continue;
      }
      if (exitCode === undefined) return undefined;
      const restart = !this.ended && (policy === "Always" && !init || (policy !== "Never" && exitCode !== 0));
      if (!restart) return exitCode;
      await new Promise((r) => setTimeout(r, RETRY_MS));
      status.lastState = status.state;
      status.restartCount++;
    }
  }

  private facts(): PodFacts {
    const pod = this.current();
    return {
      name: this.name, namespace: this.ns, uid: this.uid, labels: pod?.metadata.labels ?? {}, annotations: pod?.metadata.annotations ?? {},
      nodeName: NODE_NAME, podIP: this.sandbox?.podIP ?? "", hostIP: this.sandbox?.hostIP ?? "", serviceAccountName: String(this.spec["serviceAccountName"] ?? "default"),
    };
  }

  /** Starts a container in the pod's sandbox and reports it running. */
  private async startContainer(spec: Rec, status: ContainerStatus, volumes: Map<string, string>, env: Record<string, string>, init: boolean): Promise<Started> {
    const name = status.name;
    // The runtime's directory for this container (the process runtime's launcher status and private /tmp), kept across restarts.
    const runDir = join(this.ctx.dir, "run", name);
    const termFile = join(this.ctx.dir, "term", name);
    const logFile = join(this.ctx.dir, "logs", `${name}.log`);
    mkdirSync(join(this.ctx.dir, "term"), { recursive: true });
    mkdirSync(join(this.ctx.dir, "logs"), { recursive: true });
    writeFileSync(termFile, "", { mode: 0o666 });
    chmodSync(termFile, 0o666);
    const mounts: Mount[] = [];
    for (const m of (spec["volumeMounts"] ?? []) as Rec[]) {
      const source = volumes.get(String(m["name"]));
      if (!source) continue;
      mounts.push({ source: m["subPath"] ? join(source, String(m["subPath"])) : source, target: posix.resolve("/", String(m["mountPath"])), readOnly: !!m["readOnly"] });
    }
    for (const im of mountsFor(String(spec["image"] ?? ""), this.ctx.images)) {
      mounts.push({ source: im.hostDir, target: im.mountPath, readOnly: true, ...(im.standInOnly ? { standInOnly: true } : {}) });
    }
    mounts.push({ source: termFile, target: String(spec["terminationMessagePath"] ?? "/dev/termination-log"), readOnly: false });
    const container = await this.sandbox!.start({
      name,
      image: String(spec["image"] ?? ""),
      ...containerCommand(spec, env),
      env: { HOSTNAME: this.name, ...env },
      workingDir: spec["workingDir"] as string | undefined,
      securityContext: { ...((this.spec["securityContext"] ?? {}) as Rec), ...((spec["securityContext"] ?? {}) as Rec) },
      resources: (spec["resources"] ?? {}) as Rec,
      mounts,
      runDir,
      logFile,
    });
    this.procs.set(name, container);
    const startedAt = rfc3339();
    status.state = { running: { startedAt } };
    status.ready = !init;
    status.started = true;
    status.containerID = container.id;
    status.imageID = `${status.image.split(":")[0]}@sha256:${createHash("sha256").update(status.image).digest("hex")}`;
    if (!init && this.mains.every(hasStarted)) this.phase = "Running";
    this.ctx.onContainerStarted();
    this.write();
    if (this.fault && this.fault.container === name) this.timers.push(setTimeout(() => this.injectFault(name), this.fault.afterMs));
    return { container, startedAt, termFile, logFile };
  }

  /** Waits for a started container to end and reports how; its exit code, or undefined once the kubelet stopped reporting. */
  private async wait(spec: Rec, status: ContainerStatus, started: Started): Promise<number | undefined> {
    const name = status.name;
    const { exitCode, signal, oomKilled, startError } = await started.container.exited;
    this.procs.delete(name);
    if (!this.frozen) {
      const reason = this.oomKilled.has(name) || oomKilled ? "OOMKilled" : exitCode === 0 ? "Completed" : startError ? "StartError" : "Error";
      const message = startError ?? this.terminationMessage(spec, started.termFile, started.logFile, exitCode);
      const state: ContainerState = { terminated: { exitCode, ...(signal ? { signal } : {}), reason, ...(message ? { message } : {}),
        startedAt: started.startedAt, finishedAt: rfc3339(), containerID: started.container.id } };
      status.state = state;
      status.ready = false;
      this.write();
    }
    this.maybeRemove();
    return this.frozen ? undefined : exitCode;
  }

  /** The first 4096 bytes of the termination-message file, or the log's tail when the policy says so. */
  private terminationMessage(spec: Rec, termFile: string, logFile: string, exitCode: number): string {
    const text = head(termFile, 4096);
    if (text || spec["terminationMessagePolicy"] !== "FallbackToLogsOnError" || exitCode === 0) return text;
    return tail(logFile, 2048, 80);
  }

  /**
   * ErrImagePull, then ImagePullBackOff, as a kubelet reports an image it cannot have; the
   * pull is tried again after `backOffMs`, or (an injected failure) never.
   */
  private async pullFailure(status: ContainerStatus, message: string, backOffMs?: number): Promise<void> {
    if (this.ended) return;
    const image = status.image;
    status.state = { waiting: { reason: "ErrImagePull", message } };
    this.write();
    await this.delay(500);
    if (this.ended) return;
    status.state = { waiting: { reason: "ImagePullBackOff", message: `Back-off pulling image "${image}"` } };
    this.write();
    await new Promise<void>((resolve) => {
      const wake = () => { if (this.ended) done(); };
      const t = backOffMs === undefined ? undefined : setTimeout(() => done(), backOffMs);
      const done = () => { clearTimeout(t); this.wakers.delete(wake); resolve(); };
      this.wakers.add(wake);
    });
  }

  private delay(ms: number): Promise<void> {
    return new Promise((resolve) => { const t = setTimeout(resolve, ms); this.timers.push(t); });
  }

  private injectFault(container: string): void {
    if (this.ended || !this.fault) return;
    switch (this.fault.kind) {
      case "OOMKilled":
        this.oomKilled.add(container);
        this.procs.get(container)?.signal("SIGKILL");
        return;
      case "Evicted":
        this.endWith({ phase: "Failed", reason: "Evicted", message: "The node was low on resource: memory. " });
        return;
      case "NodeLost":
        this.ended = true;
        this.verdict = { phase: "Unknown", reason: "NodeLost", message: `Node ${NODE_NAME} which was running pod ${this.name} is unresponsive` };
        for (const c of this.mains) c.ready = false;
        this.write();
        this.frozen = true;
        this.killAll("SIGKILL");
        return;
      case "ImagePullBackOff":
        return;
    }
  }

  private deadlineExceeded(): void {
    if (this.ended || this.phase === "Succeeded" || this.phase === "Failed") return;
    this.endWith({ phase: "Failed", reason: "DeadlineExceeded", message: "Pod was active on the node longer than the specified deadline" });
  }

  private endWith(verdict: Verdict): void {
    this.ended = true;
    this.verdict = verdict;
    this.killAll("SIGKILL");
    this.write();
    this.kick();
  }

  private finish(): void {
    this.ended = true;
    this.write();
    this.clearTimers();
    void this.removeSandbox();
    this.maybeRemove();
  }

  private killAll(signal: "SIGTERM" | "SIGKILL"): void {
    for (const c of this.procs.values()) c.signal(signal);
  }

  /** The pod's sandbox goes once nothing of it runs (finished, deleted, or the simulator stopping). */
  private removeSandbox(): Promise<void> {
    return (this.sandboxRemoved ??= this.sandbox?.remove().catch(() => undefined) ?? Promise.resolve());
  }

  /** Nothing of the pod runs: a delete can remove it at once. */
  get idle(): boolean { return this.procs.size === 0; }

  /** Graceful deletion: TERM now, KILL after the grace period, the object removed once every process is gone. */
  terminate(graceSeconds: number): void {
    this.deleting = true;
    this.ended = true;
    this.kick();
    if (graceSeconds <= 0) this.killAll("SIGKILL");
    else {
      this.killAll("SIGTERM");
      this.timers.push(setTimeout(() => this.killAll("SIGKILL"), graceSeconds * 1000));
    }
    this.maybeRemove();
  }

  private maybeRemove(): void {
    if (!this.deleting || this.procs.size > 0 || this.removed) return;
    this.removed = true;
    this.clearTimers();
    // As a kubelet does: the pod's containers stopped, its phase is Failed before it goes.
    if (this.phase !== "Succeeded" && this.phase !== "Failed" && this.phase !== "Pending") {
      this.phase = "Failed";
      this.write();
    }
    void this.removeSandbox().then(() => {
      if (this.current()) this.ctx.store.remove(typeOf("pods"), this.ns, this.name);
      this.ctx.onRemoved(this.uid);
    });
  }

  /** The simulator stops, or the object went: kill everything, report nothing more. */
  async kill(): Promise<void> {
    this.ended = true;
    this.frozen = true;
    this.kick();
    this.clearTimers();
    const waits = [...this.procs.values()].map((c) => c.exited);
    this.killAll("SIGKILL");
    await Promise.all(waits);
    await this.removeSandbox();
  }

  private clearTimers(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.length = 0;
  }

  get running(): boolean { return this.mains.some(isRunning); }
  get terminated(): boolean { return this.mains.every(isTerminated); }
}

function head(file: string, max: number): string {
  try {
    const fd = openSync(file, "r");
    try {
      const buf = Buffer.alloc(max);
      return buf.subarray(0, readSync(fd, buf, 0, max, 0)).toString("utf8");
    } finally { closeSync(fd); }
  } catch { return ""; }
}

function tail(file: string, maxBytes: number, maxLines: number): string {
  try {
    const size = statSync(file).size;
    const fd = openSync(file, "r");
    try {
      const n = Math.min(size, maxBytes);
      const buf = Buffer.alloc(n);
      readSync(fd, buf, 0, n, size - n);
      return buf.toString("utf8").split("\n").slice(-maxLines - 1).join("\n");
    } finally { closeSync(fd); }
  } catch { return ""; }
}
