// The public API over a real gRPC server and JetStream: requests that skip the CLI get the
// spec package's violations and write nothing; the plugin registry's versions; watch streams.
import { join } from "node:path";
import * as pb from "@ephemera/proto";
import { InMemoryLogStore, JetStreamEventStore, NO_AGGREGATE, connectNats, type EventStore, InMemoryValueStore } from "@ephemera/eventstore";
import {
  ConflictError, NotFoundError, ValidationError, call, createLogger, fromServiceError, grpc, startGrpcServer, waitFor,
  type FieldViolation, type RunningServer,
} from "@ephemera/kit";
import { Aggregates, encode, ev, workflowId } from "@ephemera/events";
import { RULES, jobRunnerGroupViolations, jobViolations, loadTemplate, pluginViolations, routeGroupViolations, sandboxViolations } from "@ephemera/spec";
import type { NatsConnection } from "@nats-io/nats-core";
import { testNats } from "../../../test/support/servers.js";
import { apiServices } from "./api.js";
import {
  NOT_ON_THE_WIRE, baseJob, baseJobRunnerGroup, basePlugin, baseRouteGroup, baseSandbox, jobRows, jobRunnerGroupRows, pluginRows, routeGroupRows,
  sandboxRows, wireJobRunnerGroup, type Doc, type Row,
} from "./invalid-docs.testkit.js";
import { SandboxCore } from "./service.js";

const logger = createLogger("sandbox", "silent");
const FIXTURES = join(__dirname, "..", "..", "spec", "fixtures");

/** The sandbox service on a fresh prefix, and clients of its API. */
async function startApi(wrap: (store: EventStore) => EventStore = (s) => s) {
  const { url, prefix, cleanup } = testNats("sbx");
  const nc: NatsConnection = await connectNats(url, "sandbox-api-test");
  const store: EventStore = wrap(await JetStreamEventStore.open(nc, { prefix, logger }));
  let keys = 0;
  const core = new SandboxCore({
    store, values: new InMemoryValueStore(), logs: new InMemoryLogStore(), logger, previewDomain: "preview.test",
    routingKey: () => `rk${String(++keys).padStart(4, "0")}`,
  });
  await core.start();
  const server: RunningServer = await startGrpcServer("127.0.0.1:0", apiServices(core, logger), logger);
  const address = `127.0.0.1:${server.port}`;
  const plugins = new pb.ResourcePluginServiceClient(address, grpc.credentials.createInsecure());
  const sandboxes = new pb.SandboxServiceClient(address, grpc.credentials.createInsecure());
  const routeGroups = new pb.RouteGroupServiceClient(address, grpc.credentials.createInsecure());
  const groups = new pb.JobRunnerGroupServiceClient(address, grpc.credentials.createInsecure());
  const jobs = new pb.JobServiceClient(address, grpc.credentials.createInsecure());
  const events = new pb.EventServiceClient(address, grpc.credentials.createInsecure());
  return {
    store,
    address,
    sandboxes,
    events,
    applyPlugin: (doc: Doc) => call(plugins.apply.bind(plugins), { plugin: pb.ResourcePlugin.fromJSON(doc), dryRun: false }),
    getPlugin: (ref: string) => call(plugins.get.bind(plugins), { ref }),
    listPlugins: async () => (await call(plugins.list.bind(plugins), { pageSize: 0, pageToken: "", name: "" })).plugins,
    listPage: (pageSize: number, pageToken = "", name = "") => call(plugins.list.bind(plugins), { pageSize, pageToken, name }),
    deletePlugin: async (ref: string) => (await call(plugins.delete.bind(plugins), { ref })).deleted,
    applySandbox: (doc: Doc) => call(sandboxes.apply.bind(sandboxes), { sandbox: pb.Sandbox.fromJSON(doc), dryRun: false }),
    applyRouteGroup: (doc: Doc) => call(routeGroups.apply.bind(routeGroups), { routeGroup: pb.RouteGroup.fromJSON(doc), dryRun: false }),
    applyJobRunnerGroup: (doc: Doc) => call(groups.apply.bind(groups), { jobRunnerGroup: pb.JobRunnerGroup.fromJSON(wireJobRunnerGroup(doc)), dryRun: false }),
    submitJob: (doc: Doc) => call(jobs.submit.bind(jobs), { job: pb.Job.fromJSON(doc) }),
    getSandbox: (name: string) => call(sandboxes.get.bind(sandboxes), { name, showOutputs: false }),
    deleteSandbox: (name: string, force: boolean) => call(sandboxes.delete.bind(sandboxes), { name, force }),
    stop: async () => {
      plugins.close();
      sandboxes.close();
      routeGroups.close();
      groups.close();
      jobs.close();
      events.close();
      await server.shutdown();
      await core.stop();
      await cleanup(nc);
      await nc.close();
    },
  };
}
type Api = Awaited<ReturnType<typeof startApi>>;

/** The ValidationError a request is refused with (fails the test on success or any other error). */
async function violationsOf(request: Promise<unknown>): Promise<FieldViolation[]> {
  const err = await request.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ValidationError);
  return (err as ValidationError).violations;
}

/** The error a request fails with (fails the test when it succeeds). */
async function errorOf(request: Promise<unknown>): Promise<Error> {
  const err = await request.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(Error);
  return err as Error;
}

