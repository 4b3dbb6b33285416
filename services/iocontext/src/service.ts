// The IOContext gRPC service: a step's script and resolved inputs for the init agent,
// its outputs from the sidecar, and those outputs again for the runner to journal.
// Values are secrets: only names and sizes are logged. The output store is a cache of the
// journal: while it is down, outputs of runs that succeeded are read from their events.
import type * as pb from "@ephemera/proto";
import { Aggregates, decode, journalOutputs, journaledValues, outputSize, parseRunId, sha256Hex, valueKey } from "@ephemera/events";
import type { EventStore, ValueStore } from "@ephemera/eventstore";
import {
  ConflictError, NotFoundError, PermissionDeniedError, UnavailableError, ValidationError, paramSource, stepSource,
  CapabilityVerifier, type FieldViolation, type Logger, type RecentOutputs, type SigningKey, type StepCapability,
} from "@ephemera/kit";
import { findStep, planInputs, unresolved, type InputContext, type PlannedInput } from "./inputs.js";
import type { OutputStore } from "./outputs.js";
import { dispatched, type Projections, type WorkflowView } from "./state.js";

export const MAX_OUTPUT_BYTES = 1024 * 1024;

export interface IOContextDeps {
  store: EventStore;
  projections: Projections;
  outputs: OutputStore;
  logger: Logger;
  /** Verify the runs' capability tokens (kit's signingKeys). */
  keys: SigningKey[];
  /** The output journal: values of journaled outputs, by digest (and, while the cache is down, those of runs not ended). */
  values: Pick<ValueStore, "put" | "get" | "read" | "digest">;
  maxOutputBytes?: number;
  now?: () => Date;
  /** Recent runs' outputs in memory, served when their digests match the journal's; absent: every read asks the cache. */
  recent?: RecentOutputs;
  /** Whether a sandbox (by routing key) is live: a deleted one's outputs are neither held nor served from memory. */
  live?: (routingKey: string) => boolean;
}

interface KnownRun {
  runId: string;
  routingKey: string;
  workflowId: string;
  started: pb.WorkflowStarted;
  context: InputContext;
  step: pb.Step;
}

export class IOContextHandlers {
  private readonly maxOutputBytes: number;
  /** A run's tokens are verified once, then recognised until they expire. */
  private readonly verifier: CapabilityVerifier;

  constructor(private readonly deps: IOContextDeps) {
    this.maxOutputBytes = deps.maxOutputBytes ?? MAX_OUTPUT_BYTES;
    this.verifier = new CapabilityVerifier(deps.keys);
  }

  /** The token alone decides what the caller may do; a refusal is logged with the run id it claimed, never the token. */
  private async capability(req: { runId: string; token: string }, method: string): Promise<StepCapability> {
    try {
      return await this.verifier.verify(req.token, req.runId, this.deps.now?.());
    } catch (err) {
      this.deps.logger.warn({ runId: req.runId, method, err }, "IO context call refused");
      throw err;
    }
  }

  private refuse(runId: string, method: string, message: string): never {
    const err = new PermissionDeniedError(`run ${runId}: ${message}`);
    this.deps.logger.warn({ runId, method, err }, "IO context call refused");
    throw err;
  }

