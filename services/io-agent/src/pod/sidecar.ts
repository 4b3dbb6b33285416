// `ephemera-agent sidecar`: waits for the main container's entrypoint to record the script's
// exit code, then (on 0) reads the declared outputs, stores them in the IO context and
// writes the StepReport. Its exit status says only whether the report was written.
import { readFile } from "node:fs/promises";
import { constants } from "node:os";
import { delay, errorMessage, isRetryable } from "@ephemera/kit";
import { ioContextClient, storeStepOutputs } from "../client.js";
import { FailureReason, type StepReport } from "../report.js";
import { collectOutputs } from "../sidecar.js";
import type { AgentConfig } from "./config.js";
import { agentPaths } from "./layout.js";
import { retrying, writeReport, type Say } from "./write.js";

export interface SidecarOptions {
  /** Aborted when the pod is being stopped: the step is then Cancelled, its outputs not stored. */
  stopping?: AbortSignal;
}

export async function runSidecar(config: AgentConfig, say: Say, options: SidecarOptions = {}): Promise<StepReport> {
  const paths = agentPaths(config.agentDir);
  const report = await decide(config, say, options.stopping);
  await writeReport(paths.report, report, config.terminationMessagePath);
  return report;
}

async function decide(config: AgentConfig, say: Say, stopping?: AbortSignal): Promise<StepReport> {
  const paths = agentPaths(config.agentDir);
  const exit = await waitForExitCode(paths.exitCode, config, say);
  if (exit.kind === "timeout") {
    return {
      outcome: "failed", reason: FailureReason.DriverError,
      message: `the main container recorded no exit code in ${paths.exitCode} within ${duration(config.waitTimeoutMs)} (does it run ${paths.entrypoint}?)`,
    };
  }
  if (exit.kind === "unreadable") {
    return { outcome: "failed", reason: FailureReason.DriverError, message: `${paths.exitCode} holds no exit code: ${exit.why}` };
  }
  const code = exit.code;
  if (stopping?.aborted) return { outcome: "failed", reason: FailureReason.Cancelled, exitCode: code, message: "the step was stopped" };
  if (code !== 0) return { outcome: "failed", reason: FailureReason.Error, exitCode: code, message: exitMessage(code) };

  let outputs: Array<{ name: string; path: string }>;
  try {
    outputs = JSON.parse(await readFile(paths.outputs, "utf8")) as Array<{ name: string; path: string }>;
  } catch (err) {
    return { outcome: "failed", reason: FailureReason.DriverError, message: `cannot read the declared outputs (${paths.outputs}, written by ephemera-init): ${errorMessage(err)}` };
  }
  const collected = await collectOutputs(outputs);
  if (!collected.ok) return { outcome: "failed", reason: collected.reason, message: collected.message };

  const client = ioContextClient(config.iocontext, config.tls);
  let stored = true;
  try {
    await storeStepOutputs(client, config.runId, config.token, collected.values, retrying(config, say, "cannot store the outputs", stopping));
    say(`stored ${collected.values.length} output(s): ${collected.values.map((v) => `${v.name} (${v.value.length} bytes)`).join(", ") || "none"}`);
  } catch (err) {
    // Unavailable past the retries: only the cache missed them, and the runner journals them
    // from this report (as with the process driver). A refusal is final: the report says so.
    if (!isRetryable(err)) {
      return { outcome: "failed", reason: FailureReason.DriverError, message: `the IO context at ${config.iocontext} refused the outputs of run ${config.runId}: ${errorMessage(err)}` };
    }
    say(`outputs not cached in the IO context (they are in the report all the same): ${errorMessage(err)}`);
    stored = false;
  } finally {
    client.close();
  }
  return {
    outcome: "succeeded",
    outputs: collected.values.map((v) => ({ name: v.name, size: v.value.length, base64: Buffer.from(v.value).toString("base64") })),
    ...(stored ? {} : { stored: false as const }),
  };
}

type Exit = { kind: "exited"; code: number } | { kind: "timeout" } | { kind: "unreadable"; why: string };

/** Polls for the exit-code file (a rename makes it appear whole), saying on stderr every so often that it still waits. */
async function waitForExitCode(path: string, config: AgentConfig, say: Say): Promise<Exit> {
  const started = Date.now();
  let nextNotice = started + config.waitNoticeMs;
  for (;;) {
    let text: string | undefined;
    try {
      text = await readFile(path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") return { kind: "unreadable", why: errorMessage(err) };
    }
    if (text !== undefined) {
      const m = /^(\d{1,3})\n?$/.exec(text);
      return m ? { kind: "exited", code: Number(m[1]) } : { kind: "unreadable", why: `"${text.slice(0, 20)}" is not a number` };
    }
    const now = Date.now();
    if (now - started >= config.waitTimeoutMs) return { kind: "timeout" };
    if (now >= nextNotice) {
      say(`waiting for the script in the main container to end (no ${path} yet, ${Math.round((now - started) / 1000)} s so far)`);
      nextNotice = now + config.waitNoticeMs;
    }
    await delay(Math.min(config.pollMs, Math.max(1, started + config.waitTimeoutMs - now)));
  }
}

const duration = (ms: number) => (ms < 10_000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`);

/** 128+N is the shell's way of saying the script was killed by signal N. */
function exitMessage(code: number): string {
  const signal = code > 128 ? Object.entries(constants.signals).find(([, n]) => n === code - 128)?.[0] : undefined;
  return signal ? `script killed by ${signal} (exit code ${code})` : `script exited with code ${code}`;
}
