// The sandbox decider as given-events / when-command / then-events (or then-error), over
// the shared fold; each given event carries the time it was appended at.
import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import type { SandboxRecord, SandboxState } from "./state.js";
import { ConflictError, NotFoundError, ValidationError } from "@ephemera/kit";
import { decideSandbox, sandboxDecider, scheduledDeleteTime, type SandboxCommand } from "./decide.js";
import { deciderSpec } from "../../../../test/support/decider.js";
import { sandboxStatus } from "./status.js";

// --- given / when / then -------------------------------------------------------------


const T0 = "2026-01-01T00:00:00.000Z";
const ms = (iso: string) => Date.parse(iso);
const iso = (t: number) => new Date(t).toISOString();
const MIN = 60_000;
const HOUR = 60 * MIN;

const { at, given } = deciderSpec(sandboxDecider, T0);

/** The state of a sandbox that exists (the tests below only ask the status of one). */
function record(s: SandboxState): SandboxRecord {
  if (s.status === "none") throw new Error("expected a sandbox that exists");
  return s;
}


const types = (events: DomainEvent[]) => events.map((e) => e.type.replace(/^ephemera\.sandbox\.|\.v1$/g, ""));

// --- fixtures ------------------------------------------------------------------------

const resources: pb.ResolvedResource[] = [
  { name: "db", plugin: "hello-db", version: "1.0.0", params: { dbname: "orders" } },
  { name: "q", plugin: "queue", version: "0.0.0", params: {} },
];
const specOf = (ttl?: pb.Ttl) => pb.SandboxSpec.fromPartial({
  cluster: "local", ttl, resources: resources.map((r) => ({ name: r.name, plugin: r.plugin, params: r.params })),
});
const endpoints: pb.EndpointUrl[] = [{ name: "web", target: "svc:80", url: "https://web.rk1.example", baselineUrl: "https://svc-80.example" }];

/** A re-apply of feature-x with `spec` (default: the created one with `extra` fields). */
function updateTo(extra: Partial<pb.SandboxSpec>, spec?: pb.SandboxSpec, res = resources): SandboxCommand {
  const next = spec ?? pb.SandboxSpec.fromPartial({ ...specOf(), ...extra });
  return {
    kind: "create", sandbox: pb.Sandbox.fromPartial({ name: "feature-x", spec: next }), resources: res,
    routingKey: "rk1", endpoints, canonicalSpec: JSON.stringify(pb.SandboxSpec.toJSON(next)), existingSpec: "spec-1",
  };
}

function create(opts: { ttl?: pb.Ttl; res?: pb.ResolvedResource[]; canonical?: string; existing?: string; routingKey?: string } = {}): SandboxCommand {
  return {
    kind: "create", sandbox: pb.Sandbox.fromPartial({ name: "feature-x", spec: specOf(opts.ttl) }), resources: opts.res ?? resources,
    routingKey: opts.routingKey ?? "rk1", endpoints, canonicalSpec: opts.canonical ?? "spec-1", existingSpec: opts.existing,
  };
}

const created = (ttl?: pb.Ttl, res = resources) => ev("ephemera.sandbox.created.v1", { name: "feature-x", routingKey: "rk1", spec: specOf(ttl), endpoints, resources: res });
const provisionRequested = (r: pb.ResolvedResource) => ev("ephemera.sandbox.resource_provision_requested.v1", { sandbox: "feature-x", routingKey: "rk1", cluster: "local", resource: r });
const deprovisionRequested = (r: pb.ResolvedResource) => ev("ephemera.sandbox.resource_deprovision_requested.v1", { sandbox: "feature-x", routingKey: "rk1", cluster: "local", resource: r });
const deleting = (reason: string, force = false) => ev("ephemera.sandbox.deleting.v1", { force, reason });
const deleted = (forced = false) => ev("ephemera.sandbox.deleted.v1", { forced });
const seedFailed = pb.StepFailure.fromPartial({ step: "seed", exitCode: 3, reason: "Error" });

const wfId = (resource: string, phase: "create" | "delete") => `rk1.${resource}.${phase}`;
const ended = (resource: string, phase: "create" | "delete", outcome: "succeeded" | "failed"): SandboxCommand => ({
  kind: "workflow-ended", resource, phase, workflowId: wfId(resource, phase), outcome, outputs: outcome === "succeeded" ? [{ key: "provision.host", size: 4 }] : [],
  failure: outcome === "failed" ? seedFailed : undefined,
});
const provisioned = (resource: string) => ev("ephemera.sandbox.resource_provisioned.v1", { resource, workflowId: wfId(resource, "create"), outputs: [{ key: "provision.host", size: 4 }] });
const provisionFailed = (resource: string) => ev("ephemera.sandbox.resource_provision_failed.v1", { resource, workflowId: wfId(resource, "create"), failure: seedFailed });
const deprovisioned = (resource: string) => ev("ephemera.sandbox.resource_deprovisioned.v1", { resource, workflowId: wfId(resource, "delete") });

