// Start-up cleanup against real processes and directories (no servers needed).
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import * as pb from "@ephemera/proto";
import { REPORT_FILE, STEP_CONFIG_ENV } from "@ephemera/io-agent";
import { createLogger, waitFor } from "@ephemera/kit";
import { detectIsolation } from "./isolation.js";
import { cleanupLeftovers } from "./leftovers.js";
import { ProcessDriver } from "./process.js";

const STEP_PROGRAM = join(__dirname, "..", "..", "..", "io-agent", "dist", "step.js");

/** Host pids whose environment carries `marker` (a leftover step and the children of its script). */
function processesWith(marker: string): number[] {
  return readdirSync("/proc").filter((p) => /^\d+$/.test(p)).map(Number).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`, "latin1").includes(marker) && !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");
    } catch {
      return false;
    }
  });
}

describe("cleanupLeftovers at runner start-up", () => {
  let base: string;
  let started: ChildProcess[];

  beforeAll(() => {
    execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-b", join(__dirname, "..", "..", "..", "io-agent")], { stdio: "inherit" });
  }, 120_000);

  beforeEach(async () => {
    base = await mkdtemp("/var/tmp/leftovers-");
    started = [];
  });

  afterEach(async () => {
    for (const c of started) {
      try { process.kill(-c.pid!, "SIGKILL"); } catch { /* gone */ }
    }
    await rm(base, { recursive: true, force: true });
  });

  /** A step as the process driver starts one: its own group, the step config in its environment, a script child. */
  const fakeStep = (runDir: string, marker: string) => {
    const child = spawn("sh", ["-c", "sleep 300 & sleep 300 & wait"], {
      detached: true, stdio: "ignore",
      env: { PATH: process.env["PATH"], MARKER: marker, [STEP_CONFIG_ENV]: JSON.stringify({ runId: "r", runDir, token: "t" }) },
    });
    started.push(child);
    return child;
  };

  it("kills the steps of its workdir, keeps run directories holding a report and removes the others", async () => {
    const workdir = join(base, "work");
    const runs = join(workdir, "runs");
    for (const r of ["reported", "unreported", "running"]) await mkdir(join(runs, r, "view-0"), { recursive: true });
    await writeFile(join(runs, "reported", REPORT_FILE), JSON.stringify({ outcome: "failed", reason: "Error", exitCode: 7, message: "x" }));
    await mkdir(join(workdir, "probe-abc"));
    fakeStep(join(runs, "running"), "mine-1");
    fakeStep(join(base, "other", "runs", "x"), "theirs-1"); // another runner's workdir: not ours to touch
    await waitFor(() => processesWith("MARKER=mine-1").length === 3 && processesWith("MARKER=theirs-1").length === 3, { what: "the fake steps" });

    const result = await cleanupLeftovers(workdir, createLogger("test", "silent"));

    expect(processesWith("MARKER=mine-1")).toEqual([]);
    expect(processesWith("MARKER=theirs-1")).toHaveLength(3);
    expect(result.killed).toHaveLength(3);
    expect(result.kept).toEqual(["reported"]);
    expect(result.removed.sort()).toEqual(["running", "unreported"]);
    expect(readdirSync(runs)).toEqual(["reported"]);
    expect(existsSync(join(runs, "reported", REPORT_FILE))).toBe(true);
    expect(existsSync(join(workdir, "probe-abc"))).toBe(false);
  });

  it("kills a real step of the process driver, in its own namespaces, and its run directory goes", async () => {
    const workdir = join(base, "real");
    await mkdir(workdir);
    const logger = createLogger("test", "silent");
    // Nothing listens on port 1: the step program keeps retrying its inputs (about a minute), as a step left running would.
    const driver = new ProcessDriver({
      workdir, iocontext: "127.0.0.1:1", stepProgram: STEP_PROGRAM, isolation: await detectIsolation(workdir), hostEnv: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" }, logger,
    });
    const runId = "sb.db.create.left.1";
    const step = driver.run({
      dispatch: pb.StepDispatch.fromPartial({ runId }), token: "", env: { EPHEMERA_RUN_ID: runId }, onLog: () => undefined,
    });
    const marker = join(workdir, "runs", runId);
    await waitFor(() => processesWith(marker).length >= 2, { what: "the step's processes" });

    const result = await cleanupLeftovers(workdir, logger);

    expect(result.killed.length).toBeGreaterThanOrEqual(2);
    expect(processesWith(marker)).toEqual([]);
    expect(result.removed).toEqual([runId]);
    expect(await step.result).toMatchObject({ outcome: "failed", reason: "DriverError" });
  });

  it("does nothing on a fresh workdir", async () => {
    expect(await cleanupLeftovers(join(base, "new"), createLogger("test", "silent"))).toEqual({ killed: [], removed: [], kept: [] });
  });
});
