// Child processes a test owns: spawned with their output kept in a ring buffer, stopped by
// PID with a deadline, tied to the test process (they die with it), and told apart from
// the processes a test did not start when it looks for leftovers in /proc.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { createInterface } from "node:readline";
import { waitFor } from "@ephemera/kit";

/** The last `capacity` lines of a process's output, each stamped with when it was read. */
export class RingBuffer {
  private readonly items: Array<{ at: number; line: string }> = [];

  constructor(readonly capacity = 2000) {}

  push(line: string, at = Date.now()): void {
    this.items.push({ at, line });
    if (this.items.length > this.capacity) this.items.splice(0, this.items.length - this.capacity);
  }

  lines(since = 0): Array<{ at: number; line: string }> {
    return this.items.filter((i) => i.at >= since);
  }
}

export interface Exit { code: number | null; signal: NodeJS.Signals | null }

/** PIDs of every process the tests of this process started and that has not exited yet. */
export const ownedPids = new Set<number>();

// `setpriv --pdeathsig KILL`: the child is killed if the test process dies, so a crashed or
// killed jest never leaves a NATS, a Redis or a service behind.
const PDEATHSIG = existsSync("/usr/bin/setpriv") ? ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--"] : [];

export interface SpawnOptions {
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Where the output goes; pass the same buffer to keep one history across restarts. */
  log?: RingBuffer;
  onLine?: (line: string) => void;
  onExit?: (exit: Exit) => void;
}

export class ManagedProcess {
  readonly log: RingBuffer;
  readonly exited: Promise<Exit>;
  exit?: Exit;
  /** Set before the test stops it, so an exit it asked for is not taken for a crash. */
  expectingExit = false;
  private readonly child: ChildProcess;

  constructor(readonly name: string, options: SpawnOptions) {
    this.log = options.log ?? new RingBuffer();
    const [command, ...prefix] = [...PDEATHSIG, options.command];
    this.child = spawn(command!, [...prefix, ...options.args], {
      env: options.env ?? process.env, cwd: options.cwd, stdio: ["ignore", "pipe", "pipe"],
    });
    const pid = this.child.pid;
    if (pid !== undefined) ownedPids.add(pid);
    for (const stream of [this.child.stdout!, this.child.stderr!]) {
      createInterface({ input: stream }).on("line", (line) => {
        this.log.push(line);
        options.onLine?.(line);
      });
    }
    this.exited = new Promise<Exit>((resolve) => {
      this.child.once("error", (err) => {
        this.log.push(`[harness] ${name} could not be started: ${err.message}`);
        this.exit = { code: -1, signal: null };
        resolve(this.exit);
      });
      this.child.once("exit", (code, signal) => {
        if (pid !== undefined) ownedPids.delete(pid);
        this.exit ??= { code, signal };
        this.log.push(`[harness] ${name} (pid ${pid}) exited: ${describeExit(this.exit)}`);
        options.onExit?.(this.exit);
        resolve(this.exit);
      });
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.exit === undefined;
  }

  /** Sends `signal` and waits for the exit; SIGKILL after `graceMs` if it is still there. */
  async stop(signal: NodeJS.Signals = "SIGTERM", graceMs = 10_000): Promise<Exit> {
    if (this.exit) return this.exit;
    this.expectingExit = true;
    this.child.kill(signal);
    try {
      await waitFor(() => this.exit, { timeoutMs: graceMs, intervalMs: 20, what: `${this.name} (pid ${this.pid}) to exit after ${signal}` });
    } catch {
      this.log.push(`[harness] ${this.name} still running ${graceMs} ms after ${signal}: SIGKILL`);
      this.child.kill("SIGKILL");
      await waitFor(() => this.exit, { timeoutMs: 5_000, intervalMs: 20, what: `${this.name} (pid ${this.pid}) to exit after SIGKILL` });
    }
    return this.exit!;
  }
}

export function describeExit(exit: Exit): string {
  return exit.signal ? `killed by ${exit.signal}` : `code ${exit.code}`;
}

export interface ProcessInfo { pid: number; ppid: number; cmdline: string; environ: string[] }

/**
 * Every process (but this one and those `ownedPids` lists) whose command line or
 * environment contains `text`: with a unique prefix in the paths and variables a stack
 * hands its steps, that is every process a step left behind.
 */
export function processesMentioning(text: string, exclude: Iterable<number> = ownedPids): ProcessInfo[] {
  const skip = new Set([process.pid, ...exclude]);
  const found: ProcessInfo[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (skip.has(pid)) continue;
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
      const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").filter(Boolean);
      if (!cmdline.includes(text) && !environ.some((e) => e.includes(text))) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      found.push({ pid, ppid, cmdline, environ });
    } catch {
      // gone while we looked, or a kernel thread: not a leftover
    }
  }
  return found;
}