/** Created at T0 (with an optional ttl), every resource requested. */
const requested = (ttl?: pb.Ttl) => at(T0, created(ttl), ...resources.map(provisionRequested));
const T1 = "2026-01-01T00:10:00.000Z";
const T2 = "2026-01-01T00:20:00.000Z";
const ready = [...requested(), ...at(T1, provisioned("db"), provisioned("q"), ev("ephemera.sandbox.ready.v1", {}))];
/** db failed, q ready. */
const dbFailed = [...requested(), ...at(T1, provisionFailed("db"), provisioned("q"))];

// --- create --------------------------------------------------------------------------

describe("sandbox: create", () => {
  it("records the sandbox and requests every resource with its resolved version and the cluster", () => {
    given().when(create()).then(created(), provisionRequested(resources[0]!), provisionRequested(resources[1]!));
  });

  it("a sandbox without resources is ready at once", () => {
    given().when(create({ res: [] })).then(created(undefined, []), ev("ephemera.sandbox.ready.v1", {}));
  });

  it("re-applying the same spec is a no-op", () => {
    given(requested()).when(create({ canonical: "spec-1", existing: "spec-1" })).thenNothing();
    given(ready).when(create({ canonical: "spec-1", existing: "spec-1" })).thenNothing();
  });

  it("a changed spec updates in place: routing key kept, nothing re-provisioned, what changed recorded", () => {
    const update = updateTo({ description: "new", labels: { team: "a" } });
    const events = given(ready).when(update).events;
    expect(types(events)).toEqual(["updated"]);
    const data = events[0]!.data as pb.SandboxUpdated;
    expect(data.added).toEqual([]);
    expect(data.removed).toEqual([]);
    expect(data.changes.map((c) => [c.field, c.oldJson, c.newJson])).toEqual([
      ["spec.description", "null", '"new"'], ["spec.labels", "null", '{"team":"a"}'],
    ]);
    const after = record(given(ready).when(update).state(T2));
    expect(after).toMatchObject({ routingKey: "rk1", ready: true, specUpdatedAt: T2 });
    expect(after.resources.map((r) => r.status)).toEqual(["Ready", "Ready"]);
  });

  it("restarts a TTL counted from updatedAt, and not one counted from createdAt", () => {
    for (const [offsetFrom, from] of [["updatedAt", T2], ["createdAt", T0]] as const) {
      const ttl = { duration: "1h", offsetFrom };
      const history = [...at(T0, created(ttl), ...resources.map(provisionRequested)), ...at(T1, provisioned("db"), provisioned("q"), ev("ephemera.sandbox.ready.v1", {}))];
      const after = record(given(history).when(updateTo({ description: "x", ttl })).state(T2));
      expect(scheduledDeleteTime(after)).toBe(ms(from) + HOUR);
    }
  });

  it("names every immutable field that changed (cluster, a resource's plugin version and params), and writes nothing", () => {
    const spec = pb.SandboxSpec.fromPartial({
      cluster: "other",
      resources: [{ name: "db", plugin: "hello-db@2.0.0", params: { dbname: "orders", size: "l" } }, { name: "q", plugin: "queue", params: {} }],
    });
    const resolved = [{ ...resources[0]!, version: "2.0.0", params: { dbname: "orders", size: "l" } }, resources[1]!];
    let thrown: unknown;
    try {
      decideSandbox(updateTo({}, spec, resolved), record(given(ready).state));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ValidationError);
    expect((thrown as ValidationError).violations.map((v) => [v.field, v.rule])).toEqual([
      ["spec.cluster", "immutable"], ["spec.resources[0].plugin", "immutable"], ["spec.resources[0].params", "immutable"],
    ]);
    expect((thrown as ValidationError).violations[1]!.description).toContain("runs hello-db@1.0.0");
    expect((thrown as ValidationError).violations[1]!.description).toContain('"hello-db@2.0.0" is hello-db@2.0.0');
    expect((thrown as ValidationError).violations[2]!.description).toContain("changed: size");
  });

  it("a ref pinning the version a resource runs is no change to it: nothing runs, and a ready sandbox stays ready", () => {
    const pinned = pb.SandboxSpec.fromPartial({ ...specOf(), resources: [{ name: "db", plugin: "hello-db@1.0.0", params: { dbname: "orders" } }, { name: "q", plugin: "queue", params: {} }] });
    const update = given(ready).when(updateTo({}, pinned));
    expect(types(update.events)).toEqual(["updated"]);
    expect((update.events[0]!.data as pb.SandboxUpdated).changes.map((c) => c.field)).toEqual(["spec.resources"]);
    const after = record(update.state(T2));
    expect(after.ready).toBe(true);
    expect(after.resources.map((r) => [r.name, r.version, r.status])).toEqual([["db", "1.0.0", "Ready"], ["q", "0.0.0", "Ready"]]);
  });

  it("another plugin for an existing resource is refused as immutable too", () => {
    const other = pb.SandboxSpec.fromPartial({ ...specOf(), resources: [{ name: "db", plugin: "pg", params: { dbname: "orders" } }, { name: "q", plugin: "queue", params: {} }] });
    const resolved = [{ ...resources[0]!, plugin: "pg", version: "1.0.0" }, resources[1]!];
    let thrown: unknown;
    try { decideSandbox(updateTo({}, other, resolved), record(given(ready).state)); } catch (err) { thrown = err; }
    expect((thrown as ValidationError).violations.map((v) => [v.field, v.rule])).toEqual([["spec.resources[0].plugin", "immutable"]]);
  });

  it("adds a resource: only its create workflow runs, and the sandbox is ready again once it is", () => {
    const cache: pb.ResolvedResource = { name: "cache", plugin: "redis", version: "1.0.0", params: {} };
    const spec = pb.SandboxSpec.fromPartial({ cluster: "local", resources: [...resources, cache].map((r) => ({ name: r.name, plugin: r.plugin, params: r.params })) });
    const update = updateTo({}, spec, [...resources, cache]);
    const events = given(ready).when(update).events;
    expect(types(events)).toEqual(["updated", "resource_provision_requested"]);
    expect((events[1]!.data as pb.ResourceProvisionRequested).resource?.name).toBe("cache");
    const updated = given(ready).when(update).history(T2);
    expect(record(given(updated).state).ready).toBe(false);
    given(updated).when(ended("cache", "create", "succeeded")).then(provisioned("cache"), ev("ephemera.sandbox.ready.v1", {}));
  });

  it("removes a resource: only its delete workflow runs, and it leaves the sandbox once it is deprovisioned", () => {
    const spec = pb.SandboxSpec.fromPartial({ cluster: "local", resources: [{ name: "db", plugin: "hello-db", params: { dbname: "orders" } }] });
    const update = updateTo({}, spec, [resources[0]!]);
    const events = given(ready).when(update).events;
    expect(types(events)).toEqual(["updated", "resource_deprovision_requested"]);
    expect((events[0]!.data as pb.SandboxUpdated).removed).toEqual(["q"]);
    const updated = given(ready).when(update).history(T2);
    given(updated).when(ended("q", "delete", "succeeded")).then(ev("ephemera.sandbox.resource_deprovisioned.v1", { resource: "q", workflowId: wfId("q", "delete") }));
    const gone = [...updated, ...at(T2, ev("ephemera.sandbox.resource_deprovisioned.v1", { resource: "q", workflowId: wfId("q", "delete") }))];
    const after = record(given(gone).state);
    expect(after.resources.map((r) => r.name)).toEqual(["db"]);
    expect(after.ready).toBe(true);
  });

  it("takes labels, description, TTL and endpoints while the resources' create workflows run, and is ready once they end", () => {
    const update = given(requested()).when(updateTo({ description: "x", labels: { team: "a" } }));
    expect(types(update.events)).toEqual(["updated"]);
    const during = update.history(T1);
    expect(record(given(during).state).resources.map((r) => r.status)).toEqual(["Provisioning", "Provisioning"]);
    expect(record(given(during).state).spec?.labels).toEqual({ team: "a" });
    const one = given(during).when(ended("db", "create", "succeeded")).history(T1);
    given(one).when(ended("q", "create", "succeeded")).then(provisioned("q"), ev("ephemera.sandbox.ready.v1", {}));
  });

  it("a TTL changed while provisioning counts from the change (updatedAt) and is due then", () => {
    const ttl = { duration: "1h", offsetFrom: "updatedAt" };
    const during = given(requested()).when(updateTo({ ttl })).history(T1);
    expect(scheduledDeleteTime(given(during).state)).toBe(ms(T1) + HOUR);
    given(during).when({ kind: "expire", now: ms(T1) + HOUR - 1 }).thenNothing();
    expect(types(given(during).when({ kind: "expire", now: ms(T1) + HOUR }).events)).toEqual(["deleting", "resource_deprovision_requested", "resource_deprovision_requested"]);
  });

  it("refuses adding a resource while a workflow runs, naming each running workflow by resource, phase and id", () => {
    const cache: pb.ResolvedResource = { name: "cache", plugin: "redis", version: "1.0.0", params: {} };
    const spec = pb.SandboxSpec.fromPartial({ cluster: "local", resources: [...resources, cache].map((r) => ({ name: r.name, plugin: r.plugin, params: r.params })) });
    const dbRunning = [...requested(), ...at(T1, provisioned("q"))];
    given(dbRunning).when(updateTo({}, spec, [...resources, cache]))
      .thenThrows(ConflictError, /cannot add cache while a workflow runs: the create workflow of resource db \(rk1\.db\.create\); apply again once it has ended/);
    given(requested()).when(updateTo({}, spec, [...resources, cache]))
      .thenThrows(ConflictError, /the create workflow of resource db \(rk1\.db\.create\), the create workflow of resource q \(rk1\.q\.create\)/);
  });

  it("refuses removing a resource while another's workflow runs, and says what may change meanwhile", () => {
    const onlyDb = pb.SandboxSpec.fromPartial({ cluster: "local", resources: [{ name: "db", plugin: "hello-db", params: { dbname: "orders" } }] });
    const qRunning = [...requested(), ...at(T1, provisioned("db"))];
    given(qRunning).when(updateTo({}, onlyDb, [resources[0]!]))
      .thenThrows(ConflictError, /cannot remove q while a workflow runs: the create workflow of resource q \(rk1\.q\.create\).*labels, description, ttl, endpoints and forks may change at any time/);
  });

  it("while a removed resource's delete workflow runs: other changes are taken (the removal is not asked again), adding and removing are refused", () => {
    const onlyDb = pb.SandboxSpec.fromPartial({ cluster: "local", resources: [{ name: "db", plugin: "hello-db", params: { dbname: "orders" } }] });
    const removing = given(ready).when(updateTo({}, onlyDb, [resources[0]!])).history(T2);
    const relabel = pb.SandboxSpec.fromPartial({ ...onlyDb, labels: { team: "b" } });
    const events = given(removing).when(updateTo({}, relabel, [resources[0]!])).events;
    expect(types(events)).toEqual(["updated"]);
    expect((events[0]!.data as pb.SandboxUpdated).removed).toEqual([]);
    given(removing).when(updateTo({}, specOf(), resources))
      .thenThrows(ConflictError, /cannot add q while a workflow runs: the delete workflow of resource q \(rk1\.q\.delete\)/);
    const none = pb.SandboxSpec.fromPartial({ cluster: "local", resources: [] });
    given(removing).when(updateTo({}, none, [])).thenThrows(ConflictError, /cannot remove db while a workflow runs: the delete workflow of resource q/);
  });

  it("refuses adding a name whose earlier removal failed, naming its delete workflow", () => {
    const onlyDb = pb.SandboxSpec.fromPartial({ cluster: "local", resources: [{ name: "db", plugin: "hello-db", params: { dbname: "orders" } }] });
    const removing = given(ready).when(updateTo({}, onlyDb, [resources[0]!])).history(T2);
    const failed = given(removing).when(ended("q", "delete", "failed")).history(T2);
    given(failed).when(updateTo({}, specOf(), resources)).thenThrows(ConflictError, /cannot add q: .*delete workflow failed \(rk1\.q\.delete\); add it under another name/);
  });

  it("a retry runs a failed removal's delete workflow again, and the resource leaves once it succeeds", () => {
    const onlyDb = pb.SandboxSpec.fromPartial({ cluster: "local", resources: [{ name: "db", plugin: "hello-db", params: { dbname: "orders" } }] });
    const removing = given(ready).when(updateTo({}, onlyDb, [resources[0]!])).history(T2);
    expect(sandboxStatus(record(given(removing).state))).toMatchObject({ ready: false, reason: "Updating", message: "removing resource q" });
    const failed = given(removing).when(ended("q", "delete", "failed")).history(T2);
    expect(sandboxStatus(record(given(failed).state))).toMatchObject({ ready: false, reason: "DeprovisionFailed" });
    expect(sandboxStatus(record(given(failed).state)).message).toContain("resource q (removed by an update)");
    const retried = given(failed).when({ kind: "retry", name: "feature-x" });
    retried.then(ev("ephemera.sandbox.deprovision_retry_requested.v1", { resources: ["q"] }));
    const again = given([...failed, ...at(T2, ...retried.events)]).when(ended("q", "delete", "succeeded"));
    expect(types(again.events)).toEqual(["resource_deprovisioned"]);
    const after = record(given([...failed, ...at(T2, ...retried.events), ...at(T2, ...again.events)]).state);
    expect(after.resources.map((r) => r.name)).toEqual(["db"]);
    expect(sandboxStatus(after)).toMatchObject({ ready: true, reason: "Ready" });
  });

  it("applying while it is being deleted is a conflict; once deleted, the name can be created again", () => {
    const deletingH = given(ready).when({ kind: "delete", name: "feature-x", force: false }).history(T1);
    given(deletingH).when(create({ existing: "spec-1" })).thenThrows(ConflictError, /being deleted/);
    const gone = given(ready).when({ kind: "delete", name: "feature-x", force: true }).history(T1);
    const again = given(gone).when(create({ routingKey: "rk2" })).events;
    expect(types(again)).toEqual(["created", "resource_provision_requested", "resource_provision_requested"]);
    expect(again[0]!.data).toMatchObject({ routingKey: "rk2" });
  });
});

