// `--wait`: follows a sandbox through SandboxService.Watch until it is ready, failed or
// gone, printing progress; survives a broken stream by reconnecting a bounded number of times.
import { NotFoundError, UnavailableError, delay, errorMessage, isConflictError, isNotFoundError, isValidationError } from "@ephemera/kit";
import type * as pb from "@ephemera/proto";
import type { Api } from "./api.js";
import { OperationFailed } from "./errors.js";
import { progress, type Seen } from "./progress.js";

export type Goal = "ready" | "gone";

export type WaitResult =
  | { outcome: "ready"; view: pb.SandboxView }
  | { outcome: "failed"; view: pb.SandboxView }
  | { outcome: "gone" }
  | { outcome: "timeout"; view?: pb.SandboxView };

export interface WaitOptions {
  timeoutMs: number;
  /** Where progress lines go (stderr). */
  log: (line: string) => void;
  signal?: AbortSignal;
  /** Consecutive broken streams tolerated before giving up. */
  maxReconnects?: number;
  backoffMs?: number;
}

/** Whether a view ends the wait, and how. */
export function verdict(view: pb.SandboxView, goal: Goal): "ready" | "failed" | "gone" | undefined {
  const reason = view.status?.reason ?? "";
  if (goal === "ready") {
    if (view.status?.ready) return "ready";
    if (["ResourceFailed", "Deleting", "DeprovisionFailed", "Deleted"].includes(reason)) return "failed";
    return undefined;
  }
  if (reason === "Deleted") return "gone";
  if (reason === "DeprovisionFailed") return "failed";
  return undefined;
}

export async function waitForSandbox(
  api: Pick<Api, "watchSandbox" | "getSandbox">,
  name: string,
  goal: Goal,
  opts: WaitOptions,
): Promise<WaitResult> {
  const { timeoutMs, log, maxReconnects = 5, backoffMs = 250 } = opts;
  const deadline = Date.now() + timeoutMs;
  const timer = new AbortController();
  const timeout = setTimeout(() => timer.abort(), timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timer.signal]) : timer.signal;
  let seen: Seen = new Map();
  let last: pb.SandboxView | undefined;
  let failures = 0;
  try {
    for (;;) {
      let result: WaitResult | undefined;
      let received = false;
      let broken: string;
      try {
        const end = await api.watchSandbox(
          name,
          (view) => {
            received = true;
            last = view;
            const next = progress(seen, view);
            seen = next.seen;
            next.lines.forEach((line) => log(line));
            const v = verdict(view, goal);
            if (v === "gone") result = { outcome: "gone" };
            else if (v) result = { outcome: v, view };
            return v !== undefined;
          },
          // The stream's own deadline is a safety net; the timer above decides the timeout.
          { deadline: deadline + 5_000, signal },
        );
        if (result) return result;
        if (end === "aborted") {
          if (timer.signal.aborted) return { outcome: "timeout", view: last };
          throw new OperationFailed("interrupted");
        }
        // The server ends the stream when the sandbox is gone (or when it shuts down).
        if (goal === "gone" && (await isGone(api, name))) return { outcome: "gone" };
        broken = "the server ended the stream";
      } catch (err) {
        if (isNotFoundError(err)) {
          if (goal === "gone") return { outcome: "gone" };
          throw new NotFoundError(`sandbox ${name} not found`);
        }
        if (err instanceof OperationFailed || isValidationError(err) || isConflictError(err)) throw err;
        if (timer.signal.aborted) return { outcome: "timeout", view: last };
        broken = errorMessage(err);
      }
      failures = received ? 1 : failures + 1;
      if (failures > maxReconnects) {
        throw new UnavailableError(`lost the watch on sandbox ${name} ${failures} times in a row: ${broken}`);
      }
      log(`watch on sandbox ${name} interrupted (${broken}); reconnecting`);
      await delay(Math.min(5_000, backoffMs * 2 ** (failures - 1)), signal);
      if (timer.signal.aborted) return { outcome: "timeout", view: last };
    }
  } finally {
    clearTimeout(timeout);
  }
}

async function isGone(api: Pick<Api, "getSandbox">, name: string): Promise<boolean> {
  try {
    return verdict(await api.getSandbox(name), "gone") === "gone";
  } catch (err) {
    if (isNotFoundError(err)) return true;
    return false;
  }
}
