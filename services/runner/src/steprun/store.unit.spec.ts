import * as pb from "@ephemera/proto";
import { Aggregates, decode } from "@ephemera/events";
import { InMemoryEventStore } from "@ephemera/eventstore";
import type { StepRunCommand } from "./decide.js";
import { executeStepRun } from "./store.js";

const RUN = "rk1.db.create.provision.1";
const dispatch = pb.StepDispatch.fromPartial({ runId: RUN, workflowId: "rk1.db.create", step: "provision", attempt: 1, cluster: "local" });
const start = (runner: string): StepRunCommand => ({ type: "start", dispatch, driver: "process", runner });
const succeed: StepRunCommand = { type: "succeed", outputs: [], durationMs: 5 };

/** The in-memory store, counting its reads of the step run. */
function counting() {
  const store = new InMemoryEventStore();
  let reads = 0;
  const read = store.read.bind(store);
  store.read = async (aggregate, id) => {
    if (aggregate === Aggregates.steprun) reads++;
    return read(aggregate, id);
  };
  return { store, reads: () => reads };
}

const types = async (store: InMemoryEventStore) => (await store.read(Aggregates.steprun, RUN)).events.map((e) => decode(e)!.type);

describe("executeStepRun from what the caller knows", () => {
  it("appends without reading when the run is as the caller's own last append left it", async () => {
    const { store, reads } = counting();
    const started = await executeStepRun(store, RUN, start("r1"), "test");
    expect(reads()).toBe(1);
    await executeStepRun(store, RUN, succeed, "test", {}, 5, started.known);
    expect(reads()).toBe(1);
    expect(await types(store)).toEqual(["ephemera.steprun.started.v1", "ephemera.steprun.succeeded.v1"]);
  });

  it("reads and decides again when another wrote the run since: the append over a stale revision is refused", async () => {
    const { store, reads } = counting();
    const mine = await executeStepRun(store, RUN, start("r1"), "test");
    // A runner that took the run over (this one's claim expired) records it lost.
    await executeStepRun(store, RUN, start("r2"), "test");
    expect(await types(store)).toEqual(["ephemera.steprun.started.v1", "ephemera.steprun.failed.v1"]);
    const before = reads();
    const late = await executeStepRun(store, RUN, succeed, "test", {}, 5, mine.known);
    expect(reads() - before).toBe(1);
    expect(late.appended).toEqual([]); // finished already: nothing to do
    expect(await types(store)).toEqual(["ephemera.steprun.started.v1", "ephemera.steprun.failed.v1"]);
  });

  it("tried again with the same knowledge after its append landed, the commit is a duplicate, not a second one", async () => {
    const { store } = counting();
    const started = await executeStepRun(store, RUN, start("r1"), "test");
    await executeStepRun(store, RUN, succeed, "test", {}, 5, started.known);
    // The answer was lost: the caller tries again from what it knew.
    const again = await executeStepRun(store, RUN, succeed, "test", {}, 5, started.known);
    expect(again.known).toBeUndefined();
    expect(await types(store)).toEqual(["ephemera.steprun.started.v1", "ephemera.steprun.succeeded.v1"]);
  });
});
