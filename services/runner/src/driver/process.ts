// The process driver: per step, exactly one isolated process tree, started by one exec of
// ephemera-launch (native/ephemera-launch.c): its own mount and pid namespaces, the
// private views mounted by the launcher itself, then the script. The resident launcher
// (resident.ts) forks that exec, so the runner's heap is never forked. Everything else a step
// needs is done here, in the long-lived runner: the script and inputs are resolved (from
// the dispatch's plan, the outputs of the steps this driver ran and the output journal; or,
// for a dispatch without a plan, one IO-context call), staged in the run directory, and
// after the script its outputs are checked, held for the steps that read them next and
// reported (and, for a dispatch without a plan, cached at the IO context). Each run gets a
// process group, so stopping it reaches the script's children too.
import { mkdirSync, readdirSync, readFileSync, rmdirSync, unlinkSync, writeFileSync, type Dirent } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import { constants } from "node:os";
import { dirname, join } from "node:path";
import { parseRunId, valueKey, type ValueJournal } from "@ephemera/events";
import {
  DEFAULT_RETRY, FailureReason, MAX_OUTPUT_BYTES, REPORT_FILE, STEP_HOME, fetchStepInputs, ioContextClient, parseStepReport,
  outputMissing, outputTooLarge, planStep, privateViewDirs, storeStepOutputs, withPolicy,
  type IOCallOptions, type RetryPolicy, type StepPlan, type StepReport,
} from "@ephemera/io-agent";
import {
  DEFAULT_RECENT_BYTES, RecentOutputs, errorMessage, isRetryable, longTimeout, type ClientTls, type Logger, type LongTimeout, type grpc,
} from "@ephemera/kit";
import type * as pb from "@ephemera/proto";
import type { RunRequest, RunningStep, StepDriver } from "./driver.js";
import type { Isolation } from "./isolation.js";
import type { StepNetwork, StepNetworkLease } from "./network.js";
import { ResidentLauncher } from "./resident.js";
import { stepEnv, type StepSandbox } from "./step-env.js";
import { stepPrivateRoots } from "./workroot.js";

export interface ProcessDriverOptions {
  /** Per-run directories live under `<workdir>/runs`. */
  workdir: string;
  /** Directories every step gets a private view of (default: stepPrivateRoots(), /tmp and /dev/shm). */
  privateRoots?: readonly string[];
  /** host:port of the IO context. */
  iocontext: string;
  /** TLS to the IO context; absent: plaintext. */
  iocontextTls?: ClientTls;
  /** Run on every IO-context call (the runner's metrics count them by method and code). */
  iocontextInterceptors?: grpc.Interceptor[];
  /** The built ephemera-launch. */
  launcher: string;
  /** From detectIsolation(). */
  isolation: Isolation;
  /** The steps' network (openStepNetwork); absent: the runner's own. */
  network?: StepNetwork;
  /** Of it, PATH and LANG only reach the script. */
  hostEnv: Record<string, string>;
  /** The script's user and quota (runnerConfig's stepSandbox); absent = as the runner, no quota. */
  sandbox?: StepSandbox;
  logger: Logger;
  /**
   * How much lower the steps' CPU priority is than the runner's (nice, 0–19): on a small
   * machine busy steps must not starve the services, the API above all.
   */
  niceness?: number;
  /** How calls to the IO context (and reads of the output journal) are retried while it is unavailable (default: DEFAULT_RETRY, ~60 s). */
  ioRetry?: Partial<RetryPolicy>;
  /**
   * The output journal: where the values of a planned dispatch's inputs (its DispatchPlan)
   * are read when this driver does not hold them. Absent: every step asks the IO context.
   */
  values?: Pick<ValueJournal, "get">;
  /** The bound, in bytes, of its own steps' outputs held for the steps that read them next (default DEFAULT_RECENT_BYTES; 0: none). */
  recentBytes?: number;
  /** Told, for each step, where its inputs were resolved (the runner's metrics count it). */
  onInputs?: (from: InputsFrom) => void;
}