// --- workflows ending ----------------------------------------------------------------

describe("sandbox: resource outcomes", () => {
  it("is ready once every resource is provisioned", () => {
    const one = given(requested()).when(ended("db", "create", "succeeded"));
    one.then(provisioned("db"));
    expect(sandboxStatus(record(given(one.history(T1)).state)).reason).toBe("Creating");
    const both = given(one.history(T1)).when(ended("q", "create", "succeeded"));
    both.then(provisioned("q"), ev("ephemera.sandbox.ready.v1", {}));
    expect(sandboxStatus(record(given(both.history(T1)).state))).toEqual({ ready: true, reason: "Ready", message: "all resources are ready", scheduledDeleteTime: "" });
  });

  it("a failed create workflow fails its resource with the step's reason", () => {
    const w = given(requested()).when(ended("db", "create", "failed"));
    w.then(provisionFailed("db"));
    expect(sandboxStatus(record(given(w.history(T1)).state))).toMatchObject({ ready: false, reason: "ResourceFailed", message: "resource db: step seed exited 3 (Error)" });
  });

  it("late or repeated outcomes change nothing", () => {
    given(ready).when(ended("db", "create", "succeeded")).thenNothing();
    given(ready).when(ended("db", "create", "failed")).thenNothing();
    given(ready).when(ended("db", "delete", "succeeded")).thenNothing();
    given(ready).when(ended("nope", "create", "succeeded")).thenNothing();
  });
});

