// A dispatch that carries its plan (the scheduler's DispatchPlan) is run without a call to
// the IO context: its params from the plan, a producing step's outputs from what this driver
// held of the run it ran (only when the digest is the journaled one) or else from the output
// journal. The IO context here is a port nobody listens on: a call to it would fail the step.
// A dispatch without a plan still asks it. Real launcher; the journal is the in-memory twin.
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import { mkdtemp, rm } from "node:fs/promises";
import * as pb from "@ephemera/proto";
import { sha256Hex, valueKey, runId as makeRunId, workflowId } from "@ephemera/events";
import { InMemoryValueStore } from "@ephemera/eventstore";
import { createLogger, grpc, waitFor } from "@ephemera/kit";
import type { StepReport } from "@ephemera/io-agent";
import { detectIsolation } from "./isolation.js";
import { ProcessDriver, type InputsFrom } from "./process.js";

const LAUNCHER = join(resolve(__dirname, "..", "..", "..", ".."), "services/runner/dist/ephemera-launch");

/** A port that refuses connections: taken, then let go. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address() as { port: number };
  await new Promise<void>((ok) => server.close(() => ok()));
  return port;
}

const wf = workflowId("pl", "db", "create");
const producer = makeRunId(wf, "make", 1);

/** The producing step: writes `value` as its output `host`. */
const make = (value: string) => pb.DispatchPlan.fromPartial({
  script: `#!/bin/sh\nprintf '${value}' > /tmp/host\n`, inputs: [], outputs: [{ name: "host", valueFromPath: "/tmp/host" }],
});

/** The reading step: echoes its inputs (env and file) into its output `seen`. */
const readPlan = (inputs: Array<Partial<pb.DispatchInput>>) => pb.DispatchPlan.fromPartial({
  script: "#!/bin/sh\nprintf '%s|%s|%s|%s' \"$HOST\" \"$(cat /tmp/in/host 2>/dev/null)\" \"$REGION\" \"${ZONE-unset}\" > /tmp/seen\n",
  inputs: inputs.map((i) => pb.DispatchInput.fromPartial(i)),
  outputs: [{ name: "seen", valueFromPath: "/tmp/seen" }],
});

const hostFrom = (runId: string, sha256: string): Partial<pb.DispatchInput> =>
  ({ name: "host", env: "HOST", path: "/tmp/in/host", step: "make", output: "host", runId, sha256 });
const params: Array<Partial<pb.DispatchInput>> = [{ name: "region", env: "REGION", param: "eu-1" }, { name: "zone", env: "ZONE" }];

const dispatch = (step: string, plan: pb.DispatchPlan | undefined) => pb.StepDispatch.fromPartial({
  runId: makeRunId(wf, step, 1), workflowId: wf, sandbox: "sb-pl", routingKey: "pl", resource: "db", phase: "create", step,
  attempt: 1, cluster: "local", plugin: "planned", version: "1.0.0", ...(plan ? { plan } : {}),
});

const output = (report: StepReport, name: string) => {
  if (report.outcome !== "succeeded") throw new Error(`expected a success, got ${JSON.stringify(report)}`);
  return Buffer.from(report.outputs.find((o) => o.name === name)?.base64 ?? "", "base64").toString();
};