/**
 * How long the outputs of a step this driver ran are held for the steps that read them: the
 * next steps of a chain are dispatched within milliseconds; and the runner does not follow
 * sandbox deletions, so a deleted sandbox's values leave its memory at the latest this long after.
 */
export const RECENT_TTL_MS = 5 * 60_000;

/**
 * Where a step's inputs were resolved: `dispatch`, from its plan and this driver's memory
 * alone; `journal`, from its plan with a value read from the output journal; `iocontext`,
 * asked of the IO context (a dispatch without a plan).
 */
export type InputsFrom = "dispatch" | "journal" | "iocontext";

/** What ephemera-launch left in the run directory's `status`. */
interface LaunchStatus {
  exit?: { code: number; message: string };
  error?: string;
  cancelled: boolean;
  outputs: Map<number, { size: number } | { missing: true } | { tooLarge: number }>;
  full: string[];
}

export class ProcessDriver implements StepDriver {
  readonly name = "process";
  private client?: pb.IOContextClient;
  private resident?: ResidentLauncher;
  /** Outputs on their way to the IO context's cache (see cache). */
  private readonly caching = new Set<AbortController>();
  /** The outputs of the steps it ran, served to the steps that read them when their digests are the journaled ones. */
  private readonly recent?: RecentOutputs;

  private readonly privateRoots: readonly string[];

  constructor(private readonly options: ProcessDriverOptions) {
    this.privateRoots = options.privateRoots ?? stepPrivateRoots();
    if (options.recentBytes !== 0) this.recent = new RecentOutputs(options.recentBytes ?? DEFAULT_RECENT_BYTES, { ttlMs: RECENT_TTL_MS });
  }

  private runDir(runId: string): string {
    return join(this.options.workdir, "runs", runId);
  }

  /** One connection to the IO context for every step of this runner. */
  private io(): pb.IOContextClient {
    return (this.client ??= ioContextClient(this.options.iocontext, this.options.iocontextTls, this.options.iocontextInterceptors));
  }

  /** How a call to the IO context is retried while it is unavailable. */
  private ioRetry(): RetryPolicy {
    return { ...DEFAULT_RETRY, ...this.options.ioRetry };
  }

  /** Started at the first step, kept until close. */
  private launcher(): ResidentLauncher {
    return (this.resident ??= new ResidentLauncher(this.options.launcher, this.options.logger));
  }

  /** A planned dispatch is resolved here, from the plan and the output journal: no IO-context call, so no token. */
  needsToken(dispatch: pb.StepDispatch): boolean {
    return !(dispatch.plan && this.options.values);
  }

  close(): void {
    for (const call of this.caching) call.abort();
    this.client?.close();
    this.client = undefined;
    this.resident?.close();
    this.resident = undefined;
  }

  /** Removes the steps' network (the runner's stop, once no step runs). */
  async stop(): Promise<void> {
    await this.options.network?.close();
  }

  async recover(runId: string): Promise<StepReport | undefined> {
    return parseStepReport(await readFile(join(this.runDir(runId), REPORT_FILE), "utf8").catch(() => ""));
  }

  async cleanup(runId: string): Promise<void> {
    // Synchronously, as the directory was made and read (see stage): some ten small files.
    try {
      removeTree(this.runDir(runId));
    } catch {
      // Left for the next start's leftovers sweep.
    }
  }

