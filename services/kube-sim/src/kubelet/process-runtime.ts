// The process runtime: each container a host process confined by the process driver's
// launcher (launch.ts: own mount and pid namespaces, an unprivileged user, the host
// read-only, a private /tmp), every pod at 127.0.0.1 on the host's network.
import { randomBytes } from "node:crypto";
import { containerUser, ended, killContainer, launch, type Confinement } from "./launch.js";
import { CreateContainerError, type ContainerExit, type ContainerLaunch, type ContainerRuntime, type PodSandbox, type RunningContainer } from "./runtime.js";

export const LOCALHOST = "127.0.0.1";

function start(c: ContainerLaunch, confinement: Confinement): RunningContainer {
  // No image to take an ENTRYPOINT from: the command is all there is to run.
  if (!c.command?.length) throw new CreateContainerError(`container "${c.name}" has no command: the process runtime runs no images, so there is no ENTRYPOINT to take it from`);
  // Root refused here, before anything runs: the container waits with CreateContainerConfigError.
  const user = containerUser(c.securityContext, confinement);
  const argv = [...c.command, ...(c.args ?? [])];
  const proc = launch({
    argv,
    env: { PATH: process.env["PATH"] ?? "/usr/local/bin:/usr/bin:/bin", ...c.env },
    workingDir: c.workingDir,
    user,
    runDir: c.runDir,
    mounts: c.mounts,
    logFile: c.logFile,
  }, confinement);
  const exited = new Promise<ContainerExit>((resolve) => {
    proc.once("exit", (code, signal) => {
      const end = ended(c.runDir, argv[0] ?? "", code, signal);
      resolve({ exitCode: end.exitCode, ...(end.signal ? { signal: end.signal } : {}), ...(end.message ? { startError: end.message } : {}) });
    });
    proc.once("error", (error) => resolve({ exitCode: 128, startError: `failed to start the container: ${error.message}` }));
  });
  return { id: `containerd://${randomBytes(32).toString("hex")}`, exited, signal: (s) => killContainer(proc.pid, s) };
}

export function processRuntime(confinement: Confinement): ContainerRuntime {
  const sandbox: PodSandbox = {
    podIP: LOCALHOST, hostIP: LOCALHOST,
    start: (c) => Promise.resolve().then(() => start(c, confinement)),
    remove: () => Promise.resolve(),
  };
  return { name: "process", sandbox: () => Promise.resolve(sandbox), stop: () => Promise.resolve() };
}
