// The init and sidecar logic of a step run: the same code serves the process driver (in
// the runner) and the pod agent (the init and sidecar containers of a runner pod).
export { ioContextClient, fetchStepInputs, storeStepOutputs, fetchStepOutputs, withPolicy, type IOCallOptions } from "./client.js";
export { DEFAULT_RETRY, withRetries, type RetryPolicy, type RetryNotice } from "./retry.js";
export { STEP_HOME, planStep, writeStepFiles, absolutePath, type StepPlan, type StepFile } from "./init.js";
export { collectOutputs, outputMissing, outputTooLarge, type CollectedOutputs } from "./sidecar.js";
export { privateViewDirs, PrivateViewError } from "./views.js";
export { FailureReason, MAX_OUTPUT_BYTES, parseStepReport, type StepReport } from "./report.js";
export { REPORT_FILE } from "./program.js";
export type { StepSandbox } from "./sandbox.js";
