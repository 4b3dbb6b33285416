// The resource types the simulated server knows, and the discovery documents kubectl and
// client-node read to map kinds and short names to URLs.

export interface ResourceType {
  group: string;
  version: string;
  plural: string;
  singular: string;
  kind: string;
  namespaced: boolean;
  shortNames?: string[];
  /** Subresources served (`status`, `log`). */
  subresources?: string[];
}

const VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

const t = (group: string, version: string, plural: string, kind: string, namespaced: boolean, shortNames?: string[], subresources?: string[]): ResourceType =>
  ({ group, version, plural, singular: kind.toLowerCase(), kind, namespaced, ...(shortNames ? { shortNames } : {}), ...(subresources ? { subresources } : {}) });

export const RESOURCE_TYPES: ResourceType[] = [
  t("", "v1", "pods", "Pod", true, ["po"], ["status", "log"]),
  t("", "v1", "namespaces", "Namespace", false, ["ns"], ["status"]),
  t("", "v1", "secrets", "Secret", true),
  t("", "v1", "configmaps", "ConfigMap", true, ["cm"]),
  t("", "v1", "serviceaccounts", "ServiceAccount", true, ["sa"]),
  t("", "v1", "events", "Event", true, ["ev"]),
  t("", "v1", "services", "Service", true, ["svc"], ["status"]),
  t("", "v1", "endpoints", "Endpoints", true, ["ep"]),
  t("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true),
  t("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true, ["pvc"], ["status"]),
  t("", "v1", "nodes", "Node", false, ["no"], ["status"]),
  t("", "v1", "resourcequotas", "ResourceQuota", true, ["quota"], ["status"]),
  t("", "v1", "limitranges", "LimitRange", true, ["limits"]),
  t("apps", "v1", "deployments", "Deployment", true, ["deploy"], ["status"]),
  t("apps", "v1", "statefulsets", "StatefulSet", true, ["sts"], ["status"]),
  t("apps", "v1", "daemonsets", "DaemonSet", true, ["ds"], ["status"]),
  t("apps", "v1", "replicasets", "ReplicaSet", true, ["rs"], ["status"]),
  t("batch", "v1", "jobs", "Job", true, undefined, ["status"]),
  t("batch", "v1", "cronjobs", "CronJob", true, ["cj"], ["status"]),
  t("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", true, ["netpol"]),
  t("networking.k8s.io", "v1", "ingresses", "Ingress", true, ["ing"], ["status"]),
  t("rbac.authorization.k8s.io", "v1", "roles", "Role", true),
  t("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true),
  t("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false),
  t("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false),
  t("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, ["pdb"], ["status"]),
  // Called on create (admission/): the mutating webhooks.
  t("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", false),
  // Argo Rollouts' custom resource, as if its CRD were installed.
  t("argoproj.io", "v1alpha1", "rollouts", "Rollout", true, ["ro"], ["status"]),
  // Istio's VirtualService (EPHEMERA_ROUTING_MESH=istio), as if Istio's CRDs were installed; stored, never acted on.
  t("networking.istio.io", "v1", "virtualservices", "VirtualService", true, ["vs"]),
];

export const apiVersionOf = (r: ResourceType) => (r.group ? `${r.group}/${r.version}` : r.version);
export const keyOf = (r: ResourceType) => `${r.group}/${r.version}/${r.plural}`;

export function findType(group: string, version: string, plural: string): ResourceType | undefined {
  return RESOURCE_TYPES.find((r) => r.group === group && r.version === version && r.plural === plural);
}

export const typeOf = (plural: string) => RESOURCE_TYPES.find((r) => r.group === "" && r.plural === plural)!;

const groups = () => [...new Set(RESOURCE_TYPES.filter((r) => r.group).map((r) => `${r.group}/${r.version}`))];

export function apiVersions(serverAddress: string) {
  return { kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress }] };
}

export function apiGroupList() {
  return {
    kind: "APIGroupList", apiVersion: "v1",
    groups: groups().map((gv) => {
      const [name, version] = gv.split("/") as [string, string];
      const v = { groupVersion: gv, version };
      return { name, versions: [v], preferredVersion: v };
    }),
  };
}

export function apiGroup(name: string) {
  const gv = groups().find((g) => g.startsWith(`${name}/`));
  if (!gv) return undefined;
  const v = { groupVersion: gv, version: gv.split("/")[1]! };
  return { kind: "APIGroup", apiVersion: "v1", name, versions: [v], preferredVersion: v };
}

export function resourceList(group: string, version: string) {
  const types = RESOURCE_TYPES.filter((r) => r.group === group && r.version === version);
  if (!types.length) return undefined;
  const resources = types.flatMap((r) => [
    {
      name: r.plural, singularName: r.singular, namespaced: r.namespaced, kind: r.kind, verbs: VERBS,
      ...(r.shortNames ? { shortNames: r.shortNames } : {}), ...(r.plural === "pods" ? { categories: ["all"] } : {}),
      storageVersionHash: "",
    },
    ...(r.subresources ?? []).map((s) => ({
      name: `${r.plural}/${s}`, singularName: "", namespaced: r.namespaced, kind: s === "log" ? "Pod" : r.kind,
      verbs: s === "log" ? ["get"] : ["get", "patch", "update"],
    })),
  ]);
  return { kind: "APIResourceList", apiVersion: "v1", groupVersion: group ? `${group}/${version}` : version, resources };
}
