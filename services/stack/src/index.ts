export { startStack, stackEnv, healthy, SERVICES, type RunningStack, type StackOptions, type ServiceName } from "./stack.js";
export { formatLine } from "./format.js";
