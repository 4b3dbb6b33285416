// Live step logs through the whole built stack on JetStream: `eph logs --follow` (a
// process) prints a line a step wrote while the step still runs; the step waits on a gate
// the test opens only once it has seen the line.
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { waitFor } from "@ephemera/kit";
import { startTestStack, type TestStack } from "../support/stack.js";

const CLI = join(__dirname, "..", "..", "services", "cli", "dist", "bundle", "main.js");

// Each line carries the time it was written (ms since the epoch), to measure how late it shows.
const PLUGIN = `
name: gated@1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: gated
    inputs: [{name: gate, valueFromSandbox: true}]
    script: |
      #!/bin/sh
      echo "written at $(date +%s%3N)"
      while [ ! -e "$GATE" ]; do sleep 0.05; done
      echo "through the gate"
`;

describe("live logs, end to end (JetStream)", () => {
  let stack: TestStack;
  let gates: string;
  beforeAll(async () => {
    stack = await startTestStack("live");
    // Outside /tmp (each step has its own) and readable by the user scripts run as.
    gates = mkdtempSync("/var/tmp/eph-live-");
    chmodSync(gates, 0o755);
  }, 60_000);
  afterAll(async () => {
    await stack?.stop();
    rmSync(gates, { recursive: true, force: true });
  });

  it("eph logs --follow prints a line the step wrote before the step ends, then exits 0 when it ends", async () => {
    const gate = join(gates, "gate");
    expect((await stack.eph(["plugin", "apply", "-f", stack.file("plugin.yaml", PLUGIN)])).code).toBe(0);
    const sb = `name: live\nspec:\n  cluster: local\n  resources:\n  - {name: db, plugin: gated, params: {gate: "${gate}"}}\n`;
    expect((await stack.eph(["sandbox", "apply", "-f", stack.file("sb.yaml", sb), "--wait=false"])).code).toBe(0);

    const eph = spawn(process.execPath, [CLI, "logs", "--sandbox", "live", "--resource", "db", "--step", "gated", "--follow"], {
      env: { ...process.env, EPHEMERA_API: stack.api }, stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let seenAt = 0;
    eph.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      if (!seenAt && stdout.includes("\n")) seenAt = Date.now();
    });
    eph.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => eph.on("exit", (code) => resolve(code)));
    try {
      await waitFor(() => seenAt > 0, { timeoutMs: 30_000, what: `the step's first line through eph logs --follow (stderr: ${stderr})` });
      const writtenAt = Number(/written at (\d+)/.exec(stdout)?.[1]);
      // The step waits for the gate: it cannot have ended.
      const ended = (await stack.events()).filter((e) => e.type === "ephemera.steprun.succeeded.v1" || e.type === "ephemera.steprun.failed.v1");
      expect(ended).toEqual([]);
      // The line came while the step was held (above), which is what "live" means. Its latency (the
      // runner's 250 ms batching, NATS, the API, the CLI) is not bounded here: a timed bound fails
      // on a loaded machine. This only checks the line printed is the one the step wrote then.
      expect(seenAt).toBeGreaterThanOrEqual(writtenAt);
      writeFileSync(gate, "");
      expect(await exited).toBe(0);
      expect(stdout).toMatch(/^written at \d+\nthrough the gate\n$/);
      expect(stderr).toBe("");
    } finally {
      eph.kill("SIGKILL");
    }
  });
});
