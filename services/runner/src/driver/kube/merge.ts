// Strategic merge of a pod template overlay (a plugin's `runner.podTemplateOverlay`) onto
// the pod the Kubernetes driver builds, as Kubernetes merges a strategic-merge patch into
// a PodTemplateSpec: maps are merged key by key; lists with a merge key (containers,
// initContainers, volumes, imagePullSecrets by name; env by name; ports by containerPort;
// volumeMounts by mountPath; volumeDevices by devicePath; hostAliases by ip) are merged
// item by item, a new item appended; every other list (args, command, envFrom,
// tolerations, lists of scalars) is replaced whole. `null` removes a key. Two directives:
// `$patch: replace` on a map replaces it, `$patch: delete` on a list item removes the item
// with its key. No package on npm implements this for plain objects, so it is kept small
// and table-tested (merge.unit.spec.ts).

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonMap = { [key: string]: Json };

const CONTAINER_LISTS: Record<string, string> = {
  env: "name", ports: "containerPort", volumeMounts: "mountPath", volumeDevices: "devicePath",
};
const POD_SPEC_LISTS: Record<string, string> = {
  containers: "name", initContainers: "name", ephemeralContainers: "name", volumes: "name",
  imagePullSecrets: "name", hostAliases: "ip",
};

/** The merge key of the list at `path` (keys from the template's root), if it has one. */
function mergeKeyAt(path: string[]): string | undefined {
  const [a, b, c, d] = path;
  if (path.length === 2 && a === "spec") return POD_SPEC_LISTS[b!];
  if (path.length === 4 && a === "spec" && (b === "containers" || b === "initContainers" || b === "ephemeralContainers") && c === "[]") {
    return CONTAINER_LISTS[d!];
  }
  return undefined;
}

const isMap = (v: Json | undefined): v is JsonMap => typeof v === "object" && v !== null && !Array.isArray(v);

/** Pure: `overlay` strategically merged onto `base` (neither is changed). */
export function strategicMerge(base: Json | undefined, overlay: Json, path: string[] = []): Json {
  if (isMap(overlay)) {
    if (overlay["$patch"] === "replace") {
      const { $patch: _, ...rest } = overlay;
      return strip(rest);
    }
    const out: JsonMap = isMap(base) ? { ...base } : {};
    for (const [key, value] of Object.entries(overlay)) {
      if (key === "$patch") continue;
      if (value === null) delete out[key];
      else out[key] = strategicMerge(out[key], value, [...path, key]);
    }
    return out;
  }
  if (Array.isArray(overlay)) {
    const key = mergeKeyAt(path);
    if (!key || !Array.isArray(base)) return overlay.filter((i) => !(isMap(i) && i["$patch"] === "delete")).map(strip);
    const out: Json[] = [...base];
    for (const item of overlay) {
      if (!isMap(item) || item[key] === undefined) { out.push(strip(item)); continue; }
      const at = out.findIndex((b) => isMap(b) && b[key] === item[key]);
      if (item["$patch"] === "delete") { if (at >= 0) out.splice(at, 1); continue; }
      if (at >= 0) out[at] = strategicMerge(out[at], item, [...path, "[]"]);
      else out.push(strip(item));
    }
    return out;
  }
  return overlay;
}

/** A value added whole: its `null`s and directives mean nothing where nothing is merged. */
function strip(v: Json): Json {
  if (Array.isArray(v)) return v.map(strip);
  if (!isMap(v)) return v;
  const out: JsonMap = {};
  for (const [k, x] of Object.entries(v)) if (k !== "$patch" && x !== null) out[k] = strip(x);
  return out;
}
