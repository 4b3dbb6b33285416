import { formatLine } from "./format.js";
import { stackEnv } from "./stack.js";

describe("stack", () => {
  it("gives every service the defaults of a local stack, keeping what the caller set", () => {
    expect(stackEnv({})).toMatchObject({
      EPHEMERA_API_LISTEN: "127.0.0.1:7400", EPHEMERA_IOCONTEXT_LISTEN: "127.0.0.1:7401", EPHEMERA_IOCONTEXT_ADDR: "127.0.0.1:7401",
      EPHEMERA_CLUSTER: "local", EPHEMERA_RUNNER_DRIVER: "process", EPHEMERA_SCHEDULER_LISTEN: "127.0.0.1:0", EPHEMERA_RUNNER_LISTEN: "127.0.0.1:0",
    });
    const mine = stackEnv({ EPHEMERA_IOCONTEXT_LISTEN: "127.0.0.1:7501", EPHEMERA_PREFIX: "other" });
    expect(mine).toMatchObject({ EPHEMERA_IOCONTEXT_ADDR: "127.0.0.1:7501", EPHEMERA_PREFIX: "other" });
  });

  it("renders pino lines for a terminal and passes other lines through", () => {
    const line = JSON.stringify({ level: 40, time: Date.UTC(2026, 0, 1, 12, 30, 5, 7), pid: 1, service: "runner", msg: "step failed", runId: "r.1", exit: 3 });
    expect(formatLine("runner", line)).toBe("12:30:05.007 runner    warn  step failed  runId=r.1 exit=3");
    expect(formatLine("sandbox", "not json")).toBe("sandbox   not json");
  });
});