// --- retry ---------------------------------------------------------------------------

describe("sandbox: retry", () => {
  it("retries only the failed resources", () => {
    const w = given(dbFailed).when({ kind: "retry", name: "feature-x" });
    w.then(ev("ephemera.sandbox.retry_requested.v1", { resources: ["db"] }));
    const after = record(given(w.history(T1)).state);
    expect(after.resources.map((r) => [r.name, r.status, r.failure, r.retries])).toEqual([["db", "Provisioning", undefined, 1], ["q", "Ready", undefined, 0]]);
    expect(sandboxStatus(record(after)).reason).toBe("Creating");
    // The retried workflow's success makes the sandbox ready.
    given(w.history(T1)).when(ended("db", "create", "succeeded")).then(provisioned("db"), ev("ephemera.sandbox.ready.v1", {}));
  });

  it("retries every failed resource, in order", () => {
    const both = [...requested(), ...at(T1, provisionFailed("db"), provisionFailed("q"))];
    given(both).when({ kind: "retry", name: "feature-x" }).then(ev("ephemera.sandbox.retry_requested.v1", { resources: ["db", "q"] }));
  });

  it("is a conflict when no resource failed", () => {
    given(ready).when({ kind: "retry", name: "feature-x" }).thenThrows(ConflictError, /no failed resource, removal or fork/);
    given(requested()).when({ kind: "retry", name: "feature-x" }).thenThrows(ConflictError, /no failed resource, removal or fork/);
  });

  it("is a conflict while the sandbox is being deleted, or when it is not there", () => {
    const deletingH = given(dbFailed).when({ kind: "delete", name: "feature-x", force: false }).history(T1);
    given(deletingH).when({ kind: "retry", name: "feature-x" }).thenThrows(ConflictError, /being deleted/);
    given().when({ kind: "retry", name: "feature-x" }).thenThrows(ConflictError, /not there/);
  });
});

