export {
  startStack, stackEnv, stackServices, accessNotice, healthy, SERVICES, StackNotReadyError, StackInterruptedError,
  type RunningStack, type StackOptions, type ServiceName,
} from "./stack.js";
export { DEFAULT_BACKOFF, nextRestart, type Backoff } from "./backoff.js";
export type { Death, Exit } from "./supervise.js";
export { formatLine } from "./format.js";
