// One job's process: the script (written to a temporary file, run through its `#!` line) or
// the command, in the agent's environment (the main container's) plus the assignment's, in
// a process group of its own so that stopping it stops what it started. Its stdout and
// stderr are handed on in the order they arrive, and reading pauses while the receiver
// is behind (backpressure). Stopped with SIGTERM, then SIGKILL after a grace.
import { spawn, type ChildProcess } from "node:child_process";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";

export type OutputStream = "stdout" | "stderr";

/** Where the output goes: `write` answers false when the receiver is behind; `drained` resolves when it has caught up. */
export interface OutputSink {
  write(stream: OutputStream, data: Buffer): boolean;
  drained(): Promise<void>;
}

export interface JobCommand {
  script: string;
  command: string[];
  env: Record<string, string>;
}

export interface Exited {
  /** The exit code; 128 + the signal's number when a signal ended it. */
  code: number;
  signal: NodeJS.Signals | null;
}

export interface RunningJob {
  /** SIGTERM to the job's process group, SIGKILL to it after `graceMs` if it still runs. Once. */
  stop(graceMs: number): void;
  readonly exited: Promise<Exited>;
}

/** The biggest piece of output one message carries. */
export const OUTPUT_CHUNK_BYTES = 64 * 1024;

/** How long after the job's process exits what it left holding its output may run. */
const LEFTOVER_GRACE_MS = 1000;

/** Thrown when the job cannot be started at all (no such command, no script and no command). */
export class StartError extends Error {
  override readonly name = "StartError";
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15, SIGABRT: 6, SIGSEGV: 11, SIGPIPE: 13 };

export async function startJob(job: JobCommand, baseEnv: NodeJS.ProcessEnv, sink: OutputSink, cwd = process.cwd()): Promise<RunningJob> {
  let scratch: string | undefined;
  let file: string;
  let args: string[];
  if (job.script) {
    scratch = await mkdtemp(join(tmpdir(), "ephemera-job-"));
    file = join(scratch, "script");
    await writeFile(file, job.script, { mode: 0o700 });
    await chmod(file, 0o700);
    // The kernel honours `#!`; a script without one is a POSIX shell script.
    args = job.script.startsWith("#!") ? [] : [file];
    if (!job.script.startsWith("#!")) file = "/bin/sh";
  } else if (job.command.length) {
    [file, ...args] = job.command as [string, ...string[]];
  } else {
    throw new StartError("the job has neither a script nor a command");
  }
  const cleanup = () => (scratch ? rm(scratch, { recursive: true, force: true }) : Promise.resolve());
  const child = spawn(file, args, { cwd, env: { ...baseEnv, ...job.env }, stdio: ["ignore", "pipe", "pipe"], detached: true });
  const spawned = await new Promise<Error | undefined>((resolve) => {
    child.once("spawn", () => resolve(undefined));
    child.once("error", (err) => resolve(err));
  });
  if (spawned) {
    await cleanup();
    throw new StartError(`cannot start ${job.script ? "the script" : job.command[0]}: ${(spawned as NodeJS.ErrnoException).code ?? spawned.message}`);
  }
  pump(child, sink);
  let stopping = false;
  let killTimer: NodeJS.Timeout | undefined;
  let leftovers: NodeJS.Timeout | undefined;
  // What the job left running in its group once it exited (a daemon holding its stdout) is killed.
  child.once("exit", () => { leftovers = setTimeout(() => signalGroup("SIGKILL"), LEFTOVER_GRACE_MS); });
  const exited = new Promise<Exited>((resolve) => {
    child.once("close", (code, signal) => {
      clearTimeout(killTimer);
      clearTimeout(leftovers);
      signalGroup("SIGKILL");
      void cleanup().finally(() => resolve({ code: code ?? 128 + (SIGNALS[signal ?? ""] ?? 0), signal }));
    });
  });
  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      // The group is gone already.
    }
  };
  return {
    exited,
    stop(graceMs) {
      if (stopping) return;
      stopping = true;
      signalGroup("SIGTERM");
      killTimer = setTimeout(() => signalGroup("SIGKILL"), graceMs);
    },
  };
}

/** stdout and stderr to the sink as they come, in pieces of at most OUTPUT_CHUNK_BYTES; both pause while it is behind. */
function pump(child: ChildProcess, sink: OutputSink): void {
  const streams: Array<[OutputStream, Readable]> = [["stdout", child.stdout!], ["stderr", child.stderr!]];
  let waiting = false;
  const onData = (stream: OutputStream) => (data: Buffer) => {
    let behind = false;
    for (let at = 0; at < data.length; at += OUTPUT_CHUNK_BYTES) {
      if (!sink.write(stream, data.subarray(at, at + OUTPUT_CHUNK_BYTES))) behind = true;
    }
    if (!behind || waiting) return;
    waiting = true;
    for (const [, s] of streams) s.pause();
    void sink.drained().then(() => {
      waiting = false;
      for (const [, s] of streams) s.resume();
    });
  };
  for (const [name, s] of streams) s.on("data", onData(name));
}
