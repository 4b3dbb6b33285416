// The route group commands behind the API: apply (create or update), get, list and delete,
// over the route group projection, with views built from the sandboxes they match.
import * as pb from "@ephemera/proto";
import { encode } from "@ephemera/events";
import { execute, type CommandMeta, type EventStore, type Projection } from "@ephemera/eventstore";
import { NotFoundError } from "@ephemera/kit";
import { routeGroupToDoc, validateRouteGroup } from "@ephemera/spec";
import { endpointUrls } from "../sandbox/endpoints.js";
import type { PlacedSandbox } from "../routes/forks.js";
import { decideRouteGroup, specChanges } from "./decide.js";
import { initialRouteGroup, type RouteGroupRecord, type RouteGroupState } from "./state.js";
import { routeGroupView } from "./view.js";

export interface RouteGroupDeps {
  store: EventStore;
  projection: Projection<RouteGroupState>;
  sandboxes: () => Iterable<PlacedSandbox>;
  routingKey: () => string;
  previewDomain: string;
}

export class RouteGroups {
  constructor(private readonly deps: RouteGroupDeps) {}

  async apply(request: pb.RouteGroup | undefined, meta: CommandMeta, dryRun = false): Promise<pb.ApplyRouteGroupResponse> {
    const group = validateRouteGroup(routeGroupToDoc(request ?? pb.RouteGroup.fromPartial({})));
    const existing = this.deps.projection.get(group.name)?.state;
    const active = existing?.status === "active" ? existing : undefined;
    // A dry run mints nothing: a new group's URLs are only known once it is created.
    const routingKey = active?.routingKey ?? (dryRun ? "<routing-key>" : this.deps.routingKey());
    const endpoints = endpointUrls(group.spec!.endpoints, routingKey, this.deps.previewDomain);
    const decide = (state: RouteGroupState) => decideRouteGroup({ kind: "apply", group, routingKey, endpoints }, state);
    if (dryRun) {
      const events = decide(existing ?? initialRouteGroup());
      const changes = events.flatMap((e) => (e.type === "ephemera.routegroup.updated.v1" ? e.data.changes : []));
      const now = new Date(0).toISOString();
      const would: RouteGroupRecord = active
        ? { ...active, spec: group.spec!, endpoints }
        : { status: "active", name: group.name, routingKey, cluster: group.spec!.cluster, spec: group.spec!, endpoints, createdAt: now, updatedAt: now };
      return { routeGroup: routeGroupView(would, this.deps.sandboxes()), created: !active, unchanged: events.length === 0, changes };
    }
    const { appended } = await execute(this.deps.store, this.deps.projection, group.name, (state) => decide(state).map(encode), meta);
    const changes = appended && active ? specChanges(active.spec, group.spec!) : [];
    return { routeGroup: this.get(group.name), created: !!appended && !active, unchanged: !appended, changes };
  }

  get(name: string): pb.RouteGroupView {
    const state = this.deps.projection.get(name)?.state;
    if (state?.status !== "active") throw new NotFoundError(`route group ${name} not found`);
    return routeGroupView(state, this.deps.sandboxes());
  }

  list(): pb.RouteGroupView[] {
    const sandboxes = [...this.deps.sandboxes()];
    return [...this.records()].map((g) => routeGroupView(g, sandboxes)).sort((a, b) => a.name.localeCompare(b.name));
  }

  async delete(name: string, meta: CommandMeta): Promise<pb.RouteGroupView> {
    const before = this.get(name);
    await execute(this.deps.store, this.deps.projection, name, (state) => decideRouteGroup({ kind: "delete", name }, state).map(encode), meta);
    return { ...before, status: { ready: false, reason: "Deleted", message: "" }, sandboxes: [], conflicts: [] };
  }

  /** The route groups that exist now. */
  *records(): Iterable<RouteGroupRecord> {
    for (const [, { state }] of this.deps.projection.entries()) if (state.status === "active") yield state;
  }
}
