// Outputs at the limit, for real: one step's three 1 MiB outputs are journaled outside its
// result event, never go through Redis (the delete step's dispatch carries its plan), and
// reach the delete step intact from the journal (it reports their digests): the runner holds
// at most 1 MiB of its steps' outputs here, so it cannot hand them over from memory. Own NATS
// and Redis, the services as processes.
import { join } from "node:path";
import { Redis } from "ioredis";
import { Aggregates, decode, journaledValues } from "@ephemera/events";
import { JetStreamEventStore, JetStreamValueStore, connectNats } from "@ephemera/eventstore";
import { waitFor } from "@ephemera/kit";
import { ephOk, type Eph } from "../support/eph.js";
import { startOwnStack, type OwnStack } from "../support/own-stack.js";

const FIXTURES = join(__dirname, "fixtures");
const MiB = 1024 * 1024;

describe("three 1 MiB outputs of one step (own servers, services as processes)", () => {
  let stack: OwnStack | undefined;
  let nats: OwnStack["nats"];
  let redis: OwnStack["redis"];
  let eph: Eph;
  let prefix: string;

  beforeAll(async () => {
    stack = await startOwnStack("big", { env: { EPHEMERA_RUNNER_RECENT_BYTES: String(MiB) } });
    ({ nats, redis, eph, prefix } = stack);
  }, 90_000);

  afterAll(async () => {
    await stack?.stop();
  }, 60_000);

  it("journals them, caches none in Redis, and the delete step still reads all three intact", async () => {
    await ephOk(eph, ["plugin", "apply", "-f", join(FIXTURES, "large-plugin.yaml")]);
    await ephOk(eph, ["sandbox", "apply", "-f", join(FIXTURES, "large-sandbox.yaml"), "--wait-timeout", "90s"], { timeoutMs: 100_000 });
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
        expect(await cache.keys(`${prefix}:io:*`)).toEqual([]);
      } finally {
        cache.disconnect();
      }

      // The values are in the journal, under their digests.
      const journaled = await journaledValues(values, made.runId, made.outputs);
      expect([...journaled.values()].map((v) => v.length)).toEqual([MiB, MiB, MiB]);

      await ephOk(eph, ["sandbox", "delete", "large", "--wait-timeout", "90s"], { timeoutMs: 100_000 });
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
