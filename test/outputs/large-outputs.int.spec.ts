// Outputs at the limit, for real: one step's three 1 MiB outputs are journaled outside its
// result event, survive a Redis FLUSHALL, and reach the delete step intact (it reports
// their digests). Own NATS and Redis, the services as processes.
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import { Aggregates, decode, journaledValues } from "@ephemera/events";
import { JetStreamEventStore, JetStreamValueStore, connectNats } from "@ephemera/eventstore";
import { waitFor } from "@ephemera/kit";
import { ephAt, ephOk, type Eph } from "../support/eph.js";
import { startOwnNats, startOwnRedis, type OwnServer } from "../support/own-servers.js";
import { uniquePrefix } from "../support/servers.js";
import { Services } from "../support/services.js";
import { freePort } from "../support/stack.js";

const FIXTURES = join(__dirname, "fixtures");
const MiB = 1024 * 1024;

describe("three 1 MiB outputs of one step (own servers, services as processes)", () => {
  let scratch: string;
  let nats: OwnServer & { url: string };
  let redis: OwnServer & { url: string };
  let services: Services | undefined;
  let eph: Eph;
  let prefix: string;

  beforeAll(async () => {
    scratch = mkdtempSync("/var/tmp/ephemera-large-");
    nats = await startOwnNats(join(scratch, "nats"));
    redis = await startOwnRedis(join(scratch, "redis"));
    const [apiPort, ioPort] = [await freePort(), await freePort()];
    prefix = uniquePrefix("big");
    services = await Services.start({
      env: {
        NATS_URL: nats.url, REDIS_URL: redis.url, EPHEMERA_PREFIX: prefix,
        EPHEMERA_API_LISTEN: `127.0.0.1:${apiPort}`, EPHEMERA_IOCONTEXT_LISTEN: `127.0.0.1:${ioPort}`, EPHEMERA_IOCONTEXT_ADDR: `127.0.0.1:${ioPort}`,
        EPHEMERA_RUNNER_WORKDIR: join(scratch, "runner"),
      },
    });
    eph = ephAt(services.api);
  }, 90_000);

  afterAll(async () => {
    await services?.stop();
    await redis?.stop();
    await nats?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  }, 60_000);

  it("journals them, and after a FLUSHALL the delete step still reads all three intact", async () => {
    await ephOk(eph, ["plugin", "apply", "-f", join(FIXTURES, "large-plugin.yaml")]);
    await ephOk(eph, ["sandbox", "apply", "-f", join(FIXTURES, "large-sandbox.yaml"), "--wait", "--wait-timeout", "90s"], { timeoutMs: 100_000 });
    const { routingKey } = JSON.parse((await ephOk(eph, ["sandbox", "get", "large", "-o", "json"])).stdout) as { routingKey: string };

    const nc = await connectNats(nats.url, "large-outputs-test");
    try {
      const store = await JetStreamEventStore.open(nc, { prefix });
      const values = await JetStreamValueStore.open(nc, prefix);
      const succeeded = async (runId: string) => {
        const e = (await store.read(Aggregates.steprun, runId)).events.map(decode).find((x) => x?.type === "ephemera.steprun.succeeded.v1");
        if (e?.type !== "ephemera.steprun.succeeded.v1") throw new Error(`${runId} has not succeeded`);
        return e.data;
      };
      const made = await succeeded(`${routingKey}.blobs.create.make.1`);
      // Named by size and digest in the event, the values elsewhere.
      expect(made.outputs.map((o) => [o.name, o.size, o.value.length])).toEqual([["a", MiB, 0], ["b", MiB, 0], ["c", MiB, 0]]);

      const cache = new Redis(redis.url);
      try {
        expect(await cache.keys(`${prefix}:io:*`)).not.toEqual([]);
        await cache.flushall();
        expect(await cache.keys("*")).toEqual([]);
      } finally {
        cache.disconnect();
      }

      // The values are in the journal, under their digests.
      const journaled = await journaledValues(values, made.runId, made.outputs);
      expect([...journaled.values()].map((v) => v.length)).toEqual([MiB, MiB, MiB]);

      await ephOk(eph, ["sandbox", "delete", "large", "--wait", "--wait-timeout", "90s"], { timeoutMs: 100_000 });
      await succeeded(`${routingKey}.blobs.delete.check.1`);
      const log = (await ephOk(eph, ["logs", "--sandbox", "large", "--resource", "blobs", "--step", "check"])).stdout;
      expect(log).toContain(`sizes: ${MiB} ${MiB} ${MiB}`);
      expect(/sums: (.*)$/m.exec(log)?.[1]?.trim().split(" ")).toEqual(made.outputs.map((o) => o.sha256));
      // Gone with the sandbox: the IO context drops its values from the journal once it is deleted.
      await waitFor(() => values.get(`${made.runId}/a`, made.outputs[0]!.sha256).then(() => false, (err: Error) => /missing/.test(err.message)), {
        timeoutMs: 15_000, what: "the sandbox's values to leave the journal",
      });
    } finally {
      await nc.close();
    }
  }, 240_000);
});
