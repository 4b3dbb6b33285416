// The step program of the process driver, run by the runner inside a private mount
// namespace: init (inputs, private views, script), the script itself, then the sidecar
// (outputs). Its report goes to <runDir>/report.json; the script's output is its stdout.
import { execFileSync, spawn } from "node:child_process";
import { openSync, writeSync, closeSync } from "node:fs";
import { constants } from "node:os";
import { join } from "node:path";
import { errorMessage, isRetryable } from "@ephemera/kit";
import { fetchStepInputs, ioContextClient, storeStepOutputs, type IOCallOptions } from "./client.js";
import { STEP_HOME, planStep, writeStepFiles } from "./init.js";
import { REPORT_FILE, STEP_CONFIG_ENV, type StepProgramConfig } from "./program.js";
import { FailureReason, type StepReport } from "./report.js";
import { DEFAULT_RETRY } from "./retry.js";
import { collectOutputs } from "./sidecar.js";
import { chownTree, fullViews, mib, type StepSandbox } from "./sandbox.js";
import { makeHostReadOnly, mountPrivateViews, privateViewDirs, sealPrivateViews } from "./views.js";

const SCRIPT_PATH = join(STEP_HOME, ".ephemera", "script");

const say = (line: string) => process.stdout.write(`[ephemera] ${line}\n`);

// Its output is the step's log: no Node deprecation notices there (grpc-js names a TLS server
// by its IP when the IO context is an address, which Node flags as DEP0123).
process.noDeprecation = true;

// The runner stops a step by signalling its whole process group: the script gets SIGTERM
// too and its grace period to clean up. This program stays to report; it only makes sure
// a script that was not started yet never starts.
let terminated = false;
const stopping = new AbortController();
process.on("SIGTERM", () => { terminated = true; stopping.abort(); });
const stoppedReport = (exitCode?: number): StepReport => ({
  outcome: "failed", reason: FailureReason.Cancelled, message: "the step was stopped", ...(exitCode === undefined ? {} : { exitCode }),
});

/** Retries while the IO context is unavailable, each one said in the step's log (messages name outputs, never values). */
const retrying = (config: StepProgramConfig, what: string): IOCallOptions => ({
  retry: { ...DEFAULT_RETRY, ...config.ioRetry },
  onRetry: (n) => say(`${what}: ${n.error}; retry ${n.attempt} in ${n.delayMs} ms (${Math.round(n.elapsedMs / 1000)} s so far)`),
  signal: stopping.signal,
});

/** What the process driver sends: the contract (program.ts) plus the script's confinement. */
type Config = StepProgramConfig & { sandbox?: StepSandbox };

async function runStep(config: Config): Promise<StepReport> {
  const sandbox = config.sandbox ?? {};
  const client = ioContextClient(config.iocontext, config.iocontextTls);
  try {
    let plan;
    try {
      plan = planStep(await fetchStepInputs(client, config.runId, config.token, retrying(config, "cannot get the step's inputs")));
    } catch (err) {
      // Still unreachable after the retries: the infrastructure's failure (the step runs again), not the plugin's.
      const reason = isRetryable(err) ? FailureReason.DriverError : FailureReason.InputUnavailable;
      return { outcome: "failed", reason, message: `cannot get the step's inputs: ${errorMessage(err)}` };
    }
    let views: string[];
    try {
      views = privateViewDirs(plan, config.runDir);
      await mountPrivateViews(views, config.runDir, sandbox);
      await writeStepFiles(plan, SCRIPT_PATH);
      // The script's user owns its views (so it can write its outputs and /tmp) and its input files.
      if (sandbox.uid !== undefined) for (const dir of views) await chownTree(dir, sandbox.uid, sandbox.gid ?? sandbox.uid);
      // The run directory stays writable for the report (a mount of its own: see main).
      if (sandbox.readOnlyHost) await makeHostReadOnly([...views, config.runDir]);
    } catch (err) {
      return { outcome: "failed", reason: FailureReason.DriverError, message: `cannot prepare the step: ${errorMessage(err)}` };
    }
    if (terminated) return stoppedReport();
    const exit = await runScript({ ...config.env, HOME: STEP_HOME, ...plan.env }, sandbox);
    // From here on root reads what the script's user wrote: links it left are not followed.
    if (sandbox.uid !== undefined) {
      try {
        await sealPrivateViews(views, sandbox);
      } catch (err) {
        return { outcome: "failed", reason: FailureReason.DriverError, message: `cannot read the outputs safely: ${errorMessage(err)}` };
      }
    }
    if (terminated) return stoppedReport(exit.code);
    if (exit.code !== 0) return { outcome: "failed", reason: FailureReason.Error, exitCode: exit.code, message: exit.message + await quotaNote(views, sandbox) };
    const collected = await collectOutputs(plan.outputs);
    if (!collected.ok) return { outcome: "failed", reason: collected.reason, message: collected.message };
    try {
      await storeStepOutputs(client, config.runId, config.token, collected.values, retrying(config, "cannot store the outputs"));
    } catch (err) {
      // Only the cache missed them: the runner journals them from this report, and the IO
      // context serves later steps from the journal.
      say(`outputs not cached in the IO context (they are journaled all the same): ${errorMessage(err)}`);
    }
    return {
      outcome: "succeeded",
      outputs: collected.values.map((v) => ({ name: v.name, size: v.value.length, base64: Buffer.from(v.value).toString("base64") })),
    };
  } finally {
    client.close();
  }
}

