// An outage of the IO context's Redis does not hold up a step: the built iocontext service
// runs as a process on a redis-server of the test's own, which is killed while the agent
// stores outputs. The IO context takes them uncached into the output journal and says so;
// once Redis is back (empty) they are read back from the journal without being put again,
// and cached again. No value appears in the service's log.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import * as pb from "@ephemera/proto";
import { connectNats, JetStreamEventStore, type EventStore } from "@ephemera/eventstore";
import { waitFor } from "@ephemera/kit";
import { testNats } from "../../../test/support/servers.js";
import { startOwnRedis, type OwnServer } from "../../../test/support/own-servers.js";
import { TEST_KEY_SECRET, tokenForStep } from "../../../test/support/keys.js";
import { ManagedProcess } from "../../../test/support/processes.js";
import { freePort } from "../../../test/support/stack.js";
import { fetchStepInputs, fetchStepOutputs, ioContextClient, storeStepOutputs } from "./client.js";
import type { RetryNotice } from "./retry.js";

type NatsConnection = Awaited<ReturnType<typeof connectNats>>;

const ROOT = join(__dirname, "..", "..", "..");
const SECRET = "pw-b40c2e";
const WORKFLOW = "rk0001.db.create";
const RUN = `${WORKFLOW}.provision.1`;

const spec = pb.ResourcePluginSpec.fromPartial({
  create: [{ name: "provision", script: "#!/bin/sh\n", outputs: [{ name: "host", valueFromPath: "host" }, { name: "password", valueFromPath: "pw" }] }],
});

/** What the scheduler journals before a run may talk to the IO context (proto3 JSON payloads). */
async function dispatchRun(store: EventStore): Promise<void> {
  const append = async (aggregate: string, id: string, events: Array<{ type: string; data: unknown }>) =>
    store.append(aggregate, id, await store.read(aggregate, id), events, { source: "test" });
  await append("plugin", "hello-db", [{
    type: "ephemera.plugin.published.v1",
    data: pb.ResourcePluginPublished.toJSON(pb.ResourcePluginPublished.fromPartial({ name: "hello-db", version: "1.0.0", spec })),
  }]);
  await append("workflow", WORKFLOW, [
    {
      type: "ephemera.workflow.started.v1",
      data: pb.WorkflowStarted.toJSON(pb.WorkflowStarted.fromPartial({
        workflowId: WORKFLOW, sandbox: "feature-x", routingKey: "rk0001", resource: "db", phase: "create",
        plugin: "hello-db", version: "1.0.0", cluster: "local",
      })),
    },
    { type: "ephemera.workflow.step_dispatched.v1", data: pb.WorkflowStepDispatched.toJSON({ step: "provision", runId: RUN, attempt: 1 }) },
  ]);
  // A runner took it: its outputs may be written until it ends.
  await append("steprun", RUN, [{
    type: "ephemera.steprun.started.v1",
    data: pb.StepRunStarted.toJSON(pb.StepRunStarted.fromPartial({ runId: RUN, workflowId: WORKFLOW, step: "provision", attempt: 1 })),
  }]);
}

describe("the sidecar while the IO context's Redis is down", () => {
  let dir: string;
  let redis: OwnServer & { url: string };
  let nc: NatsConnection;
  let cleanupStreams: (nc: NatsConnection) => Promise<void>;
  let iocontext: ManagedProcess;
  let client: pb.IOContextClient;
  let token: string;
  let prefix: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "io-agent-outage-"));
    redis = await startOwnRedis(join(dir, "redis"));
    const t = testNats("agent");
    prefix = t.prefix;
    cleanupStreams = t.cleanup;
    nc = await connectNats(t.url, "io-agent-outage-test");
    await dispatchRun(await JetStreamEventStore.open(nc, { prefix: t.prefix }));
    const address = `127.0.0.1:${await freePort()}`;
    iocontext = new ManagedProcess("iocontext", {
      command: process.execPath,
      args: [join(ROOT, "services", "iocontext", "dist", "main.js")],
      env: { PATH: process.env["PATH"], NATS_URL: t.url, REDIS_URL: redis.url, EPHEMERA_PREFIX: t.prefix, EPHEMERA_IOCONTEXT_LISTEN: address, LOG_LEVEL: "info",
        EPHEMERA_SIGNING_KEY: TEST_KEY_SECRET },
    });
    client = ioContextClient(address);
    token = await tokenForStep(RUN, spec.create[0]!);
    await waitFor(() => fetchStepInputs(client, RUN, token, { retry: false, timeoutMs: 1_000 }).then(() => true), {
      timeoutMs: 30_000, intervalMs: 100, what: "the IO context to serve the run",
    });
  }, 60_000);

  afterAll(async () => {
    client?.close();
    await iocontext?.stop();
    await redis?.stop("SIGKILL");
    if (nc) { await cleanupStreams(nc); await nc.close(); }
    await rm(dir, { recursive: true, force: true });
  });

  it("has its outputs taken at once while Redis is down, and read back once it is back without being put again", async () => {
    const outputs = [{ name: "host", value: Buffer.from("db-1") }, { name: "password", value: Buffer.from(SECRET) }]
      .map((o) => ({ ...o, size: o.value.length, sha256: "" }));
    const notices: RetryNotice[] = [];
    await redis.stop("SIGKILL");
    // No retries: the IO context knows Redis is down and answers at once, without caching.
    await storeStepOutputs(client, RUN, token, outputs, { onRetry: (n) => notices.push(n), timeoutMs: 10_000 });
    expect(notices).toEqual([]);
    const serviceLog = () => iocontext.log.lines().map((l) => l.line);
    // The service's log reaches us through its stdout pipe: wait for the line, not for a moment.
    await waitFor(() => serviceLog().some((l) => l.includes("output store unavailable: step outputs not cached") && l.includes(RUN)), {
      timeoutMs: 10_000, what: "the IO context to log that it took the outputs uncached",
    });

    await redis.start(); // empty: the outputs are in the journal only
    await waitFor(() => serviceLog().some((l) => l.includes("redis is back")), {
      timeoutMs: 15_000, what: "the IO context to use Redis again",
    });
    // Read back before the run's result is recorded, without being put again: from the journal, then cached.
    const read = await fetchStepOutputs(client, RUN, token);
    expect(read.map((o) => [o.name, o.value.toString()])).toEqual([["host", "db-1"], ["password", SECRET]]);
    const cache = new Redis(redis.url);
    try {
      expect(await cache.hexists(`${prefix}:io:${RUN}`, "password")).toBe(1);
    } finally {
      cache.disconnect();
    }
    expect(serviceLog().filter((l) => l.includes(SECRET))).toEqual([]);
  }, 60_000);
});
