// The RouteGroupView of the API: the group, its status, members, conflicts and endpoints.
import * as pb from "@ephemera/proto";
import { baselineLabel } from "@ephemera/kit";
import type { PlacedSandbox } from "../routes/forks.js";
import { routeGroupRouting, routeGroupStatus } from "./members.js";
import type { RouteGroupRecord } from "./state.js";

export function routeGroupView(group: RouteGroupRecord, sandboxes: Iterable<PlacedSandbox>): pb.RouteGroupView {
  const routing = routeGroupRouting(group, sandboxes);
  return pb.RouteGroupView.fromPartial({
    name: group.name,
    routingKey: group.routingKey,
    spec: group.spec,
    status: routeGroupStatus(group, routing),
    endpoints: group.endpoints,
    sandboxes: routing.members.map(({ sandbox }) => ({
      name: sandbox.name,
      routingKey: sandbox.routingKey,
      ready: sandbox.ready,
      routed: routing.forks.filter((f) => f.sandbox.name === sandbox.name).map((f) => baselineLabel(f.baseline)),
    })),
    conflicts: routing.conflicts,
    createdAt: group.createdAt,
    updatedAt: group.updatedAt,
  });
}
