// What a local workload of a sandbox needs (`spec.local[]`): its environment and its files,
// with resource outputs resolved, for `eph sandbox get-env` and `eph sandbox get-files`.
// Values from a Secret, a ConfigMap or a fork live in the cluster: they are named on
// stderr for the user to provide, never guessed.
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type * as pb from "@ephemera/proto";
import { OperationFailed } from "./errors.js";

export interface LocalValues {
  env: Array<{ name: string; value: string }>;
  files: Array<{ path: string; value: Buffer }>;
  /** Values only the cluster holds: what they are and where they come from. */
  unresolved: string[];
}

/** Pure: the local workload `local` of sandbox view `v` (fetched with its output values). */
export function localValues(v: pb.SandboxView, local: string): LocalValues {
  const spec = v.spec?.local.find((l) => l.name === local);
  if (!spec) {
    const names = (v.spec?.local ?? []).map((l) => l.name);
    throw new OperationFailed(`sandbox ${v.name} has no local workload "${local}" (${names.length ? `it has: ${names.join(", ")}` : "it has none"})`);
  }
  const out: LocalValues = {
    env: [{ name: "SIGNADOT_SANDBOX_NAME", value: v.name }, { name: "SIGNADOT_SANDBOX_ROUTING_KEY", value: v.routingKey }],
    files: [],
    unresolved: [],
  };
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
  for (const e of spec.env) {
    if (e.operation === "remove") continue;
    if (e.valueFrom?.resource) out.env.push({ name: e.name, value: fromResource(e.valueFrom.resource, `env ${e.name}`).toString("utf8") });
    else if (e.valueFrom && elsewhere(e.valueFrom)) out.unresolved.push(`env ${e.name}: from ${elsewhere(e.valueFrom)}, which only the cluster has`);
    else out.env.push({ name: e.name, value: e.value });
  }
  for (const f of spec.files) {
    if (f.valueFrom?.resource) out.files.push({ path: f.path, value: fromResource(f.valueFrom.resource, `file ${f.path}`) });
    else if (f.valueFrom && elsewhere(f.valueFrom)) out.unresolved.push(`file ${f.path}: from ${elsewhere(f.valueFrom)}, which only the cluster has`);
  }
  return out;
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
