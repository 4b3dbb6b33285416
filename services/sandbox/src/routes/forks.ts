// The forks that route (pure): of each sandbox that is ready (or goes on routing through an
// update), each fork on its cluster with the ports it serves and the Services serving them.
import type * as pb from "@ephemera/proto";
import { baselineLabel, baselineOf, forkName } from "@ephemera/kit";
import type { SandboxRecord } from "../sandbox/state.js";

/**
 * A sandbox and where its forks are on its cluster (as its runner reported them); with
 * the local workloads a workstation serves now and their Services the runner keeps.
 */
export interface PlacedSandbox {
  sandbox: SandboxRecord;
  placements: pb.ForkPlacement[];
  connected?: Set<string>;
  localPlacements?: pb.LocalPlacement[];
}

/**
 * Whether a sandbox's forks and locals route: once it is ready, and on through an update
 * (while its changed forks roll out, to the Services of the generation applied), until it is deleted.
 */
export const routes = (sandbox: SandboxRecord) => sandbox.status === "active" && (sandbox.ready || sandbox.forks.available > 0);

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
    if (!routes(sandbox)) continue;
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