/** Runs the script through its #! line; stdout and stderr share one pipe so the log keeps their order. */
function runScript(env: Record<string, string>, sandbox: StepSandbox): Promise<{ code: number; message: string }> {
  const user = sandbox.uid === undefined ? {} : { uid: sandbox.uid, gid: sandbox.gid ?? sandbox.uid };
  return new Promise((resolve) => {
    const child = spawn(SCRIPT_PATH, [], { cwd: STEP_HOME, env, stdio: ["ignore", 1, 1], ...user });
    child.on("error", (err: NodeJS.ErrnoException) => {
      // Shell conventions: 127 for a missing interpreter, 126 for a file that cannot be executed.
      const code = err.code === "ENOENT" ? 127 : 126;
      resolve({ code, message: `cannot execute the script (is its #! interpreter installed?): ${err.message}` });
    });
    child.on("exit", (code, signal) => {
      if (signal) resolve({ code: 128 + (constants.signals[signal] ?? 0), message: `script killed by ${signal}` });
      else resolve({ code: code ?? 1, message: code === 0 ? "" : `script exited with code ${code}` });
    });
  });
}

/** A failed script that filled a view most likely failed of it: say so, since it only saw ENOSPC. */
async function quotaNote(views: string[], sandbox: StepSandbox): Promise<string> {
  const full = await fullViews(views, sandbox);
  return full.length ? ` (${full.join(", ")} full: the step's ${mib(sandbox.tmpSizeBytes ?? 0)} quota per private view, EPHEMERA_STEP_TMP_SIZE)` : "";
}

async function main(): Promise<void> {
  const raw = process.env[STEP_CONFIG_ENV];
  if (!raw) {
    process.stderr.write(`${STEP_CONFIG_ENV} is not set: this program is started by the ephemera runner\n`);
    process.exit(2);
  }
  const config = JSON.parse(raw) as Config;
  // The run directory becomes a mount of its own before the report is opened in it: the
  // mount it lay on can then be made read-only (a mount with a file open for writing cannot).
  if (config.sandbox?.readOnlyHost) execFileSync("mount", ["--bind", config.runDir, config.runDir]);
  // Opened before the private views hide the run directory (it may live under /tmp).
  const reportFd = openSync(join(config.runDir, REPORT_FILE), "w", 0o600);
  let report: StepReport;
  try {
    report = await runStep(config);
  } catch (err) {
    report = { outcome: "failed", reason: FailureReason.DriverError, message: errorMessage(err) };
  }
  if (report.outcome === "failed" && report.reason !== FailureReason.Error) say(report.message);
  writeSync(reportFd, JSON.stringify(report));
  closeSync(reportFd);
}

void main();