  async getStepInputs(req: pb.GetStepInputsRequest): Promise<pb.GetStepInputsResponse> {
    const cap = await this.capability(req, "GetStepInputs");
    const run = await this.knownRun(req.runId);
    let planned = planInputs(run.step, run.context);
    const allowed = new Set(cap.inputs);
    for (const p of planned) {
      const source = p.source.kind === "param" ? paramSource(p.name) : stepSource(p.source.step, p.source.output);
      if (!allowed.has(source)) this.refuse(run.runId, "GetStepInputs", `input "${p.name}" (${source}) is not one its token allows`);
    }
    if (unresolved(planned)) {
      // The producing step's success may not have reached this projection yet.
      await this.reloadWorkflows(run);
      planned = planInputs(run.step, run.context);
    }
    // One read per producing run, however many of its outputs are wanted.
    const runs = new Map<string, Promise<Map<string, Buffer>>>();
    const outputsOfRun = (runId: string) => {
      let read = runs.get(runId);
      if (!read) {
        const wanted = planned.flatMap((p) => (p.source.kind === "step" && p.source.runId === runId ? [p.source] : []));
        // The workflow's step_succeeded names the digests: the run itself need not be read.
        const journaled = wanted.every((w) => w.sha256)
          ? wanted.map((w) => ({ name: w.output, value: Buffer.alloc(0), size: 0, sha256: w.sha256! })) : undefined;
        read = this.outputsOf(runId, wanted.map((w) => w.output), [], journaled);
        runs.set(runId, read);
      }
      return read;
    };
    // Every producing run's outputs are asked for at once; the values are then taken in order.
    for (const p of planned) if (p.source.kind === "step" && p.source.runId) outputsOfRun(p.source.runId).catch(() => undefined);
    const inputs: pb.ResolvedInput[] = [];
    for (const p of planned) {
      const value = await this.valueOf(p, outputsOfRun);
      inputs.push({ name: p.name, present: value !== undefined, value: value ?? Buffer.alloc(0), env: p.env, path: p.path });
    }
    this.deps.logger.info(
      { runId: run.runId, inputs: inputs.map((i) => ({ name: i.name, present: i.present, size: i.value.length })) },
      "step inputs served",
    );
    return { script: run.step.script, inputs, outputs: run.step.outputs };
  }

  async putStepOutputs(req: pb.PutStepOutputsRequest): Promise<pb.PutStepOutputsResponse> {
    const cap = await this.capability(req, "PutStepOutputs");
    const writable = new Set(cap.outputs);
    for (const o of req.outputs) {
      if (!writable.has(o.name)) this.refuse(req.runId, "PutStepOutputs", `output "${o.name}" is not one its token allows`);
    }
    // The run's facts are read at once (each a round trip); a failure is reported in this order.
    // What the journal took while the cache was down counts as written too: the cache may
    // have come back empty since.
    const [known, running, journaled, stored] = await Promise.allSettled([
      this.knownRun(req.runId), this.runningNow(req.runId),
      this.uncachedDigests(req.runId, req.outputs.map((o) => o.name)), this.deps.outputs.read(req.runId),
    ]);
    if (known.status === "rejected") throw known.reason;
    if (running.status === "rejected") throw running.reason;
    if (journaled.status === "rejected") throw journaled.reason;
    const run = known.value;
    const declared = new Set(run.step.outputs.map((o) => o.name));
    const violations: FieldViolation[] = [];
    req.outputs.forEach((o, i) => {
      if (!declared.has(o.name)) {
        violations.push({
          field: `outputs[${i}].name`,
          rule: "undeclared-output",
          description: `step "${run.step.name}" declares no output "${o.name}" (declared: ${[...declared].join(", ") || "none"})`,
        });
      }
      if (o.value.length > this.maxOutputBytes) {
        violations.push({
          field: `outputs[${i}].value`,
          rule: "output-too-large",
          description: `output "${o.name}" is ${o.value.length} bytes, over the ${this.maxOutputBytes}-byte limit`,
        });
      }
    });
    if (violations.length) throw new ValidationError(violations, `outputs of ${run.runId} rejected`);
    if (running.value === "ended") this.asJournaled(run.runId, req.outputs, journaled.value);
    this.unchanged(run.runId, req.outputs, journaled.value);
    try {
      if (stored.status === "rejected") throw stored.reason;
      this.unchanged(run.runId, req.outputs, stored.value);
      await this.deps.outputs.write(run.runId, run.routingKey, req.outputs);
      this.remember(run.runId, req.outputs);
    } catch (err) {
      if (!(err instanceof UnavailableError)) throw err;
      // Only the cache missed them: the step need not wait. They go to the output journal,
      // where a read-back before the run's result (the Kubernetes driver's) finds them; the
      // runner journals them again from the step's report either way.
      this.deps.logger.warn({ runId: run.runId, outputs: sizes(req.outputs), err }, "output store unavailable: step outputs not cached");
      await this.journalUncached(run.runId, req.outputs, journaled.value);
      this.remember(run.runId, req.outputs);
      return {};
    }
    this.deps.logger.info({ runId: run.runId, outputs: sizes(req.outputs) }, "step outputs stored");
    return {};
  }

