import { createServer } from "node:net";
import { join } from "node:path";
import { UnavailableError, isNotFoundError, waitFor } from "@ephemera/kit";
import { Api } from "./api.js";
import { eph, useCore } from "./eph.testkit.js";
import { waitForSandbox } from "./wait.js";
import { WatchProxy } from "./watch-proxy.testkit.js";

// provision waits for $GATE and deprovision for $HOLD (when given), so a test sees them
// running; seed-a exits with $FAIL when asked.
const PLUGIN = `
name: hello-db@1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: provision
    inputs:
    - {name: gate, valueFromSandbox: true}
    outputs:
    - {name: host, valueFromPath: /tmp/host}
    script: |
      #!/bin/sh
      if [ -n "$GATE" ]; then while [ ! -e "$GATE" ]; do sleep 0.05; done; fi
      printf db > /tmp/host
  - name: seed-a
    inputs:
    - {name: host, valueFromStep: {name: provision, output: host}}
    - {name: fail, valueFromSandbox: true}
    script: |
      #!/bin/sh
      echo "seeding $HOST"
      if [ -n "$FAIL" ]; then exit "$FAIL"; fi
  delete:
  - name: deprovision
    inputs:
    - {name: hold, valueFromSandbox: true}
    script: |
      #!/bin/sh
      if [ -n "$HOLD" ]; then while [ ! -e "$HOLD" ]; do sleep 0.05; done; fi
`;

const core = useCore();
let api: Api;
let proxy: WatchProxy | undefined;
const gate = () => join(core().scratch, "gate");
const hold = () => join(core().scratch, "hold");
const open = (path: string) => core().file(path.slice(core().scratch.length + 1), "");

beforeEach(async () => {
  api = new Api(core().address);
  const r = await eph(core().address, ["plugin", "apply", "-f", core().file("plugin.yaml", PLUGIN)]);
  expect(r.code).toBe(0);
});
afterEach(() => {
  api.close();
  proxy?.stop();
  proxy = undefined;
});

/** Applies sandbox `sb` (one resource `db`) with these params; with `ready`, waits until it is, else returns at once. */
async function applySb(params: Record<string, string> = {}, ready = false): Promise<void> {
  const doc = `name: sb\nspec:\n  cluster: local\n  resources:\n  - {name: db, plugin: hello-db, params: ${JSON.stringify(params)}}\n`;
  const r = await eph(core().address, ["sandbox", "apply", "-f", core().file("sb.yaml", doc), ...(ready ? [] : ["--wait=false"])]);
  if (r.code !== 0) throw new Error(`applying sb exited ${r.code}:\n${r.stderr}`);
}

const waitForStep = (step: string) =>
  waitFor(async () => (await core().sandboxes.view("sb", false)).resources[0]?.steps.some((s) => `${s.name}=${s.status}` === step),
    { what: `${step} in sandbox sb` });

/**
 * A proxy in front of the core whose watches misbehave as told: the real core does not
 * end, break or silence its own streams on demand.
 */
async function startProxy(): Promise<Api> {
  proxy = await WatchProxy.start(core().address);
  return new Api(proxy.address);
}

