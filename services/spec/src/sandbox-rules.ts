// Rules of a sandbox file that span fields, read tolerantly from the raw document; and
// the rules that need the plugins its resources resolve to.
import type { FieldViolation } from "@ephemera/kit/errors";
import type * as pb from "@ephemera/proto";
import { isOutputKey } from "./model.js";
import { MAX_SPEC_BYTES, checkSpecSize } from "./names.js";
import { fieldPath, type Path, Violations } from "./violations.js";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const nonEmpty = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

export function checkSandboxRules(doc: unknown, out: Violations): void {
  const spec = isObj(doc) && isObj(doc.spec) ? doc.spec : {};
  checkSpecSize(spec, MAX_SPEC_BYTES.sandbox, "sandbox", out);
  const resources = unique(list(spec.resources), ["spec", "resources"], "duplicate-resource", "resource", out);
  unique(list(spec.local), ["spec", "local"], "duplicate-local", "local workload", out);
  const routeGroup = isObj(spec.defaultRouteGroup) ? spec.defaultRouteGroup : {};
  unique(list(routeGroup.endpoints), ["spec", "defaultRouteGroup", "endpoints"], "duplicate-endpoint", "endpoint", out);
  unique(list(spec.forks), ["spec", "forks"], "duplicate-fork", "fork", out);
  unique(list(spec.virtual), ["spec", "virtual"], "duplicate-virtual", "virtual workload", out);
  uniqueWorkloads(spec, out);
  checkBaselines(spec, out);
  const refs: Refs = { resources, forks: new Set(list(spec.forks).flatMap((f) => (isObj(f) ? workloadKey(f.forkOf) ?? [] : []))) };
  list(spec.forks).forEach((fork, i) => {
    const customizations = isObj(fork) && isObj(fork.customizations) ? fork.customizations : {};
    checkImages(list(customizations.images), ["spec", "forks", i, "customizations", "images"], out);
    checkEnv(list(customizations.env), ["spec", "forks", i, "customizations", "env"], refs, out);
  });
  list(spec.local).forEach((local, i) => {
    if (!isObj(local)) return;
    checkEnv(list(local.env), ["spec", "local", i, "env"], refs, out);
    list(local.files).forEach((file, j) => {
      if (isObj(file)) checkValueFrom(file.valueFrom, ["spec", "local", i, "files", j, "valueFrom"], refs, out);
    });
  });
}

/** What a `valueFrom` may refer to: the sandbox's resources and the baselines of its forks. */
interface Refs { resources: Set<string>; forks: Set<string> }

function workloadKey(ref: unknown): string | undefined {
  if (!isObj(ref)) return undefined;
  const [kind, namespace, name] = [nonEmpty(ref.kind), nonEmpty(ref.namespace), nonEmpty(ref.name)];
  return kind === undefined || namespace === undefined || name === undefined ? undefined : `${kind} ${namespace}/${name}`;
}

const VALUE_SOURCES = ["resource", "secret", "configMap", "fork"] as const;

/** Exactly one source, and the resource or fork it names belongs to this sandbox. */
function checkValueFrom(valueFrom: unknown, path: Path, refs: Refs, out: Violations): void {
  if (!isObj(valueFrom)) return;
  const given = VALUE_SOURCES.filter((k) => valueFrom[k] !== undefined && valueFrom[k] !== null);
  if (given.length !== 1) {
    out.add(path, "value-source", given.length === 0
      ? `valueFrom needs one of ${VALUE_SOURCES.join(", ")}`
      : `valueFrom has ${given.join(" and ")}: give exactly one source`);
  }
  const resourceName = isObj(valueFrom.resource) ? nonEmpty(valueFrom.resource.name) : undefined;
  if (resourceName !== undefined && !refs.resources.has(resourceName)) {
    out.add([...path, "resource", "name"], "unknown-resource",
      `"${resourceName}" is not a resource of this sandbox${refs.resources.size ? ` (resources: ${[...refs.resources].join(", ")})` : ""}`);
  }
  const fork = isObj(valueFrom.fork) ? workloadKey(valueFrom.fork.forkOf) : undefined;
  if (fork !== undefined && !refs.forks.has(fork)) {
    out.add([...path, "fork", "forkOf"], "unknown-fork",
      `${fork} is not forked by this sandbox${refs.forks.size ? ` (forks: ${[...refs.forks].join(", ")})` : " (it has no forks)"}`);
  }
}

/** Reports repeated `name`s in a list; returns the names seen. */
function unique(items: unknown[], at: Path, rule: "duplicate-resource" | "duplicate-local" | "duplicate-endpoint" | "duplicate-fork" | "duplicate-virtual", what: string, out: Violations): Set<string> {
  const first = new Map<string, number>();
  items.forEach((item, i) => {
    const name = isObj(item) ? nonEmpty(item.name) : undefined;
    if (name === undefined) return;
    const earlier = first.get(name);
    if (earlier !== undefined) out.add([...at, i, "name"], rule, `${what} name "${name}" is already used at ${fieldPath([...at, earlier])}`);
    else first.set(name, i);
  });
  return new Set(first.keys());
}

