// A local workload's environment read from the cluster: its baseline workload's container
// env as the kubelet would build it (envFrom first, then env, ConfigMaps and Secrets of the
// baseline's namespace read, `$(VAR)` expanded), and the values of the local's own
// customizations that only the cluster holds (a Secret's, a ConfigMap's, a fork's Service).
// What a local process cannot have (a pod's IP, its name) is named, never made up.
import { ApiException, AppsV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import type * as pb from "@ephemera/proto";
import {
  baselineLabel, baselineOf, errorMessage, forkServiceOf, forkValue, isForkKind, servicesSelecting, type BaselineRef, type ForkService,
} from "@ephemera/kit";
import type { Environment } from "../protocol.js";

/** The local to read for: its sandbox, the sandbox's routing key (fork names) and its spec entry. */
export interface EnvironmentTarget { sandbox: string; routingKey: string; spec: pb.Local; mappings: Array<{ port: number }> }

export type ReadEnvironment = (target: EnvironmentTarget) => Promise<Environment>;

/** The baseline cannot be read: an HTTP status for the workstation and one line. */
export class EnvironmentError extends Error {
  override readonly name = "EnvironmentError";
  constructor(readonly status: number, message: string) {
    super(message);
  }
}
export const isEnvironmentError = (err: unknown): err is EnvironmentError => err instanceof EnvironmentError;

type Rec = Record<string, unknown>;
type Source = "Secret" | "ConfigMap";
/** A Secret's or ConfigMap's data, decoded; undefined when there is none; or why it could not be read. */
type SourceData = { data: Record<string, string> } | { problem: string } | undefined;

interface PodTemplate { labels: Record<string, string>; annotations: Record<string, string>; serviceAccountName: string; containers: Rec[] }

/** The message of the Kubernetes API's Status in an error, else the error's (never a request body). */
function kubeMessage(err: unknown): string {
  if (err instanceof ApiException) {
    try {
      const body = (typeof err.body === "string" ? JSON.parse(err.body) : err.body) as { message?: string } | undefined;
      if (body?.message) return `${body.message} (HTTP ${err.code})`;
    } catch { /* not a Status */ }
    return `HTTP ${err.code}`;
  }
  return errorMessage(err);
}
const notFound = (err: unknown) => err instanceof ApiException && err.code === 404;

/** Reads with `kubeconfig`'s credentials (the tunnel's service account), each call bounded by `timeoutMs`. */
export function kubeEnvironment(kubeconfig: KubeConfig, timeoutMs = 10_000): ReadEnvironment {
  const core = kubeconfig.makeApiClient(CoreV1Api);
  const apps = kubeconfig.makeApiClient(AppsV1Api);
  const custom = kubeconfig.makeApiClient(CustomObjectsApi);
  const bounded = async <T>(what: string, call: () => Promise<T>): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the Kubernetes API did not answer ${what} within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      return await Promise.race([call(), timeout]);
    } finally {
      clearTimeout(timer);
    }
  };
  const workload = async (b: BaselineRef): Promise<Rec> => {
    const ref = { name: b.name, namespace: b.namespace };
    const read = b.kind === "Deployment" ? () => apps.readNamespacedDeployment(ref)
      : b.kind === "StatefulSet" ? () => apps.readNamespacedStatefulSet(ref)
      : () => custom.getNamespacedCustomObject({ group: "argoproj.io", version: "v1alpha1", plural: "rollouts", ...ref });
    try {
      return (await bounded(`for ${baselineLabel(b)}`, read)) as Rec;
    } catch (err) {
      if (notFound(err)) throw new EnvironmentError(404, `the baseline ${baselineLabel(b)} is not in the cluster`);
      throw new EnvironmentError(502, `the tunnel cannot read ${baselineLabel(b)}: ${kubeMessage(err)}`);
    }
  };
  const source = async (kind: Source, namespace: string, name: string): Promise<SourceData> => {
    try {
      if (kind === "Secret") {
        const secret = await bounded(`for Secret ${namespace}/${name}`, () => core.readNamespacedSecret({ name, namespace }));
        return { data: Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")])) };
      }
      const map = await bounded(`for ConfigMap ${namespace}/${name}`, () => core.readNamespacedConfigMap({ name, namespace }));
      const binary = Object.entries(map.binaryData ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]);
      return { data: { ...Object.fromEntries(binary), ...(map.data ?? {}) } };
    } catch (err) {
      if (notFound(err)) return undefined;
      return { problem: `the tunnel cannot read ${kind} ${namespace}/${name}: ${kubeMessage(err)}` };
    }
  };
  const services = async (namespace: string) =>
    (await bounded(`listing the Services of ${namespace}`, () => core.listNamespacedService({ namespace }))).items;
  return (target) => readEnvironment(target, { workload, source, services });
}

