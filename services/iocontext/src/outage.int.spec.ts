// The IO context rides out its Redis going away: a redis-server of the test's own is
// killed, stalled (SIGSTOP) and started again empty; the machine's shared Redis is never
// touched. Inputs then come from the journal, outputs are taken into the journal uncached
// (and read back from there, during the outage and after it, written once across it), and
// no call waits longer than the client's command timeout.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pb from "@ephemera/proto";
import { Aggregates, ev } from "@ephemera/events";
import { InMemoryEventStore, InMemoryValueStore, JetStreamEventStore, JetStreamValueStore, connectNats, type EventStore } from "@ephemera/eventstore";
import { ConflictError, call, grpc, waitFor } from "@ephemera/kit";
import { testNats } from "../../../test/support/servers.js";
import { startOwnRedis, type OwnServer } from "../../../test/support/own-servers.js";
import { InMemoryOutputStore } from "./outputs.memory.js";
import { mentions } from "./outputs-contract.testkit.js";
import { openRedis, type Redis } from "./redis.js";
import { RK, journal, provisionRun, recordingLogger, seedRun, tokenOf, values, type LogLine } from "./scenario.testkit.js";
import { TEST_KEY } from "../../../test/support/keys.js";
import { start, type RunningIOContext } from "./start.js";

type NatsConnection = Awaited<ReturnType<typeof connectNats>>;

const COMMAND_TIMEOUT_MS = 1_000;
/** A failing call: the command timeout, plus the journal read and gRPC around it. */
const FAILS_WITHIN_MS = COMMAND_TIMEOUT_MS + 1_000;
const SECRET = "pw-5d1e07";

const timed = async <T>(fn: () => Promise<T>) => {
  const started = Date.now();
  const result = await fn().then((value) => ({ value }), (error: unknown) => ({ error }));
  return { ...result, ms: Date.now() - started };
};