// --- delete --------------------------------------------------------------------------

describe("sandbox: delete", () => {
  it("requests deprovisioning of every resource, even failed ones, for the reason 'requested'", () => {
    const w = given(dbFailed).when({ kind: "delete", name: "feature-x", force: false });
    w.then(deleting("requested"), deprovisionRequested(resources[0]!), deprovisionRequested(resources[1]!));
    expect(given(w.history(T1)).state).toMatchObject({ status: "deleting", deleteReason: "requested", ready: false });
  });

  it("ends deleted once every resource is deprovisioned; deleting again meanwhile changes nothing", () => {
    const deletingH = given(ready).when({ kind: "delete", name: "feature-x", force: false }).history(T1);
    given(deletingH).when({ kind: "delete", name: "feature-x", force: false }).thenNothing();
    const one = given(deletingH).when(ended("db", "delete", "succeeded"));
    one.then(deprovisioned("db"));
    given(one.history(T1)).when(ended("q", "delete", "succeeded")).then(deprovisioned("q"), deleted());
  });

  it("a failed delete workflow leaves it DeprovisionFailed; force removes it", () => {
    const deletingH = given(ready).when({ kind: "delete", name: "feature-x", force: false }).history(T1);
    const stuck = given(given(deletingH).when(ended("db", "delete", "failed")).history(T1)).when(ended("q", "delete", "succeeded")).history(T1);
    expect(given(stuck).state.status).toBe("deleting");
    expect(sandboxStatus(record(given(stuck).state)).reason).toBe("DeprovisionFailed");
    given(stuck).when({ kind: "delete", name: "feature-x", force: true }).then(deleting("requested", true), deleted(true));
  });

  it("deleting again after a failed delete asks for the failed teardowns again, and only those", () => {
    const deletingH = given(ready).when({ kind: "delete", name: "feature-x", force: false }).history(T1);
    // While a teardown still runs, a second delete has nothing to add.
    given(deletingH).when({ kind: "delete", name: "feature-x", force: false }).thenNothing();
    const stuck = given(given(deletingH).when(ended("db", "delete", "failed")).history(T1)).when(ended("q", "delete", "succeeded")).history(T1);
    const again = given(stuck).when({ kind: "delete", name: "feature-x", force: false });
    again.then(ev("ephemera.sandbox.deprovision_retry_requested.v1", { resources: ["db"] }));
    const after = record(again.state());
    expect(after.resources.map((r) => [r.name, r.status, r.deprovisionRetries])).toEqual([["db", "Deprovisioning", 1], ["q", "Deprovisioned", 0]]);
    expect(sandboxStatus(after).reason).toBe("Deleting");
    given(again.history()).when(ended("db", "delete", "succeeded")).then(deprovisioned("db"), deleted());
  });

  it("force deletes at once, from any state but gone", () => {
    const w = given(requested()).when({ kind: "delete", name: "feature-x", force: true });
    w.then(deleting("requested", true), deleted(true));
    expect(given(w.history(T1)).state).toMatchObject({ status: "deleted", forced: true });
  });

  it("a sandbox without resources is deleted at once", () => {
    given(at(T0, created(undefined, []), ev("ephemera.sandbox.ready.v1", {}))).when({ kind: "delete", name: "feature-x", force: false }).then(deleting("requested"), deleted());
  });

  it("deleting a sandbox that is not there is not found", () => {
    given().when({ kind: "delete", name: "feature-x", force: false }).thenThrows(NotFoundError, /not found/);
    const gone = given(ready).when({ kind: "delete", name: "feature-x", force: true }).history(T1);
    given(gone).when({ kind: "delete", name: "feature-x", force: false }).thenThrows(NotFoundError, /feature-x not found/);
    given(gone).when({ kind: "delete", name: "feature-x", force: true }).thenThrows(NotFoundError, /not found/);
  });
});

