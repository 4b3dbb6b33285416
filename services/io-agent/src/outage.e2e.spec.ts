// A 20-second outage of the IO context's Redis does not lose a step's outputs: the built
// iocontext service runs as a process on a redis-server of the test's own, which is killed
// while the agent stores outputs and started again (empty) 20 s later. The agent retries,
// logging each retry; no value appears in its notices or in the service's log.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
const OUTAGE_MS = 20_000;
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

describe("the sidecar rides out a 20-second Redis outage", () => {
  let dir: string;
  let redis: OwnServer & { url: string };
  let nc: NatsConnection;
  let cleanupStreams: (nc: NatsConnection) => Promise<void>;
  let iocontext: ManagedProcess;
  let client: pb.IOContextClient;
  let token: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "io-agent-outage-"));
    redis = await startOwnRedis(join(dir, "redis"));
    const t = testNats("agent");
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

  it("stores the outputs once Redis is back, having retried and said so all along", async () => {
    const outputs = [{ name: "host", value: Buffer.from("db-1") }, { name: "password", value: Buffer.from(SECRET) }];
    const notices: Array<RetryNotice & { at: number }> = [];
    await redis.stop("SIGKILL");
    const downAt = Date.now();
    const stored = storeStepOutputs(client, RUN, token, outputs, { onRetry: (n) => notices.push({ ...n, at: Date.now() }) })
      .then(() => Date.now());
    stored.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile

    // The outage lasts until the agent has kept retrying for 20 s.
    await waitFor(() => notices.some((n) => n.at - downAt >= OUTAGE_MS), {
      timeoutMs: OUTAGE_MS + 10_000, intervalMs: 100, what: "the agent to be still retrying 20 s into the outage",
    });
    await redis.start();
    const upAt = Date.now();
    const storedAt = await stored;

    expect(notices.length).toBeGreaterThanOrEqual(5);
    expect(notices.every((n) => n.error.includes(RUN) && !n.error.includes(SECRET))).toBe(true);
    // Once Redis is back the next retry gets through: at most one capped backoff later.
    expect(storedAt - upAt).toBeLessThanOrEqual(5_000 + 2_000);
    const read = await fetchStepOutputs(client, RUN, token);
    expect(read.map((o) => [o.name, o.value.toString()])).toEqual([["host", "db-1"], ["password", SECRET]]);
    const serviceLog = iocontext.log.lines().map((l) => l.line);
    expect(serviceLog.some((l) => l.includes("cannot store step outputs"))).toBe(true);
    expect(serviceLog.filter((l) => l.includes(SECRET))).toEqual([]);
  }, 90_000);
});
