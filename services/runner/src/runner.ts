// The runner: takes its cluster's dispatches off the work queue, owns each run's StepRun
// aggregate, runs the step through a driver while heartbeating the work item and streaming
// its log, records the result, and only then lets the item be acknowledged.
import * as pb from "@ephemera/proto";
import {
  isClaimLostError, recordDeadLetter, deadLetter,
  type Claim, type ClaimStore, type EventStore, type LogStore, type WorkItem, type WorkQueue, type WorkQueueConsumer,
} from "@ephemera/eventstore";
import { journalOutputs, type ValueJournal } from "@ephemera/events";
import { DEFAULT_RETRY, FailureReason, type StepReport } from "@ephemera/io-agent";
import { UnavailableError, delay, errorMessage, isRetryable, longTimeout, retry, signCapability, type Logger, type LongTimeout, type SigningKey } from "@ephemera/kit";
import { defaultStepEnv, type RunningStep, type StepDriver } from "./driver/driver.js";
import { LiveLog, StepLog } from "./log.js";
import type { StepMetrics } from "./metrics.js";
import { isFinished, type StepRunCommand } from "./steprun/decide.js";
import { executeStepRun, readStepRun, type Cause, type KnownStepRun } from "./steprun/store.js";
import { unwantedBecause } from "./wanted.js";

const SOURCE = "runner";
/** How long a cancel for a run not (yet) running here is remembered, in case its dispatch is still queued. */
const EARLY_CANCEL_TTL_MS = 10 * 60_000;

export interface RunnerOptions {
  cluster: string;
  concurrency: number;
  /** Names this runner instance in `steprun.started`. */
  runnerId: string;
  driver: StepDriver;
  store: EventStore;
  queue: WorkQueue<pb.StepDispatch>;
  logs: LogStore;
  logger: Logger;
  /** Between SIGTERM and SIGKILL when a step is cancelled. */
  cancelGraceMs: number;
  /** Also how often the run's claim is renewed. */
  heartbeatMs: number;
  /** Who works on each run: taken before a run is started or declared lost, renewed with the heartbeat. */
  claims: ClaimStore;
  /** How long a claim lasts unrenewed: a run whose holder stopped renewing for this long is declared lost. */
  claimTtlMs: number;
  /** Whether a claim's holder is an incarnation known to be dead (on this host): its claim is taken at once. */
  holderGone?: (holder: string) => boolean;
  /** The output journal: a succeeded run's values go there, its result event names them by digest. */
  values: ValueJournal;
  now: () => number;
  /** Signs each run's capability token for the IO context (see kit's capability.ts). */
  signingKey: SigningKey;
  /** Counts the steps this runner runs (metrics.ts); absent: nothing counted. */
  metrics?: StepMetrics;
  /** How long a step may take to start its program, on top of its timeout (default START_GRACE_MS). */
  startGraceMs?: number;
}

/**
 * How long a step may take to start its program (fetch its inputs, start its container) on top
 * of its timeout: the agents' retries of an IO context away (DEFAULT_RETRY, about 60 s).
 */
export const START_GRACE_MS = DEFAULT_RETRY.totalMs;

/** A token outlives its step's timeout by this much: the agents' IO-context retries (60 s) and the outputs after the script. */
const TOKEN_GRACE_MS = 10 * 60_000;
const DEFAULT_STEP_TIMEOUT_MS = 30 * 60_000;

interface Stop {
  reason: typeof FailureReason.Cancelled | typeof FailureReason.RunnerLost | "DeadlineExceeded";
  message: string;
}

interface ActiveRun {
  /** Settles like the handling of the first delivery: a duplicate delivery is acked or retried with it. */
  done: Promise<void>;
  step?: RunningStep;
  stopped?: Stop;
  /** This runner's claim on the run, once taken (renewed with the heartbeat, released when handled). */
  claim?: Claim;
}

export class Runner {
  private readonly active = new Map<string, ActiveRun>();
  private readonly earlyCancels = new Map<string, { at: number; reason: string }>();
  private readonly pendingResults = new Map<string, StepRunCommand>();
  private consumer?: WorkQueueConsumer;
  private cancels?: WorkQueueConsumer;
  private stopping = false;

  constructor(private readonly o: RunnerOptions) {}

