// Steps go on while the IO context's Redis is stalled (SIGSTOP) or stopped: a 4-step chain
// through the real scheduler, runner and IO context, on the JetStream event store and output
// journal, gets every output right. Its dispatches carry their plans, so the process driver
// hands each step the last one's value itself and never uses the IO context's cache. The
// same inputs asked of the IO context then, Redis still down (as a pod's agent asks them),
// come from the journal while it sends Redis nothing (its calls refused at once, counted by
// ephemera_iocontext_redis_calls_total), since Redis is only a cache of the output journal.
// Once Redis is back the IO context uses it again and refills what it missed, when a read
// needs it; the refill is read through a second IO context, as another replica would (the
// core's may hold the value in memory, in front of Redis). A redis-server of the test's own;
// the machine's shared one is never touched.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pb from "@ephemera/proto";
import { JetStreamEventStore, JetStreamValueStore, connectNats } from "@ephemera/eventstore";
import { call, createLogger, grpc, waitFor } from "@ephemera/kit";
import { Registry } from "@ephemera/kit/metrics";
import { openRedis, start as startIOContext, type Redis } from "../../services/iocontext/src/index.js";
import { Api } from "../../services/cli/src/api.js";
import { startCore, type Core } from "../support/core.js";
import { startOwnRedis, type OwnServer } from "../support/own-servers.js";
import { parseExposition, total } from "../support/prometheus.js";
import { testNats } from "../support/servers.js";
import { TEST_KEY, tokenForStep } from "../support/keys.js";

type NatsConnection = Awaited<ReturnType<typeof connectNats>>;

/** So long that a call waiting on Redis would hold its step for minutes. */
const COMMAND_TIMEOUT_MS = 120_000;
/**
 * A guard, not a measure of speed: far above what the chain takes on a slow machine, far
 * below the command timeout a step would wait for if the IO context waited on Redis.
 */
const GUARD_MS = 30_000;
const CHAIN = ["s1", "s2", "s3", "s4"];

const sh = (body: string) => `#!/bin/sh\n${body}\n`;
/** s1 writes "a"; each next step appends its letter to what the one before wrote. */
const chain = pb.ResourcePlugin.fromPartial({
  name: "chain4@1.0.0",
  spec: {
    description: "a value passed along four steps",
    runner: { image: "test" },
    create: CHAIN.map((name, i) => i === 0
      ? { name, outputs: [{ name: "v", valueFromPath: "/tmp/v" }], script: sh("printf a > /tmp/v") }
      : {
        name,
        inputs: [{ name: "v", valueFromStep: { name: CHAIN[i - 1]!, output: "v" }, as: { env: "", path: "/work/v" } }],
        outputs: [{ name: "v", valueFromPath: "/tmp/v" }],
        script: sh(`{ cat /work/v; printf ${"abcd"[i]!}; } > /tmp/v`),
      }),
  },
});
const EXPECTED = [["s1.v", "a"], ["s2.v", "ab"], ["s3.v", "abc"], ["s4.v", "abcd"]];

