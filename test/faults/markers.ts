// What the marker plugin's steps leave behind (fixtures/marker-plugin.yaml): one file per
// sandbox with a line per step attempt that started (`<run id> [k=v …]`), and
// done/<run id> once its script ended. Run ids are `<routingKey>.<resource>.<phase>.<step>.<attempt>`.
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";

export interface Marker {
  sandbox: string;
  runId: string;
  phase: string;
  step: string;
  attempt: number;
  /** `k=v` words after the run id (the delete step writes the create outputs it received). */
  fields: Record<string, string>;
}

export interface MarkerState {
  markers: Marker[];
  done: Set<string>;
}

/** Steps run as an unprivileged user (nobody): they must be able to reach and write here. */
export function prepareMarkerDir(dir: string): void {
  mkdirSync(join(dir, "done"), { recursive: true });
  mkdirSync(join(dir, "gates"), { recursive: true });
  for (const d of [dirname(dir), dir, join(dir, "done"), join(dir, "gates")]) chmodSync(d, d === dirname(dir) ? 0o711 : 0o1777);
}

export function readMarkers(dir: string): MarkerState {
  const markers: Marker[] = [];
  for (const sandbox of readdirSync(dir)) {
    if (sandbox === "done" || sandbox === "gates") continue;
    for (const line of readFileSync(join(dir, sandbox), "utf8").split("\n")) {
      if (!line.trim()) continue;
      const [runId = "", ...words] = line.trim().split(" ");
      const parts = runId.split(".");
      markers.push({
        sandbox,
        runId,
        phase: parts.at(-3) ?? "",
        step: parts.at(-2) ?? "",
        attempt: Number(parts.at(-1)),
        fields: Object.fromEntries(words.map((w) => [w.slice(0, w.indexOf("=")), w.slice(w.indexOf("=") + 1)])),
      });
    }
  }
  const doneDir = join(dir, "done");
  return { markers, done: new Set(existsSync(doneDir) ? readdirSync(doneDir) : []) };
}

/** Attempts whose script started and has not ended. */
export function runningMarkers(state: MarkerState, filter: (m: Marker) => boolean): Marker[] {
  return state.markers.filter((m) => filter(m) && !state.done.has(m.runId));
}

/** Run ids whose script started more than once: a step attempt that ran twice. */
export function duplicateRuns(state: MarkerState): Array<{ runId: string; sandbox: string; times: number }> {
  const counts = new Map<string, { sandbox: string; times: number }>();
  for (const m of state.markers) {
    const c = counts.get(m.runId) ?? { sandbox: m.sandbox, times: 0 };
    c.times++;
    counts.set(m.runId, c);
  }
  return [...counts].filter(([, c]) => c.times > 1).map(([runId, c]) => ({ runId, ...c }));
}

export const describeMarker = (m: Marker, state: MarkerState) =>
  `${m.runId}${state.done.has(m.runId) ? "" : " (no end)"}`;
