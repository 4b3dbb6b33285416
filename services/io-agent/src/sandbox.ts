// How the step program confines the script beyond its mount namespace: the user it runs
// as and the size of its private writable filesystems. Sent by the process driver in the
// step program's config, next to the StepProgramConfig fields.
import { lchown, readdir, statfs } from "node:fs/promises";
import { join } from "node:path";

export interface StepSandbox {
  /** The script runs as this user and group (the agents stay root); absent = the step program's own. */
  uid?: number;
  gid?: number;
  /** Every private view (and /tmp) is a tmpfs of this many bytes; absent = bind-mounted run-directory views, no quota. */
  tmpSizeBytes?: number;
  /** Every other mount of the step's namespace is read-only while the script runs. */
  readOnlyHost?: boolean;
}

/** Gives a tree to the script's user: the views it may write and the input files it must read. */
export async function chownTree(path: string, uid: number, gid: number): Promise<void> {
  await lchown(path, uid, gid);
  const entries = await readdir(path, { withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    if (e.isDirectory()) await chownTree(join(path, e.name), uid, gid);
    else await lchown(join(path, e.name), uid, gid);
  }
}

/** The views (of `dirs`) a failed script left full: named in its failure, since ENOSPC is all the script itself saw. */
export async function fullViews(dirs: string[], sandbox: StepSandbox): Promise<string[]> {
  if (!sandbox.tmpSizeBytes) return [];
  const full: string[] = [];
  for (const dir of dirs) {
    const s = await statfs(dir).catch(() => undefined);
    if (s && s.bavail * s.bsize < 64 * 1024) full.push(dir);
  }
  return full;
}

export const mib = (bytes: number) => `${Math.round((bytes / (1024 * 1024)) * 100) / 100} MiB`;
