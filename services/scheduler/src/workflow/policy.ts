// The scheduler's time rules, as data: step deadlines, retry backoff with jitter, the
// infrastructure retry bound and how long a queued run may wait for a runner.
import { createHash } from "node:crypto";

/** A step without `timeout` may run this long. */
export const DEFAULT_STEP_TIMEOUT_MS = 30 * 60_000;
/** After a step's deadline the runner stops it; past this much more, the scheduler gives up on it. */
export const DEADLINE_GRACE_MS = 60_000;
/** Attempts lost to the infrastructure (INFRA_REASONS) are run again this many times. */
export const INFRA_RETRIES = 3;
/** A run no runner has taken after this long is reported unclaimed ("no runner for cluster X"). */
export const UNCLAIMED_AFTER_MS = 30_000;
/**
 * Reasons that are the infrastructure's fault, not the script's: the runner or the driver
 * lost the run, or its pod was evicted, deleted by someone else or lost with its node.
 * OOMKilled, ImagePullFailed, ConfigError and DeadlineExceeded are the plugin's to fix.
 */
export const INFRA_REASONS = new Set(["RunnerLost", "DriverError", "Evicted", "PodDeleted", "NodeLost"]);

export const RETRY_BASE_MS = 1000;
export const RETRY_MAX_MS = 5 * 60_000;

/**
 * How long the scheduler puts off recording that a run started: a run that ends sooner is
 * recorded by its result alone, one commit (and its deliveries) fewer on a short step's path.
 */
export const START_RECORD_DELAY_MS = 250;

/** The time rules as one value, so a deployment (or a test) can pass its own. */
export interface Policy {
  unclaimedAfterMs: number;
  deadlineGraceMs: number;
  infraRetries: number;
  /** START_RECORD_DELAY_MS; 0 records every start at once. */
  startRecordDelayMs: number;
}

export const DEFAULT_POLICY: Policy = {
  unclaimedAfterMs: UNCLAIMED_AFTER_MS, deadlineGraceMs: DEADLINE_GRACE_MS, infraRetries: INFRA_RETRIES, startRecordDelayMs: START_RECORD_DELAY_MS,
};

/**
 * Delay before attempt `failures + 1` after `failures` failed ones: exponential from one
 * second, capped at five minutes, with ±20 % jitter derived from the run id (deterministic,
 * so a decider deciding twice decides the same).
 */
export function retryDelayMs(failures: number, runId: string): number {
  const base = Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** Math.max(0, failures - 1));
  const h = createHash("sha256").update(runId).digest().readUInt32BE(0) / 0xffffffff;
  return Math.round(base * (0.8 + 0.4 * h));
}
