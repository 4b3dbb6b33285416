import * as pb from "@ephemera/proto";
import { Aggregates, encode, ev, journalOutputs, runId as makeRunId, workflowId, type DomainEvent } from "@ephemera/events";
import { connectNats, JetStreamEventStore, JetStreamValueStore, type EventStore } from "@ephemera/eventstore";
import { NotFoundError, PermissionDeniedError, ValidationError, call, createLogger, grpc, waitFor } from "@ephemera/kit";
import { TEST_KEY, tokenForRun } from "../../../test/support/keys.js";
import { openRedis, start, type Redis, type RunningIOContext } from "./index.js";
import { testNats } from "../../../test/support/servers.js";

type NatsConnection = Awaited<ReturnType<typeof connectNats>>;

const spec = pb.ResourcePluginSpec.fromPartial({
  create: [
    {
      name: "provision",
      script: "#!/bin/sh\necho provision\n",
      inputs: [
        { name: "db-name", valueFromSandbox: true },
        { name: "region", valueFromSandbox: true, as: { env: "AWS_REGION", path: "" } },
        { name: "config", valueFromSandbox: true, as: { env: "", path: "/etc/app/config" } },
        { name: "token", valueFromSandbox: true, as: { env: "TOKEN", path: "/tmp/token" } },
        { name: "tags", valueFromSandbox: true },
      ],
      outputs: [{ name: "host", valueFromPath: "/tmp/host" }, { name: "port", valueFromPath: "/tmp/port" }],
    },
    {
      name: "seed",
      script: "#!/bin/sh\n",
      inputs: [{ name: "host", valueFromStep: { name: "provision", output: "host" }, as: { env: "HOST", path: "/work/host" } }],
      outputs: [{ name: "marker", valueFromPath: "/tmp/marker" }],
    },
  ],
  delete: [
    {
      name: "deprovision",
      script: "#!/bin/sh\n",
      inputs: [
        { name: "host", valueFromStep: { name: "provision", output: "host" } },
        { name: "marker", valueFromStep: { name: "seed", output: "marker" } },
      ],
    },
  ],
});

const RK = "rk0001";
const create = workflowId(RK, "db", "create");
const del = workflowId(RK, "db", "delete");
const provisionRun = makeRunId(create, "provision", 1);
const seedRun = makeRunId(create, "seed", 1);
const deprovisionRun = makeRunId(del, "deprovision", 1);
const params = { "db-name": "orders", region: "eu-west-1", config: "a=1\n", token: "s3cret" };