  run(request: RunRequest): RunningStep {
    const { dispatch } = request;
    const runDir = this.runDir(dispatch.runId);
    const stopping = new AbortController();
    let pgid: number | undefined;
    let exited = false;
    let programExited: () => void = () => undefined;
    const exitedOnce = new Promise<void>((resolve) => { programExited = resolve; });
    let programBegan: () => void = () => undefined;
    const began = new Promise<void>((resolve) => { programBegan = resolve; });
    let reportKnown: (report: StepReport) => void = () => undefined;
    const endedEarly = new Promise<StepReport>((resolve) => { reportKnown = resolve; });
    let force: LongTimeout | undefined;
    const say = (line: string) => request.onLog(Buffer.from(`[ephemera] ${line}\n`));
    const retrying = (what: string): IOCallOptions => ({
      retry: this.ioRetry(),
      onRetry: (n) => say(`${what}: ${n.error}; retry ${n.attempt} in ${n.delayMs} ms (${Math.round(n.elapsedMs / 1000)} s so far)`),
      signal: stopping.signal,
    });
    const signalGroup = (signal: NodeJS.Signals) => {
      if (pgid === undefined) return;
      try { process.kill(-pgid, signal); } catch { /* the group is gone */ }
    };
    const cancelled = (exitCode?: number): StepReport => ({
      outcome: "failed", reason: FailureReason.Cancelled, message: "the step was stopped", ...(exitCode === undefined ? {} : { exitCode }),
    });

    const attempt = async (): Promise<StepReport> => {
      await freshRunDir(runDir);
      if (stopping.signal.aborted) return { outcome: "failed", reason: FailureReason.Cancelled, message: "the step was stopped before it started" };
      let plan: StepPlan;
      try {
        const values = this.options.values;
        const planned = dispatch.plan && values
          ? await this.plannedInputs(dispatch.plan, values, retrying("cannot read the step's inputs from the output journal")) : undefined;
        plan = planStep(planned?.inputs ?? await fetchStepInputs(this.io(), dispatch.runId, request.token, retrying("cannot get the step's inputs")));
        this.options.onInputs?.(planned?.from ?? "iocontext");
      } catch (err) {
        if (stopping.signal.aborted) return cancelled();
        // Still unreachable after the retries: the infrastructure's failure (the step runs again), not the plugin's.
        const reason = isRetryable(err) ? FailureReason.DriverError : FailureReason.InputUnavailable;
        return { outcome: "failed", reason, message: `cannot get the step's inputs: ${errorMessage(err)}` };
      }
      let argv: string[];
      try {
        argv = this.stage(plan, runDir);
      } catch (err) {
        return { outcome: "failed", reason: FailureReason.DriverError, message: `cannot prepare the step: ${errorMessage(err)}` };
      }
      if (stopping.signal.aborted) return cancelled();
      let lease: StepNetworkLease;
      try {
        lease = (await this.options.network?.acquire(stopping.signal)) ?? { args: [], release: () => undefined };
      } catch (err) {
        if (stopping.signal.aborted) return cancelled();
        return { outcome: "failed", reason: FailureReason.DriverError, message: `cannot have a network for the step: ${errorMessage(err)}` };
      }
      // Stopped in the moment its namespace came free: the namespace goes to the next step, this one never starts.
      if (stopping.signal.aborted) {
        lease.release();
        return cancelled();
      }
      // In a session of its own: stopping the step reaches every process of its group.
      const launched = this.launcher().start([...lease.args, ...argv],
        { ...stepEnv(this.options.hostEnv, request.env), HOME: STEP_HOME, ...plan.env }, (chunk) => request.onLog(chunk));
      try {
        pgid = await launched.pid;
        programBegan();
        if (stopping.signal.aborted) signalGroup("SIGTERM"); // stopped while it started
      } catch {
        // not started: its exit says why
      }
      // Settles once all its output has been passed on.
      const exit = await launched.exit;
      exited = true;
      programExited();
      force?.clear();
      // Without a pid namespace, whatever the step left in its group goes with it.
      signalGroup("SIGKILL");
      // Every process of the step is gone (its pid namespace, or its group): the next step may have the namespace.
      lease.release();
      const status = parseStatus(readIfThere(join(runDir, "status")));
      if (stopping.signal.aborted || status?.cancelled) return cancelled(status?.exit?.code);
      if (!status) {
        if (exit.error) return { outcome: "failed", reason: FailureReason.DriverError, message: `${exit.error.message}, before the step reported` };
        const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
        return { outcome: "failed", reason: FailureReason.DriverError, message: `the step launcher ${how} before reporting` };
      }
      if (status.error) return { outcome: "failed", reason: FailureReason.DriverError, message: status.error };
      const { code, message } = status.exit ?? { code: 1, message: "the step launcher did not say how the script ended" };
      if (code !== 0) {
        const full = status.full.length
          ? ` (${status.full.join(", ")} full: the step's ${mib(this.options.sandbox?.tmpSizeBytes ?? 0)} quota per private view, EPHEMERA_STEP_TMP_SIZE)` : "";
        return { outcome: "failed", reason: FailureReason.Error, exitCode: code, message: message + full };
      }
      const values: pb.OutputValue[] = [];
      for (const [i, o] of plan.outputs.entries()) {
        const found = status.outputs.get(i);
        if (!found || "missing" in found) return refused(outputMissing(o));
        if ("tooLarge" in found) return refused(outputTooLarge(o, found.tooLarge));
        const value = readFileSync(join(runDir, "out", String(i)));
        if (value.length !== found.size) return { outcome: "failed", reason: FailureReason.DriverError, message: `output "${o.name}" was not copied whole` };
        values.push({ name: o.name, value, size: value.length, sha256: "" });
      }
      const report: StepReport = { outcome: "succeeded", outputs: values.map((v) => ({ name: v.name, size: v.value.length, base64: Buffer.from(v.value).toString("base64") })) };
      reportKnown(report);
      if (values.length) {
        this.recent?.remember(dispatch.runId, dispatch.routingKey, values);
        // A planned dispatch's readers are mostly planned too (this driver's memory or the journal). One that is not (a delete
        // step whose create workflow had not ended, a plan too large to carry) misses the cache and reads the journal.
        if (!dispatch.plan) this.cache(dispatch.runId, request.token, values);
      }
      return report;
    };

    const result = attempt()
      .catch((err: unknown): StepReport => {
        this.options.logger.error({ err, runId: dispatch.runId }, "process driver failed");
        return { outcome: "failed", reason: FailureReason.DriverError, message: `process driver: ${String(err)}` };
      })
      .then(async (report) => {
        if (report.outcome === "failed" && report.reason !== FailureReason.Error) say(report.message);
        // Kept until the runner has recorded the result (cleanup): a runner that dies in
        // between finds it again (recover) after a restart.
        try {
          writeFileSync(join(runDir, REPORT_FILE), JSON.stringify(report), { mode: 0o600 });
        } catch {
          // Only the shortcut after a runner's crash is lost: the step runs again then.
        }
        return report;
      });

    void result.then(() => programBegan());
    return {
      result,
      // Its inputs fetched and staged, the launcher runs: the step's timeout counts from here.
      began,
      exited: exitedOnce,
      // A success is known before its outputs are cached at the IO context; anything else when it settles.
      ended: Promise.race([endedEarly, result]),
      stop: (graceMs: number) => {
        if (stopping.signal.aborted || exited) return;
        stopping.abort();
        signalGroup("SIGTERM");
        force = longTimeout(() => signalGroup("SIGKILL"), graceMs).unref();
      },
    };
  }

