// The scheduler: turns resource provision/deprovision requests into workflows, step-run
// facts into workflow progress, and fires the workflows' timers (retries, deadlines,
// runs nobody took). What a decision implies (dispatches, cancels) is published by the
// outbox, never here. Reactions are level-triggered: each looks at the projected state of
// one resource and does what is missing, so replays, redeliveries and restarts are harmless.
import * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, folding, outputSize, runId, workflowId, type DomainEvent, type Phase } from "@ephemera/events";
import {
  Feed, InMemoryLeaseStore, Lease, Projection, execute, leaseHolderId,
  type Commit, type DeliverAgain, type EventStore, type LeaseStore, type RecordedEvent, type SnapshotStore, type Subscription, type WorkQueue,
} from "@ephemera/eventstore";
import { DueIndex, type HealthSource, type Logger } from "@ephemera/kit";
import { foldPlugin, foldSandbox, noPlugin, noSandbox, type PluginFacts, type SandboxFacts } from "./facts.js";
import type { WorkflowMetrics } from "./metrics.js";
import { DirectDispatches, publishDispatch, startOutbox } from "./outbox.js";
import { commandKey, decide, nextDue, type RunStart, type WorkflowCommand } from "./workflow/decide.js";
import { DEFAULT_POLICY, type Policy } from "./workflow/policy.js";
import { planSteps } from "./workflow/plan.js";
import { evolve, initialWorkflow, isActive, isTerminal, type WorkflowState } from "./workflow/state.js";

export interface SchedulerDeps {
  store: EventStore;
  queue: WorkQueue<pb.StepDispatch>;
  logger: Logger;
  /** The clock every decision is made with. */
  now?: () => number;
  policy?: Partial<Policy>;
  /** Counts what the decisions append (metrics.ts); absent: nothing counted. */
  metrics?: WorkflowMetrics;
  /** Where the projections' snapshot is kept, and the code's fingerprint (codeFingerprint); absent: the stream is replayed at each start. */
  snapshots?: { store: SnapshotStore; fingerprint: string };
  /**
   * Where the replicas hold the timers' lease (retries, deadlines and runs nobody took fire
   * in one replica at a time). Absent: a store of this process's own, so it is the only holder.
   */
  leases?: LeaseStore;
  /** How long the timers' lease lasts unless renewed (default 10 s). */
  leaseTtlMs?: number;
}

/** The lease whose holder fires the scheduler's timers. */
export const SCHEDULER_TIMERS_LEASE = "scheduler-timers";

/** Where a command comes from, for the events it appends. */
interface Cause { correlationId: string; causationId: string }

const foldWorkflow = (s: WorkflowState, r: RecordedEvent): WorkflowState => {
  const e = decode(r);
  return e ? evolve(s, e, Date.parse(r.time)) : s;
};

/**
 * Holds what is live: a deleted sandbox leaves memory once its workflows have ended (a
 * force-deleted one still has its create workflow cancelled first), and with it its
 * workflows; a workflow that ended, or never started, of a routing key no held sandbox has
 * is retired; so is a plugin with no version left.
 */
/** The routing key a workflow id begins with. */
const routingKeyOf = (id: string) => id.split(".")[0]!;

/** Whether a run is its step's current one and still queued (its start not recorded) in a workflow under way. */
const queuedRun = (state: WorkflowState | undefined, runId: string) =>
  !!state && isActive(state) && state.steps.some((s) => s.runId === runId && s.status === "queued");

export class Scheduler {
  readonly sandboxes = new Projection<SandboxFacts | undefined>(Aggregates.sandbox, noSandbox, folding(foldSandbox), {
    retired: (s) => !!s?.deleted && this.workflowsEnded(s),
  });
  readonly workflows = new Projection<WorkflowState>(Aggregates.workflow, initialWorkflow, foldWorkflow, {
    retired: (s, id) => (s.status === "none" || isTerminal(s.status)) && !this.byRoutingKey.has(routingKeyOf(id)),
  });
  readonly plugins = new Projection<PluginFacts>(Aggregates.plugin, noPlugin, folding(foldPlugin), { retired: (s) => s.size === 0 });
  readonly feed: Feed;
  /** Routing key → name of each sandbox held. */
  private readonly byRoutingKey = new Map<string, string>();
  private readonly timers: DueIndex;
  private timersLease?: Lease;
  private readonly now: () => number;
  private readonly policy: Policy;
  private subscriptions: Subscription[] = [];
  /** Dispatches published right after their decision's append: the outbox skips them. */
  private readonly direct = new DirectDispatches();
  /**
   * Runs whose start this replica put off recording (their commit comes back after
   * Policy.startRecordDelayMs), by workflow then run: recorded before any other command on
   * their workflow, which may turn on whether they run (a cancel waits for running steps).
   */
  private readonly startsPutOff = new Map<string, Map<string, { step: string; runner: string; at: string; cause: Cause | undefined }>>();

