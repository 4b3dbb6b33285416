// A plugin whose second step reads an output of the first, and what the scheduler and the
// runner journal for it, for tests of the IO context on any EventStore.
import * as pb from "@ephemera/proto";
import { Aggregates, encode, ev, journalOutputs, runId, workflowId, type DomainEvent, type ValueJournal } from "@ephemera/events";
import type { EventStore } from "@ephemera/eventstore";
import type { Logger } from "@ephemera/kit";
import { tokenForStep } from "../../../test/support/keys.js";

export const RK = "rk0001";
export const createWorkflow = workflowId(RK, "db", "create");
export const provisionRun = runId(createWorkflow, "provision", 1);
export const seedRun = runId(createWorkflow, "seed", 1);

export const spec = pb.ResourcePluginSpec.fromPartial({
  create: [
    {
      name: "provision",
      script: "#!/bin/sh\n",
      outputs: [{ name: "host", valueFromPath: "/tmp/host" }, { name: "password", valueFromPath: "/tmp/password" }],
    },
    {
      name: "seed",
      script: "#!/bin/sh\n",
      inputs: [
        { name: "host", valueFromStep: { name: "provision", output: "host" } },
        { name: "password", valueFromStep: { name: "provision", output: "password" }, as: { env: "", path: "/work/pw" } },
      ],
      outputs: [{ name: "marker", valueFromPath: "/tmp/marker" }],
    },
  ],
});

/** The token the runner gives a run of this spec's create steps. */
export const tokenOf = (run: string) => tokenForStep(run, spec.create.find((s) => s.name === run.split(".")[3])!);

export const values = (outputs: Record<string, string>): pb.OutputValue[] =>
  Object.entries(outputs).map(([name, v]) => ({ name, value: Buffer.from(v), size: Buffer.byteLength(v), sha256: "" }));

/** Appends what the other services would have written, on the store (and output journal) the IO context reads. */
export function journal(store: EventStore, journalValues: ValueJournal) {
  const append = async (aggregate: string, id: string, ...events: DomainEvent[]) => {
    const current = await store.read(aggregate, id);
    await store.append(aggregate, id, current, events.map(encode), { source: "test" });
  };
  const stepOf = (run: string) => run.split(".")[3]!;
  /** A runner took the run: it may write its outputs until it ends. */
  const started = (run: string) =>
    append(Aggregates.steprun, run, ev("ephemera.steprun.started.v1", { runId: run, workflowId: createWorkflow, step: stepOf(run), attempt: 1 }));
  return {
    append,
    publishPlugin: () =>
      append(Aggregates.plugin, "hello-db", ev("ephemera.plugin.published.v1", { name: "hello-db", version: "1.0.0", spec })),
    startWorkflow: (...runs: string[]) =>
      append(Aggregates.workflow, createWorkflow,
        ev("ephemera.workflow.started.v1", {
          workflowId: createWorkflow, sandbox: "feature-x", routingKey: RK, resource: "db", phase: "create",
          plugin: "hello-db", version: "1.0.0", cluster: "local", params: {},
        }),
        ...runs.map((r) => ev("ephemera.workflow.step_dispatched.v1", { step: stepOf(r), runId: r, attempt: 1 })))
        .then(async () => { for (const r of runs) await started(r); }),
    dispatch: async (run: string) => {
      await append(Aggregates.workflow, createWorkflow, ev("ephemera.workflow.step_dispatched.v1", { step: stepOf(run), runId: run, attempt: 1 }));
      await started(run);
    },
    /** The runner's record of a failure (nothing journaled). */
    fail: (run: string) =>
      append(Aggregates.steprun, run, ev("ephemera.steprun.failed.v1", { runId: run, workflowId: createWorkflow, step: stepOf(run), durationMs: 1 })),
    /** The runner's result with the outputs journaled, then the scheduler's record of it. */
    succeed: async (run: string, outputs: Record<string, string>) => {
      const step = stepOf(run);
      if ((await store.read(Aggregates.steprun, run)).events.length === 0) await started(run);
      const journaled = await journalOutputs(journalValues, run, values(outputs));
      await append(Aggregates.steprun, run, ev("ephemera.steprun.succeeded.v1", { runId: run, workflowId: createWorkflow, step, outputs: journaled }));
      await append(Aggregates.workflow, createWorkflow, ev("ephemera.workflow.step_succeeded.v1", { step, runId: run }));
    },
  };
}

export interface LogLine { level: string; fields: unknown; msg: string | undefined }

/** A logger that keeps every line, so a test can look for values where only names and sizes belong. */
export function recordingLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const at = (level: string) => (fields: unknown, msg?: string) => { lines.push({ level, fields, msg }); };
  const logger = {
    trace: at("trace"), debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), fatal: at("fatal"),
    child: () => logger,
  };
  return { logger: logger as unknown as Logger, lines };
}
