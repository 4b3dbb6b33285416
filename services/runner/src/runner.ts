// The runner: takes its cluster's dispatches off the work queue, owns each run's StepRun
// aggregate, runs the step through a driver while heartbeating the work item, stores the
// log, records the result, and only then lets the item be acknowledged.
import * as pb from "@ephemera/proto";
import type { EventStore, LogStore, WorkItem, WorkQueue, WorkQueueConsumer } from "@ephemera/eventstore";
import { fetchStepOutputs, FailureReason, type StepReport } from "@ephemera/io-agent";
import { errorMessage, isRetryable, retry, type Logger } from "@ephemera/kit";
import { defaultStepEnv, type RunningStep, type StepDriver } from "./driver/driver.js";
import { StepLog } from "./log.js";
import type { StepRunCommand } from "./steprun/decide.js";
import { executeStepRun } from "./steprun/store.js";

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
  iocontext: pb.IOContextClient;
  logger: Logger;
  /** Between SIGTERM and SIGKILL when a step is cancelled. */
  cancelGraceMs: number;
  heartbeatMs: number;
  /** The largest result event the store takes; see RunnerConfig.maxResultBytes. */
  maxResultBytes: number;
  now: () => number;
}

/** Room kept in a result event for the envelope and the other fields. */
const RESULT_OVERHEAD_BYTES = 4096;

interface Stop {
  reason: typeof FailureReason.Cancelled | typeof FailureReason.RunnerLost;
  message: string;
}

interface ActiveRun {
  /** Settles like the handling of the first delivery: a duplicate delivery is acked or retried with it. */
  done: Promise<void>;
  step?: RunningStep;
  stopped?: Stop;
}

export class Runner {
  private readonly active = new Map<string, ActiveRun>();
  private readonly earlyCancels = new Map<string, { at: number; reason: string }>();
  private consumer?: WorkQueueConsumer;
  private cancels?: WorkQueueConsumer;

  constructor(private readonly o: RunnerOptions) {}

  start(): void {
    this.cancels = this.o.queue.onCancel(this.o.cluster, (m) => this.onCancel(m));
    this.consumer = this.o.queue.consume(this.o.cluster, this.o.concurrency, (item) => this.handle(item));
  }

  /** Stops taking work; running steps get `graceMs` to finish, then are stopped and recorded as lost. */
  async stop(graceMs: number): Promise<void> {
    const deadline = setTimeout(() => {
      for (const run of this.active.values()) {
        this.stopRun(run, { reason: FailureReason.RunnerLost, message: "the runner shut down before the step finished" });
      }
    }, graceMs);
    try {
      await this.consumer?.stop();
    } finally {
      clearTimeout(deadline);
      await this.cancels?.stop();
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
    const { appended } = await executeStepRun(
      this.o.store, d.runId, { type: "start", dispatch: d, driver: this.o.driver.name, runner: this.o.runnerId }, SOURCE,
    );
    const first = appended[0];
    if (!first) {
      log.info("run already finished; dispatch acknowledged");
      return;
    }
    if (first.type !== "ephemera.steprun.started.v1") {
      log.warn("run was started by a runner that is gone; recorded as RunnerLost");
      return;
    }
    const early = this.earlyCancels.get(d.runId);
    if (early) run.stopped = { reason: FailureReason.Cancelled, message: early.reason || "cancelled before it started" };
    const command = run.stopped ? fail(run.stopped, "", 0) : await this.execute(item, run, log);
    await retry(() => executeStepRun(this.o.store, d.runId, command, SOURCE), {
      attempts: 8, baseMs: 250, maxMs: 5000, retryable: isRetryable,
    });
    log.info({ result: command.type, ...(command.type === "fail" ? { reason: command.failure.reason } : {}) }, "step run recorded");
  }

  private async execute(item: WorkItem<pb.StepDispatch>, run: ActiveRun, log: Logger): Promise<StepRunCommand> {
    const d = item.data;
    const started = this.o.now();
    const stepLog = new StepLog();
    log.info({ step: d.step, sandbox: d.sandbox, resource: d.resource, phase: d.phase }, "step starting");
    run.step = this.o.driver.run({ dispatch: d, token: "", env: defaultStepEnv(d), onLog: (c) => stepLog.write(c) });
    if (run.stopped) run.step.stop(this.o.cancelGraceMs);
    const beat = setInterval(() => item.heartbeat(), this.o.heartbeatMs);
    let report: StepReport;
    try {
      report = await run.step.result;
    } finally {
      clearInterval(beat);
    }
    const durationMs = Math.round(this.o.now() - started);
    await this.o.logs.append(d.runId, stepLog.contents()).catch((err: unknown) => log.warn({ err }, "cannot store the step's log"));
    if (run.stopped) return fail(run.stopped, stepLog.tail(), durationMs);
    if (report.outcome === "failed") return fail(report, stepLog.tail(), durationMs);
    return this.succeeded(d.runId, report, stepLog, durationMs);
  }

  /** Reads the stored outputs back, to journal them in the result event. */
  private async succeeded(runId: string, report: Extract<StepReport, { outcome: "succeeded" }>, stepLog: StepLog, durationMs: number): Promise<StepRunCommand> {
    let outputs: pb.OutputValue[];
    try {
      outputs = await retry(() => fetchStepOutputs(this.o.iocontext, runId, ""), { attempts: 5, baseMs: 200, retryable: isRetryable });
    } catch (err) {
      return fail({ reason: FailureReason.DriverError, message: `cannot read the stored outputs back: ${errorMessage(err)}` }, stepLog.tail(), durationMs);
    }
    const stored = new Set(outputs.map((o) => o.name));
    const lost = report.outputs.filter((o) => !stored.has(o.name)).map((o) => o.name);
    if (lost.length) {
      return fail({ reason: FailureReason.DriverError, message: `outputs stored but not found again: ${lost.join(", ")}` }, stepLog.tail(), durationMs);
    }
    const reported = new Set(report.outputs.map((o) => o.name));
    const kept = outputs.filter((o) => reported.has(o.name));
    // The outputs are journaled base64-encoded in one event; one that cannot be stored must
    // fail the step with a reason, not fail the append over and over.
    const encoded = kept.reduce((n, o) => n + Math.ceil(o.value.length / 3) * 4 + o.name.length + 32, 0);
    if (encoded + RESULT_OVERHEAD_BYTES > this.o.maxResultBytes) {
      const raw = kept.reduce((n, o) => n + o.value.length, 0);
      const sizes = [...kept].sort((x, y) => x.name.localeCompare(y.name)).map((o) => `${o.name} ${o.value.length} bytes`).join(", ");
      return fail({
        reason: FailureReason.OutputTooLarge,
        message: `the outputs total ${raw} bytes (${sizes}); a step's result event holds at most ` +
          `${Math.floor(((this.o.maxResultBytes - RESULT_OVERHEAD_BYTES) * 3) / 4)} bytes of outputs (NATS max_payload ${this.o.maxResultBytes})`,
      }, stepLog.tail(), durationMs);
    }
    return { type: "succeed", outputs: kept, durationMs };
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

function fail(
  f: { reason: string; message: string; exitCode?: number | undefined }, logTail: string, durationMs: number,
): StepRunCommand {
  return {
    type: "fail",
    failure: { reason: f.reason, message: f.message, logTail, ...(f.exitCode !== undefined ? { exitCode: f.exitCode } : {}) },
    durationMs,
  };
}
