// Private views for the process driver: inside the step's own mount namespace, a fresh
// per-run directory is bind-mounted over /tmp (and /dev/shm, where the host has one) and
// over every directory that holds a declared input or output path, so two runs of one
// plugin never see each other's files.
// With a quota, each view is a tmpfs of that size instead, owned by the script's user.
// The runner's ephemera-launch mounts them; this decides which.
import { posix } from "node:path";
import type { StepPlan } from "./init.js";

export const isWithin = (path: string, dir: string) => dir === "/" || path === dir || path.startsWith(`${dir}/`);

export class PrivateViewError extends Error {
  override readonly name = "PrivateViewError";
}

/**
 * Pure: the directories to mount over, ancestors before descendants (a nested directory
 * is then created inside its parent's fresh view), then `roots`: directories every step
 * gets a private view of, /tmp first (a declared path within one needs no view of its
 * own). The launcher reaches `runDir` (the views' sources) through a descriptor it opened
 * first, so a root may hide it: the process driver's run directories on /dev/shm are.
 */
export function privateViewDirs(plan: Pick<StepPlan, "files" | "outputs">, runDir: string, roots: readonly string[] = ["/tmp"]): string[] {
  const dirs = new Set<string>();
  for (const p of [...plan.files.map((f) => f.path), ...plan.outputs.map((o) => o.path)]) {
    const dir = posix.dirname(p);
    if (roots.some((r) => isWithin(dir, r))) continue;
    if (dir === "/") throw new PrivateViewError(`${p}: a file directly under / cannot get a private view; use a directory`);
    if (isWithin(runDir, dir)) throw new PrivateViewError(`${p}: its directory ${dir} holds the runner's work directory ${runDir}`);
    dirs.add(dir);
  }
  const depth = (d: string) => d.split("/").length;
  return [...[...dirs].sort((a, b) => depth(a) - depth(b) || a.localeCompare(b)), ...roots];
}
