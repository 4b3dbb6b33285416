import { rmSync } from "node:fs";
import { join } from "node:path";
import { UnavailableError, waitFor } from "@ephemera/kit";
import { eph, useCore, type Live } from "./eph.testkit.js";
import { WatchProxy } from "./watch-proxy.testkit.js";

// provision fails (exit 3) while the file $MARKER names is missing, then writes a text and a
// binary output; deprovision waits for $GATE and fails (exit 7) when $REFUSE is "yes" or names
// a file that exists.
const PLUGIN = `
name: hello-db@1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: provision
    inputs:
    - {name: marker, valueFromSandbox: true}
    outputs:
    - {name: host, valueFromPath: /tmp/host}
    - {name: key, valueFromPath: /tmp/key}
    script: |
      #!/bin/sh
      echo "creating db in $EPHEMERA_RUN_ID"
      if [ -n "$MARKER" ] && [ ! -e "$MARKER" ]; then echo "no marker at $MARKER"; exit 3; fi
      printf db-42 > /tmp/host
      printf '\\377\\376' > /tmp/key
  delete:
  - name: deprovision
    inputs:
    - {name: host, valueFromStep: {name: provision, output: host}}
    - {name: gate, valueFromSandbox: true}
    - {name: refuse, valueFromSandbox: true}
    script: |
      #!/bin/sh
      echo "dropping $HOST"
      if [ -n "$GATE" ]; then while [ ! -e "$GATE" ]; do sleep 0.05; done; fi
      if [ "$REFUSE" = yes ] || { [ -n "$REFUSE" ] && [ -e "$REFUSE" ]; }; then echo "permission denied"; exit 7; fi
`;

const core = useCore();
const api = () => core().address;
/** The routing key of the n-th sandbox this test's core created. */
const rk = (n = 1) => `${core().tag}${String(n).padStart(8, "0")}`;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

beforeEach(async () => {
  expect((await eph(api(), ["plugin", "apply", "-f", core().file("plugin.yaml", PLUGIN)])).code).toBe(0);
});

/** Applies a sandbox with one resource `db` on hello-db, waiting until it is ready unless `wait` is false. */
async function applySandbox(name: string, opts: { params?: Record<string, string>; cluster?: string; extra?: string; wait?: boolean } = {}) {
  const doc = `
name: ${name}
spec:
  cluster: ${opts.cluster ?? "local"}
  defaultRouteGroup:
    endpoints: [{name: web, target: "http://web:8080"}]
  resources:
  - {name: db, plugin: hello-db, params: ${JSON.stringify(opts.params ?? {})}}
${opts.extra ?? ""}`;
  const noWait = opts.wait === false ? ["--wait=false"] : [];
  const r = await eph(api(), ["sandbox", "apply", "-f", core().file(`${name}.yaml`, doc), ...noWait]);
  if (r.code !== 0) throw new Error(`applying sandbox ${name} exited ${r.code}:\n${r.stderr}`);
}

/** `step=Status` for every step of the sandbox, as the API reports them. */
const stepsOf = async (name: string) =>
  (await core().sandboxes.view(name, false)).resources.flatMap((r) => r.steps.map((s) => `${s.name}=${s.status}`));

const waitForStep = (name: string, step: string) =>
  waitFor(async () => (await stepsOf(name)).includes(step), { what: `${step} in sandbox ${name}` });

