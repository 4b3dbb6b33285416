// given / when / then for deciders, shared by every aggregate's tests: given the events of
// its past (each with the time it was appended), when a command is decided at `now`, then
// these events (or nothing, or this error) — with no I/O at all.
import type { DomainEvent } from "@ephemera/events";

/** An aggregate as one value: its initial state, its evolve and its decide (emmett's Decider). */
export interface Decider<S, C, T> {
  initialState(): S;
  evolve(state: S, event: DomainEvent, time: T): S;
  decide(command: C, state: S, now: T): DomainEvent[];
}

export interface Timed<T> { event: DomainEvent; time: T }

export function deciderSpec<S, C, T>(decider: Decider<S, C, T>, defaultTime: T) {
  /** Events appended at `time`. */
  const at = (time: T, ...events: DomainEvent[]): Array<Timed<T>> => events.map((event) => ({ event, time }));

  function given(...history: Array<Array<Timed<T>>>) {
    const past = history.flat();
    const state = past.reduce((s, h) => decider.evolve(s, h.event, h.time), decider.initialState());
    return {
      state,
      when(command: C, now: T = defaultTime) {
        const decide = () => decider.decide(command, state, now);
        let decided: DomainEvent[] | undefined;
        const events = () => (decided ??= decide());
        return {
          get events(): DomainEvent[] { return events(); },
          then: (...expected: DomainEvent[]) => expect(events()).toEqual(expected),
          thenNothing: () => expect(events()).toEqual([]),
          thenThrows: (error: new (...args: never[]) => Error, message: RegExp) => {
            expect(decide).toThrow(error);
            expect(decide).toThrow(message);
          },
          /** The history with this decision appended at `time` (default: `now`), to go on from. */
          history: (time: T = now): Array<Timed<T>> => [...past, ...at(time, ...events())],
          /** The state after this decision. */
          state: (time: T = now): S => events().reduce((s, e) => decider.evolve(s, e, time), state),
        };
      },
    };
  }

  return { at, given, stateOf: (history: Array<Timed<T>>) => given(history).state };
}
