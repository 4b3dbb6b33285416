// The built `eph` as a process against a given API address, every call bound by a deadline
// (the process is killed when it passes), its PID known to the leftover checks.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { ownedPids } from "./processes.js";

const CLI = join(__dirname, "..", "..", "services", "cli", "dist", "bundle", "main.js");

export interface EphResult { args: string[]; code: number; stdout: string; stderr: string }

export type Eph = (args: string[], opts?: { timeoutMs?: number; cwd?: string }) => Promise<EphResult>;

export function ephAt(api: string): Eph {
  return (args, { timeoutMs = 20_000, cwd } = {}) => new Promise<EphResult>((resolve) => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("EPHEMERA_")));
    const p = spawn(process.execPath, [CLI, "--api", api, ...args], { env, cwd, stdio: ["ignore", "pipe", "pipe"], timeout: timeoutMs, killSignal: "SIGKILL" });
    if (p.pid !== undefined) ownedPids.add(p.pid);
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    p.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    p.on("error", (err) => resolve({ args, code: -1, stdout, stderr: `${stderr}${err.message}` }));
    p.on("close", (code, signal) => {
      if (p.pid !== undefined) ownedPids.delete(p.pid);
      resolve({ args, code: code ?? -1, stdout, stderr: signal ? `${stderr}[killed by ${signal} after ${timeoutMs} ms]` : stderr });
    });
  });
}

/** Like `eph`, but a non-zero exit is an error that shows the command and its output. */
export async function ephOk(eph: Eph, args: string[], opts?: { timeoutMs?: number }): Promise<EphResult> {
  const r = await eph(args, opts);
  if (r.code !== 0) throw new Error(`eph ${args.join(" ")} exited ${r.code}\nstdout: ${r.stdout.trim()}\nstderr: ${r.stderr.trim()}`);
  return r;
}