  /**
   * A planned dispatch's script and inputs (the scheduler's DispatchPlan), as the IO context
   * would answer them, without asking it: params as planned; a step's output from what this
   * driver holds of the run that produced it, when its digest is the one that run journaled,
   * or else from the output journal, which checks the digest itself. One read per producing
   * run not held, all at once. A value the journal does not have fails the step
   * (InputUnavailable), as the IO context's answer would; a journal away is waited out.
   */
  private async plannedInputs(
    plan: pb.DispatchPlan, journal: Pick<ValueJournal, "get">, options: IOCallOptions,
  ): Promise<{ inputs: pb.GetStepInputsResponse; from: InputsFrom }> {
    let from: InputsFrom = "dispatch";
    const runs = new Map<string, Promise<Map<string, Buffer>>>();
    const valuesOf = (runId: string) => {
      let read = runs.get(runId);
      if (!read) {
        const wanted = plan.inputs.filter((i) => i.runId === runId).map((i) => ({ name: i.output, sha256: i.sha256 }));
        const held = this.recent?.take(runId, wanted);
        if (!held) from = "journal";
        read = held ? Promise.resolve(held) : this.journaled(journal, runId, wanted, options);
        runs.set(runId, read);
      }
      return read;
    };
    for (const i of plan.inputs) if (i.runId) valuesOf(i.runId).catch(() => undefined);
    const inputs: pb.ResolvedInput[] = [];
    for (const i of plan.inputs) {
      const value = i.runId ? (await valuesOf(i.runId)).get(i.output) : i.param === undefined ? undefined : Buffer.from(i.param, "utf8");
      inputs.push({ name: i.name, present: value !== undefined, value: value ?? Buffer.alloc(0), env: i.env, path: i.path });
    }
    return { inputs: { script: plan.script, inputs, outputs: plan.outputs }, from };
  }