  start(): void {
    this.cancels = this.o.queue.onCancel(this.o.cluster, (m) => this.onCancel(m));
    this.consumer = this.o.queue.consume(this.o.cluster, {
      concurrency: this.o.concurrency,
      redelivery: { maxDeliver: 10, backoffMs: [500, 1000, 2000, 5000, 10_000] },
      onDeadLetter: (item, err) => this.deadLetter(item.data, item.deliveries, err),
    }, (item) => this.handle(item));
  }

  /**
   * A dispatch that could not be handled: recorded as a dead letter, and its run ended
   * (DriverError) so the workflow moves on (an infrastructure failure: it runs again).
   */
  private async deadLetter(d: pb.StepDispatch, deliveries: number, err: unknown): Promise<void> {
    const consumer = `runner-${this.o.cluster}`;
    await recordDeadLetter(this.o.store, deadLetter(consumer, { aggregate: "run", aggregateId: d.runId, position: 0, types: [] }, deliveries, err), d.runId);
    const cause = { correlationId: d.correlationId, causationId: d.causationId };
    const { state } = await readStepRun(this.o.store, d.runId);
    if (state.status === "new") await executeStepRun(this.o.store, d.runId, { type: "start", dispatch: d, driver: this.o.driver.name, runner: this.o.runnerId }, SOURCE, cause);
    await executeStepRun(this.o.store, d.runId, fail({ reason: FailureReason.DriverError, message: `the runner gave up on the dispatch: ${errorMessage(err)}` }, "", 0), SOURCE, cause);
  }

