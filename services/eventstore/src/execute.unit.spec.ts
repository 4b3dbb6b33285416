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
});
