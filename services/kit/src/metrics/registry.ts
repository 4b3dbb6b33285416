// A service's metrics registry (its process metrics labelled with the service's name), where
// it serves them, and the histogram buckets ephemera's metrics share.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { envString, type Env } from "../config.js";

export { Counter, Gauge, Histogram, Registry };

export type MetricsService = "sandbox" | "scheduler" | "runner" | "iocontext" | "webhook" | "tunnel" | "console";

/**
 * Where each service serves /metrics when run alone: one port each, so the services of one
 * machine do not clash. On a cluster each pod has its own address: `0.0.0.0:9090`.
 */
export const DEFAULT_METRICS_LISTEN: Record<MetricsService, string> = {
  sandbox: "127.0.0.1:9400", scheduler: "127.0.0.1:9401", runner: "127.0.0.1:9402", iocontext: "127.0.0.1:9403",
  webhook: "127.0.0.1:9404", tunnel: "127.0.0.1:9405", console: "127.0.0.1:9406",
};

export function metricsListen(env: Env, service: MetricsService): string {
  return envString(env, "EPHEMERA_METRICS_LISTEN", DEFAULT_METRICS_LISTEN[service]);
}

/** Buckets (seconds) for what a request or an append costs: a millisecond to ten seconds. */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Buckets (seconds) for steps and workflows: a tenth of a second to an hour. */
export const DURATION_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/** A service's registry: the process metrics (CPU, memory, event-loop lag, GC) and, on every series, `service`. */
export function serviceRegistry(service: MetricsService): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return registry;
}
