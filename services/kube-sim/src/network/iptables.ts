// The host's iptables, through iptables-save and iptables-restore --noflush: each change is
// one batch (a chain declared in it is flushed and rewritten, the rest of the table is left
// as it is), so other users of the table (Docker, another kube-sim) never see half of it.
import { execFile } from "node:child_process";
import { retry } from "@ephemera/kit";

const TIMEOUT_MS = 20_000;

export class IptablesError extends Error {
  override readonly name = "IptablesError";
}

function run(command: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(command, args, { timeout: TIMEOUT_MS, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const why = (err as { killed?: boolean }).killed ? `no answer within ${TIMEOUT_MS} ms` : stderr.trim().split("\n").slice(-3).join("; ") || err.message;
      reject(new IptablesError(`${command}: ${why}`, { cause: err }));
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

export const save = (table: "nat" | "filter") => run("iptables-save", ["-t", table]);

/** Applies one batch; tried again a few times, as another writer of the table may hold its lock or have just changed it. */
export const restore = (rules: string) => retry(() => run("iptables-restore", ["--noflush", "-w", "5"], rules), { attempts: 4, baseMs: 100 });