describe("eph sandbox get", () => {
  beforeEach(() => applySandbox("feature-x"));

  it("prints one JSON document with output sizes only", async () => {
    const r = await eph(api(), ["sandbox", "get", "feature-x", "-o", "json"]);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(Object.keys(doc)).toEqual(["name", "routingKey", "spec", "status", "endpoints", "resources", "createdAt", "updatedAt"]);
    const created = await core().waitForEvent("ephemera.sandbox.created.v1", "feature-x");
    const ready = await core().waitForEvent("ephemera.sandbox.ready.v1", "feature-x");
    expect(doc).toMatchObject({
      name: "feature-x",
      routingKey: rk(),
      spec: { cluster: "local" },
      status: { ready: true, reason: "Ready", message: "all resources are ready" },
      endpoints: [{ name: "web", url: `https://web--${rk()}.preview.test`, target: "http://web:8080", baselineUrl: "https://web-8080.preview.test" }],
      createdAt: created.time,
      updatedAt: ready.time,
    });
    expect(doc.createdAt).toMatch(ISO);
    expect(doc.resources).toHaveLength(1);
    expect(doc.resources[0]).toMatchObject({ name: "db", plugin: "hello-db", version: "1.0.0", status: "Ready" });
    expect(doc.resources[0].outputs).toEqual({ "provision.host": { size: 5 }, "provision.key": { size: 2 } });
    expect(doc.resources[0].steps).toEqual([expect.objectContaining({
      name: "provision", phase: "create", status: "Succeeded", attempt: 1, runId: `${rk()}.db.create.provision.1`,
    })]);
  });

  it("with --show-outputs includes values as text, or base64 when not UTF-8", async () => {
    const r = await eph(api(), ["sb", "get", "feature-x", "-o", "json", "--show-outputs"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).resources[0].outputs).toEqual({
      "provision.host": { size: 5, value: "db-42" },
      "provision.key": { size: 2, base64: Buffer.from([0xff, 0xfe]).toString("base64") },
    });
  });

  it("prints YAML by default", async () => {
    const r = await eph(api(), ["sandbox", "get", "feature-x"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`name: feature-x\nroutingKey: ${rk()}\n`);
    expect(r.stdout).toContain("      provision.host:\n        size: 5\n");
  });

  it("exits 1 for an unknown sandbox, with nothing on stdout", async () => {
    const r = await eph(api(), ["sandbox", "get", "nope", "-o", "json"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("sandbox nope not found");
  });

  it("exits 2 for an unknown output format", async () => {
    const r = await eph(api(), ["sandbox", "get", "feature-x", "-o", "xml"]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
  });
});

describe("eph sandbox list", () => {
  beforeEach(async () => {
    // No runner serves cluster "elsewhere": b-two stays Creating.
    await applySandbox("b-two", { cluster: "elsewhere", wait: false });
    await applySandbox("a-one");
  });

  it("prints a table", async () => {
    const r = await eph(api(), ["sandbox", "list"]);
    expect(r.code).toBe(0);
    const time = "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ";
    const lines = r.stdout.split("\n");
    expect(lines).toHaveLength(4);
    expect(lines[0]).toBe("NAME    READY   STATUS     RESOURCES   CREATED");
    expect(lines[1]).toMatch(new RegExp(`^a-one   true    Ready      1/1         ${time}$`));
    expect(lines[2]).toMatch(new RegExp(`^b-two   false   Creating   0/1         ${time}$`));
    expect(lines[3]).toBe("");
  });

  it("-o json prints one array", async () => {
    const r = await eph(api(), ["sandbox", "ls", "-o", "json"]);
    expect(r.code).toBe(0);
    const docs = JSON.parse(r.stdout);
    expect(docs.map((s: { name: string; status: { reason: string } }) => [s.name, s.status.reason])).toEqual([["a-one", "Ready"], ["b-two", "Creating"]]);
  });
});

describe("eph sandbox delete", () => {
  const gate = () => join(core().scratch, "go");
  const open = () => core().file("go", "");

  it("with --wait=false asks for the delete and returns at once", async () => {
    await applySandbox("feature-x", { params: { gate: gate() } });
    const r = await eph(api(), ["sandbox", "delete", "feature-x", "--wait=false"]);
    expect(r).toMatchObject({ code: 0, stdout: "sandbox feature-x deleting\n", stderr: "" });
    expect((await core().waitForEvent("ephemera.sandbox.deleting.v1", "feature-x")).data).toEqual({ reason: "requested" });
    // deprovision still waits for its gate: the command did not wait for it.
    expect((await core().sandboxes.view("feature-x", false)).status?.reason).toBe("Deleting");
  });

  it("--force removes the sandbox at once, running no delete step", async () => {
    await applySandbox("feature-x");
    const r = await eph(api(), ["sandbox", "delete", "feature-x", "--force"]);
    expect(r).toMatchObject({ code: 0, stdout: "sandbox feature-x deleted\n" });
    const events = (await core().events()).filter((e) => e.subject === "feature-x");
    const deleting = events.find((e) => e.type === "ephemera.sandbox.deleting.v1");
    const deleted = events.find((e) => e.type === "ephemera.sandbox.deleted.v1");
    expect(deleting?.data).toEqual({ force: true, reason: "requested" });
    expect(deleted?.data).toEqual({ forced: true });
    expect(deleted?.position).toBe(deleting?.position); // one commit
    expect((await core().events()).filter((e) => e.subject === `${rk()}.db.delete`)).toEqual([]);
  });

  it("waits by default, showing progress, and ends once the sandbox is gone", async () => {
    await applySandbox("feature-x", { params: { gate: gate() } });
    const live: Live = { stdout: "", stderr: "" };
    const running = eph(api(), ["sandbox", "delete", "feature-x"], { live });
    await waitFor(() => live.stderr.includes("db: deprovision running\n"), { what: "progress before the end" });
    expect(live.stdout).toBe("sandbox feature-x deleting\n");
    open();
    const r = await running;
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("db: deprovision running\ndb: deprovision succeeded\n");
    expect(r.stdout).toBe("sandbox feature-x deleting\nsandbox feature-x deleted\n");
    await core().waitForEvent("ephemera.sandbox.deleted.v1", "feature-x");
  });

  it("--wait (before the name too) ends when someone else removes the sandbox meanwhile", async () => {
    await applySandbox("feature-x", { params: { gate: gate() } });
    const live: Live = { stdout: "", stderr: "" };
    const running = eph(api(), ["sandbox", "delete", "--wait", "feature-x"], { live });
    await waitFor(() => live.stderr.includes("db: deprovision running\n"), { what: "the delete to be under way" });
    expect((await eph(api(), ["sandbox", "delete", "feature-x", "--force"])).code).toBe(0);
    const r = await running;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("sandbox feature-x deleting\nsandbox feature-x deleted\n");
  });

  it("exits 1 on DeprovisionFailed naming the step, exit code and log tail", async () => {
    await applySandbox("feature-x", { params: { refuse: "yes" } });
    const r = await eph(api(), ["sandbox", "delete", "feature-x"]);
    expect(r.code).toBe(1);
    // A delete step's line even when it failed before the watch's first view: of that view, only the create phase is history.
    expect(r.stderr).toContain("db: deprovision failed (exit code 7)\n");
    expect(r.stderr).toContain("resource db failed at step deprovision (delete)\n  exit code: 7\n  reason:    Error\n");
    expect(r.stderr).toContain("    | dropping db-42\n    | permission denied\n");
    expect(r.stderr).toContain("error: deleting sandbox feature-x failed: resource db: step deprovision exited 7 (Error)");
    const failed = await core().waitForEvent("ephemera.sandbox.resource_deprovision_failed.v1", "feature-x");
    expect(failed.data).toMatchObject({ resource: "db", failure: { step: "deprovision", exitCode: 7 } });
  });

  it("deleting again after a failed delete runs the failed teardown again, as a new attempt", async () => {
    const refuse = core().file("refuse", "");
    await applySandbox("feature-x", { params: { refuse } });
    expect((await eph(api(), ["sandbox", "delete", "feature-x"])).code).toBe(1);
    rmSync(refuse);
    const r = await eph(api(), ["sandbox", "delete", "feature-x"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("sandbox feature-x deleting\nsandbox feature-x deleted\n");
    expect(r.stderr).toContain("db: deprovision succeeded (attempt 2)\n");
    await core().waitForEvent("ephemera.sandbox.deprovision_retry_requested.v1", "feature-x");
    await core().waitForEvent("ephemera.sandbox.deleted.v1", "feature-x");
  });

  it("--force says which teardowns it skips", async () => {
    await applySandbox("feature-x", { params: { refuse: "yes" } });
    expect((await eph(api(), ["sandbox", "delete", "feature-x"])).code).toBe(1);
    const r = await eph(api(), ["sandbox", "delete", "feature-x", "--force"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("--force skips the delete workflow of resource db (deprovision failed): what it created is not cleaned up\n");
    expect(r.stdout).toBe("sandbox feature-x deleted\n");
  });

  it("--wait reconnects when the stream breaks, without repeating progress", async () => {
    await applySandbox("feature-x", { params: { gate: gate() } });
    expect((await eph(api(), ["sandbox", "delete", "feature-x", "--wait=false"])).code).toBe(0);
    await waitForStep("feature-x", "deprovision=Running");
    // A stream reset between the CLI and the API: the real core does not reset its own streams.
    const proxy = await WatchProxy.start(api());
    try {
      proxy.faults = [{ after: 1, error: new UnavailableError("stream reset") }];
      const live: Live = { stdout: "", stderr: "" };
      const running = eph(proxy.address, ["sandbox", "delete", "feature-x", "--wait"], { live });
      await waitFor(() => proxy.watchCalls === 2 && proxy.openWatches === 1, { what: "the second watch" });
      open();
      const r = await running;
      expect(r.code).toBe(0);
      expect(r.stderr).toBe(
        "db: deprovision running\nwatch on sandbox feature-x interrupted (stream reset); reconnecting\ndb: deprovision succeeded\n",
      );
      expect(r.stdout).toBe("sandbox feature-x deleting\nsandbox feature-x deleted\n");
    } finally {
      proxy.stop();
    }
  });

  it("--wait-timeout exits 1 saying what it was still waiting for", async () => {
    await applySandbox("feature-x", { params: { gate: gate() } });
    expect((await eph(api(), ["sandbox", "delete", "feature-x", "--wait=false"])).code).toBe(0);
    await waitForStep("feature-x", "deprovision=Running");
    // Deleting a sandbox being deleted changes nothing, and waits.
    const r = await eph(api(), ["sandbox", "delete", "feature-x", "--wait-timeout", "300ms"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("sandbox feature-x deleting\n");
    expect(r.stderr).toContain(
      "error: timed out after 300ms waiting for sandbox feature-x to be deleted; still waiting for: db (deprovisioning, deprovision running)",
    );
    expect((await core().events()).filter((e) => e.type === "ephemera.sandbox.deleting.v1")).toHaveLength(1);
  });

  it("exits 2 on a malformed --wait-timeout, before asking for anything", async () => {
    await applySandbox("feature-x");
    const before = await core().store.position();
    const r = await eph(api(), ["sandbox", "delete", "feature-x", "--wait-timeout", "soon"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--wait-timeout: "soon" is not a duration such as 90s, 10m, 1h30m, 2d or 1w');
    expect(await core().store.position()).toBe(before);
    expect((await core().sandboxes.view("feature-x", false)).status?.reason).toBe("Ready");
  });

  it("exits 2 without a name or a file, or with both", async () => {
    await applySandbox("feature-x");
    const before = await core().store.position();
    expect((await eph(api(), ["sandbox", "delete"])).code).toBe(2);
    expect((await eph(api(), ["sandbox", "delete", "feature-x", "-f", "sb.yaml"])).code).toBe(2);
    expect(await core().store.position()).toBe(before);
  });

  it("exits 1 for an unknown sandbox", async () => {
    const r = await eph(api(), ["sandbox", "delete", "nope"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("sandbox nope not found");
  });
});

describe("a sandbox view's spec", () => {
  it("round-trips labels and ttl as the file has them", async () => {
    await applySandbox("feature-x", { wait: false, extra: "  labels: {team: a}\n  ttl: {duration: 2d, offsetFrom: createdAt}\n" });
    const r = await eph(api(), ["sandbox", "get", "feature-x", "-o", "json"]);
    expect(JSON.parse(r.stdout).spec).toEqual({
      cluster: "local",
      labels: { team: "a" },
      ttl: { duration: "2d", offsetFrom: "createdAt" },
      resources: [{ name: "db", plugin: "hello-db" }],
      defaultRouteGroup: { endpoints: [{ name: "web", target: "http://web:8080" }] },
    });
    // The TTL shows when the sandbox will be deleted: two days after its creation.
    const doc = JSON.parse(r.stdout);
    expect(Date.parse(doc.status.scheduledDeleteTime) - Date.parse(doc.createdAt)).toBe(2 * 24 * 3600 * 1000);
  });
});

describe("eph sandbox retry", () => {
  it("exits 1 when the sandbox has no failed resource, or does not exist", async () => {
    await applySandbox("feature-y");
    const before = await core().store.position();
    const r = await eph(api(), ["sandbox", "retry", "feature-y"]);
    expect(r).toMatchObject({ code: 1, stdout: "" });
    expect(r.stderr).toContain("error: sandbox feature-y has no failed resource, removal or fork to retry");
    const nope = await eph(api(), ["sandbox", "retry", "nope"]);
    expect(nope.code).toBe(1);
    expect(nope.stderr).toContain("sandbox nope is not there: nothing to retry");
    expect(await core().store.position()).toBe(before);
  });
});

describe("eph sandbox retry after a failed step", () => {
  const marker = () => join(core().scratch, "marker");

  /** feature-x failed: provision exited 3 because the marker was missing. */
  beforeEach(async () => {
    const doc = `
name: feature-x
spec:
  cluster: local
  resources:
  - {name: db, plugin: hello-db, params: {marker: "${marker()}"}}
`;
    const r = await eph(api(), ["sandbox", "apply", "-f", core().file("sb.yaml", doc)]);
    expect(r.code).toBe(1);
    // Created by this apply: its failed first step gets its line, however early it failed.
    expect(r.stderr).toContain("db: provision failed (exit code 3)\n");
    expect(r.stderr).toContain("resource db failed at step provision (create)\n  exit code: 3\n");
    core().file("marker", "");
  });

  it("runs the failed step again as attempt 2, waiting (by default) until the sandbox is ready", async () => {
    const r = await eph(api(), ["sandbox", "retry", "feature-x"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("sandbox feature-x: retrying db\nsandbox feature-x ready\n");
    // What changed since the sandbox failed, however early the second attempt ended: its end
    // and the resource's for certain; before them, what the watch saw on the way (it ends
    // sooner than the scheduler records a start, START_RECORD_DELAY_MS, so running only where it ran that long).
    const lines = r.stderr.trimEnd().split("\n");
    expect(lines.slice(-2)).toEqual(["db: provision succeeded (attempt 2)", "db: ready"]);
    expect(lines.slice(0, -2).filter((l) => !["db: provision queued (attempt 2)", "db: provisioning", "db: provision running (attempt 2)"].includes(l))).toEqual([]);
    expect((await core().waitForEvent("ephemera.sandbox.retry_requested.v1", "feature-x")).data).toEqual({ resources: ["db"] });
    await core().waitForEvent("ephemera.steprun.succeeded.v1", `${rk()}.db.create.provision.2`);
    const doc = JSON.parse((await eph(api(), ["sandbox", "get", "feature-x", "-o", "json"])).stdout);
    expect(doc.status).toMatchObject({ ready: true, reason: "Ready" });
    const times = { queuedAt: expect.any(String), startedAt: expect.any(String), endedAt: expect.any(String) };
    const attempts = doc.resources[0].steps[0].attempts as Array<{ queuedAt: string; startedAt: string; endedAt: string }>;
    expect(attempts).toEqual([
      { attempt: 1, runId: `${rk()}.db.create.provision.1`, status: "Failed", reason: "Error", exitCode: 3, ...times },
      { attempt: 2, runId: `${rk()}.db.create.provision.2`, status: "Succeeded", ...times },
    ]);
    // Each attempt timed by its events, the second after the first.
    const ms = attempts.flatMap((a) => [a.queuedAt, a.startedAt, a.endedAt].map(Date.parse));
    expect(ms).toEqual([...ms].sort((a, b) => a - b));
  });

  it("with --wait=false returns once the retry is asked for (the step, its marker gone again, fails again meanwhile)", async () => {
    rmSync(marker());
    const r = await eph(api(), ["sandbox", "retry", "feature-x", "--wait=false"]);
    expect(r).toMatchObject({ code: 0, stdout: "sandbox feature-x: retrying db\n", stderr: "" });
    await core().waitForEvent("ephemera.steprun.failed.v1", `${rk()}.db.create.provision.2`);
  });

  it("eph logs shows the latest attempt, and --attempt 1 the first", async () => {
    expect((await eph(api(), ["sandbox", "retry", "feature-x", "--wait"])).code).toBe(0);
    const latest = await eph(api(), ["logs", "--sandbox", "feature-x", "--resource", "db"]);
    expect(latest).toMatchObject({
      code: 0, stdout: `creating db in ${rk()}.db.create.provision.2\n`, stderr: "==> provision (create, attempt 2) <==\n",
    });
    const first = await eph(api(), ["logs", "--sandbox", "feature-x", "--resource", "db", "--attempt", "1"]);
    expect(first).toMatchObject({
      code: 0, stdout: `creating db in ${rk()}.db.create.provision.1\nno marker at ${marker()}\n`, stderr: "==> provision (create) <==\n",
    });
  });
});