describe("waitForSandbox until ready", () => {
  it("reports progress and ends on the first ready view", async () => {
    await applySb({ gate: gate() });
    const lines: string[] = [];
    const waiting = waitForSandbox(api, "sb", "ready", { timeoutMs: 20_000, log: (l) => lines.push(l) });
    await waitFor(() => lines.includes("db: provision running"), { what: "provision running" });
    open(gate());
    const result = await waiting;
    expect(result.outcome).toBe("ready");
    // seed-a ends sooner than the scheduler records a start (START_RECORD_DELAY_MS): it has a
    // running line only where it ran that long, between its queued and succeeded lines.
    const seedRunning = lines.indexOf("db: seed-a running");
    if (seedRunning >= 0) expect(lines.slice(seedRunning - 1, seedRunning + 2)).toEqual(["db: seed-a queued", "db: seed-a running", "db: seed-a succeeded"]);
    expect(lines.filter((l) => l !== "db: seed-a running")).toEqual([
      "db: provision running",
      "db: provision succeeded",
      "db: seed-a queued",
      "db: seed-a succeeded",
      "db: ready",
    ]);
    expect(result.outcome === "ready" && result.view).toEqual(await core().sandboxes.view("sb", false));
  });

  it("ends on ResourceFailed with the failing view", async () => {
    await applySb({ fail: "2" });
    const result = await waitForSandbox(api, "sb", "ready", { timeoutMs: 20_000, log: () => {} });
    expect(result.outcome).toBe("failed");
    const view = result.outcome === "failed" ? result.view : undefined;
    expect(view?.status?.reason).toBe("ResourceFailed");
    expect(view?.resources[0]?.failure).toMatchObject({ step: "seed-a", exitCode: 2, reason: "Error", logTail: "seeding db" });
    expect(view).toEqual(await core().sandboxes.view("sb", false));
  });

  it("fails when the sandbox does not exist", async () => {
    const err = await waitForSandbox(api, "sb", "ready", { timeoutMs: 5000, log: () => {} }).catch((e: unknown) => e);
    expect(isNotFoundError(err)).toBe(true);
  });

  it("reconnects when the server ends the stream early", async () => {
    await applySb({ gate: gate() });
    await waitForStep("provision=Running");
    const viaProxy = await startProxy();
    proxy!.faults = [{ after: 1, end: true }];
    const lines: string[] = [];
    try {
      const waiting = waitForSandbox(viaProxy, "sb", "ready", { timeoutMs: 20_000, log: (l) => lines.push(l), backoffMs: 1 });
      await waitFor(() => proxy!.watchCalls === 2, { what: "the second watch" });
      open(gate());
      const result = await waiting;
      expect(result.outcome).toBe("ready");
      expect(lines.slice(0, 2)).toEqual(["db: provision running", "watch on sandbox sb interrupted (the server ended the stream); reconnecting"]);
      expect(lines.at(-1)).toBe("db: ready");
    } finally {
      viaProxy.close();
    }
  });

  it("gives up after a bounded number of consecutive broken streams", async () => {
    // Nothing listens on the address: every watch fails with UNAVAILABLE.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const nowhere = new Api(`127.0.0.1:${port}`);
    const lines: string[] = [];
    try {
      const err = await waitForSandbox(nowhere, "sb", "ready", { timeoutMs: 10_000, log: (l) => lines.push(l), maxReconnects: 3, backoffMs: 1 })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UnavailableError);
      expect((err as Error).message).toMatch(/^lost the watch on sandbox sb 4 times in a row: /);
      expect(lines.filter((l) => l.endsWith("; reconnecting"))).toHaveLength(3);
    } finally {
      nowhere.close();
    }
  });

  it("times out with the last view seen", async () => {
    await applySb({ gate: gate() });
    await waitForStep("provision=Running");
    const result = await waitForSandbox(api, "sb", "ready", { timeoutMs: 200, log: () => {} });
    expect(result.outcome).toBe("timeout");
    expect(result.outcome === "timeout" && result.view?.resources[0]?.steps[0]).toMatchObject({ name: "provision", status: "Running" });
  });

  it("checks with Get when the stream stays silent, and ends on what it finds", async () => {
    await applySb({ gate: gate() });
    await waitForStep("provision=Running");
    const viaProxy = await startProxy();
    proxy!.faults = [{ after: 1, silent: true }];
    const lines: string[] = [];
    try {
      const waiting = waitForSandbox(viaProxy, "sb", "ready", { timeoutMs: 20_000, log: (l) => lines.push(l), probeMs: 20 });
      await waitFor(() => lines.length > 0, { what: "the one view the stream sends" });
      open(gate());
      const result = await waiting;
      expect(result.outcome).toBe("ready");
      expect(proxy!.watchCalls).toBe(1);
      expect(lines[0]).toBe("db: provision running");
      expect(lines.at(-1)).toBe("db: ready");
      await waitFor(() => proxy!.openWatches === 0, { what: "the silent watch to be cancelled" });
    } finally {
      viaProxy.close();
    }
  });

  it("stops when its signal is aborted", async () => {
    await applySb({ gate: gate() });
    await waitForStep("provision=Running");
    const abort = new AbortController();
    const waiting = waitForSandbox(api, "sb", "ready", { timeoutMs: 20_000, log: () => abort.abort(), signal: abort.signal });
    await expect(waiting).rejects.toThrow("interrupted");
  });
});

describe("waitForSandbox until gone", () => {
  it("does not print the create history of the first view", async () => {
    await applySb({ hold: hold() }, true);
    expect((await eph(core().address, ["sandbox", "delete", "sb", "--wait=false"])).code).toBe(0);
    const lines: string[] = [];
    const waiting = waitForSandbox(api, "sb", "gone", { timeoutMs: 20_000, log: (l) => lines.push(l) });
    await waitFor(() => lines.includes("db: deprovision running"), { what: "deprovision running" });
    open(hold());
    expect(await waiting).toEqual({ outcome: "gone" });
    expect(lines).toEqual(["db: deprovision running", "db: deprovision succeeded"]);
  });

  it("ends when the sandbox does not exist (any more)", async () => {
    expect(await waitForSandbox(api, "sb", "gone", { timeoutMs: 5000, log: () => {} })).toEqual({ outcome: "gone" });
  });

  it("ends when a silent stream outlives the sandbox", async () => {
    await applySb({ hold: hold() }, true);
    expect((await eph(core().address, ["sandbox", "delete", "sb", "--wait=false"])).code).toBe(0);
    const viaProxy = await startProxy();
    proxy!.faults = [{ after: 0, silent: true }];
    try {
      const waiting = waitForSandbox(viaProxy, "sb", "gone", { timeoutMs: 20_000, log: () => {}, probeMs: 20 });
      await waitFor(() => proxy!.watchCalls === 1, { what: "the watch" });
      open(hold());
      expect(await waiting).toEqual({ outcome: "gone" });
      await core().waitForEvent("ephemera.sandbox.deleted.v1", "sb");
    } finally {
      viaProxy.close();
    }
  });

  it("fails when a silent stream hides a sandbox that does not exist", async () => {
    const viaProxy = await startProxy();
    proxy!.faults = [{ after: 0, silent: true }];
    try {
      const err = await waitForSandbox(viaProxy, "sb", "ready", { timeoutMs: 5000, log: () => {}, probeMs: 20 }).catch((e: unknown) => e);
      expect(isNotFoundError(err)).toBe(true);
    } finally {
      viaProxy.close();
    }
  });
});
