// The LogService over a real gRPC server, on the in-memory ports, with the workflow events
// written by hand: how a follow ends (the log's end, the run's end recorded without one,
// the client going, the server's bound) and how it moves from run to run.
import * as pb from "@ephemera/proto";
import { Aggregates, encode, ev, type DomainEvent } from "@ephemera/events";
import { InMemoryEventStore, InMemoryLogStore, type LogStore, InMemoryValueStore } from "@ephemera/eventstore";
import { createLogger, fromServiceError, grpc, startGrpcServer, waitFor, type RunningServer } from "@ephemera/kit";
import { SandboxCore } from "../service.js";
import { logService } from "./api.js";

const logger = createLogger("sandbox", "silent");
const WF = "rk1.db.create";
const run = (step: string, attempt = 1) => `${WF}.${step}.${attempt}`;

/** A log store that counts the followers still open. */
function counting(store: LogStore): LogStore & { open: number } {
  const counted = {
    open: 0,
    append: store.append.bind(store), end: store.end.bind(store), read: store.read.bind(store), entries: store.entries.bind(store),
    follow: (runId: string, options: { since?: number }, onEntry: Parameters<LogStore["follow"]>[2]) => {
      const f = store.follow(runId, options, onEntry);
      counted.open++;
      void f.done.catch(() => undefined).finally(() => { counted.open--; });
      return f;
    },
  };
  return counted;
}

