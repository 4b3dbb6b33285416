// Failures a pod asks for through annotations (a plugin can set them with its
// podTemplateOverlay), so the runner's handling of each can be tested end to end.
export const FAIL = "sim.ephemera.dev/fail";
export const FAIL_CONTAINER = "sim.ephemera.dev/fail-container";
export const FAIL_AFTER_MS = "sim.ephemera.dev/fail-after-ms";

export type FaultKind = "OOMKilled" | "ImagePullBackOff" | "Evicted" | "NodeLost";
export interface PodFault { kind: FaultKind; container: string; afterMs: number }

const KINDS: FaultKind[] = ["OOMKilled", "ImagePullBackOff", "Evicted", "NodeLost"];

/** Pure: the fault a pod's annotations ask for, if any. */
export function podFault(annotations: Record<string, string> | undefined): PodFault | undefined {
  const kind = annotations?.[FAIL] as FaultKind | undefined;
  if (!kind || !KINDS.includes(kind)) return undefined;
  const after = Number(annotations?.[FAIL_AFTER_MS]);
  return {
    kind,
    container: annotations?.[FAIL_CONTAINER] || "main",
    afterMs: Number.isFinite(after) && annotations?.[FAIL_AFTER_MS] !== undefined ? after : kind === "ImagePullBackOff" ? 0 : 200,
  };
}
