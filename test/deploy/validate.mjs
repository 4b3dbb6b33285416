// Validates Kubernetes objects (a multi-document YAML file, or - for stdin) against the
// Kubernetes OpenAPI schemas as kubernetes-models ships them, and Istio's (`*.istio.io`)
// as @kubernetes-models/istio ships them (its package.json names the Istio release its
// CRDs are read from); prints one JSON line per object: {kind, name, ok, error?}.
// ESM-only packages, so a script of its own.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const text = readFileSync(process.argv[2] === "-" || !process.argv[2] ? 0 : process.argv[2], "utf8");
for (const o of parseAllDocuments(text).map((d) => d.toJSON()).filter(Boolean)) {
  const [group, version] = o.apiVersion.includes("/") ? o.apiVersion.split("/") : ["", o.apiVersion];
  const line = { kind: o.kind, apiVersion: o.apiVersion, name: o.metadata?.name };
  let Model;
  try {
    const mod = await import(group.endsWith(".istio.io")
      ? `@kubernetes-models/istio/${group}/${version}/${o.kind}`
      : `kubernetes-models/${group ? `${group}/` : ""}${version}/${o.kind}`);
    Model = mod[o.kind] ?? mod.default;
  } catch (err) {
    console.log(JSON.stringify({ ...line, ok: false, error: `no schema for ${o.apiVersion} ${o.kind}: ${err.message}` }));
    continue;
  }
  try {
    new Model(o).validate();
    console.log(JSON.stringify({ ...line, ok: true }));
  } catch (err) {
    console.log(JSON.stringify({ ...line, ok: false, error: String(err.message ?? err).slice(0, 2000) }));
  }
}
