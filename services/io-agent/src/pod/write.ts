// Files another container reads while this one may still be writing them: written beside
// their place and renamed into it, so a reader sees the whole file or none.
import { rename, writeFile } from "node:fs/promises";
import type { StepReport } from "../report.js";
import type { IOCallOptions } from "../client.js";
import type { AgentConfig } from "./config.js";

export async function writeAtomically(path: string, data: string | Buffer, mode = 0o600): Promise<void> {
  const temp = `${path}.tmp.${process.pid}`;
  await writeFile(temp, data, { mode });
  await rename(temp, path);
}

/**
 * The report in the agent directory and, when the pod names one, its summary as the
 * container's termination message: what the Kubernetes driver reads from the pod's status.
 */
export async function writeReport(path: string, report: StepReport, terminationMessagePath?: string): Promise<void> {
  await writeAtomically(path, JSON.stringify(report));
  if (terminationMessagePath) await writeFile(terminationMessagePath, terminationMessage(report));
}

/** Kubernetes keeps 4096 bytes of a termination message. */
export const TERMINATION_MESSAGE_MAX = 4096;

/**
 * The report without the output values (the sidecar stored them in the IO context, where
 * the runner reads them back), its message cut to fit in a termination message.
 */
export function terminationMessage(report: StepReport): string {
  if (report.outcome === "succeeded") {
    const summary = { ...report, outputs: report.outputs.map((o) => ({ name: o.name, size: o.size })) };
    const text = JSON.stringify(summary);
    // Hundreds of outputs with long names: the names are the runner's to know (it reads them back).
    return text.length <= TERMINATION_MESSAGE_MAX ? text : JSON.stringify({ ...summary, outputs: [] });
  }
  let message = report.message;
  const fits = () => Buffer.byteLength(JSON.stringify({ ...report, message })) <= TERMINATION_MESSAGE_MAX;
  if (fits()) return JSON.stringify(report);
  while (!fits()) message = `${message.slice(0, Math.floor(message.length * 0.9))}…`;
  return JSON.stringify({ ...report, message });
}

/** Lines on stderr, the container's log: names, sizes and errors, never a value or the token. */
export type Say = (line: string) => void;

/** Calls retried while the IO context is unavailable, each retry said. */
export const retrying = (config: AgentConfig, say: Say, what: string, signal?: AbortSignal): IOCallOptions => ({
  retry: config.retry,
  onRetry: (n) => say(`${what}: ${n.error}; retry ${n.attempt} in ${n.delayMs} ms (${Math.round(n.elapsedMs / 1000)} s so far)`),
  ...(signal ? { signal } : {}),
});