  async getStepOutputs(req: pb.GetStepOutputsRequest): Promise<pb.GetStepOutputsResponse> {
    await this.capability(req, "GetStepOutputs");
    const run = await this.knownRun(req.runId);
    const values = await this.outputsOf(run.runId, [], run.step.outputs.map((o) => o.name));
    return { outputs: [...values].map(([name, value]) => ({ name, value, size: value.length, sha256: "" })) };
  }

  /**
   * Write-once: a run's outputs are written while that attempt runs (started, not ended),
   * and once. The same values again (a retried call whose answer was lost) are fine;
   * other values for an output already written are refused. After the end, a write is
   * taken only as a copy of what the run journaled (asJournaled): the process driver caches
   * the outputs of a step whose dispatch had no plan while the runner records its result, so
   * its write may land after it.
   */
  private async runningNow(runId: string): Promise<"running" | "ended"> {
    const types = (await this.deps.store.read(Aggregates.steprun, runId)).events.map((e) => e.type);
    if (!types.includes("ephemera.steprun.started.v1")) throw new ConflictError(`run ${runId} has not started: its outputs cannot be written yet`);
    return types.some((t) => t === "ephemera.steprun.succeeded.v1" || t === "ephemera.steprun.failed.v1") ? "ended" : "running";
  }

  /** A write after the run's end: every value must be one the journal holds for it (checked unchanged), or none is taken. */
  private asJournaled(runId: string, outputs: pb.OutputValue[], journaled: Map<string, string>): void {
    if (outputs.some((o) => journaled.get(o.name) !== sha256Hex(o.value))) throw new ConflictError(`run ${runId} has ended: its outputs can no longer change`);
  }

  /**
   * Best effort, as caching is: those `journaled` already (checked unchanged) are not put
   * again; a journal that cannot take them leaves the run's read-back to the cache once it
   * is back.
   */
  private async journalUncached(runId: string, outputs: pb.OutputValue[], journaled: Map<string, string>): Promise<void> {
    try {
      await journalOutputs(this.deps.values, runId, outputs.filter((o) => !journaled.has(o.name)));
    } catch (err) {
      this.deps.logger.warn({ runId, outputs: sizes(outputs), err }, "cannot journal uncached step outputs");
    }
  }

  /** Values the output journal holds for a run whose result has not named their digests (absent ones left out). */
  private async uncachedValues(runId: string, names: string[]): Promise<Map<string, Buffer>> {
    // At once: on every put, so a round trip in all however many outputs it names.
    const read = await Promise.all(names.map(async (name) => [name, await this.deps.values.read(valueKey(runId, name))] as const));
    return new Map(read.flatMap(([name, value]) => (value ? [[name, value] as const] : [])));
  }

  /** The digests of the values the output journal holds for a run (absent ones left out): one lookup each, at once, no value fetched. */
  private async uncachedDigests(runId: string, names: string[]): Promise<Map<string, string>> {
    const read = await Promise.all(names.map(async (name) => [name, await this.deps.values.digest(valueKey(runId, name))] as const));
    return new Map(read.flatMap(([name, digest]) => (digest ? [[name, digest] as const] : [])));
  }

  /**
   * Outputs are written once: the same values again are fine, others for an output already
   * written are refused. `written`: what is held of each, its value (the cache) or its digest (the journal).
   */
  private unchanged(runId: string, outputs: pb.OutputValue[], written: Map<string, Buffer | string>): void {
    const same = (o: pb.OutputValue, held: Buffer | string) => (typeof held === "string" ? held === sha256Hex(o.value) : held.equals(Buffer.from(o.value)));
    const changed = outputs.filter((o) => written.has(o.name) && !same(o, written.get(o.name)!)).map((o) => o.name);
    if (changed.length) throw new ConflictError(`run ${runId} already wrote ${changed.map((n) => `"${n}"`).join(", ")}: outputs are written once`);
  }

