// How the process driver isolates a step: its own mount namespace (private views) and,
// where possible, its own pid namespace whose init is the step program, so every process
// of the step ends with it. `setpriv --pdeathsig` ties the step to the runner: if the
// runner dies, its steps die too instead of running on unrecorded. Probed once at start.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export class IsolationUnavailableError extends Error {
  override readonly name = "IsolationUnavailableError";
}

export interface Isolation {
  /** Command line prefix; the step program and its arguments follow. */
  command: string[];
  /** Every process of a step ends when the step program does. */
  pidNamespace: boolean;
  /** The step is killed if the runner dies. */
  diesWithRunner: boolean;
}

const MOUNT_NS = ["--mount", "--propagation", "private"];
const PID_NS = ["--pid", "--fork", "--kill-child", "--mount-proc"];
const AS_ROOT: string[] = [];
const IN_USER_NS = ["--map-root-user"];

const CANDIDATES = [
  { flags: [...AS_ROOT, ...MOUNT_NS, ...PID_NS], pidNamespace: true },
  { flags: [...IN_USER_NS, ...MOUNT_NS, ...PID_NS], pidNamespace: true },
  { flags: [...AS_ROOT, ...MOUNT_NS], pidNamespace: false },
  { flags: [...IN_USER_NS, ...MOUNT_NS], pidNamespace: false },
];

const PDEATHSIG = ["setpriv", "--pdeathsig", "KILL", "--"];

/** The best isolation this machine allows; fails when not even a private mount namespace can be made. */
export async function detectIsolation(workdir: string): Promise<Isolation> {
  const diesWithRunner = await succeeds([...PDEATHSIG, "true"]);
  const prefix = diesWithRunner ? PDEATHSIG : [];
  const probe = await mkdtemp(join(workdir, "probe-"));
  const failures: string[] = [];
  try {
    for (const c of CANDIDATES) {
      const command = [...prefix, "unshare", ...c.flags];
      const error = await failure([...command, "--", "mount", "--bind", probe, probe]);
      if (!error) return { command, pidNamespace: c.pidNamespace, diesWithRunner };
      failures.push(`${command.join(" ")}: ${error}`);
    }
  } finally {
    await rm(probe, { recursive: true, force: true });
  }
  throw new IsolationUnavailableError(
    "the process driver needs a private mount namespace per step, and none could be made here " +
    "(run the runner as root, or allow unprivileged user namespaces):\n  " + failures.join("\n  "),
  );
}

async function failure(argv: string[]): Promise<string | undefined> {
  try {
    await run(argv[0]!, argv.slice(1), { timeout: 10_000 });
    return undefined;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    return (e.stderr || e.message).trim();
  }
}

const succeeds = async (argv: string[]) => (await failure(argv)) === undefined;