describe("iocontext against NATS and Redis", () => {
  let nc: NatsConnection;
  let store: EventStore;
  let redis: Redis;
  let prefix: string;
  let cleanupStreams: (nc: NatsConnection) => Promise<void>;
  let service: RunningIOContext;
  let values: JetStreamValueStore;
  let client: pb.IOContextClient;

  const append = async (aggregate: string, id: string, ...events: DomainEvent[]) => {
    const current = await store.read(aggregate, id);
    await store.append(aggregate, id, current, events.map(encode), { source: "test" });
  };
  const getInputs = async (runId: string) => call(client.getStepInputs.bind(client), { runId, token: await tokenForRun(spec, runId) });
  /** As the sidecar of a running attempt does: the runner recorded it started. */
  const putOutputs = async (runId: string, outputs: Record<string, string | Buffer>) => {
    if ((await store.read(Aggregates.steprun, runId)).events.length === 0) {
      await append(Aggregates.steprun, runId, ev("ephemera.steprun.started.v1", { runId, workflowId: runId.split(".").slice(0, 3).join("."), step: runId.split(".")[3]!, attempt: 1 }));
    }
    return call(client.putStepOutputs.bind(client), {
      runId, token: await tokenForRun(spec, runId),
      outputs: Object.entries(outputs).map(([name, v]) => ({ name, value: Buffer.from(v), size: Buffer.from(v).length, sha256: "" })),
    });
  };
  const byName = (r: pb.GetStepInputsResponse) =>
    Object.fromEntries(r.inputs.map((i) => [i.name, { present: i.present, value: i.value.toString(), env: i.env, path: i.path }]));

  /** What the scheduler would have written when it started a workflow and dispatched one step. */
  const startWorkflow = async (id: string, phase: "create" | "delete", ...runs: string[]) => {
    await append(Aggregates.workflow, id,
      ev("ephemera.workflow.started.v1", {
        workflowId: id, sandbox: "feature-x", routingKey: RK, resource: "db", phase, plugin: "hello-db", version: "1.0.0",
        cluster: "local", params, ...(phase === "delete" ? { createWorkflowId: create } : {}),
      }),
      ...runs.map((r) => ev("ephemera.workflow.step_dispatched.v1", { step: r.split(".")[3]!, runId: r, attempt: 1 })),
    );
  };
  /** The run's success, journaled; `digests`: its workflow's step_succeeded names them, as the scheduler now writes it. */
  const succeed = async (wf: string, run: string, outputs: Record<string, string>, { digests = false } = {}) => {
    const step = run.split(".")[3]!;
    const started = (await store.read(Aggregates.steprun, run)).events.length > 0;
    const journaled = await journalOutputs(values, run, Object.entries(outputs).map(([name, v]) => ({ name, value: Buffer.from(v) })));
    await append(Aggregates.steprun, run,
      ...(started ? [] : [ev("ephemera.steprun.started.v1", { runId: run, workflowId: wf, step, attempt: 1 })]),
      ev("ephemera.steprun.succeeded.v1", { runId: run, workflowId: wf, step, outputs: journaled }),
    );
    const refs = digests ? journaled.map((o) => ({ key: o.name, size: o.size, sha256: o.sha256 })) : [];
    await append(Aggregates.workflow, wf, ev("ephemera.workflow.step_succeeded.v1", { step, runId: run, outputs: refs }));
  };

  beforeEach(async () => {
    const t = testNats("io");
    prefix = t.prefix;
    cleanupStreams = t.cleanup;
    nc = await connectNats(t.url, "iocontext-test");
    store = await JetStreamEventStore.open(nc, { prefix });
    redis = openRedis(process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379");
    await append(Aggregates.plugin, "hello-db", ev("ephemera.plugin.published.v1", { name: "hello-db", version: "1.0.0", spec }));
    values = await JetStreamValueStore.open(nc, prefix);
    service = await start({ listen: "127.0.0.1:0", prefix, keys: [TEST_KEY] }, { store, values, redis, logger: createLogger("iocontext", "silent") });
    client = new pb.IOContextClient(`127.0.0.1:${service.port}`, grpc.credentials.createInsecure());
  });

  afterEach(async () => {
    client.close();
    await service.stop();
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
    await cleanupStreams(nc);
    await nc.close();
  });

  it("hands out the script, the declared outputs and the sandbox params as env vars and files", async () => {
    await startWorkflow(create, "create", provisionRun);
    const res = await getInputs(provisionRun);
    expect(res.script).toBe("#!/bin/sh\necho provision\n");
    expect(res.outputs.map((o) => o.name)).toEqual(["host", "port"]);
    expect(byName(res)).toEqual({
      "db-name": { present: true, value: "orders", env: "DB_NAME", path: "" },
      region: { present: true, value: "eu-west-1", env: "AWS_REGION", path: "" },
      config: { present: true, value: "a=1\n", env: "", path: "/etc/app/config" },
      token: { present: true, value: "s3cret", env: "TOKEN", path: "/tmp/token" },
      tags: { present: false, value: "", env: "TAGS", path: "" },
    });
  });

  it("refuses a run no workflow dispatched", async () => {
    await startWorkflow(create, "create", provisionRun);
    await expect(getInputs(seedRun)).rejects.toBeInstanceOf(NotFoundError);
    await expect(getInputs("not-a-run-id")).rejects.toBeInstanceOf(ValidationError);
  });

  it("passes a step's stored output to the step that reads it", async () => {
    await startWorkflow(create, "create", provisionRun);
    await putOutputs(provisionRun, { host: "db-rk0001", port: "5432" });
    await succeed(create, provisionRun, { host: "db-rk0001", port: "5432" });
    await append(Aggregates.workflow, create, ev("ephemera.workflow.step_dispatched.v1", { step: "seed", runId: seedRun, attempt: 1 }));
    expect(byName(await getInputs(seedRun))).toEqual({ host: { present: true, value: "db-rk0001", env: "HOST", path: "/work/host" } });
    const stored = await call(client.getStepOutputs.bind(client), { runId: provisionRun, token: await tokenForRun(spec, provisionRun) });
    expect(stored.outputs.map((o) => [o.name, o.value.toString()]).sort()).toEqual([["host", "db-rk0001"], ["port", "5432"]]);
  });

  it("lets a delete step read create outputs across phases; one never produced is absent", async () => {
    await startWorkflow(create, "create", provisionRun, seedRun);
    await putOutputs(provisionRun, { host: "db-rk0001", port: "5432" });
    await succeed(create, provisionRun, { host: "db-rk0001", port: "5432" });
    // seed was dispatched but failed: its output "marker" never existed
    await startWorkflow(del, "delete", deprovisionRun);
    expect(byName(await getInputs(deprovisionRun))).toEqual({
      host: { present: true, value: "db-rk0001", env: "HOST", path: "" },
      marker: { present: false, value: "", env: "MARKER", path: "" },
    });
  });

  it("rejects undeclared outputs (not in the run's token) and oversized ones, naming them; stores nothing", async () => {
    await startWorkflow(create, "create", provisionRun);
    const undeclared = await putOutputs(provisionRun, { host: "x", password: "p" }).catch((e: unknown) => e);
    expect(undeclared).toBeInstanceOf(PermissionDeniedError);
    expect((undeclared as Error).message).toContain('output "password" is not one its token allows');
    const err = await putOutputs(provisionRun, { host: "x", port: Buffer.alloc(1024 * 1024 + 1) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).violations).toEqual([
      expect.objectContaining({ field: "outputs[1].value", rule: "output-too-large", description: expect.stringContaining('"port" is 1048577 bytes') }),
    ]);
    expect(await redis.exists(`${prefix}:io:${provisionRun}`)).toBe(0);
  });

  it("rehydrates a lost value from the step's journaled result and writes it back", async () => {
    await startWorkflow(create, "create", provisionRun);
    await putOutputs(provisionRun, { host: "db-rk0001", port: "5432" });
    await succeed(create, provisionRun, { host: "db-rk0001", port: "5432" });
    await redis.del(`${prefix}:io:${provisionRun}`);
    await append(Aggregates.workflow, create, ev("ephemera.workflow.step_dispatched.v1", { step: "seed", runId: seedRun, attempt: 1 }));
    expect(byName(await getInputs(seedRun))["host"]).toMatchObject({ present: true, value: "db-rk0001" });
    expect((await redis.hgetBuffer(`${prefix}:io:${provisionRun}`, "host"))?.toString()).toBe("db-rk0001");
  });

  it("uses a cached value only when it matches the journal's digest: one changed in Redis is served and re-cached from the journal", async () => {
    await startWorkflow(create, "create", provisionRun);
    await putOutputs(provisionRun, { host: "db-rk0001", port: "5432" });
    await succeed(create, provisionRun, { host: "db-rk0001", port: "5432" });
    await redis.hset(`${prefix}:io:${provisionRun}`, "host", "db-evil");
    await append(Aggregates.workflow, create, ev("ephemera.workflow.step_dispatched.v1", { step: "seed", runId: seedRun, attempt: 1 }));
    expect(byName(await getInputs(seedRun))["host"]).toMatchObject({ present: true, value: "db-rk0001" });
    expect((await redis.hgetBuffer(`${prefix}:io:${provisionRun}`, "host"))?.toString()).toBe("db-rk0001");
  });

  it("serves a producing run's outputs from memory when its step_succeeded names their digests: the cache is not read", async () => {
    await append(Aggregates.sandbox, "feature-x", ev("ephemera.sandbox.created.v1", { name: "feature-x", routingKey: RK }));
    await waitFor(() => service.projections.sandboxes.get("feature-x") !== undefined, { what: "the sandbox to be live here" });
    await startWorkflow(create, "create", provisionRun);
    await putOutputs(provisionRun, { host: "db-rk0001", port: "5432" });
    expect(service.recent?.size.runs).toBe(1);
    await succeed(create, provisionRun, { host: "db-rk0001", port: "5432" }, { digests: true });
    // The cache lost the run: a read of it would find nothing and write it back from the journal.
    await redis.del(`${prefix}:io:${provisionRun}`);
    await append(Aggregates.workflow, create, ev("ephemera.workflow.step_dispatched.v1", { step: "seed", runId: seedRun, attempt: 1 }));
    expect(byName(await getInputs(seedRun))["host"]).toMatchObject({ present: true, value: "db-rk0001" });
    expect(await redis.exists(`${prefix}:io:${provisionRun}`)).toBe(0);
  });

  it("serves memory only as journaled: a value held that differs from the digest is read from the cache and journal instead", async () => {
    await append(Aggregates.sandbox, "feature-x", ev("ephemera.sandbox.created.v1", { name: "feature-x", routingKey: RK }));
    await waitFor(() => service.projections.sandboxes.get("feature-x") !== undefined, { what: "the sandbox to be live here" });
    await startWorkflow(create, "create", provisionRun);
    await putOutputs(provisionRun, { host: "db-rk0001", port: "5432" });
    await succeed(create, provisionRun, { host: "db-rk0001", port: "5432" }, { digests: true });
    service.recent!.remember(provisionRun, RK, [{ name: "host", value: Buffer.from("db-evil") }]);
    await redis.del(`${prefix}:io:${provisionRun}`);
    await append(Aggregates.workflow, create, ev("ephemera.workflow.step_dispatched.v1", { step: "seed", runId: seedRun, attempt: 1 }));
    expect(byName(await getInputs(seedRun))["host"]).toMatchObject({ present: true, value: "db-rk0001" });
    // Read from the journal and written back to the cache, and held again as journaled.
    expect((await redis.hgetBuffer(`${prefix}:io:${provisionRun}`, "host"))?.toString()).toBe("db-rk0001");
    await redis.del(`${prefix}:io:${provisionRun}`);
    expect(byName(await getInputs(seedRun))["host"]).toMatchObject({ present: true, value: "db-rk0001" });
    expect(await redis.exists(`${prefix}:io:${provisionRun}`)).toBe(0);
  });

  it("forgets a deleted sandbox's outputs held in memory, and holds none of a sandbox it does not know live", async () => {
    await startWorkflow(create, "create", provisionRun);
    await putOutputs(provisionRun, { host: "db-rk0001", port: "5432" });
    expect(service.recent?.size.runs).toBe(0); // no sandbox rk0001 is live here
    await append(Aggregates.sandbox, "feature-x", ev("ephemera.sandbox.created.v1", { name: "feature-x", routingKey: RK }));
    await waitFor(() => service.projections.sandboxes.get("feature-x") !== undefined, { what: "the sandbox to be live here" });
    await succeed(create, provisionRun, { host: "db-rk0001", port: "5432" }, { digests: true });
    await append(Aggregates.workflow, create, ev("ephemera.workflow.step_dispatched.v1", { step: "seed", runId: seedRun, attempt: 1 }));
    expect(byName(await getInputs(seedRun))["host"]).toMatchObject({ present: true, value: "db-rk0001" });
    expect(service.recent?.size.runs).toBe(1); // held once read as journaled
    await append(Aggregates.sandbox, "feature-x", ev("ephemera.sandbox.deleted.v1", {}));
    await waitFor(() => service.recent?.size.runs === 0, { what: "the deleted sandbox's runs to leave memory" });
  });

  it("drops a sandbox's outputs once the sandbox is deleted", async () => {
    await append(Aggregates.sandbox, "feature-x", ev("ephemera.sandbox.created.v1", { name: "feature-x", routingKey: RK }));
    await startWorkflow(create, "create", provisionRun);
    await putOutputs(provisionRun, { host: "db-rk0001", port: "5432" });
    await succeed(create, provisionRun, { host: "db-rk0001", port: "5432" });
    expect(await redis.exists(`${prefix}:io:${provisionRun}`)).toBe(1);
    await append(Aggregates.sandbox, "feature-x", ev("ephemera.sandbox.deleted.v1", {}));
    await waitFor(async () => (await redis.exists(`${prefix}:io:${provisionRun}`, `${prefix}:io-runs:${RK}`)) === 0, {
      what: "the sandbox's output keys to go",
    });
    await waitFor(async () => (await store.read(Aggregates.outputs, RK)).events.length === 1, { what: "the drop to be recorded" });
    expect(await values.read(`${provisionRun}/host`)).toBeUndefined();
  });
});
