// The runner on the in-memory ports with a driver twin whose steps end as told: what it
// journals comes from the step's report, never from the IO context (it has no client of it).
import * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, ev, journaledValues, runId, workflowId } from "@ephemera/events";
import { InMemoryClaimStore, InMemoryEventStore, InMemoryLogStore, InMemoryValueStore, InMemoryWorkQueue, NO_AGGREGATE } from "@ephemera/eventstore";
import type { StepReport } from "@ephemera/io-agent";
import { createLogger, waitFor } from "@ephemera/kit";
import type { StepDriver } from "./driver/driver.js";
import { Runner } from "./runner.js";
import { TEST_KEY } from "../../../test/support/keys.js";

/** A driver whose every step ends at once with the given report. */
const ending = (report: StepReport): StepDriver => ({
  name: "twin",
  run: () => ({ result: Promise.resolve(report), stop: () => undefined }),
});

const wf = workflowId("rk", "db", "create");
const run = runId(wf, "a", 1);

async function setup(driver: StepDriver, values = new InMemoryValueStore(), claims = new InMemoryClaimStore(), startGraceMs?: number) {
  const store = new InMemoryEventStore();
  const queue = new InMemoryWorkQueue<pb.StepDispatch>();
  const r = new Runner({
    cluster: "c", concurrency: 1, runnerId: "r1", driver, store, queue, logs: new InMemoryLogStore(),
    logger: createLogger("test", "silent"), cancelGraceMs: 100, heartbeatMs: 50, claims, claimTtlMs: 1000, values, now: () => performance.now(),
    signingKey: TEST_KEY, ...(startGraceMs === undefined ? {} : { startGraceMs }),
  });
  await store.append(Aggregates.workflow, wf, NO_AGGREGATE, [
    ev("ephemera.workflow.started.v1", { workflowId: wf, steps: [{ name: "a" }] }),
    ev("ephemera.workflow.step_dispatched.v1", { step: "a", runId: run, attempt: 1 }),
  ].map(encode), { source: "test" });
  return { runner: r, store, queue };
}

async function runOne(
  report: StepReport, values = new InMemoryValueStore(),
  { driver = ending(report), timeoutMs = 0, startGraceMs }: { driver?: StepDriver; timeoutMs?: number; startGraceMs?: number } = {},
) {
  const { runner, store, queue } = await setup(driver, values, undefined, startGraceMs);
  runner.start();
  await queue.publish("c", run, pb.StepDispatch.fromPartial({ runId: run, workflowId: wf, step: "a", attempt: 1, cluster: "c", timeoutMs }));
  const last = await waitFor(async () => {
    const events = (await store.read(Aggregates.steprun, run)).events.map(decode);
    const e = events.at(-1);
    return e && e.type !== "ephemera.steprun.started.v1" ? e : undefined;
  }, { what: "the result" });
  await runner.stop(100);
  return last;
}

describe("runner: the run's capability token", () => {
  const report: StepReport = { outcome: "succeeded", outputs: [] };
  /** A driver that notes the token each run got, and says whether it needs one. */
  const noting = (needs: boolean | undefined, tokens: string[]): StepDriver => ({
    name: "twin",
    run: (r) => { tokens.push(r.token); return { result: Promise.resolve(report), stop: () => undefined }; },
    ...(needs === undefined ? {} : { needsToken: () => needs }),
  });

  it("is signed for a driver that calls the IO context (or does not say), and left out for one that does not", async () => {
    for (const [needs, signed] of [[undefined, true], [true, true], [false, false]] as const) {
      const tokens: string[] = [];
      expect((await runOne(report, undefined, { driver: noting(needs, tokens) }))?.type).toBe("ephemera.steprun.succeeded.v1");
      expect(tokens).toHaveLength(1);
      // A signed token is a JWT: three dot-separated parts.
      expect(tokens[0]!.split(".").length === 3).toBe(signed);
      if (!signed) expect(tokens[0]).toBe("");
    }
  });
});