  /** Stops taking work; running steps get `graceMs` to finish, then are stopped and recorded as lost. */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    const deadline = longTimeout(() => {
      for (const run of this.active.values()) {
        this.stopRun(run, { reason: FailureReason.RunnerLost, message: "the runner shut down before the step finished" });
      }
    }, graceMs);
    try {
      await this.consumer?.stop();
    } finally {
      deadline.clear();
      await this.cancels?.stop();
      this.o.driver.close?.();
    }
  }

  /** Run ids being worked on by this runner right now. */
  running(): string[] {
    return [...this.active.keys()];
  }

  private handle(item: WorkItem<pb.StepDispatch>): Promise<void> {
    const d = item.data;
    const existing = this.active.get(d.runId);
    if (existing) return existing.done; // the same run delivered again while it runs here
    const run = {} as ActiveRun; // `done` is set below, before anything else can see the run
    this.active.set(d.runId, run);
    run.done = this.process(item, run).finally(() => this.active.delete(d.runId));
    return run.done;
  }

  private async process(item: WorkItem<pb.StepDispatch>, run: ActiveRun): Promise<void> {
    const d = item.data;
    const log = this.o.logger.child({ runId: d.runId });
    const cause: Cause = { correlationId: d.correlationId, causationId: d.causationId };
    // The work item and the run's claim stay ours for as long as we handle it, not only while the script runs.
    let renewing = Promise.resolve();
    const beat = setInterval(() => {
      item.heartbeat();
      renewing = renewing.then(() => this.renew(run, log));
    }, this.o.heartbeatMs);
    try {
      // A success's values are journaled first (idempotently: a retry puts the same values again).
      // A command after this handler's own append starts from what that append left (a read
      // saved); the start, from the read below.
      let known: KnownStepRun | undefined;
      const record = (command: StepRunCommand) => retry(async () => {
        const result = await executeStepRun(this.o.store, d.runId, await this.journaled(d.runId, command), SOURCE, cause, 5, known);
        known = result.known;
        return result;
      }, { attempts: 8, baseMs: 250, maxMs: 5000, retryable: isRetryable });
      // All at once (each a round trip): the run's claim, whether the run is new, and whether it
      // is still wanted. A finished run's claim is taken for nothing and released below; both
      // settle before going on, so no claim is taken after the handler gave up.
      const [claimed, facts] = await Promise.allSettled([
        this.claim(d.runId, run, log),
        Promise.all([readStepRun(this.o.store, d.runId), unwantedBecause(this.o.store, d.workflowId, d.step, d.runId)]),
      ]);
      if (claimed.status === "rejected") throw claimed.reason;
      if (facts.status === "rejected") throw facts.reason;
      let [read, unwantedAtFirst] = facts.value;
      if (!isFinished(read.state) && claimed.value) {
        // Another runner held the run while this delivery waited: what it did is read again.
        [read, unwantedAtFirst] = await Promise.all([
          readStepRun(this.o.store, d.runId), unwantedBecause(this.o.store, d.workflowId, d.step, d.runId),
        ]);
      }
      const state = read.state;
      if (isFinished(state)) {
        // A runner that died between recording and tidying up left this much (a pod) behind.
        await this.o.driver.cleanup?.(d.runId);
        log.info("run already finished; dispatch acknowledged");
        return;
      }
      let adopt = false;
      if (state.status === "started" && state.runner !== this.o.runnerId) {
        // Started by a runner whose claim expired (or that is known dead): it is gone. Its result
        // may be kept with the claim (the step ended, the record did not), or on this host's disk.
        const found = this.resultKept(run, log) ?? await this.resultOnDisk(d, log);
        if (found) {
          await record(found);
          await this.o.driver.cleanup?.(d.runId);
          return;
        }
        // Or its pod may still be there, running or ended: followed, never started again.
        adopt = (await this.o.driver.attached?.(d)) ?? false;
        if (adopt) log.info({ startedBy: state.runner }, "following a run a lost runner started");
      }
      if (state.status === "new") {
        const unwanted = unwantedAtFirst;
        if (unwanted) {
          await record({ type: "drop", dispatch: d, message: `dropped: ${unwanted}` });
          log.info({ why: unwanted }, "dispatch dropped");
          return;
        }
      }
      // The start goes over the read made beside the claim: its commit names this runner, so
      // if the run moved since (another runner's start or result), the append is refused and
      // the run read again, never taken for the other's commit (steprun/store.ts).
      // Beside it, the workflow is read again: a cancel decided since the first read stops the
      // run before its script (a round trip saved on every step's path). One decided after this
      // read reaches the run by its cancel message, as one decided once it runs does: the run is
      // in this runner's list from its delivery on (onCancel), so it is stopped before its script
      // if the message comes first, or at once if not.
      known = read;
      const [{ appended, state: after }, unwanted] = await Promise.all([
        record({ type: "start", dispatch: d, driver: this.o.driver.name, runner: this.o.runnerId, adopt }),
        unwantedBecause(this.o.store, d.workflowId, d.step, d.runId),
      ]);
      if (after.status !== "started") {
        if (appended[0]?.type === "ephemera.steprun.failed.v1") log.warn("run was started by a runner that is gone; recorded as RunnerLost");
        return;
      }
      // Re-attach: the result of a run that ended while nobody recorded it. Only a run resumed
      // (started before, by this runner or a lost one) can have one: one this append started has none anywhere.
      const resumed = appended.length === 0;
      const pending = resumed ? this.pendingResults.get(d.runId) ?? this.resultKept(run, log) ?? await this.resultOnDisk(d, log) : undefined;
      if (pending) {
        await record(pending);
        this.pendingResults.delete(d.runId);
        await this.o.driver.cleanup?.(d.runId);
        log.info({ result: pending.type }, "re-attached to a finished run; result recorded");
        return;
      }
      // A cancel decided between our check and our start: the run never gets to the script.
      const early = this.earlyCancels.get(d.runId);
      if (unwanted) run.stopped = { reason: FailureReason.Cancelled, message: `dropped: ${unwanted}` };
      else if (early) run.stopped = { reason: FailureReason.Cancelled, message: early.reason || "cancelled before it started" };
      const before = run.stopped;
      const command = before ? fail(before, "", 0) : await this.execute(item, run, log, adopt, (kept) => {
        // With the heartbeat's renewals, one write after another: each renews the revision the last one left.
        const keeping = renewing.then(() => this.keep(run, kept, log));
        renewing = keeping;
        return keeping;
      });
      // Kept until recorded: a redelivery to this runner records it without running anything again.
      this.pendingResults.set(d.runId, command);
      await record(command);
      if (!before) this.o.metrics?.recorded(command);
      this.pendingResults.delete(d.runId);
      await this.o.driver.cleanup?.(d.runId);
      log.info({ result: command.type, ...(command.type === "fail" ? { reason: command.failure.reason } : {}) }, "step run recorded");
    } finally {
      clearInterval(beat);
      await renewing;
      await this.release(run, log);
    }
  }

  /**
   * Takes the run's claim, waiting while another runner's claim on it is live: a delivery of
   * a run that runs elsewhere (redelivered past a heartbeat gap) is held here, heartbeated,
   * until that runner ends the run and releases its claim, or dies and its claim expires.
   * Holding it, rather than a nak or a term, keeps the one message that lets a runner
   * declare the run lost if its holder dies, without counting deliveries towards the dead
   * letter (a long step would reach it) or sending it round in a loop. Resolves to whether it waited.
   */
  private async claim(runId: string, run: ActiveRun, log: Logger): Promise<boolean> {
    const options = this.o.holderGone ? { holderGone: this.o.holderGone } : {};
    for (let waited = false; ; waited = true) {
      const got = await retry(() => this.o.claims.acquire(runId, this.o.runnerId, this.o.claimTtlMs, options), {
        attempts: 8, baseMs: 250, maxMs: 5000, retryable: isRetryable,
      });
      if (got.taken) {
        run.claim = got.claim;
        return waited;
      }
      if (!waited) log.info({ holder: got.claim.holder }, "the run is held by a live runner; waiting until it ends or its claim expires");
      if (this.stopping) throw new UnavailableError(`the run is held by ${got.claim.holder} and this runner is stopping`);
      await delay(this.o.heartbeatMs);
    }
  }

  private async renew(run: ActiveRun, log: Logger): Promise<void> {
    if (!run.claim) return;
    try {
      run.claim = await this.o.claims.renew(run.claim, this.o.claimTtlMs);
    } catch (err) {
      if (!isClaimLostError(err)) {
        log.warn({ err }, "cannot renew the run's claim; trying again with the next heartbeat");
        return;
      }
      run.claim = undefined;
      log.error("this runner's claim on the run expired and another runner took it over; stopping the step");
      this.stopRun(run, { reason: FailureReason.RunnerLost, message: "this runner's claim on the run expired and another runner took the run over" });
    }
  }

  /** Once the run is handled: a claim left behind (NATS away) only delays a redelivery until it expires. */
  private async release(run: ActiveRun, log: Logger): Promise<void> {
    if (!run.claim) return;
    try {
      await this.o.claims.release(run.claim);
    } catch (err) {
      log.warn({ err }, "cannot release the run's claim; it expires unrenewed");
    }
    run.claim = undefined;
  }

  /** A report a step left on disk before this runner (or a previous incarnation of it) could record it. */
  private async resultOnDisk(d: pb.StepDispatch, log: Logger): Promise<StepRunCommand | undefined> {
    const report = await this.o.driver.recover?.(d.runId);
    if (!report) return undefined;
    log.info({ outcome: report.outcome }, "found the result of a run that ended unrecorded");
    if (report.outcome === "failed") return fail(report, "", 0);
    return this.succeeded(report, new StepLog(), 0);
  }

  private async execute(
    item: WorkItem<pb.StepDispatch>, run: ActiveRun, log: Logger, adopted: boolean, keep: (result: StepRunCommand) => Promise<void>,
  ): Promise<StepRunCommand> {
    const d = item.data;
    const started = this.o.now();
    const stepLog = new LiveLog(this.o.logs, d.runId, { onError: (err) => log.warn({ err }, "cannot store the step's log; trying again") });
    log.info({ step: d.step, sandbox: d.sandbox, resource: d.resource, phase: d.phase }, "step starting");
    // What this attempt may do at the IO context, and nothing more: its own inputs and outputs, until its deadline.
    // Not signed for a step whose driver never calls the IO context for it (the process driver's planned dispatch).
    const token = this.o.driver.needsToken?.(d) === false ? "" : await signCapability(this.o.signingKey,
      { run: d.runId, inputs: d.inputs, outputs: d.outputs }, (d.timeoutMs || DEFAULT_STEP_TIMEOUT_MS) + TOKEN_GRACE_MS);
    // Following a lost runner's step: the log it stored is not stored again.
    const skipLogBytes = adopted ? (await this.o.logs.read(d.runId)).length : 0;
    run.step = this.o.driver.run({ dispatch: d, token, env: defaultStepEnv(d), onLog: (c) => stepLog.write(c), ...(skipLogBytes ? { skipLogBytes } : {}) });
    this.o.metrics?.started();
    if (run.stopped) run.step.stop(this.o.cancelGraceMs);
    const deadline = this.deadline(run, d.timeoutMs, log);
    let report: StepReport;
    let durationMs = 0;
    const outcome = () => {
      if (run.stopped) return fail(run.stopped, stepLog.tail(), durationMs);
      if (report.outcome === "failed") return fail(report, stepLog.tail(), durationMs);
      return this.succeeded(report, stepLog, durationMs);
    };
    let early: StepRunCommand;
    let journaling: Promise<StepRunCommand | undefined>;
    let keeping: Promise<void>;
    try {
      report = await (run.step.ended ?? run.step.result);
      durationMs = Math.round(this.o.now() - started);
      early = outcome();
      // A success's values go to the output journal at once (idempotent puts), while the rest
      // below happens; a put that fails is done again when the result is recorded.
      journaling = this.journaled(d.runId, early).catch(() => undefined);
      // First of all, the result is kept with the run's claim (one write): a runner that dies from
      // here on, once it is written, leaves it to the next, which records it rather than running
      // the step again. It is written while the log is closed (below): both before the record.
      keeping = keep(early);
      report = await run.step.result;
    } finally {
      deadline?.clear();
      this.o.metrics?.stopped();
    }
    // The whole log, and its end, are stored before the result is recorded: a reader that sees the result has the log.
    await Promise.all([keeping, stepLog.close()]);
    const result = outcome();
    // The journaled success, if the result is still that success (a stop since, or an other report, is recorded as it is).
    const journaled = await journaling;
    return journaled && sameSuccess(early, result) ? journaled : result;
  }

  /**
   * The step's timeout counts while its own program runs: from when it began (before, its
   * inputs are fetched and its container started, which waits out an IO context or NATS
   * failover) until it exited (after, its outputs are stored, which does too). Neither wait is
   * a reason to fail the step and run it again. A driver that does not say when its program
   * began is timed from now; one whose program never begins is stopped at the timeout plus the
   * start grace. A timeout may be longer than one setTimeout holds (24.8 days): longTimeout chains it.
   */
  private deadline(run: ActiveRun, timeoutMs: number, log: Logger): { clear(): void } | undefined {
    const step = run.step;
    if (timeoutMs <= 0 || !step) return undefined;
    const graceMs = this.o.startGraceMs ?? START_GRACE_MS;
    let over = false;
    let timer: LongTimeout | undefined;
    const arm = (ms: number, message: string) => {
      timer?.clear();
      timer = longTimeout(() => {
        log.warn({ timeoutMs }, "step ran past its timeout; stopping it");
        this.stopRun(run, { reason: "DeadlineExceeded", message });
      }, ms);
    };
    const ran = `the step ran longer than its timeout of ${formatMs(timeoutMs)}`;
    if (step.began) {
      arm(timeoutMs + graceMs, `the step's program did not start within its timeout of ${formatMs(timeoutMs)} and the start grace of ${formatMs(graceMs)}`);
      void step.began.then(() => { if (!over) arm(timeoutMs, ran); });
    } else {
      arm(timeoutMs, ran);
    }
    const clear = () => {
      over = true;
      timer?.clear();
    };
    void step.exited?.then(clear);
    return { clear };
  }

  /** Keeps `result` with the run's claim; a claim that cannot be written costs only this shortcut. */
  private async keep(run: ActiveRun, result: StepRunCommand, log: Logger): Promise<void> {
    const encoded = encodeKept(result);
    if (!run.claim || encoded === undefined) return;
    try {
      run.claim = await this.o.claims.renew(run.claim, this.o.claimTtlMs, encoded);
    } catch (err) {
      // Lost to another runner, or NATS away: the result is recorded all the same, only not kept first.
      log.warn({ err }, "cannot keep the step's result with its claim; recording it");
    }
  }

  /** The result a runner kept with the claim this runner now holds, if any. */
  private resultKept(run: ActiveRun, log: Logger): StepRunCommand | undefined {
    const kept = decodeKept(run.claim?.result);
    if (kept) log.info({ result: kept.type }, "found the result a lost runner kept with the run's claim");
    return kept;
  }

  /** The outputs come from the step's own report, to be journaled (Redis is only a cache). */
  private succeeded(report: Extract<StepReport, { outcome: "succeeded" }>, stepLog: Pick<StepLog, "tail">, durationMs: number): StepRunCommand {
    const kept: pb.OutputValue[] = report.outputs.map((o) => {
      const value = Buffer.from(o.base64 ?? "", "base64");
      return { name: o.name, value, size: value.length, sha256: "" };
    });
    const damaged = report.outputs.filter((o, i) => kept[i]!.value.length !== o.size).map((o) => o.name);
    if (damaged.length) {
      return fail({ reason: FailureReason.DriverError, message: `the step's report is damaged (outputs ${damaged.join(", ")})` }, stepLog.tail(), durationMs);
    }
    return { type: "succeed", outputs: kept, durationMs };
  }

  /** A success with its values put in the output journal, and only their names, sizes and digests left in the command. */
  private async journaled(runId: string, command: StepRunCommand): Promise<StepRunCommand> {
    if (command.type !== "succeed" || command.outputs.every((o) => o.sha256)) return command;
    return { ...command, outputs: await journalOutputs(this.o.values, runId, command.outputs) };
  }

  private onCancel(message: unknown): void {
    let cancel: pb.StepCancel;
    try {
      cancel = pb.StepCancel.fromJSON(message);
    } catch (err) {
      this.o.logger.warn({ err }, "ignoring a malformed cancel message");
      return;
    }
    const now = this.o.now();
    for (const [id, c] of this.earlyCancels) if (now - c.at > EARLY_CANCEL_TTL_MS) this.earlyCancels.delete(id);
    for (const runId of cancel.runIds) {
      const run = this.active.get(runId);
      if (!run) {
        this.earlyCancels.set(runId, { at: now, reason: cancel.reason });
        continue;
      }
      this.o.logger.info({ runId, reason: cancel.reason }, "cancelling step");
      this.stopRun(run, { reason: FailureReason.Cancelled, message: cancel.reason ? `cancelled: ${cancel.reason}` : "cancelled" });
    }
  }

  private stopRun(run: ActiveRun, stop: Stop): void {
    run.stopped ??= stop;
    run.step?.stop(this.o.cancelGraceMs);
  }
}