  private async knownRun(runId: string): Promise<KnownRun> {
    const parsed = parseRunId(runId);
    if (!parsed) {
      throw new ValidationError([{ field: "run_id", rule: "run-id", description: `"${runId}" is not a run id (<routingKey>.<resource>.<phase>.<step>.<attempt>)` }], "invalid request");
    }
    const { projections, store } = this.deps;
    let workflow = projections.workflows.get(parsed.workflowId)?.state;
    if (!workflow?.started || !dispatched(workflow, runId)) workflow = (await projections.workflows.reload(store, parsed.workflowId)).state;
    const started = workflow.started;
    if (!started || !dispatched(workflow, runId)) throw new NotFoundError(`run ${runId} is unknown: no workflow dispatched it`);

    let spec = projections.plugins.get(started.plugin)?.state.versions.get(started.version)?.spec;
    spec ??= (await projections.plugins.reload(store, started.plugin)).state.versions.get(started.version)?.spec;
    if (!spec) throw new NotFoundError(`plugin ${started.plugin}@${started.version} of run ${runId} is unknown`);
    const step = findStep(spec, parsed.phase, parsed.step);
    if (!step) throw new NotFoundError(`plugin ${started.plugin}@${started.version} has no ${parsed.phase} step "${parsed.step}"`);

    const createWorkflow = started.createWorkflowId ? await this.workflow(started.createWorkflowId) : undefined;
    return {
      runId,
      routingKey: parsed.routingKey,
      workflowId: parsed.workflowId,
      started,
      context: { phase: parsed.phase, spec, workflow, ...(createWorkflow ? { createWorkflow } : {}) },
      step,
    };
  }

  private async workflow(id: string): Promise<WorkflowView> {
    const known = this.deps.projections.workflows.get(id);
    return known ? known.state : (await this.deps.projections.workflows.reload(this.deps.store, id)).state;
  }

  private async reloadWorkflows(run: KnownRun): Promise<void> {
    const { projections, store } = this.deps;
    run.context.workflow = (await projections.workflows.reload(store, run.workflowId)).state;
    const createId = run.started.createWorkflowId;
    if (createId) run.context.createWorkflow = (await projections.workflows.reload(store, createId)).state;
  }

  private async valueOf(p: PlannedInput, outputsOfRun: (runId: string) => Promise<Map<string, Buffer>>): Promise<Buffer | undefined> {
    const source = p.source;
    if (source.kind === "param") return source.value === undefined ? undefined : Buffer.from(source.value, "utf8");
    const value = source.runId ? (await outputsOfRun(source.runId)).get(source.output) : undefined;
    if (value === undefined && source.required) {
      throw new ConflictError(`input "${p.name}": step "${source.step}" has not produced output "${source.output}"`);
    }
    return value;
  }

