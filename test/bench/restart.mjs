// Restart of the sandbox service (the API) on a stream that already holds many events:
// from its start to gRPC health SERVING (it replays the stream into its views first),
// against the same on an empty stream.
import { jetstream } from "@nats-io/jetstream";
import { headers } from "@nats-io/nats-core";
import { JetStreamEventStore, connectNats, eventSubject } from "../../services/eventstore/dist/index.js";
import { freePort, newPrefix, serviceEnv, startService } from "./system.mjs";

/** `count` small steprun.started commits (one event each, as the runner writes them) under `prefix`, published in parallel batches. */
export async function fillStream(natsUrl, prefix, count, batch = 1000) {
  const nc = await connectNats(natsUrl, "bench-fill");
  try {
    await JetStreamEventStore.open(nc, { prefix }); // creates the stream as the services would
    const js = jetstream(nc, { timeout: 30_000 });
    const time = new Date().toISOString();
    for (let from = 0; from < count; from += batch) {
      const acks = [];
      for (let i = from; i < Math.min(count, from + batch); i++) {
        const runId = `rk${i.toString(36)}.r.create.s.1`;
        const id = `ev${i}`;
        const event = {
          specversion: "1.0", id, type: "ephemera.steprun.started.v1", source: "runner", subject: runId, time,
          datacontenttype: "application/json",
          data: { runId, workflowId: `rk${i.toString(36)}.r.create`, step: "s", attempt: 1, driver: "process", runner: "bench" },
          correlationId: id, causationId: id, sequence: 1,
        };
        const h = headers();
        h.set("Ephemera-Types", "ephemera.steprun.started.v1");
        acks.push(js.publish(eventSubject(prefix, "steprun", runId), JSON.stringify([event]), { headers: h, msgID: id }));
      }
      await Promise.all(acks);
    }
  } finally {
    await nc.close();
  }
}

/** Starts the sandbox service on `prefix` `samples` times (after a warm-up), stopping it each time; the time to SERVING of each. */
export async function timeRestarts({ natsUrl, redisUrl, scratch, prefix, samples }) {
  const times = [];
  for (let i = 0; i <= samples; i++) {
    const api = `127.0.0.1:${await freePort()}`;
    const env = serviceEnv({ NATS_URL: natsUrl, REDIS_URL: redisUrl, EPHEMERA_PREFIX: prefix, EPHEMERA_API_LISTEN: api, EPHEMERA_SIGNING_KEY_FILE: `${scratch}/${prefix}.key` });
    const { proc, ms } = await startService("sandbox", env, api, 120_000);
    await proc.stop();
    if (i > 0) times.push(ms); // the first start creates the stream's consumers: a warm-up
  }
  return times;
}

export async function restartFigure({ natsUrl, redisUrl, scratch, events, samples }) {
  const empty = newPrefix("empty");
  const full = newPrefix("full");
  await fillStream(natsUrl, empty, 0);
  const t = performance.now();
  await fillStream(natsUrl, full, events);
  const fillMs = performance.now() - t;
  const baseline = await timeRestarts({ natsUrl, redisUrl, scratch, prefix: empty, samples });
  const measured = await timeRestarts({ natsUrl, redisUrl, scratch, prefix: full, samples });
  return { baseline, measured, fillMs };
}
