// Admission under a burst, on the real core (API, scheduler, runner): a create waits while its
// cluster has as many sandboxes created and not yet started as it admits, goes on in the order
// it came once one starts or goes, and is refused, with nothing written, past its wait.
import { existsSync } from "node:fs";
import { join } from "node:path";
import * as pb from "@ephemera/proto";
import { call, grpc } from "@ephemera/kit/client";
import { UnavailableError, waitFor } from "@ephemera/kit";
import { Api } from "../../cli/src/api.js";
import { startCore, type Core } from "../../../test/support/core.js";
import { SandboxCore } from "./service.js";

// provision waits for the file $GATE names (when given): a step a test holds running.
const PLUGIN = pb.ResourcePlugin.fromPartial({
  name: "gated@1.0.0",
  spec: {
    runner: { image: "debian:bookworm-slim" },
    create: [{
      name: "provision", inputs: [{ name: "gate", valueFromSandbox: true }],
      script: "#!/bin/sh\nif [ -n \"$GATE\" ]; then while [ ! -e \"$GATE\" ]; do sleep 0.02; done; fi\n",
    }],
  },
});
const sandbox = (name: string, cluster: string, gate?: string) => pb.Sandbox.fromPartial({
  name, spec: { cluster, resources: [{ name: "db", plugin: "gated@1.0.0", params: gate ? { gate } : {} }] },
});

let core: Core;
let api: Api;
afterEach(async () => {
  api?.close();
  await core?.stop();
});

const start = async (admission: { waiting: number; timeoutMs: number }, runnerConcurrency?: number) => {
  core = await startCore({ admission, ...(runnerConcurrency ? { runnerConcurrency } : {}) });
  api = new Api(core.address);
  await api.applyPlugin(PLUGIN);
};
/** Whether the store holds a commit of sandbox `name`. */
const written = async (name: string) => (await core.events()).some((e) => e.type.startsWith("ephemera.sandbox.") && e.subject === name);
const settled = <T>(p: Promise<T>) => {
  const state: { done: boolean; value?: T; error?: unknown } = { done: false };
  p.then((value) => Object.assign(state, { done: true, value }), (error: unknown) => Object.assign(state, { done: true, error }));
  return state;
};

