// Runs a StepRun command against the event store: read the aggregate, decide, append
// with the revision read; on a concurrent append, read again and decide again.
import { Aggregates, decode, encode } from "@ephemera/events";
import { commitIdOf, type EventStore } from "@ephemera/eventstore";
import { delay, isConcurrencyError } from "@ephemera/kit";
import { decide, evolve, initialStepRun, type StepRunCommand, type StepRunEvent, type StepRunState } from "./decide.js";

export interface StepRunResult {
  /** What this command appended (empty: nothing to do, e.g. the result was already recorded). */
  appended: StepRunEvent[];
  state: StepRunState;
}

export async function readStepRun(store: EventStore, runId: string) {
  const read = await store.read(Aggregates.steprun, runId);
  let state = initialStepRun();
  for (const r of read.events) {
    const e = decode(r);
    if (e) state = evolve(state, e);
  }
  return { state, expected: { revision: read.revision, version: read.version } };
}

export interface Cause { correlationId?: string; causationId?: string }

export async function executeStepRun(
  store: EventStore, runId: string, command: StepRunCommand, source: string, cause: Cause = {}, attempts = 5,
): Promise<StepRunResult> {
  for (let attempt = 1; ; attempt++) {
    const { state, expected } = await readStepRun(store, runId);
    const events = decide(command, state);
    if (events.length === 0) return { appended: [], state };
    try {
      const commitId = commitIdOf(Aggregates.steprun, runId, expected.version, command.type);
      await store.append(Aggregates.steprun, runId, expected, events.map(encode), {
        source, commitId, ...(cause.correlationId ? { correlationId: cause.correlationId } : {}),
        ...(cause.causationId ? { causationId: cause.causationId } : {}),
      });
      return { appended: events, state: events.reduce(evolve, state) };
    } catch (err) {
      if (!isConcurrencyError(err) || attempt >= attempts) throw err;
      await delay(10 * attempt);
    }
  }
}
