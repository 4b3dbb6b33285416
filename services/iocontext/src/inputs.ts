// Pure input resolution: where each input of a step takes its value from, and how it is
// handed to the script (env var, file, or both).
import type * as pb from "@ephemera/proto";
import type { Phase } from "@ephemera/events";
import { inputEnvName, sandboxParam } from "@ephemera/kit";
import { outputDigest, succeededRun, type WorkflowView } from "./state.js";

export type InputSource =
  /** A sandbox param; undefined when the sandbox does not set it (optional params are common). */
  | { kind: "param"; value: string | undefined }
  /**
   * An output of a step's successful run. `required`: the producer is in the same
   * workflow, so the scheduler only dispatched this step after it succeeded. A create
   * step read by a delete step may never have run: its output is then simply absent.
   */
  | { kind: "step"; step: string; output: string; runId: string | undefined; required: boolean; sha256?: string };

export interface PlannedInput {
  name: string;
  env: string;
  path: string;
  source: InputSource;
}

export interface InputContext {
  phase: Phase;
  spec: pb.ResourcePluginSpec;
  workflow: WorkflowView;
  /** For a delete workflow: the create workflow whose outputs its steps may read. */
  createWorkflow?: WorkflowView;
}

export function findStep(spec: pb.ResourcePluginSpec, phase: Phase, name: string): pb.Step | undefined {
  return spec[phase].find((s) => s.name === name);
}

export function planInputs(step: pb.Step, ctx: InputContext): PlannedInput[] {
  return step.inputs.map((input) => ({
    name: input.name,
    env: inputEnvName(input),
    path: input.as?.path ?? "",
    source: sourceOf(input, ctx),
  }));
}

function sourceOf(input: pb.StepInput, ctx: InputContext): InputSource {
  const ref = input.valueFromStep;
  if (!ref) return { kind: "param", value: input.valueFromSandbox ? sandboxParam(ctx.workflow.started?.params, input.name) : undefined };
  if (findStep(ctx.spec, ctx.phase, ref.name)) {
    return stepSource(ref, ctx.workflow, true);
  }
  // Only a delete step may look across phases (validation rejects the other direction).
  return stepSource(ref, ctx.createWorkflow, ctx.phase !== "delete");
}

function stepSource(ref: pb.StepRef, workflow: WorkflowView | undefined, required: boolean): InputSource {
  const sha256 = outputDigest(workflow, ref.name, ref.output);
  return { kind: "step", step: ref.name, output: ref.output, runId: succeededRun(workflow, ref.name), required, ...(sha256 ? { sha256 } : {}) };
}

/** Step sources whose producing run is not known yet: worth re-reading the workflows for. */
export const unresolved = (planned: PlannedInput[]) => planned.some((p) => p.source.kind === "step" && !p.source.runId);
