// `/sim/*`: what tests steer the simulator with — faults, compaction, call counts, where its
// Services and cluster DNS are. Never counted as API calls.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Store } from "../store.js";
import type { FaultSpec, Faults } from "./faults.js";
import { dropOpenWatches } from "../api/watch.js";
import type { StatsSnapshot } from "./stats.js";
import type { NetworkInfo } from "../start.js";

export interface ControlDeps {
  store: Store;
  faults: Faults;
  stats: () => StatsSnapshot;
  resetStats: () => void;
  network: () => NetworkInfo;
}

const json = (res: ServerResponse, code: number, body: unknown) => {
  res.writeHead(code, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
};

export function control(deps: ControlDeps) {
  return async (req: IncomingMessage, res: ServerResponse, path: string, body: () => Promise<string>): Promise<void> => {
    const route = `${req.method} ${path}`;
    switch (route) {
      case "GET /sim/stats": return json(res, 200, deps.stats());
      case "GET /sim/network": return json(res, 200, deps.network());
      case "POST /sim/stats/reset": deps.resetStats(); return json(res, 200, deps.stats());
      case "POST /sim/faults": {
        const text = await body();
        let spec: FaultSpec;
        try { spec = JSON.parse(text || "{}") as FaultSpec; } catch { return json(res, 400, { error: "the faults must be JSON" }); }
        deps.faults.set(spec, Date.now());
        return json(res, 200, spec);
      }
      case "DELETE /sim/faults": deps.faults.clear(); return json(res, 200, {});
      case "POST /sim/watches/drop": return json(res, 200, { dropped: dropOpenWatches() });
      case "POST /sim/compact": deps.store.compact(); return json(res, 200, { compactedResourceVersion: String(deps.store.compacted) });
      default: return json(res, 404, { error: `no ${route}` });
    }
  };
}
