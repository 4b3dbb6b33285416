// The resident launcher: `ephemera-launch --serve` (native/launch-server.c), started once by
// the process driver, starts each step for it. A step is then forked from that small process
// instead of from the runner, whose fork copies the page tables of its whole heap: about 2 ms
// of the runner's CPU per step, the largest single cost of a step in the runner. The step is
// the same ephemera-launch, with the same arguments and environment; its output comes back
// over the launcher's stdout, framed, all of it before its end.
import { spawn, type ChildProcess } from "node:child_process";
import { constants } from "node:os";
import type { Logger } from "@ephemera/kit";

/** How a step's launcher ended: its exit code, or the signal that killed it; `error` when it could not start or was lost. */
export interface LaunchExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}

/** A step started by the resident launcher. */
export interface LaunchedStep {
  /** Its pid, which is also its process group's id; rejects when it could not be started. */
  pid: Promise<number>;
  /** Settles once its output has all been passed to `onOutput`. */
  exit: Promise<LaunchExit>;
}

interface Pending {
  onOutput: (chunk: Buffer) => void;
  started: (pid: number) => void;
  failed: (err: Error) => void;
  ended: (exit: LaunchExit) => void;
}

/** Signal numbers (as the frames carry them) to names. */
const SIGNALS = new Map(Object.entries(constants.signals).map(([name, n]) => [n, name as NodeJS.Signals]));

export class ResidentLauncher {
  private child?: ChildProcess;
  private nextId = 1;
  private readonly steps = new Map<number, Pending>();
  private buffered = Buffer.alloc(0);

  constructor(private readonly path: string, private readonly logger: Logger) {}

  /** Starts a step: `args` for ephemera-launch, `env` its whole environment. */
  start(args: string[], env: Record<string, string>, onOutput: (chunk: Buffer) => void): LaunchedStep {
    const child = this.running();
    const id = this.nextId++;
    let started!: (pid: number) => void;
    let failed!: (err: Error) => void;
    let ended!: (exit: LaunchExit) => void;
    const pid = new Promise<number>((resolve, reject) => { started = resolve; failed = reject; });
    const exit = new Promise<LaunchExit>((resolve) => { ended = resolve; });
    pid.catch(() => undefined);
    this.steps.set(id, { onOutput, started, failed, ended });
    const strings = [...args, "", ...Object.entries(env).map(([k, v]) => `${k}=${v}`)];
    const body = Buffer.from(strings.map((s) => `${s}\0`).join(""), "utf8");
    const head = Buffer.alloc(8);
    head.writeUInt32LE(body.length + 4, 0);
    head.writeUInt32LE(id, 4);
    child.stdin!.write(Buffer.concat([head, body]));
    return { pid, exit };
  }

  /** Stops the launcher; the steps it started die with it. */
  close(): void {
    const child = this.child;
    this.child = undefined;
    child?.kill("SIGTERM");
  }

  private running(): ChildProcess {
    if (this.child) return this.child;
    // With no environment of its own: each step brings its whole environment in its request,
    // and the runner's (credentials among it) has no business in a process that forks steps.
    const child = spawn(this.path, ["--serve"], { stdio: ["pipe", "pipe", "inherit"], env: {} });
    this.child = child;
    this.buffered = Buffer.alloc(0);
    child.stdout!.on("data", (chunk: Buffer) => this.received(chunk));
    child.stdin!.on("error", () => undefined); // its end: reported by "exit" below
    const gone = (why: string) => {
      if (this.child === child) this.child = undefined;
      const lost = new Error(`the resident step launcher ${why}`);
      if (this.steps.size) this.logger.error({ steps: this.steps.size, err: lost }, "resident step launcher lost; its steps end with it");
      for (const step of this.steps.values()) {
        step.failed(lost);
        step.ended({ code: null, signal: null, error: lost });
      }
      this.steps.clear();
    };
    child.once("error", (err) => gone(`cannot run: ${err.message}`));
    // "close", not "exit": the frames still in its stdout are read first.
    child.once("close", (code, signal) => gone(signal ? `was killed by ${signal}` : `exited with code ${code}`));
    return child;
  }

  private received(chunk: Buffer): void {
    let data = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
    while (data.length >= 9) {
      const length = data.readUInt32LE(5);
      if (data.length < 9 + length) break;
      const type = String.fromCharCode(data[0]!);
      const id = data.readUInt32LE(1);
      const step = this.steps.get(id);
      const payload = data.subarray(9, 9 + length);
      data = data.subarray(9 + length);
      if (!step) continue;
      if (type === "P") step.started(payload.readUInt32LE(0));
      else if (type === "O") step.onOutput(Buffer.from(payload));
      else if (type === "X") {
        const code = payload.readInt32LE(0);
        const signal = payload.readInt32LE(4);
        this.steps.delete(id);
        step.ended({ code: code < 0 ? null : code, signal: signal ? SIGNALS.get(signal) ?? null : null });
      } else if (type === "E") {
        const error = new Error(`cannot start the step: ${payload.toString("utf8")}`);
        this.steps.delete(id);
        step.failed(error);
        step.ended({ code: null, signal: null, error });
      }
    }
    this.buffered = Buffer.from(data);
  }
}

