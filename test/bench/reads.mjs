// Speed of an event-store aggregate read on JetStream: the read as it was (a message get for
// the last sequence, then a temporary ordered consumer up to it) against the read as it is
// (message gets only, and a cache of what the handle holds), on an aggregate of three
// commits interleaved with another's. Wall time and this process's CPU per read.
//   npx tsc -b services/eventstore && node test/bench/reads.mjs
import { randomBytes } from "node:crypto";
import { pathToFileURL } from "node:url";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { JetStreamEventStore, NO_AGGREGATE, connectNats, eventStreamName, eventSubject } from "../../services/eventstore/dist/index.js";
import { readSubject } from "../../services/eventstore/dist/subject.js";

/** Runs the comparison; resolves to one row per way of reading. */
export async function benchReads({ natsUrl = "nats://127.0.0.1:4222", reads = 300, samples = 7, warmup = 100 } = {}) {
  const prefix = `benchreads${randomBytes(4).toString("hex")}`;
  const nc = await connectNats(natsUrl, "bench-reads");
  try {
    const store = await JetStreamEventStore.open(nc, { prefix });
    const meta = { source: "bench" };
    let rev = NO_AGGREGATE;
    let other = NO_AGGREGATE;
    for (let i = 0; i < 3; i++) {
      rev = await store.append("steprun", "r", rev, [{ type: "ephemera.bench.v1", data: { i, pad: "x".repeat(300) } }], meta);
      other = await store.append("workflow", "w", other, [{ type: "ephemera.bench.v1", data: { i } }], meta);
    }
    const js = jetstream(nc);
    const jsm = await jetstreamManager(nc);
    const stream = eventStreamName(prefix);
    const subject = eventSubject(prefix, "steprun", "r");
    const uncached = await JetStreamEventStore.open(nc, { prefix, cache: { aggregates: 0 } });
    const ways = {
      "consumer per read (before)": async () => {
        const { messages } = await readSubject(js, jsm, stream, subject);
        return messages.flatMap((m) => m.json()).length;
      },
      "message gets, nothing held (3 requests)": async () => (await uncached.read("steprun", "r")).events.length,
      "message gets, aggregate held (1 request)": async () => (await store.read("steprun", "r")).events.length,
    };
    const times = Object.fromEntries(Object.keys(ways).map((k) => [k, { ms: [], cpuUs: [] }]));
    for (const read of Object.values(ways)) for (let i = 0; i < warmup; i++) await read();
    // Samples alternate between the ways, so that drift on a shared machine falls on all of them.
    for (let s = 0; s < samples; s++) {
      for (const [name, read] of Object.entries(ways)) {
        const cpu = process.cpuUsage();
        const t = process.hrtime.bigint();
        for (let i = 0; i < reads; i++) if ((await read()) !== 3) throw new Error(`${name} did not read the three events`);
        const ms = Number(process.hrtime.bigint() - t) / 1e6;
        const used = process.cpuUsage(cpu);
        times[name].ms.push(ms / reads);
        times[name].cpuUs.push((used.user + used.system) / reads);
      }
    }
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const min = (xs) => Math.min(...xs);
    const before = times["consumer per read (before)"];
    return Object.entries(times).map(([way, t]) => ({
      way,
      "ms/read min": +min(t.ms).toFixed(3),
      "ms/read median": +median(t.ms).toFixed(3),
      "CPU µs/read median": Math.round(median(t.cpuUs)),
      "before/this (median ms)": +(median(before.ms) / median(t.ms)).toFixed(1),
      "before/this (median CPU)": +(median(before.cpuUs) / median(t.cpuUs)).toFixed(1),
    }));
  } finally {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(eventStreamName(prefix)).catch(() => undefined);
    await nc.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const rows = await benchReads({ natsUrl: process.env.NATS_URL });
  console.table(rows);
}
