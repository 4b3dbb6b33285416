// Just enough OpenAPI v3 for kubectl: its create/apply first asks whether the server
// validates fields itself (a `fieldValidation` query parameter on each kind's PATCH),
// and without an answer it wants a full schema to validate on the client. With this it
// sends `fieldValidation=Strict`, which is accepted (and not enforced); apply then
// computes strategic merge patches from its own compiled-in types.
import { RESOURCE_TYPES, type ResourceType } from "../resources.js";

const gvPath = (r: Pick<ResourceType, "group" | "version">) => (r.group ? `apis/${r.group}/${r.version}` : `api/${r.version}`);

export function openapiRoot() {
  const paths: Record<string, { serverRelativeURL: string }> = {};
  for (const r of RESOURCE_TYPES) paths[gvPath(r)] = { serverRelativeURL: `/openapi/v3/${gvPath(r)}?hash=kube-sim-1` };
  return { paths };
}

export function openapiGroupVersion(path: string) {
  const types = RESOURCE_TYPES.filter((r) => gvPath(r) === path);
  if (!types.length) return undefined;
  const paths: Record<string, unknown> = {};
  for (const r of types) {
    const base = `/${gvPath(r)}${r.namespaced ? "/namespaces/{namespace}" : ""}/${r.plural}/{name}`;
    paths[base] = {
      patch: {
        operationId: `patch${r.kind}`,
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": { group: r.group, version: r.version, kind: r.kind },
        parameters: [{ name: "fieldValidation", in: "query", schema: { type: "string", uniqueItems: true } }],
        responses: { "200": { description: "OK" } },
      },
    };
  }
  return { openapi: "3.0.0", info: { title: "Kubernetes", version: "v1.32.0" }, paths, components: { schemas: {} } };
}
