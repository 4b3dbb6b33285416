// The route group decider: create, update (only `match` and `endpoints` may change) and delete.
import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { NotFoundError, ValidationError, type FieldViolation } from "@ephemera/kit";
import { canonicalJson } from "@ephemera/spec";
import type { RouteGroupState } from "./state.js";

export type RouteGroupCommand =
  | {
      kind: "apply";
      group: pb.RouteGroup;
      /** Minted by the caller for a new group; an existing group keeps its own. */
      routingKey: string;
      /** The endpoints with their URLs under the group's routing key. */
      endpoints: pb.EndpointUrl[];
    }
  | { kind: "delete"; name: string };

/** The fields Signadot lets change on an update; every other one is immutable. */
const MUTABLE = new Set(["match", "endpoints"]);

export function decideRouteGroup(command: RouteGroupCommand, state: RouteGroupState): DomainEvent[] {
  switch (command.kind) {
    case "apply": {
      const { group, endpoints } = command;
      const spec = group.spec!;
      if (state.status !== "active") {
        return [ev("ephemera.routegroup.created.v1", { name: group.name, routingKey: command.routingKey, spec, endpoints })];
      }
      const changes = specChanges(state.spec, spec);
      if (changes.length === 0) return [];
      const immutable: FieldViolation[] = changes.filter((c) => !MUTABLE.has(c.field.slice("spec.".length))).map((c) => ({
        field: c.field, rule: "immutable",
        description: `${c.field} cannot change (${c.oldJson} → ${c.newJson}): only spec.match and spec.endpoints may; delete the route group and apply it again`,
      }));
      if (immutable.length) throw new ValidationError(immutable, `route group ${group.name} cannot be updated so`);
      return [ev("ephemera.routegroup.updated.v1", { spec, endpoints, changes })];
    }
    case "delete":
      if (state.status !== "active") throw new NotFoundError(`route group ${command.name} not found`);
      return [ev("ephemera.routegroup.deleted.v1", {})];
  }
}

/** The top-level spec fields that differ, old and new as JSON. */
export function specChanges(before: pb.RouteGroupSpec, after: pb.RouteGroupSpec): pb.SpecChange[] {
  const a = pb.RouteGroupSpec.toJSON(before) as Record<string, unknown>;
  const b = pb.RouteGroupSpec.toJSON(after) as Record<string, unknown>;
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()
    .filter((f) => canonicalJson(a[f] ?? null) !== canonicalJson(b[f] ?? null))
    .map((f) => ({ field: `spec.${f}`, oldJson: JSON.stringify(a[f] ?? null), newJson: JSON.stringify(b[f] ?? null) }));
}
