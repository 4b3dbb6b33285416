// The sandbox service's own metrics: how many sandboxes there are by the reason their status
// gives (Ready, Creating, ResourceFailed, ...), counted from its projections at each scrape, and
// the creates held for admission (sandbox/admission.ts).
import { Gauge, type Registry } from "@ephemera/kit/metrics";
import type { SandboxCore } from "./service.js";
import { sandboxStatus } from "./sandbox/status.js";
import { workflowsOf } from "./sandbox/view.js";

/** Reported even when no sandbox has them, so a panel shows 0 rather than nothing. */
const REASONS = ["Creating", "Updating", "Ready", "ResourceFailed", "NoRunner", "Deleting", "DeprovisionFailed", "RenderError"];

/** One sandbox that cannot be rendered (see safeView) is counted as such; it never fails the scrape. */
function reasonOf(status: () => string): string {
  try {
    return status();
  } catch {
    return "RenderError";
  }
}

export function sandboxMetrics(registry: Registry, core: Pick<SandboxCore, "sandboxes" | "workflows" | "admission">): void {
  new Gauge({
    name: "ephemera_sandbox_creates_held", registers: [registry],
    help: "Creates this replica holds for admission: their cluster has as many sandboxes created and not yet started as it admits",
    collect() { this.set(core.admission.held); },
  });
  new Gauge({
    name: "ephemera_sandboxes", labelNames: ["reason"], registers: [registry],
    help: "Sandboxes that exist (deleted ones left out), by the reason of their status",
    collect() {
      const counts = new Map(REASONS.map((r) => [r, 0]));
      for (const [, { state }] of core.sandboxes.entries()) {
        if (state.status === "none" || state.status === "deleted") continue;
        const reason = reasonOf(() => sandboxStatus(state, workflowsOf(state, core.workflows)).reason);
        counts.set(reason, (counts.get(reason) ?? 0) + 1);
      }
      this.reset();
      for (const [reason, n] of counts) this.set({ reason }, n);
    },
  });
}