describe("admission of new sandboxes", () => {
  it("holds creates on a full cluster in the order they came, writing nothing for them, and lets the first go when a sandbox goes", async () => {
    await start({ waiting: 2, timeoutMs: 30_000 });
    // No runner serves cluster "far": its sandboxes stay created and not started.
    await api.applySandbox(sandbox("a", "far"));
    await api.applySandbox(sandbox("b", "far"));
    const c = settled(api.applySandbox(sandbox("c", "far")));
    await waitFor(() => core.sandboxes.admission.held === 1, { what: "c to be held" });
    const d = settled(api.applySandbox(sandbox("d", "far")));
    await waitFor(() => core.sandboxes.admission.held === 2, { what: "d to be held behind c" });
    expect(await written("c")).toBe(false);
    expect(await written("d")).toBe(false);
    // Another cluster has room: its create is not held behind them.
    expect((await api.applySandbox(sandbox("n", "local"))).created).toBe(true);

    await api.deleteSandbox("a", false);
    await waitFor(() => c.done, { what: "c to be admitted" });
    expect(c.value?.created).toBe(true);
    expect(d.done).toBe(false);
    expect(core.sandboxes.admission.counts("far")).toEqual({ unstarted: 2, held: 1 });
    await api.deleteSandbox("b", false);
    await waitFor(() => d.done, { what: "d to be admitted" });
    expect(d.value?.created).toBe(true);
  });

  it("decides a held create again once admitted: a plugin version deleted while it waited refuses it, and nothing is written", async () => {
    await start({ waiting: 1, timeoutMs: 30_000 });
    await api.applySandbox(sandbox("a", "far"));
    const b = settled(api.applySandbox(sandbox("b", "far")));
    await waitFor(() => core.sandboxes.admission.held === 1, { what: "b to be held" });
    // In use by a, the version is only marked as being deleted; a's deletion then frees b's place.
    await api.deletePlugin("gated@1.0.0");
    await api.deleteSandbox("a", false);
    await waitFor(() => b.done, { what: "b to be decided" });
    expect((b.error as Error).message).toMatch(/spec\.resources\[0\]\.plugin: plugin gated@1\.0\.0 is being deleted: no new sandbox may use it/);
    expect(await written("b")).toBe(false);
  });

  it("admits the next create when a runner starts an admitted sandbox's first step", async () => {
    await start({ waiting: 1, timeoutMs: 30_000 }, 1);
    const gate = join(core.scratch, "gate");
    // s0 holds the runner's only slot; s1 is created and queued behind it, not started; s2 waits for s1 to start.
    await api.applySandbox(sandbox("s0", "local", gate));
    await waitFor(() => core.sandboxes.admission.counts("local").unstarted === 0, { what: "s0 to start" });
    await api.applySandbox(sandbox("s1", "local"));
    const s2 = settled(api.applySandbox(sandbox("s2", "local")));
    await waitFor(() => core.sandboxes.admission.held === 1, { what: "s2 to be held" });
    expect(existsSync(gate)).toBe(false);
    expect(await written("s2")).toBe(false);
    core.file("gate", "");
    await waitFor(() => s2.done, { what: "s2 to be admitted once s1 started", timeoutMs: 20_000 });
    expect(s2.value?.created).toBe(true);
    await waitFor(async () => (await api.getSandbox("s2")).status?.ready, { what: "s2 ready", timeoutMs: 20_000 });
  });

  it("refuses a create past its wait as unavailable, naming why, and writes nothing", async () => {
    await start({ waiting: 1, timeoutMs: 400 });
    await api.applySandbox(sandbox("a", "far"));
    const err = await api.applySandbox(sandbox("late", "far")).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as Error).message).toMatch(
      /not admitted within 0.4 s: 1 sandboxes of cluster far are created and not yet started by a runner \(at most 1 may be\); nothing was written/);
    expect(await written("late")).toBe(false);
    expect(core.sandboxes.admission.held).toBe(0);
  });

  it("refuses a held create a second before its caller's deadline, so the caller hears why", async () => {
    await start({ waiting: 1, timeoutMs: 60_000 });
    await api.applySandbox(sandbox("a", "far"));
    const client = new pb.SandboxServiceClient(core.address, grpc.credentials.createInsecure());
    try {
      const t0 = Date.now();
      const refused = await call(client.apply.bind(client), { sandbox: sandbox("short", "far"), dryRun: false }, 1_600)
        .then(() => undefined, (e: unknown) => e);
      expect(refused).toBeInstanceOf(UnavailableError);
      expect((refused as Error).message).toMatch(/not admitted within 0.6 s/);
      expect(Date.now() - t0).toBeLessThan(1_600);
      expect(core.sandboxes.admission.held).toBe(0);
      expect(await written("short")).toBe(false);
    } finally {
      client.close();
    }
  });

  it("never holds an update, a dry run or a sandbox without resources", async () => {
    await start({ waiting: 1, timeoutMs: 30_000 });
    await api.applySandbox(sandbox("a", "far"));
    const update = pb.Sandbox.fromPartial({ ...sandbox("a", "far"), spec: { ...sandbox("a", "far").spec!, labels: { team: "x" } } });
    expect((await api.applySandbox(update)).created).toBe(false);
    expect((await api.applySandbox(sandbox("planned", "far"), true)).plan?.action).toBe("create");
    expect((await api.applySandbox(pb.Sandbox.fromPartial({ name: "bare", spec: { cluster: "far" } }))).created).toBe(true);
    expect(core.sandboxes.admission.held).toBe(0);
  });

  it("a replica started on the store counts the sandboxes created and not started that it finds", async () => {
    await start({ waiting: 4, timeoutMs: 30_000 });
    await api.applySandbox(sandbox("a", "far"));
    await api.applySandbox(sandbox("b", "far"));
    await api.applySandbox(pb.Sandbox.fromPartial({ name: "ran", spec: { cluster: "local", resources: [{ name: "db", plugin: "gated@1.0.0" }] } }));
    await waitFor(async () => (await api.getSandbox("ran")).status?.ready, { what: "ran ready", timeoutMs: 20_000 });
    const replica = new SandboxCore({
      store: core.store, logs: core.logs, values: core.sandboxes.deps.values, logger: core.sandboxes.deps.logger,
      previewDomain: "preview.test", routingKey: () => "unused", admission: { waiting: 4, timeoutMs: 30_000 },
    });
    await replica.start();
    try {
      expect(replica.admission.counts("far").unstarted).toBe(2);
      expect(replica.admission.counts("local").unstarted).toBe(0);
    } finally {
      await replica.stop();
    }
  });
});
