// Keeps one child process running: when it dies for any reason (a crash, a signal, even
// exit 0) before stop(), it is spawned again after an exponential backoff.
import type { ChildProcess } from "node:child_process";
import { delay } from "@ephemera/kit";
import { nextRestart, type Backoff } from "./backoff.js";

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Death {
  exit: Exit;
  /** How long the process ran. */
  upMs: number;
  /** Consecutive short runs so far, this one included. */
  attempt: number;
  /** When the process will be spawned again. */
  delayMs: number;
}

export class Supervisor {
  private child: ChildProcess | undefined;
  private readonly stopping = new AbortController();
  private readonly loop: Promise<void>;
  private restartCount = 0;

  constructor(
    private readonly spawnChild: () => ChildProcess,
    private readonly backoff: Backoff,
    private readonly onDeath: (death: Death) => void,
    private readonly now: () => number = Date.now,
  ) {
    this.loop = this.run();
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get restarts(): number {
    return this.restartCount;
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the child is gone and no restart can follow. */
  async stop(graceMs: number): Promise<void> {
    this.stopping.abort();
    const child = this.child;
    let kill: NodeJS.Timeout | undefined;
    if (child && child.exitCode === null && child.signalCode === null) {
      kill = setTimeout(() => child.kill("SIGKILL"), graceMs);
      child.kill("SIGTERM");
    }
    await this.loop;
    clearTimeout(kill);
  }

  private async run(): Promise<void> {
    let attempt = 0;
    for (;;) {
      const started = this.now();
      const child = this.spawnChild();
      this.child = child;
      const exit = await exited(child);
      this.child = undefined;
      if (this.stopping.signal.aborted) return;
      const upMs = this.now() - started;
      const next = nextRestart(attempt, upMs, this.backoff);
      attempt = next.attempt;
      this.onDeath({ exit, upMs, ...next });
      await delay(next.delayMs, this.stopping.signal);
      if (this.stopping.signal.aborted) return;
      this.restartCount += 1;
    }
  }
}

function exited(child: ChildProcess): Promise<Exit> {
  return new Promise((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
    // A process that could not be spawned emits only "error"; a failed kill() emits "error" too
    // and leaves the process running, so only the first case ends the run.
    child.on("error", () => {
      if (child.pid === undefined) resolve({ code: null, signal: null });
    });
  });
}
