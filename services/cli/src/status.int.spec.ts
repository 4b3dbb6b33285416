// `eph sandbox get-status`: one line and an exit code a script branches on (0 ready,
// 1 failed, 2 not found, 3 pending), and 5, never an answer's code, when it cannot tell.
import { join } from "node:path";
import { waitFor } from "@ephemera/kit";
import { eph, useCore } from "./eph.testkit.js";
import { STATUS_EXIT_UNKNOWN } from "./status.js";

// provision waits for $GATE and then fails with $FAIL when given; deprovision waits for $HOLD.
const PLUGIN = `
name: hello-db@1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: provision
    inputs:
    - {name: gate, valueFromSandbox: true}
    - {name: fail, valueFromSandbox: true}
    script: |
      #!/bin/sh
      if [ -n "$GATE" ]; then while [ ! -e "$GATE" ]; do sleep 0.05; done; fi
      if [ -n "$FAIL" ]; then echo "no room"; exit "$FAIL"; fi
  delete:
  - name: deprovision
    inputs:
    - {name: hold, valueFromSandbox: true}
    script: |
      #!/bin/sh
      if [ -n "$HOLD" ]; then while [ ! -e "$HOLD" ]; do sleep 0.05; done; fi
`;

const core = useCore();
const api = () => core().address;
const status = (...args: string[]) => eph(api(), ["sandbox", "get-status", ...args]);

beforeEach(async () => {
  expect((await eph(api(), ["plugin", "apply", "-f", core().file("plugin.yaml", PLUGIN)])).code).toBe(0);
});

/** Applies sandbox `name` (one resource `db`) with these params, returning at once. */
async function apply(name: string, params: Record<string, string> = {}): Promise<void> {
  const doc = `name: ${name}\nspec:\n  cluster: local\n  resources:\n  - {name: db, plugin: hello-db, params: ${JSON.stringify(params)}}\n`;
  const r = await eph(api(), ["sandbox", "apply", "-f", core().file(`${name}.yaml`, doc), "--wait=false"]);
  if (r.code !== 0) throw new Error(`applying ${name} exited ${r.code}:\n${r.stderr}`);
}

const reasonOf = async (name: string) => (await core().sandboxes.view(name, false)).status?.reason;

describe("eph sandbox get-status", () => {
  it("exits 0 and prints ready for a ready sandbox; -o json and -o yaml give {name, ready, reason, message}", async () => {
    await apply("feature-x");
    await waitFor(async () => (await reasonOf("feature-x")) === "Ready", { what: "feature-x ready" });
    expect(await status("feature-x")).toMatchObject({ code: 0, stdout: "ready\n", stderr: "" });
    const json = await status("feature-x", "-o", "json");
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({ name: "feature-x", ready: true, reason: "Ready", message: "all resources are ready" });
    const yaml = await eph(api(), ["sb", "get-status", "feature-x", "-o", "yaml"]);
    expect(yaml).toMatchObject({ code: 0, stdout: "name: feature-x\nready: true\nreason: Ready\nmessage: all resources are ready\n" });
  });

  it("exits 1 for a failed sandbox, printing the reason and the message on one line", async () => {
    await apply("feature-x", { fail: "3" });
    await waitFor(async () => (await reasonOf("feature-x")) === "ResourceFailed", { what: "feature-x failed" });
    expect(await status("feature-x")).toMatchObject({
      code: 1, stdout: "ResourceFailed: resource db: step provision exited 3 (Error): script exited with code 3\n", stderr: "",
    });
    const json = JSON.parse((await status("feature-x", "-o", "json")).stdout);
    expect(json).toEqual({
      name: "feature-x", ready: false, reason: "ResourceFailed",
      message: "resource db: step provision exited 3 (Error): script exited with code 3",
    });
  });

  it("exits 2 for a sandbox that does not exist", async () => {
    expect(await status("nope")).toMatchObject({ code: 2, stdout: "NotFound: sandbox nope not found\n", stderr: "" });
    const json = await status("nope", "-o", "json");
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toEqual({ name: "nope", ready: false, reason: "NotFound", message: "sandbox nope not found" });
  });

  it("exits 3 while the sandbox is being created or deleted, then answers what it became", async () => {
    const gate = join(core().scratch, "gate");
    const hold = join(core().scratch, "hold");
    await apply("feature-x", { gate, hold });
    expect(await status("feature-x")).toMatchObject({ code: 3, stdout: "Creating: waiting for resource db\n" });
    core().file("gate", "");
    await waitFor(async () => (await status("feature-x")).code === 0, { what: "get-status to say ready" });
    expect((await eph(api(), ["sandbox", "delete", "feature-x", "--wait=false"])).code).toBe(0);
    await waitFor(async () => (await reasonOf("feature-x")) === "Deleting", { what: "feature-x deleting" });
    expect(await status("feature-x")).toMatchObject({ code: 3, stdout: "Deleting: deprovisioning db\n" });
    core().file("hold", "");
    await waitFor(async () => (await status("feature-x")).code === 2, { what: "get-status to say not found" });
  });

  it("exits 5, never an answer's code, when it cannot tell: bad usage, or the API unavailable", async () => {
    for (const args of [[], ["feature-x", "-o", "xml"], ["feature-x", "--bogus"], ["a", "b"]]) {
      const r = await status(...args);
      expect({ args, code: r.code, stdout: r.stdout }).toEqual({ args, code: STATUS_EXIT_UNKNOWN, stdout: "" });
    }
    const stopped = core().address;
    await core().stop();
    const r = await eph(stopped, ["sandbox", "get-status", "feature-x"]);
    expect([r.code, r.stdout]).toEqual([STATUS_EXIT_UNKNOWN, ""]);
    expect(r.stderr).toContain(`error: the ephemera API at ${stopped} is unavailable`);
  });

  it("leaves the exit codes of other commands alone", async () => {
    expect((await eph(api(), ["sandbox", "get", "nope"])).code).toBe(1);
    expect((await eph(api(), ["sandbox", "get"])).code).toBe(2);
  });
});
