// Runs a StepRun command against the event store: read the aggregate (or start from what
// the caller knows of it), decide, append with that revision; on a concurrent append, read
// again and decide again.
import { Aggregates, decode, encode } from "@ephemera/events";
import { commitIdOf, type EventStore, type Expected } from "@ephemera/eventstore";
import { delay, isConcurrencyError } from "@ephemera/kit";
import { decide, evolve, initialStepRun, type StepRunCommand, type StepRunEvent, type StepRunState } from "./decide.js";

/** A step run as the caller's own append left it: its state and the revision the next append goes over. */
export interface KnownStepRun {
  state: StepRunState;
  expected: Expected;
}

export interface StepRunResult {
  /** What this command appended (empty: nothing to do, e.g. the result was already recorded). */
  appended: StepRunEvent[];
  state: StepRunState;
  /** The run as this command's own append left it, for the caller's next command; absent when it appended nothing of its own. */
  known?: KnownStepRun;
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

/**
 * `known`: the run as the caller's own last append left it (`StepRunResult.known`), which
 * saves the read (one round trip) while nobody else wrote it since; if someone did, the
 * append is refused and the run read. What the caller only read is `known` for a start
 * alone: a commit's id comes from the revision and the command, and only a start's names
 * who issued it (its runner), so another runner's same command over that revision is
 * refused as a conflict, never taken for this one's. Tried again with the same `known`
 * after a failure, an append that had landed is the same commit and is dropped as a duplicate.
 */
export async function executeStepRun(
  store: EventStore, runId: string, command: StepRunCommand, source: string, cause: Cause = {}, attempts = 5, known?: KnownStepRun,
): Promise<StepRunResult> {
  for (let attempt = 1; ; attempt++) {
    const { state, expected } = attempt === 1 && known ? known : await readStepRun(store, runId);
    const events = decide(command, state);
    if (events.length === 0) return { appended: [], state };
    try {
      const commitId = commitIdOf(Aggregates.steprun, runId, expected.version, commandKey(command));
      const appended = await store.append(Aggregates.steprun, runId, expected, events.map(encode), {
        source, commitId, ...(cause.correlationId ? { correlationId: cause.correlationId } : {}),
        ...(cause.causationId ? { causationId: cause.causationId } : {}),
      });
      const after = events.reduce(evolve, state);
      // A duplicate's revision is not this caller's to build on: the next command reads.
      return { appended: events, state: after, ...(appended.duplicate ? {} : { known: { state: after, expected: { revision: appended.revision, version: appended.version } } }) };
    } catch (err) {
      if (!isConcurrencyError(err) || attempt >= attempts) throw err;
      // What the caller knew is out of date: read at once. Two readers racing: back off.
      if (!(attempt === 1 && known)) await delay(10 * attempt);
    }
  }
}

/**
 * A command as its commit's id names it: a start with its runner (two runners' starts over
 * one revision are two commits, and the second a conflict), as a start may go over a read
 * made before the run's claim was taken; a result or a drop by its type, as either goes over
 * the caller's own append or a read made when it records it.
 */
export const commandKey = (command: StepRunCommand): string => (command.type === "start" ? `start/${command.runner}` : command.type);
