// Jobs on the real sandbox service and NATS, behind bearer tokens: an editor submits into a
// group that exists, in a routing context that exists (its key resolved then); a viewer
// reads them; a queued job deleted is cancelled at once, a running one is asked to stop and
// ended by the server when its pod does not report within the grace; a group's deletion
// cancels its queued jobs. The events say who submitted and who deleted.
import { call, createLogger, grpc, waitFor, NotFoundError, PermissionDeniedError, ValidationError } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { Aggregates, decode, ev, encode } from "@ephemera/events";
import { JetStreamEventStore, connectNats, type EventStore } from "@ephemera/eventstore";
import { TOKENS, tokensAccess } from "../../../../test/support/api-tokens.js";
import { testNats } from "../../../../test/support/servers.js";
import { start } from "../index.js";

const logger = createLogger("jobs-test", "silent");
const nats = testNats("jobs");

const GROUP = pb.JobRunnerGroup.fromJSON({
  name: "e2e", spec: {
    cluster: "local", namespace: "ephemera-jobs", image: "ubuntu:24.04",
    podTemplate: JSON.stringify({ spec: { containers: [{ name: "main", image: "ubuntu:24.04" }] } }), scaling: { manual: { desiredPods: 1 } },
  },
});
const job = (spec: Record<string, unknown> = {}) => pb.Job.fromJSON({ spec: { runnerGroup: "e2e", command: ["make", "e2e"], ...spec } });

