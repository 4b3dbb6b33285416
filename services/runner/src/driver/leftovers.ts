// Start-up cleanup of what a crashed runner left in its workdir: step processes still
// running (where no parent-death signal took them down) and run directories. A run
// directory holding a report is kept: the runner records that result from it (recover).
import { readFileSync, readdirSync } from "node:fs";
import { readdir, rm, stat } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { REPORT_FILE } from "@ephemera/io-agent";
import { waitFor, type Logger } from "@ephemera/kit";

export interface Leftovers {
  /** Host pids of step processes of this workdir that were killed. */
  killed: number[];
  /** Run directories removed (no report in them). */
  removed: string[];
  /** Run directories kept for their report. */
  kept: string[];
}

/**
 * Call once at runner start-up, before the driver takes work: nothing of this workdir
 * runs yet, so every step process found belongs to a runner that is gone.
 */
export async function cleanupLeftovers(workdir: string, logger: Logger, timeoutMs = 10_000): Promise<Leftovers> {
  const runs = join(resolve(workdir), "runs");
  const killed = stepProcessesUnder(runs);
  const ownGroup = processGroup(process.pid);
  for (const { pid, pgid } of killed) {
    // The group reaches the launcher; killing it (its pid namespace's init) takes the script's processes.
    // (The driver starts each step in a group of its own: never signal the runner's.)
    for (const target of pgid > 1 && pgid !== ownGroup ? [-pgid, pid] : [pid]) {
      try { process.kill(target, "SIGKILL"); } catch { /* gone already */ }
    }
  }
  if (killed.length) {
    await waitFor(() => killed.every(({ pid }) => !alive(pid)), { timeoutMs, what: "leftover step processes to end" });
    logger.warn({ pids: killed.map((p) => p.pid) }, "killed step processes a previous runner left running");
  }
  const removed: string[] = [];
  const kept: string[] = [];
  for (const entry of await readdir(runs, { withFileTypes: true }).catch(() => [])) {
    const dir = join(runs, entry.name);
    if (entry.isDirectory() && (await stat(join(dir, REPORT_FILE)).catch(() => undefined))?.isFile()) {
      kept.push(entry.name);
      continue;
    }
    await rm(dir, { recursive: true, force: true });
    removed.push(entry.name);
  }
  // detectIsolation's probe directories, if a runner died while probing.
  for (const entry of await readdir(workdir).catch(() => [])) {
    if (entry.startsWith("probe-")) await rm(join(workdir, entry), { recursive: true, force: true });
  }
  if (removed.length || kept.length) logger.info({ removed, kept }, "cleaned up run directories a previous runner left");
  return { killed: killed.map((p) => p.pid), removed, kept };
}

/**
 * Processes of the process driver for a run under `runs`: ephemera-launch, whose command
 * line names the run directory (outside and, as its init, inside the step's pid namespace,
 * which takes the script's processes with it when it is killed).
 */
function stepProcessesUnder(runs: string): Array<{ pid: number; pgid: number }> {
  const found: Array<{ pid: number; pgid: number }> = [];
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      if (basename(argv[0] ?? "") !== "ephemera-launch") continue;
      const runDir = argv[argv.indexOf("--rundir") + 1];
      if (!argv.includes("--rundir") || !runDir || !resolve(runDir).startsWith(`${runs}/`)) continue;
      found.push({ pid, pgid: processGroup(pid) });
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** /proc/<pid>/stat: fields after the command's closing parenthesis are state, ppid, pgrp. */
function processGroup(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
}

/** A zombie has ended; only its parent's wait is missing. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}
