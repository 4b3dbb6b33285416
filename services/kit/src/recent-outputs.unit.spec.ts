import { createHash } from "node:crypto";
import { waitFor } from "./wait.js";
import { RecentOutputs } from "./recent-outputs.js";

const out = (name: string, value: string) => ({ name, value: Buffer.from(value) });
const wanted = (name: string, value: string) => ({ name, sha256: createHash("sha256").update(value).digest("hex") });
const text = (m: Map<string, Buffer> | undefined) => (m ? Object.fromEntries([...m].map(([k, v]) => [k, v.toString()])) : undefined);

describe("RecentOutputs: recent runs' outputs in memory, served only as journaled", () => {
  it("serves every wanted value whose digest matches the journal's, and nothing when any one misses or differs", () => {
    const recent = new RecentOutputs(1024);
    recent.remember("rk1.db.create.a.1", "rk1", [out("host", "db-1"), out("port", "5432")]);
    expect(text(recent.take("rk1.db.create.a.1", [wanted("host", "db-1"), wanted("port", "5432")]))).toEqual({ host: "db-1", port: "5432" });
    expect(text(recent.take("rk1.db.create.a.1", [wanted("host", "db-1")]))).toEqual({ host: "db-1" });
    // The journal says another value: memory is never trusted over it.
    expect(recent.take("rk1.db.create.a.1", [wanted("host", "db-evil")])).toBeUndefined();
    // One of two not held: the whole read goes to the cache.
    expect(recent.take("rk1.db.create.a.1", [wanted("host", "db-1"), wanted("user", "admin")])).toBeUndefined();
    // No digest known (an event written before digests): not served from memory.
    expect(recent.take("rk1.db.create.a.1", [{ name: "host", sha256: "" }])).toBeUndefined();
    expect(recent.take("rk1.db.create.b.1", [wanted("host", "db-1")])).toBeUndefined();
  });

  it("adds a run's later outputs to those it holds", () => {
    const recent = new RecentOutputs(1024);
    recent.remember("rk1.db.create.a.1", "rk1", [out("host", "db-1")]);
    recent.remember("rk1.db.create.a.1", "rk1", [out("port", "5432")]);
    expect(text(recent.take("rk1.db.create.a.1", [wanted("host", "db-1"), wanted("port", "5432")]))).toEqual({ host: "db-1", port: "5432" });
    expect(recent.size.runs).toBe(1);
  });

  it("stays within its bound in bytes: the least recently used run goes first, and a run bigger than the bound is not held", () => {
    const recent = new RecentOutputs(2 * (256 + 1 + 300 + 64));
    recent.remember("rk1.db.create.a.1", "rk1", [out("v", "a".repeat(300))]);
    recent.remember("rk2.db.create.a.1", "rk2", [out("v", "b".repeat(300))]);
    expect(recent.take("rk1.db.create.a.1", [wanted("v", "a".repeat(300))])).toBeDefined(); // rk1's run is now the most recent
    recent.remember("rk3.db.create.a.1", "rk3", [out("v", "c".repeat(300))]);
    expect(recent.take("rk2.db.create.a.1", [wanted("v", "b".repeat(300))])).toBeUndefined();
    expect(recent.take("rk1.db.create.a.1", [wanted("v", "a".repeat(300))])).toBeDefined();
    expect(recent.size.runs).toBe(2);
    expect(recent.size.bytes).toBeLessThanOrEqual(2 * (256 + 1 + 300 + 64));
    recent.remember("rk4.db.create.a.1", "rk4", [out("v", "d".repeat(5_000))]);
    expect(recent.take("rk4.db.create.a.1", [wanted("v", "d".repeat(5_000))])).toBeUndefined();
    expect(recent.size.runs).toBe(2);
    // An evicted run leaves its sandbox's index too: forgetting rk2 finds nothing to forget.
    expect(recent.forget("rk2")).toBe(0);
  });

  it("forgets every run of a deleted sandbox, and only its", () => {
    const recent = new RecentOutputs(4096);
    recent.remember("rk1.db.create.a.1", "rk1", [out("host", "db-1")]);
    recent.remember("rk1.db.create.b.1", "rk1", [out("url", "u")]);
    recent.remember("rk2.db.create.a.1", "rk2", [out("host", "db-2")]);
    expect(recent.forget("rk1")).toBe(2);
    expect(recent.take("rk1.db.create.a.1", [wanted("host", "db-1")])).toBeUndefined();
    expect(recent.take("rk1.db.create.b.1", [wanted("url", "u")])).toBeUndefined();
    expect(text(recent.take("rk2.db.create.a.1", [wanted("host", "db-2")]))).toEqual({ host: "db-2" });
    expect(recent.size.runs).toBe(1);
  });

  it("with a time to live, lets a run's values go that long after they were held, read or not", async () => {
    const recent = new RecentOutputs(4096, { ttlMs: 50 });
    recent.remember("rk1.db.create.a.1", "rk1", [out("host", "db-1")]);
    expect(text(recent.take("rk1.db.create.a.1", [wanted("host", "db-1")]))).toEqual({ host: "db-1" });
    await waitFor(() => recent.size.runs === 0, { timeoutMs: 5_000, intervalMs: 10, what: "the run's values to leave memory" });
    expect(recent.take("rk1.db.create.a.1", [wanted("host", "db-1")])).toBeUndefined();
    // Gone from its sandbox's index too.
    expect(recent.forget("rk1")).toBe(0);
  });
});