describe("a 4-step chain while the IO context's Redis is down (real scheduler, runner, IO context)", () => {
  let dir: string;
  let own: OwnServer & { url: string };
  let redis: Redis;
  let core: Core;
  let api: Api;
  let io: pb.IOContextClient;
  let nc: NatsConnection;
  let cleanupStreams: (nc: NatsConnection) => Promise<void>;
  let metrics: Registry;
  let stores: { store: JetStreamEventStore; values: JetStreamValueStore };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "redis-outage-chain-"));
    own = await startOwnRedis(join(dir, "redis"));
  });
  afterAll(async () => {
    await own?.stop("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    if (!own.running) await own.start();
    // Long, so that a call waiting for Redis to answer would show.
    redis = openRedis(own.url, { commandTimeoutMs: COMMAND_TIMEOUT_MS, connectTimeoutMs: COMMAND_TIMEOUT_MS });
    redis.on("error", () => undefined); // expected while the server is down
    const t = testNats("rdout");
    cleanupStreams = t.cleanup;
    nc = await connectNats(t.url, "redis-outage-test");
    stores = {
      store: await JetStreamEventStore.open(nc, { prefix: t.prefix }),
      values: await JetStreamValueStore.open(nc, t.prefix),
    };
    metrics = new Registry();
    core = await startCore({ redis, stores, metrics });
    api = new Api(core.address, { timeoutMs: 10_000 });
    io = new pb.IOContextClient(core.iocontext, grpc.credentials.createInsecure());
    await api.applyPlugin(chain);
    // One chain with Redis up: its values never went through the IO context's cache.
    await readyChain("warm", GUARD_MS);
    expect(await outputsOf("warm")).toEqual(EXPECTED);
    expect(await redis.exists(`${core.tag}:io:${await runOf("warm", "s1")}`)).toBe(0);
  });

  afterEach(async () => {
    if (own.pid) process.kill(own.pid, "SIGCONT");
    io.close();
    await core.stop();
    redis.disconnect();
    await cleanupStreams(nc);
    await nc.close();
  });

  /** The IO context's calls on Redis so far, by outcome (sent: ok, error, abandoned; not sent: refused). */
  const redisCalls = async () => {
    const e = parseExposition(await metrics.metrics());
    const of = (outcome: string) => total(e, "ephemera_iocontext_redis_calls_total", { outcome });
    return { sent: of("ok") + of("error") + of("abandoned"), answered: of("ok") + of("error"), refused: of("refused") };
  };

  const outputsOf = async (name: string) =>
    (await api.getSandbox(name, true)).resources[0]!.outputs.map((o) => [o.key, Buffer.from(o.value ?? []).toString()]);
  const runOf = async (name: string, step: string) =>
    (await api.getSandbox(name)).resources[0]!.steps.find((s) => s.name === step)!.runId;

  /** Creates a chain sandbox and waits (within `withinMs`) until it is ready. */
  async function readyChain(name: string, withinMs: number): Promise<void> {
    await api.applySandbox(pb.Sandbox.fromPartial({ name, spec: { cluster: "local", resources: [{ name: "r", plugin: "chain4" }] } }));
    await waitFor(async () => {
      const status = (await api.getSandbox(name)).status;
      if (status?.reason === "ResourceFailed") throw new Error(`sandbox ${name} failed: ${status.message}`);
      return status?.ready;
    }, { timeoutMs: withinMs, intervalMs: 50, what: `sandbox ${name} to be ready` });
  }

  /** Each step's inputs asked of the IO context, as a pod's agent asks them: the value the step before it wrote. */
  async function askedInputs(name: string): Promise<void> {
    for (const [i, step] of CHAIN.entries()) {
      if (i === 0) continue;
      const runId = await runOf(name, step);
      const token = await tokenForStep(runId, chain.spec!.create[i]!);
      const answer = await call(io.getStepInputs.bind(io), { runId, token }, 10_000);
      expect(answer.inputs.map((x) => [x.name, x.value.toString()])).toEqual([["v", "abcd".slice(0, i)]]);
    }
  }

  /**
   * Once Redis answers again, a step's read of its input that needs the cache puts the value it
   * missed back: read through a second IO context on the prefix (another replica, holding none
   * of it in memory); the core's own still answers it, from memory.
   */
  async function refilled(name: string): Promise<void> {
    const reader = await runOf(name, "s2");
    const producerKey = `${core.tag}:io:${await runOf(name, "s1")}`;
    const token = await tokenForStep(reader, chain.spec!.create[1]!);
    const inputs = async (client: pb.IOContextClient) =>
      (await call(client.getStepInputs.bind(client), { runId: reader, token }, 10_000)).inputs.map((i) => [i.name, i.value.toString()]);
    expect(await inputs(io)).toEqual([["v", "a"]]);
    const replica = await startIOContext({ listen: "127.0.0.1:0", prefix: core.tag, keys: [TEST_KEY] },
      { ...stores, redis, logger: createLogger("iocontext", "silent") });
    const other = new pb.IOContextClient(`127.0.0.1:${replica.port}`, grpc.credentials.createInsecure());
    try {
      await waitFor(async () => {
        expect(await inputs(other)).toEqual([["v", "a"]]);
        return (await redis.hexists(producerKey, "v").catch(() => 0)) === 1;
      }, { timeoutMs: 15_000, intervalMs: 200, what: "the input's value to be cached again" });
    } finally {
      other.close();
      await replica.stop();
    }
  }

  it("with Redis stalled (SIGSTOP): ready, every output right, inputs asked of the IO context from the journal, no call answered by Redis or waited out; then the cache is refilled", async () => {
    process.kill(own.pid!, "SIGSTOP");
    try {
      const before = await redisCalls();
      await readyChain("stalled", GUARD_MS);
      expect(await outputsOf("stalled")).toEqual(EXPECTED);
      await askedInputs("stalled");
      const during = await redisCalls();
      // Calls sent before the heartbeat found the stall were given up on then, not waited out.
      expect(during.answered).toBe(before.answered);
      expect(during.refused).toBeGreaterThan(before.refused);
    } finally {
      process.kill(own.pid!, "SIGCONT");
    }
    await refilled("stalled");
  }, 90_000);

  it("with Redis stopped: ready, every output right, inputs asked of the IO context from the journal, nothing sent to Redis; started again (empty), the cache is refilled", async () => {
    await own.stop("SIGKILL");
    await waitFor(() => redis.status !== "ready", { what: "the client to see Redis gone" });
    const before = await redisCalls();
    await readyChain("stopped", GUARD_MS);
    expect(await outputsOf("stopped")).toEqual(EXPECTED);
    await askedInputs("stopped");
    const during = await redisCalls();
    expect(during.sent).toBe(before.sent);
    expect(during.refused).toBeGreaterThan(before.refused);
    await own.start();
    await refilled("stopped");
  }, 90_000);
});
