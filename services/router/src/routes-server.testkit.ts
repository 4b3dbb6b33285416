// A Routes API server for the router's tests: the generated `routes.Routes` service on a
// real gRPC server, its rules set by the test. A watcher gets the rules matching its
// request as ADDs, one SYNCED, then ADD, REPLACE and REMOVE as the test changes them, as
// ephemera's route server (services/sandbox/src/routes) does.
import { grpc } from "@ephemera/kit/client";
import * as pb from "@ephemera/proto";

type Rule = pb.routes.WorkloadRoutingRule;
type Watch = grpc.ServerWritableStream<pb.routes.WorkloadRoutingRulesRequest, pb.routes.WorkloadRoutingRuleOp>;

const keyOf = (r: Rule) => `${r.baseline?.kind}/${r.baseline?.namespace}/${r.baseline?.name}@${r.routingKey}`;

function matches(rule: Rule, req: pb.routes.WorkloadRoutingRulesRequest): boolean {
  const b = req.baselineWorkload;
  return (!b?.kind || b.kind === rule.baseline?.kind) && (!b?.namespace || b.namespace === rule.baseline?.namespace)
    && (!b?.name || b.name === rule.baseline?.name) && (!req.routingKey || req.routingKey === rule.routingKey);
}

export class TestRoutesServer {
  private readonly rules = new Map<string, Rule>();
  private readonly watches = new Set<Watch>();
  /** The `authorization` metadata of every watch asked for, in order. */
  readonly authorizations: Array<string | undefined> = [];

  /** The port it listens on. */
  port = 0;

  private constructor(private readonly server: grpc.Server) {}

  /** Listens on `host`:`port` (0: any free port). */
  static async start(port = 0, rules: Rule[] = [], host = "127.0.0.1"): Promise<TestRoutesServer> {
    const server = new grpc.Server();
    const routes = new TestRoutesServer(server);
    for (const rule of rules) routes.rules.set(keyOf(rule), rule);
    const implementation: pb.routes.RoutesServer = {
      getWorkloadRoutingRules: (call, callback) => callback(null, { routingRules: routes.matching(call.request) }),
      watchWorkloadRoutingRules: (call) => routes.watch(call),
      getClusterServices: (_call, callback) => callback(null, { services: [] }),
    };
    server.addService(pb.routes.RoutesService, implementation);
    routes.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    return routes;
  }

  get watchers(): number {
    return this.watches.size;
  }

  /** Adds the rule, or replaces the one with its baseline and routing key. */
  set(rule: Rule): void {
    const was = this.rules.get(keyOf(rule));
    this.rules.set(keyOf(rule), rule);
    this.send(rule, was ? pb.routes.WatchOp.REPLACE : pb.routes.WatchOp.ADD);
  }

  remove(rule: Rule): void {
    if (this.rules.delete(keyOf(rule))) this.send(rule, pb.routes.WatchOp.REMOVE);
  }

  /** Stops at once, cutting every watch. */
  stop(): void {
    this.server.forceShutdown();
  }

  private matching(req: pb.routes.WorkloadRoutingRulesRequest): Rule[] {
    return [...this.rules.values()].filter((r) => matches(r, req));
  }

  private watch(call: Watch): void {
    this.authorizations.push(call.metadata.get("authorization")[0]?.toString());
    for (const route of this.matching(call.request)) call.write({ op: pb.routes.WatchOp.ADD, route });
    call.write({ op: pb.routes.WatchOp.SYNCED });
    this.watches.add(call);
    const forget = () => this.watches.delete(call);
    call.on("cancelled", forget);
    call.on("close", forget);
  }

  private send(route: Rule, op: pb.routes.WatchOp): void {
    for (const call of this.watches) if (matches(route, call.request)) call.write({ op, route });
  }
}

/** A rule sending `routingKey`'s requests on each app port of `ports` to its destination. */
export function routingRule(
  baseline: pb.routes.BaselineWorkload, routingKey: string, ports: Record<number, { host: string; port: number }>,
): Rule {
  return {
    routingKey,
    baseline,
    destinationSandbox: { name: `sandbox-${routingKey}` },
    mappings: Object.entries(ports).map(([appPort, to]) => ({ workloadPort: Number(appPort), destinations: [to] })),
  };
}
