// The scheduler: turns resource provision/deprovision requests into workflows, step-run
// results into workflow progress, and dispatches every ready step to its cluster's queue.
// Reactions are level-triggered: each looks at the projected state of one resource and
// does what is missing, so replays, redeliveries and restarts are harmless.
import * as pb from "@ephemera/proto";
import {
  Aggregates, decode, encode, evolvePlugin, evolveSandbox, evolveWorkflow, folding, initialPlugin, initialSandbox,
  initialWorkflow, isTerminal, workflowId, type DomainEvent, type Phase, type PluginState, type SandboxState,
  type WorkflowState,
} from "@ephemera/events";
import { Feed, Projection, execute, type Commit, type EventStore, type Subscription, type WorkQueue } from "@ephemera/eventstore";
import type { Logger } from "@ephemera/kit";
import { decideWorkflow, type WorkflowCommand } from "./workflow/decide.js";
import { planSteps } from "./workflow/plan.js";

export interface SchedulerDeps {
  store: EventStore;
  queue: WorkQueue<pb.StepDispatch>;
  logger: Logger;
}

export class Scheduler {
  readonly sandboxes = new Projection<SandboxState>(Aggregates.sandbox, initialSandbox, folding(evolveSandbox));
  readonly workflows = new Projection<WorkflowState>(Aggregates.workflow, initialWorkflow, folding(evolveWorkflow));
  readonly plugins = new Projection<PluginState>(Aggregates.plugin, initialPlugin, folding(evolvePlugin));
  private readonly feed: Feed;
  private readonly byRoutingKey = new Map<string, string>();
  private subscription?: Subscription;

  constructor(private readonly deps: SchedulerDeps) {
    this.feed = new Feed(deps.store, [this.sandboxes, this.workflows, this.plugins]);
    this.feed.onCommit((c) => {
      if (c.aggregate !== Aggregates.sandbox) return;
      const rk = this.sandboxes.get(c.aggregateId)?.state.routingKey;
      if (rk) this.byRoutingKey.set(rk, c.aggregateId);
    });
  }

  async start(): Promise<void> {
    await this.feed.start();
    await this.recover();
    this.subscription = this.deps.store.subscribe({ durable: "scheduler", from: this.feed.position }, (c) => this.react(c));
  }

  async stop(): Promise<void> {
    await this.subscription?.stop();
    await this.feed.stop();
  }

  /** After a restart: reconcile every resource, and re-dispatch steps whose run never started. */
  private async recover(): Promise<void> {
    for (const [name] of this.sandboxes.entries()) await this.reconcileSandbox(name);
    for (const [, { state }] of this.workflows.entries()) {
      if (isTerminal(state.status) || state.status === "none") continue;
      for (const step of state.steps) {
        if (step.status !== "running" || !step.runId) continue;
        const run = await this.deps.store.read(Aggregates.steprun, step.runId);
        if (run.version === 0) await this.dispatch(state, step.name, step.runId, step.attempt);
        else await this.recordFromRun(run.events.map(decode).filter((e): e is DomainEvent => !!e));
      }
    }
  }

  private async react(commit: Commit): Promise<void> {
    await this.feed.waitFor(commit.position);
    switch (commit.aggregate) {
      case Aggregates.sandbox:
        return this.reconcileSandbox(commit.aggregateId);
      case Aggregates.steprun:
        return this.recordFromRun(commit.events.map(decode).filter((e): e is DomainEvent => !!e));
      case Aggregates.workflow: {
        // A create workflow that ended may unblock its resource's delete workflow.
        const [rk, resource] = commit.aggregateId.split(".");
        const sandbox = rk && this.byRoutingKey.get(rk);
        if (sandbox && resource) await this.reconcileResource(sandbox, resource);
        return;
      }
    }
  }

  private async recordFromRun(events: DomainEvent[]): Promise<void> {
    for (const e of events) {
      if (e.type === "ephemera.steprun.succeeded.v1") {
        await this.command(e.data.workflowId, {
          kind: "record-success", step: e.data.step, runId: e.data.runId,
          outputs: e.data.outputs.map((o) => ({ key: o.name, size: o.value.length })),
        });
      } else if (e.type === "ephemera.steprun.failed.v1") {
        await this.command(e.data.workflowId, {
          kind: "record-failure", step: e.data.step, runId: e.data.runId,
          failure: e.data.failure ?? pb.StepFailure.fromPartial({ step: e.data.step, runId: e.data.runId, reason: "Error" }),
        });
      }
    }
  }

