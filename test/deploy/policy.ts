// What every installation of ephemera must hold to, checked over rendered manifests: no
// container as root, probes and limits on every container, no wildcard in RBAC, no binding
// to cluster-admin, a ClusterRole bound cluster-wide granting named objects only, every
// image pinned. Pure: objects in, violations out.
type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const WORKLOADS = new Set(["Deployment", "StatefulSet", "DaemonSet", "Job"]);

export function violations(objects: Obj[]): string[] {
  const found: string[] = [];
  const boundClusterWide = new Map<string, string>();
  for (const o of objects) if (o["kind"] === "ClusterRoleBinding" && o["roleRef"]?.kind === "ClusterRole") boundClusterWide.set(o["roleRef"].name, o["metadata"]?.name);
  for (const o of objects) {
    const id = `${o["kind"]} ${o["metadata"]?.namespace ?? ""}/${o["metadata"]?.name}`;
    if (WORKLOADS.has(o["kind"])) found.push(...podViolations(o["spec"]?.template?.spec ?? {}).map((v) => `${id}: ${v}`));
    if (o["kind"] === "Role" || o["kind"] === "ClusterRole") {
      for (const [i, rule] of (o["rules"] ?? []).entries()) {
        for (const field of ["apiGroups", "resources", "verbs"]) {
          if ((rule[field] ?? []).includes("*")) found.push(`${id}: rules[${i}].${field} has "*"`);
        }
        const binding = o["kind"] === "ClusterRole" ? boundClusterWide.get(o["metadata"]?.name) : undefined;
        if (binding && !(rule["resourceNames"] ?? []).length) found.push(`${id}: rules[${i}] is granted cluster-wide (ClusterRoleBinding ${binding}) without resourceNames`);
      }
    }
    if ((o["kind"] === "ClusterRoleBinding" || o["kind"] === "RoleBinding") && o["roleRef"]?.name === "cluster-admin") {
      found.push(`${id}: binds cluster-admin`);
    }
  }
  return found;
}

function podViolations(pod: Obj): string[] {
  const found: string[] = [];
  const podSec = pod["securityContext"] ?? {};
  for (const c of [...(pod["initContainers"] ?? []), ...(pod["containers"] ?? [])] as Obj[]) {
    const name = `container ${c["name"]}`;
    const sec = { ...podSec, ...(c["securityContext"] ?? {}) };
    if (sec["runAsNonRoot"] !== true) found.push(`${name}: runAsNonRoot is not true`);
    if (sec["runAsUser"] === 0) found.push(`${name}: runAsUser is 0`);
    if (sec["allowPrivilegeEscalation"] !== false) found.push(`${name}: allowPrivilegeEscalation is not false`);
    if (!(sec["capabilities"]?.drop ?? []).includes("ALL")) found.push(`${name}: capabilities are not all dropped`);
    if (!c["readinessProbe"]) found.push(`${name}: no readinessProbe`);
    if (!c["livenessProbe"]) found.push(`${name}: no livenessProbe`);
    for (const kind of ["requests", "limits"]) {
      for (const r of ["cpu", "memory"]) if (!c["resources"]?.[kind]?.[r]) found.push(`${name}: no ${kind}.${r}`);
    }
    if (!pinned(String(c["image"] ?? ""))) found.push(`${name}: image ${c["image"]} is not pinned to a tag or digest`);
  }
  return found;
}

/** `repo:tag` with a tag other than latest, or `repo@sha256:…`. */
export function pinned(image: string): boolean {
  if (/@sha256:[0-9a-f]{64}$/.test(image)) return true;
  const tag = /:([^/:]+)$/.exec(image)?.[1];
  return tag !== undefined && tag !== "latest";
}