  constructor(private readonly deps: SchedulerDeps) {
    this.now = deps.now ?? Date.now;
    this.policy = { ...DEFAULT_POLICY, ...deps.policy };
    this.feed = new Feed(deps.store, [this.sandboxes, this.workflows, this.plugins], deps.logger, deps.snapshots && { ...deps.snapshots, name: "scheduler" });
    this.timers = new DueIndex((ids, now) => this.fireTimers(ids, now), this.now);
    // Every replica keeps the index; only the lease's holder fires it (start()).
    this.timers.pause();
    this.feed.onRestore(() => {
      for (const [name, { state }] of this.sandboxes.entries()) if (state) this.byRoutingKey.set(state.routingKey, name);
    });
    this.feed.onCommit((c) => {
      if (c.aggregate === Aggregates.sandbox) {
        const held = this.sandboxes.get(c.aggregateId)?.state;
        if (held) this.byRoutingKey.set(held.routingKey, c.aggregateId);
        else this.forget(this.sandboxes.latest(c.aggregateId)?.state);
      } else if (c.aggregate === Aggregates.workflow) {
        this.timers.set(c.aggregateId, nextDue(this.workflows.getOrEmpty(c.aggregateId).state, this.policy));
        this.forgetStartsNoLongerPutOff(c.aggregateId);
        // The last workflow of a deleted sandbox ended: the sandbox leaves memory now.
        const name = this.byRoutingKey.get(routingKeyOf(c.aggregateId));
        const sandbox = name ? this.sandboxes.get(name)?.state : undefined;
        if (name && sandbox?.deleted && this.workflowsEnded(sandbox)) {
          this.sandboxes.retire(name);
          this.forget(sandbox);
        }
      }
    });
  }

  /** Whether every workflow of the sandbox's resources has ended or never started. */
  private workflowsEnded(sandbox: SandboxFacts): boolean {
    return sandbox.resources.every((r) => (["create", "delete"] as const).every((phase) => {
      const status = this.workflows.getOrEmpty(workflowId(sandbox.routingKey, r.name, phase)).state.status;
      return status === "none" || isTerminal(status);
    }));
  }

  /** A sandbox that left memory takes its routing key and its ended workflows with it. */
  private forget(sandbox: SandboxFacts | undefined): void {
    if (!sandbox || this.sandboxes.get(sandbox.name)) return;
    this.byRoutingKey.delete(sandbox.routingKey);
    for (const r of sandbox.resources) {
      for (const phase of ["create", "delete"] as const) this.workflows.retire(workflowId(sandbox.routingKey, r.name, phase));
    }
  }

  /** Unhealthy for good once a projection cannot fold an event. */
  get health(): HealthSource {
    return this.feed;
  }

  async start(): Promise<void> {
    await this.feed.start();
    for (const [name] of this.sandboxes.entries()) await this.reconcileSandbox(name, undefined);
    this.timersLease = Lease.hold(this.deps.leases ?? new InMemoryLeaseStore(), {
      name: SCHEDULER_TIMERS_LEASE, holder: leaseHolderId("scheduler"), ttlMs: this.deps.leaseTtlMs ?? 10_000, logger: this.deps.logger,
      // The new holder fires what came due meanwhile at once.
      onAcquired: () => this.timers.arm(),
      onLost: () => this.timers.pause(),
    });
    this.subscriptions = [
      startOutbox({ ...this.deps, feed: this.feed, workflows: this.workflows, plugins: this.plugins }, this.direct),
      this.deps.store.subscribe({ durable: "scheduler", from: this.feed.position }, (c) => this.react(c)),
    ];
  }

