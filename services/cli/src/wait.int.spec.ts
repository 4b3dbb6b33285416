import { NotFoundError, UnavailableError, isNotFoundError, waitFor } from "@ephemera/kit";
import { Api } from "./api.js";
import { FakeApi, resourceView, sandboxView } from "./fake-api.testkit.js";
import { waitForSandbox } from "./wait.js";

let fake: FakeApi;
let api: Api;
beforeEach(async () => {
  fake = await FakeApi.start();
  api = new Api(fake.address);
});
afterEach(() => {
  api.close();
  fake.stop();
});

const creating = (steps: Array<[string, string, number?]>) =>
  sandboxView("sb", { reason: "Creating", resources: [resourceView("db", "Provisioning", steps)] });

describe("waitForSandbox until ready", () => {
  it("reports progress and ends on the first ready view", async () => {
    fake.watchPlans = [[
      creating([["provision", "Running"], ["seed-a", "Pending"]]),
      creating([["provision", "Succeeded"], ["seed-a", "Running"]]),
      sandboxView("sb", { reason: "Ready", ready: true, resources: [resourceView("db", "Ready", [["provision", "Succeeded"], ["seed-a", "Succeeded"]])] }),
    ]];
    const lines: string[] = [];
    const result = await waitForSandbox(api, "sb", "ready", { timeoutMs: 5000, log: (l) => lines.push(l) });
    expect(result.outcome).toBe("ready");
    expect(lines).toEqual([
      "db: provision running",
      "db: provision succeeded",
      "db: seed-a running",
      "db: seed-a succeeded",
      "db: ready",
    ]);
    expect(fake.requestsOf("sandbox.watch")).toEqual([{ name: "sb", showOutputs: false }]);
  });

  it("ends on ResourceFailed with the failing view", async () => {
    const failed = sandboxView("sb", { reason: "ResourceFailed", resources: [resourceView("db", "Failed", [["provision", "Failed", 2]])] });
    fake.watchPlans = [[creating([["provision", "Running"]]), failed]];
    const result = await waitForSandbox(api, "sb", "ready", { timeoutMs: 5000, log: () => {} });
    expect(result).toEqual({ outcome: "failed", view: failed });
  });

  it("fails when the sandbox does not exist", async () => {
    fake.watchPlans = [[{ error: new NotFoundError("sandbox sb not found") }]];
    const err = await waitForSandbox(api, "sb", "ready", { timeoutMs: 5000, log: () => {} }).catch((e: unknown) => e);
    expect(isNotFoundError(err)).toBe(true);
  });

  it("reconnects when the server ends the stream early", async () => {
    fake.watchPlans = [
      [creating([["provision", "Running"]]), { end: true }],
      [sandboxView("sb", { reason: "Ready", ready: true })],
    ];
    const lines: string[] = [];
    const result = await waitForSandbox(api, "sb", "ready", { timeoutMs: 5000, log: (l) => lines.push(l), backoffMs: 1 });
    expect(result.outcome).toBe("ready");
    expect(fake.watchCalls).toBe(2);
    expect(lines).toContain("watch on sandbox sb interrupted (the server ended the stream); reconnecting");
  });

  it("gives up after a bounded number of consecutive broken streams", async () => {
    fake.watchPlans = Array.from({ length: 10 }, () => [{ error: new UnavailableError("no leader") }]);
    const err = await waitForSandbox(api, "sb", "ready", { timeoutMs: 5000, log: () => {}, maxReconnects: 3, backoffMs: 1 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as Error).message).toBe("lost the watch on sandbox sb 4 times in a row: no leader");
    expect(fake.watchCalls).toBe(4);
  });

  it("times out with the last view seen", async () => {
    fake.watchPlans = [[creating([["provision", "Running"]])]];
    const result = await waitForSandbox(api, "sb", "ready", { timeoutMs: 200, log: () => {} });
    expect(result.outcome).toBe("timeout");
    expect(result.outcome === "timeout" && result.view?.resources[0]?.steps[0]?.status).toBe("Running");
  });

  it("checks with Get when the stream stays silent, and ends on what it finds", async () => {
    fake.watchPlans = [[creating([["provision", "Running"]])]];
    fake.sandboxes.set("sb", sandboxView("sb", { reason: "Ready", ready: true, resources: [resourceView("db", "Ready", [["provision", "Succeeded"]])] }));
    const lines: string[] = [];
    const result = await waitForSandbox(api, "sb", "ready", { timeoutMs: 5000, log: (l) => lines.push(l), probeMs: 20 });
    expect(result.outcome).toBe("ready");
    expect(lines).toEqual(["db: provision running", "db: provision succeeded", "db: ready"]);
    expect(fake.requestsOf("sandbox.get").length).toBeGreaterThan(0);
    await waitFor(() => fake.openWatches === 0, { what: "the silent watch to be cancelled" });
  });

  it("stops when its signal is aborted", async () => {
    fake.watchPlans = [[creating([["provision", "Running"]])]];
    const abort = new AbortController();
    const waiting = waitForSandbox(api, "sb", "ready", { timeoutMs: 5000, log: () => abort.abort(), signal: abort.signal });
    await expect(waiting).rejects.toThrow("interrupted");
  });
});

describe("waitForSandbox until gone", () => {
  it("does not print the create history of the first view", async () => {
    fake.watchPlans = [[
      sandboxView("sb", { reason: "Deleting", resources: [resourceView("db", "Deprovisioning", [["provision", "Succeeded"], ["deprovision", "Running"]])] }),
      sandboxView("sb", { reason: "Deleted" }),
    ]];
    const lines: string[] = [];
    const result = await waitForSandbox(api, "sb", "gone", { timeoutMs: 5000, log: (l) => lines.push(l) });
    expect(result).toEqual({ outcome: "gone" });
    expect(lines).toEqual(["db: deprovision running"]);
  });

  it("ends when a silent stream outlives the sandbox", async () => {
    fake.watchPlans = [[]];
    const result = await waitForSandbox(api, "sb", "gone", { timeoutMs: 5000, log: () => {}, probeMs: 20 });
    expect(result).toEqual({ outcome: "gone" });
  });

  it("fails when a silent stream hides a sandbox that does not exist", async () => {
    fake.watchPlans = [[]];
    const err = await waitForSandbox(api, "sb", "ready", { timeoutMs: 5000, log: () => {}, probeMs: 20 }).catch((e: unknown) => e);
    expect(isNotFoundError(err)).toBe(true);
  });
});
