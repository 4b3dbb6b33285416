// Rules of a plugin file that span fields: unique names, input sources, references between
// steps, cycles, env vars and paths per step, the pod template overlay. They read the raw
// document tolerantly, so they still report when some field has the wrong shape.
import { findCycles } from "./graph.js";
import { MAX_SPEC_BYTES, checkSpecSize, isReservedEnv, stepEnvName, STEP_NAME } from "./names.js";
import { checkOverlay } from "./overlay.js";
import { fieldPath, type Path, type Violations } from "./violations.js";

type Phase = "create" | "delete";

interface StepView {
  phase: Phase;
  path: Path;
  name?: string;
  inputs: InputView[];
  outputs: OutputView[];
}

interface InputView {
  path: Path;
  name?: string;
  sandbox: unknown;
  step: unknown;
  as: unknown;
}

interface OutputView {
  path: Path;
  name?: string;
  file?: string;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const nonEmpty = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

export function checkPluginRules(doc: unknown, out: Violations): void {
  const spec = isObj(doc) && isObj(doc.spec) ? doc.spec : {};
  checkSpecSize(spec, MAX_SPEC_BYTES.plugin, "plugin", out);
  const steps = [...viewSteps(spec, "create"), ...viewSteps(spec, "delete")];
  uniqueStepNames(steps, out);
  for (const step of steps) {
    checkInputs(step, out);
    checkOutputs(step, out);
  }
  checkReferences(steps, allStepsNamed(spec), out);
  for (const phase of ["create", "delete"] as const) checkCycles(steps.filter((s) => s.phase === phase), out);
  const runner = isObj(spec.runner) ? spec.runner : {};
  const overlay = nonEmpty(runner.podTemplateOverlay);
  if (overlay !== undefined) {
    const problems = checkOverlay(overlay, { image: nonEmpty(runner.image), namespace: nonEmpty(runner.namespace) });
    for (const p of problems) out.add(["spec", "runner", "podTemplateOverlay"], p.rule, p.message);
  }
}

/** Whether every step has a readable name: only then is a reference to a missing step an error of its own. */
function allStepsNamed(spec: Obj): boolean {
  return (["create", "delete"] as const).every((phase) =>
    spec[phase] === undefined || (Array.isArray(spec[phase]) && spec[phase].every((s) => isObj(s) && typeof s.name === "string")));
}

function viewSteps(spec: Obj, phase: Phase): StepView[] {
  return list(spec[phase]).flatMap((raw, i) => {
    if (!isObj(raw)) return [];
    const path: Path = ["spec", phase, i];
    return [{
      phase,
      path,
      name: nonEmpty(raw.name),
      inputs: list(raw.inputs).flatMap((input, j) => isObj(input)
        ? [{ path: [...path, "inputs", j], name: nonEmpty(input.name), sandbox: input.valueFromSandbox, step: input.valueFromStep, as: input.as }]
        : []),
      outputs: list(raw.outputs).flatMap((output, j) => isObj(output)
        ? [{ path: [...path, "outputs", j], name: nonEmpty(output.name), file: nonEmpty(output.valueFromPath) }]
        : []),
    }];
  });
}

function uniqueStepNames(steps: StepView[], out: Violations): void {
  const first = new Map<string, StepView>();
  for (const step of steps) {
    if (step.name === undefined) continue;
    const earlier = first.get(step.name);
    if (earlier) {
      out.add([...step.path, "name"], "duplicate-step",
        `step name "${step.name}" is already used at ${fieldPath(earlier.path)} (names are unique across create and delete)`);
    } else first.set(step.name, step);
  }
}

function checkInputs(step: StepView, out: Violations): void {
  const names = new Map<string, Path>();
  const envs = new Map<string, string>();
  const files = new Map<string, string>();
  for (const input of step.inputs) {
    if (input.name !== undefined) {
      const earlier = names.get(input.name);
      if (earlier) out.add([...input.path, "name"], "duplicate-input", `input "${input.name}" is already declared at ${fieldPath(earlier)}`);
      else names.set(input.name, input.path);
    }
    checkSource(input, out);

    const label = input.name ? `input "${input.name}"` : fieldPath(input.path);
    const as = input.as;
    if (as === undefined) {
      if (input.name !== undefined && STEP_NAME.test(input.name)) {
        const env = stepEnvName(input.name);
        if (isReservedEnv(env)) {
          out.add([...input.path, "name"], "reserved-env",
            `input "${input.name}" is given as env var ${env}, which the runner sets; rename the input or set as.env`);
        }
        claim(envs, env, label, [...input.path, "name"], out, `env var ${env}`, "duplicate-env");
      }
      continue;
    }
    if (!isObj(as)) continue;
    const env = nonEmpty(as.env);
    const file = nonEmpty(as.path);
    if (env === undefined && file === undefined) {
      out.add([...input.path, "as"], "as-empty", "as must set env, path or both (or leave out `as` for the default env var)");
    }
    if (env !== undefined) claim(envs, env, label, [...input.path, "as", "env"], out, `env var ${env}`, "duplicate-env");
    if (file !== undefined) claim(files, file, label, [...input.path, "as", "path"], out, `path ${file}`, "duplicate-path");
  }
}

function claim(
  taken: Map<string, string>, key: string, by: string, path: Path, out: Violations, what: string,
  rule: "duplicate-env" | "duplicate-path",
): void {
  const owner = taken.get(key);
  if (owner !== undefined) out.add(path, rule, `${what} is already used by ${owner} of this step`);
  else taken.set(key, by);
}

function checkSource(input: InputView, out: Violations): void {
  // A wrongly typed source is reported by the shape check; count it as present here.
  const fromSandbox = input.sandbox === true || (input.sandbox !== undefined && typeof input.sandbox !== "boolean");
  const fromStep = input.step !== undefined && input.step !== null;
  if (fromSandbox && fromStep) {
    out.add(input.path, "input-source", "set exactly one source: valueFromSandbox: true or valueFromStep, not both");
  } else if (!fromSandbox && !fromStep) {
    out.add(input.path, "input-source", "needs a source: valueFromSandbox: true or valueFromStep {name, output}");
  }
}

function checkOutputs(step: StepView, out: Violations): void {
  const names = new Map<string, Path>();
  const files = new Map<string, string>();
  for (const output of step.outputs) {
    if (output.name !== undefined) {
      const earlier = names.get(output.name);
      if (earlier) out.add([...output.path, "name"], "duplicate-output", `output "${output.name}" is already declared at ${fieldPath(earlier)}`);
      else names.set(output.name, output.path);
    }
    if (output.file !== undefined) {
      claim(files, output.file, output.name ? `output "${output.name}"` : fieldPath(output.path),
        [...output.path, "valueFromPath"], out, `path ${output.file}`, "duplicate-path");
    }
  }
}

/** The step a name refers to from `phase`: the same phase first, then the other. */
function resolve(steps: StepView[], name: string, phase: Phase): StepView | undefined {
  return steps.find((s) => s.name === name && s.phase === phase) ?? steps.find((s) => s.name === name);
}

function checkReferences(steps: StepView[], complete: boolean, out: Violations): void {
  for (const step of steps) {
    for (const input of step.inputs) {
      if (!isObj(input.step)) continue;
      const refPath = [...input.path, "valueFromStep"];
      const target = nonEmpty(input.step.name);
      if (target === undefined) continue;
      const found = resolve(steps, target, step.phase);
      if (!found) {
        if (!complete) continue;
        const known = steps.filter((s) => s.name && (step.phase === "delete" || s.phase === "create")).map((s) => s.name);
        out.add([...refPath, "name"], "unknown-step",
          `no step named "${target}"${known.length ? ` (steps: ${known.join(", ")})` : ""}`);
        continue;
      }
      if (step.phase === "create" && found.phase === "delete") {
        out.add([...refPath, "name"], "create-refers-to-delete",
          `create step "${step.name ?? "?"}" reads from delete step "${target}"; create steps may only read create steps`);
        continue;
      }
      const output = nonEmpty(input.step.output);
      if (output !== undefined && !found.outputs.some((o) => o.name === output)) {
        const declared = found.outputs.flatMap((o) => (o.name ? [o.name] : []));
        out.add([...refPath, "output"], "undeclared-output",
          `step "${target}" declares no output "${output}" (${declared.length ? `outputs: ${declared.join(", ")}` : "it has no outputs"})`);
      }
    }
  }
}

function checkCycles(phase: StepView[], out: Violations): void {
  const byName = new Map<string, number>();
  phase.forEach((s, i) => {
    if (s.name !== undefined && !byName.has(s.name)) byName.set(s.name, i);
  });
  const deps = phase.map((s) => s.inputs.flatMap((input) => {
    const target = isObj(input.step) ? nonEmpty(input.step.name) : undefined;
    const index = target === undefined ? undefined : byName.get(target);
    return index === undefined ? [] : [index];
  }));
  for (const cycle of findCycles(deps)) {
    const [first, second] = cycle as [number, number];
    const step = phase[first] as StepView;
    const secondName = phase[second]?.name;
    const input = step.inputs.find((i) => isObj(i.step) && i.step.name === secondName) as InputView;
    const names = cycle.map((i) => phase[i]?.name ?? "?").join(" -> ");
    out.add([...input.path, "valueFromStep", "name"], "cycle", `steps read each other's outputs in a cycle: ${names} (each reads an output of the next)`);
  }
}