  /**
   * The outputs of a run (those `wanted`, or all). The journal is the truth: a run that
   * succeeded names each output's size and SHA-256 in its `steprun.succeeded` event, and a
   * value from the cache (Redis) is used only when it matches that digest; otherwise it is
   * read from the output journal and written back to the cache. A run not journaled yet
   * (a step that just ended, read back by itself) has the cache, and the journal for its
   * `declared` outputs put while the cache was down (written back once it is up); while
   * the cache is down, those values if the journal holds them all, else UNAVAILABLE: the
   * cache may hold them.
   */
  private async outputsOf(
    runId: string, wanted: string[] = [], declared: string[] = [], known?: pb.OutputValue[],
  ): Promise<Map<string, Buffer>> {
    // `known`: the digests, from the workflow's step_succeeded. Held in memory as journaled, they are served from there.
    const held = known && this.isLive(runId) ? this.deps.recent?.take(runId, known) : undefined;
    if (held) return held;
    // The cache and the run's journaled digests are read at once: one round trip, not two.
    const journaling = known ? Promise.resolve(known) : this.journaledOutputs(runId);
    journaling.catch(() => undefined); // awaited below on every path that does not throw first
    let cached: Map<string, Buffer> | undefined;
    try {
      cached = await this.deps.outputs.read(runId);
    } catch (err) {
      if (!(err instanceof UnavailableError)) throw err;
      this.deps.logger.warn({ runId, err }, "output store unavailable: reading outputs from the journal");
      const journaled = await journaling;
      if (journaled) return journaledValues(this.deps.values, runId, journaled, wanted.length ? wanted : undefined);
      const uncached = declared.length ? await this.uncachedValues(runId, declared) : new Map<string, Buffer>();
      if (declared.length && uncached.size === declared.length) return uncached;
      throw new UnavailableError(`outputs of ${runId} are not journaled yet and the output store is unavailable`, { cause: err });
    }
    const journaled = await journaling;
    if (!journaled) return this.withUncached(runId, cached, declared);
    const values = new Map<string, Buffer>();
    const missed: pb.OutputValue[] = [];
    for (const o of journaled) {
      if (wanted.length && !wanted.includes(o.name)) continue;
      const hit = cached.get(o.name);
      if (hit && (o.sha256 ? sha256Hex(hit) === o.sha256 : hit.equals(Buffer.from(o.value)))) values.set(o.name, hit);
      else missed.push(o);
    }
    if (missed.length) {
      const fetched = await journaledValues(this.deps.values, runId, missed);
      for (const [name, value] of fetched) values.set(name, value);
      await this.rehydrate(runId, [...fetched].map(([name, value]) => ({ name, value, size: value.length, sha256: "" })));
    }
    this.remember(runId, [...values].map(([name, value]) => ({ name, value })));
    return values;
  }

  private isLive(runId: string): boolean {
    const routingKey = parseRunId(runId)?.routingKey;
    return !!routingKey && (this.deps.live?.(routingKey) ?? true);
  }

  /** Holds a run's values in memory for the steps that read them next (a deleted sandbox's are not held). */
  private remember(runId: string, outputs: Array<{ name: string; value: Uint8Array }>): void {
    if (!this.deps.recent || !outputs.length || !this.isLive(runId)) return;
    this.deps.recent.remember(runId, parseRunId(runId)!.routingKey, outputs);
  }

  /** The cached outputs of a run not journaled yet, and those of its `declared` ones the journal took while the cache was down. */
  private async withUncached(runId: string, cached: Map<string, Buffer>, declared: string[]): Promise<Map<string, Buffer>> {
    const missing = declared.filter((name) => !cached.has(name));
    if (!missing.length) return cached;
    const uncached = await this.uncachedValues(runId, missing);
    if (!uncached.size) return cached;
    await this.rehydrate(runId, [...uncached].map(([name, value]) => ({ name, value, size: value.length, sha256: "" })));
    return new Map([...cached, ...uncached]);
  }

  /** Best effort: the values were served from the journal either way. */
  private async rehydrate(runId: string, journaled: pb.OutputValue[]): Promise<void> {
    try {
      await this.deps.outputs.write(runId, parseRunId(runId)?.routingKey ?? "", journaled);
      this.deps.logger.info({ runId, outputs: sizes(journaled) }, "outputs rehydrated from the journal");
    } catch (err) {
      this.deps.logger.warn({ runId, outputs: sizes(journaled), err }, "cannot rehydrate outputs from the journal");
    }
  }

  /** The outputs (names, sizes, digests) journaled by the run's success; undefined while it has not succeeded. */
  private async journaledOutputs(runId: string): Promise<pb.OutputValue[] | undefined> {
    const { events } = await this.deps.store.read(Aggregates.steprun, runId);
    for (const r of events) {
      const e = decode(r);
      if (e?.type === "ephemera.steprun.succeeded.v1") return e.data.outputs;
    }
    return undefined;
  }
}

const sizes = (outputs: pb.OutputValue[]) => outputs.map((o) => ({ name: o.name, size: outputSize(o) }));
