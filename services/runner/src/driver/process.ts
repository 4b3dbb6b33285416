// The process driver: one step = one process tree in its own mount (and pid) namespace,
// running io-agent's step program (inputs, private views, the script, outputs). Each run
// gets a process group, so stopping it reaches the script's children too.
import { spawn } from "node:child_process";
import { mkdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { FailureReason, REPORT_FILE, STEP_CONFIG_ENV, parseStepReport, type StepProgramConfig, type StepReport } from "@ephemera/io-agent";
import type { ClientTls, Logger } from "@ephemera/kit";
import type { RunRequest, RunningStep, StepDriver } from "./driver.js";
import type { Isolation } from "./isolation.js";
import { hostEnvForSteps, stepEnv, type StepSandbox } from "./step-env.js";

export interface ProcessDriverOptions {
  /** Per-run directories live under `<workdir>/runs`. */
  workdir: string;
  /** host:port of the IO context, as the step program dials it. */
  iocontext: string;
  /** TLS to the IO context; absent: plaintext. */
  iocontextTls?: ClientTls;
  /** io-agent's step program (its built `step.js`). */
  stepProgram: string;
  /** From detectIsolation(). */
  isolation: Isolation;
  /** Of it, PATH and LANG only reach the step program and the script. */
  hostEnv: Record<string, string>;
  /** The script's user and quota (runnerConfig's stepSandbox); absent = as the runner, no quota. */
  sandbox?: StepSandbox;
  logger: Logger;
  node?: string;
  /**
   * How much lower the steps' CPU priority is than the runner's (nice, 0–19): on a small
   * machine busy steps must not starve the services, the API above all.
   */
  niceness?: number;
}

export class ProcessDriver implements StepDriver {
  readonly name = "process";

  constructor(private readonly options: ProcessDriverOptions) {}

  private runDir(runId: string): string {
    return join(this.options.workdir, "runs", runId);
  }

  async recover(runId: string): Promise<StepReport | undefined> {
    return parseStepReport(await readFile(join(this.runDir(runId), REPORT_FILE), "utf8").catch(() => ""));
  }

  async cleanup(runId: string): Promise<void> {
    await rm(this.runDir(runId), { recursive: true, force: true }).catch(() => undefined);
  }

  run(request: RunRequest): RunningStep {
    const { dispatch } = request;
    const runDir = this.runDir(dispatch.runId);
    let pgid: number | undefined;
    let stopped = false;
    let exited = false;
    let force: NodeJS.Timeout | undefined;

    const signalGroup = (signal: NodeJS.Signals) => {
      if (pgid === undefined) return;
      try { process.kill(-pgid, signal); } catch { /* the group is gone */ }
    };

    const result = (async (): Promise<StepReport> => {
      await rm(runDir, { recursive: true, force: true });
      await mkdir(runDir, { recursive: true });
      if (stopped) return { outcome: "failed", reason: FailureReason.Cancelled, message: "the step was stopped before it started" };
      const config: StepProgramConfig & { sandbox?: StepSandbox } = {
        runId: dispatch.runId,
        token: request.token,
        iocontext: this.options.iocontext,
        ...(this.options.iocontextTls ? { iocontextTls: this.options.iocontextTls } : {}),
        runDir,
        env: stepEnv(this.options.hostEnv, request.env),
        ...(this.options.sandbox ? { sandbox: this.options.sandbox } : {}),
      };
      const nice = this.options.niceness ? ["nice", "-n", String(this.options.niceness)] : [];
      const [command, ...args] = [...nice, ...this.options.isolation.command];
      const child = spawn(command!, [...args, "--", this.options.node ?? process.execPath, this.options.stepProgram], {
        detached: true, // its own process group: stopping the step reaches every process of it
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...hostEnvForSteps(this.options.hostEnv), [STEP_CONFIG_ENV]: JSON.stringify(config) },
      });
      pgid = child.pid;
      const streamsClosed = Promise.all([child.stdout, child.stderr].map((s) => new Promise<void>((resolve) => {
        s.on("data", (chunk: Buffer) => request.onLog(chunk));
        s.on("close", resolve);
      })));
      const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
        child.once("error", (error) => resolve({ code: null, signal: null, error }));
        child.once("exit", (code, signal) => resolve({ code, signal }));
      });
      exited = true;
      clearTimeout(force);
      // Whatever the script left running in the background goes with the step (the pid
      // namespace already saw to that; without one, its process group is all there is).
      signalGroup("SIGKILL");
      await Promise.race([streamsClosed, new Promise((r) => setTimeout(r, 2000).unref())]);
      child.stdout.destroy();
      child.stderr.destroy();
      const report = parseStepReport(await readFile(join(runDir, REPORT_FILE), "utf8").catch(() => ""));
      if (stopped) return { outcome: "failed", reason: FailureReason.Cancelled, message: "the step was stopped", ...exitCode(report) };
      if (report) return report;
      const how = exit.error ? exit.error.message : exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
      return { outcome: "failed", reason: FailureReason.DriverError, message: `the step program ${how} before reporting` };
    })()
      .catch((err: unknown): StepReport => {
        this.options.logger.error({ err, runId: dispatch.runId }, "process driver failed");
        return { outcome: "failed", reason: FailureReason.DriverError, message: `process driver: ${String(err)}` };
      });
    // The run directory (and the report in it) stays until the runner has recorded the result
    // (cleanup): a runner that dies in between finds it again (recover) after a restart.

    return {
      result,
      stop: (graceMs: number) => {
        if (stopped || exited) return;
        stopped = true;
        signalGroup("SIGTERM");
        force = setTimeout(() => signalGroup("SIGKILL"), graceMs);
        force.unref();
      },
    };
  }
}

const exitCode = (r: StepReport | undefined) => (r?.outcome === "failed" && r.exitCode !== undefined ? { exitCode: r.exitCode } : {});
