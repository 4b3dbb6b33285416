// Re-applying a changed sandbox updates it in place (seed 003's rules), against the real
// core: mutable fields change with the routing key, the kept endpoint's URL and the
// resources' runs untouched; immutable changes are refused by name with nothing written;
// a resource added or removed runs only its own workflow; while a workflow runs, what leaves
// the resources as they are is taken and adding or removing one is refused, naming it; a ref
// pinning the running version is no change.
import { rmSync } from "node:fs";
import { waitFor } from "@ephemera/kit";
import { eph, useCore } from "./eph.testkit.js";

const PLUGIN = (name: string) => `
name: ${name}@1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: provision
    inputs:
    - {name: gate, valueFromSandbox: true}
    script: |
      #!/bin/sh
      if [ -n "$GATE" ]; then while [ ! -e "$GATE" ]; do sleep 0.05; done; fi
      echo "provisioned $EPHEMERA_RESOURCE_NAME"
  delete:
  - name: deprovision
    script: |
      #!/bin/sh
      echo "deprovisioned $EPHEMERA_RESOURCE_NAME"
`;

const core = useCore();
const api = () => core().address;

interface Doc { description?: string; labels?: Record<string, string>; endpoints?: string[]; resources?: Array<[string, string, Record<string, string>?]>; cluster?: string; extra?: string }

function sandbox({ description, labels, endpoints = ["web"], resources = [["db", "hello-db"]], cluster = "local", extra = "" }: Doc): string {
  return `
name: sb
spec:
  cluster: ${cluster}
${extra}${description ? `  description: ${JSON.stringify(description)}\n` : ""}${labels ? `  labels: ${JSON.stringify(labels)}\n` : ""}  defaultRouteGroup:
    endpoints: [${endpoints.map((e) => `{name: ${e}, target: "http://${e}:8080"}`).join(", ")}]
  resources:
${resources.map(([n, p, params]) => `  - {name: ${n}, plugin: ${p}, params: ${JSON.stringify(params ?? {})}}`).join("\n")}
`;
}

async function apply(doc: Doc, wait = true) {
  return eph(api(), ["sandbox", "apply", "-f", core().file("sb.yaml", sandbox(doc)), ...(wait ? [] : ["--wait=false"])]);
}

async function get(): Promise<{ routingKey: string; endpoints: Array<{ name: string; url: string }>; resources: Array<{ name: string; status: string }>; status: { ready: boolean } }> {
  const r = await eph(api(), ["sandbox", "get", "sb", "-o", "json"]);
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout);
}

/** How many runs of `phase` steps each resource had (from the step runs' started events). */
async function runs(phase: "create" | "delete"): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const e of await core().events()) {
    if (e.type !== "ephemera.steprun.started.v1") continue;
    const [, resource, p] = e.subject.split(".");
    if (p === phase) out[resource!] = (out[resource!] ?? 0) + 1;
  }
  return out;
}

beforeEach(async () => {
  for (const p of ["hello-db", "cache"]) expect((await eph(api(), ["plugin", "apply", "-f", core().file(`${p}.yaml`, PLUGIN(p))])).code).toBe(0);
  expect((await apply({})).code).toBe(0);
});

