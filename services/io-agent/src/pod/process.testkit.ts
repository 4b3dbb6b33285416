// Processes the pod agent's tests start (the bundle, the entrypoint under sh): their output
// kept, their end awaited with a deadline, and killed by PID if a test gives up on them.
import { spawn } from "node:child_process";
import { waitFor } from "@ephemera/kit";

export interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface Running {
  pid: number;
  /** stdout and stderr so far. */
  output(): { stdout: string; stderr: string };
  kill(signal: NodeJS.Signals): void;
  /** The process's end; killed (SIGKILL) and rejected if it has not ended within `timeoutMs`. */
  ended(timeoutMs?: number): Promise<Ended>;
}

export function start(command: string, args: string[], env: NodeJS.ProcessEnv): Running {
  const child = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => { stdout += d.toString(); });
  child.stderr.on("data", (d: Buffer) => { stderr += d.toString(); });
  const closed = new Promise<Ended>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return {
    pid: child.pid ?? -1,
    output: () => ({ stdout, stderr }),
    kill: (signal) => { child.kill(signal); },
    ended: async (timeoutMs = 30_000) => {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          child.kill("SIGKILL");
          reject(new Error(`${command} ${args.join(" ")} did not end within ${timeoutMs} ms; stderr: ${stderr}`));
        }, timeoutMs);
      });
      try {
        return await Promise.race([closed, deadline]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

export const run = (command: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs?: number) => start(command, args, env).ended(timeoutMs);

/** Waits until the process has written `text` to stderr. */
export const stderrShows = (p: Running, text: string | RegExp, timeoutMs = 15_000) =>
  waitFor(() => (typeof text === "string" ? p.output().stderr.includes(text) : text.test(p.output().stderr)), {
    timeoutMs, intervalMs: 20, what: `stderr to show ${String(text)}`,
  });
