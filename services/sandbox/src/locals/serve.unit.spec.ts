// LocalService.Serve's answer over sandboxes given as events: named ones or every one with a
// local entry; unknown, deleted, being deleted, or without a local entry refused by name.
import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { ConflictError, NotFoundError } from "@ephemera/kit";
import { evolveSandbox, initialSandbox, type SandboxState } from "../sandbox/state.js";
import { serveLocals, type LocalsSource } from "./serve.js";

const local = (name: string) => pb.Local.fromPartial({ name, from: { kind: "Deployment", namespace: "demo", name }, mappings: [{ port: 8080, toLocal: "localhost:8080" }] });
const created = (name: string, routingKey: string, locals: pb.Local[]) =>
  ev("ephemera.sandbox.created.v1", { name, routingKey, spec: pb.SandboxSpec.fromPartial({ cluster: "c1", local: locals }), endpoints: [], resources: [] });
const sandbox = (...events: DomainEvent[]): SandboxState => events.reduce((s, e) => evolveSandbox(s, e, "t"), initialSandbox());

const states = new Map<string, SandboxState>([
  ["a", sandbox(created("a", "rka", [local("backend"), local("api")]))],
  ["b", sandbox(created("b", "rkb", []))],
  ["c", sandbox(created("c", "rkc", [local("web")]), ev("ephemera.sandbox.deleting.v1", { force: false, reason: "requested" }))],
  ["d", sandbox(created("d", "rkd", [local("web")]), ev("ephemera.sandbox.deleting.v1", { force: false, reason: "requested" }),
    ev("ephemera.sandbox.deleted.v1", { forced: false }))],
]);
const source: LocalsSource = { sandbox: (name) => states.get(name), sandboxes: () => states.values() };
const brief = (served: pb.ServedLocal[]) => served.map((s) => [s.sandbox, s.routingKey, s.cluster, s.local?.name]);
const refusal = (names: string[]) => { try { serveLocals(source, names); } catch (err) { return err; } return undefined; };

describe("serving local workloads", () => {
  it("answers every local entry of the sandboxes named, with routing key and cluster", () => {
    expect(brief(serveLocals(source, ["a", "a"]))).toEqual([["a", "rka", "c1", "backend"], ["a", "rka", "c1", "api"]]);
    expect(serveLocals(source, ["a"])[0]!.local!.mappings).toEqual([{ port: 8080, toLocal: "localhost:8080" }]);
  });

  it("answers every active sandbox's local entries when none is named", () => {
    expect(brief(serveLocals(source, []))).toEqual([["a", "rka", "c1", "api"], ["a", "rka", "c1", "backend"]]);
  });

  it("refuses a sandbox unknown or deleted as not found, one being deleted or without a local entry as a conflict", () => {
    expect(refusal(["a", "zz"])).toEqual(new NotFoundError("sandbox zz not found"));
    expect(refusal(["d"])).toEqual(new NotFoundError("sandbox d not found"));
    expect(refusal(["c"])).toEqual(new ConflictError("sandbox c is being deleted: its local workloads cannot be served"));
    expect(refusal(["b"])).toBeInstanceOf(ConflictError);
    expect((refusal(["b"]) as Error).message).toBe("sandbox b has no local entry (spec.local) to serve");
  });
});