describe("runner: results from the step's report", () => {
  it("journals the outputs the report carries", async () => {
    const values = new InMemoryValueStore();
    const e = await runOne({ outcome: "succeeded", outputs: [
      { name: "host", size: 5, base64: Buffer.from("db-42").toString("base64") },
      { name: "key", size: 2, base64: Buffer.from([0xff, 0xfe]).toString("base64") },
    ] }, values);
    expect(e?.type).toBe("ephemera.steprun.succeeded.v1");
    if (e?.type !== "ephemera.steprun.succeeded.v1") return;
    // The event names each output by size and digest; the values are in the journal.
    expect(e.data.outputs.map((o) => [o.name, o.size, o.value.length])).toEqual([["host", 5, 0], ["key", 2, 0]]);
    const journaled = await journaledValues(values, e.data.runId, e.data.outputs);
    expect([...journaled].map(([n, v]) => [n, [...v]])).toEqual([["host", [...Buffer.from("db-42")]], ["key", [0xff, 0xfe]]]);
  });

  it("records nothing while the journal is away, and the success once it is back (values first, then the event)", async () => {
    const values = new InMemoryValueStore();
    values.setAvailable(false);
    const pending = runOne({ outcome: "succeeded", outputs: [{ name: "host", size: 5, base64: Buffer.from("db-42").toString("base64") }] }, values);
    // The record is retried with backoff (0.25 s doubling): let the first tries fail, then bring the journal back.
    await waitFor(() => values.failures > 0, { what: "a failed journal write" });
    values.setAvailable(true);
    const e = await pending;
    expect(e?.type).toBe("ephemera.steprun.succeeded.v1");
    if (e?.type !== "ephemera.steprun.succeeded.v1") return;
    expect((await journaledValues(values, e.data.runId, e.data.outputs)).get("host")?.toString()).toBe("db-42");
  });

  describe("a step's timeout counts while its program runs, not while its outputs are stored", () => {
    const report: StepReport = { outcome: "succeeded", outputs: [{ name: "host", size: 5, base64: Buffer.from("db-42").toString("base64") }] };
    /** A step that runs for `programMs`, then takes `storingMs` more to report (its outputs stored through a slow IO context). */
    const slowToStore = (programMs: number, storingMs: number, stops: number[]): StepDriver => ({
      name: "twin",
      run: () => {
        const exited = new Promise<void>((r) => setTimeout(r, programMs));
        return { exited, result: exited.then(() => new Promise<StepReport>((r) => setTimeout(() => r(report), storingMs))), stop: () => void stops.push(Date.now()) };
      },
    });

    it("records the success of a program that exited within its timeout, though storing its outputs ran past it", async () => {
      const stops: number[] = [];
      const e = await runOne(report, undefined, { driver: slowToStore(50, 600, stops), timeoutMs: 300 });
      expect(e?.type).toBe("ephemera.steprun.succeeded.v1");
      expect(stops).toEqual([]);
    });

    it("still stops a program that runs past its timeout (DeadlineExceeded)", async () => {
      const stops: number[] = [];
      const e = await runOne(report, undefined, { driver: slowToStore(600, 0, stops), timeoutMs: 300 });
      expect(e?.type === "ephemera.steprun.failed.v1" && e.data.failure?.reason).toBe("DeadlineExceeded");
      expect(stops).toHaveLength(1);
    });

    /** A step whose program begins once `begin` is called (its inputs fetched late), then runs `programMs`; a stop ends it at once. */
    const lateToBegin = (programMs: number, stops: number[]) => {
      let begin!: () => void;
      const began = new Promise<void>((r) => (begin = r));
      const driver: StepDriver = {
        name: "twin",
        run: () => {
          let stopped!: () => void;
          const stop = new Promise<void>((r) => (stopped = r));
          const exited = Promise.race([stop, began.then(() => new Promise<void>((r) => setTimeout(r, programMs)))]);
          return { began, exited, result: exited.then(() => report), stop: () => { stops.push(Date.now()); stopped(); } };
        },
      };
      return { driver, begin: () => begin() };
    };

    it("does not count the wait before its program began: inputs fetched late, then a program within its timeout, succeeds", async () => {
      const stops: number[] = [];
      const late = lateToBegin(100, stops);
      // Begun only after the timeout would have passed, counted from the run's start.
      const beginLate = setTimeout(late.begin, 500);
      const e = await runOne(report, undefined, { driver: late.driver, timeoutMs: 300 });
      clearTimeout(beginLate);
      expect(e?.type).toBe("ephemera.steprun.succeeded.v1");
      expect(stops).toEqual([]);
    });

    it("counts the timeout from the program's start: one that began and then ran past it is stopped", async () => {
      const stops: number[] = [];
      const late = lateToBegin(2_000, stops);
      const beginLate = setTimeout(late.begin, 200);
      const e = await runOne(report, undefined, { driver: late.driver, timeoutMs: 300 });
      clearTimeout(beginLate);
      expect(e?.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({
        reason: "DeadlineExceeded", message: "the step ran longer than its timeout of 300 ms",
      });
      expect(stops).toHaveLength(1);
    });

    it("stops a step whose program never begins at its timeout plus the start grace, saying so", async () => {
      const stops: number[] = [];
      const never = lateToBegin(0, stops);
      const started = Date.now();
      const e = await runOne(report, undefined, { driver: never.driver, timeoutMs: 300, startGraceMs: 400 });
      expect(e?.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({
        reason: "DeadlineExceeded", message: "the step's program did not start within its timeout of 300 ms and the start grace of 400 ms",
      });
      expect(stops).toHaveLength(1);
      expect(stops[0]! - started).toBeGreaterThanOrEqual(700);
    });
  });

  it("fails a step whose report does not hold what it says (DriverError)", async () => {
    const e = await runOne({ outcome: "succeeded", outputs: [{ name: "host", size: 9, base64: Buffer.from("db").toString("base64") }] });
    expect(e?.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({ reason: "DriverError", message: expect.stringContaining("host") });
  });

});

describe("runner: claims", () => {
  it("leaves a run alone while another runner's claim on it is live, and records nothing once that runner ended it", async () => {
    const claims = new InMemoryClaimStore();
    let ran = 0;
    const { runner: r, store, queue } = await setup({ name: "twin", run: () => { ran++; return { result: new Promise(() => undefined), stop: () => undefined }; } }, undefined, claims);
    const started = await store.append(Aggregates.steprun, run, NO_AGGREGATE, [ev("ephemera.steprun.started.v1", { runId: run, workflowId: wf, step: "a", attempt: 1, runner: "r0" })].map(encode), { source: "test" });
    const held = await claims.acquire(run, "r0", 60_000);
    if (!held.taken) throw new Error("expected to take the claim");
    r.start();
    await queue.publish("c", run, pb.StepDispatch.fromPartial({ runId: run, workflowId: wf, step: "a", attempt: 1, cluster: "c" }));
    await waitFor(() => r.running().includes(run), { what: "the delivery to be held" });
    // r0 ends the run and lets go of it: the held delivery ends with nothing recorded and nothing run.
    await store.append(Aggregates.steprun, run, started, [ev("ephemera.steprun.succeeded.v1", { runId: run, workflowId: wf, step: "a", durationMs: 5 })].map(encode), { source: "test" });
    await claims.release(held.claim);
    await waitFor(() => !r.running().includes(run), { what: "the held delivery to end" });
    expect((await store.read(Aggregates.steprun, run)).events.map((e) => e.type)).toEqual(["ephemera.steprun.started.v1", "ephemera.steprun.succeeded.v1"]);
    expect(ran).toBe(0);
    expect(await claims.read(run)).toBeUndefined();
    await r.stop(100);
  });
});

describe("runner: a cancel decided while the run is being taken", () => {
  it("drops the run before its script when the cancel lands after the first check, before the start", async () => {
    // The claim is held open until the test lets it go; the first check's read of the workflow is done by then.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => { open = resolve; });
    let entered = false;
    class GatedClaims extends InMemoryClaimStore {
      override async acquire(...args: Parameters<InMemoryClaimStore["acquire"]>) {
        entered = true;
        await gate;
        return super.acquire(...args);
      }
    }
    let ran = 0;
    const { runner: r, store, queue } = await setup({ name: "twin", run: () => { ran++; return { result: Promise.resolve({ outcome: "succeeded", outputs: [] }), stop: () => undefined }; } }, undefined, new GatedClaims());
    const reads: Array<Promise<unknown>> = [];
    const read = store.read.bind(store);
    jest.spyOn(store, "read").mockImplementation((aggregate, id) => {
      const p = read(aggregate, id);
      if (aggregate === Aggregates.workflow) reads.push(p);
      return p;
    });
    r.start();
    await queue.publish("c", run, pb.StepDispatch.fromPartial({ runId: run, workflowId: wf, step: "a", attempt: 1, cluster: "c" }));
    await waitFor(() => entered && reads.length > 0, { what: "the claim to be asked for and the workflow read" });
    await Promise.all(reads);
    const at = await store.read(Aggregates.workflow, wf);
    await store.append(Aggregates.workflow, wf, at, [ev("ephemera.workflow.cancel_requested.v1", { reason: "sandbox deleted", runIds: [run] })].map(encode), { source: "test" });
    open();
    const events = await waitFor(async () => {
      const e = (await store.read(Aggregates.steprun, run)).events.map(decode);
      return e.length > 1 ? e : undefined;
    }, { what: "the run to be recorded" });
    expect(events.map((e) => e?.type)).toEqual(["ephemera.steprun.started.v1", "ephemera.steprun.failed.v1"]);
    const failed = events[1];
    if (failed?.type !== "ephemera.steprun.failed.v1") throw new Error("expected a failure");
    expect(failed.data.failure?.reason).toBe("Cancelled");
    expect(failed.data.failure?.message).toMatch(/^dropped: the workflow was cancelled \(sandbox deleted\)/);
    expect(ran).toBe(0);
    await r.stop(100);
  });
});

describe("runner: a result left on disk", () => {
  /** A driver that counts its runs and its looks at the disk, where `onDisk` (if any) is found. */
  const counting = (onDisk?: StepReport) => {
    const calls = { run: 0, recover: 0 };
    const driver: StepDriver = {
      name: "twin",
      run: () => {
        calls.run++;
        return { result: Promise.resolve({ outcome: "succeeded", outputs: [] }), stop: () => undefined };
      },
      recover: async () => {
        calls.recover++;
        return onDisk;
      },
    };
    return { driver, calls };
  };

  it("is not looked for when this runner's append started the run: nothing can have run before", async () => {
    const { driver, calls } = counting();
    const e = await runOne({ outcome: "succeeded", outputs: [] }, undefined, { driver });
    expect(e?.type).toBe("ephemera.steprun.succeeded.v1");
    expect(calls).toEqual({ run: 1, recover: 0 });
  });

  it("is recorded, without running the step again, for a run this runner had started before", async () => {
    const { driver, calls } = counting({ outcome: "failed", reason: "Error", message: "exit 3", exitCode: 3 });
    const { runner, store, queue } = await setup(driver);
    await store.append(Aggregates.steprun, run, NO_AGGREGATE, [
      ev("ephemera.steprun.started.v1", { runId: run, workflowId: wf, step: "a", attempt: 1, driver: "twin", runner: "r1" }),
    ].map(encode), { source: "test" });
    runner.start();
    await queue.publish("c", run, pb.StepDispatch.fromPartial({ runId: run, workflowId: wf, step: "a", attempt: 1, cluster: "c" }));
    const last = await waitFor(async () => {
      const e = (await store.read(Aggregates.steprun, run)).events.map(decode).at(-1);
      return e?.type === "ephemera.steprun.failed.v1" ? e : undefined;
    }, { what: "the result found on disk" });
    await runner.stop(100);
    expect(last.data.failure?.message).toBe("exit 3");
    expect(calls).toEqual({ run: 0, recover: 1 });
  });
});