  /** Whether this replica fires the timers now (holds their lease). */
  get firesTimers(): boolean {
    return this.timersLease?.held ?? false;
  }

  async stop(): Promise<void> {
    this.timers.stop();
    await this.timersLease?.stop();
    await Promise.all(this.subscriptions.map((s) => s.stop()));
    await this.feed.stop();
  }

  private async react(commit: Commit): Promise<void | DeliverAgain> {
    await this.feed.waitFor(commit.position);
    const first = commit.events[0];
    const cause = first && { correlationId: first.correlationId, causationId: first.id };
    switch (commit.aggregate) {
      case Aggregates.sandbox:
        return this.reconcileSandbox(commit.aggregateId, cause);
      case Aggregates.steprun: {
        const events = commit.events.map(decode);
        const only = events.length === 1 ? events[0] : undefined;
        if (only?.type === "ephemera.steprun.started.v1" && this.putOffStart(only.data, commit.events[0]!.time, cause)) {
          return { againInMs: this.policy.startRecordDelayMs };
        }
        for (const [i, r] of commit.events.entries()) await this.recordRun(events[i], { correlationId: r.correlationId, causationId: r.id });
        return;
      }
      case Aggregates.workflow: {
        // A create workflow that ended may unblock its resource's delete workflow.
        const [rk, resource] = commit.aggregateId.split(".");
        const sandbox = rk && this.byRoutingKey.get(rk);
        if (sandbox && resource) await this.reconcileResource(sandbox, resource, cause);
        return;
      }
    }
  }

  /**
   * Whether to put off recording a run's start: the first time its commit comes, while its
   * step waits for it (queued). The commit comes back after the delay (a durable's delivery
   * again, so a restart in between loses nothing) and the start is recorded then, unless the
   * run ended meanwhile: its result, recorded from a queued step, says all the start would.
   * A replica that did not put it off (another one, or this one after a restart) puts it off
   * once more.
   */
  private putOffStart(run: { workflowId: string; step: string; runId: string; runner: string }, at: string, cause: Cause | undefined): boolean {
    if (this.policy.startRecordDelayMs <= 0) return false;
    const putOff = this.startsPutOff.get(run.workflowId);
    if (putOff?.has(run.runId)) {
      this.forgetPutOff(run.workflowId, run.runId);
      return false;
    }
    if (!queuedRun(this.workflows.get(run.workflowId)?.state, run.runId)) return false;
    const runs = putOff ?? new Map();
    runs.set(run.runId, { step: run.step, runner: run.runner, at, cause });
    this.startsPutOff.set(run.workflowId, runs);
    return true;
  }

  /** The runs of a workflow whose start this replica has put off recording. */
  startsPutOffOf(workflowId: string): string[] {
    return [...(this.startsPutOff.get(workflowId)?.keys() ?? [])];
  }

  /**
   * A start put off here whose run is no longer its step's queued one (recorded by another
   * replica, or the workflow moved on or ended) has nothing left to record: forgotten, so
   * what another replica took over does not stay in this one's memory.
   */
  private forgetStartsNoLongerPutOff(workflowId: string): void {
    const putOff = this.startsPutOff.get(workflowId);
    if (!putOff) return;
    const state = this.workflows.latest(workflowId)?.state;
    for (const runId of [...putOff.keys()]) if (!queuedRun(state, runId)) this.forgetPutOff(workflowId, runId);
  }

  private forgetPutOff(workflowId: string, runId: string): void {
    const putOff = this.startsPutOff.get(workflowId);
    if (!putOff?.delete(runId) || putOff.size) return;
    this.startsPutOff.delete(workflowId);
  }

  /** Records the starts put off of a workflow's runs (but `except`) before another command on it. */
  private async recordPutOffStarts(workflowId: string, except: string | undefined): Promise<void> {
    const putOff = this.startsPutOff.get(workflowId);
    if (!putOff) return;
    for (const [runId, { step, runner, cause }] of [...putOff]) {
      if (runId === except) continue;
      this.forgetPutOff(workflowId, runId);
      await this.command(workflowId, { kind: "run-started", step, runId, runner }, cause);
    }
  }

