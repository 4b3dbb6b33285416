// The resident launcher against the real ephemera-launch: steps forked from it, not from the
// runner; their output passed on whole and before their end; their groups; its loss.
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createLogger, waitFor } from "@ephemera/kit";
import { detectIsolation, type Isolation } from "./isolation.js";
import { ResidentLauncher, type LaunchExit } from "./resident.js";

const LAUNCHER = join(__dirname, "..", "..", "dist", "ephemera-launch");
const logger = createLogger("runner", "silent");

/** A process's parent, from /proc/<pid>/stat (the fields after the command's closing parenthesis: state, ppid). */
const parentOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
const alive = (pid: number) => existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");

describe("the resident launcher (ephemera-launch --serve)", () => {
  let base: string;
  let isolation: Isolation;
  let launcher: ResidentLauncher;

  beforeAll(async () => {
    base = await mkdtemp("/var/tmp/resident-");
    isolation = await detectIsolation(base, LAUNCHER);
  });
  afterAll(async () => {
    await rm(base, { recursive: true, force: true });
  });
  beforeEach(() => {
    launcher = new ResidentLauncher(LAUNCHER, logger);
  });
  afterEach(() => launcher.close());

  /** A run directory holding `script`, and the launcher's arguments for it. */
  const step = async (name: string, script: string) => {
    const runDir = join(base, name);
    await mkdir(join(runDir, "in"), { recursive: true });
    await writeFile(join(runDir, "script"), script, { mode: 0o700 });
    return { runDir, args: ["--rundir", runDir, ...isolation.flags, "--view", "/tmp"] };
  };
  const env = { PATH: process.env["PATH"] ?? "/usr/bin:/bin" };

  it("starts each step as ephemera-launch with its arguments, a child of the launcher and not of the runner, in a group of its own", async () => {
    const { runDir, args } = await step("shape", "#!/bin/sh\necho running\nsleep 30\n");
    const out: Buffer[] = [];
    const launched = launcher.start(args, env, (c) => out.push(c));
    const pid = await launched.pid;
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    expect(cmdline[0]).toBe(LAUNCHER); // as the runner's clean-up of leftovers finds a step
    expect(cmdline.slice(1, 3)).toEqual(["--rundir", runDir]);
    expect(parentOf(pid)).not.toBe(process.pid);
    expect(readFileSync(`/proc/${parentOf(pid)}/cmdline`, "utf8").split("\0").slice(1, 2)).toEqual(["--serve"]);
    // The launcher holds none of the runner's environment (its credentials); the step has exactly its own.
    expect(readFileSync(`/proc/${parentOf(pid)}/environ`, "utf8")).toBe("");
    expect(readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").filter(Boolean)).toEqual([`PATH=${env.PATH}`]);
    await waitFor(() => Buffer.concat(out).toString().includes("running"), { what: "the script to run", timeoutMs: 10_000 });
    process.kill(-pid, "SIGTERM"); // as the driver stops a step: its whole group
    const exit = await launched.exit;
    expect(exit.error).toBeUndefined();
    expect(readFileSync(join(runDir, "status"), "utf8")).toMatch(/^signal 15$/m);
  });

  it("passes on a step's output whole and in order, all of it before its end, with its exit code", async () => {
    const { args } = await step("output", "#!/bin/sh\ni=0\nwhile [ $i -lt 3000 ]; do echo \"line $i of the step's output, long enough to fill pipes\"; i=$((i+1)); done\necho to-stderr >&2\nexit 3\n");
    const out: Buffer[] = [];
    let endedWith = -1;
    const launched = launcher.start(args, env, (c) => out.push(c));
    const exit = await launched.exit.then((e) => { endedWith = Buffer.concat(out).length; return e; });
    const text = Buffer.concat(out).toString();
    const lines = text.trimEnd().split("\n");
    expect(lines.filter((l) => l.startsWith("line "))).toEqual(Array.from({ length: 3000 }, (_, i) => `line ${i} of the step's output, long enough to fill pipes`));
    expect(lines).toContain("to-stderr");
    expect(endedWith).toBe(Buffer.concat(out).length); // nothing arrived after the end
    expect(exit).toEqual({ code: 0, signal: null }); // the launcher's own exit: the script's code is in its status file
  });

  it("runs steps side by side, each output to its own step", async () => {
    const gate = join(base, "gate");
    // Both wait at the gate, opened only once both have started: they overlap.
    const script = (name: string) => `#!/bin/sh\necho ${name}-before\nwhile [ ! -e ${gate} ]; do sleep 0.02; done\necho ${name}-after\n`;
    const a = await step("side-a", script("a"));
    const b = await step("side-b", script("b"));
    const outA: Buffer[] = [];
    const outB: Buffer[] = [];
    const la = launcher.start(a.args, env, (c) => outA.push(c));
    const lb = launcher.start(b.args, env, (c) => outB.push(c));
    await waitFor(() => Buffer.concat(outA).toString().includes("a-before") && Buffer.concat(outB).toString().includes("b-before"), {
      what: "both steps to be running", timeoutMs: 10_000,
    });
    await writeFile(gate, "");
    await Promise.all([la.exit, lb.exit]);
    expect(Buffer.concat(outA).toString()).toBe("a-before\na-after\n");
    expect(Buffer.concat(outB).toString()).toBe("b-before\nb-after\n");
  });

  it("ends every running step when the launcher is lost, saying so, and starts a new launcher for the next step", async () => {
    const { args } = await step("lost", "#!/bin/sh\necho started\nsleep 60\n");
    const out: Buffer[] = [];
    const launched = launcher.start(args, env, (c) => out.push(c));
    const pid = await launched.pid;
    await waitFor(() => Buffer.concat(out).toString().includes("started"), { what: "the step to be running", timeoutMs: 10_000 });
    const server = parentOf(pid);
    process.kill(server, "SIGKILL");
    const exit: LaunchExit = await launched.exit;
    expect(exit.error?.message).toBe("the resident step launcher was killed by SIGKILL");
    // The step dies with it (parent-death signal), and its pid namespace with it.
    await waitFor(() => !alive(pid), { what: "the step to die with its launcher", timeoutMs: 10_000 });

    const gate = join(base, "after-gate");
    const next = await step("after", `#!/bin/sh\nwhile [ ! -e ${gate} ]; do sleep 0.02; done\necho again\n`);
    const again: Buffer[] = [];
    const relaunched = launcher.start(next.args, env, (c) => again.push(c));
    const relaunchedPid = await relaunched.pid;
    expect(parentOf(relaunchedPid)).not.toBe(server); // held at the gate meanwhile
    expect(parentOf(relaunchedPid)).not.toBe(process.pid);
    await writeFile(gate, "");
    expect((await relaunched.exit).error).toBeUndefined();
    expect(Buffer.concat(again).toString()).toBe("again\n");
  });

  it("takes its running steps with it when it is closed (the runner's stop)", async () => {
    const { args } = await step("closed", "#!/bin/sh\nsleep 60\n");
    const launched = launcher.start(args, env, () => undefined);
    const pid = await launched.pid;
    launcher.close();
    expect((await launched.exit).error?.message).toBe("the resident step launcher was killed by SIGTERM");
    await waitFor(() => !alive(pid), { what: "the step to end with the launcher", timeoutMs: 10_000 });
  });
});
