// The runner service: runs dispatched steps and records their StepRun results.
export { start, type RunnerDeps, type RunningRunner } from "./start.js";
export { runnerConfig, DEFAULT_RUNNER_LISTEN, type RunnerConfig } from "./config.js";
export { decide, evolve, initialStepRun, type StepRunState, type StepRunCommand } from "./steprun/decide.js";
export type { StepDriver, RunRequest, RunningStep } from "./driver/driver.js";