describe("the process driver runs a planned dispatch without the IO context", () => {
  let workdir: string;
  let journal: InMemoryValueStore;
  let driver: ProcessDriver;
  let asked: InputsFrom[];
  /** Keys the driver read from the journal. */
  let read: string[];
  /** The IO-context methods the driver called (each call is seen here, answered or not). */
  let called: string[];

  beforeEach(async () => {
    workdir = await mkdtemp(join("/var/tmp", "ephemera-planned-"));
    journal = new InMemoryValueStore();
    asked = [];
    read = [];
    called = [];
    const calls: grpc.Interceptor = (options, nextCall) => {
      called.push(options.method_definition.path.split("/").at(-1)!);
      return new grpc.InterceptingCall(nextCall(options));
    };
    const counted = { get: (key: string, sha256: string) => { read.push(key); return journal.get(key, sha256); } };
    driver = new ProcessDriver({
      workdir, iocontext: `127.0.0.1:${await closedPort()}`, launcher: LAUNCHER, isolation: await detectIsolation(workdir, LAUNCHER),
      logger: createLogger("test", "silent"), hostEnv: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" },
      values: counted, onInputs: (from) => asked.push(from), iocontextInterceptors: [calls], ioRetry: { totalMs: 5_000, baseDelayMs: 20, maxDelayMs: 50 },
    });
  });

  afterEach(async () => {
    driver.close();
    await rm(workdir, { recursive: true, force: true });
  });

  const run = (d: pb.StepDispatch, log: string[] = []) =>
    driver.run({ dispatch: d, token: "", env: {}, onLog: (c) => log.push(c.toString()) }).result;

  it("hands a step its params and the output of the run this driver ran, from memory, with no journal read", async () => {
    expect(output(await run(dispatch("make", make("db-7"))), "host")).toBe("db-7");
    // The journal does not hold it: only memory can serve it.
    const seen = await run(dispatch("use", readPlan([hostFrom(producer, sha256Hex(Buffer.from("db-7"))), ...params])));
    expect(output(seen, "seen")).toBe("db-7|db-7|eu-1|unset");
    expect(read).toEqual([]);
    expect(asked).toEqual(["dispatch", "dispatch"]);
    // Nor are the outputs cached there: a planned dispatch's readers never ask it.
    expect(called).toEqual([]);
  }, 30_000);

  it("reads the journal when memory holds another value than the journaled one, or none", async () => {
    await run(dispatch("make", make("db-stale")));
    await journal.put(valueKey(producer, "host"), Buffer.from("db-8"));
    const seen = await run(dispatch("use", readPlan([hostFrom(producer, sha256Hex(Buffer.from("db-8")))])));
    expect(output(seen, "seen")).toBe("db-8|db-8||unset");
    expect(read).toEqual([valueKey(producer, "host")]);
    expect(asked).toEqual(["dispatch", "journal"]);

    // A run this driver never ran: the journal, once; the value is then held for the next reader.
    const other = makeRunId(wf, "make", 2);
    await journal.put(valueKey(other, "host"), Buffer.from("db-9"));
    for (const step of ["use2", "use3"]) {
      expect(output(await run(dispatch(step, readPlan([hostFrom(other, sha256Hex(Buffer.from("db-9")))]))), "seen")).toBe("db-9|db-9||unset");
    }
    expect(read).toEqual([valueKey(producer, "host"), valueKey(other, "host")]);
  }, 30_000);

  it("waits out a journal that is away, saying so in the step's log", async () => {
    await journal.put(valueKey(producer, "host"), Buffer.from("db-7"));
    journal.setAvailable(false);
    const log: string[] = [];
    const seen = run(dispatch("use", readPlan([hostFrom(producer, sha256Hex(Buffer.from("db-7")))])), log);
    await waitFor(() => journal.failures > 0, { timeoutMs: 10_000, intervalMs: 5, what: "the driver to meet the journal's outage" });
    journal.setAvailable(true);
    expect(output(await seen, "seen")).toBe("db-7|db-7||unset");
    expect(log.join("")).toContain("cannot read the step's inputs from the output journal");
  }, 30_000);

  it("fails the step (InputUnavailable), naming the value, when the journal has none or another than the journaled one", async () => {
    const report = await run(dispatch("use", readPlan([hostFrom(producer, sha256Hex(Buffer.from("db-7")))])));
    expect(report).toMatchObject({ outcome: "failed", reason: "InputUnavailable" });
    expect(report.outcome === "failed" && report.message).toContain(`the journaled value of ${valueKey(producer, "host")} is missing`);
    // A value that is not the journaled one is refused the same way, not handed to the script.
    await journal.put(valueKey(producer, "host"), Buffer.from("db-evil"));
    const forged = await run(dispatch("use2", readPlan([hostFrom(producer, sha256Hex(Buffer.from("db-7")))])));
    expect(forged).toMatchObject({ outcome: "failed", reason: "InputUnavailable" });
    expect(forged.outcome === "failed" && forged.message).toContain(valueKey(producer, "host"));
    expect(forged.outcome === "failed" && forged.message).not.toContain("db-evil");
    expect(asked).toEqual([]);
  }, 30_000);

  it("reads two outputs of one run in one go, and leaves an input whose producer never ran without a value", async () => {
    const two = pb.DispatchPlan.fromPartial({
      script: "#!/bin/sh\nprintf '%s|%s|%s' \"$HOST\" \"$PORT\" \"${GONE-unset}\" > /tmp/seen\n",
      inputs: [
        { name: "host", env: "HOST", step: "make", output: "host", runId: producer, sha256: sha256Hex(Buffer.from("db-7")) },
        { name: "port", env: "PORT", step: "make", output: "port", runId: producer, sha256: sha256Hex(Buffer.from("5432")) },
        // A create step a delete step reads, which never ran: planned with no run.
        { name: "gone", env: "GONE", step: "never", output: "v" },
      ],
      outputs: [{ name: "seen", valueFromPath: "/tmp/seen" }],
    });
    await journal.put(valueKey(producer, "host"), Buffer.from("db-7"));
    await journal.put(valueKey(producer, "port"), Buffer.from("5432"));
    expect(output(await run(dispatch("use", two)), "seen")).toBe("db-7|5432|unset");
    expect(read.sort()).toEqual([valueKey(producer, "host"), valueKey(producer, "port")]);
    expect(asked).toEqual(["journal"]);
    // Both held now: the next reader reads nothing.
    expect(output(await run(dispatch("use2", two)), "seen")).toBe("db-7|5432|unset");
    expect(read).toHaveLength(2);
    expect(called).toEqual([]);
  }, 30_000);

  it("needs no capability token for a planned dispatch, and one for a dispatch without a plan or a driver without the journal", () => {
    expect(driver.needsToken(dispatch("make", make("db-7")))).toBe(false);
    expect(driver.needsToken(dispatch("old", undefined))).toBe(true);
    const journalless = new ProcessDriver({
      workdir, iocontext: "127.0.0.1:1", launcher: LAUNCHER, isolation: { flags: [], pidNamespace: false, netNamespace: false },
      logger: createLogger("test", "silent"), hostEnv: {},
    });
    expect(journalless.needsToken(dispatch("make", make("db-7")))).toBe(true);
  });

  it("asks the IO context for a dispatch without a plan (here: nobody answers)", async () => {
    const report = await run(dispatch("old", undefined));
    expect(report).toMatchObject({ outcome: "failed", reason: "DriverError" });
    expect(report.outcome === "failed" && report.message).toContain("cannot get the step's inputs");
    expect(asked).toEqual([]);
    expect(called.length).toBeGreaterThan(0);
    expect(new Set(called)).toEqual(new Set(["GetStepInputs"]));
  }, 30_000);
});
