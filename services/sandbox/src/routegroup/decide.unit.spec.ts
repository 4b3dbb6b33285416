// The route group decider, given events, when a command, then events or an error.
import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { NotFoundError, ValidationError } from "@ephemera/kit";
import { decideRouteGroup, type RouteGroupCommand } from "./decide.js";
import { evolveRouteGroup, initialRouteGroup, type RouteGroupState } from "./state.js";

const spec = (over: object = {}) => pb.RouteGroupSpec.fromPartial({
  cluster: "c1", description: "d", match: { label: { key: "feature", value: "x-*" } }, endpoints: [{ name: "web", target: "http://web:80" }], ...over,
});
const endpoints = [{ name: "web", target: "http://web:80", url: "https://web--rk1.example", baselineUrl: "https://web-80.example" }];
const apply = (s = spec()): Extract<RouteGroupCommand, { kind: "apply" }> => ({ kind: "apply", group: { name: "g", spec: s }, routingKey: "rk1", endpoints });
const given = (...events: DomainEvent[]): RouteGroupState => events.reduce((s, e) => evolveRouteGroup(s, e, "t"), initialRouteGroup());
const created = ev("ephemera.routegroup.created.v1", { name: "g", routingKey: "rk1", spec: spec(), endpoints });

describe("a route group", () => {
  it("is created with the minted routing key and its endpoints' URLs", () => {
    expect(decideRouteGroup(apply(), given())).toEqual([created]);
  });

  it("applied again unchanged writes nothing", () => {
    expect(decideRouteGroup(apply(), given(created))).toEqual([]);
  });

  it("may change its match and endpoints, each named as a change", () => {
    const next = spec({ match: { any: [{ label: { key: "team", value: "a" } }] }, endpoints: [] });
    expect(decideRouteGroup({ ...apply(next), endpoints: [] }, given(created))).toEqual([ev("ephemera.routegroup.updated.v1", {
      spec: next, endpoints: [],
      changes: [
        { field: "spec.endpoints", oldJson: JSON.stringify([{ name: "web", target: "http://web:80" }]), newJson: "null" },
        { field: "spec.match", oldJson: JSON.stringify({ label: { key: "feature", value: "x-*" } }), newJson: JSON.stringify({ any: [{ label: { key: "team", value: "a" } }] }) },
      ],
    })]);
  });

  it("refuses a change of its cluster and description, naming both in one error", () => {
    const err = (() => { try { decideRouteGroup(apply(spec({ cluster: "c2", description: "e" })), given(created)); } catch (e) { return e; } })();
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).violations.map((v) => [v.field, v.rule])).toEqual([["spec.cluster", "immutable"], ["spec.description", "immutable"]]);
  });

  it("is deleted, and may then be created anew", () => {
    const deleted = ev("ephemera.routegroup.deleted.v1", {});
    expect(decideRouteGroup({ kind: "delete", name: "g" }, given(created))).toEqual([deleted]);
    expect(() => decideRouteGroup({ kind: "delete", name: "g" }, given(created, deleted))).toThrow(NotFoundError);
    expect(decideRouteGroup(apply(), given(created, deleted))).toEqual([created]);
  });
});
