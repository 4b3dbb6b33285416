// Private views for the process driver: inside the step's own mount namespace, a fresh
// per-run directory is bind-mounted over /tmp and over every directory that holds a
// declared input or output path, so two runs of one plugin never see each other's files.
// With a quota, each view is a tmpfs of that size instead, owned by the script's user.
import { execFile } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { join, posix } from "node:path";
import { promisify } from "node:util";
import type { StepPlan } from "./init.js";
import type { StepSandbox } from "./sandbox.js";

const run = promisify(execFile);

export const isWithin = (path: string, dir: string) => dir === "/" || path === dir || path.startsWith(`${dir}/`);

export class PrivateViewError extends Error {
  override readonly name = "PrivateViewError";
}

/**
 * Pure: the directories to mount over, ancestors before descendants (a nested directory
 * is then created inside its parent's fresh view), /tmp last. `runDir` holds the views'
 * sources, so it must stay reachable until /tmp is mounted.
 */
export function privateViewDirs(plan: Pick<StepPlan, "files" | "outputs">, runDir: string): string[] {
  const dirs = new Set<string>();
  for (const p of [...plan.files.map((f) => f.path), ...plan.outputs.map((o) => o.path)]) {
    const dir = posix.dirname(p);
    if (isWithin(dir, "/tmp")) continue;
    if (dir === "/") throw new PrivateViewError(`${p}: a file directly under / cannot get a private view; use a directory`);
    if (isWithin(runDir, dir)) throw new PrivateViewError(`${p}: its directory ${dir} holds the runner's work directory ${runDir}`);
    dirs.add(dir);
  }
  const depth = (d: string) => d.split("/").length;
  return [...[...dirs].sort((a, b) => depth(a) - depth(b) || a.localeCompare(b)), "/tmp"];
}

/** Mounts the views; must run inside a private mount namespace (the process driver's `unshare`). */
export async function mountPrivateViews(dirs: string[], runDir: string, sandbox: StepSandbox = {}): Promise<void> {
  for (const [i, dir] of dirs.entries()) {
    await mkdir(dir, { recursive: true });
    let argv: string[];
    if (sandbox.tmpSizeBytes) {
      const owner = sandbox.uid === undefined ? [] : [`uid=${sandbox.uid}`, `gid=${sandbox.gid ?? sandbox.uid}`];
      const options = [`size=${sandbox.tmpSizeBytes}`, `mode=${dir === "/tmp" ? "1777" : "0755"}`, ...owner, "nosuid", "nodev"];
      argv = ["-t", "tmpfs", "-o", options.join(","), "ephemera-step", dir];
    } else {
      const source = join(runDir, `view-${i}`);
      await mkdir(source, { recursive: true });
      argv = ["--bind", source, dir];
    }
    try {
      await run("mount", argv);
    } catch (err) {
      const stderr = (err as { stderr?: string }).stderr?.trim();
      throw new PrivateViewError(`cannot mount a private view over ${dir}: ${stderr || String(err)}`, { cause: err });
    }
  }
}

/**
 * After a script that ran as another user: symlinks in its views are no longer followed
 * (`nosymfollow`), so reading its outputs as root cannot be turned into reading a file
 * the script could not read itself (an output replaced by a link to /etc/shadow).
 */
export async function sealPrivateViews(dirs: string[], sandbox: StepSandbox): Promise<void> {
  const flags = sandbox.tmpSizeBytes ? "remount,bind,nosuid,nodev,nosymfollow" : "remount,bind,nosymfollow";
  for (const dir of dirs) {
    try {
      await run("mount", ["-o", flags, dir]);
    } catch (err) {
      const stderr = (err as { stderr?: string }).stderr?.trim();
      throw new PrivateViewError(`cannot stop following symlinks in ${dir}: ${stderr || String(err)}`, { cause: err });
    }
  }
}
