// The scheduler's outbox: what workflow events decided — a dispatch, a cancel, a stop —
// is done by a durable consumer of those events, acknowledged only after the publish. The
// publishes are idempotent (message id = run id, or the event's id), so a crash at any
// point neither loses nor doubles one.
import * as pb from "@ephemera/proto";
import { Aggregates, decode, type DomainEvent } from "@ephemera/events";
import type { Commit, EventStore, Feed, Lane, Projection, RecordedEvent, Subscription, WorkQueue } from "@ephemera/eventstore";
import { UnavailableError, inputEnvName, sandboxParam, stepGrants, type Logger } from "@ephemera/kit";
import type { PluginFacts } from "./facts.js";
import { isTerminal, type StartedWorkflow, type WorkflowState } from "./workflow/state.js";

export interface OutboxDeps {
  store: EventStore;
  queue: WorkQueue<pb.StepDispatch>;
  feed: Feed;
  workflows: Projection<WorkflowState>;
  plugins: Projection<PluginFacts>;
  logger: Logger;
}

export function startOutbox(deps: OutboxDeps, direct?: DirectDispatches): Subscription {
  // A publish that fails for want of NATS is tried again for as long as the outage lasts
  // (every 30 s at most): given up, the run would wait for a dispatch that never comes.
  return deps.store.subscribe(
    { durable: "scheduler-outbox", aggregate: Aggregates.workflow, redelivery: { maxDeliver: Infinity, backoffMs: [200, 1000, 5000, 15_000, 30_000] } },
    (commit) => publish(deps, commit, direct),
  );
}

/**
 * The dispatches this process publishes itself right after their decision's append: the
 * outbox, meeting them on the stream, has nothing to publish. A publish is known here from
 * when it begins, not when it ends: the outbox often meets the commit while the publish is
 * still on its way, and then waits for it, publishing only if it failed (before, it published
 * every such dispatch a second time, a duplicate the queue dropped). Bounded: an id the outbox
 * of another replica met is dropped with the oldest (and would only be published again, which
 * the queue drops as a duplicate of its message id).
 */
export class DirectDispatches {
  private readonly publishes = new Map<string, Promise<boolean>>();
  /** Per workflow, the appends under way here: their dispatches are not begun yet. */
  private readonly appends = new Map<string, Set<Promise<void>>>();
  constructor(private readonly limit = 10_000) {}

  /** An append to `workflowId` begins: call what this returns once its dispatches are begun (or it appended none); again, it does nothing. */
  appending(workflowId: string): () => void {
    let done!: () => void;
    const append = new Promise<void>((resolve) => { done = resolve; });
    const under = this.appends.get(workflowId) ?? new Set<Promise<void>>();
    under.add(append);
    this.appends.set(workflowId, under);
    return () => {
      done();
      under.delete(append);
      if (under.size === 0 && this.appends.get(workflowId) === under) this.appends.delete(workflowId);
    };
  }

  /** Once the appends to `workflowId` under way here now are done. */
  async appended(workflowId: string): Promise<void> {
    const under = this.appends.get(workflowId);
    if (under) await Promise.all([...under]);
  }

  /** A publish of `runId`'s dispatch begins: call what this returns with whether it was published. */
  begin(runId: string): (published: boolean) => void {
    let settle!: (published: boolean) => void;
    this.publishes.set(runId, new Promise<boolean>((resolve) => { settle = resolve; }));
    if (this.publishes.size > this.limit) this.publishes.delete(this.publishes.keys().next().value!);
    return settle;
  }

  /** Whether `runId` was published here (once a publish under way settles); forgotten once asked. */
  async take(runId: string): Promise<boolean> {
    const publish = this.publishes.get(runId);
    if (!publish) return false;
    this.publishes.delete(runId);
    return publish;
  }

  get size(): number {
    return this.publishes.size;
  }
}

/** An event of a commit the outbox has to act on. */
type Todo = { recorded: RecordedEvent; e: Extract<DomainEvent, { type: `ephemera.workflow.${"step_dispatched" | "cancel_requested" | "run_stop_requested"}.v1` }> };

async function publish(deps: OutboxDeps, commit: Commit, direct: DirectDispatches | undefined): Promise<void> {
  // What is left to publish: dispatches not published at once, cancels and stops naming runs.
  // This process's own append of the commit may not have returned yet: its dispatches are known once it has.
  await direct?.appended(commit.aggregateId);
  const todo: Todo[] = [];
  for (const recorded of commit.events) {
    const e = decode(recorded);
    if (e?.type === "ephemera.workflow.step_dispatched.v1") {
      if (!(await direct?.take(e.data.runId))) todo.push({ recorded, e });
    } else if (e?.type === "ephemera.workflow.cancel_requested.v1" || e?.type === "ephemera.workflow.run_stop_requested.v1") {
      if (e.data.runIds.length) todo.push({ recorded, e });
    }
  }
  // Nothing left (the common case: every dispatch went out with its append): no wait, no read.
  if (todo.length === 0) return;
  await deps.feed.waitFor(commit.position);
  // A workflow that ended and whose sandbox is gone has left memory: read from the store.
  const wf = (deps.workflows.get(commit.aggregateId) ?? (await deps.workflows.read(deps.store, commit.aggregateId))).state;
  if (!wf || wf.status === "none") throw new UnavailableError(`workflow ${commit.aggregateId} is not in the projection yet`);
  const started = wf.started;
  for (const { recorded, e } of todo) {
    if (e.type === "ephemera.workflow.step_dispatched.v1") {
      await publishDispatch(deps, wf, recorded);
    } else {
      await deps.queue.cancel(started.cluster, {
        id: `${commit.aggregateId}.${recorded.sequence}`,
        body: pb.StepCancel.toJSON({ runIds: e.data.runIds, reason: e.data.reason }),
      });
      deps.logger.info({ workflow: started.workflowId, runIds: e.data.runIds, reason: e.data.reason }, "runs told to stop");
    }
  }
}

