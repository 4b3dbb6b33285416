// Starts one container as a local process through ephemera-launch, the process driver's
// launcher (services/runner/native/ephemera-launch.c), so a pod's scripts get the
// confinement a step's get, with the same settings: their own mount and pid namespaces,
// an unprivileged user, the host read-only, a private /tmp, and the pod's volumes bound
// where the container mounts them.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync, rmSync } from "node:fs";
import { constants } from "node:os";
import { join } from "node:path";
import { envBool, envInt, envString, type Env } from "@ephemera/kit/config";
import { ConfigError } from "./env.js";

export interface Mount {
  source: string;
  target: string;
  readOnly: boolean;
  /** An image map's default mount: the docker runtime binds it only when it runs the image's stand-in, not the image itself. */
  standInOnly?: boolean;
}

/** How kube-sim's process runtime confines a container. */
export interface Confinement {
  /** The built ephemera-launch. */
  launcher: string;
  /** Whom containers run as when their securityContext does not say; absent: kube-sim's own user (not root). */
  user?: { uid: number; gid: number };
  /** Every mount but the container's /tmp and writable volumes read-only for it. */
  readOnlyHost: boolean;
  /** runAsUser 0 and privileged containers run, as root, rather than wait refused. */
  allowRoot: boolean;
}

export const NOBODY = 65534;

/**
 * The process driver's settings, read the same way: EPHEMERA_STEP_UID/GID (default nobody
 * when kube-sim is root), EPHEMERA_STEP_HOST_READONLY (default true), plus
 * EPHEMERA_KUBE_SIM_ALLOW_ROOT and EPHEMERA_KUBE_SIM_LAUNCHER (default the runner's build).
 */
export function confinementConfig(env: Env, processUid: number | undefined, repoRoot: string): Confinement {
  const root = processUid === 0;
  if (!root && (env["EPHEMERA_STEP_UID"] || env["EPHEMERA_STEP_GID"])) {
    throw new Error("EPHEMERA_STEP_UID/EPHEMERA_STEP_GID need kube-sim to run as root");
  }
  const uid = envInt(env, "EPHEMERA_STEP_UID", NOBODY);
  return {
    launcher: envString(env, "EPHEMERA_KUBE_SIM_LAUNCHER", join(repoRoot, "services/runner/dist/ephemera-launch")),
    ...(root ? { user: { uid, gid: envInt(env, "EPHEMERA_STEP_GID", uid === NOBODY ? NOBODY : uid) } } : {}),
    // Only root can remount the host's mounts.
    readOnlyHost: root && envBool(env, "EPHEMERA_STEP_HOST_READONLY", true),
    // EPHEMERA_STEP_UID=0 asks for root already, as it keeps steps root.
    allowRoot: envBool(env, "EPHEMERA_KUBE_SIM_ALLOW_ROOT", root && uid === 0),
  };
}

const ALLOW = "kube-sim's process runtime runs containers as an unprivileged user (EPHEMERA_KUBE_SIM_ALLOW_ROOT=true allows it)";

/** Pure: whom a container runs as, from its (pod's and own, merged) securityContext; refuses root unless allowed. */
export function containerUser(sc: Record<string, unknown>, c: Confinement): { uid: number; gid: number } | undefined {
  const runAsUser = sc["runAsUser"] as number | undefined;
  const runAsGroup = sc["runAsGroup"] as number | undefined;
  if (!c.allowRoot && sc["privileged"] === true) throw new ConfigError(`securityContext.privileged is refused: ${ALLOW}`);
  if (!c.allowRoot && runAsUser === 0) throw new ConfigError(`securityContext.runAsUser 0 (root) is refused: ${ALLOW}`);
  if (!c.user) {
    if (runAsUser !== undefined || runAsGroup !== undefined) throw new ConfigError("securityContext.runAsUser/runAsGroup need kube-sim to run as root");
    return undefined;
  }
  const uid = runAsUser ?? (sc["privileged"] === true ? 0 : c.user.uid);
  return { uid, gid: runAsGroup ?? (runAsUser === undefined ? c.user.gid : uid) };
}

