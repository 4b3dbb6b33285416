// What `--wait` tells the user as a sandbox changes: progress lines, what is still
// pending, and a failed step's story. Pure functions of the views the API sends.
import type * as pb from "@ephemera/proto";

/** The last state reported per resource and per step, so only changes are printed. */
export type Seen = ReadonlyMap<string, string>;

/** "DeprovisionFailed" → "deprovision failed". */
export function words(status: string): string {
  return status.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase();
}

function stepState(s: pb.StepView): string {
  const status = words(s.status);
  const attempt = s.attempt > 1 ? ` (attempt ${s.attempt})` : "";
  const exit = s.status === "Failed" && s.exitCode !== undefined ? ` (exit code ${s.exitCode})` : "";
  // Why a step waits: a retry's backoff, or no runner taking it.
  const note = (s.status === "Retrying" || s.status === "Queued") && s.message ? `: ${s.message}` : "";
  return `${status}${attempt}${exit}${note}`;
}

/**
 * What of a wait's first view is history rather than news: "all" of it but the steps running
 * now (a wait on a sandbox this command did not just create: an update; a retry gives the
 * wait the sandbox from before it instead, wait.ts `before`); only the
 * create phase (a delete's wait: its delete steps, however far they got before the watch
 * opened, are news); or "none" (a sandbox this command created: a first step that failed at
 * once is news too). Of the news in a first view, a step still waiting for a runner and a
 * resource still on its way get no line: the lines after say how they went on.
 */
export type History = "all" | "create" | "none";

const ENDED = /^(Ready|Deprovisioned|.*Failed)$/;

/**
 * Lines such as `db: provision running`, `db: seed succeeded`, `db: ready` for what changed
 * since `seen`; of a first view, only what `history` leaves as news.
 */
export function progress(seen: Seen, view: pb.SandboxView, first = seen.size === 0, history: History = "all"): { lines: string[]; seen: Seen } {
  const next = new Map(seen);
  const lines: string[] = [];
  const report = (key: string, state: string, line: string, quietWhenNew: boolean) => {
    const before = seen.get(key);
    next.set(key, state);
    if (before === state || (before === undefined && quietWhenNew)) return;
    lines.push(line);
  };
  const past = (s: pb.StepView) => first && (history === "all" || (history === "create" && s.phase !== "delete"));
  for (const r of view.resources) {
    for (const s of r.steps) {
      const state = stepState(s);
      report(`${r.name}/${s.phase}/${s.name}`, state, `${r.name}: ${s.name} ${state}`,
        past(s) ? s.status !== "Running" : s.status === "Pending" || (first && s.status === "Queued"));
    }
    // Step lines come first: "seed succeeded" reads better before "ready".
    report(r.name, r.status, `${r.name}: ${words(r.status)}`, first ? history !== "none" || !ENDED.test(r.status) : r.status === "Pending");
  }
  // Forks after the resources they wait for: "fork deployment/orders: progressing (applied …)".
  for (const w of view.workloads) {
    if (w.kind !== "fork") continue;
    report(`fork:${w.name}`, w.status, `fork ${w.name}: ${words(w.status)}${w.message && w.status !== "Available" ? ` (${w.message})` : ""}`, first || w.status === "Pending");
  }
  return { lines, seen: next };
}

/** For a timeout message: each resource not yet where it should be, with its busy steps. */
export function stillWaitingFor(view: pb.SandboxView | undefined, goal: "ready" | "gone"): string {
  if (!view) return "the first state of the sandbox";
  const done = goal === "ready" ? ["Ready"] : ["Deprovisioned"];
  const pending = view.resources
    .filter((r) => !done.includes(r.status))
    .map((r) => {
      const busy = r.steps.filter((s) => s.status === "Running" || s.status === "Pending");
      const detail = busy.map((s) => `${s.name} ${words(s.status)}`);
      return `${r.name} (${[words(r.status || "Pending"), ...detail].join(", ")})`;
    });
  if (pending.length) return pending.join("; ");
  const forks = view.workloads.filter((w) => w.kind === "fork" && !(goal === "ready" ? ["Available", "Skipped"] : []).includes(w.status));
  if (goal === "ready" && forks.length) return forks.map((w) => `fork ${w.name} (${words(w.status)}: ${w.message})`).join("; ");
  const reason = view.status?.reason;
  return goal === "ready" ? `sandbox status ${reason || "unknown"}` : `sandbox removal (status ${reason || "unknown"})`;
}

/** Every failed resource of the view, with the failed step, its exit code, reason and log tail. */
export function describeFailures(view: pb.SandboxView): string {
  const failed = view.resources.filter((r) => r.failure || /Failed$/.test(r.status));
  const parts = failed.map((r) => describeFailure(r));
  if (!parts.length && view.status?.message) parts.push(view.status.message);
  return parts.join("\n");
}

export function describeFailure(r: pb.ResourceView): string {
  const f = r.failure;
  if (!f) return `resource ${r.name} ${words(r.status)}`;
  const step = r.steps.find((s) => s.name === f.step);
  const lines = [
    `resource ${r.name} failed at step ${f.step}${step?.phase ? ` (${step.phase})` : ""}`,
    `  exit code: ${f.exitCode ?? "none"}`,
    `  reason:    ${f.reason || "unknown"}`,
  ];
  if (f.message) lines.push(`  message:   ${f.message}`);
  const tail = f.logTail.replace(/\n$/, "");
  if (tail) lines.push(`  log tail:`, ...tail.split("\n").map((l) => `    | ${l}`));
  else lines.push(`  log tail:  (empty)`);
  return lines.join("\n");
}
