// One replica of ephemera: `pnpm start`'s entry (services/stack/dist/main.js) as a process
// group of its own, so that a test can SIGKILL the whole replica (the stack and every
// service it runs) at once, as a machine that dies would. Process-driver steps die with
// their runner (the launcher's parent-death signal); Kubernetes pods do not.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { waitFor } from "@ephemera/kit";
import { ephAt, type Eph } from "../support/eph.js";
import { ownedPids, RingBuffer } from "../support/processes.js";

const ROOT = join(__dirname, "..", "..");
const STACK = join(ROOT, "services", "stack", "dist", "main.js");
// The stack dies with the test process (a crashed jest leaves no replica behind); its services
// are its children and stop with it.
const PDEATHSIG = existsSync("/usr/bin/setpriv") ? ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--"] : [];

export class Replica {
  readonly log = new RingBuffer(20_000);
  readonly eph: Eph;
  private child?: ChildProcess;
  private exited?: Promise<void>;
  private upLine = false;

  constructor(readonly name: string, readonly api: string, private readonly env: NodeJS.ProcessEnv) {
    this.eph = ephAt(api);
  }

  get pid(): number | undefined {
    return this.child?.exitCode === null && this.child.signalCode === null ? this.child.pid : undefined;
  }

  /** Starts the stack and waits until it says it is up (every service answers its health check). */
  async start(timeoutMs: number): Promise<void> {
    this.upLine = false;
    const [command, ...prefix] = [...PDEATHSIG, process.execPath];
    // Its own process group (detached): kill() reaches the stack and each service at once.
    const child = spawn(command!, [...prefix, STACK], { env: this.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    const pid = child.pid!;
    ownedPids.add(pid);
    const onData = (d: Buffer) => {
      for (const line of d.toString().split("\n").filter(Boolean)) {
        this.log.push(line);
        if (line.includes("ephemera is up")) this.upLine = true;
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    this.exited = new Promise((resolve) => child.once("exit", (code, signal) => {
      ownedPids.delete(pid);
      this.log.push(`[harness] replica ${this.name} (pid ${pid}) exited: ${signal ?? `code ${code}`}`);
      resolve();
    }));
    try {
      await waitFor(() => {
        if (child.exitCode !== null) throw new Error(`replica ${this.name} exited ${child.exitCode} while starting`);
        return this.upLine;
      }, { timeoutMs, intervalMs: 100, what: `replica ${this.name} to be up` });
    } catch (err) {
      await this.kill();
      throw new Error(`${(err as Error).message}\n${this.tail(40)}`, { cause: err });
    }
  }

  /** SIGKILL to the replica's whole process group; resolves once the stack is gone and no process of the group is left. */
  async kill(): Promise<void> {
    const pid = this.pid;
    if (pid === undefined) return;
    try { process.kill(-pid, "SIGKILL"); } catch { /* already gone */ }
    await this.exited;
    await waitFor(() => !groupAlive(pid), { timeoutMs: 10_000, intervalMs: 50, what: `every process of replica ${this.name}'s group (${pid}) to be gone` });
  }

  /** SIGTERM to the stack (it stops its services), SIGKILL to the group after `graceMs`. */
  async stop(graceMs = 20_000): Promise<void> {
    const pid = this.pid;
    if (pid === undefined) return;
    this.child!.kill("SIGTERM");
    try {
      await waitFor(() => !groupAlive(pid), { timeoutMs: graceMs, intervalMs: 100, what: `replica ${this.name} to stop` });
    } catch {
      await this.kill();
    }
  }

  /** Lines of the replica's output mentioning any of `needles`, at most `max` (the last ones). */
  grep(needles: string[], max = 20): string {
    const lines = this.log.lines().filter((l) => needles.some((n) => l.line.includes(n))).slice(-max);
    return lines.map((l) => `  ${this.name}| ${l.line}`).join("\n");
  }

  /** Lines that say something went wrong (warn, error, fatal, a restart), at most `max`. */
  problems(max = 20): string {
    const lines = this.log.lines().filter((l) => /"level":(40|50|60)|restart|exited/.test(l.line)).slice(-max);
    return lines.map((l) => `  ${this.name}| ${l.line.slice(0, 400)}`).join("\n");
  }

  tail(n: number): string {
    return this.log.lines().slice(-n).map((l) => `  ${this.name}| ${l.line.slice(0, 400)}`).join("\n");
  }
}

/**
 * Whether a live process of the group `pgid` is left: read from /proc, since a killed
 * service waits as a zombie until whoever adopted it reaps it, and a signal 0 reaches that too.
 */
function groupAlive(pgid: number): boolean {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // After the command (in parentheses): state, ppid, pgrp.
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(pgrp) === pgid && state !== "Z") return true;
    } catch {
      // gone while we looked
    }
  }
  return false;
}
