// Private views for the process driver: inside the step's own mount namespace, a fresh
// per-run directory is bind-mounted over /tmp and over every directory that holds a
// declared input or output path, so two runs of one plugin never see each other's files.
// With a quota, each view is a tmpfs of that size instead, owned by the script's user.
import { execFile } from "node:child_process";
import { mkdir, readFile } from "node:fs/promises";
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

/** A remount that makes one mount point read-only, keeping its other per-mount flags. */
export interface ReadOnlyRemount {
  path: string;
  /** For `mount -o`: remount,bind,ro and the flags the mount had (nosuid, nodev, noexec, atime). */
  options: string;
}

/** `\040`-style escapes of /proc/self/mountinfo (space, tab, newline, backslash). */
const unescapeMountPath = (p: string) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

/**
 * Pure: from /proc/self/mountinfo, the remounts that leave every mount of the step's
 * namespace read-only but those at or under `keep` (its views and run directory; mounts
 * under a view are hidden by it anyway). A mount point listed twice (one mounted over the
 * other) counts once, as the one on top. Mounts already read-only are left alone.
 */
export function readOnlyRemounts(mountinfo: string, keep: string[]): ReadOnlyRemount[] {
  const top = new Map<string, string[]>();
  for (const line of mountinfo.split("\n")) {
    const fields = line.split(" ");
    if (fields.length < 7) continue;
    top.set(unescapeMountPath(fields[4]!), fields[5]!.split(","));
  }
  const remounts: ReadOnlyRemount[] = [];
  for (const [path, flags] of top) {
    if (flags.includes("ro") || keep.some((k) => isWithin(path, k) && k !== "/")) continue;
    remounts.push({ path, options: ["remount", "bind", "ro", ...flags.filter((f) => f !== "rw")].join(",") });
  }
  return remounts;
}

/**
 * Inside the step's mount namespace: every mount read-only but `keep`, so the script can
 * write nowhere on the host (world-writable /var/tmp and /dev/shm included), only its
 * views. One shell runs the remounts; the first that fails stops it, named.
 */
export async function makeHostReadOnly(keep: string[]): Promise<void> {
  const remounts = readOnlyRemounts(await readFile("/proc/self/mountinfo", "utf8"), keep);
  if (!remounts.length) return;
  const script = 'while [ $# -gt 0 ]; do mount -o "$1" -- "$2" || { echo "at $2" >&2; exit 1; }; shift 2; done';
  try {
    await run("sh", ["-c", script, "sh", ...remounts.flatMap((r) => [r.options, r.path])]);
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr?.trim().replace(/\n/g, "; ");
    throw new PrivateViewError(
      `cannot make the host filesystem read-only for the script (${stderr || String(err)}); ` +
      "EPHEMERA_STEP_HOST_READONLY=false on the runner leaves it writable", { cause: err },
    );
  }
}
