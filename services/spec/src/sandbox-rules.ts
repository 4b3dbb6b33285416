// Rules of a sandbox file that span fields, read tolerantly from the raw document; and
// the rules that need the plugins its resources resolve to.
import type { FieldViolation } from "@ephemera/kit";
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
  checkBaselines(spec, out);
  list(spec.forks).forEach((fork, i) => {
    const customizations = isObj(fork) && isObj(fork.customizations) ? fork.customizations : {};
    checkImages(list(customizations.images), ["spec", "forks", i, "customizations", "images"], out);
    checkEnv(list(customizations.env), ["spec", "forks", i, "customizations", "env"], resources, out);
  });
}

/** Reports repeated `name`s in a list; returns the names seen. */
function unique(items: unknown[], at: Path, rule: "duplicate-resource" | "duplicate-local" | "duplicate-endpoint", what: string, out: Violations): Set<string> {
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

function checkEnv(env: unknown[], at: Path, resources: Set<string>, out: Violations): void {
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
    const resource = isObj(e.valueFrom) && isObj(e.valueFrom.resource) ? e.valueFrom.resource : undefined;
    const resourceName = nonEmpty(resource?.name);
    if (resourceName !== undefined && !resources.has(resourceName)) {
      out.add([...path, "valueFrom", "resource", "name"], "unknown-resource",
        `"${resourceName}" is not a resource of this sandbox${resources.size ? ` (resources: ${[...resources].join(", ")})` : ""}`);
    }
  });
}

/** `valueFrom.resource.outputKey` must name a create step and an output the resolved plugin declares. */
export function checkSandboxAgainstPlugins(
  sandbox: pb.Sandbox,
  pluginOf: (resourceName: string) => pb.ResourcePluginSpec | undefined,
): FieldViolation[] {
  const out = new Violations();
  sandbox.spec?.forks.forEach((fork, i) => {
    fork.customizations?.env.forEach((env, j) => {
      const ref = env.valueFrom?.resource;
      if (!ref || !isOutputKey(ref.outputKey)) return;
      const plugin = pluginOf(ref.name);
      if (!plugin) return;
      const path = ["spec", "forks", i, "customizations", "env", j, "valueFrom", "resource", "outputKey"];
      const [stepName, outputName] = ref.outputKey.split(".") as [string, string];
      const step = plugin.create.find((s) => s.name === stepName);
      if (!step) {
        const where = plugin.delete.some((s) => s.name === stepName) ? " (it is a delete step; outputs come from create steps)" : "";
        const steps = plugin.create.map((s) => s.name);
        out.add(path, "unknown-step",
          `resource "${ref.name}" has no create step "${stepName}"${where}${!where && steps.length ? ` (create steps: ${steps.join(", ")})` : ""}`);
        return;
      }
      if (!step.outputs.some((o) => o.name === outputName)) {
        const outputs = step.outputs.map((o) => o.name);
        out.add(path, "undeclared-output",
          `step "${stepName}" of resource "${ref.name}" declares no output "${outputName}"${outputs.length ? ` (outputs: ${outputs.join(", ")})` : ""}`);
      }
    });
  });
  return out.list;
}
