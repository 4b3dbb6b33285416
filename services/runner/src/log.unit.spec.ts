import { InMemoryLogStore, type AppendOptions, type LogStore } from "@ephemera/eventstore";
import { UnavailableError, waitFor } from "@ephemera/kit";
import { LiveLog, StepLog, TAIL_BYTES } from "./log.js";

const lines = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `line ${from + i}\n`).join("");
const RUN = "rk.db.create.a.1";

describe("step log", () => {
  it("stores everything under the bound and keeps a tail of the last 40 lines", () => {
    const log = new StepLog();
    expect(log.write(Buffer.from(lines(1, 60))).toString()).toBe(lines(1, 60));
    expect(log.finish().length).toBe(0);
    expect(log.tail()).toBe(lines(21, 60).slice(0, -1));
  });

  it("bounds the tail to 4 KiB without a partial first line", () => {
    const log = new StepLog();
    const long = `${"x".repeat(1000)}\n`;
    for (let i = 0; i < 10; i++) log.write(Buffer.from(long));
    const tail = log.tail();
    expect(Buffer.byteLength(tail)).toBeLessThanOrEqual(TAIL_BYTES);
    expect(tail.split("\n").every((l) => l.length === 1000)).toBe(true);
  });

  it("at the bound stores a marker once, then nothing until the end, which brings the last bytes", () => {
    const log = new StepLog(10, 8);
    const now = log.write(Buffer.from("0123456789abc")).toString();
    expect(now).toMatch(/^0123456789\n\[ephemera\] the log reached its limit of 10 bytes: what follows is left out, but for its last 8 bytes, stored when the step ends\n$/);
    expect(log.write(Buffer.from("defghijklmnopqrstuvwxyz")).length).toBe(0);
    const end = log.finish().toString();
    expect(end).toBe("\n[ephemera] 18 bytes of log left out; the last 8 bytes follow\nstuvwxyz");
  });
});

/** A store that answers the first `failures` appends with an error, after storing them (an acknowledgement lost). */
function losingAcks(store: LogStore, failures: number): LogStore & { appends: number } {
  let left = failures;
  const wrapped = {
    appends: 0,
    append: async (runId: string, chunk: Uint8Array, options?: AppendOptions) => {
      wrapped.appends++;
      await store.append(runId, chunk, options);
      if (left-- > 0) throw new UnavailableError("the acknowledgement was lost");
    },
    end: (runId: string) => store.end(runId),
    read: (runId: string) => store.read(runId),
    entries: store.entries.bind(store),
    follow: store.follow.bind(store),
  };
  return wrapped;
}

describe("live log", () => {
  it("stores output while the step runs, in batches, not a write per line", async () => {
    const store = new InMemoryLogStore();
    const live = new LiveLog(store, RUN, { flushMs: 50, flushBytes: 1024 });
    live.write(Buffer.from("first line\n"));
    await waitFor(async () => (await store.read(RUN)).toString() === "first line\n", { what: "the first line, before the step ends" });
    // 100 small writes at once make a few batches (each full at 1 KiB), not 100.
    for (let i = 0; i < 100; i++) live.write(Buffer.from(`${"x".repeat(40)} ${String(i).padStart(3, "0")}\n`));
    await live.close();
    const entries = await store.entries(RUN);
    expect(entries.length).toBeLessThanOrEqual(1 + Math.ceil((100 * 45) / 1024) + 1);
    expect((await store.read(RUN)).length).toBe(11 + 100 * 45);
  });

  it("close() stores what is left and ends the log, so followers end", async () => {
    const store = new InMemoryLogStore();
    const live = new LiveLog(store, RUN, { flushMs: 60_000 });
    const got: string[] = [];
    const follower = store.follow(RUN, {}, (e) => got.push(e.data.toString()));
    live.write(Buffer.from("only line\n"));
    await live.close();
    expect(await follower.done).toBe("ended");
    expect(got.join("")).toBe("only line\n");
  });

  it("keeps a step's log within its bound, with the marker, and the end stored last", async () => {
    const store = new InMemoryLogStore();
    const live = new LiveLog(store, RUN, { flushMs: 10, flushBytes: 4096, capBytes: 64 * 1024, endBytes: 1024 });
    for (let i = 1; i <= 20_000; i++) live.write(Buffer.from(`line ${i}\n`));
    await live.close();
    const text = (await store.read(RUN)).toString();
    expect(text).toContain("[ephemera] the log reached its limit of 64 KiB");
    expect(text.match(/reached its limit/g)).toHaveLength(1);
    expect(text).toMatch(/\[ephemera\] \d+ bytes of log left out; the last 1024 bytes follow\n/);
    expect(text.endsWith("line 20000\n")).toBe(true);
    expect(Buffer.byteLength(text)).toBeLessThan(64 * 1024 + 1024 + 300);
  });

  it("sends a batch whose acknowledgement was lost again, and it is stored once", async () => {
    const store = new InMemoryLogStore();
    const flaky = losingAcks(store, 2);
    const errors: unknown[] = [];
    const live = new LiveLog(flaky, RUN, { flushMs: 5, retryMs: 5, onError: (err) => errors.push(err) });
    live.write(Buffer.from("one\n"));
    await waitFor(() => flaky.appends >= 3, { what: "the batch to be sent again" });
    live.write(Buffer.from("two\n"));
    await live.close();
    expect((await store.read(RUN)).toString()).toBe("one\ntwo\n");
    expect(errors).toHaveLength(1); // said once for the run of failures
  });

  it("gives up on a store that stays away after a few tries, and says so", async () => {
    const store = new InMemoryLogStore();
    store.setAvailable(false);
    const errors: unknown[] = [];
    const live = new LiveLog(store, RUN, { flushMs: 5, retryMs: 5, closeAttempts: 3, onError: (err) => errors.push(err) });
    live.write(Buffer.from("lost\n"));
    await live.close();
    expect(errors[0]).toBeInstanceOf(UnavailableError);
    store.setAvailable(true);
    expect((await store.read(RUN)).length).toBe(0);
  });
});
