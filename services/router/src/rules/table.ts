// The routing rules of one baseline workload, as the Routes API's watch sends them (pure):
// for each routing key, where each app port's requests go instead of the local app. A new
// watch (after a cut) builds its snapshot aside and it replaces the one served at SYNCED,
// so requests keep following the last snapshot while the watch is down or catching up.
import * as pb from "@ephemera/proto";
import type { Workload } from "../config.js";

export interface Destination {
  host: string;
  port: number;
}

type Ports = ReadonlyMap<number, Destination>;

/** Where a request goes without a rule: the app, on loopback, on the port it was sent to. */
export const localApp = (appPort: number): Destination => ({ host: "127.0.0.1", port: appPort });

export class RoutingTable {
  private served = new Map<string, Ports>();
  private building?: Map<string, Ports>;
  private synced = false;

  constructor(private readonly workload: Workload) {}

  /** True once a first snapshot arrived (the router is ready); stays true while later watches catch up. */
  get ready(): boolean {
    return this.synced;
  }

  /** The routing keys with a rule, in the snapshot served. */
  get keys(): string[] {
    return [...this.served.keys()];
  }

  /** A new watch began: what it sends up to SYNCED is the next snapshot. */
  beginSnapshot(): void {
    this.building = new Map();
  }

  apply({ op, route }: pb.routes.WorkloadRoutingRuleOp): void {
    const rules = this.building ?? this.served;
    if (op === pb.routes.WatchOp.SYNCED) {
      this.served = rules;
      this.building = undefined;
      this.synced = true;
      return;
    }
    // The watch asks for this workload only; a rule for another (a server filtering less) is not ours.
    if (!route?.routingKey || !this.isOurs(route.baseline)) return;
    if (op === pb.routes.WatchOp.REMOVE) rules.delete(route.routingKey);
    else if (op === pb.routes.WatchOp.ADD || op === pb.routes.WatchOp.REPLACE) rules.set(route.routingKey, portsOf(route));
  }

  /** The fork's `host:port` for a request with `routingKey` sent to `appPort`, or undefined (the local app's). */
  forkFor(routingKey: string | undefined, appPort: number): Destination | undefined {
    return routingKey === undefined ? undefined : this.served.get(routingKey)?.get(appPort);
  }

  /** Where a request with `routingKey` sent to `appPort` goes: its fork, or else the local app. */
  destination(routingKey: string | undefined, appPort: number): Destination {
    return this.forkFor(routingKey, appPort) ?? localApp(appPort);
  }

  private isOurs(b: pb.routes.BaselineWorkload | undefined): boolean {
    return b?.kind === this.workload.kind && b.namespace === this.workload.namespace && b.name === this.workload.name;
  }
}

/** Each mapped port's first destination (the fork's Service); a mapping without one routes nothing. */
function portsOf(rule: pb.routes.WorkloadRoutingRule): Ports {
  const ports = new Map<number, Destination>();
  for (const m of rule.mappings) {
    const d = m.destinations[0];
    if (d?.host && d.port > 0 && !ports.has(m.workloadPort)) ports.set(m.workloadPort, { host: d.host, port: d.port });
  }
  return ports;
}