describe("eph sandbox apply of a changed sandbox", () => {
  it("updates description, labels and endpoints in place: same routing key, the kept endpoint's URL kept, nothing provisioned again", async () => {
    const before = await get();
    const r = await apply({ description: "now with an api", labels: { team: "payments" }, endpoints: ["web", "api"] });
    expect(r.code).toBe(0);
    expect(r.stdout + r.stderr).toMatch(/updated/);
    const after = await get();
    expect(after.routingKey).toBe(before.routingKey);
    expect(after.endpoints.find((e) => e.name === "web")!.url).toBe(before.endpoints.find((e) => e.name === "web")!.url);
    expect(after.endpoints.map((e) => e.name)).toEqual(["web", "api"]);
    expect(after.status.ready).toBe(true);
    expect(await runs("create")).toEqual({ db: 1 });
    const updated = (await core().events()).filter((e) => e.type === "ephemera.sandbox.updated.v1");
    expect(updated).toHaveLength(1);
    expect((updated[0]!.data as { changes: Array<{ field: string }> }).changes.map((c) => c.field))
      .toEqual(["spec.defaultRouteGroup", "spec.description", "spec.labels"]);
    // A removed endpoint disappears.
    expect((await apply({ endpoints: ["api"] })).code).toBe(0);
    expect((await get()).endpoints.map((e) => e.name)).toEqual(["api"]);
  });

  it("updates ttl, forks, local and virtual workloads in place, and again: routing key kept, nothing provisioned again", async () => {
    const before = await get();
    const versions = [
      `  ttl: {duration: 2h, offsetFrom: updatedAt}
  forks:
  - forkOf: {kind: Deployment, namespace: shop, name: web}
  local:
  - {name: api, from: {kind: Deployment, namespace: shop, name: api}, mappings: [{port: 8080, toLocal: "localhost:8080"}]}
  virtual:
  - {name: v, workload: {kind: Deployment, namespace: shop, name: cart}}
`,
      `  ttl: {duration: 1d}
  forks:
  - forkOf: {kind: Deployment, namespace: shop, name: api}
`,
    ];
    for (const extra of versions) {
      const r = await apply({ extra });
      expect(r.code).toBe(0);
      expect(r.stdout + r.stderr).toMatch(/updated/);
    }
    const after = JSON.parse((await eph(api(), ["sandbox", "get", "sb", "-o", "json"])).stdout) as {
      routingKey: string; status: { scheduledDeleteTime?: string }; workloads: Array<{ kind: string; name: string }>;
    };
    expect(after.routingKey).toBe(before.routingKey);
    expect(after.status.scheduledDeleteTime).toBeDefined();
    expect(after.workloads.map((w) => `${w.kind} ${w.name}`)).toEqual(["fork deployment/api"]);
    expect(await runs("create")).toEqual({ db: 1 });
    const changed = (await core().events()).filter((e) => e.type === "ephemera.sandbox.updated.v1")
      .map((e) => (e.data as { changes: Array<{ field: string }> }).changes.map((c) => c.field));
    expect(changed).toEqual([["spec.forks", "spec.local", "spec.ttl", "spec.virtual"], ["spec.forks", "spec.local", "spec.ttl", "spec.virtual"]]);
  });

  it("refuses immutable changes (cluster, a resource's plugin and params) naming each, exit 2, nothing written", async () => {
    const count = (await core().events()).length;
    const r = await apply({ cluster: "elsewhere", resources: [["db", "cache", { size: "l" }]] }, false);
    expect(r.code).toBe(2);
    for (const field of ["spec.cluster", "spec.resources[0].plugin", "spec.resources[0].params"]) expect(r.stderr).toContain(field);
    expect((await core().events()).length).toBe(count);
  });

  it("adds a resource, running only its create workflow, and removes one, running only its delete workflow", async () => {
    expect((await apply({ resources: [["db", "hello-db"], ["cache", "cache"]] })).code).toBe(0);
    let sb = await get();
    expect(sb.status.ready).toBe(true);
    expect(sb.resources.map((x) => [x.name, x.status])).toEqual([["db", "Ready"], ["cache", "Ready"]]);
    expect(await runs("create")).toEqual({ db: 1, cache: 1 });

    expect((await apply({ resources: [["cache", "cache"]] })).code).toBe(0);
    await core().waitForEvent("ephemera.sandbox.resource_deprovisioned.v1", "sb");
    sb = await get();
    expect(sb.resources.map((x) => x.name)).toEqual(["cache"]);
    expect(await runs("delete")).toEqual({ db: 1 });
    expect(await runs("create")).toEqual({ db: 1, cache: 1 });
  });

  it("runs a failed removal's delete workflow again on retry, and the resource leaves once it succeeds", async () => {
    const FLAKY = `
name: flaky@1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - {name: provision, script: "#!/bin/sh\\ntrue\\n"}
  delete:
  - name: deprovision
    inputs:
    - {name: fixed, valueFromSandbox: true}
    script: |
      #!/bin/sh
      if [ ! -e "$FIXED" ]; then echo "cannot drop it yet"; exit 4; fi
`;
    expect((await eph(api(), ["plugin", "apply", "-f", core().file("flaky.yaml", FLAKY)])).code).toBe(0);
    const fixed = core().file("fixed", "");
    rmSync(fixed);
    expect((await apply({ resources: [["db", "hello-db"], ["old", "flaky", { fixed }]] })).code).toBe(0);
    // The apply waits for the removal too, and says it failed.
    const removed = await apply({ resources: [["db", "hello-db"]] });
    expect(removed.code).toBe(1);
    expect(removed.stderr).toContain("resource old (removed by an update): step deprovision exited 4");
    expect((await get()).resources.map((x) => [x.name, x.status])).toEqual([["db", "Ready"], ["old", "DeprovisionFailed"]]);
    expect((await eph(api(), ["sandbox", "get-status", "sb"])).code).toBe(1);

    core().file("fixed", "");
    const retried = await eph(api(), ["sandbox", "retry", "sb"]);
    expect(retried.code).toBe(0);
    expect(retried.stdout).toMatch(/^sandbox sb: retrying old\nsandbox sb ready\n/);
    expect((await get()).resources.map((x) => x.name)).toEqual(["db"]);
    expect(await runs("delete")).toEqual({ old: 2 });
  });

  /** Adds the cache, whose create waits for the returned gate file; resolves once its step runs. */
  async function gatedCache(extra = ""): Promise<{ gate: string; routingKey: string; doc: (d: Doc) => Doc }> {
    const gate = core().file("gate", "");
    rmSync(gate);
    const doc = (d: Doc): Doc => ({ resources: [["db", "hello-db"], ["cache", "cache", { gate }]], extra, ...d });
    expect((await apply(doc({}), false)).code).toBe(0);
    const { routingKey } = await get();
    await core().waitForEvent("ephemera.steprun.started.v1", `${routingKey}.cache.create.provision.1`);
    return { gate, routingKey, doc };
  }

  it("takes labels, description and endpoints while a resource's create workflow runs; the sandbox is ready once it ends", async () => {
    const { doc } = await gatedCache();
    const changed = doc({ description: "meanwhile", labels: { team: "payments" }, endpoints: ["web", "api"] });
    const planned = await eph(api(), ["sandbox", "apply", "--dry-run", "-f", core().file("plan.yaml", sandbox(changed))]);
    expect(planned.code).toBe(0);
    expect(planned.stdout).toContain("sandbox sb: would update (dry run: nothing written)");
    expect(planned.stdout).toContain('change spec.labels: null -> {"team":"payments"}');
    expect(planned.stdout).not.toContain("would run");
    const r = await apply(doc({ description: "meanwhile", labels: { team: "payments" }, endpoints: ["web", "api"] }), false);
    expect(r.code).toBe(0);
    expect(r.stdout + r.stderr).toMatch(/updated/);
    const during = JSON.parse((await eph(api(), ["sandbox", "get", "sb", "-o", "json"])).stdout) as {
      spec: { labels: Record<string, string>; description: string }; resources: Array<{ name: string; status: string }>; status: { ready: boolean };
      endpoints: Array<{ name: string }>;
    };
    expect(during.spec).toMatchObject({ labels: { team: "payments" }, description: "meanwhile" });
    expect(during.endpoints.map((e) => e.name)).toEqual(["web", "api"]);
    expect(during.resources.map((x) => [x.name, x.status])).toEqual([["db", "Ready"], ["cache", "Provisioning"]]);
    expect(during.status.ready).toBe(false);
    core().file("gate", "");
    await waitFor(async () => (await get()).status.ready, { what: "the sandbox ready once the cache is" });
    expect(await runs("create")).toEqual({ db: 1, cache: 1 });
  });

  it("refuses adding or removing a resource while another's workflow runs, naming the workflow; takes it once it has ended", async () => {
    const { gate, routingKey, doc } = await gatedCache();
    const count = (await core().events()).length;
    const adding = await apply(doc({ resources: [["db", "hello-db"], ["cache", "cache", { gate }], ["more", "hello-db"]] }), false);
    expect(adding.code).toBe(1);
    expect(adding.stderr).toContain(`cannot add more while a workflow runs: the create workflow of resource cache (${routingKey}.cache.create)`);
    expect(adding.stderr).toContain("apply again once it has ended");
    const removing = await apply(doc({ resources: [["cache", "cache", { gate }]] }), false);
    expect(removing.code).toBe(1);
    expect(removing.stderr).toContain(`cannot remove db while a workflow runs: the create workflow of resource cache (${routingKey}.cache.create)`);
    const removal = core().file("sb.yaml", sandbox(doc({ resources: [["cache", "cache", { gate }]] })));
    const planned = await eph(api(), ["sandbox", "apply", "--dry-run", "-f", removal]);
    expect(planned.code).toBe(1);
    expect(planned.stderr).toContain(`the create workflow of resource cache (${routingKey}.cache.create)`);
    expect((await core().events()).length).toBe(count);
    core().file("gate", "");
    await waitFor(async () => (await get()).status.ready, { what: "the sandbox ready once the cache is" });
    expect((await apply(doc({ resources: [["db", "hello-db"], ["cache", "cache", { gate }], ["more", "hello-db"]] }))).code).toBe(0);
    expect(await runs("create")).toEqual({ db: 1, cache: 1, more: 1 });
  });

  it("asks for forks changed while a resource provisions only once every resource is ready, and asks for the changed ones", async () => {
    const forkOf = (name: string) => `  forks:\n  - forkOf: {kind: Deployment, namespace: shop, name: ${name}}\n`;
    const { doc } = await gatedCache(forkOf("web"));
    expect((await apply(doc({ extra: forkOf("api") }), false)).code).toBe(0);
    const asked = async () => (await core().events()).filter((e) => e.type === "ephemera.sandbox.forks_requested.v1");
    expect(await asked()).toEqual([]);
    core().file("gate", "");
    await waitFor(async () => (await get()).status.ready, { what: "the sandbox ready once the cache is and the forks are (skipped)" });
    const requests = (await asked()).map((e) => e.data as { generation: number; forks: Array<{ forkOf: { name: string } }> });
    expect(requests.map((d) => [d.generation, d.forks.map((f) => f.forkOf.name)])).toEqual([[2, ["api"]]]);
  });

  it("re-arms the TTL from a change made while a resource provisions", async () => {
    const { doc } = await gatedCache();
    expect((await apply(doc({ extra: "  ttl: {duration: 2s, offsetFrom: updatedAt}\n" }), false)).code).toBe(0);
    const { status } = JSON.parse((await eph(api(), ["sandbox", "get", "sb", "-o", "json"])).stdout) as { status: { scheduledDeleteTime?: string } };
    expect(status.scheduledDeleteTime).toBeDefined();
    const deleting = await core().waitForEvent("ephemera.sandbox.deleting.v1", "sb", 15_000);
    expect(deleting.data).toMatchObject({ reason: "ttl" });
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(status.scheduledDeleteTime!));
  });

  it("takes a ref pinning the version a resource runs (or @latest, or the bare name again) as no change to it; refuses another version", async () => {
    const pin = async (plugin: string, labels?: Record<string, string>) => apply({ resources: [["db", plugin]], ...(labels ? { labels } : {}) });
    expect((await pin("hello-db@1.0.0")).code).toBe(0);
    expect((await get()).resources).toMatchObject([{ name: "db", version: "1.0.0", status: "Ready" }]);
    const newer = PLUGIN("hello-db").replace("hello-db@1.0.0", "hello-db@1.1.0").replace("provisioned", "provisioned (1.1)");
    expect((await eph(api(), ["plugin", "apply", "-f", core().file("hello-db-1.1.yaml", newer)])).code).toBe(0);
    const refs = [["hello-db", { v: "bare" }], ["hello-db@latest", { v: "latest" }], ["hello-db@1.0.0", { v: "pinned" }]] as const;
    for (const [plugin, labels] of refs) {
      const r = await pin(plugin, labels);
      expect(r.code).toBe(0);
      const sb = await get();
      expect(sb.status.ready).toBe(true);
      expect(sb.resources).toMatchObject([{ name: "db", version: "1.0.0", status: "Ready" }]);
    }
    const same = await pin("hello-db@1.0.0", { v: "pinned" });
    expect(same.stdout + same.stderr).toMatch(/unchanged/);
    const count = (await core().events()).length;
    const other = await pin("hello-db@1.1.0", { v: "pinned" });
    expect(other.code).toBe(2);
    expect(other.stderr).toContain("spec.resources[0].plugin");
    expect(other.stderr).toContain("runs hello-db@1.0.0");
    const newer11 = core().file("sb.yaml", sandbox({ resources: [["db", "hello-db@1.1.0"]] }));
    const planned = await eph(api(), ["sandbox", "apply", "--dry-run", "-f", newer11]);
    expect(planned.code).toBe(2);
    expect(planned.stderr).toContain("spec.resources[0].plugin");
    expect((await core().events()).length).toBe(count);
    expect(await runs("create")).toEqual({ db: 1 });
  });
});

