// The fork reconciler's folds and its report decision: what a sandbox wants of its cluster,
// what the runner recorded, and that each generation is reported once, never after a later one.
import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { behind, decideReport, foldDesire, foldRecord, noRecord, settled, target, type ForkDesire, type ForkRecord } from "./state.js";
import { foldLocalDesire, settledLocals, type LocalDesire } from "./local-state.js";
import { availability } from "./kube.js";

const fork = pb.Fork.fromPartial({ forkOf: { kind: "Deployment", namespace: "shop", name: "orders" } });
const desire = (...events: DomainEvent[]) => events.reduce<ForkDesire | undefined>(foldDesire, undefined)!;
const record = (...events: DomainEvent[]) => events.reduce<ForkRecord>(foldRecord, noRecord());
const created = ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk1", spec: { cluster: "c1" } });
const requested = (generation: number, forks: pb.Fork[]) => ev("ephemera.sandbox.forks_requested.v1", { sandbox: "sb", routingKey: "rk1", cluster: "c1", generation, forks, resources: ["db"] });
const placement = pb.ForkPlacement.fromPartial({ fork: "Deployment shop/orders", workload: { kind: "Deployment", namespace: "shop", name: "orders-rk1" } });

describe("fork reconciler state", () => {
  it("wants the last generation asked for; a force-deleted sandbox one more, with no forks", () => {
    const d = desire(created, requested(1, [fork]), requested(2, [fork, fork]));
    expect(target(d)).toEqual({ generation: 2, forks: [fork, fork] });
    expect(target(desire(created, requested(1, [fork]), ev("ephemera.sandbox.deleted.v1", { forced: true })))).toEqual({ generation: 2, forks: [] });
    expect(target(desire(created, requested(1, [fork]), ev("ephemera.sandbox.deleted.v1", { forced: false })))).toEqual({ generation: 1, forks: [fork] });
  });

  it("keeps an earlier sandbox of the same name that had forks, so what a forced delete left is still removed", () => {
    const again = ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk2", spec: { cluster: "c1" } });
    const d = desire(created, requested(1, [fork]), ev("ephemera.sandbox.deleted.v1", { forced: true }), again);
    expect(d.routingKey).toBe("rk2");
    expect(d.earlier.map((e) => [e.routingKey, e.gone, target(e)])).toEqual([["rk1", true, { generation: 2, forks: [] }]]);
    expect(behind(d.earlier[0]!, record())).toBe(true);
    expect(desire(created, again).earlier).toEqual([]); // it never had forks: nothing to remove
  });

  it("remembers every namespace and kind any generation had a fork in, for the sweep", () => {
    const cart = pb.Fork.fromPartial({ forkOf: { kind: "StatefulSet", namespace: "store", name: "cart" } });
    expect(desire(created, requested(1, [fork]), requested(2, [cart]), requested(3, [])).touched).toEqual(["Deployment/shop", "StatefulSet/store"]);
  });

  it("owes a report until one of the wanted generation is recorded; nothing to a sandbox that never asked", () => {
    const d = desire(created, requested(2, [fork]));
    expect(behind(d, record())).toBe(true);
    expect(behind(d, record(ev("ephemera.forks.applied.v1", { sandbox: "sb", generation: 2, forks: [placement] })))).toBe(true);
    expect(behind(d, record(ev("ephemera.forks.available.v1", { sandbox: "sb", generation: 2 })))).toBe(false);
    expect(behind(d, record(ev("ephemera.forks.failed.v1", { sandbox: "sb", generation: 2 })))).toBe(false);
    expect(behind(desire(created), record())).toBe(false);
    expect(behind(desire(created, ev("ephemera.sandbox.deleted.v1", { forced: true })), record())).toBe(false);
  });

  it("is settled only once its sandbox is deleted and the generation that removes its forks is answered", () => {
    const available = (generation: number) => ev("ephemera.forks.available.v1", { sandbox: "sb", generation });
    const none = () => noRecord();
    // Live: never settled, whatever is recorded.
    expect(settled(desire(created, requested(1, [fork])), () => record(available(1)))).toBe(false);
    // Deleted without ever asking for forks: nothing to remove.
    expect(settled(desire(created, ev("ephemera.sandbox.deleted.v1", { forced: false })), none)).toBe(true);
    // A normal deletion asks for a generation with no forks first: settled once it is answered.
    const normal = desire(created, requested(1, [fork]), requested(2, []), ev("ephemera.sandbox.deleted.v1", { forced: false }));
    expect(normal.deleted).toBe(true);
    expect(settled(normal, () => record(available(1)))).toBe(false);
    expect(settled(normal, () => record(available(1), ev("ephemera.forks.applied.v1", { sandbox: "sb", generation: 2, forks: [] })))).toBe(false);
    expect(settled(normal, () => record(available(1), available(2)))).toBe(true);
    // A forced one still has its forks on the cluster: settled once the runner's own removal generation is answered.
    const forced = desire(created, requested(1, [fork]), ev("ephemera.sandbox.deleted.v1", { forced: true }));
    expect(settled(forced, () => record(available(1)))).toBe(false);
    expect(settled(forced, () => record(available(1), available(2)))).toBe(true);
    // A deleted sandbox that carries a force-deleted earlier one: settled only once that one's forks are removed too.
    const again = ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk2", spec: { cluster: "c1" } });
    const later = desire(created, requested(1, [fork]), ev("ephemera.sandbox.deleted.v1", { forced: true }), again, ev("ephemera.sandbox.deleted.v1", { forced: false }));
    expect(settled(later, (rk) => (rk === "rk1" ? record(available(1)) : none()))).toBe(false);
    expect(settled(later, (rk) => (rk === "rk1" ? record(available(2)) : none()))).toBe(true);
  });

  it("records each report of a generation once, and none of a generation older than one reported", () => {
    const applied = decideReport(record(), "sb", 1, { kind: "applied", forks: [placement] });
    expect(applied).toEqual([ev("ephemera.forks.applied.v1", { sandbox: "sb", generation: 1, forks: [placement] })]);
    expect(decideReport(record(...applied), "sb", 1, { kind: "applied", forks: [placement] })).toEqual([]);
    const done = record(...applied, ev("ephemera.forks.available.v1", { sandbox: "sb", generation: 1 }));
    expect(decideReport(done, "sb", 1, { kind: "available" })).toEqual([]);
    expect(decideReport(done, "sb", 1, { kind: "skipped", message: "x" })).toEqual([]);
    const later = record(ev("ephemera.forks.skipped.v1", { sandbox: "sb", generation: 3, message: "no workloads" }));
    expect(decideReport(later, "sb", 2, { kind: "available" })).toEqual([]);
    expect(decideReport(later, "sb", 4, { kind: "available" })).toEqual([ev("ephemera.forks.available.v1", { sandbox: "sb", generation: 4 })]);
  });
});