  /**
   * The start of a run whose result has come, if its workflow has not recorded it: from what
   * this replica put off, or (put off by another replica, or before a restart) from the run's
   * own events, a read only then.
   */
  private async unrecordedStart(workflowId: string, runId: string): Promise<RunStart | undefined> {
    const putOff = this.startsPutOff.get(workflowId)?.get(runId);
    this.forgetPutOff(workflowId, runId);
    if (!queuedRun(this.workflows.get(workflowId)?.state, runId)) return undefined;
    if (putOff) return { runner: putOff.runner, at: putOff.at };
    for (const r of (await this.deps.store.read(Aggregates.steprun, runId)).events) {
      const e = decode(r);
      if (e?.type === "ephemera.steprun.started.v1") return { runner: e.data.runner, at: r.time };
    }
    return undefined;
  }

  private async recordRun(e: DomainEvent | undefined, cause: Cause): Promise<void> {
    if (e?.type === "ephemera.steprun.started.v1") {
      await this.command(e.data.workflowId, { kind: "run-started", step: e.data.step, runId: e.data.runId, runner: e.data.runner }, cause);
    } else if (e?.type === "ephemera.steprun.succeeded.v1") {
      const started = await this.unrecordedStart(e.data.workflowId, e.data.runId);
      await this.command(e.data.workflowId, {
        kind: "record-success", step: e.data.step, runId: e.data.runId,
        outputs: e.data.outputs.map((o) => ({ key: o.name, size: outputSize(o), ...(o.sha256 ? { sha256: o.sha256 } : {}) })),
        ...(started ? { started } : {}),
      }, cause);
    } else if (e?.type === "ephemera.steprun.failed.v1") {
      const started = await this.unrecordedStart(e.data.workflowId, e.data.runId);
      await this.command(e.data.workflowId, {
        kind: "record-failure", step: e.data.step, runId: e.data.runId,
        failure: e.data.failure ?? pb.StepFailure.fromPartial({ step: e.data.step, runId: e.data.runId, reason: "Error" }),
        ...(started ? { started } : {}),
      }, cause);
    }
  }

  private async fireTimers(ids: string[], now: number): Promise<void> {
    for (const id of ids) {
      try {
        await this.command(id, { kind: "tick" }, undefined, now);
      } catch (err) {
        this.deps.logger.warn({ err, workflow: id }, "workflow timer failed; will fire again");
      }
    }
  }

  private async reconcileSandbox(name: string, cause: Cause | undefined): Promise<void> {
    const sandbox = this.sandboxes.get(name)?.state;
    if (!sandbox) return;
    this.byRoutingKey.set(sandbox.routingKey, name);
    for (const r of sandbox.resources) await this.reconcileResource(name, r.name, cause);
  }

  private async reconcileResource(sandboxName: string, resourceName: string, cause: Cause | undefined): Promise<void> {
    const sandbox = this.sandboxes.get(sandboxName)?.state;
    const resource = sandbox?.resources.find((r) => r.name === resourceName);
    if (!sandbox || !resource) return;
    const createId = workflowId(sandbox.routingKey, resource.name, "create");
    const deleteId = workflowId(sandbox.routingKey, resource.name, "delete");
    const create = this.workflows.getOrEmpty(createId).state;

    if (sandbox.deleted || resource.deprovision) {
      if (isActive(create)) {
        const reason = sandbox.forced ? "sandbox force-deleted" : "sandbox deleted";
        await this.command(createId, { kind: "cancel", reason }, cause);
        return; // the delete workflow starts once the create workflow has ended
      }
      if (!resource.deprovision || sandbox.forced) return;
      const del = this.workflows.getOrEmpty(deleteId).state;
      if (del.status === "failed" && resource.deprovisionRetries > del.retried) {
        await this.command(deleteId, { kind: "retry" }, cause);
        return;
      }
      if (del.status !== "none") return;
      // Nothing to undo when no create step ever started: the delete workflow ends at once,
      // without needing a runner (e.g. a cluster that never had one).
      const skip = !(await this.anyRunStarted(create)) ? "no create step ever started: nothing to delete" : "";
      await this.startWorkflow(sandbox, resource.name, "delete", skip, cause);
      return;
    }
    if (!resource.provision) return;
    if (create.status === "none") await this.startWorkflow(sandbox, resource.name, "create", "", cause);
    else if (create.status === "failed" && resource.retries > create.retried) await this.command(createId, { kind: "retry" }, cause);
  }

