// The docker runtime: a pod is a pause container (`sleep infinity` under --init) holding
// the pod's network namespace, and each of its containers a Docker container joined to it
// (`--network container:<pause>`), so they share localhost and the pod's IP on Docker's
// bridge. Containers are named as the kubelet's Docker integration named them
// (`k8s_<container>_<pod>_<namespace>_<uid>_<attempt>`, `k8s_POD_…` for the pause one). Volumes are the same host directories the process runtime binds; the container's
// output is attached to the same log file (`docker start -a`), so the API's log endpoint
// reads either runtime alike. Every container carries kube-sim's labels, so what a killed
// kube-sim left is found and removed at the next start. The pause container takes the pod's
// DNS settings (network/pod-dns.ts) and its bridge port is put in hairpin mode (hairpin.ts).
import { execFile, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { promisify } from "node:util";
import { ConfigError } from "./env.js";
import { enableHairpin } from "./hairpin.js";
import { standInFor, type ImageEntry } from "./images.js";
import { quantity } from "./quantity.js";
import { CreateContainerError, ImagePullError, type ContainerExit, type ContainerLaunch, type ContainerRuntime, type PodIdentity, type PodSandbox, type RunningContainer } from "./runtime.js";

type Rec = Record<string, unknown>;
const exec = promisify(execFile);

export const LABEL = "dev.ephemera.kube-sim";
export const POD_LABEL = `${LABEL}.pod`;
const DATA_LABEL = `${LABEL}.data`;
const PID_LABEL = `${LABEL}.pid`;
export const PAUSE_IMAGE = "debian:bookworm-slim";
/** The name pods reach the host by: Docker's bridge gateway, where services must listen to be reached. */
export const HOST_ALIAS = "host.kube-sim.internal";
const PULL_TIMEOUT_MS = 60_000;
const CALL_TIMEOUT_MS = 30_000;
/** What the docker CLI itself reads from its environment; a container variable of these names goes on its argv. */
const CLI_ENV = /^(PATH|HOME|TMPDIR|XDG_.*|DOCKER_.*)$/;

export class DockerError extends Error {
  override readonly name = "DockerError";
}

async function docker(args: string[], timeout = CALL_TIMEOUT_MS, env?: NodeJS.ProcessEnv): Promise<string> {
  try {
    return (await exec("docker", args, { timeout, maxBuffer: 16 << 20, ...(env ? { env } : {}) })).stdout.trim();
  } catch (err) {
    const e = err as { stderr?: string; killed?: boolean; message: string };
    const why = e.killed ? `no answer within ${timeout} ms` : (e.stderr?.trim().split("\n").pop() || e.message);
    throw new DockerError(`docker ${args[0]}: ${why}`, { cause: err });
  }
}

/**
 * `docker rm -f -v` of containers some of which another removal (a pod's own, a stop racing
 * it) may already be taking: "No such container" is done, "removal … already in progress"
 * is waited for, bounded; any other refusal is an error.
 */
async function removeContainers(ids: string[]): Promise<void> {
  if (!ids.length) return;
  try {
    await docker(["rm", "-f", "-v", ...ids]);
    return;
  } catch (err) {
    const stderr = String((err as { cause?: { stderr?: string } }).cause?.stderr ?? "");
    const lines = stderr.split("\n").map((l) => l.trim()).filter(Boolean);
    const benign = (l: string) => /No such container|already in progress/.test(l);
    if (!lines.length || !lines.every(benign)) throw err;
  }
  const deadline = Date.now() + CALL_TIMEOUT_MS;
  for (;;) {
    const left = (await docker(["ps", "-a", "-q", "--no-trunc", ...ids.flatMap((id) => ["--filter", `id=${id}`])])).split("\n").filter(Boolean);
    if (!left.length) return;
    if (Date.now() > deadline) throw new DockerError(`docker rm: ${left.length} container(s) still being removed after ${CALL_TIMEOUT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Why Docker cannot run containers here, or undefined when it answers (ensure-docker.sh's check). */
export async function dockerUnavailable(): Promise<string | undefined> {
  try {
    await docker(["info", "--format", "{{.ServerVersion}}"], 20_000);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

const alive = (pid: number) => {
  try { process.kill(pid, 0); return true; } catch (err) { return (err as NodeJS.ErrnoException).code === "EPERM"; }
};

/** Removes containers a kube-sim left behind: those of this data dir, and those whose kube-sim process is gone. */
export async function removeLeftovers(dataDir: string): Promise<number> {
  const rows = await docker(["ps", "-a", "--filter", `label=${LABEL}`, "--format", `{{.ID}}\t{{.Label "${DATA_LABEL}"}}\t{{.Label "${PID_LABEL}"}}`]);
  const stale = rows.split("\n").filter(Boolean).map((r) => r.split("\t")).filter(([, data, pid]) => data === dataDir || !alive(Number(pid)));
  await removeContainers(stale.map(([id]) => id!));
  return stale.length;
}

export interface DockerRuntimeOptions {
  simId: string;
  dataDir: string;
  images: ImageEntry[];
  /** The pause container's DNS options for a pod (network/pod-dns.ts); none: Docker's copy of the machine's. */
  podDns?: (pod: PodIdentity) => string[];
}

export function dockerRuntime(options: DockerRuntimeOptions): ContainerRuntime {
  const labels = ["--label", `${LABEL}=${options.simId}`, "--label", `${DATA_LABEL}=${options.dataDir}`, "--label", `${PID_LABEL}=${process.pid}`];
  return {
    name: "docker",
    sandbox: (pod) => sandbox(pod, labels, options.images, options.podDns?.(pod) ?? []),
    stop: async () => {
      await removeContainers((await docker(["ps", "-a", "-q", "--filter", `label=${LABEL}=${options.simId}`])).split("\n").filter(Boolean));
    },
  };
}

/** The image to run and the user it runs as: a local image, else its stand-in, else pulled; else ImagePullError. */
async function resolveImage(image: string, images: ImageEntry[]): Promise<{ image: string; user: string }> {
  const local = async (ref: string) => {
    try { return { image: ref, user: await docker(["image", "inspect", "--format", "{{.Config.User}}", ref]) }; } catch { return undefined; }
  };
  const standIn = standInFor(image, images);
  const found = (await local(image)) ?? (standIn ? await local(standIn) : undefined);
  if (found) return found;
  try {
    await docker(["pull", "--quiet", image], PULL_TIMEOUT_MS);
  } catch (err) {
    throw new ImagePullError(`failed to pull image "${image}": ${(err as Error).message}${standIn ? ` (nor is its stand-in ${standIn} here)` : ""}`);
  }
  return (await local(image)) ?? { image, user: "" };
}

async function sandbox(pod: PodIdentity, labels: string[], images: ImageEntry[], dns: string[]): Promise<PodSandbox> {
  const podLabel = ["--label", `${POD_LABEL}=${pod.uid}`];
  const aliases = ((pod.spec["hostAliases"] ?? []) as Rec[]).flatMap((a) => ((a["hostnames"] ?? []) as string[]).flatMap((h) => ["--add-host", `${h}:${String(a["ip"])}`]));
  const pause = await resolveImage(PAUSE_IMAGE, images);
  const pauseId = await docker(["run", "-d", "--init", "--name", `k8s_POD_${pod.name}_${pod.namespace}_${pod.uid}_0`, ...labels, ...podLabel,
    "--hostname", pod.name.slice(0, 63), "--add-host", `${HOST_ALIAS}:host-gateway`, ...aliases, ...dns, pause.image, "sleep", "infinity"]);
  const [podIP = "", hostIP = "", pid = ""] = (await docker(["inspect", "--format", "{{.NetworkSettings.IPAddress}} {{.NetworkSettings.Gateway}} {{.State.Pid}}", pauseId])).split(" ");
  await enableHairpin(Number(pid));
  let attempts = 0;
  const ident = `"${pod.name}_${pod.namespace}(${pod.uid})"`;
  return {
    podIP, hostIP,
    start: async (c) => {
      const { image, user } = await resolveImage(c.image, images);
      // The image itself has its files: the mounts that stand in for them are for its stand-in only.
      const args = createArgs(image === c.image ? { ...c, mounts: c.mounts.filter((m) => !m.standInOnly) } : c, user, ident);
      // Values go through the CLI's environment (`-e NAME`), not its argv, where any process could read them.
      const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => CLI_ENV.test(k)));
      const vars = Object.entries(c.env).flatMap(([k, v]) => (CLI_ENV.test(k) ? ["-e", `${k}=${v}`] : (env[k] = v, ["-e", k])));
      const [entrypoint, ...rest] = c.command ?? [];
      const id = await docker(["create", "--name", `k8s_${c.name}_${pod.name}_${pod.namespace}_${pod.uid}_${attempts++}`, ...labels, ...podLabel,
        "--network", `container:${pauseId}`, ...args, ...vars, ...(entrypoint !== undefined ? ["--entrypoint", entrypoint] : []),
        image, ...(c.command ? rest : []), ...(c.args ?? [])], CALL_TIMEOUT_MS, env).catch((err: Error) => {
        throw new CreateContainerError(err.message, { cause: err });
      });
      return attach(id, c.logFile, ((c.resources["limits"] ?? {}) as Rec)["memory"] !== undefined);
    },
    remove: async () => {
      await removeContainers((await docker(["ps", "-a", "-q", "--filter", `label=${POD_LABEL}=${pod.uid}`])).split("\n").filter(Boolean));
    },
  };
}

const isRoot = (user: string) => user === "" || /^(root|0)(:.*)?$/.test(user);

/** Pure: docker create's options for a container's user, security context, mounts and limits. */
export function createArgs(c: ContainerLaunch, imageUser: string, pod: string): string[] {
  const sc = c.securityContext;
  const uid = sc["runAsUser"] as number | undefined;
  const gid = sc["runAsGroup"] as number | undefined;
  if (sc["runAsNonRoot"] === true) {
    // The kubelet's own checks and messages (verifyRunAsNonRoot).
    if (uid === 0) throw new ConfigError(`container's runAsUser breaks non-root policy (pod: ${pod}, container: ${c.name})`);
    if (uid === undefined) {
      const name = imageUser.split(":")[0]!;
      if (isRoot(imageUser)) throw new ConfigError(`container has runAsNonRoot and image will run as root (pod: ${pod}, container: ${c.name})`);
      if (!/^\d+$/.test(name)) throw new ConfigError(`container has runAsNonRoot and image has non-numeric user (${name}), cannot verify user is non-root (pod: ${pod}, container: ${c.name})`);
    }
  }
  const args: string[] = [];
  if (uid !== undefined || gid !== undefined) args.push("--user", `${uid ?? (imageUser.split(":")[0] || 0)}${gid !== undefined ? `:${gid}` : ""}`);
  for (const g of [...((sc["supplementalGroups"] ?? []) as number[]), ...(sc["fsGroup"] !== undefined ? [sc["fsGroup"] as number] : [])]) args.push("--group-add", String(g));
  if (sc["readOnlyRootFilesystem"] === true) args.push("--read-only");
  if (sc["privileged"] === true) args.push("--privileged");
  if (sc["allowPrivilegeEscalation"] === false) args.push("--security-opt", "no-new-privileges");
  const caps = (sc["capabilities"] ?? {}) as Rec;
  for (const cap of (caps["add"] ?? []) as string[]) args.push("--cap-add", cap);
  for (const cap of (caps["drop"] ?? []) as string[]) args.push("--cap-drop", cap);
  const limits = ((c.resources["limits"] ?? {}) as Rec);
  const limit = (what: string) => {
    try { return quantity(limits[what], `container "${c.name}" resources.limits.${what}`); } catch (err) { throw new CreateContainerError((err as Error).message); }
  };
  if (limits["memory"] !== undefined) {
    // No swap past the limit, as on a node: the container is OOM-killed there.
    const bytes = String(Math.ceil(limit("memory")));
    args.push("--memory", bytes, "--memory-swap", bytes);
  }
  if (limits["cpu"] !== undefined) args.push("--cpus", String(limit("cpu")));
  if (c.workingDir) args.push("--workdir", c.workingDir);
  for (const m of c.mounts) args.push("-v", `${m.source}:${m.target}${m.readOnly ? ":ro" : ""}`);
  return args;
}

/** Starts a created container attached to its log file; its exit read back from Docker, then it is removed. */
function attach(id: string, logFile: string, hasMemoryLimit: boolean): RunningContainer {
  const log = openSync(logFile, "a");
  let proc;
  try {
    proc = spawn("docker", ["start", "--attach", id], { stdio: ["ignore", log, log] });
  } finally {
    closeSync(log);
  }
  const exited = new Promise<ContainerExit>((resolve) => {
    proc.once("error", (error) => resolve({ exitCode: 128, startError: `failed to start the container: ${error.message}` }));
    proc.once("exit", (cliCode) => {
      void (async (): Promise<ContainerExit> => {
        try {
          const inspect = async () => (await docker(["inspect", "--format", "{{.State.ExitCode}}\t{{.State.OOMKilled}}\t{{.State.Error}}", id])).split("\t");
          let [code, oom, error] = await inspect();
          // Docker 20.10 on cgroup v2 may handle the exit before the OOM event and set
          // OOMKilled only after: a SIGKILLed container with a memory limit is looked at
          // again, until OOMKilled is set or a second has passed (then it was another kill).
          for (const deadline = Date.now() + 1_000; code === "137" && oom !== "true" && hasMemoryLimit && Date.now() < deadline;) {
            await new Promise((resolve) => setTimeout(resolve, 100));
            [code, oom, error] = await inspect();
          }
          return { exitCode: Number(code), oomKilled: oom === "true", ...(error ? { startError: `failed to start the container: ${error}` } : {}) };
        } catch {
          return { exitCode: cliCode ?? 137 };
        }
      })().then(async (exit) => {
        await docker(["rm", "-f", "-v", id]).catch(() => undefined);
        resolve(exit);
      });
    });
  });
  const signal = (s: "SIGTERM" | "SIGKILL") => { void docker(["kill", "--signal", s === "SIGTERM" ? "TERM" : "KILL", id]).catch(() => undefined); };
  return { id: `docker://${id}`, exited, signal };
}