describe("a fork's availability", () => {
  const deployment = (generation: number, status: Record<string, unknown>, replicas = 1) =>
    ({ apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "orders-rk1", namespace: "shop", generation }, spec: { replicas }, status });

  it("is available once the current generation is observed and rolled out to every replica", () => {
    expect(availability(undefined)).toEqual({ available: false });
    expect(availability(deployment(2, { observedGeneration: 1, updatedReplicas: 1, availableReplicas: 1 }))).toEqual({ available: false });
    expect(availability(deployment(2, { observedGeneration: 2, updatedReplicas: 1, availableReplicas: 0 }))).toEqual({ available: false });
    expect(availability(deployment(2, { observedGeneration: 2, updatedReplicas: 1, availableReplicas: 1 }, 2))).toEqual({ available: false });
    expect(availability(deployment(2, { observedGeneration: 2, updatedReplicas: 1, availableReplicas: 1 }))).toEqual({ available: true });
  });

  it("fails when the controller gave up on the current generation (a Deployment past its progress deadline), naming it; not for an older one", () => {
    const deadline = { type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded", message: "timed out" };
    expect(availability(deployment(2, { observedGeneration: 1, conditions: [deadline] }))).toEqual({ available: false });
    const stuck = availability(deployment(1, {
      observedGeneration: 1, conditions: [{ type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded", message: "ReplicaSet has timed out progressing." }],
    }));
    expect(stuck).toEqual({ available: false, failed: "Deployment shop/orders-rk1 did not become available: ReplicaSet has timed out progressing." });
  });

  it("reads an Argo Rollout by its phase", () => {
    const rollout = (phase: string) => ({ kind: "Rollout", metadata: { name: "r", namespace: "shop", generation: 1 }, spec: {}, status: { observedGeneration: "1", phase } });
    expect(availability(rollout("Healthy"))).toEqual({ available: true });
    expect(availability(rollout("Progressing"))).toEqual({ available: false });
    expect(availability(rollout("Degraded"))).toEqual({ available: false, failed: "Rollout shop/r is Degraded" });
  });
});

describe("local workloads' desire", () => {
  const local = (...events: DomainEvent[]) => events.reduce<LocalDesire | undefined>(foldLocalDesire, undefined)!;
  const withLocal = ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk1", spec: { cluster: "c1", local: [{ name: "api", from: { kind: "Deployment", namespace: "shop", name: "api" } }] } });
  const placed = [pb.LocalPlacement.fromPartial({ local: "api" })];

  it("is settled once its sandbox is deleted and no local's Service of it is recorded on the cluster", () => {
    const deleting = local(withLocal, ev("ephemera.sandbox.deleting.v1", { force: false, reason: "" }));
    expect(deleting.ending).toBe(true);
    expect(settledLocals(deleting, undefined)).toBe(false);
    const deleted = local(withLocal, ev("ephemera.sandbox.deleted.v1", { forced: true }));
    expect(settledLocals(deleted, placed)).toBe(false);
    expect(settledLocals(deleted, [])).toBe(true);
    expect(settledLocals(deleted, undefined)).toBe(true);
    expect(settledLocals(local(withLocal), undefined)).toBe(false);
  });
});
