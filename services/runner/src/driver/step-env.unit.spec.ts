import { runnerConfig, stepSandboxConfig } from "../config.js";
import { hostEnvForSteps, stepEnv } from "./step-env.js";

const defaults = { launcher: "/ephemera-launch", workRoot: "/tmp", runnerId: "r1" };

describe("what of the runner reaches a step", () => {
  const runnerEnv = {
    PATH: "/usr/bin:/bin", LANG: "C.UTF-8", NATS_URL: "nats://user:secret@127.0.0.1:4222", REDIS_URL: "redis://:pw@127.0.0.1:6379",
    EPHEMERA_PREFIX: "p", EPHEMERA_IOCONTEXT_ADDR: "127.0.0.1:7402", NATS_USER: "runner", NATS_PASSWORD: "secret",
    REDIS_USERNAME: "runner", REDIS_PASSWORD: "pw", AWS_SECRET_ACCESS_KEY: "k", HOME: "/root",
  };

  it("passes PATH and LANG of the runner's environment, nothing else", () => {
    expect(runnerConfig(runnerEnv, { ...defaults, uid: 1000 }).hostEnv).toEqual({ PATH: "/usr/bin:/bin", LANG: "C.UTF-8" });
  });

  it("drops whatever else a driver is handed as host environment, and keeps the step's own variables", () => {
    expect(hostEnvForSteps(runnerEnv)).toEqual({ PATH: "/usr/bin:/bin", LANG: "C.UTF-8" });
    expect(stepEnv(runnerEnv, { EPHEMERA_RUN_ID: "run-1", SIGNADOT_SANDBOX_NAME: "sb" }))
      .toEqual({ PATH: "/usr/bin:/bin", LANG: "C.UTF-8", EPHEMERA_RUN_ID: "run-1", SIGNADOT_SANDBOX_NAME: "sb" });
  });
});

describe("the scripts' user and quota", () => {
  it("runs scripts as nobody/nogroup with a 256 MiB tmpfs per view and the host read-only when the runner is root", () => {
    const sandbox = { uid: 65534, gid: 65534, readOnlyHost: true, tmpSizeBytes: 256 * 1024 * 1024 };
    expect(stepSandboxConfig({}, 0)).toEqual(sandbox);
    expect(runnerConfig({}, { ...defaults, uid: 0 }).stepSandbox).toEqual(sandbox);
  });

  it("leaves the host writable when asked (EPHEMERA_STEP_HOST_READONLY=false), or when the script stays root", () => {
    expect(stepSandboxConfig({ EPHEMERA_STEP_HOST_READONLY: "false" }, 0)).not.toHaveProperty("readOnlyHost");
    expect(stepSandboxConfig({ EPHEMERA_STEP_UID: "0" }, 0)).not.toHaveProperty("readOnlyHost");
    expect(() => stepSandboxConfig({ EPHEMERA_STEP_HOST_READONLY: "maybe" }, 0)).toThrow('EPHEMERA_STEP_HOST_READONLY must be true or false, got "maybe"');
  });

  it("takes the user, group and size from EPHEMERA_STEP_UID, _GID and _TMP_SIZE", () => {
    expect(stepSandboxConfig({ EPHEMERA_STEP_UID: "1000", EPHEMERA_STEP_GID: "100", EPHEMERA_STEP_TMP_SIZE: "1048576" }, 0))
      .toEqual({ uid: 1000, gid: 100, readOnlyHost: true, tmpSizeBytes: 1048576 });
    expect(stepSandboxConfig({ EPHEMERA_STEP_UID: "1000" }, 0)).toMatchObject({ uid: 1000, gid: 1000 });
  });

  it("leaves the user unchanged when the runner is not root, and refuses a user it could not switch to", () => {
    expect(stepSandboxConfig({}, 1000)).toEqual({ tmpSizeBytes: 256 * 1024 * 1024 });
    expect(() => stepSandboxConfig({ EPHEMERA_STEP_UID: "65534" }, 1000)).toThrow("need the runner to run as root");
  });

  it("refuses a quota too small to run a script in", () => {
    expect(() => stepSandboxConfig({ EPHEMERA_STEP_TMP_SIZE: "4096" }, 0)).toThrow("at least 1 MiB");
  });
});