/**
 * Publishes the dispatch a recorded `step_dispatched` event of `wf` decided (message id: its
 * run id, so a second publish of it is dropped). Does nothing for another event.
 */
export async function publishDispatch(
  deps: Pick<OutboxDeps, "queue" | "plugins" | "workflows" | "logger">, wf: WorkflowState, recorded: RecordedEvent,
): Promise<string | undefined> {
  const e = decode(recorded);
  if (e?.type !== "ephemera.workflow.step_dispatched.v1" || wf.status === "none") return undefined;
  const started = wf.started;
  const planned = started.steps.find((s) => s.name === e.data.step);
  const spec = deps.plugins.get(started.plugin)?.state.get(started.version);
  const runner = spec?.runner;
  const phase = started.phase === "delete" ? "delete" : "create";
  const step = spec?.[phase].find((s) => s.name === e.data.step);
  const created = started.createWorkflowId ? deps.workflows.get(started.createWorkflowId)?.state : undefined;
  const plan = spec && step ? planOf(step, spec[phase], wf, created) : undefined;
  await deps.queue.publish(started.cluster, e.data.runId, pb.StepDispatch.fromPartial({
    runId: e.data.runId, workflowId: started.workflowId, sandbox: started.sandbox, routingKey: started.routingKey,
    resource: started.resource, phase: started.phase, step: e.data.step, attempt: e.data.attempt, cluster: started.cluster,
    plugin: started.plugin, version: started.version, runner, timeoutMs: planned?.timeoutMs ?? 0,
    correlationId: recorded.correlationId, causationId: recorded.id, ...capabilityOf(step), ...(plan ? { plan } : {}),
  }), laneOf(planned, e.data.attempt));
  deps.logger.info({ workflow: started.workflowId, step: e.data.step, runId: e.data.runId }, "step dispatched");
  return e.data.runId;
}

/**
 * A workflow's first steps wait in the `start` lane; every later step (and a retry) in the
 * `next` lane, which runners serve first: sandboxes already under way are not starved by
 * a burst of new ones.
 */
const laneOf = (planned: pb.PlannedStep | undefined, attempt: number): Lane =>
  attempt === 1 && planned !== undefined && planned.dependsOn.length === 0 ? "start" : "next";

/** What the step may do at the IO context (signed into its run's token by the runner), and where its files are. */
function capabilityOf(step: pb.Step | undefined): Pick<pb.StepDispatch, "inputs" | "outputs" | "inputPaths" | "outputPaths"> {
  if (!step) return { inputs: [], outputs: [], inputPaths: [], outputPaths: [] };
  return {
    ...stepGrants(step),
    inputPaths: step.inputs.flatMap((i) => (i.as?.path ? [i.as.path] : [])),
    outputPaths: step.outputs.map((o) => o.valueFromPath),
  };
}

/** A plan whose script and param values are larger than this is not carried: the runner asks the IO context. */
export const MAX_PLAN_BYTES = 256 * 1024;

/**
 * The step's script and inputs for its dispatch, when every input is known for good: a
 * sandbox param, or an output of a run that succeeded and journaled its digest. In this
 * workflow (`steps`: its phase's steps), a producer has succeeded before a step that reads it
 * is dispatched; a delete step's read of a create step is planned once the create workflow
 * (`created`) has ended, when that can no longer change. Anything else (a producer not
 * succeeded, a digest not journaled, a create workflow not ended or not in memory, a plan
 * over MAX_PLAN_BYTES): undefined, and the runner asks the IO context, which knows the rules
 * for those cases.
 */
export function planOf(step: pb.Step, steps: pb.Step[], wf: StartedWorkflow, created: WorkflowState | undefined): pb.DispatchPlan | undefined {
  const inputs: pb.DispatchInput[] = [];
  let bytes = Buffer.byteLength(step.script);
  for (const input of step.inputs) {
    const planned = { name: input.name, env: inputEnvName(input), path: input.as?.path ?? "", step: "", output: "", runId: "", sha256: "" };
    const ref = input.valueFromStep;
    if (!ref) {
      const param = input.valueFromSandbox ? sandboxParam(wf.started.params, input.name) : undefined;
      bytes += param === undefined ? 0 : Buffer.byteLength(param);
      inputs.push(param === undefined ? planned : { ...planned, param });
      continue;
    }
    const inThis = steps.some((s) => s.name === ref.name);
    const producers = inThis ? wf : created;
    if (!producers || producers.status === "none" || (!inThis && !isTerminal(producers.status))) return undefined;
    const producer = producers.steps.find((s) => s.name === ref.name);
    if (producer?.status !== "succeeded" || !producer.runId) {
      // Only a delete step may find its producer never succeeded: its input has no value.
      if (inThis) return undefined;
      inputs.push({ ...planned, step: ref.name, output: ref.output });
      continue;
    }
    const sha256 = producer.outputs.find((o) => o.key === ref.output)?.sha256;
    if (!sha256) return undefined;
    inputs.push({ ...planned, step: ref.name, output: ref.output, runId: producer.runId, sha256 });
  }
  if (bytes > MAX_PLAN_BYTES) return undefined;
  return { script: step.script, inputs, outputs: step.outputs };
}
