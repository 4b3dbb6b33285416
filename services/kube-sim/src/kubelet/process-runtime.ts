// The process runtime: each container a host process in its own mount namespace
// (launch.ts), every pod at 127.0.0.1 on the host's network.
import { randomBytes } from "node:crypto";
import { killGroup, launch } from "./launch.js";
import { CreateContainerError, type ContainerExit, type ContainerLaunch, type ContainerRuntime, type PodSandbox, type RunningContainer } from "./runtime.js";

export const LOCALHOST = "127.0.0.1";

function start(c: ContainerLaunch): RunningContainer {
  // No image to take an ENTRYPOINT from: the command is all there is to run.
  if (!c.command?.length) throw new CreateContainerError(`container "${c.name}" has no command: the process runtime runs no images, so there is no ENTRYPOINT to take it from`);
  const proc = launch({
    argv: [...c.command, ...(c.args ?? [])],
    env: { PATH: process.env["PATH"] ?? "/usr/local/bin:/usr/bin:/bin", ...c.env },
    workingDir: c.workingDir,
    uid: c.securityContext["runAsUser"] as number | undefined,
    gid: c.securityContext["runAsGroup"] as number | undefined,
    privateTmp: c.privateTmp,
    mounts: c.mounts,
    logFile: c.logFile,
  });
  const exited = new Promise<ContainerExit>((resolve) => {
    proc.once("exit", (code, signal) => resolve({ code, signal }));
    proc.once("error", (error) => resolve({ code: 128, signal: null, error }));
  });
  return { id: `containerd://${randomBytes(32).toString("hex")}`, exited, signal: (s) => killGroup(proc.pid, s) };
}

export function processRuntime(): ContainerRuntime {
  const sandbox: PodSandbox = { podIP: LOCALHOST, hostIP: LOCALHOST, start: (c) => Promise.resolve().then(() => start(c)), remove: () => Promise.resolve() };
  return { name: "process", sandbox: () => Promise.resolve(sandbox), stop: () => Promise.resolve() };
}
