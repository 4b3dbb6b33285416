// What appends cost and how often they lose an optimistic-concurrency race, per aggregate
// type (a handful: plugin, sandbox, workflow, steprun, deadletter), never per aggregate.
import { ConcurrencyError, TooLargeError } from "@ephemera/kit";
import { Counter, Histogram, LATENCY_BUCKETS, type Registry } from "@ephemera/kit/metrics";

export type AppendOutcome = "ok" | "duplicate" | "conflict" | "too_large" | "unavailable";

export interface AppendMetrics {
  /** One append ended: `started` is its performance.now() at the start. */
  appended(aggregate: string, outcome: AppendOutcome, started: number): void;
}

export const appendOutcome = (err: unknown): AppendOutcome =>
  err instanceof ConcurrencyError ? "conflict" : err instanceof TooLargeError ? "too_large" : "unavailable";

/** Registers the metrics once per registry: stores opened twice in one process share them. */
export function appendMetrics(registry: Registry): AppendMetrics {
  const seconds = (registry.getSingleMetric("ephemera_eventstore_append_duration_seconds") as Histogram<"aggregate" | "outcome"> | undefined)
    ?? new Histogram({
      name: "ephemera_eventstore_append_duration_seconds", labelNames: ["aggregate", "outcome"], buckets: LATENCY_BUCKETS, registers: [registry],
      help: "Time of one append to the event stream (a JetStream publish with its expected sequence), by aggregate type and outcome",
    });
  const conflicts = (registry.getSingleMetric("ephemera_eventstore_append_conflicts_total") as Counter<"aggregate"> | undefined)
    ?? new Counter({
      name: "ephemera_eventstore_append_conflicts_total", labelNames: ["aggregate"], registers: [registry],
      help: "Appends refused because another commit to the same aggregate landed first (optimistic concurrency); the command is decided again",
    });
  return {
    appended: (aggregate, outcome, started) => {
      seconds.observe({ aggregate, outcome }, (performance.now() - started) / 1000);
      if (outcome === "conflict") conflicts.inc({ aggregate });
    },
  };
}
