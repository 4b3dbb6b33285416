// The Routes API's routing rules, derived from the sandboxes (pure): one rule per fork of
// a ready sandbox, keyed by its baseline workload and the sandbox's routing key, sending
// each of the fork's declared ports to the fork's Service. What a request filters on, and
// how one set of rules becomes another as ADD, REMOVE and REPLACE operations.
import * as pb from "@ephemera/proto";
import { forkName } from "@ephemera/kit";
import type { SandboxRecord } from "../sandbox/state.js";

type Rule = pb.routes.WorkloadRoutingRule;
type Op = pb.routes.WorkloadRoutingRuleOp;


export interface RoutedFork {
  sandbox: SandboxRecord;
  fork: pb.Fork;
  baseline: { kind: string; namespace: string; name: string };
  /** The fork's Service, `<baseline>-<routing key>.<namespace>.svc`. */
  host: string;
}

/** Pure: the forks of the sandboxes that route (active and ready), with their baselines filled in. */
export function* routedForks(sandboxes: Iterable<SandboxRecord>): Iterable<RoutedFork> {
  for (const sandbox of sandboxes) {
    if (sandbox.status !== "active" || !sandbox.ready) continue;
    for (const fork of sandbox.spec?.forks ?? []) {
      const ref = fork.forkOf;
      if (!ref) continue;
      const namespace = ref.namespace || "default";
      yield {
        sandbox, fork, baseline: { kind: ref.kind || "Deployment", namespace, name: ref.name },
        host: `${forkName(ref.name, sandbox.routingKey)}.${namespace}.svc`,
      };
    }
  }
}

/** Pure: the rules of the sandboxes that route, one per fork. */
export function routingRules(sandboxes: Iterable<SandboxRecord>): Rule[] {
  const rules: Rule[] = [...routedForks(sandboxes)].map(({ sandbox, fork, baseline, host }) => ({
    routingKey: sandbox.routingKey,
    baseline,
    destinationSandbox: { name: sandbox.name },
    mappings: fork.endpoints.filter((e) => e.port > 0).map((e) => ({ workloadPort: e.port, destinations: [{ host, port: e.port }] })),
  }));
  return rules.sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
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