  private async reconcileSandbox(name: string): Promise<void> {
    const sandbox = this.sandboxes.get(name)?.state;
    if (!sandbox) return;
    if (sandbox.routingKey) this.byRoutingKey.set(sandbox.routingKey, name);
    for (const r of sandbox.resources) await this.reconcileResource(name, r.name);
  }

  private async reconcileResource(sandboxName: string, resourceName: string): Promise<void> {
    const sandbox = this.sandboxes.get(sandboxName)?.state;
    const resource = sandbox?.resources.find((r) => r.name === resourceName);
    if (!sandbox || !resource) return;
    const createId = workflowId(sandbox.routingKey, resource.name, "create");
    const deleteId = workflowId(sandbox.routingKey, resource.name, "delete");
    const create = this.workflows.get(createId)?.state;
    const createOpen = create !== undefined && !isTerminal(create.status);
    const deprovision = ["Deprovisioning", "Deprovisioned", "DeprovisionFailed"].includes(resource.status);

    if (sandbox.status === "deleted" || deprovision) {
      if (createOpen) {
        await this.command(createId, { kind: "cancel", reason: sandbox.forced ? "sandbox force-deleted" : "sandbox deleted" });
        return; // the delete workflow starts once the create workflow has ended
      }
      if (deprovision && !sandbox.forced && !this.workflows.get(deleteId)) await this.startWorkflow(sandbox, resource.name, "delete");
      return;
    }
    if (resource.status === "Provisioning" && !create) await this.startWorkflow(sandbox, resource.name, "create");
  }

  private async startWorkflow(sandbox: SandboxState, resourceName: string, phase: Phase): Promise<void> {
    const resource = sandbox.resources.find((r) => r.name === resourceName)!;
    const plugin = this.plugins.get(resource.plugin)?.state.versions.get(resource.version);
    const id = workflowId(sandbox.routingKey, resource.name, phase);
    if (!plugin) {
      // Cannot happen through the API (a version in use cannot be deleted); fail loudly, not silently.
      this.deps.logger.error({ workflow: id, plugin: `${resource.plugin}@${resource.version}` }, "plugin version not found");
      return;
    }
    await this.command(id, {
      kind: "start",
      started: pb.WorkflowStarted.fromPartial({
        workflowId: id,
        sandbox: sandbox.name,
        routingKey: sandbox.routingKey,
        resource: resource.name,
        phase,
        plugin: resource.plugin,
        version: resource.version,
        cluster: sandbox.cluster,
        params: resource.params,
        steps: planSteps(plugin.spec, phase),
        createWorkflowId: phase === "delete" ? workflowId(sandbox.routingKey, resource.name, "create") : "",
      }),
    });
  }

  private async command(id: string, command: WorkflowCommand): Promise<void> {
    const { entity, appended } = await execute(
      this.deps.store, this.workflows, id,
      (state) => decideWorkflow(command, state).map(encode),
      { source: "scheduler" },
    );
    if (!appended) return;
    const state = entity.state;
    for (const recorded of appended.events) {
      const e = decode(recorded);
      if (e?.type === "ephemera.workflow.step_dispatched.v1") await this.dispatch(state, e.data.step, e.data.runId, e.data.attempt);
      if (e?.type === "ephemera.workflow.cancel_requested.v1") {
        const runIds = state.steps.filter((s) => s.status === "running" && s.runId).map((s) => s.runId!);
        if (runIds.length) this.deps.queue.cancel(state.started!.cluster, pb.StepCancel.toJSON({ runIds, reason: e.data.reason }));
      }
      this.deps.logger.info({ workflow: id, type: recorded.type, step: (e?.data as { step?: string } | undefined)?.step }, "workflow event");
    }
  }

  private async dispatch(state: WorkflowState, step: string, runId: string, attempt: number): Promise<void> {
    const wf = state.started!;
    const plugin = this.plugins.get(wf.plugin)?.state.versions.get(wf.version);
    await this.deps.queue.publish(wf.cluster, runId, pb.StepDispatch.fromPartial({
      runId, workflowId: wf.workflowId, sandbox: wf.sandbox, routingKey: wf.routingKey, resource: wf.resource,
      phase: wf.phase, step, attempt, cluster: wf.cluster, plugin: wf.plugin, version: wf.version, runner: plugin?.spec.runner,
    }));
  }
}