// --- TTL -----------------------------------------------------------------------------

describe("sandbox: TTL", () => {
  const hour = (offsetFrom = "createdAt"): pb.Ttl => ({ duration: "1h", offsetFrom });
  const due = ms(T0) + HOUR;

  it("is due ttl after creation; expire before that does nothing", () => {
    expect(scheduledDeleteTime(given(requested(hour())).state)).toBe(due);
    given(requested(hour())).when({ kind: "expire", now: due - 1 }).thenNothing();
  });

  it("expire at or after the due time deletes the sandbox for the reason 'ttl'", () => {
    for (const now of [due, due + 5 * MIN]) {
      given(requested(hour())).when({ kind: "expire", now }).then(deleting("ttl"), deprovisionRequested(resources[0]!), deprovisionRequested(resources[1]!));
    }
    const w = given(requested(hour())).when({ kind: "expire", now: due });
    const after = given(w.history(iso(due))).state;
    expect(after).toMatchObject({ status: "deleting", deleteReason: "ttl" });
    expect(sandboxStatus(record(after))).toMatchObject({ reason: "Deleting", message: "the sandbox's TTL expired; deleting it", scheduledDeleteTime: "" });
  });

  it("the status shows when it is due", () => {
    expect(sandboxStatus(record(given(requested(hour())).state)).scheduledDeleteTime).toBe(iso(due));
  });

  it("without a ttl (or with one that does not parse) it never expires", () => {
    expect(scheduledDeleteTime(given(requested()).state)).toBeUndefined();
    given(requested()).when({ kind: "expire", now: ms(T0) + 1000 * HOUR }).thenNothing();
    given(requested({ duration: "soon", offsetFrom: "createdAt" })).when({ kind: "expire", now: ms(T0) + 1000 * HOUR }).thenNothing();
  });

  it("does nothing once the sandbox is being deleted, or gone", () => {
    const deletingH = given(requested(hour())).when({ kind: "delete", name: "feature-x", force: false }).history(T1);
    given(deletingH).when({ kind: "expire", now: due }).thenNothing();
    given().when({ kind: "expire", now: due }).thenNothing();
  });

  it("offsetFrom updatedAt counts from the last spec change, not from later resource events", () => {
    // Resource events move updatedAt; only a spec change (creation, for now) moves the TTL.
    const h = [...requested(hour("updatedAt")), ...at(T1, provisioned("db"))];
    const s = record(given(h).state);
    expect(s.updatedAt).toBe(T1);
    expect(s.specUpdatedAt).toBe(T0);
    expect(scheduledDeleteTime(s)).toBe(due);
    given(h).when({ kind: "expire", now: due }).then(deleting("ttl"), deprovisionRequested(resources[0]!), deprovisionRequested(resources[1]!));
  });

  it("offsetFrom updatedAt follows a later spec change where createdAt does not", () => {
    const later = "2026-01-01T00:30:00.000Z";
    const updated = (offsetFrom: string): SandboxState => ({ ...record(given(requested(hour(offsetFrom))).state), specUpdatedAt: later });
    expect(scheduledDeleteTime(updated("updatedAt"))).toBe(ms(later) + HOUR);
    expect(scheduledDeleteTime(updated("createdAt"))).toBe(due);
    expect(decideSandbox({ kind: "expire", now: due }, updated("updatedAt"))).toEqual([]);
    expect(types(decideSandbox({ kind: "expire", now: due }, updated("createdAt")))).toEqual(["deleting", "resource_deprovision_requested", "resource_deprovision_requested"]);
  });

  it("a sandbox without resources expires straight to deleted", () => {
    given(at(T0, created(hour(), []))).when({ kind: "expire", now: due }).then(deleting("ttl"), deleted());
  });
});

// --- forks ---------------------------------------------------------------------------

