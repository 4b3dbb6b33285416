// The local workloads that route (pure): of each sandbox that routes (as its forks do), each
// local entry a workstation serves now and for which the runner keeps Services without a
// selector, with each mapped port and the local Service (and port) reaching it. Disconnected,
// or not yet (or no longer) on the cluster: no route, and the baseline serves the key.
import type * as pb from "@ephemera/proto";
import { baselineLabel, baselineOf, type BaselineRef } from "@ephemera/kit";
import { routes, type PlacedSandbox } from "./forks.js";
import type { SandboxRecord } from "../sandbox/state.js";

export interface RoutedLocal {
  sandbox: SandboxRecord;
  local: pb.Local;
  baseline: BaselineRef;
  /** Each mapped port of the baseline workload, and the local Service's host and port reaching it. */
  ports: Array<{ port: number; host: string; destinationPort: number }>;
  /** The local Services as the runner placed them, each with the baseline Service it stands for. */
  services: pb.ForkServiceAddress[];
}

export function* routedLocals(sandboxes: Iterable<PlacedSandbox>): Iterable<RoutedLocal> {
  for (const { sandbox, connected, localPlacements } of sandboxes) {
    if (!routes(sandbox)) continue;
    for (const local of sandbox.spec?.local ?? []) {
      if (!connected?.has(local.name)) continue;
      const baseline = baselineOf(local.from);
      const placed = localPlacements?.find((p) => p.local === local.name && baselineLabel(baselineOf(p.baseline)) === baselineLabel(baseline));
      if (!placed) continue;
      const ports = local.mappings.flatMap((m) => {
        const route = placed.routes.find((r) => r.workloadPort === m.port);
        return route ? [{ port: m.port, host: route.host, destinationPort: route.port }] : [];
      });
      if (ports.length) yield { sandbox, local, baseline, ports, services: placed.services };
    }
  }
}
