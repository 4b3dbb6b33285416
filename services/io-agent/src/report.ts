// What the agents tell the runner about one step attempt, and the reasons a step can fail.

export const FailureReason = {
  Error: "Error",
  OutputMissing: "OutputMissing",
  OutputTooLarge: "OutputTooLarge",
  InputUnavailable: "InputUnavailable",
  Cancelled: "Cancelled",
  RunnerLost: "RunnerLost",
  DriverError: "DriverError",
  // What a runner pod's status says (the Kubernetes driver).
  OOMKilled: "OOMKilled",
  Evicted: "Evicted",
  ImagePullFailed: "ImagePullFailed",
  ConfigError: "ConfigError",
  DeadlineExceeded: "DeadlineExceeded",
  PodDeleted: "PodDeleted",
  NodeLost: "NodeLost",
} as const;
export type FailureReason = (typeof FailureReason)[keyof typeof FailureReason];

/**
 * What the step program leaves in its run directory (a private file, mode 0600) for the
 * runner: on success, the outputs themselves (base64), which the runner journals in the
 * result event. Nothing is read back from Redis to record a result: the IO context's copy
 * is a cache for the steps that read them. Logs never carry the values.
 */
export type StepReport =
  /** `stored: false`: the pod's sidecar could not put the outputs in the IO context (they are here all the same). */
  | { outcome: "succeeded"; outputs: Array<{ name: string; size: number; base64: string }>; stored?: false }
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
