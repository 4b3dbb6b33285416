// The route group aggregate's state and its evolve: what the group was created with and what
// became of it. Which sandboxes it holds is not state: it follows from their labels (members.ts).
import type * as pb from "@ephemera/proto";
import type { DomainEvent } from "@ephemera/events";

export interface RouteGroupRecord {
  status: "active" | "deleted";
  name: string;
  routingKey: string;
  cluster: string;
  spec: pb.RouteGroupSpec;
  endpoints: pb.EndpointUrl[];
  createdAt: string;
  updatedAt: string;
}

export type RouteGroupState = { status: "none" } | RouteGroupRecord;

export const initialRouteGroup = (): RouteGroupState => ({ status: "none" });

export function evolveRouteGroup(state: RouteGroupState, event: DomainEvent, time: string): RouteGroupState {
  switch (event.type) {
    case "ephemera.routegroup.created.v1": {
      const spec = event.data.spec!;
      return {
        status: "active", name: event.data.name, routingKey: event.data.routingKey, cluster: spec.cluster, spec,
        endpoints: event.data.endpoints, createdAt: time, updatedAt: time,
      };
    }
    case "ephemera.routegroup.updated.v1":
      return state.status === "none" ? state : { ...state, spec: event.data.spec!, endpoints: event.data.endpoints, updatedAt: time };
    case "ephemera.routegroup.deleted.v1":
      return state.status === "none" ? state : { ...state, status: "deleted", updatedAt: time };
    default:
      return state;
  }
}
