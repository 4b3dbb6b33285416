// `--wait`: follows a sandbox through SandboxService.Watch until it is ready, failed or
// gone, printing progress. A broken stream is reopened (a bounded number of times in a
// row), and a stream that stays silent is checked with Get, so a lost notification or a
// stream that never closes cannot make the wait outlive what it waits for.
import {
  Backoff, NotFoundError, PermissionDeniedError, UnauthenticatedError, UnavailableError, delay, errorMessage, isConflictError, isNotFoundError,
  isValidationError, longTimeout,
} from "@ephemera/kit/client";
import type * as pb from "@ephemera/proto";
import type { Api } from "./api.js";
import { OperationFailed } from "./errors.js";
import { progress, type History, type Seen } from "./progress.js";
import { FORK_FAILURES, condition } from "./status.js";

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
  /** Silence after which the sandbox is checked with Get (doubling while it lasts, up to 15 s). */
  probeMs?: number;
  /** What of the first view is history, not news (progress.ts); default: "create" waiting for a delete, else "all". */
  history?: History;
  /**
   * The sandbox as it was before the command changed it (a retry): every line is then what
   * changed since, so a step that ended before the watch's first view still gets its line.
   */
  before?: pb.SandboxView;
}

/** Whether a view ends the wait, and how. */
export function verdict(view: pb.SandboxView, goal: Goal): "ready" | "failed" | "gone" | undefined {
  const reason = view.status?.reason ?? "";
  if (goal === "ready") {
    const now = condition(view);
    if (now === "ready" || now === "failed") return now;
    // Deleted or being deleted: it will not become ready.
    return reason === "Deleting" || reason === "Deleted" ? "failed" : undefined;
  }
  if (reason === "Deleted") return "gone";
  if (reason === "DeprovisionFailed" || FORK_FAILURES.includes(reason)) return "failed";
  return undefined;
}

/** What the wait has learnt so far, from the stream and from probes alike. */
class Tracker {
  private seen: Seen = new Map();
  private first = true;
  last: pb.SandboxView | undefined;
  result: WaitResult | undefined;

  constructor(
    private readonly name: string,
    private readonly goal: Goal,
    private readonly log: (line: string) => void,
    private readonly history: History,
    before?: pb.SandboxView,
  ) {
    if (!before) return;
    this.seen = progress(this.seen, before, true, history).seen;
    this.first = false;
  }

  /** Takes a view in; true once the wait is over. */
  view(view: pb.SandboxView): boolean {
    if (this.result) return true;
    this.last = view;
    const next = progress(this.seen, view, this.first, this.history);
    this.first = false;
    this.seen = next.seen;
    next.lines.forEach((line) => this.log(line));
    const v = verdict(view, this.goal);
    if (v === "gone") this.result = { outcome: "gone" };
    else if (v) this.result = { outcome: v, view };
    return v !== undefined;
  }

  /** The sandbox does not exist (any more): the end of a delete, an error for anything else. */
  notFound(): WaitResult {
    if (this.goal !== "gone") throw new NotFoundError(`sandbox ${this.name} not found`);
    this.result ??= { outcome: "gone" };
    return this.result;
  }
}

export async function waitForSandbox(
  api: Pick<Api, "watchSandbox" | "getSandbox">,
  name: string,
  goal: Goal,
  opts: WaitOptions,
): Promise<WaitResult> {
  const { timeoutMs, log, maxReconnects = 5, backoffMs = 250, probeMs = 1_000 } = opts;
  const deadline = Date.now() + timeoutMs;
  const timer = new AbortController();
  // --wait-timeout may be longer than one setTimeout holds (24.8 days).
  const timeout = longTimeout(() => timer.abort(), timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timer.signal]) : timer.signal;
  const tracker = new Tracker(name, goal, log, opts.history ?? (goal === "gone" ? "create" : "all"), opts.before);
  const stopped = (): WaitResult => {
    if (timer.signal.aborted) return { outcome: "timeout", view: tracker.last };
    throw new OperationFailed("interrupted");
  };
  let failures = 0;
  const backoff = new Backoff({ firstMs: backoffMs, maxMs: Math.max(5_000, backoffMs) });
  try {
    for (;;) {
      let received = false;
      let broken: string;
      const attempt = new AbortController();
      const prober = new Prober(api, name, tracker, attempt, probeMs);
      try {
        const end = await api.watchSandbox(
          name,
          (view) => {
            received = true;
            prober.quiet();
            return tracker.view(view);
          },
          // The stream's own deadline is a safety net; the timer above decides the timeout.
          { deadline: deadline + 5_000, signal: AbortSignal.any([signal, attempt.signal]) },
        );
        if (tracker.result) return tracker.result;
        if (prober.error) throw prober.error;
        if (end === "aborted") return stopped();
        // The server ends the stream when the sandbox is gone (or when it shuts down).
        if (goal === "gone" && (await isGone(api, name))) return tracker.notFound();
        broken = "the server ended the stream";
      } catch (err) {
        if (isNotFoundError(err)) return tracker.notFound();
        // Refusals that reconnecting cannot change (a token expired during a long wait included).
        if (err instanceof OperationFailed || isValidationError(err) || isConflictError(err)) throw err;
        if (err instanceof UnauthenticatedError || err instanceof PermissionDeniedError) throw err;
        if (signal.aborted) return stopped();
        broken = errorMessage(err);
      } finally {
        prober.stop();
      }
      failures = received ? 1 : failures + 1;
      if (failures > maxReconnects) {
        throw new UnavailableError(`lost the watch on sandbox ${name} ${failures} times in a row: ${broken}`);
      }
      log(`watch on sandbox ${name} interrupted (${broken}); reconnecting`);
      if (received) backoff.reset();
      await delay(backoff.next(), signal);
      if (signal.aborted) return stopped();
    }
  } finally {
    timeout.clear();
  }
}

/** Checks the sandbox with Get while its watch stays silent; ends the attempt when that settles it. */
class Prober {
  error: unknown;
  private delayMs: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly api: Pick<Api, "getSandbox">,
    private readonly name: string,
    private readonly tracker: Tracker,
    private readonly attempt: AbortController,
    private readonly probeMs: number,
  ) {
    this.delayMs = probeMs;
    this.schedule();
  }

  /** The stream spoke: start counting silence again. */
  quiet(): void {
    this.delayMs = this.probeMs;
    this.schedule();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.attempt.abort();
  }

  private schedule(): void {
    clearTimeout(this.timer);
    if (!this.attempt.signal.aborted) this.timer = setTimeout(() => void this.probe(), this.delayMs);
  }

  private async probe(): Promise<void> {
    try {
      if (this.tracker.view(await this.api.getSandbox(this.name))) this.attempt.abort();
    } catch (err) {
      if (!isNotFoundError(err)) return; // a failed probe proves nothing; the stream decides
      try {
        this.tracker.notFound();
      } catch (notFound) {
        this.error = notFound;
      }
      this.attempt.abort();
    } finally {
      this.delayMs = Math.min(15_000, this.delayMs * 2);
      this.schedule();
    }
  }
}

async function isGone(api: Pick<Api, "getSandbox">, name: string): Promise<boolean> {
  try {
    return verdict(await api.getSandbox(name), "gone") === "gone";
  } catch (err) {
    return isNotFoundError(err);
  }
}
