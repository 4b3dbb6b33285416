// One contract for both work queues: JetStream's and its in-memory twin must hand out,
// redeliver, give up and cancel the same way, failure cases included.
import { ConflictError, UnavailableError, waitFor } from "@ephemera/kit";
import type { Lane, WorkItem, WorkQueue, WorkQueueConsumer } from "./workqueue.js";

export interface WorkQueueFixture {
  /** A handle on the shared queue, as one more process would open it (ack wait 1 s). */
  open(): Promise<WorkQueue<{ n: number }>>;
  /** Resolves once the queue has handed the consumers of `cluster` what they can hold of `lane` (JetStream: nothing of it pending at the server). */
  delivered(cluster: string, lane: Lane): Promise<void>;
  /** A handle whose backend is down. */
  down(): Promise<WorkQueue<{ n: number }>>;
  dispose(): Promise<void>;
}

type Item = WorkItem<{ n: number }>;

export function workQueueContract(name: string, setup: () => Promise<WorkQueueFixture>): void {
  describe(`WorkQueue contract: ${name}`, () => {
    let fx: WorkQueueFixture;
    let consumers: WorkQueueConsumer[];
    beforeEach(async () => { fx = await setup(); consumers = []; });
    afterEach(async () => {
      await Promise.all(consumers.map((c) => c.stop()));
      await fx.dispose();
    });
    const consume = (q: WorkQueue<{ n: number }>, cluster: string, handler: (i: Item) => Promise<void>, opts = {}) => {
      const c = q.consume(cluster, { concurrency: 4, redelivery: { backoffMs: [20] }, ...opts }, handler);
      consumers.push(c);
      return c;
    };

    it("hands each item to its cluster once and drops a second publish of the same id", async () => {
      const q = await fx.open();
      const got: Array<[string, number, number]> = [];
      consume(q, "c1", async (i) => { got.push([i.id, i.data.n, i.deliveries]); });
      consume(q, "c2", async (i) => { got.push([`c2:${i.id}`, i.data.n, i.deliveries]); });
      await q.publish("c1", "a", { n: 1 });
      await q.publish("c1", "a", { n: 99 });
      await q.publish("c1", "b", { n: 2 });
      await waitFor(() => got.length === 2, { what: "two items" });
      expect(got.sort()).toEqual([["a", 1, 1], ["b", 2, 1]]);
      await q.publish("c1", "c", { n: 3 });
      await waitFor(() => got.length === 3, { what: "the third item" });
      expect(got.some(([id]) => id.startsWith("c2:"))).toBe(false);
    });

    it("serves the next lane before the start lane: a workflow under way is not held up by new ones", async () => {
      const q = await fx.open();
      const order: string[] = [];
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      consume(q, "c", async (i) => {
        order.push(i.id);
        if (i.id === "s1") await released;
      }, { concurrency: 1 });
      for (const id of ["s1", "s2", "s3"]) await q.publish("c", id, { n: 0 }, "start");
      await waitFor(() => order.length === 1, { what: "the first item to be taken" });
      // While the only worker is busy, a later step of a workflow under way arrives.
      await q.publish("c", "n1", { n: 0 }, "next");
      await fx.delivered("c", "next");
      release();
      try {
        await waitFor(() => order.length === 4, { what: "every item" });
      } finally {
        release();
      }
      expect(order).toEqual(["s1", "n1", "s2", "s3"]);
    });

    it("splits items between two consumers of one cluster, each item to exactly one", async () => {
      const [q1, q2] = [await fx.open(), await fx.open()];
      const byA: number[] = [];
      const byB: number[] = [];
      let holding = 0;
      let both!: () => void;
      const bothHolding = new Promise<void>((r) => (both = r));
      const hold = async (into: number[], i: Item) => {
        into.push(i.data.n);
        if (++holding === 2) both();
        await bothHolding;
      };
      consume(q1, "c", (i) => hold(byA, i), { concurrency: 1 });
      consume(q2, "c", (i) => hold(byB, i), { concurrency: 1 });
      for (let n = 1; n <= 6; n++) await q1.publish("c", `i${n}`, { n });
      await waitFor(() => byA.length + byB.length === 6, { what: "six items" });
      expect([...byA, ...byB].sort()).toEqual([1, 2, 3, 4, 5, 6]);
      expect(byA.length).toBeGreaterThan(0);
      expect(byB.length).toBeGreaterThan(0);
    });

    it("redelivers a failing item with backoff, without holding up the others, then gives up", async () => {
      const q = await fx.open();
      const deliveries: number[] = [];
      const ok: number[] = [];
      const dead: Array<{ id: string; deliveries: number; reason: string }> = [];
      consume(q, "c", async (i) => {
        if (i.data.n === 1) { deliveries.push(i.deliveries); throw new UnavailableError("still down"); }
        ok.push(i.data.n);
      }, {
        concurrency: 1,
        redelivery: { maxDeliver: 3, backoffMs: [200] },
        onDeadLetter: async (item: { id: string; deliveries: number }, err: unknown) => {
          dead.push({ id: item.id, deliveries: item.deliveries, reason: (err as Error).message });
        },
      });
      await q.publish("c", "poison", { n: 1 });
      await q.publish("c", "fine", { n: 2 });
      await waitFor(() => ok.length === 1, { what: "the item behind the failing one" });
      expect(deliveries.length).toBeLessThan(3);
      await waitFor(() => dead.length === 1, { what: "the dead letter" });
      expect(deliveries).toEqual([1, 2, 3]);
      expect(dead).toEqual([{ id: "poison", deliveries: 3, reason: "still down" }]);
      await q.publish("c", "after", { n: 3 });
      await waitFor(() => ok.length === 2, { what: "an item after the dead letter" });
      expect(deliveries).toEqual([1, 2, 3]);
    });

    it("gives up at once on an error that says retrying cannot help", async () => {
      const q = await fx.open();
      let calls = 0;
      const dead: number[] = [];
      consume(q, "c", async () => { calls++; throw new ConflictError("never"); }, {
        onDeadLetter: async (item: { deliveries: number }) => { dead.push(item.deliveries); },
      });
      await q.publish("c", "x", { n: 1 });
      await waitFor(() => dead.length === 1, { what: "the dead letter" });
      expect(dead).toEqual([1]);
      expect(calls).toBe(1);
    });

    it("delivers an item again when its handler goes silent past the ack wait", async () => {
      const [q1, q2] = [await fx.open(), await fx.open()];
      const silent: number[] = [];
      let never!: () => void;
      const hang = new Promise<void>((r) => (never = r));
      consume(q1, "c", async (i) => { silent.push(i.deliveries); await hang; }, { concurrency: 1 });
      await q1.publish("c", "x", { n: 1 });
      await waitFor(() => silent.length === 1, { what: "the first delivery" });
      const second: number[] = [];
      consume(q2, "c", async (i) => { second.push(i.deliveries); }, { concurrency: 1 });
      try {
        await waitFor(() => second.length === 1, { timeoutMs: 15_000, what: "redelivery after the ack wait" });
        expect(second).toEqual([2]);
      } finally {
        never();
      }
    });

    it("keeps a heartbeating item from being delivered twice", async () => {
      const [q1, q2] = [await fx.open(), await fx.open()];
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      const first: number[] = [];
      let beats = 0;
      consume(q1, "c", async (i) => {
        first.push(i.deliveries);
        const beat = setInterval(() => { i.heartbeat(); beats++; }, 200);
        await released;
        clearInterval(beat);
      }, { concurrency: 1 });
      await q1.publish("c", "x", { n: 1 });
      await waitFor(() => first.length === 1, { what: "the first delivery" });
      const others: number[] = [];
      consume(q2, "c", async (i) => { others.push(i.data.n); }, { concurrency: 1 });
      // Fifteen heartbeats span three ack waits; then a second item shows q2 is live and was never handed x.
      await waitFor(() => beats >= 15, { timeoutMs: 10_000, what: "heartbeats over three ack waits" });
      await q1.publish("c", "y", { n: 2 });
      try {
        await waitFor(() => others.length === 1, { what: "the second item" });
        expect(others).toEqual([2]);
      } finally {
        release();
      }
    });

    it("keeps cancels: a runner that subscribes after a cancel still gets it, once", async () => {
      const q = await fx.open();
      await q.cancel("c", { id: "k1", body: { runIds: ["r1"] } });
      await q.cancel("c", { id: "k1", body: { runIds: ["r1"] } });
      await q.cancel("other", { id: "k2", body: { runIds: ["r2"] } });
      const got: unknown[] = [];
      const sub = (await fx.open()).onCancel("c", (b) => got.push(b));
      consumers.push(sub);
      await waitFor(() => got.length === 1, { what: "the earlier cancel" });
      await q.cancel("c", { id: "k3", body: { runIds: ["r3"] } });
      await waitFor(() => got.length === 2, { what: "a live cancel" });
      expect(got).toEqual([{ runIds: ["r1"] }, { runIds: ["r3"] }]);
    });

    it("rejects publishes and cancels with UnavailableError when the backend is down", async () => {
      const q = await fx.down();
      await expect(q.publish("c", "x", { n: 1 })).rejects.toBeInstanceOf(UnavailableError);
      await expect(q.cancel("c", { id: "k", body: {} })).rejects.toBeInstanceOf(UnavailableError);
    });
  });
}