describe("IO context while its own Redis is down or stalled", () => {
  let dir: string;
  let own: OwnServer & { url: string };
  let nc: NatsConnection;
  let store: EventStore;
  let cleanupStreams: (nc: NatsConnection) => Promise<void>;
  let redis: Redis;
  let service: RunningIOContext;
  let client: pb.IOContextClient;
  let lines: LogLine[];
  let prefix: string;

  const getInputs = async (runId: string) => call(client.getStepInputs.bind(client), { runId, token: await tokenOf(runId) }, 10_000);
  const putOutputs = async (runId: string, outputs: Record<string, string>) =>
    call(client.putStepOutputs.bind(client), { runId, token: await tokenOf(runId), outputs: values(outputs) }, 10_000);
  const getOutputs = async (runId: string) =>
    Object.fromEntries((await call(client.getStepOutputs.bind(client), { runId, token: await tokenOf(runId) }, 10_000)).outputs.map((o) => [o.name, o.value.toString()]));
  /** The IO context says Redis answers again (it logs that once per outage). */
  const redisBack = () =>
    waitFor(() => lines.some((l) => (l.msg ?? l.fields) === "redis is back: outputs are cached again"), {
      timeoutMs: 10_000, what: "the IO context to use Redis again",
    });
  /** Reads through `read` until the read has put `field` of `runId` back into Redis. */
  const cachedAgainBy = (read: () => Promise<void>, runId: string, field: string) =>
    waitFor(async () => {
      await read();
      return (await redis.hexists(`${prefix}:io:${runId}`, field)) === 1;
    }, { timeoutMs: 10_000, intervalMs: 100, what: `${field} of ${runId} cached again` }).catch((err: unknown) => {
      throw new Error(`${String(err)}; the IO context logged: ${lines.map((l) => l.msg).join(" | ")}`);
    });
  const inputsOf = (r: pb.GetStepInputsResponse) => Object.fromEntries(r.inputs.map((i) => [i.name, i.value.toString()]));

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "iocontext-outage-"));
    own = await startOwnRedis(join(dir, "redis"));
  });
  afterAll(async () => {
    await own?.stop("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    if (!own.running) await own.start();
    const t = testNats("ioout");
    cleanupStreams = t.cleanup;
    prefix = t.prefix;
    nc = await connectNats(t.url, "iocontext-outage-test");
    store = await JetStreamEventStore.open(nc, { prefix: t.prefix });
    redis = openRedis(own.url, { commandTimeoutMs: COMMAND_TIMEOUT_MS, connectTimeoutMs: COMMAND_TIMEOUT_MS });
    redis.on("error", () => undefined); // expected while the server is down
    const recorder = recordingLogger();
    lines = recorder.lines;
    const values = await JetStreamValueStore.open(nc, t.prefix);
    service = await start({ listen: "127.0.0.1:0", prefix: t.prefix, keys: [TEST_KEY] }, { store, values, redis, logger: recorder.logger });
    client = new pb.IOContextClient(`127.0.0.1:${service.port}`, grpc.credentials.createInsecure());
    const j = journal(store, values);
    await j.publishPlugin();
    await j.startWorkflow(provisionRun);
    await putOutputs(provisionRun, { host: "db-1", password: SECRET });
    await j.succeed(provisionRun, { host: "db-1", password: SECRET });
    await j.dispatch(seedRun);
  });

  afterEach(async () => {
    client.close();
    await service.stop();
    redis.disconnect();
    await cleanupStreams(nc);
    await nc.close();
    expect(lines.filter((l) => mentions(l, SECRET))).toEqual([]);
  });

  it("with Redis killed: inputs from the journal, outputs taken uncached, all within the timeout; then back to normal", async () => {
    await own.stop("SIGKILL");

    const inputs = await timed(() => getInputs(seedRun));
    expect("value" in inputs && inputsOf(inputs.value)).toEqual({ host: "db-1", password: SECRET });
    // Taken without the cache: the runner journals a step's values from its own report.
    const put = await timed(() => putOutputs(seedRun, { marker: "m1" }));
    expect("value" in put).toBe(true);
    // Written once, cache or not.
    const changed = await putOutputs(seedRun, { marker: "other" }).catch((e: unknown) => e);
    expect(changed).toBeInstanceOf(ConflictError);
    // Read back before the run's result names them (the Kubernetes driver does): from the journal, where the put left them.
    const notJournaled = await timed(() => getOutputs(seedRun));
    expect("value" in notJournaled && notJournaled.value).toEqual({ marker: "m1" });
    const journaled = await timed(() => getOutputs(provisionRun));
    expect("value" in journaled && journaled.value).toEqual({ host: "db-1", password: SECRET });
    for (const [what, t] of Object.entries({ inputs, put, notJournaled, journaled })) {
      expect({ what, within: t.ms <= FAILS_WITHIN_MS }).toEqual({ what, within: true });
    }

    await own.start(); // empty: everything it held is lost
    await redisBack();
    // Written once across the outage: the journal holds "m1", whatever the empty cache says.
    expect(await putOutputs(seedRun, { marker: "other" }).catch((e: unknown) => e)).toBeInstanceOf(ConflictError);
    // Read back with Redis up and the run's result not recorded, without being put again:
    // from the journal, and cached again.
    // Caching is best effort: a read that finds Redis briefly unanswered again (a PING late
    // on a loaded machine) serves from the journal without caching, and the next read caches.
    await cachedAgainBy(async () => expect(await getOutputs(seedRun)).toEqual({ marker: "m1" }), seedRun, "marker");
    // The value Redis lost came back from the journal and is cached again.
    await cachedAgainBy(async () => expect(inputsOf(await getInputs(seedRun))).toEqual({ host: "db-1", password: SECRET }), provisionRun, "password");
  });

  it("with Redis stalled (SIGSTOP): calls answer within the command timeout instead of hanging", async () => {
    process.kill(own.pid!, "SIGSTOP");
    try {
      const inputs = await timed(() => getInputs(seedRun));
      const put = await timed(() => putOutputs(seedRun, { marker: "m2" }));
      const outputs = await timed(() => getOutputs(seedRun));
      expect("value" in inputs && inputsOf(inputs.value)).toEqual({ host: "db-1", password: SECRET });
      expect("value" in put).toBe(true);
      expect("value" in outputs && outputs.value).toEqual({ marker: "m2" });
      expect([inputs.ms, put.ms, outputs.ms].every((ms) => ms <= FAILS_WITHIN_MS)).toBe(true);
    } finally {
      process.kill(own.pid!, "SIGCONT");
    }
    await redisBack();
    expect(await getOutputs(seedRun)).toEqual({ marker: "m2" });
    expect(await redis.hexists(`${prefix}:io:${seedRun}`, "marker")).toBe(1);
    expect(await putOutputs(seedRun, { marker: "other" }).catch((e: unknown) => e)).toBeInstanceOf(ConflictError);
  });
});

describe("IO context: a deleted sandbox's outputs are dropped once the store is back", () => {
  it("retries the drop that failed while the store was down", async () => {
    const store = new InMemoryEventStore();
    const outputs = new InMemoryOutputStore();
    const { logger, lines } = recordingLogger();
    const journalValues = new InMemoryValueStore();
    const service = await start({ listen: "127.0.0.1:0", prefix: "t", keys: [TEST_KEY] }, { store, values: journalValues, outputs, logger });
    try {
      const j = journal(store, journalValues);
      await j.append(Aggregates.sandbox, "feature-x", ev("ephemera.sandbox.created.v1", { name: "feature-x", routingKey: RK }));
      await outputs.write(provisionRun, RK, values({ host: "db-1" }));
      outputs.setAvailable(false);
      await j.append(Aggregates.sandbox, "feature-x", ev("ephemera.sandbox.deleted.v1", {}));
      await waitFor(() => lines.some((l) => l.msg?.includes("retrying")), { what: "a failed drop" });
      outputs.setAvailable(true);
      await waitFor(async () => (await outputs.read(provisionRun)).size === 0, { what: "the outputs to be dropped" });
    } finally {
      await service.stop();
    }
  });
});
