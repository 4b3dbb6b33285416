// The gRPC health of ephemera's services as processes, polled while a test injects a fault:
// every change is kept with its time, so the test can say that a service reported itself
// degraded during the fault and SERVING again after it, and when.
import { checkHealth, waitFor } from "@ephemera/kit";
import { SERVICE_NAMES, listeningPort, type ServiceName, type Services } from "./services.js";

export interface HealthChange { service: ServiceName; at: number; serving: boolean }

export class HealthWatch {
  readonly changes: HealthChange[] = [];
  private readonly current = new Map<ServiceName, boolean>();
  private readonly polling = new Set<ServiceName>();
  private readonly timer: NodeJS.Timeout;

  private constructor(private readonly services: Services, intervalMs: number) {
    this.timer = setInterval(() => { for (const s of SERVICE_NAMES) void this.poll(s); }, intervalMs);
  }

  /** Polls each service's health every `intervalMs` (one check at a time per service, 1 s deadline). */
  static start(services: Services, intervalMs = 100): HealthWatch {
    return new HealthWatch(services, intervalMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** The last answer of the service: true SERVING, false anything else (or no answer). */
  serving(service: ServiceName): boolean | undefined {
    return this.current.get(service);
  }

  /** Services that reported not serving at some point in [from, to]. */
  degradedBetween(from: number, to = Date.now()): ServiceName[] {
    return SERVICE_NAMES.filter((s) => this.changes.some((c) => c.service === s && !c.serving && c.at >= from && c.at <= to));
  }

  /** Waits until every service answers SERVING. */
  async allServing(timeoutMs: number): Promise<void> {
    await waitFor(() => SERVICE_NAMES.every((s) => this.current.get(s) === true), {
      timeoutMs, intervalMs: 50,
      what: `every service SERVING (${SERVICE_NAMES.map((s) => `${s}: ${this.describe(s)}`).join(", ")})`,
    });
  }

  describe(service: ServiceName): string {
    const v = this.current.get(service);
    return v === undefined ? "unknown" : v ? "SERVING" : "NOT_SERVING";
  }

  /** The changes since `since`, one line each, for a timeline. */
  timeline(since: number): string[] {
    return this.changes.filter((c) => c.at >= since)
      .map((c) => `${new Date(c.at).toISOString().slice(11, 23)} ${c.service} ${c.serving ? "SERVING" : "NOT_SERVING"}`);
  }

  private async poll(service: ServiceName): Promise<void> {
    if (this.polling.has(service)) return;
    const port = this.port(service);
    if (port === undefined) return;
    this.polling.add(service);
    try {
      const serving = await checkHealth(`127.0.0.1:${port}`);
      if (this.current.get(service) !== serving) this.changes.push({ service, at: Date.now(), serving });
      this.current.set(service, serving);
    } finally {
      this.polling.delete(service);
    }
  }

  /** The port the running process of `service` bound, from its "grpc listening" log line. */
  private port(service: ServiceName): number | undefined {
    const pid = this.services.pid(service);
    return pid === undefined ? undefined : listeningPort(this.services.log(service), pid);
  }
}

/**
 * SIGSTOP for `ms`, then SIGCONT: the server keeps its sockets open but answers nothing,
 * as a server stalled by its host does. The timer that resumes it is the fault's duration.
 */
export async function pauseProcess(pid: number, ms: number, during?: () => Promise<void>): Promise<void> {
  process.kill(pid, "SIGSTOP");
  try {
    // The pause is the fault's length, not a wait for a condition; `during` runs inside it.
    await Promise.all([new Promise((resolve) => setTimeout(resolve, ms)), during?.()]);
  } finally {
    process.kill(pid, "SIGCONT");
  }
}
