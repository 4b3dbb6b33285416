// The Routes API's routing rules, derived from the sandboxes (pure): one rule per fork a
// ready sandbox has on its cluster, keyed by its baseline workload and the sandbox's
// routing key, sending each port to the fork's Service that serves it. What a request
// filters on, how one set of rules becomes another as ADD, REMOVE and REPLACE operations,
// and the cluster's Services as GetClusterServices lists them. A route group's rules are its
// members' forks under the group's own routing key. A local workload a workstation serves
// routes as a fork does, to the sandbox's Service without a selector made for it (locals.ts).
import * as pb from "@ephemera/proto";
import { routedForks, type PlacedSandbox, type RoutedFork } from "./forks.js";
import { routedLocals, type RoutedLocal } from "./locals.js";
import { routeGroupRouting } from "../routegroup/members.js";
import type { RouteGroupRecord } from "../routegroup/state.js";

type Rule = pb.routes.WorkloadRoutingRule;
type Op = pb.routes.WorkloadRoutingRuleOp;

export { routedForks, routedLocals, type PlacedSandbox, type RoutedFork, type RoutedLocal };

/** What a rule is made of: a fork's ports go to the same port of its Service, a local's to the port its Service maps. */
type Routed = Pick<RoutedFork, "sandbox" | "baseline"> & { ports: Array<{ port: number; host: string; destinationPort?: number }> };

/**
 * Pure: the rules of the sandboxes that route, one per fork and per connected local under
 * each sandbox's routing key; and under each route group's key, one per fork and local of its
 * matching sandboxes (members.ts).
 */
export function routingRules(sandboxes: Iterable<PlacedSandbox>, routeGroups: Iterable<RouteGroupRecord> = []): Rule[] {
  const placed = [...sandboxes];
  const rule = (routingKey: string, { sandbox, baseline, ports }: Routed): Rule => ({
    routingKey,
    baseline,
    destinationSandbox: { name: sandbox.name },
    mappings: ports.map(({ port, host, destinationPort }) => ({ workloadPort: port, destinations: [{ host, port: destinationPort ?? port }] })),
  });
  const own: Routed[] = [...routedForks(placed), ...routedLocals(placed)];
  const rules: Rule[] = own.map((r) => rule(r.sandbox.routingKey, r));
  for (const group of routeGroups) {
    if (group.status !== "active") continue;
    const { forks, locals } = routeGroupRouting(group, placed);
    for (const r of [...forks, ...locals]) rules.push(rule(group.routingKey, r));
  }
  return rules.sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
}

/**
 * Pure: GetClusterServices. The baseline Services in front of the workloads the routing
 * sandboxes fork (once each, with every port, from what the runner recorded when it applied
 * the forks), then each fork Service with its sandbox's routing key and the hostname of the
 * baseline Service it stands for (of the baseline workload, for forks recorded before the
 * runner named the Service); and so each Service of a connected local.
 */
export function clusterServices(sandboxes: Iterable<PlacedSandbox>): pb.routes.ClusterService[] {
  const placed = [...sandboxes];
  const baselines = new Map<string, Set<number>>();
  const forks: pb.routes.ClusterService[] = [];
  const portOf = (fork: pb.Fork, port: number): pb.routes.ClusterServicePort => {
    const declared = fork.endpoints.find((e) => e.port === port);
    return { name: declared?.name || `port-${port}`, port, protocol: declared?.protocol || "TCP", appProtocol: "" };
  };
  for (const { sandbox, fork, baseline, ports, services } of routedForks(placed)) {
    for (const s of services) {
      if (s.baselineHost) baselines.set(s.baselineHost, new Set([...baselines.get(s.baselineHost) ?? [], ...s.ports]));
    }
    for (const host of new Set(ports.map((p) => p.host))) {
      const baselineHost = services.find((s) => s.host === host)?.baselineHost || `${baseline.name}.${baseline.namespace}.svc`;
      forks.push({
        serviceIp: "",
        hostname: host,
        ports: ports.filter((p) => p.host === host).map((p) => portOf(fork, p.port)),
        sandboxInfo: { sandboxRoutingKey: sandbox.routingKey, baselineHostname: baselineHost },
      });
    }
  }
  // A connected local's Services without a selector, as the runner placed them.
  for (const { sandbox, baseline, services } of routedLocals(placed)) {
    for (const s of services) {
      if (s.baselineHost) baselines.set(s.baselineHost, new Set([...baselines.get(s.baselineHost) ?? [], ...s.ports]));
      forks.push({
        serviceIp: "",
        hostname: s.host,
        ports: s.ports.map((port) => ({ name: `port-${port}`, port, protocol: "TCP", appProtocol: "" })),
        sandboxInfo: { sandboxRoutingKey: sandbox.routingKey, baselineHostname: s.baselineHost || `${baseline.name}.${baseline.namespace}.svc` },
      });
    }
  }
  const listed = [...baselines].sort(([a], [b]) => a.localeCompare(b)).map(([hostname, ports]): pb.routes.ClusterService => ({
    serviceIp: "",
    hostname,
    ports: [...ports].sort((a, b) => a - b).map((port) => ({ name: `port-${port}`, port, protocol: "TCP", appProtocol: "" })),
  }));
  return [...listed, ...forks];
}

/** Rules are kept by baseline and routing key, as the API defines them. */
export const keyOf = (r: Rule) => `${r.baseline?.kind}/${r.baseline?.namespace}/${r.baseline?.name}@${r.routingKey}`;

/** Pure: whether a rule passes every filter the request sets (an empty field matches anything). */
export function matches(rule: Rule, req: pb.routes.WorkloadRoutingRulesRequest): boolean {
  const b = req.baselineWorkload;
  if (b?.kind && b.kind !== rule.baseline?.kind) return false;
  if (b?.namespace && b.namespace !== rule.baseline?.namespace) return false;
  if (b?.name && b.name !== rule.baseline?.name) return false;
  if (req.routingKey && req.routingKey !== rule.routingKey) return false;
  if (req.destinationSandbox?.name && req.destinationSandbox.name !== rule.destinationSandbox?.name) return false;
  return true;
}

/** Pure: the operations that turn `before` into `after` (both already filtered). */
export function diff(before: Rule[], after: Rule[]): Op[] {
  const old = new Map(before.map((r) => [keyOf(r), r]));
  const now = new Map(after.map((r) => [keyOf(r), r]));
  const ops: Op[] = [];
  for (const [k, r] of old) if (!now.has(k)) ops.push({ op: pb.routes.WatchOp.REMOVE, route: r });
  for (const [k, r] of now) {
    const was = old.get(k);
    if (!was) ops.push({ op: pb.routes.WatchOp.ADD, route: r });
    else if (!sameRule(was, r)) ops.push({ op: pb.routes.WatchOp.REPLACE, route: r });
  }
  return ops;
}

const sameRule = (a: Rule, b: Rule) =>
  Buffer.from(pb.routes.WorkloadRoutingRule.encode(a).finish()).equals(Buffer.from(pb.routes.WorkloadRoutingRule.encode(b).finish()));