describe("sandbox: forks", () => {
  const fork = (name: string, image = "orders:v2") => pb.Fork.fromPartial({
    forkOf: { kind: "Deployment", namespace: "shop", name }, customizations: { images: [{ image, container: "" }] },
  });
  const withForks = (forks: pb.Fork[]) => pb.SandboxSpec.fromPartial({ ...specOf(), forks });
  const createdWith = (forks: pb.Fork[]) => ev("ephemera.sandbox.created.v1", { name: "feature-x", routingKey: "rk1", spec: withForks(forks), endpoints, resources });
  const forksRequested = (generation: number, forks: pb.Fork[]) => ev("ephemera.sandbox.forks_requested.v1", {
    sandbox: "feature-x", routingKey: "rk1", cluster: "local", generation, forks, resources: ["db", "q"],
  });
  const reported = (generation: number, outcome: "available" | "skipped" | "failed", failure?: pb.ForkFailure): SandboxCommand =>
    ({ kind: "forks-reported", generation, outcome, ...(failure ? { failure } : {}) });
  const available = (generation: number, skipped = false) => ev("ephemera.sandbox.forks_available.v1", { generation, skipped });
  const notFound = pb.ForkFailure.fromPartial({ fork: "Deployment shop/orders", reason: "BaselineNotFound", message: "baseline Deployment shop/orders not found on cluster local" });
  const orders = [fork("orders")];
  /** Created with a fork of orders; db ready, q still provisioning. */
  const creating = [...at(T0, createdWith(orders), ...resources.map(provisionRequested)), ...at(T1, provisioned("db"))];
  /** Every resource ready, generation 1 asked of the cluster. */
  const asked = [...creating, ...at(T1, provisioned("q"), forksRequested(1, orders))];
  const live = [...asked, ...at(T1, available(1), ev("ephemera.sandbox.ready.v1", {}))];

  it("asks the cluster for the forks once every resource is ready, not before, and is not ready until they are available", () => {
    given(at(T0, createdWith(orders), ...resources.map(provisionRequested))).when(ended("db", "create", "succeeded")).then(provisioned("db"));
    given(creating).when(ended("q", "create", "succeeded")).then(provisioned("q"), forksRequested(1, orders));
    expect(record(given(asked).state).ready).toBe(false);
    expect(sandboxStatus(record(given(asked).state))).toMatchObject({ ready: false, reason: "Creating", message: "waiting for the forks to be available on cluster local" });
  });

  it("is ready when the requested generation is reported available (or skipped), once; an older generation's report does not count", () => {
    given(asked).when(reported(1, "available")).then(available(1), ev("ephemera.sandbox.ready.v1", {}));
    given(asked).when(reported(1, "skipped")).then(available(1, true), ev("ephemera.sandbox.ready.v1", {}));
    given(live).when(reported(1, "available")).thenNothing();
    given(asked).when(reported(0, "available")).thenNothing();
    expect(sandboxStatus(record(given(live).state))).toMatchObject({ ready: true, reason: "Ready" });
  });

  it("fails with BaselineNotFound naming the baseline; a retry asks for the forks again as a new generation", () => {
    const failed = given(asked).when(reported(1, "failed", notFound));
    failed.then(ev("ephemera.sandbox.forks_failed.v1", { generation: 1, failure: notFound }));
    const state = record(failed.state(T2));
    expect(sandboxStatus(state)).toMatchObject({ ready: false, reason: "BaselineNotFound", message: expect.stringContaining("baseline Deployment shop/orders not found") });
    given(failed.history(T2)).when({ kind: "retry", name: "feature-x" })
      .then(ev("ephemera.sandbox.retry_requested.v1", { resources: [] }), forksRequested(2, orders));
  });

  it("an update changing the forks of a sandbox whose forks failed asks for them again (the change may be the fix)", () => {
    const failed = given(asked).when(reported(1, "failed", notFound)).history(T2);
    const fixed = [fork("orders-v2")];
    const update = given(failed).when(updateTo({ forks: fixed }, withForks(fixed)));
    expect(types(update.events)).toEqual(["updated", "forks_requested"]);
    expect(update.events[1]).toEqual(forksRequested(2, fixed));
    expect(record(update.state(T2)).forks.failure).toBeUndefined();
  });

  it("an update changing a fork asks for a new generation at once and is not ready until it is available", () => {
    const changed = [fork("orders", "orders:v3")];
    const update = given(live).when(updateTo({ forks: changed }, withForks(changed)));
    expect(types(update.events)).toEqual(["updated", "forks_requested"]);
    expect(update.events[1]).toEqual(forksRequested(2, changed));
    expect(record(update.state(T2)).ready).toBe(false);
    given(update.history(T2)).when(reported(2, "available")).then(available(2), ev("ephemera.sandbox.ready.v1", {}));
  });

  it("a fork change made while resources provision is not asked of the cluster before every resource is ready, and is the one asked then", () => {
    const changed = [fork("orders", "orders:v3")];
    expect(types(given(creating).when(updateTo({ forks: changed }, withForks(changed))).events)).toEqual(["updated"]);
    const updated = given(creating).when(updateTo({ forks: changed }, withForks(changed))).history(T2);
    // A later label change does not bring back the forks the sandbox was created with.
    const relabelled = given(updated).when(updateTo({ forks: changed, labels: { team: "a" } }, pb.SandboxSpec.fromPartial({ ...withForks(changed), labels: { team: "a" } })));
    expect(types(relabelled.events)).toEqual(["updated"]);
    given(relabelled.history(T2)).when(ended("q", "create", "succeeded")).then(provisioned("q"), forksRequested(2, changed));
  });

  it("forks first added while resources provision are asked for once they are ready; removed ones are never asked for", () => {
    const plain = [...at(T0, created(), ...resources.map(provisionRequested)), ...at(T1, provisioned("db"))];
    const added = given(plain).when(updateTo({ forks: orders }, withForks(orders))).history(T2);
    expect(types(given(plain).when(updateTo({ forks: orders }, withForks(orders))).events)).toEqual(["updated"]);
    given(added).when(ended("q", "create", "succeeded")).then(provisioned("q"), forksRequested(1, orders));
    const dropped = given(creating).when(updateTo({ forks: [] }, withForks([]))).history(T2);
    given(dropped).when(ended("q", "create", "succeeded")).then(provisioned("q"), ev("ephemera.sandbox.ready.v1", {}));
  });

  it("a change of only the forks' deprecated endpoints asks nothing of the cluster and leaves a ready sandbox ready", () => {
    const withEndpoint = [pb.Fork.fromPartial({ ...orders[0]!, endpoints: [{ name: "http", port: 8080, protocol: "http" }] })];
    const update = given(live).when(updateTo({ forks: withEndpoint }, withForks(withEndpoint)));
    expect(types(update.events)).toEqual(["updated"]);
    expect((update.events[0]!.data as pb.SandboxUpdated).changes.map((c) => c.field)).toEqual(["spec.forks"]);
    expect(record(update.state(T2))).toMatchObject({ ready: true, forks: { generation: 1, requested: 1 } });
  });

  it("an update removing every fork asks for none; a sandbox that never had forks asks nothing", () => {
    const update = given(live).when(updateTo({ forks: [] }, withForks([])));
    expect(types(update.events)).toEqual(["updated", "forks_requested"]);
    expect(update.events[1]).toEqual(forksRequested(2, []));
    expect(types(given(ready).when(updateTo({ description: "x" })).events)).toEqual(["updated"]);
  });

  it("deleting removes the forks first: the resources' delete workflows are asked for only once the cluster reports them gone", () => {
    const del = given(live).when({ kind: "delete", name: "feature-x", force: false });
    del.then(deleting("requested"), forksRequested(2, []));
    expect(sandboxStatus(record(del.state(T2)))).toMatchObject({ reason: "Deleting", message: "removing the forks from cluster local before the resources" });
    given(del.history(T2)).when(reported(2, "available"))
      .then(available(2), ...resources.map((r) => deprovisionRequested(r)));
  });

  it("deleting a sandbox whose forks were never asked for, or only skipped, deprovisions at once", () => {
    given(creating).when({ kind: "delete", name: "feature-x", force: false }).then(deleting("requested"), ...resources.map((r) => deprovisionRequested(r)));
    const skipped = [...asked, ...at(T1, available(1, true), ev("ephemera.sandbox.ready.v1", {}))];
    given(skipped).when({ kind: "delete", name: "feature-x", force: false }).then(deleting("requested"), ...resources.map((r) => deprovisionRequested(r)));
  });

  it("while an update's generation is asked for, a late answer for the one before counts for nothing", () => {
    const changed = [fork("orders", "orders:v3")];
    const updated = given(live).when(updateTo({ forks: changed }, withForks(changed))).history(T2);
    given(updated).when(reported(1, "available")).thenNothing();
    given(updated).when(reported(1, "failed", notFound)).thenNothing();
    expect(record(given(updated).state).ready).toBe(false);
  });

  it("TTL expiry removes the forks first, as a delete does; a forced delete asks nothing of the cluster", () => {
    const ttl = { duration: "1h", offsetFrom: "createdAt" };
    const history = [...at(T0, ev("ephemera.sandbox.created.v1", { name: "feature-x", routingKey: "rk1", spec: { ...withForks(orders), ttl }, endpoints, resources }),
      ...resources.map(provisionRequested)), ...at(T1, provisioned("db"), provisioned("q"), forksRequested(1, orders), available(1), ev("ephemera.sandbox.ready.v1", {}))];
    given(history).when({ kind: "expire", now: ms(T0) + HOUR }).then(deleting("ttl"), forksRequested(2, []));
    given(live).when({ kind: "delete", name: "feature-x", force: true }).then(deleting("requested", true), deleted(true));
  });

  it("forks that could not be removed are asked to be removed again by deleting again", () => {
    const del = given(live).when({ kind: "delete", name: "feature-x", force: false }).history(T2);
    const refused = pb.ForkFailure.fromPartial({ fork: "", reason: "Rejected", message: "the cluster refused: 403 forbidden" });
    const failed = given(del).when(reported(2, "failed", refused));
    expect(sandboxStatus(record(failed.state(T2)))).toMatchObject({ reason: "Rejected", message: expect.stringContaining("delete it again to retry") });
    given(failed.history(T2)).when({ kind: "delete", name: "feature-x", force: false }).then(forksRequested(3, []));
  });
});