/** Workload names are unique across the spec (forks, local and virtual workloads together), as upstream requires. */
function uniqueWorkloads(spec: Obj, out: Violations): void {
  const first = new Map<string, Path>();
  for (const kind of ["forks", "local", "virtual"] as const) {
    list(spec[kind]).forEach((item, i) => {
      const name = isObj(item) ? nonEmpty(item.name) : undefined;
      if (name === undefined) return;
      const earlier = first.get(name);
      // Repeats within one list are that list's own rule (duplicate-fork, -local, -virtual).
      if (earlier && earlier[1] !== kind) {
        out.add(["spec", kind, i, "name"], "duplicate-workload", `workload name "${name}" is already used at ${fieldPath(earlier)}: workload names are unique across forks, local and virtual`);
      } else if (!earlier) first.set(name, ["spec", kind, i]);
    });
  }
}

function checkBaselines(spec: Obj, out: Violations): void {
  const seen = new Map<string, Path>();
  const visit = (ref: unknown, path: Path) => {
    if (!isObj(ref)) return;
    const [kind, namespace, name] = [nonEmpty(ref.kind), nonEmpty(ref.namespace), nonEmpty(ref.name)];
    if (kind === undefined || namespace === undefined || name === undefined) return;
    const key = `${kind}/${namespace}/${name}`;
    const earlier = seen.get(key);
    if (earlier) {
      out.add(path, "duplicate-baseline",
        `baseline ${kind} ${namespace}/${name} is already used at ${fieldPath(earlier)} (each baseline at most once across forks and local)`);
    } else seen.set(key, path);
  };
  list(spec.forks).forEach((f, i) => visit(isObj(f) ? f.forkOf : undefined, ["spec", "forks", i, "forkOf"]));
  list(spec.local).forEach((l, i) => visit(isObj(l) ? l.from : undefined, ["spec", "local", i, "from"]));
}

function checkImages(images: unknown[], at: Path, out: Violations): void {
  const first = new Map<string, number>();
  images.forEach((image, i) => {
    if (!isObj(image)) return;
    const container = nonEmpty(image.container) ?? "";
    const earlier = first.get(container);
    if (earlier !== undefined) {
      out.add([...at, i], "duplicate-container",
        `${container ? `container "${container}"` : "the main container"} already gets an image at ${fieldPath([...at, earlier])}`);
    } else first.set(container, i);
  });
}

function checkEnv(env: unknown[], at: Path, refs: Refs, out: Violations): void {
  const first = new Map<string, number>();
  env.forEach((e, i) => {
    if (!isObj(e)) return;
    const path = [...at, i];
    const name = nonEmpty(e.name);
    if (name !== undefined) {
      const key = `${nonEmpty(e.container) ?? ""}\u0000${name}`;
      const earlier = first.get(key);
      if (earlier !== undefined) out.add([...path, "name"], "duplicate-env", `env var ${name} is already customised at ${fieldPath([...at, earlier])}`);
      else first.set(key, i);
    }
    const hasValue = e.value !== undefined && e.value !== "";
    const hasValueFrom = e.valueFrom !== undefined && e.valueFrom !== null;
    if (hasValue && hasValueFrom) out.add(path, "env-value-conflict", "set value or valueFrom, not both");
    if (e.operation === "delete" && (hasValue || hasValueFrom)) {
      out.add([...path, "operation"], "env-operation", "operation delete removes the variable: leave out value and valueFrom");
    }
    checkValueFrom(e.valueFrom, [...path, "valueFrom"], refs, out);
  });
}

/** `valueFrom.resource.outputKey` must name a create step and an output the resolved plugin declares. */
export function checkSandboxAgainstPlugins(
  sandbox: pb.Sandbox,
  pluginOf: (resourceName: string) => pb.ResourcePluginSpec | undefined,
): FieldViolation[] {
  const out = new Violations();
  const refs: { ref: pb.ResourceOutputRef | undefined; path: Path }[] = [];
  sandbox.spec?.forks.forEach((fork, i) => fork.customizations?.env.forEach((env, j) =>
    refs.push({ ref: env.valueFrom?.resource, path: ["spec", "forks", i, "customizations", "env", j, "valueFrom"] })));
  sandbox.spec?.local.forEach((local, i) => {
    local.env.forEach((env, j) => refs.push({ ref: env.valueFrom?.resource, path: ["spec", "local", i, "env", j, "valueFrom"] }));
    local.files.forEach((file, j) => refs.push({ ref: file.valueFrom?.resource, path: ["spec", "local", i, "files", j, "valueFrom"] }));
  });
  for (const { ref, path: at } of refs) {
    if (!ref || !isOutputKey(ref.outputKey)) continue;
    const plugin = pluginOf(ref.name);
    if (!plugin) continue;
    const path = [...at, "resource", "outputKey"];
    const [stepName, outputName] = ref.outputKey.split(".") as [string, string];
    const step = plugin.create.find((s) => s.name === stepName);
    if (!step) {
      const where = plugin.delete.some((s) => s.name === stepName) ? " (it is a delete step; outputs come from create steps)" : "";
      const steps = plugin.create.map((s) => s.name);
      out.add(path, "unknown-step",
        `resource "${ref.name}" has no create step "${stepName}"${where}${!where && steps.length ? ` (create steps: ${steps.join(", ")})` : ""}`);
      continue;
    }
    if (!step.outputs.some((o) => o.name === outputName)) {
      const outputs = step.outputs.map((o) => o.name);
      out.add(path, "undeclared-output",
        `step "${stepName}" of resource "${ref.name}" declares no output "${outputName}"${outputs.length ? ` (outputs: ${outputs.join(", ")})` : ""}`);
    }
  }
  return out.list;
}