  /** A run's wanted values from the output journal (each checked against its digest there), retried while it is away. */
  private async journaled(
    journal: Pick<ValueJournal, "get">, runId: string, wanted: Array<{ name: string; sha256: string }>, options: IOCallOptions,
  ): Promise<Map<string, Buffer>> {
    const read = (w: { name: string; sha256: string }) =>
      withPolicy(() => journal.get(valueKey(runId, w.name), w.sha256), options);
    const values = new Map(await Promise.all(wanted.map(async (w) => [w.name, await read(w)] as const)));
    // Held for the next step that reads the same run (a fan-out).
    this.recent?.remember(runId, parseRunId(runId)?.routingKey ?? "", [...values].map(([name, value]) => ({ name, value })));
    return values;
  }

  /**
   * Hands a succeeded step's outputs to the IO context's cache while the runner records the
   * result, not before (only for a dispatch without a plan, whose readers are likely to ask
   * the IO context too): the runner journals them from the report, and that journal is what
   * counts (the IO context takes a write after the run's end only as a copy of it). Waiting
   * for this call cost a chained step about 8 ms. A cache that misses them costs a later
   * read one journal lookup; a runner that stops abandons the writes in flight.
   */
  private cache(runId: string, token: string, values: pb.OutputValue[]): void {
    const { logger } = this.options;
    const call = new AbortController();
    this.caching.add(call);
    storeStepOutputs(this.io(), runId, token, values, { retry: this.ioRetry(), signal: call.signal })
      .catch((err: unknown) => {
        if (!call.signal.aborted) logger.warn({ runId, err }, "outputs not cached in the IO context (they are journaled all the same)");
      })
      .finally(() => this.caching.delete(call));
  }

  /**
   * Writes the script and input files into the run directory; returns the launcher's arguments.
   * Synchronously, as the run directory is made, read after the step and removed: a few small
   * files on the runner's own disk are written in microseconds, and each hop through the
   * thread pool cost more than that on a busy runner (a traced chain: 2.9 ms a step for the
   * directory and these files; reading the status and outputs, writing the report and
   * removing the directory after the step, over 2,000 such directories in a loop: 1.9 ms of
   * CPU each through the thread pool, 0.5 ms without).
   */
  private stage(plan: StepPlan, runDir: string): string[] {
    const views = privateViewDirs(plan, runDir, this.privateRoots);
    const sandbox = this.options.sandbox ?? {};
    writeFileSync(join(runDir, "script"), plan.script, { mode: 0o700 });
    plan.files.forEach((f, i) => writeFileSync(join(runDir, "in", String(i)), f.value, { mode: 0o600 }));
    return [
      "--rundir", runDir,
      ...this.options.isolation.flags,
      ...(this.options.niceness ? ["--nice", String(this.options.niceness)] : []),
      ...(sandbox.uid !== undefined ? ["--uid", String(sandbox.uid), "--gid", String(sandbox.gid ?? sandbox.uid)] : []),
      ...(sandbox.tmpSizeBytes ? ["--tmpfs-size", String(sandbox.tmpSizeBytes)] : []),
      ...(sandbox.readOnlyHost ? ["--readonly-host"] : []),
      "--limit", String(MAX_OUTPUT_BYTES),
      ...views.flatMap((v) => ["--view", v]),
      ...plan.files.flatMap((f, i) => ["--file", `${i}:${f.path}`]),
      ...plan.outputs.flatMap((o) => ["--output", o.path]),
    ];
  }
}

