import * as pb from "@ephemera/proto";
import { inputEnvName } from "@ephemera/kit";
import { planInputs, unresolved, type InputContext } from "./inputs.js";
import type { WorkflowView } from "./state.js";

const step = (name: string, inputs: Array<Partial<pb.StepInput>>): pb.Step =>
  pb.Step.fromPartial({ name, inputs: inputs as pb.StepInput[], script: "#!/bin/sh\n" });

const spec = pb.ResourcePluginSpec.fromPartial({
  create: [step("provision", []), step("seed", [])],
  delete: [step("deprovision", [])],
});

const workflow = (params: Record<string, string>, succeeded: Record<string, string> = {}): WorkflowView => ({
  started: pb.WorkflowStarted.fromPartial({ params }),
  steps: Object.entries(succeeded).map(([name, runId]) => ({ name, current: runId, succeeded: runId })),
});

const create = (w: WorkflowView): InputContext => ({ phase: "create", spec, workflow: w });

describe("input resolution", () => {
  it("names the env var after the input when it has no `as`: upper-cased, '-' → '_'", () => {
    const [p] = planInputs(step("s", [{ name: "db-name", valueFromSandbox: true }]), create(workflow({ "db-name": "orders" })));
    expect(p).toEqual({ name: "db-name", env: "DB_NAME", path: "", source: { kind: "param", value: "orders" } });
  });

  it("uses as.env, as.path, or both", () => {
    const planned = planInputs(
      step("s", [
        { name: "region", valueFromSandbox: true, as: { env: "AWS_REGION", path: "" } },
        { name: "config", valueFromSandbox: true, as: { env: "", path: "/etc/app/config" } },
        { name: "token", valueFromSandbox: true, as: { env: "TOKEN", path: "token.txt" } },
      ]),
      create(workflow({ region: "eu-west-1", config: "a=1", token: "s3cret" })),
    );
    expect(planned.map(({ env, path }) => ({ env, path }))).toEqual([
      { env: "AWS_REGION", path: "" },
      { env: "", path: "/etc/app/config" },
      { env: "TOKEN", path: "token.txt" },
    ]);
  });

  it("treats an empty `as` like no `as` (otherwise the input could not reach the script)", () => {
    expect(inputEnvName(pb.StepInput.fromPartial({ name: "x-y", as: { env: "", path: "" } }))).toBe("X_Y");
  });

  it("leaves an unset sandbox param absent instead of failing", () => {
    const [p] = planInputs(step("s", [{ name: "tags", valueFromSandbox: true }]), create(workflow({})));
    expect(p?.source).toEqual({ kind: "param", value: undefined });
    // A param named like an Object method is a param like any other: unset, absent; set, its value.
    const [method] = planInputs(step("s", [{ name: "constructor", valueFromSandbox: true }]), create(workflow({})));
    expect(method?.source).toEqual({ kind: "param", value: undefined });
    const [set] = planInputs(step("s", [{ name: "toString", valueFromSandbox: true }]), create(workflow({ toString: "x" })));
    expect(set?.source).toEqual({ kind: "param", value: "x" });
  });

  it("takes a step output from the run that succeeded in the same workflow, and requires it", () => {
    const ref = { name: "provision", output: "host" };
    const [p] = planInputs(step("seed", [{ name: "host", valueFromStep: ref }]), create(workflow({}, { provision: "rk.db.create.provision.1" })));
    expect(p?.source).toEqual({ kind: "step", step: "provision", output: "host", runId: "rk.db.create.provision.1", required: true });
  });

  it("lets a delete step read a create output, absent when the create step never succeeded", () => {
    const s = step("deprovision", [
      { name: "host", valueFromStep: { name: "provision", output: "host" } },
      { name: "marker", valueFromStep: { name: "seed", output: "marker" } },
    ]);
    const ctx: InputContext = {
      phase: "delete", spec, workflow: workflow({}), createWorkflow: workflow({}, { provision: "rk.db.create.provision.2" }),
    };
    const planned = planInputs(s, ctx);
    expect(planned.map((p) => p.source)).toEqual([
      { kind: "step", step: "provision", output: "host", runId: "rk.db.create.provision.2", required: false },
      { kind: "step", step: "seed", output: "marker", runId: undefined, required: false },
    ]);
    expect(unresolved(planned)).toBe(true);
  });
});
