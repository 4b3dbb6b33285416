// The daemon's state on disk, in the state dir ($EPHEMERA_HOME/local, else ~/.ephemera/local):
// state.json (what `eph local status` shows, replaced atomically on each change), daemon.log
// (the background daemon's output), daemon.lock (one daemon per state dir) and control.sock
// (control.ts: the daemon answering other eph commands).
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import type { Served } from "./tunnel.js";

export type Phase = "connecting" | "connected" | "reconnecting" | "failed";

export interface DaemonState {
  pid: number;
  tunnel: string;
  phase: Phase;
  /** When the daemon entered this phase (ISO 8601). */
  since: string;
  sessionId?: string;
  /** Reconnect attempts since the session was lost. */
  attempt?: number;
  lastError?: string;
  serving: Served[];
  proxies: { http?: string; socks?: string };
  /** Host names mapped in the hosts file, each to its loopback address. */
  hosts?: Array<{ names: string[]; address: string; ports: number[] }>;
  /** Why host entries are not there (no root, say). */
  hostsError?: string;
  /** The hosts file holding them (--hosts), for a disconnect after the daemon was killed. */
  hostsFile?: string;
  log: string;
}

export function stateDir(env: Record<string, string | undefined>): string {
  return env["EPHEMERA_HOME"] ? join(env["EPHEMERA_HOME"], "local") : join(homedir(), ".ephemera", "local");
}

export const statePath = (dir: string) => join(dir, "state.json");
export const logPath = (dir: string) => join(dir, "daemon.log");
const lockPath = (dir: string) => join(dir, "daemon.lock");

export function readState(dir: string): DaemonState | undefined {
  try {
    return JSON.parse(readFileSync(statePath(dir), "utf8")) as DaemonState;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Error(`cannot read ${statePath(dir)}: ${(err as Error).message}`, { cause: err });
  }
}

/** Written beside and renamed over: a reader sees the old state or the new, never half of one. */
export function writeState(dir: string, state: DaemonState): void {
  const tmp = `${statePath(dir)}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, statePath(dir));
}

export function removeState(dir: string): void {
  rmSync(statePath(dir), { force: true });
}

/**
 * Whether a process with this pid runs (EPERM: it does, another user's). A zombie does not:
 * in a container whose pid 1 reaps no orphans, a killed daemon stays one.
 */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
  try {
    return !/^\d+ \(.*\) Z/s.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return true;
  }
}

/**
 * Takes the state dir for this process: undefined when taken, else the pid of the live
 * daemon that holds it. A lock whose process is gone (killed with SIGKILL) is taken over.
 */
export function lock(dir: string): number | undefined {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (let tries = 0; tries < 2; tries++) {
    try {
      const fd = openSync(lockPath(dir), "wx", 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return undefined;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const holder = Number(readFileSync(lockPath(dir), "utf8").trim());
      if (holder > 0 && holder !== process.pid && alive(holder)) return holder;
      rmSync(lockPath(dir), { force: true });
    }
  }
  throw new Error(`cannot lock ${lockPath(dir)}: another eph local connect is starting`);
}

export function unlock(dir: string): void {
  rmSync(lockPath(dir), { force: true });
}