/** A kept result larger than this is not kept (a claim is one KV entry, under NATS's max payload): it is recorded only. */
const MAX_KEPT_BYTES = 256 * 1024;

/** A result as kept with a claim: JSON, output values in base64 (NATS already holds them, in the journal). */
function encodeKept(result: StepRunCommand): string | undefined {
  if (result.type !== "succeed" && result.type !== "fail") return undefined;
  const kept = result.type === "succeed"
    ? { ...result, outputs: result.outputs.map((o) => ({ ...o, value: Buffer.from(o.value.buffer, o.value.byteOffset, o.value.byteLength).toString("base64") })) }
    : result;
  const text = JSON.stringify(kept);
  return Buffer.byteLength(text) <= MAX_KEPT_BYTES ? text : undefined;
}

function decodeKept(text: string | undefined): StepRunCommand | undefined {
  if (text === undefined) return undefined;
  try {
    const kept = JSON.parse(text) as
      | { type: "succeed"; durationMs: number; outputs: Array<Omit<pb.OutputValue, "value"> & { value: string }> }
      | Extract<StepRunCommand, { type: "fail" }>;
    if (kept.type === "succeed") return { ...kept, outputs: kept.outputs.map((o) => ({ ...o, value: Buffer.from(o.value, "base64") })) };
    if (kept.type === "fail") return kept;
  } catch {
    // Not ours to read: the run goes on as if nothing was kept.
  }
  return undefined;
}

/** Two results that are the same success: the same outputs, the same values. */
function sameSuccess(a: StepRunCommand, b: StepRunCommand): boolean {
  if (a.type !== "succeed" || b.type !== "succeed" || a.outputs.length !== b.outputs.length) return false;
  return a.outputs.every((o, i) => o.name === b.outputs[i]!.name && Buffer.from(o.value).equals(Buffer.from(b.outputs[i]!.value)));
}

const formatMs = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000}s` : `${ms} ms`);

function fail(
  f: { reason: string; message: string; exitCode?: number | undefined }, logTail: string, durationMs: number,
): StepRunCommand {
  return {
    type: "fail",
    failure: { reason: f.reason, message: f.message, logTail, ...(f.exitCode !== undefined ? { exitCode: f.exitCode } : {}) },
    durationMs,
  };
}