interface Reads {
  workload(b: BaselineRef): Promise<Rec>;
  source(kind: Source, namespace: string, name: string): Promise<SourceData>;
  services(namespace: string): Promise<Array<{ metadata?: { name?: string; labels?: Record<string, string> }; spec?: { selector?: Record<string, string>; ports?: Array<{ port?: number }> } }>>;
}

async function readEnvironment(target: EnvironmentTarget, reads: Reads): Promise<Environment> {
  const baseline = baselineOf(target.spec.from);
  if (!isForkKind(baseline.kind)) throw new EnvironmentError(400, `local ${target.spec.name}: kind ${baseline.kind} is not one ephemera reads (Deployment, Rollout, StatefulSet)`);
  const template = podTemplate(await reads.workload(baseline));
  const container = containerOf(template.containers, target.mappings);
  if (!container) throw new EnvironmentError(409, `the baseline ${baselineLabel(baseline)} has no containers`);
  // One read per Secret or ConfigMap, however many variables use it.
  const cache = new Map<string, Promise<SourceData>>();
  const data = (kind: Source, name: string) => {
    const key = `${kind}/${name}`;
    if (!cache.has(key)) cache.set(key, reads.source(kind, baseline.namespace, name));
    return cache.get(key)!;
  };
  const unresolved: string[] = [];
  const env = await containerEnv(container, template, baseline.namespace, data, unresolved);
  const values = await customizations(target, baseline, data, reads, unresolved);
  return {
    sandbox: target.sandbox, local: target.spec.name, unresolved, values, env,
    baseline: { ...baseline, container: String(container["name"] ?? "") },
  };
}

function podTemplate(workload: Rec): PodTemplate {
  const template = ((workload["spec"] as Rec | undefined)?.["template"] ?? {}) as Rec;
  const meta = (template["metadata"] ?? {}) as Rec;
  const spec = (template["spec"] ?? {}) as Rec;
  return {
    labels: (meta["labels"] ?? {}) as Record<string, string>, annotations: (meta["annotations"] ?? {}) as Record<string, string>,
    serviceAccountName: String(spec["serviceAccountName"] ?? "") || "default", containers: (spec["containers"] ?? []) as Rec[],
  };
}

/** The container one of the mappings' ports belongs to, else the first. */
function containerOf(containers: Rec[], mappings: Array<{ port: number }>): Rec | undefined {
  const ports = new Set(mappings.map((m) => m.port));
  const owns = (c: Rec) => ((c["ports"] ?? []) as Rec[]).some((p) => ports.has(Number(p["containerPort"])));
  return containers.find(owns) ?? containers[0];
}

/** `$(VAR)` replaced by VAR's value when defined, left as is when not; `$$` is a literal `$` (the kubelet's rules). */
function expand(text: string, vars: Map<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name: string | undefined) => {
    if (m === "$$") return "$";
    return name !== undefined && vars.has(name) ? vars.get(name)! : m;
  });
}

const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;
type Data = (kind: Source, name: string) => Promise<SourceData>;

/** The value a key of a Secret or ConfigMap gives, or undefined with why in `unresolved` (nothing for an optional one absent). */
async function keyValue(what: string, kind: Source, ref: { name?: unknown; key?: unknown; optional?: unknown }, namespace: string, data: Data, unresolved: string[]): Promise<string | undefined> {
  const name = String(ref.name ?? "");
  const key = String(ref.key ?? "");
  const found = await data(kind, name);
  if (found && "problem" in found) {
    unresolved.push(`${what}: ${found.problem}`);
    return undefined;
  }
  const value = found?.data[key];
  if (value !== undefined || ref.optional) return value;
  unresolved.push(`${what}: ${found ? `${kind} ${namespace}/${name} has no key ${key}` : `there is no ${kind} ${namespace}/${name}`} (the baseline's pods would not start either)`);
  return undefined;
}

