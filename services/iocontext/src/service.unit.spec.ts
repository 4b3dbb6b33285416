// The IO context with its output store down, on the in-memory twins: the journal answers
// for runs that succeeded, a write fails as retryable, and no value reaches a log line.
import { InMemoryEventStore, InMemoryValueStore } from "@ephemera/eventstore";
import { ConflictError, PermissionDeniedError, UnauthenticatedError, UnavailableError, signCapability, signingKey } from "@ephemera/kit";
import { InMemoryOutputStore } from "./outputs.memory.js";
import { mentions } from "./outputs-contract.testkit.js";
import { TEST_KEY } from "../../../test/support/keys.js";
import { journal, provisionRun, recordingLogger, seedRun, tokenOf, values, type LogLine } from "./scenario.testkit.js";
import { IOContextHandlers } from "./service.js";
import { projections } from "./state.js";

const SECRET = "pw-7f3a9c";

describe("IO context while the output store is down", () => {
  let outputs: InMemoryOutputStore;
  let handlers: IOContextHandlers;
  let lines: LogLine[];
  let j: ReturnType<typeof journal>;

  beforeEach(async () => {
    const store = new InMemoryEventStore();
    outputs = new InMemoryOutputStore();
    const recorder = recordingLogger();
    lines = recorder.lines;
    const journalValues = new InMemoryValueStore();
    handlers = new IOContextHandlers({ store, projections: projections(), outputs, values: journalValues, logger: recorder.logger, keys: [TEST_KEY] });
    j = journal(store, journalValues);
    await j.publishPlugin();
    await j.startWorkflow(provisionRun);
    await handlers.putStepOutputs({ runId: provisionRun, token: await tokenOf(provisionRun), outputs: values({ host: "db-1", password: SECRET }) });
    await j.succeed(provisionRun, { host: "db-1", password: SECRET });
    await j.dispatch(seedRun);
  });

  afterEach(() => {
    expect(lines.filter((l) => mentions(l, SECRET))).toEqual([]);
  });

  it("serves every valueFromStep input from the journal", async () => {
    outputs.setAvailable(false);
    const res = await handlers.getStepInputs({ runId: seedRun, token: await tokenOf(seedRun) });
    expect(res.inputs.map((i) => [i.name, i.present, i.value.toString()])).toEqual([["host", true, "db-1"], ["password", true, SECRET]]);
    expect(lines.filter((l) => l.msg?.includes("journal")).map((l) => l.level)).toEqual(["warn"]);
  });

  it("takes outputs while the store is down without caching them (the runner journals them), warning with the run and not the values", async () => {
    outputs.setAvailable(false);
    await handlers.putStepOutputs({ runId: seedRun, token: await tokenOf(seedRun), outputs: values({ marker: SECRET }) });
    const warned = lines.filter((l) => l.msg === "output store unavailable: step outputs not cached");
    expect(warned.map((l) => (l.fields as { runId: string }).runId)).toEqual([seedRun]);
    outputs.setAvailable(true);
    expect((await outputs.read(seedRun)).size).toBe(0);
  });

  it("gives back the outputs of a journaled run, and UNAVAILABLE for a run not journaled yet", async () => {
    await handlers.putStepOutputs({ runId: seedRun, token: await tokenOf(seedRun), outputs: values({ marker: "m" }) });
    outputs.setAvailable(false);
    const journaled = await handlers.getStepOutputs({ runId: provisionRun, token: await tokenOf(provisionRun) });
    expect(journaled.outputs.map((o) => [o.name, o.value.toString()])).toEqual([["host", "db-1"], ["password", SECRET]]);
    await expect(handlers.getStepOutputs({ runId: seedRun, token: await tokenOf(seedRun) })).rejects.toBeInstanceOf(UnavailableError);
  });

  it("writes a value the store lost back from the journal once it is up", async () => {
    await outputs.dropSandbox("rk0001");
    await handlers.getStepInputs({ runId: seedRun, token: await tokenOf(seedRun) });
    expect([...(await outputs.read(provisionRun)).keys()]).toEqual(["host", "password"]);
  });
});

