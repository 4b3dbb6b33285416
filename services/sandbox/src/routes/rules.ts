// The Routes API's routing rules, derived from the sandboxes (pure): one rule per fork a
// ready sandbox has on its cluster, keyed by its baseline workload and the sandbox's
// routing key, sending each port to the fork's Service that serves it. What a request
// filters on, how one set of rules becomes another as ADD, REMOVE and REPLACE operations,
// and the cluster's Services as GetClusterServices lists them.
import * as pb from "@ephemera/proto";
import { baselineLabel, baselineOf, forkName } from "@ephemera/kit";
import type { SandboxRecord } from "../sandbox/state.js";

/** A sandbox and where its forks are on its cluster (as its runner reported them). */
export interface PlacedSandbox {
  sandbox: SandboxRecord;
  placements: pb.ForkPlacement[];
}

type Rule = pb.routes.WorkloadRoutingRule;
type Op = pb.routes.WorkloadRoutingRuleOp;


export interface RoutedFork {
  sandbox: SandboxRecord;
  fork: pb.Fork;
  baseline: { kind: string; namespace: string; name: string };
  /** Each port routed and the fork Service's host serving it (`<service>-<routing key>.<namespace>.svc`). */
  ports: Array<{ port: number; host: string }>;
  /** The fork's Services as the runner placed them, each with the baseline Service it stands for. */
  services: pb.ForkServiceAddress[];
}

/**
 * Pure: the forks of the sandboxes that route and that are on their cluster. A sandbox
 * routes once it is ready, and goes on routing through an update (while its changed forks
 * roll out, to the Services of the generation applied), until it is deleted. The ports are the fork's declared endpoints, else its Services' ports; each goes
 * to the fork Service with that port (the first one, if none has it).
 */
export function* routedForks(sandboxes: Iterable<PlacedSandbox>): Iterable<RoutedFork> {
  for (const { sandbox, placements } of sandboxes) {
    if (sandbox.status !== "active" || !(sandbox.ready || sandbox.forks.available > 0)) continue;
    const placed = new Map(placements.map((p) => [p.fork, p]));
    for (const fork of sandbox.spec?.forks ?? []) {
      if (!fork.forkOf) continue;
      const baseline = baselineOf(fork.forkOf);
      const p = placed.get(baselineLabel(baseline));
      if (!p) continue;
      const services: pb.ForkServiceAddress[] = p.services.length
        ? p.services : [{ host: `${forkName(baseline.name, sandbox.routingKey)}.${baseline.namespace}.svc`, ports: [], baselineHost: "" }];
      const declared = fork.endpoints.map((e) => e.port).filter((n) => n > 0);
      const numbers = [...new Set(declared.length ? declared : services.flatMap((x) => x.ports))];
      const ports = numbers.map((port) => ({ port, host: (services.find((x) => x.ports.includes(port)) ?? services[0]!).host }));
      yield { sandbox, fork, baseline, ports, services };
    }
  }
}

/** Pure: the rules of the sandboxes that route, one per fork. */
export function routingRules(sandboxes: Iterable<PlacedSandbox>): Rule[] {
  const rules: Rule[] = [...routedForks(sandboxes)].map(({ sandbox, baseline, ports }) => ({
    routingKey: sandbox.routingKey,
    baseline,
    destinationSandbox: { name: sandbox.name },
    mappings: ports.map(({ port, host }) => ({ workloadPort: port, destinations: [{ host, port }] })),
  }));
  return rules.sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
}

/**
 * Pure: GetClusterServices. The baseline Services in front of the workloads the routing
 * sandboxes fork (once each, with every port, from what the runner recorded when it applied
 * the forks), then each fork Service with its sandbox's routing key and the hostname of the
 * baseline Service it stands for (of the baseline workload, for forks recorded before the
 * runner named the Service).
 */
export function clusterServices(sandboxes: Iterable<PlacedSandbox>): pb.routes.ClusterService[] {
  const baselines = new Map<string, Set<number>>();
  const forks: pb.routes.ClusterService[] = [];
  const portOf = (fork: pb.Fork, port: number): pb.routes.ClusterServicePort => {
    const declared = fork.endpoints.find((e) => e.port === port);
    return { name: declared?.name || `port-${port}`, port, protocol: declared?.protocol || "TCP", appProtocol: "" };
  };
  for (const { sandbox, fork, baseline, ports, services } of routedForks(sandboxes)) {
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
