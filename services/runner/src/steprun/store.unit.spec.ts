import * as pb from "@ephemera/proto";
import { Aggregates, decode } from "@ephemera/events";
import { InMemoryEventStore } from "@ephemera/eventstore";
import type { StepRunCommand } from "./decide.js";
import { executeStepRun, readStepRun } from "./store.js";

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
  it("starts over what it only read: another runner's start since is a conflict, not taken for this one's commit", async () => {
    const { store, reads } = counting();
    // Read beside the claim, while another runner still held the run.
    const read = await readStepRun(store, RUN);
    // That runner started it over the same revision, and let the claim go.
    await executeStepRun(store, RUN, start("r2"), "test");
    const before = reads();
    const mine = await executeStepRun(store, RUN, start("r1"), "test", {}, 5, read);
    // Refused over the stale revision, read again, decided again: r2 is gone, its run is lost.
    expect(reads() - before).toBe(1);
    expect(mine.state.status).toBe("failed");
    expect(await types(store)).toEqual(["ephemera.steprun.started.v1", "ephemera.steprun.failed.v1"]);
    const started = decode((await store.read(Aggregates.steprun, RUN)).events[0]!);
    expect(started?.type === "ephemera.steprun.started.v1" && started.data.runner).toBe("r2");
  });

  it("starts over a read still current with no read of its own", async () => {
    const { store, reads } = counting();
    const read = await readStepRun(store, RUN);
    const before = reads();
    const mine = await executeStepRun(store, RUN, start("r1"), "test", {}, 5, read);
    expect(reads() - before).toBe(0);
    expect(mine.known?.state.status).toBe("started");
    expect(await types(store)).toEqual(["ephemera.steprun.started.v1"]);
  });
});
