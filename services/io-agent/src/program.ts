// The contract between the process driver and the step program it starts (step.ts).
import type { ClientTls } from "@ephemera/kit";
import type { RetryPolicy } from "./retry.js";

/** Environment variable carrying the JSON-encoded StepProgramConfig. */
export const STEP_CONFIG_ENV = "EPHEMERA_STEP_CONFIG";

/** File in `runDir` where the step program leaves its StepReport. */
export const REPORT_FILE = "report.json";

export interface StepProgramConfig {
  runId: string;
  token: string;
  /** host:port of the IOContext service. */
  iocontext: string;
  /** TLS to the IO context (the CA it trusts, a client certificate for mTLS); absent: plaintext. */
  iocontextTls?: ClientTls;
  /** Per-run directory on the host: sources of the private views, and the report. */
  runDir: string;
  /** The script's environment before the inputs are added (PATH, LANG, the default variables). */
  env: Record<string, string>;
  /** How calls to the IO context are retried while it is unavailable (default: DEFAULT_RETRY, ~60 s). */
  ioRetry?: Partial<RetryPolicy>;
}