/** The run's directory, empty: a leftover of an earlier incarnation of the run (rare: the run id names the attempt) is removed first. */
async function freshRunDir(runDir: string): Promise<void> {
  // Synchronously, as the files are staged (see stage), but for the rare leftover's removal.
  mkdirSync(dirname(runDir), { recursive: true, mode: 0o700 });
  try {
    mkdirSync(runDir, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    await rm(runDir, { recursive: true, force: true });
    mkdirSync(runDir, { mode: 0o700 });
  }
  mkdirSync(join(runDir, "in"), { mode: 0o700 });
}

/**
 * Removes a directory and what is in it, never following a link. fs.rmSync's recursive
 * removal first tries rmdir on each directory and makes an error of the ENOTEMPTY it gets:
 * 180–310 µs for a run directory against 80 µs this way (2,000 of them on /dev/shm). Gone already: nothing to do.
 */
function removeTree(dir: string): void {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) removeTree(path);
    else unlinkSync(path);
  }
  rmdirSync(dir);
}

/** A file's text, or "" when it is not there (or cannot be read). */
function readIfThere(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/** A declared output's failure (io-agent words it) as the step's report. */
const refused = (f: { reason: FailureReason; message: string }): StepReport =>
  ({ outcome: "failed", reason: f.reason, message: f.message });

const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, n]) => [n, name]));

/** Pure: the launcher's status file (see ephemera-launch.c); undefined when it left none. */
export function parseStatus(text: string): LaunchStatus | undefined {
  if (!text) return undefined;
  const status: LaunchStatus = { cancelled: false, outputs: new Map(), full: [] };
  for (const line of text.split("\n")) {
    const [kind, ...rest] = line.split(" ");
    const arg = rest.join(" ");
    if (kind === "exit") {
      const code = Number(rest[0]);
      status.exit = { code, message: code === 0 ? "" : `script exited with code ${code}` };
    } else if (kind === "signal") {
      const n = Number(rest[0]);
      status.exit = { code: 128 + n, message: `script killed by ${SIGNAL_NAMES.get(n) ?? `signal ${n}`}` };
    } else if (kind === "exec") {
      // Shell conventions: 127 for a missing interpreter, 126 for a file that cannot be executed.
      const errno = Number(rest[0]);
      const code = errno === constants.errno.ENOENT ? 127 : 126;
      status.exit = { code, message: `cannot execute the script (is its #! interpreter installed?): ${rest.slice(1).join(" ")}` };
    } else if (kind === "error") {
      status.error = arg;
    } else if (kind === "cancelled") {
      status.cancelled = true;
    } else if (kind === "output") {
      const i = Number(rest[0]);
      status.outputs.set(i, rest[1] === "missing" ? { missing: true } : rest[1] === "toolarge" ? { tooLarge: Number(rest[2]) } : { size: Number(rest[1]) });
    } else if (kind === "full") {
      status.full.push(arg);
    }
  }
  return status;
}

const mib = (bytes: number) => `${Math.round((bytes / (1024 * 1024)) * 100) / 100} MiB`;
