// The runner's metrics: steps started and ended (failures by reason), their duration, steps
// running now, where their inputs came from, its cluster's work-queue backlog, and the
// Kubernetes driver's API calls.
// Labels name kinds of things (reason, outcome, lane, verb), never a sandbox or a run.
import type { LaneBacklog } from "@ephemera/eventstore";
import { FailureReason } from "@ephemera/io-agent";
import type { Logger } from "@ephemera/kit";
import { Counter, DURATION_BUCKETS, Gauge, Histogram, type Registry } from "@ephemera/kit/metrics";
import type { StepRunCommand } from "./steprun/decide.js";

export interface StepMetrics {
  /** A step attempt handed to the driver. */
  started(): void;
  /** The driver's step ended (its result not yet recorded). */
  stopped(): void;
  /** The result of a step this runner ran, recorded. */
  recorded(command: StepRunCommand): void;
}

const REASONS = new Set<string>(Object.values(FailureReason));

export function stepMetrics(registry: Registry): StepMetrics {
  const started = new Counter({
    name: "ephemera_runner_steps_started_total", registers: [registry],
    help: "Step attempts this runner handed to its driver (a process, or a pod)",
  });
  const succeeded = new Counter({
    name: "ephemera_runner_steps_succeeded_total", registers: [registry],
    help: "Step attempts that succeeded, their result recorded",
  });
  const failed = new Counter({
    name: "ephemera_runner_steps_failed_total", labelNames: ["reason"], registers: [registry],
    help: "Step attempts that failed, their result recorded, by reason (Error, DeadlineExceeded, OOMKilled, Cancelled, ...)",
  });
  const duration = new Histogram({
    name: "ephemera_runner_step_duration_seconds", labelNames: ["outcome"], buckets: DURATION_BUCKETS, registers: [registry],
    help: "Time from handing a step to the driver to its end, by outcome (succeeded, failed)",
  });
  const running = new Gauge({
    name: "ephemera_runner_steps_running", registers: [registry],
    help: "Step attempts running on this runner now",
  });
  return {
    started: () => { started.inc(); running.inc(); },
    stopped: () => running.dec(),
    recorded: (command) => {
      if (command.type === "succeed") {
        succeeded.inc();
        duration.observe({ outcome: "succeeded" }, command.durationMs / 1000);
      } else if (command.type === "fail") {
        // A reason the runner does not know (a newer agent's) stays one series.
        failed.inc({ reason: REASONS.has(command.failure.reason) ? command.failure.reason : "Other" });
        duration.observe({ outcome: "failed" }, command.durationMs / 1000);
      }
    },
  };
}

/** Counts, per step the process driver ran, where its inputs were resolved (InputsFrom). */
export function inputMetrics(registry: Registry): (from: string) => void {
  const inputs = new Counter({
    name: "ephemera_runner_step_inputs_total", labelNames: ["from"], registers: [registry],
    help: "Steps whose inputs the process driver resolved, by where from: dispatch (its plan and the runner's memory), journal (a value read from the output journal), iocontext (asked of the IO context)",
  });
  return (from) => inputs.inc({ from });
}

/**
 * The cluster's work-queue backlog, asked of JetStream at each scrape (two requests a lane),
 * once for both gauges. While NATS does not answer, the series are left out rather than
 * reported stale.
 */
export function queueMetrics(
  registry: Registry, cluster: string, backlog: (cluster: string) => Promise<LaneBacklog[]>, logger: Logger,
): void {
  // A scrape collects every metric at once: both gauges share the one read in flight.
  let reading: Promise<LaneBacklog[]> | undefined;
  const read = () => (reading ??= backlog(cluster).finally(() => { reading = undefined; }));
  const gauge = (name: string, help: string, value: (b: LaneBacklog) => number) => new Gauge({
    name, help, labelNames: ["cluster", "lane"], registers: [registry],
    async collect() {
      this.reset();
      try {
        for (const b of await read()) this.set({ cluster, lane: b.lane }, value(b));
      } catch (err) {
        logger.debug({ err }, "cannot read the work queue's backlog for metrics");
      }
    },
  });
  gauge("ephemera_runner_queue_pending",
    "Dispatches of this runner's cluster no runner has been handed yet, by lane (next: steps of workflows under way; start: first steps)",
    (b) => b.pending);
  gauge("ephemera_runner_queue_oldest_age_seconds",
    "How long the oldest dispatch no runner has been handed yet has waited (0 when none waits), by lane",
    (b) => b.oldestAgeMs / 1000);
}

/**
 * The Kubernetes driver's API calls (its ApiCalls, which the logs and the bench read too),
 * brought into a counter at each scrape by what they grew since the last one.
 */
export function kubeApiMetrics(registry: Registry, calls: { snapshot(): Record<string, number> }): void {
  const seen = new Map<string, number>();
  new Counter({
    name: "ephemera_runner_kube_api_calls_total", labelNames: ["verb", "resource"], registers: [registry],
    help: "Kubernetes API calls the driver made, by verb and resource (a step should cost a create and a delete of pods)",
    collect() {
      for (const [key, count] of Object.entries(calls.snapshot())) {
        const [verb = "", resource = ""] = key.split(" ");
        const grown = count - (seen.get(key) ?? 0);
        if (grown > 0) this.inc({ verb, resource }, grown);
        seen.set(key, count);
      }
    },
  });
}