export interface LaunchSpec {
  argv: string[];
  env: Record<string, string>;
  workingDir: string | undefined;
  user: { uid: number; gid: number } | undefined;
  /** The launcher's run directory (its status, and the private /tmp's source). */
  runDir: string;
  mounts: Mount[];
  logFile: string;
}

const depth = (p: string) => p.split("/").filter(Boolean).length;

/** Pure: the launcher's arguments. Shallow targets first, so a mount inside another volume's path lands on top of it. */
export function launchArgs(spec: LaunchSpec, c: Confinement): string[] {
  const binds = [...spec.mounts].sort((a, b) => depth(a.target) - depth(b.target));
  return [
    "--rundir", spec.runDir, "--pidns",
    // Not root: a user namespace lets the launcher make its mounts.
    ...(c.user ? [] : ["--userns"]),
    ...(spec.user ? ["--uid", String(spec.user.uid), "--gid", String(spec.user.gid)] : []),
    ...(c.readOnlyHost ? ["--readonly-host"] : []),
    "--view", "/tmp",
    ...binds.flatMap((m) => [m.readOnly ? "--bind-ro" : "--bind", m.source, m.target]),
    // A container without workingDir starts in / (an image without WORKDIR).
    "--chdir", spec.workingDir ?? "/",
    "--", ...spec.argv,
  ];
}

export function launch(spec: LaunchSpec, c: Confinement): ChildProcess {
  mkdirSync(spec.runDir, { recursive: true, mode: 0o700 });
  rmSync(join(spec.runDir, "status"), { force: true });
  const log = openSync(spec.logFile, "a");
  try {
    return spawn(c.launcher, launchArgs(spec, c), { env: spec.env, stdio: ["ignore", log, log], detached: true });
  } finally {
    closeSync(log);
  }
}

export interface Ended { exitCode: number; signal?: number; message?: string }

/**
 * How the container ended: the launcher's status file (exit CODE | signal N | exec ERRNO
 * MESSAGE | error MESSAGE), or, without one (the launcher was killed), its own exit.
 */
export function ended(runDir: string, command: string, code: number | null, signal: NodeJS.Signals | null): Ended {
  let status = "";
  try { status = readFileSync(join(runDir, "status"), "utf8"); } catch { /* killed before it wrote one */ }
  for (const line of status.split("\n")) {
    const [word, rest = ""] = splitOnce(line);
    if (word === "exit") return { exitCode: Number(rest) };
    if (word === "signal") return { exitCode: 128 + Number(rest), signal: Number(rest) };
    if (word === "exec") return { exitCode: 128, message: `failed to start the container: exec ${JSON.stringify(command)}: ${splitOnce(rest)[1] ?? rest}` };
    if (word === "error") return { exitCode: 128, message: `failed to start the container: ${rest}` };
  }
  const n = signal ? constants.signals[signal] : undefined;
  return { exitCode: code ?? 128 + (n ?? 0), ...(n ? { signal: n } : {}) };
}

const splitOnce = (s: string): [string, string?] => {
  const at = s.indexOf(" ");
  return at < 0 ? [s] : [s.slice(0, at), s.slice(at + 1)];
};

/**
 * Signals a container. TERM goes to the launcher's group (the launcher passes it to the
 * command's); KILL goes to the launcher's child, pid 1 of the container's pid namespace:
 * the launcher outlives it and exits only once the kernel has ended every process of the
 * namespace, so its exit means nothing of the container is left. Gone already is fine.
 */
export function killContainer(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  const init = signal === "SIGKILL" ? childrenOf(pid) : [];
  try {
    // No child yet: the launcher has not started anything, and ends with its group.
    if (init.length === 0) process.kill(-pid, signal);
    else for (const child of init) process.kill(child, signal);
  } catch {
    // ESRCH: nothing left to signal.
  }
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").split(" ").filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
