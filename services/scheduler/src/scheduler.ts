// The scheduler: turns resource provision/deprovision requests into workflows, step-run
// facts into workflow progress, and fires the workflows' timers (retries, deadlines,
// runs nobody took). What a decision implies (dispatches, cancels) is published by the
// outbox, never here. Reactions are level-triggered: each looks at the projected state of
// one resource and does what is missing, so replays, redeliveries and restarts are harmless.
import * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, folding, outputSize, runId, workflowId, type DomainEvent, type Phase } from "@ephemera/events";
import { Feed, Projection, execute, type Commit, type EventStore, type RecordedEvent, type Subscription, type WorkQueue } from "@ephemera/eventstore";
import { DueIndex, type HealthSource, type Logger } from "@ephemera/kit";
import { foldPlugin, foldSandbox, noPlugin, noSandbox, type PluginFacts, type SandboxFacts } from "./facts.js";
import type { WorkflowMetrics } from "./metrics.js";
import { startOutbox } from "./outbox.js";
import { commandKey, decide, nextDue, type WorkflowCommand } from "./workflow/decide.js";
import { DEFAULT_POLICY, type Policy } from "./workflow/policy.js";
import { planSteps } from "./workflow/plan.js";
import { evolve, initialWorkflow, isActive, type WorkflowState } from "./workflow/state.js";

export interface SchedulerDeps {
  store: EventStore;
  queue: WorkQueue<pb.StepDispatch>;
  logger: Logger;
  /** The clock every decision is made with. */
  now?: () => number;
  policy?: Partial<Policy>;
  /** Counts what the decisions append (metrics.ts); absent: nothing counted. */
  metrics?: WorkflowMetrics;
}

/** Where a command comes from, for the events it appends. */
interface Cause { correlationId: string; causationId: string }

const foldWorkflow = (s: WorkflowState, r: RecordedEvent): WorkflowState => {
  const e = decode(r);
  return e ? evolve(s, e, Date.parse(r.time)) : s;
};

export class Scheduler {
  readonly sandboxes = new Projection<SandboxFacts | undefined>(Aggregates.sandbox, noSandbox, folding(foldSandbox));
  readonly workflows = new Projection<WorkflowState>(Aggregates.workflow, initialWorkflow, foldWorkflow);
  readonly plugins = new Projection<PluginFacts>(Aggregates.plugin, noPlugin, folding(foldPlugin));
  private readonly feed: Feed;
  private readonly byRoutingKey = new Map<string, string>();
  private readonly timers: DueIndex;
  private readonly now: () => number;
  private readonly policy: Policy;
  private subscriptions: Subscription[] = [];

  constructor(private readonly deps: SchedulerDeps) {
    this.now = deps.now ?? Date.now;
    this.policy = { ...DEFAULT_POLICY, ...deps.policy };
    this.feed = new Feed(deps.store, [this.sandboxes, this.workflows, this.plugins], deps.logger);
    this.timers = new DueIndex((ids, now) => this.fireTimers(ids, now), this.now);
    this.feed.onCommit((c) => {
      if (c.aggregate === Aggregates.sandbox) {
        const rk = this.sandboxes.get(c.aggregateId)?.state?.routingKey;
        if (rk) this.byRoutingKey.set(rk, c.aggregateId);
      } else if (c.aggregate === Aggregates.workflow) {
        this.timers.set(c.aggregateId, nextDue(this.workflows.getOrEmpty(c.aggregateId).state, this.policy));
      }
    });
  }

  /** Unhealthy for good once a projection cannot fold an event. */
  get health(): HealthSource {
    return this.feed;
  }

  async start(): Promise<void> {
    await this.feed.start();
    for (const [name] of this.sandboxes.entries()) await this.reconcileSandbox(name, undefined);
    this.timers.arm();
    this.subscriptions = [
      startOutbox({ ...this.deps, feed: this.feed, workflows: this.workflows, plugins: this.plugins }),
      this.deps.store.subscribe({ durable: "scheduler", from: this.feed.position }, (c) => this.react(c)),
    ];
  }

  async stop(): Promise<void> {
    this.timers.stop();
    await Promise.all(this.subscriptions.map((s) => s.stop()));
    await this.feed.stop();
  }

  private async react(commit: Commit): Promise<void> {
    await this.feed.waitFor(commit.position);
    const first = commit.events[0];
    const cause = first && { correlationId: first.correlationId, causationId: first.id };
    switch (commit.aggregate) {
      case Aggregates.sandbox:
        return this.reconcileSandbox(commit.aggregateId, cause);
      case Aggregates.steprun:
        for (const r of commit.events) await this.recordRun(decode(r), { correlationId: r.correlationId, causationId: r.id });
        return;
      case Aggregates.workflow: {
        // A create workflow that ended may unblock its resource's delete workflow.
        const [rk, resource] = commit.aggregateId.split(".");
        const sandbox = rk && this.byRoutingKey.get(rk);
        if (sandbox && resource) await this.reconcileResource(sandbox, resource, cause);
        return;
      }
    }
  }

  private async recordRun(e: DomainEvent | undefined, cause: Cause): Promise<void> {
    if (e?.type === "ephemera.steprun.started.v1") {
      await this.command(e.data.workflowId, { kind: "run-started", step: e.data.step, runId: e.data.runId, runner: e.data.runner }, cause);
    } else if (e?.type === "ephemera.steprun.succeeded.v1") {
      await this.command(e.data.workflowId, {
        kind: "record-success", step: e.data.step, runId: e.data.runId,
        outputs: e.data.outputs.map((o) => ({ key: o.name, size: outputSize(o) })),
      }, cause);
    } else if (e?.type === "ephemera.steprun.failed.v1") {
      await this.command(e.data.workflowId, {
        kind: "record-failure", step: e.data.step, runId: e.data.runId,
        failure: e.data.failure ?? pb.StepFailure.fromPartial({ step: e.data.step, runId: e.data.runId, reason: "Error" }),
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
  }
}
