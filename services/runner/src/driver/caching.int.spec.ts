// The process driver hands a step's outputs to the IO context's cache while the runner
// records the result, not before: with the cache write held at the wire, the run is recorded
// succeeded (its values journaled), and once let through the late write is taken as the
// journal's copy and cached. Real NATS, Redis, IO context, runner and launcher.
import { join, resolve } from "node:path";
import { mkdtemp, rm } from "node:fs/promises";
import * as pb from "@ephemera/proto";
import { Aggregates, decode, dispatchCodec, encode, ev, journaledValues, runId as makeRunId, workflowId, type DomainEvent } from "@ephemera/events";
import {
  connectNats, InMemoryClaimStore, JetStreamEventStore, JetStreamLogStore, JetStreamValueStore, JetStreamWorkQueue, type EventStore, type WorkQueue,
} from "@ephemera/eventstore";
import { createLogger, grpc, stepGrants, waitFor } from "@ephemera/kit";
import { openRedis, RedisOutputStore, start as startIOContext, type Redis, type RunningIOContext } from "@ephemera/iocontext";
import { Runner } from "../runner.js";
import { detectIsolation } from "./isolation.js";
import { ProcessDriver } from "./process.js";
import { testNats } from "../../../../test/support/servers.js";
import { TEST_KEY } from "../../../../test/support/keys.js";

type NatsConnection = Awaited<ReturnType<typeof connectNats>>;

const LAUNCHER = join(resolve(__dirname, "..", "..", "..", ".."), "services/runner/dist/ephemera-launch");

const spec = pb.ResourcePluginSpec.fromPartial({
  create: [{ name: "make", script: "#!/bin/sh\nprintf 'db-7' > /tmp/host\n", inputs: [], outputs: [{ name: "host", valueFromPath: "/tmp/host" }] }],
});

describe("the process driver's outputs reach the IO context's cache beside the result", () => {
  let nc: NatsConnection;
  let store: EventStore;
  let values: JetStreamValueStore;
  let queue: WorkQueue<pb.StepDispatch>;
  let redis: Redis;
  let cache: RedisOutputStore;
  let cleanupStreams: (nc: NatsConnection) => Promise<void>;
  let io: RunningIOContext;
  let runner: Runner;
  let workdir: string;
  /** PutStepOutputs messages held at the runner's side of the wire, each with its way on. */
  const held: Array<() => void> = [];
  let holding = true;
  const holdPuts: grpc.Interceptor = (options, nextCall) => new grpc.InterceptingCall(nextCall(options), {
    sendMessage: (message, next) => {
      if (holding && options.method_definition.path.endsWith("/PutStepOutputs")) held.push(() => next(message));
      else next(message);
    },
  });

  beforeEach(async () => {
    const t = testNats("cache");
    cleanupStreams = t.cleanup;
    nc = await connectNats(t.url, "caching-test");
    store = await JetStreamEventStore.open(nc, { prefix: t.prefix });
    values = await JetStreamValueStore.open(nc, t.prefix);
    queue = await JetStreamWorkQueue.open(nc, t.prefix, dispatchCodec);
    redis = openRedis(process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379");
    cache = new RedisOutputStore(redis, t.prefix);
    workdir = await mkdtemp(join("/var/tmp", `${t.prefix}-work-`));
    const logger = createLogger("test", "silent");
    io = await startIOContext({ listen: "127.0.0.1:0", prefix: t.prefix, keys: [TEST_KEY] }, { store, redis, values, logger });
    const driver = new ProcessDriver({
      workdir, iocontext: `127.0.0.1:${io.port}`, iocontextInterceptors: [holdPuts], launcher: LAUNCHER,
      isolation: await detectIsolation(workdir, LAUNCHER), logger, hostEnv: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" },
    });
    runner = new Runner({
      cluster: "local", concurrency: 2, runnerId: "caching-runner", driver, store, queue, logs: await JetStreamLogStore.open(nc, t.prefix), logger,
      cancelGraceMs: 2000, heartbeatMs: 5000, claims: new InMemoryClaimStore(), claimTtlMs: 30_000, now: () => performance.now(), signingKey: TEST_KEY, values,
    });
    runner.start();
    await append(Aggregates.plugin, "cached", ev("ephemera.plugin.published.v1", { name: "cached", version: "1.0.0", spec }));
  });

  afterEach(async () => {
    holding = false;
    for (const release of held.splice(0)) release();
    await runner.stop(1000);
    await io.stop();
    const keys = await redis.keys(`${cache.runKey("")}*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
    await cleanupStreams(nc);
    await nc.close();
    await rm(workdir, { recursive: true, force: true });
  });

  const append = async (aggregate: string, id: string, ...events: DomainEvent[]) => {
    const current = await store.read(aggregate, id);
    await store.append(aggregate, id, current, events.map(encode), { source: "test" });
  };

  it("records the run while the cache write is held, then caches the values the run journaled", async () => {
    const routingKey = "ca";
    const wf = workflowId(routingKey, "db", "create");
    const id = makeRunId(wf, "make", 1);
    await append(Aggregates.workflow, wf, ev("ephemera.workflow.started.v1", {
      workflowId: wf, sandbox: "sb-ca", routingKey, resource: "db", phase: "create", plugin: "cached", version: "1.0.0", cluster: "local", params: {},
    }), ev("ephemera.workflow.step_dispatched.v1", { step: "make", runId: id, attempt: 1 }));
    await queue.publish("local", id, pb.StepDispatch.fromPartial({
      runId: id, workflowId: wf, sandbox: "sb-ca", routingKey, resource: "db", phase: "create", step: "make",
      attempt: 1, cluster: "local", plugin: "cached", version: "1.0.0", ...stepGrants(spec.create[0]!),
    }));

    const result = await waitFor(async () => {
      const last = (await store.read(Aggregates.steprun, id)).events.map(decode).filter((e): e is DomainEvent => !!e).at(-1);
      return last && last.type !== "ephemera.steprun.started.v1" ? last : undefined;
    }, { timeoutMs: 30_000, intervalMs: 20, what: `the result of ${id}` });
    if (result.type !== "ephemera.steprun.succeeded.v1") throw new Error(`expected a success, got ${JSON.stringify(result)}`);
    // Recorded while the cache write was still held: the result did not wait for it.
    expect(held).toHaveLength(1);
    expect((await cache.read(id)).size).toBe(0);
    const journaled = await journaledValues(values, id, result.data.outputs);
    expect(journaled.get("host")?.toString()).toBe("db-7");

    held.shift()!();
    const cached = await waitFor(async () => {
      const found = await cache.read(id);
      return found.size ? found : undefined;
    }, { timeoutMs: 10_000, intervalMs: 20, what: "the late write to reach the cache" });
    expect(cached.get("host")?.toString()).toBe("db-7");
  }, 60_000);
});
