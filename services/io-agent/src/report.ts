// What the agents tell the runner about one step attempt, and the reasons a step can fail.

export const FailureReason = {
  Error: "Error",
  OutputMissing: "OutputMissing",
  OutputTooLarge: "OutputTooLarge",
  InputUnavailable: "InputUnavailable",
  Cancelled: "Cancelled",
  RunnerLost: "RunnerLost",
  DriverError: "DriverError",
} as const;
export type FailureReason = (typeof FailureReason)[keyof typeof FailureReason];

/** Values are secrets: a report carries output names and sizes only. */
export type StepReport =
  | { outcome: "succeeded"; outputs: Array<{ name: string; size: number }> }
  | { outcome: "failed"; reason: FailureReason; exitCode?: number; message: string };

/** Outputs are stored in Redis and journaled in events: each is bounded. */
export const MAX_OUTPUT_BYTES = 1024 * 1024;

export function parseStepReport(text: string): StepReport | undefined {
  try {
    const r = JSON.parse(text) as Partial<StepReport> | null;
    if (r?.outcome === "succeeded" && Array.isArray(r.outputs)) return r as StepReport;
    if (r?.outcome === "failed" && typeof r.reason === "string" && typeof r.message === "string") return r as StepReport;
  } catch {
    // fall through: not a report
  }
  return undefined;
}
