// The resource outputs a sandbox's forks read, fetched for the outputs Secret: each from
// the latest successful run of its step in the resource's create workflow, through the
// output journal (values never pass through an event unredacted, nor through a log).
import { Aggregates, decode, journaledValues, workflowId, type ValueJournal } from "@ephemera/events";
import type { EventStore } from "@ephemera/eventstore";
import { outputKey } from "./build.js";

export { outputsRead } from "./build.js";

export class OutputMissingError extends Error {}

/** The values, keyed as the outputs Secret keys them (`<resource>.<step>.<output>`). */
export async function readOutputs(store: EventStore, values: ValueJournal, routingKey: string, wanted: Array<{ resource: string; key: string }>): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  const runsOf = new Map<string, Map<string, string>>();
  for (const { resource, key } of wanted) {
    let runs = runsOf.get(resource);
    if (!runs) {
      runs = new Map();
      for (const recorded of (await store.read(Aggregates.workflow, workflowId(routingKey, resource, "create"))).events) {
        const e = decode(recorded);
        if (e?.type === "ephemera.workflow.step_succeeded.v1") runs.set(e.data.step, e.data.runId);
      }
      runsOf.set(resource, runs);
    }
    const dot = key.indexOf(".");
    const [step, name] = [key.slice(0, dot), key.slice(dot + 1)];
    const runId = runs.get(step);
    let value: Buffer | undefined;
    if (runId) {
      for (const recorded of (await store.read(Aggregates.steprun, runId)).events) {
        const e = decode(recorded);
        if (e?.type === "ephemera.steprun.succeeded.v1") value = (await journaledValues(values, runId, e.data.outputs, [name])).get(name);
      }
    }
    if (value === undefined) throw new OutputMissingError(`resource ${resource} has no output ${key} (its step ${step} ${runId ? "did not write it" : "has not succeeded"})`);
    out.set(outputKey(resource, key), value);
  }
  return out;
}
