// The one consumer loop: a session that fails or ends is reported and started again after a
// backoff until stopped; reading again is reported once; a final failure ends it; stop cuts
// a backoff short.
import { waitFor } from "@ephemera/kit";
import type { NatsHealth } from "./health.js";
import { ConsumerLoop } from "./reopen.js";

function fakeHealth() {
  const calls: string[] = [];
  const health = {
    interrupt: (name: string, err: unknown) => calls.push(`interrupt ${name}: ${(err as Error).message}`),
    restore: (name: string) => calls.push(`restore ${name}`),
    forget: (name: string) => calls.push(`forget ${name}`),
  } as unknown as NatsHealth;
  return { calls, health };
}

describe("ConsumerLoop", () => {
  it("starts a failed or ended session again until stopped, reporting each interruption and each return to reading", async () => {
    const { calls, health } = fakeHealth();
    let sessions = 0;
    const loop = new ConsumerLoop({ name: "c", health, backoff: { firstMs: 1, maxMs: 5 } }, async (l) => {
      sessions++;
      if (sessions === 1) throw new Error("consumer not found");
      l.reading();
      if (sessions === 2) return; // its messages ended
      throw new Error("heartbeats missed");
    });
    await waitFor(() => sessions >= 4, { timeoutMs: 5000, what: "four sessions" });
    loop.stop();
    await loop.done;
    expect(calls.slice(0, 5)).toEqual([
      "interrupt c: consumer not found", "restore c", "interrupt c: the consumer's messages ended", "restore c", "interrupt c: heartbeats missed",
    ]);
    expect(calls.at(-1)).toBe("forget c");
  });

  it("ends with a final failure, which `done` rejects with", async () => {
    const { calls, health } = fakeHealth();
    const seen: Array<{ opened: boolean; failures: number }> = [];
    const loop = new ConsumerLoop({
      name: "f", health, backoff: { firstMs: 1, maxMs: 2 },
      final: (_err, at) => { seen.push(at); return at.failures >= 2; },
    }, async () => { throw new Error("no such stream"); });
    await expect(loop.done).rejects.toThrow("no such stream");
    expect(seen).toEqual([{ opened: false, failures: 0 }, { opened: false, failures: 1 }, { opened: false, failures: 2 }]);
    expect(calls).toEqual(["interrupt f: no such stream", "interrupt f: no such stream", "forget f"]);
  });

  it("stops at once while it waits out a backoff", async () => {
    let sessions = 0;
    const loop = new ConsumerLoop({ name: "s", backoff: { firstMs: 60_000, maxMs: 60_000 } }, async () => {
      sessions++;
      throw new Error("down");
    });
    await waitFor(() => sessions === 1, { timeoutMs: 5000, what: "the first session" });
    const started = Date.now();
    loop.stop();
    await loop.done;
    expect(Date.now() - started).toBeLessThan(1000);
    expect(sessions).toBe(1);
  });
});
