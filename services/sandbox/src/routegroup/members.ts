// Which sandboxes a route group holds, and where its routing key sends traffic (pure): every
// sandbox of the group's cluster whose labels its match selects, until it is being deleted;
// under the group's key, the forks and connected locals of those that route. A baseline forked
// (or replaced by a local workload) by two members is a conflict: neither is routed under the
// group's key for it, and the status says so.
import type * as pb from "@ephemera/proto";
import { baselineLabel, baselineOf } from "@ephemera/kit";
import { routeGroupMatches } from "@ephemera/spec";
import { routedForks, type PlacedSandbox, type RoutedFork } from "../routes/forks.js";
import { routedLocals, type RoutedLocal } from "../routes/locals.js";
import type { RouteGroupRecord } from "./state.js";

export interface RouteGroupRouting {
  /** The sandboxes the match selects, by name. */
  members: PlacedSandbox[];
  conflicts: pb.RouteGroupConflict[];
  /** The members' forks routed under the group's key (conflicting baselines left out). */
  forks: RoutedFork[];
  /** The members' connected locals routed under the group's key (conflicting baselines left out). */
  locals: RoutedLocal[];
}

export function routeGroupRouting(group: RouteGroupRecord, sandboxes: Iterable<PlacedSandbox>): RouteGroupRouting {
  const members = [...sandboxes]
    .filter(({ sandbox }) => sandbox.status === "active" && sandbox.cluster === group.cluster
      && routeGroupMatches(group.spec.match, sandbox.spec?.labels ?? {}))
    .sort((a, b) => a.sandbox.name.localeCompare(b.sandbox.name));
  const forkers = new Map<string, string[]>();
  for (const { sandbox } of members) {
    const taken = new Set([...(sandbox.spec?.forks ?? []).map((f) => f.forkOf), ...(sandbox.spec?.local ?? []).map((l) => l.from)]
      .map((ref) => baselineLabel(baselineOf(ref))));
    for (const baseline of taken) forkers.set(baseline, [...(forkers.get(baseline) ?? []), sandbox.name]);
  }
  const conflicts = [...forkers].filter(([, names]) => names.length > 1)
    .map(([baseline, names]) => ({ baseline, sandboxes: names }))
    .sort((a, b) => a.baseline.localeCompare(b.baseline));
  const conflicted = new Set(conflicts.map((c) => c.baseline));
  const forks = [...routedForks(members)].filter((f) => !conflicted.has(baselineLabel(f.baseline)));
  const locals = [...routedLocals(members)].filter((l) => !conflicted.has(baselineLabel(l.baseline)));
  return { members, conflicts, forks, locals };
}

/** Pure: the group's status in one line: conflicts first, then members missing or not ready. */
export function routeGroupStatus(group: RouteGroupRecord, routing: RouteGroupRouting): pb.RouteGroupStatus {
  if (routing.conflicts.length) {
    const each = routing.conflicts.map((c) => `${c.baseline} is forked (or served locally) by ${c.sandboxes.join(" and ")}`).join("; ");
    return { ready: false, reason: "Conflict", message: `${each}: not routed under the route group's key until only one matching sandbox forks it or serves it locally` };
  }
  if (!routing.members.length) {
    return { ready: false, reason: "NoMatchingSandbox", message: `no sandbox of cluster ${group.cluster} matches` };
  }
  const waiting = routing.members.filter(({ sandbox }) => !sandbox.ready).map(({ sandbox }) => sandbox.name);
  if (waiting.length) return { ready: false, reason: "SandboxesNotReady", message: `not ready yet: ${waiting.join(", ")}` };
  return { ready: true, reason: "Ready", message: "" };
}
