// Start-up cleanup against real processes and directories (no servers needed).
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { REPORT_FILE } from "@ephemera/io-agent";
import { createLogger, waitFor } from "@ephemera/kit";
import { detectIsolation } from "./isolation.js";
import { cleanupLeftovers } from "./leftovers.js";

const LAUNCHER = join(__dirname, "..", "..", "dist", "ephemera-launch");

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

  /** A step as the process driver starts one: ephemera-launch in its own group, in its namespaces, a script with two children. */
  const leftStep = async (runDir: string, marker: string) => {
    await mkdir(runDir, { recursive: true });
    await writeFile(join(runDir, "script"), "#!/bin/sh\nsleep 300 & sleep 300 & wait\n", { mode: 0o700 });
    const isolation = await detectIsolation(base, LAUNCHER);
    // A private /tmp, as every step has (the script is copied to /tmp/.ephemera: without a view, two steps would share it).
    const child = spawn(LAUNCHER, ["--rundir", runDir, ...isolation.flags, "--view", "/tmp"], {
      detached: true, stdio: "ignore", env: { PATH: process.env["PATH"], MARKER: marker },
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
    await leftStep(join(runs, "running"), "mine-1");
    await leftStep(join(base, "other", "runs", "x"), "theirs-1"); // another runner's workdir: not ours to touch
    // The launcher (outside and as the namespace's init), the script and its two sleeps.
    const up = (marker: string) => processesWith(marker).length >= 5;
    try {
      await waitFor(() => up("MARKER=mine-1") && up("MARKER=theirs-1"), { what: "the left steps", timeoutMs: 30_000 });
    } catch (err) {
      const show = (m: string) => processesWith(m).map((pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ")).join(" | ");
      throw new Error(`${(err as Error).message}: mine: ${show("MARKER=mine-1")}; theirs: ${show("MARKER=theirs-1")}`, { cause: err });
    }

    const result = await cleanupLeftovers(workdir, createLogger("test", "silent"));

    expect(processesWith("MARKER=mine-1")).toEqual([]);
    expect(processesWith("MARKER=theirs-1").length).toBeGreaterThanOrEqual(5);
    expect(result.killed).toHaveLength(2);
    expect(result.kept).toEqual(["reported"]);
    expect(result.removed.sort()).toEqual(["running", "unreported"]);
    expect(readdirSync(runs)).toEqual(["reported"]);
    expect(existsSync(join(runs, "reported", REPORT_FILE))).toBe(true);
    expect(existsSync(join(workdir, "probe-abc"))).toBe(false);
  });

  it("does nothing on a fresh workdir", async () => {
    expect(await cleanupLeftovers(join(base, "new"), createLogger("test", "silent"))).toEqual({ killed: [], removed: [], kept: [] });
  });
});
