import { DirectDispatches } from "./outbox.js";

describe("DirectDispatches", () => {
  it("answers once for a run published here, and never for one that was not", () => {
    const direct = new DirectDispatches();
    direct.add("rk1.db.create.a.1");
    expect(direct.take("rk1.db.create.b.1")).toBe(false);
    expect(direct.take("rk1.db.create.a.1")).toBe(true);
    expect(direct.take("rk1.db.create.a.1")).toBe(false);
  });

  it("holds at most its limit, forgetting the oldest (the outbox then publishes it again, a duplicate the queue drops)", () => {
    const direct = new DirectDispatches(2);
    for (const id of ["a", "b", "c"]) direct.add(id);
    expect(direct.size).toBe(2);
    expect(direct.take("a")).toBe(false);
    expect([direct.take("b"), direct.take("c")]).toEqual([true, true]);
  });
});
