// The three patch types PATCH accepts: JSON merge patch (RFC 7386), JSON patch (RFC 6902)
// and Kubernetes' strategic merge patch. The strategic one needs each list's merge key,
// which the real server takes from the Go types; here the keys of the lists that matter
// (containers, env, volumes, ports, …) are listed by field name, any other list is
// replaced whole, and the directives kubectl sends (`$patch`, `$setElementOrder/…`,
// `$deleteFromPrimitiveList/…`, `$retainKeys`) are honoured or dropped.
import { badRequest, ApiError } from "./status.js";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonMap = { [key: string]: Json };
const isMap = (v: Json | undefined): v is JsonMap => typeof v === "object" && v !== null && !Array.isArray(v);

export function mergePatch(target: Json | undefined, patch: Json): Json {
  if (!isMap(patch)) return patch;
  const out: JsonMap = isMap(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

type Op = { op: string; path: string; value?: Json; from?: string };

const pointer = (path: string) => (path === "" ? [] : path.slice(1).split("/").map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~")));

export function jsonPatch(doc: Json, ops: Json): Json {
  if (!Array.isArray(ops)) throw badRequest("a JSON patch is a list of operations");
  let out = structuredClone(doc);
  for (const raw of ops as Op[]) {
    const parts = pointer(raw.path);
    switch (raw.op) {
      case "add": out = put(out, parts, structuredClone(raw.value!), true); break;
      case "replace": get(out, parts); out = put(out, parts, structuredClone(raw.value!), false); break;
      case "remove": out = remove(out, parts); break;
      case "copy": out = put(out, parts, structuredClone(get(out, pointer(raw.from!))), true); break;
      case "move": { const v = get(out, pointer(raw.from!)); out = put(remove(out, pointer(raw.from!)), parts, v, true); break; }
      case "test":
        if (JSON.stringify(get(out, parts)) !== JSON.stringify(raw.value)) throw new ApiError(422, "Invalid", `the test operation at ${raw.path} failed`);
        break;
      default: throw badRequest(`unknown JSON patch operation ${raw.op}`);
    }
  }
  return out;
}

function get(doc: Json, parts: string[]): Json {
  let cur: Json | undefined = doc;
  for (const p of parts) {
    if (Array.isArray(cur)) cur = cur[Number(p)];
    else if (isMap(cur)) cur = cur[p];
    else cur = undefined;
    if (cur === undefined) throw new ApiError(422, "Invalid", `the path /${parts.join("/")} does not exist`);
  }
  return cur;
}

function parentOf(doc: Json, parts: string[]): Json {
  return get(doc, parts.slice(0, -1));
}

function put(doc: Json, parts: string[], value: Json, insert: boolean): Json {
  if (!parts.length) return value;
  const parent = parentOf(doc, parts);
  const last = parts[parts.length - 1]!;
  if (Array.isArray(parent)) {
    const i = last === "-" ? parent.length : Number(last);
    if (insert) parent.splice(i, 0, value); else parent[i] = value;
  } else if (isMap(parent)) parent[last] = value;
  else throw new ApiError(422, "Invalid", `cannot add at /${parts.join("/")}`);
  return doc;
}

function remove(doc: Json, parts: string[]): Json {
  get(doc, parts);
  const parent = parentOf(doc, parts);
  const last = parts[parts.length - 1]!;
  if (Array.isArray(parent)) parent.splice(Number(last), 1);
  else if (isMap(parent)) delete parent[last];
  return doc;
}

/** Merge keys of lists by field name; `ports` picks containerPort or port by what the items carry. */
const MERGE_KEYS: Record<string, string> = {
  containers: "name", initContainers: "name", ephemeralContainers: "name", volumes: "name", env: "name",
  imagePullSecrets: "name", volumeMounts: "mountPath", volumeDevices: "devicePath", hostAliases: "ip",
  conditions: "type", ownerReferences: "uid", subjects: "name", topologySpreadConstraints: "topologyKey",
  // A Mutating- or ValidatingWebhookConfiguration's webhooks.
  webhooks: "name",
};
/** Lists of scalars Kubernetes merges instead of replacing. */
const MERGED_SCALAR_LISTS = new Set(["finalizers"]);

function mergeKey(field: string, items: Json[]): string | undefined {
  if (field === "ports") return items.some((i) => isMap(i) && "containerPort" in i) ? "containerPort" : "port";
  return MERGE_KEYS[field];
}

export function strategicMergePatch(target: Json | undefined, patch: Json): Json {
  if (!isMap(patch)) return patch;
  if (patch["$patch"] === "replace") return strip(patch);
  if (patch["$patch"] === "delete") return null;
  const out: JsonMap = isMap(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k === "$patch" || k === "$retainKeys" || k.startsWith("$setElementOrder/")) continue;
    if (k.startsWith("$deleteFromPrimitiveList/")) {
      const f = k.slice("$deleteFromPrimitiveList/".length);
      const cur = out[f];
      if (Array.isArray(cur) && Array.isArray(v)) out[f] = cur.filter((x) => !v.includes(x));
      continue;
    }
    if (v === null) { delete out[k]; continue; }
    if (Array.isArray(v)) { out[k] = mergeList(k, out[k], v); continue; }
    const merged = strategicMergePatch(out[k], v);
    if (merged === null) delete out[k]; else out[k] = merged;
  }
  const retain = patch["$retainKeys"];
  if (Array.isArray(retain)) for (const k of Object.keys(out)) if (!retain.includes(k) && !(k in patch)) delete out[k];
  return out;
}

function mergeList(field: string, base: Json | undefined, patch: Json[]): Json {
  if (patch.length === 1 && isMap(patch[0]) && patch[0]["$patch"] === "replace") return [];
  const key = mergeKey(field, patch);
  if (!Array.isArray(base)) return patch.filter((i) => !(isMap(i) && i["$patch"])).map(strip);
  if (MERGED_SCALAR_LISTS.has(field)) return [...new Set([...base, ...patch])] as Json[];
  if (!key || !patch.every((i) => isMap(i))) return patch.map(strip);
  const out = [...base];
  for (const item of patch as JsonMap[]) {
    const at = out.findIndex((b) => isMap(b) && b[key] === item[key]);
    if (item["$patch"] === "delete") { if (at >= 0) out.splice(at, 1); continue; }
    if (at >= 0) out[at] = strategicMergePatch(out[at], item);
    else out.push(strip(item));
  }
  return out;
}

/** A value added whole: its directives and nulls mean nothing where nothing is merged. */
function strip(v: Json): Json {
  if (Array.isArray(v)) return v.map(strip);
  if (!isMap(v)) return v;
  const out: JsonMap = {};
  for (const [k, x] of Object.entries(v)) if (!k.startsWith("$") && x !== null) out[k] = strip(x);
  return out;
}

export function applyPatch(contentType: string, target: Json, patch: Json): Json {
  const type = contentType.split(";")[0]!.trim();
  switch (type) {
    case "application/merge-patch+json": return mergePatch(target, patch);
    case "application/json-patch+json": return jsonPatch(target, patch);
    case "application/strategic-merge-patch+json": return strategicMergePatch(target, patch);
    default: throw new ApiError(415, "UnsupportedMediaType", `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json`);
  }
}