describe("jobs", () => {
  let service: Awaited<ReturnType<typeof start>>;
  let nc: Awaited<ReturnType<typeof connectNats>>;
  let store: EventStore;
  let jobs: pb.JobServiceClient;
  let groups: pb.JobRunnerGroupServiceClient;
  let routeGroups: pb.RouteGroupServiceClient;

  beforeAll(async () => {
    service = await start({
      natsUrl: nats.url, redisUrl: "", prefix: nats.prefix, streamReplicas: 1, listen: "127.0.0.1:0", previewDomain: "preview.test",
      access: tokensAccess(), jobCancelGraceMs: 300,
    }, logger);
    nc = await connectNats(nats.url, "jobs-test");
    store = await JetStreamEventStore.open(nc, { prefix: nats.prefix, logger });
    const address = `127.0.0.1:${service.port}`;
    jobs = new pb.JobServiceClient(address, grpc.credentials.createInsecure());
    groups = new pb.JobRunnerGroupServiceClient(address, grpc.credentials.createInsecure());
    routeGroups = new pb.RouteGroupServiceClient(address, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    for (const c of [jobs, groups, routeGroups]) c?.close();
    await service?.stop();
    await nats.cleanup(nc);
    await nc?.close();
  });

  const as = (role: keyof typeof TOKENS) => {
    const metadata = new grpc.Metadata();
    metadata.set("authorization", `Bearer ${TOKENS[role]}`);
    return metadata;
  };
  const submit = (role: keyof typeof TOKENS, j: pb.Job) => call(jobs.submit.bind(jobs), { job: j }, 10_000, as(role));
  const get = (name: string) => call(jobs.get.bind(jobs), { name }, 10_000, as("viewer"));
  const list = async (all = false) => (await call(jobs.list.bind(jobs), { all }, 10_000, as("viewer"))).jobs.map((j) => j.name);
  const del = (role: keyof typeof TOKENS, name: string) => call(jobs.delete.bind(jobs), { name }, 10_000, as(role));
  const events = async (name: string) => (await store.read(Aggregates.job, name)).events.map((e) => decode(e)!);
  /** What the JobAgent server writes when it gives a job to a pod. */
  const assign = async (name: string, pod: string) => {
    const read = await store.read(Aggregates.job, name);
    await store.append(Aggregates.job, name, { revision: read.revision, version: read.version }, [encode(ev("ephemera.job.assigned.v1", { pod }))], { source: "sandbox" });
  };

  it("needs its group: NOT_FOUND naming spec.runnerGroup; a viewer cannot submit", async () => {
    await expect(submit("viewer", job())).rejects.toBeInstanceOf(PermissionDeniedError);
    await expect(submit("editor", job())).rejects.toThrow("spec.runnerGroup: job runner group e2e not found");
    await call(groups.apply.bind(groups), { jobRunnerGroup: GROUP, dryRun: false }, 10_000, as("admin"));
  });

  it("is validated with the file's rules", async () => {
    const err = await submit("editor", job({ script: "#!/bin/sh\necho hi\n" })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).violations.map((v) => v.field)).toContain("spec.command");
  });

  it("refuses a routing context that does not exist, naming the field", async () => {
    const noSandbox = await submit("editor", job({ routingContext: { sandbox: "nope" } })).catch((e: unknown) => e);
    expect(noSandbox).toBeInstanceOf(NotFoundError);
    expect((noSandbox as Error).message).toContain("spec.routingContext.sandbox: sandbox nope not found");
    await expect(submit("editor", job({ routingContext: { routegroup: "nope" } }))).rejects.toThrow("spec.routingContext.routegroup: route group nope not found");
  });

  it("is queued under a generated name, with its submitter and the route group's routing key", async () => {
    const rg = await call(routeGroups.apply.bind(routeGroups), {
      routeGroup: pb.RouteGroup.fromJSON({ name: "fx", spec: { cluster: "local", match: { label: { key: "feature", value: "x" } }, endpoints: [{ name: "web", target: "http://web.shop.svc:8080" }] } }),
      dryRun: false,
    }, 10_000, as("editor"));
    const view = await submit("editor", job({ namePrefix: "orders-e2e", routingContext: { routegroup: "fx" }, labels: { pr: "42" } }));
    expect(view.name).toMatch(/^orders-e2e-[0-9a-z]{8}$/);
    expect(view).toMatchObject({ submitter: "test-editor", routingKey: rg.routeGroup!.routingKey, spec: { runnerGroup: "e2e", labels: { pr: "42" } } });
    expect(view.status).toMatchObject({ state: "Queued", pod: "", startedAt: "", endedAt: "" });
    expect(view.status!.queuedAt).not.toBe("");
    expect(view.status!.exitCode).toBeUndefined();
    const [submitted] = await events(view.name);
    expect(submitted).toMatchObject({ type: "ephemera.job.submitted.v1", data: { name: view.name, submitter: "test-editor", routingKey: rg.routeGroup!.routingKey } });

    const plain = await submit("admin", job());
    expect(plain.name).toMatch(/^job-[0-9a-z]{8}$/);
    expect(plain).toMatchObject({ submitter: "test-admin", routingKey: "" });
    expect(await list()).toEqual([view.name, plain.name]);
    expect((await get(plain.name)).status?.state).toBe("Queued");
  });

  it("deleted while queued ends Cancelled at once and leaves the list, not `--all`", async () => {
    const { name } = await submit("editor", job());
    await expect(del("viewer", name)).rejects.toBeInstanceOf(PermissionDeniedError);
    const view = await del("editor", name);
    expect(view.status).toMatchObject({ state: "Cancelled", reason: "cancelled", message: "deleted by test-editor while queued" });
    expect(view.status!.endedAt).not.toBe("");
    expect(await list()).not.toContain(name);
    expect(await list(true)).toContain(name);
    await expect(get("nope")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("deleted while running is asked to stop, and ended by the server when its pod does not report within the grace", async () => {
    const { name } = await submit("editor", job());
    await assign(name, "e2e-1");
    await waitFor(async () => (await get(name)).status?.state === "Running", { timeoutMs: 5000, what: "the job running" });
    const view = await del("admin", name);
    expect(view.status).toMatchObject({ state: "Running", pod: "e2e-1", reason: "cancel-requested" });
    await waitFor(async () => (await get(name)).status?.state === "Cancelled", { timeoutMs: 5000, what: "the job cancelled by the server" });
    expect((await get(name)).status?.message).toBe("pod e2e-1 did not report the job within 0.3s of its cancel");
    expect((await events(name)).map((e) => e.type)).toEqual([
      "ephemera.job.submitted.v1", "ephemera.job.assigned.v1", "ephemera.job.cancel_requested.v1", "ephemera.job.cancelled.v1",
    ]);
    expect((await events(name))[2]?.data).toEqual({ by: "test-admin" });
  });

  it("still queued when its group is deleted ends Cancelled", async () => {
    const queued = await list();
    expect(queued.length).toBeGreaterThan(0);
    await call(groups.delete.bind(groups), { name: "e2e" }, 10_000, as("admin"));
    await waitFor(async () => (await list()).length === 0, { timeoutMs: 5000, what: "the queued jobs cancelled" });
    for (const name of queued) expect((await get(name)).status).toMatchObject({ state: "Cancelled", message: "job runner group e2e was deleted" });
  });
});
