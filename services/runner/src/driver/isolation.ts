// How the process driver isolates a step: ephemera-launch (native/ephemera-launch.c) puts
// it in its own mount namespace (private views) and, where possible, its own pid
// namespace whose init is the launcher, so every process of the step ends with it. The
// launcher dies with the runner (a parent-death signal), and the step with it. Probed
// once at start: the best set of flags this machine allows, and whether with them a step
// can have a network namespace of its own (network.ts decides which).
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export class IsolationUnavailableError extends Error {
  override readonly name = "IsolationUnavailableError";
}

export interface Isolation {
  /** The launcher's isolation flags (--pidns, --userns). */
  flags: string[];
  /** Every process of a step ends when the step does. */
  pidNamespace: boolean;
  /** A step can be given a network namespace of its own (ephemera-launch --newnet works with these flags). */
  netNamespace: boolean;
  /** Why not, when not. */
  netNamespaceError?: string;
}

const CANDIDATES = [
  { flags: ["--pidns"], pidNamespace: true },
  { flags: ["--pidns", "--userns"], pidNamespace: true },
  { flags: [], pidNamespace: false },
  { flags: ["--userns"], pidNamespace: false },
];

/** The best isolation this machine allows; fails when not even a private mount namespace can be made. */
export async function detectIsolation(workdir: string, launcher: string): Promise<Isolation> {
  const probe = await mkdtemp(join(workdir, "probe-"));
  const failures: string[] = [];
  try {
    await writeFile(join(probe, "script"), "#!/bin/sh\nexit 0\n");
    for (const c of CANDIDATES) {
      // A private /tmp, as every step has: the probe's script never lands in the host's.
      const status = await launched([launcher, "--rundir", probe, ...c.flags, "--view", "/tmp"], join(probe, "status"));
      if (status === "exit 0") {
        const net = await launched([launcher, "--rundir", probe, ...c.flags, "--newnet", "--view", "/tmp"], join(probe, "status"));
        return { flags: c.flags, pidNamespace: c.pidNamespace, netNamespace: net === "exit 0", ...(net === "exit 0" ? {} : { netNamespaceError: net }) };
      }
      failures.push(`ephemera-launch ${c.flags.join(" ")}: ${status}`);
    }
  } finally {
    await rm(probe, { recursive: true, force: true });
  }
  throw new IsolationUnavailableError(
    "the process driver needs a private mount namespace per step, and none could be made here " +
    "(run the runner as root, or allow unprivileged user namespaces):\n  " + failures.join("\n  "),
  );
}

async function launched(argv: string[], statusFile: string): Promise<string> {
  await rm(statusFile, { force: true });
  try {
    await run(argv[0]!, argv.slice(1), { timeout: 10_000, env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" } });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    const said = await readFile(statusFile, "utf8").catch(() => "");
    return (said || e.stderr || e.message).trim();
  }
  return (await readFile(statusFile, "utf8").catch(() => "no status")).trim();
}
