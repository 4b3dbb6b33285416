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

export const writeReport = (path: string, report: StepReport) => writeAtomically(path, JSON.stringify(report));

/** Lines on stderr, the container's log: names, sizes and errors, never a value or the token. */
export type Say = (line: string) => void;

/** Calls retried while the IO context is unavailable, each retry said. */
export const retrying = (config: AgentConfig, say: Say, what: string, signal?: AbortSignal): IOCallOptions => ({
  retry: config.retry,
  onRetry: (n) => say(`${what}: ${n.error}; retry ${n.attempt} in ${n.delayMs} ms (${Math.round(n.elapsedMs / 1000)} s so far)`),
  ...(signal ? { signal } : {}),
});
