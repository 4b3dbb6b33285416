// What a local workload of a sandbox needs (`spec.local[]`): its environment and its files,
// for `eph sandbox get-env` and `eph sandbox get-files`. Resource outputs are resolved from
// the API. When `eph local connect` serves the local, the cluster's part comes through its
// daemon: the baseline's own env first, then the sandbox's customizations on top (as the
// cluster applies a fork's), their Secrets, ConfigMaps and forks read by the tunnel. Without
// it, values only the cluster holds are named on stderr for the user to provide, never guessed.
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type * as pb from "@ephemera/proto";
import { errorMessage } from "@ephemera/kit/errors";
import { OperationFailed } from "./errors.js";
import type { Environment } from "./workstation/tunnel.js";

export interface LocalValues {
  env: Array<{ name: string; value: string }>;
  files: Array<{ path: string; value: Buffer }>;
  /** What could not be given, env and files apart: what each is and why. */
  unresolved: { env: string[]; files: string[] };
}

/**
 * Pure: the local workload `local` of sandbox view `v` (fetched with its output values), over
 * the cluster's `environment` of it when there is one.
 */
export function localValues(v: pb.SandboxView, local: string, environment?: Environment): LocalValues {
  const spec = v.spec?.local.find((l) => l.name === local);
  if (!spec) {
    const names = (v.spec?.local ?? []).map((l) => l.name);
    throw new OperationFailed(`sandbox ${v.name} has no local workload "${local}" (${names.length ? `it has: ${names.join(", ")}` : "it has none"})`);
  }
  // A later value of a name replaces the earlier and goes last, as a fork's env is written.
  const env = new Map<string, string>();
  const set = (name: string, value: string) => {
    env.delete(name);
    env.set(name, value);
  };
  const unresolved: LocalValues["unresolved"] = {
    env: (environment?.unresolved ?? []).filter((u) => !u.startsWith("file ")),
    files: (environment?.unresolved ?? []).filter((u) => u.startsWith("file ")),
  };
  for (const e of environment?.env ?? []) set(e.name, e.value);
  set("SIGNADOT_SANDBOX_NAME", v.name);
  set("SIGNADOT_SANDBOX_ROUTING_KEY", v.routingKey);
  const fromResource = (ref: pb.ResourceOutputRef, what: string): Buffer => {
    const r = v.resources.find((x) => x.name === ref.name);
    const o = r?.outputs.find((x) => x.key === ref.outputKey);
    if (!r || !o || o.value === undefined) {
      const state = r ? `resource ${r.name} is ${r.status}` : `there is no resource ${ref.name}`;
      throw new OperationFailed(`${what}: output ${ref.outputKey} of resource ${ref.name} is not available (${state})`);
    }
    return Buffer.from(o.value);
  };
  const elsewhere = (from: pb.EnvValueFrom): string | undefined =>
    from.secret ? `Secret ${from.secret.name} key ${from.secret.key}`
      : from.configMap ? `ConfigMap ${from.configMap.name} key ${from.configMap.key}`
      : from.fork ? `fork ${from.fork.forkOf?.name ?? ""} ${from.fork.expression ?? ""}`.trim()
      : undefined;
  const notHere = (what: string, from: pb.EnvValueFrom) => `${what}: from ${elsewhere(from)}, which only the cluster has (eph local connect resolves it)`;
  for (const e of spec.env) {
    if (e.operation === "delete") {
      env.delete(e.name);
    } else if (e.valueFrom?.resource) {
      set(e.name, fromResource(e.valueFrom.resource, `env ${e.name}`).toString("utf8"));
    } else if (e.valueFrom && elsewhere(e.valueFrom)) {
      // From the cluster: its value, or nothing (the tunnel said why, or it is optional and absent).
      const value = environment?.values.env.find((x) => x.name === e.name)?.value;
      if (value !== undefined) set(e.name, value);
      else if (!environment) unresolved.env.push(notHere(`env ${e.name}`, e.valueFrom));
    } else {
      set(e.name, e.value);
    }
  }
  const files: LocalValues["files"] = [];
  for (const f of spec.files) {
    if (f.valueFrom?.resource) {
      files.push({ path: f.path, value: fromResource(f.valueFrom.resource, `file ${f.path}`) });
    } else if (f.valueFrom && elsewhere(f.valueFrom)) {
      const value = environment?.values.files.find((x) => x.path === f.path)?.value;
      if (value !== undefined) files.push({ path: f.path, value: Buffer.from(value, "base64") });
      else if (!environment) unresolved.files.push(notHere(`file ${f.path}`, f.valueFrom));
    }
  }
  return { env: [...env].map(([name, value]) => ({ name, value })), files, unresolved };
}

/**
 * The cluster's environment of a local through the daemon of `eph local connect` in state
 * dir `dir`, when it runs and serves that local; else why not (one line).
 */
export async function clusterEnvironment(dir: string, sandbox: string, local: string): Promise<{ environment: Environment } | { why: string }> {
  const { alive, readState } = await import("./workstation/state.js");
  const state = readState(dir);
  if (!state || state.phase === "failed" || !alive(state.pid)) return { why: "eph local connect is not running" };
  if (!state.serving.some((s) => s.sandbox === sandbox && s.local === local)) {
    return { why: `eph local connect (pid ${state.pid}) does not serve local ${local} of sandbox ${sandbox}` };
  }
  const { askEnvironment } = await import("./workstation/control.js");
  try {
    return { environment: await askEnvironment(dir, sandbox, local) };
  } catch (err) {
    return { why: `eph local connect could not read it from the cluster: ${errorMessage(err)}` };
  }
}

/** dotenv: plain when safe, else double-quoted with \n, \", \\ and $ escaped. */
export function dotenv(env: LocalValues["env"]): string {
  const quote = (v: string) => (/^[A-Za-z0-9_./:@%+,=-]*$/.test(v) ? v : `"${v.replace(/[\\"$]/g, (c) => `\\${c}`).replace(/\n/g, "\\n")}"`);
  return env.map((e) => `${e.name}=${quote(e.value)}\n`).join("");
}

/** Writes the files under `dir` (their absolute paths re-rooted there), mode 0600: they may hold secrets. */
export async function writeLocalFiles(files: LocalValues["files"], dir: string): Promise<string[]> {
  const written: string[] = [];
  for (const f of files) {
    const target = join(dir, f.path);
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, f.value, { mode: 0o600 });
    await chmod(target, 0o600);
    written.push(target);
  }
  return written;
}