const fieldsAndRules = (vs: FieldViolation[]) => vs.map((v) => ({ field: v.field, rule: v.rule }));

/** The document as the service sees it: through fromJSON, the wire, and back to JSON. */
const overTheWire = {
  plugin: (doc: Doc) => pb.ResourcePlugin.toJSON(pb.ResourcePlugin.decode(pb.ResourcePlugin.encode(pb.ResourcePlugin.fromJSON(doc)).finish())),
  sandbox: (doc: Doc) => pb.Sandbox.toJSON(pb.Sandbox.decode(pb.Sandbox.encode(pb.Sandbox.fromJSON(doc)).finish())),
  routegroup: (doc: Doc) => pb.RouteGroup.toJSON(pb.RouteGroup.decode(pb.RouteGroup.encode(pb.RouteGroup.fromJSON(doc)).finish())),
  // The pod template crosses as text: never the document unchanged, so only fields and rules are compared.
  jobrunnergroup: (doc: Doc) => pb.JobRunnerGroup.toJSON(pb.JobRunnerGroup.decode(pb.JobRunnerGroup.encode(pb.JobRunnerGroup.fromJSON(wireJobRunnerGroup(doc))).finish())),
  job: (doc: Doc) => pb.Job.toJSON(pb.Job.decode(pb.Job.encode(pb.Job.fromJSON(doc)).finish())),
};

/** A small valid plugin: `name` plus one create step with the given outputs. */
const plugin = (name: string, outputs: string[] = ["host"], description = "a database"): Doc => ({
  name,
  spec: {
    description,
    runner: { image: "alpine:3" },
    create: [{ name: "provision", outputs: outputs.map((o) => ({ name: o, valueFromPath: `/outputs/${o}` })), script: "#!/bin/sh\n" }],
  },
});

/** A sandbox with one resource per `name=plugin-ref` pair. */
const sandbox = (name: string, ...resources: string[]): Doc => ({
  name,
  spec: {
    cluster: "local",
    resources: resources.map((r) => ({ name: r.split("=")[0], plugin: r.split("=")[1] })),
  },
});

describe("requests that skip the CLI", () => {
  let api: Api;
  beforeAll(async () => {
    api = await startApi();
    // Published so that only the rows' own mistakes can make a sandbox invalid.
    await api.applyPlugin(basePlugin());
  });
  afterAll(() => api.stop());

  /** Sends `doc` and expects what the spec package says of the document the author wrote. */
  const expectParity = async (kind: keyof typeof overTheWire, doc: Doc, expected?: Omit<FieldViolation, "description">) => {
    const local = { plugin: pluginViolations, sandbox: sandboxViolations, routegroup: routeGroupViolations, jobrunnergroup: jobRunnerGroupViolations, job: jobViolations }[kind](doc);
    if (expected) expect(fieldsAndRules(local)).toEqual([expected]);
    expect(local.length).toBeGreaterThan(0);
    const before = await api.store.position();
    const send = { plugin: api.applyPlugin, sandbox: api.applySandbox, routegroup: api.applyRouteGroup, jobrunnergroup: api.applyJobRunnerGroup, job: api.submitJob }[kind];
    const remote = await violationsOf(send(doc));
    expect(fieldsAndRules(remote)).toEqual(fieldsAndRules(local));
    // Where proto carries the document unchanged, the words are the same too.
    if (JSON.stringify(overTheWire[kind](doc)) === JSON.stringify(doc)) expect(remote).toEqual(local);
    expect(await api.store.position()).toBe(before);
  };

  const rowsOf = (rows: Row[]) => rows.map(([what, edit, field, rule]) => ({ what, edit, field, rule }));

  it.each(rowsOf(pluginRows))("plugin: $what → INVALID_ARGUMENT at $field ($rule)", async ({ edit, field, rule }) => {
    const doc = basePlugin();
    edit(doc);
    await expectParity("plugin", doc, { field, rule });
  });

  it.each(rowsOf(sandboxRows))("sandbox: $what → INVALID_ARGUMENT at $field ($rule)", async ({ edit, field, rule }) => {
    const doc = baseSandbox();
    edit(doc);
    await expectParity("sandbox", doc, { field, rule });
  });

  it.each(rowsOf(routeGroupRows))("route group: $what → INVALID_ARGUMENT at $field ($rule)", async ({ edit, field, rule }) => {
    const doc = baseRouteGroup();
    edit(doc);
    await expectParity("routegroup", doc, { field, rule });
  });

  it.each(rowsOf(jobRunnerGroupRows))("job runner group: $what → INVALID_ARGUMENT at $field ($rule)", async ({ edit, field, rule }) => {
    const doc = baseJobRunnerGroup();
    edit(doc);
    await expectParity("jobrunnergroup", doc, { field, rule });
  });

  it.each(rowsOf(jobRows))("job: $what → INVALID_ARGUMENT at $field ($rule)", async ({ edit, field, rule }) => {
    const doc = baseJob();
    edit(doc);
    await expectParity("job", doc, { field, rule });
  });

  it("every rule but those proto cannot express has a row", () => {
    const covered = new Set([...pluginRows, ...sandboxRows, ...routeGroupRows, ...jobRunnerGroupRows, ...jobRows].map((row) => row[3]));
    expect(RULES.filter((rule) => !covered.has(rule) && !NOT_ON_THE_WIRE.includes(rule))).toEqual([]);
  });

  it("reports every violation of a document at once, in the same order", async () => {
    const doc = basePlugin();
    doc.name = "1db";
    doc.spec.create[0].script = "echo hello";
    doc.spec.create[1].inputs[0].valueFromStep.output = "hostname";
    doc.spec.create[1].inputs[0].as.path = "/work/../etc";
    doc.spec.delete[0].name = "seed";
    await expectParity("plugin", doc);
    expect(pluginViolations(doc)).toHaveLength(5);

    const sb = baseSandbox();
    sb.name = "feature_x";
    delete sb.spec.cluster;
    sb.spec.ttl.duration = "1y";
    sb.spec.local[0].mappings[0].port = 70000;
    sb.spec.defaultRouteGroup.endpoints[0].target = "orders:8080";
    await expectParity("sandbox", sb);
    expect(sandboxViolations(sb)).toHaveLength(5);
  });

  it("an empty request is refused like an empty document", async () => {
    await expectParity("plugin", {});
    await expectParity("sandbox", {});
  });

  it("the base documents are accepted (the rows fail for their edit alone)", async () => {
    expect((await api.applyPlugin(basePlugin())).unchanged).toBe(true);
    expect((await api.applySandbox(baseSandbox())).created).toBe(true);
  });
});

