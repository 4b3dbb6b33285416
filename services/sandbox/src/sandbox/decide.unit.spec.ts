import * as pb from "@ephemera/proto";
import { evolveSandbox, initialSandbox, type DomainEvent } from "@ephemera/events";
import { ConflictError, NotFoundError } from "@ephemera/kit";
import { decideSandbox, type SandboxCommand } from "./decide.js";
import { sandboxStatus } from "./status.js";

const given = (events: DomainEvent[]) => events.reduce((s, e) => evolveSandbox(s, e, "2026-01-01T00:00:00Z"), initialSandbox());
const types = (events: DomainEvent[]) => events.map((e) => e.type.replace(/^ephemera\.sandbox\.|\.v1$/g, ""));

const sandbox = pb.Sandbox.fromPartial({ name: "feature-x", spec: { cluster: "local", resources: [{ name: "db", plugin: "hello-db" }, { name: "q", plugin: "queue" }] } });
const resources: pb.ResolvedResource[] = [
  { name: "db", plugin: "hello-db", version: "1.0.0", params: { dbname: "orders" } },
  { name: "q", plugin: "queue", version: "0.0.0", params: {} },
];
const create = (same = false): SandboxCommand => ({ kind: "create", sandbox, resources, routingKey: "rk1", endpoints: [], sameSpec: () => same });
const created = decideSandbox(create(), given([]));
const ended = (resource: string, phase: "create" | "delete", outcome: "succeeded" | "failed"): SandboxCommand => ({
  kind: "workflow-ended", resource, phase, workflowId: `rk1.${resource}.${phase}`, outcome, outputs: [{ key: "provision.host", size: 4 }],
  failure: outcome === "failed" ? pb.StepFailure.fromPartial({ step: "seed", exitCode: 3, reason: "Error" }) : undefined,
});
const apply = (events: DomainEvent[], cmd: SandboxCommand) => [...events, ...decideSandbox(cmd, given(events))];

describe("sandbox decider", () => {
  it("creation records the sandbox and requests every resource with its resolved version", () => {
    expect(types(created)).toEqual(["created", "resource_provision_requested", "resource_provision_requested"]);
    expect(created[1]!.data).toMatchObject({ sandbox: "feature-x", routingKey: "rk1", cluster: "local", resource: resources[0] });
  });

  it("re-applying the same spec is a no-op; a different spec is refused while updates are not supported", () => {
    expect(decideSandbox(create(true), given(created))).toEqual([]);
    expect(() => decideSandbox(create(false), given(created))).toThrow(ConflictError);
  });

  it("is ready once every resource is provisioned", () => {
    const one = apply(created, ended("db", "create", "succeeded"));
    expect(types(one.slice(created.length))).toEqual(["resource_provisioned"]);
    expect(sandboxStatus(given(one)).reason).toBe("Creating");
    const both = apply(one, ended("q", "create", "succeeded"));
    expect(types(both.slice(one.length))).toEqual(["resource_provisioned", "ready"]);
    expect(sandboxStatus(given(both))).toEqual({ ready: true, reason: "Ready", message: "all resources are ready" });
  });

  it("a failed create workflow fails the sandbox with the step's reason", () => {
    const failed = apply(created, ended("db", "create", "failed"));
    expect(sandboxStatus(given(failed))).toEqual({ ready: false, reason: "ResourceFailed", message: "resource db: step seed exited 3 (Error)" });
  });

  it("deleting requests deprovisioning of every resource, even failed ones, and ends when all are deprovisioned", () => {
    const failed = apply(created, ended("db", "create", "failed"));
    const deleting = apply(failed, { kind: "delete", force: false });
    expect(types(deleting.slice(failed.length))).toEqual(["deleting", "resource_deprovision_requested", "resource_deprovision_requested"]);
    expect(decideSandbox({ kind: "delete", force: false }, given(deleting))).toEqual([]);
    const one = apply(deleting, ended("db", "delete", "succeeded"));
    const all = apply(one, ended("q", "delete", "succeeded"));
    expect(types(all.slice(one.length))).toEqual(["resource_deprovisioned", "deleted"]);
    expect(given(all).status).toBe("deleted");
  });

  it("a failed delete workflow leaves the sandbox DeprovisionFailed; force removes it", () => {
    const deleting = apply(created, { kind: "delete", force: false });
    const stuck = apply(apply(deleting, ended("db", "delete", "failed")), ended("q", "delete", "succeeded"));
    expect(given(stuck).status).toBe("deleting");
    expect(sandboxStatus(given(stuck)).reason).toBe("DeprovisionFailed");
    const forced = apply(stuck, { kind: "delete", force: true });
    expect(types(forced.slice(stuck.length))).toEqual(["deleting", "deleted"]);
  });

  it("a sandbox without resources is ready at once and deleted at once", () => {
    const empty = decideSandbox({ ...create(), resources: [] } as SandboxCommand, given([]));
    expect(types(empty)).toEqual(["created", "ready"]);
    expect(types(decideSandbox({ kind: "delete", force: false }, given(empty)))).toEqual(["deleting", "deleted"]);
  });

  it("deleting an unknown sandbox is not found; a deleted name can be created again", () => {
    expect(() => decideSandbox({ kind: "delete", force: false }, given([]))).toThrow(NotFoundError);
    const gone = apply(created, { kind: "delete", force: true });
    expect(types(decideSandbox(create(), given(gone)))[0]).toBe("created");
  });

  it("late or repeated workflow outcomes change nothing", () => {
    const ready = apply(created, ended("db", "create", "succeeded"));
    expect(decideSandbox(ended("db", "create", "succeeded"), given(ready))).toEqual([]);
    expect(decideSandbox(ended("db", "delete", "succeeded"), given(ready))).toEqual([]);
  });
});