async function containerEnv(container: Rec, template: PodTemplate, namespace: string, data: Data, unresolved: string[]): Promise<Environment["env"]> {
  const vars = new Map<string, string>();
  for (const from of (container["envFrom"] ?? []) as Rec[]) {
    const kind: Source | undefined = from["secretRef"] ? "Secret" : from["configMapRef"] ? "ConfigMap" : undefined;
    if (!kind) continue;
    const ref = (from["secretRef"] ?? from["configMapRef"]) as Rec;
    const name = String(ref["name"] ?? "");
    const found = await data(kind, name);
    if (found && "problem" in found) {
      unresolved.push(`envFrom ${kind} ${name}: ${found.problem}`);
      continue;
    }
    if (!found) {
      if (!ref["optional"]) unresolved.push(`envFrom ${kind} ${name}: there is no ${kind} ${namespace}/${name} (the baseline's pods would not start either)`);
      continue;
    }
    const prefix = String(from["prefix"] ?? "");
    for (const [k, v] of Object.entries(found.data)) if (ENV_NAME.test(prefix + k)) vars.set(prefix + k, v);
  }
  for (const e of (container["env"] ?? []) as Rec[]) {
    const name = String(e["name"] ?? "");
    const from = e["valueFrom"] as Rec | undefined;
    if (!from) {
      vars.set(name, expand(String(e["value"] ?? ""), vars));
      continue;
    }
    const kind: Source | undefined = from["secretKeyRef"] ? "Secret" : from["configMapKeyRef"] ? "ConfigMap" : undefined;
    if (kind) {
      const value = await keyValue(`env ${name}`, kind, (from["secretKeyRef"] ?? from["configMapKeyRef"]) as Rec, namespace, data, unresolved);
      if (value !== undefined) vars.set(name, value);
    } else if (from["fieldRef"]) {
      const path = String((from["fieldRef"] as Rec)["fieldPath"] ?? "");
      const value = fieldValue(path, template, namespace);
      if (typeof value === "string") vars.set(name, value);
      else unresolved.push(`env ${name}: fieldRef ${path} is ${value.why}, which a local process does not have`);
    } else if (from["resourceFieldRef"]) {
      unresolved.push(`env ${name}: resourceFieldRef ${String((from["resourceFieldRef"] as Rec)["resource"] ?? "")} is a container's limit, which a local process does not have`);
    }
  }
  return [...vars].map(([name, value]) => ({ name, value }));
}

/** A fieldRef's value where the pod template decides it; else what it is a fact of. */
function fieldValue(path: string, template: PodTemplate, namespace: string): string | { why: string } {
  const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
  if (m) return (m[1] === "labels" ? template.labels : template.annotations)[m[2]!] ?? "";
  switch (path) {
    case "metadata.namespace": return namespace;
    case "spec.serviceAccountName": return template.serviceAccountName;
    case "metadata.name": case "metadata.uid": return { why: "a pod's own" };
    case "spec.nodeName": case "status.hostIP": case "status.hostIPs": return { why: "the pod's node's" };
    case "status.podIP": case "status.podIPs": return { why: "the pod's own address" };
    default: return { why: "not one the tunnel knows" };
  }
}

/** The local's env and files whose valueFrom only the cluster can give. */
async function customizations(target: EnvironmentTarget, baseline: BaselineRef, data: Data, reads: Reads, unresolved: string[]): Promise<Environment["values"]> {
  const value = async (what: string, from: pb.EnvValueFrom): Promise<string | undefined> => {
    if (from.secret) return keyValue(what, "Secret", from.secret, baseline.namespace, data, unresolved);
    if (from.configMap) return keyValue(what, "ConfigMap", from.configMap, baseline.namespace, data, unresolved);
    if (!from.fork) return undefined;
    try {
      return forkValue(what.replace(/^(env|file) /, ""), from.fork, await forkServices(from.fork, target.routingKey, reads));
    } catch (err) {
      unresolved.push(`${what}: ${errorMessage(err)}`);
      return undefined;
    }
  };
  const values: Environment["values"] = { env: [], files: [] };
  for (const e of target.spec.env) {
    if (e.operation === "delete" || !e.valueFrom || e.valueFrom.resource) continue;
    const v = await value(`env ${e.name}`, e.valueFrom);
    if (v !== undefined) values.env.push({ name: e.name, value: v });
  }
  for (const f of target.spec.files) {
    if (!f.valueFrom || f.valueFrom.resource) continue;
    const v = await value(`file ${f.path}`, f.valueFrom);
    if (v !== undefined) values.files.push({ path: f.path, value: Buffer.from(v).toString("base64") });
  }
  return values;
}

/** The fork Service of the fork `ref` reads (the spec's validation saw that the sandbox forks it). */
async function forkServices(ref: pb.ForkValueRef, routingKey: string, reads: Reads): Promise<Map<string, ForkService | undefined>> {
  const other = baselineOf(ref.forkOf);
  const template = podTemplate(await reads.workload(other));
  let listed: Awaited<ReturnType<Reads["services"]>>;
  try {
    listed = await reads.services(other.namespace);
  } catch (err) {
    throw new Error(`the tunnel cannot list the Services of namespace ${other.namespace}: ${kubeMessage(err)}`, { cause: err });
  }
  return new Map([[baselineLabel(other), forkServiceOf(other, servicesSelecting(listed, template.labels), routingKey)]]);
}
