// The order of a group's queue: fair across submitters, FIFO within one, the same after a restart.
import { nextJob, queueOrder, type QueueEntry } from "./queue.js";

const job = (name: string, submitter: string, queuedPosition: number): QueueEntry => ({ name, submitter, queuedPosition });
const names = (jobs: QueueEntry[]) => jobs.map((j) => j.name);

describe("a job runner group's queue", () => {
  it("is empty without waiting jobs", () => {
    expect(nextJob([], new Map())).toBeUndefined();
    expect(queueOrder([], new Map())).toEqual([]);
  });

  it("is FIFO for one submitter, whatever order the jobs are given in", () => {
    const jobs = [job("c", "ann", 30), job("a", "ann", 10), job("b", "ann", 20)];
    expect(names(queueOrder(jobs, new Map()))).toEqual(["a", "b", "c"]);
  });

  it("takes turns between submitters: many jobs of one do not hold back another's", () => {
    const jobs = [job("a1", "ann", 1), job("a2", "ann", 2), job("a3", "ann", 3), job("a4", "ann", 4), job("b1", "bob", 5), job("c1", "cy", 6), job("b2", "bob", 7)];
    expect(names(queueOrder(jobs, new Map()))).toEqual(["a1", "b1", "c1", "a2", "b2", "a3", "a4"]);
  });

  it("serves first the submitter served least recently, a new submitter before any served one", () => {
    const jobs = [job("a5", "ann", 50), job("b3", "bob", 60), job("d1", "dee", 70)];
    // ann was served at position 40, bob at 45, dee never.
    const served = new Map([["ann", 40], ["bob", 45]]);
    expect(nextJob(jobs, served)?.name).toBe("d1");
    expect(names(queueOrder(jobs, served))).toEqual(["d1", "a5", "b3"]);
  });

  it("breaks a tie between submitters never served by their oldest waiting job", () => {
    const jobs = [job("b1", "bob", 12), job("a1", "ann", 11), job("a2", "ann", 9)];
    expect(nextJob(jobs, new Map())?.name).toBe("a2");
  });
});
