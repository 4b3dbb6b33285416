// Whom kube-sim's containers run as and what the launcher is asked for, from the process
// driver's settings: pure, no process started.
import { confinementConfig, containerUser, launchArgs, NOBODY, type Confinement } from "./launch.js";

const ROOT = 0;
const confined: Confinement = { launcher: "/l", user: { uid: NOBODY, gid: NOBODY }, readOnlyHost: true, allowRoot: false };

describe("confinementConfig", () => {
  it("as root: nobody, the host read-only, root refused, the runner's launcher", () => {
    expect(confinementConfig({}, ROOT, "/repo")).toEqual({ ...confined, launcher: "/repo/services/runner/dist/ephemera-launch" });
  });

  it("takes EPHEMERA_STEP_UID/_GID, _HOST_READONLY and the kube-sim settings", () => {
    expect(confinementConfig({ EPHEMERA_STEP_UID: "1000", EPHEMERA_STEP_HOST_READONLY: "false", EPHEMERA_KUBE_SIM_LAUNCHER: "/x" }, ROOT, "/repo"))
      .toEqual({ launcher: "/x", user: { uid: 1000, gid: 1000 }, readOnlyHost: false, allowRoot: false });
    expect(confinementConfig({ EPHEMERA_STEP_UID: "0" }, ROOT, "/repo").allowRoot).toBe(true);
    expect(confinementConfig({ EPHEMERA_KUBE_SIM_ALLOW_ROOT: "true" }, ROOT, "/repo").allowRoot).toBe(true);
  });

  it("not root: kube-sim's own user, the host as it is; a uid asked for is an error", () => {
    expect(confinementConfig({}, 1000, "/repo")).toEqual({ launcher: "/repo/services/runner/dist/ephemera-launch", readOnlyHost: false, allowRoot: false });
    expect(() => confinementConfig({ EPHEMERA_STEP_UID: "65534" }, 1000, "/repo")).toThrow("EPHEMERA_STEP_UID/EPHEMERA_STEP_GID need kube-sim to run as root");
  });

  it("names the setting a bad value is in", () => {
    expect(() => confinementConfig({ EPHEMERA_KUBE_SIM_ALLOW_ROOT: "maybe" }, ROOT, "/r")).toThrow('EPHEMERA_KUBE_SIM_ALLOW_ROOT must be true or false, got "maybe"');
    expect(() => confinementConfig({ EPHEMERA_STEP_UID: "-1" }, ROOT, "/r")).toThrow('EPHEMERA_STEP_UID must be a non-negative integer, got "-1"');
  });
});

describe("containerUser", () => {
  it("defaults to the configured user; runAsUser and runAsGroup choose another", () => {
    expect(containerUser({}, confined)).toEqual({ uid: NOBODY, gid: NOBODY });
    expect(containerUser({ runAsUser: 1234 }, confined)).toEqual({ uid: 1234, gid: 1234 });
    expect(containerUser({ runAsUser: 1234, runAsGroup: 0 }, confined)).toEqual({ uid: 1234, gid: 0 });
    expect(containerUser({ runAsGroup: 42 }, confined)).toEqual({ uid: NOBODY, gid: 42 });
  });

  it("refuses root and privileged, naming the field and the setting that allows it", () => {
    expect(() => containerUser({ runAsUser: 0 }, confined)).toThrow(/^securityContext.runAsUser 0 \(root\) is refused: .*EPHEMERA_KUBE_SIM_ALLOW_ROOT=true/);
    expect(() => containerUser({ privileged: true }, confined)).toThrow(/^securityContext.privileged is refused/);
    expect(containerUser({ runAsUser: 0 }, { ...confined, allowRoot: true })).toEqual({ uid: 0, gid: 0 });
    expect(containerUser({ privileged: true }, { ...confined, allowRoot: true })).toEqual({ uid: 0, gid: NOBODY });
  });
});

describe("launchArgs", () => {
  it("asks for a pid namespace, the user, a read-only host, a private /tmp, the mounts shallow first, then the command", () => {
    expect(launchArgs({
      argv: ["sh", "-c", "true"], env: {}, workingDir: undefined, user: { uid: 7, gid: 8 }, runDir: "/d/run/main", logFile: "/d/log",
      mounts: [{ source: "/a", target: "/work/agent", readOnly: true }, { source: "/w", target: "/work", readOnly: false }],
    }, confined)).toEqual([
      "--rundir", "/d/run/main", "--pidns", "--uid", "7", "--gid", "8", "--readonly-host", "--view", "/tmp",
      "--bind", "/w", "/work", "--bind-ro", "/a", "/work/agent", "--chdir", "/", "--", "sh", "-c", "true",
    ]);
  });
});
