// How the process driver gives each step its own mount namespace: `unshare --mount` as
// root, or inside a user namespace (`--map-root-user`) otherwise. Probed once at start.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export class IsolationUnavailableError extends Error {
  override readonly name = "IsolationUnavailableError";
}

const CANDIDATES = [
  ["--mount", "--propagation", "private"],
  ["--map-root-user", "--mount", "--propagation", "private"],
];

/** The `unshare` command line (without the program) that gives a private mount namespace where bind mounts work. */
export async function detectIsolation(workdir: string): Promise<string[]> {
  const probe = await mkdtemp(join(workdir, "probe-"));
  const failures: string[] = [];
  try {
    for (const args of CANDIDATES) {
      try {
        await run("unshare", [...args, "--", "mount", "--bind", probe, probe], { timeout: 10_000 });
        return ["unshare", ...args];
      } catch (err) {
        const e = err as { stderr?: string; message: string };
        failures.push(`unshare ${args.join(" ")}: ${(e.stderr || e.message).trim()}`);
      }
    }
  } finally {
    await rm(probe, { recursive: true, force: true });
  }
  throw new IsolationUnavailableError(
    "the process driver needs a private mount namespace per step, and none could be made here " +
    "(run the runner as root, or allow unprivileged user namespaces):\n  " + failures.join("\n  "),
  );
}
