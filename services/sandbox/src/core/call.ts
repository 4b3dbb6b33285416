// Who made an API call, and what the commits it causes record of it.
import type { CommandMeta } from "@ephemera/eventstore";

/** Who asked, and the id every event the call causes carries as its correlation id. */
export interface CallContext {
  actor?: string;
  correlationId?: string;
  /** Aborts when the caller gave up (a cancelled call), so a held create leaves its line. */
  signal?: AbortSignal;
  /** When the caller stops waiting (epoch ms), if it said. */
  deadline?: number;
}

/** What a command's commit records: its source, command, correlation id (a new one when the call has none) and actor. */
export function commandMeta(call: CallContext, command: string, newId: () => string) {
  return {
    source: "sandbox", command,
    correlationId: call.correlationId ?? newId(),
    ...(call.actor ? { actor: call.actor } : {}),
  } satisfies CommandMeta;
}

/** The meta of a command made for a call. */
export type MetaOf = (call: CallContext, command: string) => ReturnType<typeof commandMeta>;
