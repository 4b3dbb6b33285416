// A container's environment as the kubelet builds it: envFrom first, then env (later
// names win), `$(VAR)` expanded from what is defined so far, then command and args
// expanded with the result. A secret, config map or key that is missing and not optional
// is a ConfigError: the container waits with CreateContainerConfigError until it appears.
type Rec = Record<string, unknown>;

export class ConfigError extends Error {
  override readonly name: string = "ConfigError";
}

export interface Lookup {
  /** A secret's data, base64 as stored; undefined when there is no such secret. */
  secret(name: string): Record<string, string> | undefined;
  /** A config map's data (and binaryData decoded); undefined when there is none. */
  configMap(name: string): Record<string, string> | undefined;
}

export interface PodFacts { name: string; namespace: string; uid: string; labels: Record<string, string>; annotations: Record<string, string>; nodeName: string; podIP: string; hostIP: string; serviceAccountName: string }

/** `$(VAR)` replaced by VAR's value when defined, left as is when not; `$$(VAR)` is a literal `$(VAR)`. */
export function expand(text: string, vars: Record<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name: string | undefined) => {
    if (m === "$$") return "$";
    return name !== undefined && vars[name] !== undefined ? vars[name] : m;
  });
}

function fieldValue(path: string, pod: PodFacts): string {
  const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
  if (m) return (m[1] === "labels" ? pod.labels : pod.annotations)[m[2]!] ?? "";
  switch (path) {
    case "metadata.name": return pod.name;
    case "metadata.namespace": return pod.namespace;
    case "metadata.uid": return pod.uid;
    case "spec.nodeName": return pod.nodeName;
    case "spec.serviceAccountName": return pod.serviceAccountName;
    case "status.podIP": case "status.podIPs": return pod.podIP;
    case "status.hostIP": case "status.hostIPs": return pod.hostIP;
    default: return "";
  }
}

const decode = (b64: string) => Buffer.from(b64, "base64").toString("utf8");

function source(kind: "secret" | "configMap", name: string, lookup: Lookup): Record<string, string> | undefined {
  const data = kind === "secret" ? lookup.secret(name) : lookup.configMap(name);
  if (!data) return undefined;
  return kind === "secret" ? Object.fromEntries(Object.entries(data).map(([k, v]) => [k, decode(v)])) : data;
}

const notFound = (kind: "secret" | "configMap", name: string) => new ConfigError(`${kind === "secret" ? "secret" : "configmap"} "${name}" not found`);

export function containerEnv(container: Rec, pod: PodFacts, lookup: Lookup): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const from of (container["envFrom"] ?? []) as Rec[]) {
    const ref = (from["secretRef"] ?? from["configMapRef"]) as Rec | undefined;
    if (!ref) continue;
    const kind = from["secretRef"] ? "secret" : "configMap";
    const data = source(kind, String(ref["name"]), lookup);
    if (!data) { if (ref["optional"]) continue; throw notFound(kind, String(ref["name"])); }
    const prefix = String(from["prefix"] ?? "");
    for (const [k, v] of Object.entries(data)) if (/^[-._a-zA-Z][-._a-zA-Z0-9]*$/.test(prefix + k)) vars[prefix + k] = v;
  }
  for (const e of (container["env"] ?? []) as Rec[]) {
    const name = String(e["name"]);
    if (e["valueFrom"] === undefined) { vars[name] = expand(String(e["value"] ?? ""), vars); continue; }
    const from = e["valueFrom"] as Rec;
    const keyRef = (from["secretKeyRef"] ?? from["configMapKeyRef"]) as Rec | undefined;
    if (keyRef) {
      const kind = from["secretKeyRef"] ? "secret" : "configMap";
      const data = source(kind, String(keyRef["name"]), lookup);
      const value = data?.[String(keyRef["key"])];
      if (value !== undefined) vars[name] = value;
      else if (!keyRef["optional"]) {
        if (!data) throw notFound(kind, String(keyRef["name"]));
        throw new ConfigError(`couldn't find key ${String(keyRef["key"])} in ${kind === "secret" ? "Secret" : "ConfigMap"} ${pod.namespace}/${String(keyRef["name"])}`);
      }
    } else if (from["fieldRef"]) vars[name] = fieldValue(String((from["fieldRef"] as Rec)["fieldPath"]), pod);
  }
  return vars;
}

/** Command and args expanded; either undefined when the container leaves it to the image (ENTRYPOINT, CMD). */
export function containerCommand(container: Rec, env: Record<string, string>): { command: string[] | undefined; args: string[] | undefined } {
  const expanded = (list: unknown) => (Array.isArray(list) && list.length ? list.map((s) => expand(String(s), env)) : undefined);
  return { command: expanded(container["command"]), args: expanded(container["args"]) };
}
