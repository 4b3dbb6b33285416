// A pod's volumes as host directories under the data dir: an emptyDir is an empty
// directory shared by the pod's containers; secret and configMap volumes are written out
// as one file per key (or per listed item); hostPath is the host path itself.
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { ConfigError, type Lookup } from "./env.js";

type Rec = Record<string, unknown>;

/** Writes the pod's volumes under `dir`; answers each volume's host path by name. */
export function prepareVolumes(spec: Rec, dir: string, lookup: Lookup): Map<string, string> {
  const out = new Map<string, string>();
  for (const v of (spec["volumes"] ?? []) as Rec[]) {
    const name = String(v["name"]);
    if (v["hostPath"]) { out.set(name, String((v["hostPath"] as Rec)["path"])); continue; }
    const path = join(dir, name);
    mkdirSync(path, { recursive: true });
    // emptyDir is world-writable in Kubernetes, so a container running as another user can write it.
    chmodSync(path, 0o777);
    const src = (v["secret"] ?? v["configMap"]) as Rec | undefined;
    if (src) {
      const isSecret = !!v["secret"];
      const ref = String(src[isSecret ? "secretName" : "name"]);
      const raw = isSecret ? lookup.secret(ref) : lookup.configMap(ref);
      if (!raw) {
        if (!src["optional"]) throw new ConfigError(`${isSecret ? "secret" : "configmap"} "${ref}" not found`);
      } else {
        const data = isSecret ? Object.fromEntries(Object.entries(raw).map(([k, b]) => [k, Buffer.from(b, "base64")])) : Object.fromEntries(Object.entries(raw).map(([k, s]) => [k, Buffer.from(s)]));
        const items = (src["items"] as Rec[] | undefined) ?? Object.keys(data).map((key) => ({ key, path: key }));
        for (const item of items) {
          const value = data[String(item["key"])];
          if (value === undefined) { if (!src["optional"]) throw new ConfigError(`couldn't find key ${String(item["key"])} in ${isSecret ? "Secret" : "ConfigMap"} ${ref}`); continue; }
          const file = join(path, String(item["path"]));
          mkdirSync(dirname(file), { recursive: true });
          writeFileSync(file, value, { mode: 0o644 });
        }
      }
    }
    out.set(name, path);
  }
  return out;
}