describe("IO context capability tokens and write-once outputs", () => {
  let store: InMemoryEventStore;
  let outputs: InMemoryOutputStore;
  let handlers: IOContextHandlers;
  let lines: LogLine[];
  let j: ReturnType<typeof journal>;

  beforeEach(async () => {
    store = new InMemoryEventStore();
    outputs = new InMemoryOutputStore();
    const recorder = recordingLogger();
    lines = recorder.lines;
    const journalValues = new InMemoryValueStore();
    handlers = new IOContextHandlers({
      store, projections: projections(), outputs, values: journalValues, logger: recorder.logger, keys: [TEST_KEY],
    });
    j = journal(store, journalValues);
    await j.publishPlugin();
    await j.startWorkflow(provisionRun);
  });

  afterEach(() => {
    expect(lines.filter((l) => mentions(l, SECRET))).toEqual([]);
  });

  const methods = (token: string) => ({
    GetStepInputs: () => handlers.getStepInputs({ runId: provisionRun, token }),
    PutStepOutputs: () => handlers.putStepOutputs({ runId: provisionRun, token, outputs: values({ host: "h" }) }),
    GetStepOutputs: () => handlers.getStepOutputs({ runId: provisionRun, token }),
  });

  it("refuses a missing, forged or expired token on every method, logging the run id and never the token", async () => {
    const good = await tokenOf(provisionRun);
    const forged = good.slice(0, -4) + (good.endsWith("AAAA") ? "BBBB" : "AAAA");
    const expired = await signCapability(TEST_KEY, { run: provisionRun, inputs: [], outputs: ["host"] }, 1_000, new Date(Date.now() - 3_600_000));
    const otherKey = await signCapability(signingKey(Buffer.from("x".repeat(32))), { run: provisionRun, inputs: [], outputs: ["host"] }, 60_000);
    for (const [what, token] of [["missing", ""], ["forged", forged], ["expired", expired], ["another key", otherKey]] as const) {
      for (const [method, call] of Object.entries(methods(token))) {
        const err = await call().catch((e: unknown) => e);
        expect({ what, method, err }).toEqual({ what, method, err: expect.any(UnauthenticatedError) });
        if (token) expect((err as Error).message).not.toContain(token);
      }
    }
    const refused = lines.filter((l) => l.msg === "IO context call refused");
    expect(refused).toHaveLength(12);
    expect(refused.every((l) => (l.fields as { runId: string }).runId === provisionRun)).toBe(true);
    expect(JSON.stringify(refused)).not.toContain(good.split(".")[2]);
  });

  it("refuses another run's token, and an input or output the token does not name", async () => {
    const theirs = await tokenOf(seedRun);
    for (const call of Object.values(methods(theirs))) await expect(call()).rejects.toBeInstanceOf(PermissionDeniedError);
    const narrow = await signCapability(TEST_KEY, { run: provisionRun, inputs: [], outputs: ["password"] }, 60_000);
    await expect(handlers.putStepOutputs({ runId: provisionRun, token: narrow, outputs: values({ host: "h" }) }))
      .rejects.toThrow(/output "host" is not one its token allows/);
    await j.succeed(provisionRun, { host: "db-1", password: SECRET });
    await j.dispatch(seedRun);
    const blind = await signCapability(TEST_KEY, { run: seedRun, inputs: ["step:provision.host"], outputs: ["marker"] }, 60_000);
    await expect(handlers.getStepInputs({ runId: seedRun, token: blind })).rejects.toThrow(/input "password" \(step:provision.password\) is not one its token allows/);
  });

  it("takes a run's outputs once while it runs: the same values again are fine, other values or a write after its end are refused", async () => {
    const token = await tokenOf(provisionRun);
    await handlers.putStepOutputs({ runId: provisionRun, token, outputs: values({ host: "db-1", password: SECRET }) });
    await handlers.putStepOutputs({ runId: provisionRun, token, outputs: values({ host: "db-1" }) });
    const changed = await handlers.putStepOutputs({ runId: provisionRun, token, outputs: values({ host: "evil" }) }).catch((e: unknown) => e);
    expect(changed).toBeInstanceOf(ConflictError);
    expect((changed as Error).message).toMatch(/already wrote "host": outputs are written once/);
    await j.succeed(provisionRun, { host: "db-1", password: SECRET });
    const late = await handlers.putStepOutputs({ runId: provisionRun, token, outputs: values({ password: "other" }) }).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(ConflictError);
    expect((late as Error).message).toMatch(/has ended: its outputs can no longer change/);
    expect((await handlers.getStepOutputs({ runId: provisionRun, token })).outputs.map((o) => [o.name, o.value.toString()]))
      .toEqual([["host", "db-1"], ["password", SECRET]]);
  });

  it("takes a write after the run's end only as a copy of what it journaled, and caches it", async () => {
    // The process driver caches a step's outputs while the runner records the result: its write may come after.
    const token = await tokenOf(provisionRun);
    await j.succeed(provisionRun, { host: "db-1", password: SECRET });
    expect((await outputs.read(provisionRun)).size).toBe(0);
    await handlers.putStepOutputs({ runId: provisionRun, token, outputs: values({ host: "db-1", password: SECRET }) });
    expect([...(await outputs.read(provisionRun))].map(([name, value]) => [name, value.toString()])).toEqual([["host", "db-1"], ["password", SECRET]]);
    const other = await handlers.putStepOutputs({ runId: provisionRun, token, outputs: values({ host: "db-2" }) }).catch((e: unknown) => e);
    expect(other).toBeInstanceOf(ConflictError);
    expect((other as Error).message).toMatch(/has ended: its outputs can no longer change/);
    // A run that ended with nothing journaled (it failed) takes nothing.
    await j.dispatch(seedRun);
    await j.fail(seedRun);
    const failed = await handlers.putStepOutputs({ runId: seedRun, token: await tokenOf(seedRun), outputs: values({ marker: "m" }) }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(ConflictError);
    expect((await outputs.read(seedRun)).size).toBe(0);
  });
});
