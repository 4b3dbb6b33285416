import { UnavailableError } from "@ephemera/kit";
import { InMemoryEventStore } from "./memory.js";
import { Projection, commitIdOf, execute } from "./projection.js";

describe("execute: deterministic commit ids", () => {
  const counter = () => new Projection<number>("c", () => 0, (n) => n + 1);
  const meta = { source: "test" };

  it("drops a retried append of the same command decided on the same version", async () => {
    const store = new InMemoryEventStore();
    // Two deciders on the same version of the aggregate, e.g. a handler retried after its append's
    // acknowledgement was lost: the second append is the same commit, and the store drops it.
    const [first, retried] = [counter(), counter()];
    const a = await execute(store, first, "x", () => [{ type: "t", data: {} }], { ...meta, command: "record-success:run-1" });
    const b = await execute(store, retried, "x", () => [{ type: "t", data: {} }], { ...meta, command: "record-success:run-1" });
    expect(a.appended?.duplicate).toBe(false);
    expect(b.appended?.duplicate).toBe(true);
    expect((await store.read("c", "x")).version).toBe(1);
  });

  it("still decides again when another command was appended on that version", async () => {
    const store = new InMemoryEventStore();
    const [one, other] = [counter(), counter()];
    await execute(store, one, "x", () => [{ type: "t", data: {} }], { ...meta, command: "tick" });
    const b = await execute(store, other, "x", (n) => (n >= 1 ? [{ type: "t", data: {} }] : [{ type: "t", data: {} }]), { ...meta, command: "cancel" });
    expect(b.appended?.duplicate).toBe(false);
    expect((await store.read("c", "x")).events.map((e) => e.sequence)).toEqual([1, 2]);
    expect(commitIdOf("c", "x", 1, "cancel")).toBe("c.x@1:cancel");
  });

  it("retries an append whose answer was lost, and the store keeps one commit", async () => {
    const store = new InMemoryEventStore();
    let failures = 0;
    // The first append lands but its answer is lost, as across a server restart.
    const flaky = Object.create(store) as InMemoryEventStore;
    flaky.append = async (...args: Parameters<InMemoryEventStore["append"]>) => {
      const result = await store.append(...args);
      if (failures++ === 0) throw new UnavailableError("append failed: timeout");
      return result;
    };
    const r = await execute(flaky, counter(), "x", () => [{ type: "t", data: {} }], { ...meta, command: "start" });
    expect(failures).toBe(2);
    expect(r.appended?.duplicate).toBe(true);
    expect((await store.read("c", "x")).version).toBe(1);
  });

  it("does not retry an unavailable store for an append without a command key", async () => {
    const store = new InMemoryEventStore();
    const down = Object.create(store) as InMemoryEventStore;
    let calls = 0;
    down.append = async () => { calls++; throw new UnavailableError("down"); };
    await expect(execute(down, counter(), "x", () => [{ type: "t", data: {} }], meta)).rejects.toBeInstanceOf(UnavailableError);
    expect(calls).toBe(1);
  });
});
