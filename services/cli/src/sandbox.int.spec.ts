import { NotFoundError, UnavailableError, waitFor } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { FakeApi, eph, resourceView, sandboxView } from "./fake-api.testkit.js";

let api: FakeApi;
beforeEach(async () => { api = await FakeApi.start(); });
afterEach(() => api.stop());

const withOutputs = (name = "feature-x") =>
  sandboxView(name, {
    reason: "Ready",
    ready: true,
    resources: [
      resourceView("db", "Ready", [["provision", "Succeeded", 0]], {
        outputs: [
          { key: "provision.host", size: 5, value: Buffer.from("db-42") },
          { key: "provision.key", size: 2, value: Buffer.from([0xff, 0xfe]) },
        ],
      }),
    ],
  });

describe("eph sandbox get", () => {
  it("prints one JSON document with sizes only, and asks for no values", async () => {
    api.sandboxes.set("feature-x", withOutputs());
    const r = await eph(api.address, ["sandbox", "get", "feature-x", "-o", "json"]);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc).toMatchObject({
      name: "feature-x",
      routingKey: "rk123",
      spec: { cluster: "local" },
      status: { ready: true, reason: "Ready", message: "" },
      endpoints: [{ name: "web", url: "https://web--rk123.preview.local" }],
      createdAt: "2026-01-02T03:04:05.000Z",
      updatedAt: "2026-01-02T03:04:06.000Z",
    });
    expect(doc.resources[0]).toMatchObject({
      name: "db", plugin: "hello-db", version: "1.0.0", status: "Ready",
      outputs: { "provision.host": { size: 5 }, "provision.key": { size: 2 } },
    });
    expect(doc.resources[0].steps[0]).toMatchObject({ name: "provision", status: "Succeeded" });
    expect(api.requestsOf("sandbox.get")).toEqual([{ name: "feature-x", showOutputs: false }]);
  });

  it("with --show-outputs includes values as text, or base64 when not UTF-8", async () => {
    api.sandboxes.set("feature-x", withOutputs());
    const r = await eph(api.address, ["sb", "get", "feature-x", "-o", "json", "--show-outputs"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).resources[0].outputs).toEqual({
      "provision.host": { size: 5, value: "db-42" },
      "provision.key": { size: 2, base64: Buffer.from([0xff, 0xfe]).toString("base64") },
    });
  });

  it("prints YAML by default", async () => {
    api.sandboxes.set("feature-x", withOutputs());
    const r = await eph(api.address, ["sandbox", "get", "feature-x"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("name: feature-x\nroutingKey: rk123\n");
  });

  it("exits 1 for an unknown sandbox, with nothing on stdout", async () => {
    const r = await eph(api.address, ["sandbox", "get", "nope", "-o", "json"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("sandbox nope not found");
  });

  it("exits 2 for an unknown output format", async () => {
    const r = await eph(api.address, ["sandbox", "get", "x", "-o", "xml"]);
    expect(r.code).toBe(2);
    expect(api.received).toEqual([]);
  });
});

describe("eph sandbox list", () => {
  beforeEach(() => {
    api.sandboxes.set("b-two", sandboxView("b-two", { reason: "Creating", resources: [resourceView("db", "Provisioning", [])] }));
    api.sandboxes.set("a-one", withOutputs("a-one"));
  });

  it("prints a table", async () => {
    const r = await eph(api.address, ["sandbox", "list"]);
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n")).toEqual([
      "NAME    READY   STATUS     RESOURCES   CREATED",
      "a-one   true    Ready      1/1         2026-01-02T03:04:05Z",
      "b-two   false   Creating   0/1         2026-01-02T03:04:05Z",
      "",
    ]);
  });

  it("-o json prints one array", async () => {
    const r = await eph(api.address, ["sandbox", "ls", "-o", "json"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).map((s: { name: string }) => s.name)).toEqual(["a-one", "b-two"]);
  });
});

describe("eph sandbox delete", () => {
  beforeEach(() => {
    api.sandboxes.set("feature-x", sandboxView("feature-x", { reason: "Ready", ready: true, resources: [resourceView("db", "Ready", [])] }));
  });

  const deleting = (steps: Array<[string, string, number?]>, status = "Deprovisioning", extra = {}) =>
    sandboxView("feature-x", {
      reason: "Deleting",
      resources: [resourceView("db", status, steps, extra, "delete")],
    });

  it("asks for the delete and returns without --wait", async () => {
    const r = await eph(api.address, ["sandbox", "delete", "feature-x"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("sandbox feature-x deleting\n");
    expect(api.requestsOf("sandbox.delete")).toEqual([{ name: "feature-x", force: false }]);
    expect(api.watchCalls).toBe(0);
  });

  it("passes --force", async () => {
    const r = await eph(api.address, ["sandbox", "delete", "feature-x", "--force"]);
    expect(r.code).toBe(0);
    expect(api.requestsOf("sandbox.delete")).toEqual([{ name: "feature-x", force: true }]);
    expect(r.stdout).toBe("sandbox feature-x deleted\n");
  });

  it("--wait shows progress and ends when the watch ends and the sandbox is gone", async () => {
    let release!: () => void;
    api.watchPlans = [[
      deleting([["deprovision", "Running"]]),
      { gate: new Promise<void>((r) => (release = r)) },
      deleting([["deprovision", "Succeeded"]], "Deprovisioned"),
      { end: true },
    ]];
    const live = { stdout: "", stderr: "" };
    const running = eph(api.address, ["sandbox", "delete", "feature-x", "--wait"], { live });
    await waitFor(() => live.stderr.includes("db: deprovision running\n"), { what: "progress before the end" });
    api.sandboxes.delete("feature-x");
    release();
    const r = await running;
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("db: deprovision succeeded\ndb: deprovisioned\n");
    expect(r.stdout).toBe("sandbox feature-x deleting\nsandbox feature-x deleted\n");
  });

  it("--wait ends at once when the watch says NOT_FOUND", async () => {
    api.watchPlans = [[{ error: new NotFoundError("sandbox feature-x not found") }]];
    const r = await eph(api.address, ["sandbox", "delete", "feature-x", "--wait"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("sandbox feature-x deleted\n");
  });

  it("--wait exits 1 on DeprovisionFailed naming the step, exit code and log tail", async () => {
    const failed = sandboxView("feature-x", {
      reason: "DeprovisionFailed",
      message: "resource db could not be deprovisioned",
      resources: [resourceView("db", "DeprovisionFailed", [["deprovision", "Failed", 7]], {
        failure: { step: "deprovision", runId: "r", exitCode: 7, reason: "Error", message: "exit status 7", logTail: "dropping db\npermission denied\n" },
      }, "delete")],
    });
    api.watchPlans = [[deleting([["deprovision", "Running"]]), failed]];
    const r = await eph(api.address, ["sandbox", "delete", "feature-x", "--wait"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("resource db failed at step deprovision");
    expect(r.stderr).toContain("exit code: 7");
    expect(r.stderr).toContain("    | permission denied");
    expect(r.stderr).toContain("error: deleting sandbox feature-x failed: resource db could not be deprovisioned");
  });

  it("--wait reconnects when the stream breaks", async () => {
    api.watchPlans = [
      [deleting([["deprovision", "Running"]]), { error: new UnavailableError("stream reset") }],
      [deleting([["deprovision", "Running"]]), sandboxView("feature-x", { reason: "Deleted" })],
    ];
    const r = await eph(api.address, ["sandbox", "delete", "feature-x", "--wait"]);
    expect(r.code).toBe(0);
    expect(api.watchCalls).toBe(2);
    expect(r.stderr).toContain("interrupted (stream reset); reconnecting");
    // Progress already shown is not repeated after reconnecting.
    expect(r.stderr.match(/db: deprovision running/g)).toHaveLength(1);
  });

  it("--wait-timeout exits 1 saying what it was still waiting for", async () => {
    api.watchPlans = [[deleting([["deprovision", "Running"]])]];
    const r = await eph(api.address, ["sandbox", "delete", "feature-x", "--wait", "--wait-timeout", "300ms"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      "error: timed out after 300ms waiting for sandbox feature-x to be deleted; still waiting for: db (deprovisioning, deprovision running)",
    );
    await waitFor(() => api.openWatches === 0, { what: "the watch to be cancelled" });
  });

  it("exits 2 on a malformed --wait-timeout, before calling anything", async () => {
    const r = await eph(api.address, ["sandbox", "delete", "feature-x", "--wait", "--wait-timeout", "soon"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--wait-timeout: "soon" is not a duration');
    expect(api.received).toEqual([]);
  });

  it("exits 2 without a name or a file, or with both", async () => {
    expect((await eph(api.address, ["sandbox", "delete"])).code).toBe(2);
    expect((await eph(api.address, ["sandbox", "delete", "x", "-f", "sb.yaml"])).code).toBe(2);
    expect(api.received).toEqual([]);
  });

  it("exits 1 for an unknown sandbox", async () => {
    const r = await eph(api.address, ["sandbox", "delete", "nope"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("sandbox nope not found");
  });
});

describe("a sandbox view's spec", () => {
  it("round-trips labels and params as the file has them", async () => {
    api.sandboxes.set("feature-x", sandboxView("feature-x", {
      reason: "Ready",
      spec: pb.SandboxSpec.fromPartial({ cluster: "local", labels: { team: "a" }, ttl: { duration: "2d", offsetFrom: "createdAt" } }),
    }));
    const r = await eph(api.address, ["sandbox", "get", "feature-x", "-o", "json"]);
    expect(JSON.parse(r.stdout).spec).toEqual({ cluster: "local", labels: { team: "a" }, ttl: { duration: "2d", offsetFrom: "createdAt" } });
  });
});
