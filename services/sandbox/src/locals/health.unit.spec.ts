// The tunnel health check's writes, on the in-memory event store with a stand-in for the
// tunnel's answers: two replicas write one tunnel-lost, a reconnect racing the check stays,
// and only locals whose tunnel said where to ask it (of live sandboxes) are asked.
import { Aggregates, encode, ev, folding, type DomainEvent } from "@ephemera/events";
import { InMemoryEventStore, Projection } from "@ephemera/eventstore";
import { createLogger } from "@ephemera/kit";
import { foldLocalLinks, noLocalLinks, type LocalLinks } from "../sandbox/locals.js";
import { TunnelCheck } from "./health.js";
import type { AskTunnel } from "./probe.js";
import type { Answer } from "./strikes.js";

const logger = createLogger("health-test", "silent");
const connected = (sessionId: string, local = "backend", tunnel = "http://10.0.0.7:7785") => ev("ephemera.locals.connected.v1", {
  sandbox: "dev", routingKey: "rk1", local, sessionId, addresses: [{ port: 8080, address: "10.0.0.7:41000" }], tunnel,
});

async function append(store: InMemoryEventStore, events: DomainEvent[]): Promise<void> {
  const read = await store.read(Aggregates.locals, "rk1");
  await store.append(Aggregates.locals, "rk1", { revision: read.revision, version: read.version }, events.map(encode), { source: "tunnel" });
}

/** A replica's check: its own projection (as read now), the sandbox `dev` alive with routing key rk1. */
async function replica(store: InMemoryEventStore, ask: AskTunnel): Promise<TunnelCheck> {
  const locals = new Projection<LocalLinks>(Aggregates.locals, noLocalLinks, folding(foldLocalLinks));
  await locals.reload(store, "rk1");
  return new TunnelCheck({ store, locals, logger, ask, sandboxes: () => [{ name: "dev", routingKey: "rk1" }] }, { intervalMs: 1_000, timeoutMs: 100, strikes: 2 });
}

const always = (answer: Answer): AskTunnel => async (_url, sessions) => new Map(sessions.map((s) => [s, answer]));
const disconnects = async (store: InMemoryEventStore) =>
  (await store.read(Aggregates.locals, "rk1")).events.filter((e) => e.type === "ephemera.locals.disconnected.v1").map((e) => e.data);

describe("the tunnel health check's writes", () => {
  it("writes tunnel-lost at the second failed check, once, though two replicas decide it", async () => {
    const store = new InMemoryEventStore();
    await append(store, [connected("s1")]);
    const [a, b] = [await replica(store, always("unreachable")), await replica(store, always("gone"))];
    await a.check();
    await b.check();
    expect(await disconnects(store)).toEqual([]);
    await a.check();
    await b.check();
    await a.check();
    expect(await disconnects(store)).toEqual([{ sandbox: "dev", routingKey: "rk1", local: "backend", sessionId: "s1", reason: "tunnel-lost" }]);
  });

  it("leaves a reconnect that raced the check connected", async () => {
    const store = new InMemoryEventStore();
    await append(store, [connected("s1")]);
    let asked = 0;
    // The workstation reconnects through another tunnel while the old one is asked the second time.
    const check = await replica(store, async (_url, sessions) => {
      if (++asked === 2) await append(store, [connected("s2", "backend", "http://10.0.0.8:7785")]);
      return new Map(sessions.map((s) => [s, "gone" as const]));
    });
    await check.check();
    await check.check();
    expect(await disconnects(store)).toEqual([]);
    expect((await store.read(Aggregates.locals, "rk1")).events.map((e) => (e.data as { sessionId: string }).sessionId)).toEqual(["s1", "s2"]);
  });

  it("asks each tunnel once a round about its sessions, and never about a local whose tunnel did not say where to ask it", async () => {
    const store = new InMemoryEventStore();
    await append(store, [connected("s1", "a"), connected("s1", "b"), connected("s2", "c", "http://10.0.0.8:7785"), connected("s3", "old", "")]);
    const asked: Array<[string, readonly string[]]> = [];
    const check = await replica(store, async (url, sessions) => {
      asked.push([url, sessions]);
      return new Map(sessions.map((s) => [s, "open" as const]));
    });
    await check.check();
    expect(asked.sort()).toEqual([["http://10.0.0.7:7785", ["s1"]], ["http://10.0.0.8:7785", ["s2"]]]);
  });
});