  /** Whether any attempt of any step of the workflow was started by a runner (read from the step runs themselves). */
  private async anyRunStarted(wf: WorkflowState): Promise<boolean> {
    if (wf.status === "none") return false;
    for (const s of wf.steps) {
      for (let attempt = 1; attempt <= s.attempt; attempt++) {
        const run = await this.deps.store.read(Aggregates.steprun, runId(wf.started.workflowId, s.name, attempt));
        if (run.events.some((e) => e.type === "ephemera.steprun.started.v1")) return true;
      }
    }
    return false;
  }

  private async startWorkflow(sandbox: SandboxFacts, resourceName: string, phase: Phase, skippedReason: string, cause: Cause | undefined): Promise<void> {
    const resource = sandbox.resources.find((r) => r.name === resourceName)!;
    const spec = this.plugins.get(resource.plugin)?.state.get(resource.version);
    const id = workflowId(sandbox.routingKey, resource.name, phase);
    const missing = !spec && !skippedReason;
    if (missing) this.deps.logger.error({ workflow: id, plugin: `${resource.plugin}@${resource.version}` }, "plugin version not found; the workflow fails");
    await this.command(id, {
      kind: "start",
      started: pb.WorkflowStarted.fromPartial({
        workflowId: id, sandbox: sandbox.name, routingKey: sandbox.routingKey, resource: resource.name, phase,
        plugin: resource.plugin, version: resource.version, cluster: sandbox.cluster, params: resource.params,
        steps: spec && !skippedReason ? planSteps(spec, phase) : [],
        createWorkflowId: phase === "delete" ? workflowId(sandbox.routingKey, resource.name, "create") : "",
        skippedReason,
        ...(missing ? {
          failure: {
            step: "", runId: "", reason: "PluginVersionMissing", logTail: "",
            message: `plugin ${resource.plugin}@${resource.version} is not published (it was deleted, or never existed)`,
          },
        } : {}),
      }),
    }, cause);
  }

  private async command(id: string, command: WorkflowCommand, cause: Cause | undefined, now = this.now()): Promise<void> {
    if (command.kind !== "run-started") await this.recordPutOffStarts(id, "runId" in command ? command.runId : undefined);
    // The outbox may meet this append's commit before the append returns here: it waits until
    // the dispatches the commit decided are known to be published here (or not).
    // Done at the latest when this command is, whatever happens in between (a second call does nothing).
    const appending = this.direct.appending(id);
    try {
      const { appended, entity } = await execute(
        this.deps.store, this.workflows, id,
        (state) => decide(command, state, now, this.policy).map(encode),
        { source: "scheduler", command: commandKey(command), ...cause },
      );
      // A duplicate is a command that had landed already: counted then.
      if (appended && !appended.duplicate) this.deps.metrics?.appended(appended.events, entity.state);
      for (const recorded of appended?.events ?? []) {
        const data = recorded.data as { step?: string; runId?: string };
        this.deps.logger.info({ workflow: id, type: recorded.type, step: data.step, runId: data.runId }, "workflow event");
      }
      if (appended && !appended.duplicate) await this.dispatchNow(entity.state, appended.events, appending);
    } finally {
      appending();
    }
  }

  /**
   * Publishes the dispatches just decided without waiting for the outbox to meet them on the
   * stream (a hop on every step's path). The append came first, so nothing undecided is ever
   * published; a publish that fails is left to the outbox, which publishes every dispatch it
   * did not see published here.
   */
  private async dispatchNow(wf: WorkflowState, events: RecordedEvent[], appended: () => void): Promise<void> {
    const deps = { queue: this.deps.queue, plugins: this.plugins, workflows: this.workflows, logger: this.deps.logger };
    // Every publish is begun (known to the outbox) before the append counts as done, then made.
    const publishes = events.flatMap((recorded) => {
      const e = decode(recorded);
      return e?.type === "ephemera.workflow.step_dispatched.v1" ? [{ recorded, published: this.direct.begin(e.data.runId) }] : [];
    });
    appended();
    for (const { recorded, published } of publishes) {
      try {
        published((await publishDispatch(deps, wf, recorded)) !== undefined);
      } catch (err) {
        published(false);
        this.deps.logger.debug({ err, workflow: wf.status === "none" ? "" : wf.started.workflowId }, "dispatch not published at once; the outbox publishes it");
      }
    }
  }
}