async function startLogs(followLimitMs?: number) {
  const store = new InMemoryEventStore();
  const logs = counting(new InMemoryLogStore());
  const core = new SandboxCore({ store, logs, values: new InMemoryValueStore(), logger, previewDomain: "preview.test", routingKey: () => "rk1" });
  await core.start();
  const server: RunningServer = await startGrpcServer("127.0.0.1:0", [{
    definition: pb.LogServiceService,
    implementation: logService(core, followLimitMs ? { followLimitMs } : {}) as unknown as grpc.UntypedServiceImplementation,
  }], logger);
  const client = new pb.LogServiceClient(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
  const append = async (aggregate: string, id: string, ...events: DomainEvent[]) => {
    const current = await store.read(aggregate, id);
    await store.append(aggregate, id, current, events.map(encode), { source: "test" });
  };
  await append(Aggregates.sandbox, "sb", ev("ephemera.sandbox.created.v1", {
    name: "sb", routingKey: "rk1", resources: [{ name: "db", plugin: "p", version: "1.0.0", params: {} }],
  }));
  await append(Aggregates.workflow, WF,
    ev("ephemera.workflow.started.v1", { workflowId: WF, resource: "db", phase: "create", steps: [{ name: "a" }, { name: "b", dependsOn: ["a"] }] }),
    ev("ephemera.workflow.step_dispatched.v1", { step: "a", runId: run("a"), attempt: 1 }),
    ev("ephemera.workflow.step_started.v1", { step: "a", runId: run("a"), runner: "r1" }));

  /** Opens GetLogs; `chunks` fills as they come, `ended` settles with the stream. */
  const get = (request: Partial<pb.GetLogsRequest>) => {
    const chunks: pb.LogChunk[] = [];
    const stream = client.get(pb.GetLogsRequest.fromPartial({ sandbox: "sb", resource: "db", ...request }));
    const ended = new Promise<Error | undefined>((resolve) => {
      stream.on("data", (c: pb.LogChunk) => chunks.push(c));
      stream.on("end", () => resolve(undefined));
      stream.on("error", (err) => resolve(err));
    });
    const text = () => Buffer.concat(chunks.map((c) => c.data)).toString();
    return { chunks, ended, text, cancel: () => stream.cancel() };
  };
  return {
    store, logs, core, append, get,
    stop: async () => {
      client.close();
      await server.shutdown();
      await core.stop();
    },
  };
}

describe("LogService", () => {
  let api: Awaited<ReturnType<typeof startLogs>>;
  afterEach(() => api?.stop());

  it("follows a run to its log's end: an opening chunk, then each entry with its time", async () => {
    api = await startLogs();
    await api.logs.append(run("a"), Buffer.from("one\n"));
    const got = api.get({ step: "a", follow: true });
    await waitFor(() => got.text() === "one\n", { what: "the stored line" });
    await api.logs.append(run("a"), Buffer.from("two\n"));
    await waitFor(() => got.text() === "one\ntwo\n", { what: "the line appended while following" });
    await api.logs.end(run("a"));
    await api.append(Aggregates.workflow, WF, ev("ephemera.workflow.step_failed.v1", { step: "a", runId: run("a"), failure: { step: "a", runId: run("a"), reason: "Error" } }));
    expect(await got.ended).toBeUndefined();
    expect(got.chunks[0]).toEqual({ step: "a", phase: "create", attempt: 1, runId: run("a"), data: Buffer.alloc(0), time: "" });
    expect(got.chunks.slice(1).every((c) => Date.parse(c.time) > 0)).toBe(true);
    expect(api.logs.open).toBe(0);
  });

  it("ends a follow when the workflow records the run's end though its log never got an end (its runner died)", async () => {
    api = await startLogs();
    await api.logs.append(run("a"), Buffer.from("half a log\n"));
    const got = api.get({ step: "a", follow: true });
    await waitFor(() => got.text() === "half a log\n", { what: "the stored line" });
    await api.append(Aggregates.workflow, WF, ev("ephemera.workflow.step_failed.v1", {
      step: "a", runId: run("a"), failure: { step: "a", runId: run("a"), reason: "RunnerLost" },
    }));
    expect(await got.ended).toBeUndefined();
    expect(got.text()).toBe("half a log\n");
  });

  it("follows a step's retry: attempt 2 after attempt 1, until the step is done", async () => {
    api = await startLogs();
    const got = api.get({ step: "a", follow: true });
    await waitFor(() => got.chunks.length === 1, { what: "attempt 1 to be followed" });
    await api.logs.append(run("a"), Buffer.from("failing\n"));
    await api.logs.end(run("a"));
    await api.append(Aggregates.workflow, WF,
      ev("ephemera.workflow.step_retry_scheduled.v1", { step: "a", runId: run("a"), retryAt: new Date().toISOString(), failure: { step: "a", reason: "Error" } }),
      ev("ephemera.workflow.step_dispatched.v1", { step: "a", runId: run("a", 2), attempt: 2 }));
    await api.logs.append(run("a", 2), Buffer.from("fine\n"));
    await api.logs.end(run("a", 2));
    await api.append(Aggregates.workflow, WF, ev("ephemera.workflow.step_succeeded.v1", { step: "a", runId: run("a", 2) }));
    expect(await got.ended).toBeUndefined();
    expect(got.chunks.map((c) => [c.attempt, c.data.toString()])).toEqual([[1, ""], [1, "failing\n"], [2, ""], [2, "fine\n"]]);
  });

  it("waits for a step not yet dispatched, and ends at once when nothing more can come", async () => {
    api = await startLogs();
    const b = api.get({ step: "b", follow: true });
    await api.append(Aggregates.workflow, WF,
      ev("ephemera.workflow.step_succeeded.v1", { step: "a", runId: run("a") }),
      ev("ephemera.workflow.step_dispatched.v1", { step: "b", runId: run("b"), attempt: 1 }));
    await api.logs.append(run("b"), Buffer.from("b ran\n"));
    await api.logs.end(run("b"));
    await api.append(Aggregates.workflow, WF, ev("ephemera.workflow.step_succeeded.v1", { step: "b", runId: run("b") }),
      ev("ephemera.workflow.succeeded.v1", {}));
    expect(await b.ended).toBeUndefined();
    expect(b.text()).toBe("b ran\n");
    // The workflow is over: a follow of the whole resource replays and ends.
    const all = api.get({ follow: true });
    expect(await all.ended).toBeUndefined();
    expect(all.chunks.filter((c) => c.data.length === 0).map((c) => c.step)).toEqual(["a", "b"]);
  });

  it("a client that goes away ends the server's follow", async () => {
    api = await startLogs();
    const got = api.get({ step: "a", follow: true });
    await waitFor(() => got.chunks.length === 1 && api.logs.open === 1, { what: "the follow to be open" });
    got.cancel();
    await waitFor(() => api.logs.open === 0, { what: "the server to stop following" });
  });

  it("ends a follow at the server's bound with DEADLINE_EXCEEDED, saying so", async () => {
    api = await startLogs(300);
    const got = api.get({ step: "a", follow: true });
    const err = await got.ended as grpc.ServiceError;
    expect(err.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(fromServiceError(err).message).toContain("stopped following the logs after");
    await waitFor(() => api.logs.open === 0, { what: "the follower to be stopped" });
  });

  it("answers NOT_FOUND for a step the resource does not have", async () => {
    api = await startLogs();
    const err = await api.get({ step: "c" }).ended as grpc.ServiceError;
    expect(err.code).toBe(grpc.status.NOT_FOUND);
    expect(err.details).toBe("resource db of sandbox sb has no step c (its steps: a, b)");
  });
});