describe("text that is not UTF-8", () => {
  let api: Api;
  beforeAll(async () => { api = await startApi(); });
  afterAll(() => api.stop());

  /** `encoded` with every "XX" replaced by 0xC3 0x28 (an invalid 2-byte sequence of the same length). */
  const corrupt = (encoded: Uint8Array) => {
    const out = Buffer.from(encoded);
    for (let at = out.indexOf("XX"); at >= 0; at = out.indexOf("XX", at + 2)) out.set([0xc3, 0x28], at);
    return out;
  };

  /** Sends raw request bytes, as a client other than eph can. */
  const send = (method: string, bytes: Buffer) => new Promise<grpc.ServiceError>((resolve, reject) => {
    const client = new grpc.Client(api.address, grpc.credentials.createInsecure());
    client.makeUnaryRequest(method, (b: Buffer) => b, (b: Buffer) => b, bytes, { deadline: Date.now() + 5000 }, (err) => {
      client.close();
      if (err) resolve(err); else reject(new Error("a request with invalid UTF-8 was accepted"));
    });
  });

  it("refuses a plugin whose script holds invalid UTF-8 with INVALID_ARGUMENT naming the field, and stores nothing", async () => {
    const doc = plugin("db");
    doc.spec.create[0].script = "#!/bin/sh\necho XX\n";
    const request = pb.ApplyResourcePluginRequest.encode({ plugin: pb.ResourcePlugin.fromJSON(doc), dryRun: false }).finish();
    const before = await api.store.position();
    const err = await send("/ephemera.v1.ResourcePluginService/Apply", corrupt(request));
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toContain("plugin.spec.create[0].script: byte 15 of the value is not valid UTF-8");
    expect((fromServiceError(err) as ValidationError).violations).toEqual([
      { field: "plugin.spec.create[0].script", rule: "utf8", description: "byte 15 of the value is not valid UTF-8" },
    ]);
    expect(await api.store.position()).toBe(before);
    await expect(api.getPlugin("db")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("refuses a sandbox with invalid UTF-8 in its name and a label, naming both", async () => {
    await api.applyPlugin(plugin("cache"));
    const doc = { ...sandbox("aXX", "db=cache"), spec: { ...sandbox("a", "db=cache").spec, labels: { team: "payXX" } } };
    const request = pb.ApplySandboxRequest.encode({ sandbox: pb.Sandbox.fromJSON(doc), dryRun: false }).finish();
    const before = await api.store.position();
    const err = await send("/ephemera.v1.SandboxService/Apply", corrupt(request));
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect((fromServiceError(err) as ValidationError).violations.map((v) => v.field)).toEqual(["sandbox.name", "sandbox.spec.labels.team"]);
    expect(await api.store.position()).toBe(before);
  });
});

describe("the plugin registry", () => {
  let api: Api;
  beforeEach(async () => { api = await startApi(); });
  afterEach(() => api.stop());

  /** Runs `request` and expects the event stream not to move. */
  const writesNothing = async <T>(request: () => Promise<T>): Promise<T> => {
    const before = await api.store.position();
    const out = await request();
    expect(await api.store.position()).toBe(before);
    return out;
  };

  it("publishes a bare name as 0.0.0 and name@semver as that version, in canonical form", async () => {
    expect((await api.applyPlugin(plugin("db"))).plugin).toMatchObject({ name: "db", version: "0.0.0", sandboxes: [] });
    expect((await api.applyPlugin(plugin("db@1.0.0"))).plugin?.version).toBe("1.0.0");
    expect((await api.applyPlugin(plugin("db@v1.2"))).plugin?.version).toBe("1.2.0");
    expect((await api.applyPlugin(plugin("db@2.0.0-rc.1"))).plugin?.version).toBe("2.0.0-rc.1");
    const published = await api.applyPlugin(plugin("db@3.0.0", ["host", "port"]));
    expect(published).toMatchObject({ unchanged: false, plugin: { name: "db", version: "3.0.0" } });
    expect(published.plugin?.spec?.create[0]?.outputs.map((o) => o.name)).toEqual(["host", "port"]);
    expect(published.plugin?.digest).toMatch(/^[0-9a-f]{64}$/);
    expect((await api.listPlugins()).map((p) => p.version)).toEqual(["0.0.0", "1.0.0", "1.2.0", "2.0.0-rc.1", "3.0.0"]);
  });

  it("publishes the spec package's fixtures as they arrive over the wire", async () => {
    const orders = await loadTemplate(join(FIXTURES, "orders-db", "plugin.yaml"), []);
    const sqs = await loadTemplate(join(FIXTURES, "sqs-queue", "plugin.yaml"),
      ["role-arn=arn:aws:iam::123456789012:role/sqs", "service-account=sqs-runner"]);
    const vault = await loadTemplate(join(FIXTURES, "vault-db", "plugin.yaml"), []);
    for (const doc of [orders, sqs, vault]) expect((await api.applyPlugin(doc)).unchanged).toBe(false);
    const feature = await loadTemplate(join(FIXTURES, "sandboxes", "feature.yaml"), ["pr=42", "image=registry.example/orders:pr-42"]);
    const created = await api.applySandbox(feature);
    expect(created.created).toBe(true);
    expect(created.sandbox?.resources.map((r) => `${r.name}=${r.plugin}@${r.version}`)).toEqual(["orders-db=orders-db@1.2.0", "queue=sqs-queue@0.3.1"]);
    expect(created.sandbox?.endpoints).toEqual([{ name: "web", target: "http://orders.shop.svc:8080", url: "https://web--rk0001.preview.test", baselineUrl: "https://orders-shop-8080.preview.test" }]);
  });

  it("re-applying an identical version is a no-op that says so", async () => {
    const first = await api.applyPlugin(plugin("db@1.0.0"));
    const again = await writesNothing(() => api.applyPlugin(plugin("db@1.0.0")));
    expect(again.unchanged).toBe(true);
    expect(again.plugin).toEqual(first.plugin);
    // "1.0" names the same version.
    expect((await writesNothing(() => api.applyPlugin(plugin("db@1.0")))).unchanged).toBe(true);
  });

  it("a published version is immutable: another spec under it is a conflict", async () => {
    await api.applyPlugin(plugin("db@1.0.0"));
    const err = await writesNothing(() => errorOf(api.applyPlugin(plugin("db@1.0.0", ["host"], "another description"))));
    expect(err).toBeInstanceOf(ConflictError);
    expect(err.message).toContain("db@1.0.0");
    expect(err.message).toContain("immutable");
    expect((await api.getPlugin("db@1.0.0")).spec?.description).toBe("a database");
  });

  // Versions rank in semver precedence: 1.10.0 above 1.2.0, and a pre-release above every
  // lower version but below its own release (1.2.0 < 2.0.0-rc.1 < 2.0.0-rc.2 < 2.0.0).
  it("a bare name and @latest get the highest version, in semver order", async () => {
    await expect(api.getPlugin("db")).rejects.toBeInstanceOf(NotFoundError);
    await expect(api.getPlugin("db@latest")).rejects.toBeInstanceOf(NotFoundError);
    const latest = async () => {
      const [bare, at] = [await api.getPlugin("db"), await api.getPlugin("db@latest")];
      expect(at).toEqual(bare);
      return bare.version;
    };
    await api.applyPlugin(plugin("db@1.2.0"));
    expect(await latest()).toBe("1.2.0");
    await api.applyPlugin(plugin("db@1.10.0"));
    await api.applyPlugin(plugin("db@1.9.0"));
    expect(await latest()).toBe("1.10.0");
    await api.applyPlugin(plugin("db@2.0.0-rc.2"));
    await api.applyPlugin(plugin("db@2.0.0-rc.1"));
    expect(await latest()).toBe("2.0.0-rc.2");
    await api.applyPlugin(plugin("db@2.0.0"));
    expect(await latest()).toBe("2.0.0");
    expect((await api.getPlugin("db@1.9")).version).toBe("1.9.0");
    await expect(api.getPlugin("db@1.3.0")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("a sandbox keeps the version its bare or @latest reference resolved to at creation", async () => {
    await api.applyPlugin(plugin("db@1.0.0"));
    await api.applyPlugin(plugin("cache@0.1.0"));
    const created = await api.applySandbox(sandbox("feature-a", "db=db", "cache=cache@latest"));
    expect(created.sandbox?.resources.map((r) => [r.name, r.version])).toEqual([["db", "1.0.0"], ["cache", "0.1.0"]]);

    await api.applyPlugin(plugin("db@2.0.0"));
    await api.applyPlugin(plugin("cache@0.2.0"));
    const view = await api.getSandbox("feature-a");
    expect(view.resources.map((r) => [r.name, r.plugin, r.version])).toEqual([["db", "db", "1.0.0"], ["cache", "cache", "0.1.0"]]);
    expect(view.status?.reason).toBe("Creating");
    // Applying the same file again changes nothing, though its references now resolve higher.
    const again = await writesNothing(() => api.applySandbox(sandbox("feature-a", "db=db", "cache=cache@latest")));
    expect(again.unchanged).toBe(true);
    expect(again.sandbox?.resources.map((r) => r.version)).toEqual(["1.0.0", "0.1.0"]);
    // A new sandbox gets the new versions.
    const later = await api.applySandbox(sandbox("feature-b", "db=db", "cache=cache@latest"));
    expect(later.sandbox?.resources.map((r) => r.version)).toEqual(["2.0.0", "0.2.0"]);
  });

  it("lists every version with the sandboxes using it", async () => {
    await api.applyPlugin(plugin("db@1.0.0"));
    await api.applyPlugin(plugin("db@2.0.0"));
    await api.applyPlugin(plugin("cache"));
    await api.applySandbox(sandbox("b-sandbox", "db=db@1.0.0", "cache=cache"));
    await api.applySandbox(sandbox("a-sandbox", "db=db@1.0.0"));
    await api.applySandbox(sandbox("c-sandbox", "db=db"));
    const listed = (await api.listPlugins()).map((p) => ({ ref: `${p.name}@${p.version}`, sandboxes: p.sandboxes }));
    expect(listed).toEqual([
      { ref: "cache@0.0.0", sandboxes: ["b-sandbox"] },
      { ref: "db@1.0.0", sandboxes: ["a-sandbox", "b-sandbox"] },
      { ref: "db@2.0.0", sandboxes: ["c-sandbox"] },
    ]);
    expect((await api.getPlugin("db@1.0.0")).sandboxes).toEqual(["a-sandbox", "b-sandbox"]);
  });

  it("lists summaries without specs, a page at a time, and refuses an unknown page token", async () => {
    for (const v of ["1.0.0", "1.1.0", "2.0.0"]) await api.applyPlugin(plugin(`db@${v}`));
    for (const v of ["0.1.0", "0.2.0"]) await api.applyPlugin(plugin(`cache@${v}`));
    const seen: string[] = [];
    let token = "";
    let pages = 0;
    do {
      const page = await api.listPage(2, token);
      expect(page.plugins.length).toBeLessThanOrEqual(2);
      expect(page.plugins.every((p) => p.spec === undefined)).toBe(true);
      seen.push(...page.plugins.map((p) => `${p.name}@${p.version}`));
      token = page.nextPageToken;
      pages++;
    } while (token);
    expect(pages).toBe(3);
    expect(seen).toEqual(["cache@0.1.0", "cache@0.2.0", "db@1.0.0", "db@1.1.0", "db@2.0.0"]);
    expect((await api.listPage(10, "", "db")).plugins.map((p) => p.version)).toEqual(["1.0.0", "1.1.0", "2.0.0"]);
    const bad = await errorOf(api.listPage(2, "nope@9.9.9"));
    expect(bad).toBeInstanceOf(ValidationError);
    expect((bad as ValidationError).violations[0]).toMatchObject({ field: "page_token", rule: "page-token" });
  });

  it("deletes a version in use as a process: no new sandbox may use it, and it goes with its last sandbox", async () => {
    await api.applyPlugin(plugin("db@1.0.0"));
    await api.applyPlugin(plugin("db@2.0.0"));
    await api.applySandbox(sandbox("feature-a", "db=db@1.0.0"));
    await api.applySandbox(sandbox("feature-b", "primary=db@1.0.0", "replica=db"));
    expect(await api.deletePlugin("db@1.0.0")).toEqual(["db@1.0.0"]);
    // Still there for its sandboxes, refused to new ones, with the rule named.
    expect((await api.getPlugin("db@1.0.0")).sandboxes).toEqual(["feature-a", "feature-b"]);
    const refused = await writesNothing(() => errorOf(api.applySandbox(sandbox("feature-c", "db=db@1.0.0"))));
    expect(refused).toBeInstanceOf(ValidationError);
    expect((refused as ValidationError).violations).toEqual([
      { field: "spec.resources[0].plugin", rule: "unknown-plugin", description: "plugin db@1.0.0 is being deleted: no new sandbox may use it" },
    ]);
    await api.deleteSandbox("feature-a", true);
    expect((await api.getPlugin("db@1.0.0")).sandboxes).toEqual(["feature-b"]);
    await api.deleteSandbox("feature-b", true);
    await waitFor(async () => !(await api.listPlugins()).some((p) => p.version === "1.0.0"), { what: "the version to go with its last sandbox" });
    expect((await api.listPlugins()).map((p) => p.version)).toEqual(["2.0.0"]);
  });

  it("deletes an unused version, which sandboxes can then no longer use", async () => {
    await api.applyPlugin(plugin("db@1.0.0"));
    await api.applyPlugin(plugin("db@2.0.0"));
    await api.applySandbox(sandbox("feature-a", "db=db@2.0.0"));
    expect(await api.deletePlugin("db@1.0.0")).toEqual(["db@1.0.0"]);
    expect((await api.listPlugins()).map((p) => p.version)).toEqual(["2.0.0"]);
    await expect(api.getPlugin("db@1.0.0")).rejects.toBeInstanceOf(NotFoundError);
    await expect(api.deletePlugin("db@1.0.0")).rejects.toBeInstanceOf(NotFoundError);
    const violations = await writesNothing(() => violationsOf(api.applySandbox(sandbox("feature-b", "db=db@1.0.0"))));
    expect(fieldsAndRules(violations)).toEqual([{ field: "spec.resources[0].plugin", rule: "unknown-plugin" }]);
    expect(violations[0]?.description).toContain("db@1.0.0");
  });

  it("refuses a sandbox using an unknown plugin or version, at the resource's plugin field", async () => {
    await api.applyPlugin(plugin("db@1.0.0"));
    const violations = await writesNothing(() =>
      violationsOf(api.applySandbox(sandbox("feature-a", "db=db@1.0.0", "cache=cache", "queue=queue@latest", "old=db@0.9.0"))));
    expect(fieldsAndRules(violations)).toEqual([
      { field: "spec.resources[1].plugin", rule: "unknown-plugin" },
      { field: "spec.resources[2].plugin", rule: "unknown-plugin" },
      { field: "spec.resources[3].plugin", rule: "unknown-plugin" },
    ]);
    expect(violations.map((v) => v.description)).toEqual([
      expect.stringContaining("cache"), expect.stringContaining("queue@latest"), expect.stringContaining("db@0.9.0"),
    ]);
    await expect(api.getSandbox("feature-a")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("refuses an outputKey naming a step or output the resolved plugin does not declare", async () => {
    await api.applyPlugin(plugin("db@1.0.0", ["host"]));
    await api.applyPlugin(plugin("db@2.0.0", ["host", "port"]));
    const doc = (outputKeys: string[], ref = "db@1.0.0"): Doc => ({
      ...sandbox("feature-a", `db=${ref}`),
      spec: {
        ...sandbox("feature-a", `db=${ref}`).spec,
        forks: [{
          forkOf: { kind: "Deployment", namespace: "shop", name: "orders" },
          customizations: { env: outputKeys.map((key, i) => ({ name: `V${i}`, valueFrom: { resource: { name: "db", outputKey: key } } })) },
        }],
      },
    });
    const field = (j: number) => `spec.forks[0].customizations.env[${j}].valueFrom.resource.outputKey`;
    const violations = await writesNothing(() => violationsOf(api.applySandbox(doc(["provision.host", "seed.host", "provision.port"]))));
    expect(fieldsAndRules(violations)).toEqual([{ field: field(1), rule: "unknown-step" }, { field: field(2), rule: "undeclared-output" }]);
    expect(violations[1]?.description).toContain("(outputs: host)");
    // The check runs against the version the reference resolves to: 2.0.0 declares port.
    expect((await api.applySandbox(doc(["provision.port"], "db"))).sandbox?.resources[0]?.version).toBe("2.0.0");
  });

  it("reports unknown plugins and undeclared outputs of the known ones together", async () => {
    await api.applyPlugin(plugin("db@1.0.0", ["host"]));
    const doc: Doc = {
      name: "feature-a",
      spec: {
        cluster: "local",
        resources: [{ name: "db", plugin: "db@1.0.0" }, { name: "cache", plugin: "cache" }],
        forks: [{
          forkOf: { kind: "Deployment", namespace: "shop", name: "orders" },
          customizations: { env: [{ name: "DB_PORT", valueFrom: { resource: { name: "db", outputKey: "provision.port" } } }] },
        }],
      },
    };
    const violations = await writesNothing(() => violationsOf(api.applySandbox(doc)));
    expect(fieldsAndRules(violations)).toEqual([
      { field: "spec.resources[1].plugin", rule: "unknown-plugin" },
      { field: "spec.forks[0].customizations.env[0].valueFrom.resource.outputKey", rule: "undeclared-output" },
    ]);
  });
});

describe("watch streams", () => {
  let api: Api;
  beforeEach(async () => { api = await startApi(); });
  afterEach(() => api.stop());

  /** Opens a watch with a 10 s deadline; resolves with the views and how the stream ended. */
  const watch = (name: string, enough: (views: pb.SandboxView[]) => boolean) => {
    const started = Date.now();
    const views: pb.SandboxView[] = [];
    const stream = api.sandboxes.watch({ name, showOutputs: false }, new grpc.Metadata(), { deadline: Date.now() + 10_000 });
    return new Promise<{ views: pb.SandboxView[]; error?: Error; ms: number }>((resolve) => {
      let cancelled = false;
      stream.on("data", (view: pb.SandboxView) => {
        views.push(view);
        if (!cancelled && enough(views)) { cancelled = true; stream.cancel(); }
      });
      stream.on("error", (err: grpc.ServiceError) => {
        resolve({ views, ms: Date.now() - started, ...(err.code === grpc.status.CANCELLED && cancelled ? {} : { error: fromServiceError(err) }) });
      });
      stream.on("end", () => resolve({ views, ms: Date.now() - started }));
    });
  };

  it("ends at once with NOT_FOUND for a sandbox that does not exist", async () => {
    const ended = await watch("nope", () => false);
    expect(ended.error).toBeInstanceOf(NotFoundError);
    expect(ended.error?.message).toContain("nope");
    expect(ended.views).toEqual([]);
    expect(ended.ms).toBeLessThan(5_000);
  });

  it("delivers the current view of an existing sandbox at once", async () => {
    await api.applyPlugin(plugin("db@1.0.0"));
    await api.applySandbox(sandbox("feature-a", "db=db"));
    const ended = await watch("feature-a", (views) => views.length >= 1);
    expect(ended.error).toBeUndefined();
    expect(ended.views[0]).toEqual(await api.getSandbox("feature-a"));
    expect(ended.views[0]).toMatchObject({ name: "feature-a", routingKey: "rk0001", status: { ready: false, reason: "Creating" } });
    expect(ended.ms).toBeLessThan(5_000);
  });

  it("follows the sandbox and ends when it is gone", async () => {
    await api.applyPlugin(plugin("db@1.0.0"));
    await api.applySandbox(sandbox("feature-a", "db=db"));
    const sandboxes = api.sandboxes;
    // Deleted once the first view shows the stream is open.
    const ended = await watch("feature-a", (views) => {
      if (views.length === 1) void call(sandboxes.delete.bind(sandboxes), { name: "feature-a", force: true });
      return false;
    });
    expect(ended.error).toBeUndefined();
    expect(ended.ms).toBeLessThan(5_000);
    expect(ended.views[0]?.status?.reason).toBe("Creating");
    await expect(api.getSandbox("feature-a")).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe("time, retries and who asked", () => {
  let api: Api;
  beforeEach(async () => { api = await startApi(); });
  afterEach(() => api.stop());

  /** What the scheduler would append: the resource's create workflow ended. */
  const endCreate = async (sb: pb.SandboxView, resource: string, outcome: "failed" | "succeeded", attempt = 1) => {
    const id = workflowId(sb.routingKey, resource, "create");
    const runId = `${id}.provision.${attempt}`;
    const current = await api.store.read(Aggregates.workflow, id);
    const events = [
      ...(current.version === 0 ? [ev("ephemera.workflow.started.v1", { workflowId: id, resource, phase: "create", steps: [{ name: "provision" }] })] : [ev("ephemera.workflow.retried.v1", { steps: ["provision"] })]),
      ev("ephemera.workflow.step_dispatched.v1", { step: "provision", runId, attempt }),
      outcome === "failed"
        ? ev("ephemera.workflow.step_failed.v1", { step: "provision", runId, failure: { step: "provision", runId, reason: "Error", exitCode: 3 } })
        : ev("ephemera.workflow.step_succeeded.v1", { step: "provision", runId }),
      outcome === "failed"
        ? ev("ephemera.workflow.failed.v1", { failure: { step: "provision", runId, reason: "Error", exitCode: 3 } })
        : ev("ephemera.workflow.succeeded.v1", {}),
    ];
    await api.store.append(Aggregates.workflow, id, current, events.map(encode), { source: "test" });
  };

  it("deletes a sandbox when its TTL expires, showing when it will", async () => {
    await api.applyPlugin(plugin("db@1.0.0"));
    const doc = sandbox("short-lived", "db=db@1.0.0");
    (doc.spec as { ttl?: unknown }).ttl = { duration: "2s" };
    const { sandbox: created } = await api.applySandbox(doc);
    const due = Date.parse(created!.status!.scheduledDeleteTime);
    expect(due - Date.parse(created!.createdAt)).toBe(2000);
    const deleting = await waitFor(async () => {
      const v = await api.getSandbox("short-lived");
      return v.status?.reason === "Deleting" ? v : undefined;
    }, { timeoutMs: 10_000, what: "TTL expiry" });
    expect(Date.now()).toBeGreaterThanOrEqual(due);
    expect(deleting.status?.message).toContain("TTL expired");
    const events = (await api.store.read(Aggregates.sandbox, "short-lived")).events;
    expect(events.find((e) => e.type === "ephemera.sandbox.deleting.v1")).toMatchObject({ data: { reason: "ttl" }, actor: "ttl" });
    expect(events.some((e) => e.type === "ephemera.sandbox.resource_deprovision_requested.v1")).toBe(true);
  });

  it("retries only the failed resources, and refuses when none failed", async () => {
    await api.applyPlugin(plugin("db@1.0.0"));
    const { sandbox: sb } = await api.applySandbox(sandbox("flaky", "good=db@1.0.0", "bad=db@1.0.0"));
    await endCreate(sb!, "good", "succeeded");
    await endCreate(sb!, "bad", "failed");
    await waitFor(async () => (await api.getSandbox("flaky")).status?.reason === "ResourceFailed", { what: "the failure" });
    const retried = await call(api.sandboxes.retry.bind(api.sandboxes), { name: "flaky" });
    expect(retried.resources).toEqual(["bad"]);
    expect(retried.sandbox?.resources.map((r) => [r.name, r.status])).toEqual([["good", "Ready"], ["bad", "Provisioning"]]);
    await endCreate(sb!, "bad", "succeeded", 2);
    await waitFor(async () => (await api.getSandbox("flaky")).status?.ready, { what: "ready after the retry" });
    const again = await errorOf(call(api.sandboxes.retry.bind(api.sandboxes), { name: "flaky" }));
    expect(again).toBeInstanceOf(ConflictError);
    expect(again.message).toContain("no failed resource");
  });

  it("records who asked and one correlation id for everything an API call causes", async () => {
    await api.applyPlugin(plugin("db@1.0.0"));
    const md = new grpc.Metadata();
    md.set("x-ephemera-actor", "alice");
    await new Promise<void>((resolve, reject) => api.sandboxes.apply({ sandbox: pb.Sandbox.fromJSON(sandbox("audited", "a=db@1.0.0", "b=db@1.0.0")), dryRun: false }, md,
      (err) => (err ? reject(err) : resolve())));
    const events = (await api.store.read(Aggregates.sandbox, "audited")).events;
    expect(events.map((e) => e.type)).toEqual([
      "ephemera.sandbox.created.v1", "ephemera.sandbox.resource_provision_requested.v1", "ephemera.sandbox.resource_provision_requested.v1",
    ]);
    expect(new Set(events.map((e) => e.correlationId)).size).toBe(1);
    expect(events.every((e) => e.actor === "alice")).toBe(true);
  });

  it("tells a caller of an open API that it is open, with the actor it sent and every role's rights", async () => {
    const access = new pb.AccessServiceClient(api.address, grpc.credentials.createInsecure());
    try {
      const md = new grpc.Metadata();
      md.set("x-ephemera-actor", "alice");
      const who = await new Promise<pb.WhoAmIResponse>((resolve, reject) => access.whoAmI({}, md, (err, res) => (err ? reject(err) : resolve(res))));
      expect(who).toEqual({ name: "alice", role: "admin", open: true });
    } finally {
      access.close();
    }
  });
});

describe("the event watch", () => {
  /** Commits handed to each follow of the store, in the order the follows began (the watch's is the last). */
  let delivered: number[];
  let api: Api;
  const counting = (store: EventStore): EventStore => Object.assign(Object.create(store) as EventStore, {
    follow: (options: Parameters<EventStore["follow"]>[0], handler: Parameters<EventStore["follow"]>[1]) => {
      const i = delivered.push(0) - 1;
      return store.follow(options, (c) => { delivered[i]!++; return handler(c); });
    },
  });
  beforeEach(async () => {
    delivered = [];
    api = await startApi(counting);
  });
  afterEach(() => api.stop());

  /** `n` commits of one event each, `padding` bytes of payload apiece; resolves to their positions. */
  let sessions = 0;
  const commits = async (n: number, padding = 0) => {
    const positions: number[] = [];
    for (let i = 0; i < n; i++) {
      const r = await api.store.append("tunnel", `s${++sessions}`, NO_AGGREGATE, [{ type: "ephemera.tunnel.session_closed.v1", data: { pad: "x".repeat(padding), i } }], { source: "test" });
      positions.push(r.revision);
    }
    return positions;
  };

  /** Reads a watch to its end; `paused`: the client stops reading after the first record until `resume()`. */
  const watch = (request: Partial<pb.WatchEventsRequest>) => {
    const records: pb.EventRecord[] = [];
    const stream = api.events.watch(pb.WatchEventsRequest.fromPartial({ follow: false, ...request }), new grpc.Metadata(), { deadline: Date.now() + 60_000 });
    stream.on("data", (r: pb.EventRecord) => records.push(r));
    const done = new Promise<pb.EventRecord[]>((resolve, reject) => {
      stream.on("end", () => resolve(records));
      stream.on("error", reject);
    });
    return { records, done, stream };
  };

  it("serves exactly the commits after a position, each record carrying its commit's position", async () => {
    const positions = await commits(6);
    const records = await watch({ afterPosition: positions[2]! }).done;
    expect(records.map((r) => r.position)).toEqual(positions.slice(3));
    expect(records.map((r) => (JSON.parse(r.json) as { position: number }).position)).toEqual(positions.slice(3));
    // Position 0 is the beginning.
    expect((await watch({ afterPosition: 0 }).done).map((r) => r.position)).toEqual(positions);
  });

  it("serves only the commits of the last since_ms, starting its read there rather than at the beginning", async () => {
    await commits(40);
    const old = Date.now();
    await waitFor(() => Date.now() > old + 300, { what: "the clock to move past the old commits" });
    const boundary = Date.now();
    await waitFor(() => Date.now() > boundary + 300, { what: "the clock to move past the boundary" });
    const recent = await commits(3);
    const records = await watch({ sinceMs: Date.now() - boundary }).done;
    expect(records.map((r) => r.position)).toEqual(recent);
    expect(delivered.at(-1)).toBe(3);
  });

  it("stops reading the store while the client does not read, and serves the rest once it does", async () => {
    const total = 2000;
    await commits(total, 2048);
    const w = watch({ afterPosition: 0 });
    w.stream.pause();
    // Stable: the server's read stopped growing over ten looks 100 ms apart.
    let last = -1;
    let same = 0;
    await waitFor(() => {
      const now = delivered.at(-1) ?? 0;
      same = now > 0 && now === last ? same + 1 : 0;
      last = now;
      return same >= 10;
    }, { timeoutMs: 30_000, intervalMs: 100, what: "the server to stop reading for the paused client" });
    expect(last).toBeLessThan(total / 2);
    w.stream.resume();
    expect((await w.done).length).toBe(total);
  }, 120_000);
});
