// The IO context with its output store down, on the in-memory twins: the journal answers
// for runs that succeeded, a write fails as retryable, and no value reaches a log line.
import { InMemoryEventStore } from "@ephemera/eventstore";
import { UnavailableError } from "@ephemera/kit";
import { InMemoryOutputStore } from "./outputs.memory.js";
import { mentions } from "./outputs-contract.testkit.js";
import { journal, provisionRun, recordingLogger, seedRun, values, type LogLine } from "./scenario.testkit.js";
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
    handlers = new IOContextHandlers({ store, projections: projections(), outputs, logger: recorder.logger });
    j = journal(store);
    await j.publishPlugin();
    await j.startWorkflow(provisionRun);
    await handlers.putStepOutputs({ runId: provisionRun, token: "", outputs: values({ host: "db-1", password: SECRET }) });
    await j.succeed(provisionRun, { host: "db-1", password: SECRET });
    await j.dispatch(seedRun);
  });

  afterEach(() => {
    expect(lines.filter((l) => mentions(l, SECRET))).toEqual([]);
  });

  it("serves every valueFromStep input from the journal", async () => {
    outputs.setAvailable(false);
    const res = await handlers.getStepInputs({ runId: seedRun, token: "" });
    expect(res.inputs.map((i) => [i.name, i.present, i.value.toString()])).toEqual([["host", true, "db-1"], ["password", true, SECRET]]);
    expect(lines.filter((l) => l.msg?.includes("journal")).map((l) => l.level)).toEqual(["warn"]);
  });

  it("refuses outputs as retryable, naming the run and not the values, and takes them once the store is back", async () => {
    outputs.setAvailable(false);
    const err = await handlers.putStepOutputs({ runId: seedRun, token: "", outputs: values({ marker: SECRET }) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as Error).message).toContain(seedRun);
    expect(mentions(err, SECRET)).toBe(false);
    outputs.setAvailable(true);
    await handlers.putStepOutputs({ runId: seedRun, token: "", outputs: values({ marker: "m" }) });
    expect((await handlers.getStepOutputs({ runId: seedRun, token: "" })).outputs.map((o) => o.name)).toEqual(["marker"]);
  });

  it("gives back the outputs of a journaled run, and UNAVAILABLE for a run not journaled yet", async () => {
    await handlers.putStepOutputs({ runId: seedRun, token: "", outputs: values({ marker: "m" }) });
    outputs.setAvailable(false);
    const journaled = await handlers.getStepOutputs({ runId: provisionRun, token: "" });
    expect(journaled.outputs.map((o) => [o.name, o.value.toString()])).toEqual([["host", "db-1"], ["password", SECRET]]);
    await expect(handlers.getStepOutputs({ runId: seedRun, token: "" })).rejects.toBeInstanceOf(UnavailableError);
  });

  it("writes a value the store lost back from the journal once it is up", async () => {
    await outputs.dropSandbox("rk0001");
    await handlers.getStepInputs({ runId: seedRun, token: "" });
    expect([...(await outputs.read(provisionRun)).keys()]).toEqual(["host", "password"]);
  });
});