describe("eph sandbox apply --dry-run", () => {
  const dry = (doc: Doc, name = "sb", extra: string[] = []) =>
    eph(api(), ["sandbox", "apply", "--dry-run", "-f", core().file(`${name}.yaml`, sandbox(doc).replace("name: sb", `name: ${name}`)), ...extra]);

  it("plans a new sandbox with its versions resolved, and writes nothing", async () => {
    const count = (await core().events()).length;
    const r = await dry({ resources: [["db", "hello-db"], ["cache", "cache"]] }, "fresh", ["-o", "json"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      sandbox: "fresh", action: "create", create: ["db", "cache"], delete: [],
      resources: [{ name: "db", plugin: "hello-db", version: "1.0.0" }, { name: "cache", plugin: "cache", version: "1.0.0" }],
    });
    expect((await core().events()).length).toBe(count);
    expect((await eph(api(), ["sandbox", "get", "fresh"])).code).toBe(1);
  });

  it("plans an update: what changes, what would run; writes nothing", async () => {
    const count = (await core().events()).length;
    const r = await dry({ description: "d", resources: [["cache", "cache"]] });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("sandbox sb: would update (dry run: nothing written)");
    expect(r.stdout).toContain('change spec.description: null -> "d"');
    expect(r.stdout).toContain("would run the create workflow of: cache");
    expect(r.stdout).toContain("would run the delete workflow of: db");
    expect((await core().events()).length).toBe(count);
    expect((await dry({})).stdout).toContain("would change nothing");
  });

  it("refuses what apply would refuse (an unknown plugin, an immutable change) with exit 2, writing nothing", async () => {
    const count = (await core().events()).length;
    const unknown = await dry({ resources: [["db", "hello-db"], ["x", "nope"]] });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/spec\.resources\[1\]\.plugin/);
    const immutable = await dry({ cluster: "elsewhere" });
    expect(immutable.code).toBe(2);
    expect(immutable.stderr).toContain("spec.cluster");
    expect((await core().events()).length).toBe(count);
  });

  it("refuses a fork of a kind that cannot be forked, and an expression the runner could not evaluate, naming the fields: exit 2", async () => {
    const count = (await core().events()).length;
    const r = await dry({ extra: `  forks:
  - forkOf: {kind: Banana, namespace: shop, name: orders}
  - forkOf: {kind: Deployment, namespace: shop, name: cart}
    customizations:
      env:
      - name: ORDERS
        valueFrom: {fork: {forkOf: {kind: Banana, namespace: shop, name: orders}, expression: "{{ .Service.Foo }}"}}
` }, "banana");
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('spec.forks[0].forkOf.kind: kind "Banana" cannot be forked (a fork copies a Deployment, Rollout or '
      + "StatefulSet)");
    expect(r.stderr).toContain("spec.forks[1].customizations.env[0].valueFrom.fork.expression: unknown field .Service.Foo");
    expect(r.stdout).toBe("");
    expect((await core().events()).length).toBe(count);
    expect((await eph(api(), ["sandbox", "get", "banana"])).code).toBe(1);
  });
});
