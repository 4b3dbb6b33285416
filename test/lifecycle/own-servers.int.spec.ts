// Lifecycle rules on servers of the test's own, services as processes: a delete that
// failed can be run again and then succeeds; and an API write larger than the NATS
// server's max_payload is refused as invalid (exit 2, with the sizes), its cause logged.
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ephOk, type Eph } from "../support/eph.js";
import { startOwnStack, type OwnStack } from "../support/own-stack.js";

const FIXTURES = join(__dirname, "fixtures");

describe("a delete that failed can be run again (own servers)", () => {
  let stack: OwnStack | undefined;
  let scratch: string;
  let eph: Eph;

  beforeAll(async () => {
    stack = await startOwnStack("life");
    ({ scratch, eph } = stack);
  }, 90_000);

  afterAll(async () => {
    await stack?.stop();
  }, 60_000);

  it("DeprovisionFailed, then a second delete runs the teardown again as a new attempt and the sandbox is gone", async () => {
    // The script runs as nobody: the gate's directory must be one it can look into.
    chmodSync(scratch, 0o755);
    const gate = join(scratch, "gate");
    await ephOk(eph, ["plugin", "apply", "-f", join(FIXTURES, "flaky-teardown-plugin.yaml")]);
    await ephOk(eph, ["sandbox", "apply", "-f", join(FIXTURES, "flaky-sandbox.yaml"), "--set", `gate=${gate}`, "--wait-timeout", "60s"], { timeoutMs: 70_000 });

    const first = await eph(["sandbox", "delete", "flaky", "--wait-timeout", "60s"], { timeoutMs: 70_000 });
    expect(first.code).toBe(1);
    expect(first.stdout + first.stderr).toMatch(/deprovision failed/);
    expect(first.stdout + first.stderr).toMatch(/teardown refused/);
    const failed = JSON.parse((await ephOk(eph, ["sandbox", "get", "flaky", "-o", "json"])).stdout) as { status: { reason: string } };
    expect(failed.status.reason).toBe("DeprovisionFailed");

    writeFileSync(gate, "");
    await ephOk(eph, ["sandbox", "delete", "flaky", "--wait-timeout", "60s"], { timeoutMs: 70_000 });
    const gone = await eph(["sandbox", "get", "flaky"]);
    expect(gone.code).toBe(1);
    const events = (await ephOk(eph, ["events", "-o", "json", "--type", "ephemera.steprun.*"])).stdout;
    expect(events).toMatch(/\.res\.delete\.teardown\.1/);
    expect(events).toMatch(/\.res\.delete\.teardown\.2/);
  }, 180_000);
});

describe("an API write over the NATS server's max_payload (own nats-server with max_payload 64 KiB)", () => {
  let stack: OwnStack | undefined;
  let scratch: string;

  beforeAll(async () => {
    stack = await startOwnStack("payload", {
      natsFlags: (dir) => {
        const config = join(dir, "nats.conf");
        writeFileSync(config, "max_payload: 65536\n");
        return ["-c", config];
      },
    });
    scratch = stack.scratch;
  }, 90_000);

  afterAll(async () => {
    await stack?.stop();
  }, 60_000);

  it("is refused as invalid (exit 2) naming the sizes, nothing is written, and the sandbox service logs the cause", async () => {
    // A 100 KiB script: within the spec's limits (256 KiB a script), over this server's payload.
    const file = join(scratch, "big.yaml");
    writeFileSync(file, `name: big\nspec:\n  runner: {image: debian:bookworm-slim}\n  create:\n  - name: a\n    script: |\n      #!/bin/sh\n      # ${"x".repeat(100 * 1024)}\n`);
    const r = await stack!.eph(["plugin", "apply", "-f", file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/is \d{6} bytes, over the server's max_payload of 65536 bytes/);
    expect((await stack!.eph(["plugin", "get", "big"])).code).toBe(1);
    const log = stack!.services.log("sandbox").lines().map((l) => l.line).join("\n");
    expect(log).toMatch(/"size":\d{6},.*append refused: over the server's max_payload/);
  }, 60_000);
});
