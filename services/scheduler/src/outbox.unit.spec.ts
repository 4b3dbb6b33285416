import { DirectDispatches } from "./outbox.js";

describe("DirectDispatches", () => {
  it("answers once for a run published here, and never for one that was not", async () => {
    const direct = new DirectDispatches();
    direct.begin("rk1.db.create.a.1")(true);
    expect(await direct.take("rk1.db.create.b.1")).toBe(false);
    expect(await direct.take("rk1.db.create.a.1")).toBe(true);
    expect(await direct.take("rk1.db.create.a.1")).toBe(false);
  });

  it("makes the outbox wait for a publish under way: published, nothing to do; failed, the outbox publishes", async () => {
    const direct = new DirectDispatches();
    const a = direct.begin("a");
    const b = direct.begin("b");
    const answers: Array<[string, boolean]> = [];
    const asked = [direct.take("a").then((x) => answers.push(["a", x])), direct.take("b").then((x) => answers.push(["b", x]))];
    await Promise.resolve();
    expect(answers).toEqual([]); // neither publish has settled
    b(false);
    a(true);
    await Promise.all(asked);
    expect(answers.sort()).toEqual([["a", true], ["b", false]]);
  });

  it("holds at most its limit, forgetting the oldest (the outbox then publishes it again, a duplicate the queue drops)", async () => {
    const direct = new DirectDispatches(2);
    for (const id of ["a", "b", "c"]) direct.begin(id)(true);
    expect(direct.size).toBe(2);
    expect(await direct.take("a")).toBe(false);
    expect([await direct.take("b"), await direct.take("c")]).toEqual([true, true]);
  });
});

describe("DirectDispatches: appends under way", () => {
  it("makes the outbox wait for this process's appends of a workflow, not another's, and a second done does nothing", async () => {
    const direct = new DirectDispatches();
    const first = direct.appending("wf1");
    const second = direct.appending("wf1");
    let waited = false;
    const waiting = direct.appended("wf1").then(() => { waited = true; });
    await direct.appended("wf2"); // nothing under way for wf2: no wait
    first();
    first();
    await Promise.resolve();
    expect(waited).toBe(false); // the second append is still under way
    second();
    await waiting;
    expect(waited).toBe(true);
    await direct.appended("wf1"); // none left
  });
});
