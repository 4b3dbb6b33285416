// Whether a NATS connection, and the consumers reading through it, work: what a service's gRPC health follows.
import type { NatsConnection } from "@nats-io/nats-core";
import type { Logger } from "@ephemera/kit";

const JS_API_INFO = "$JS.API.INFO";
const healthOf = new WeakMap<NatsConnection, NatsHealth>();

/** The one NatsHealth of a connection (created with the first caller's logger). */
export function natsHealth(nc: NatsConnection, logger?: Logger): NatsHealth {
  let h = healthOf.get(nc);
  if (!h) healthOf.set(nc, (h = new NatsHealth(nc, logger)));
  return h;
}

/**
 * Whether a NATS connection, and the consumers reading through it, work right now: a
 * JetStream API request with a deadline notices a server that stopped answering (paused,
 * or gone without closing the socket), the connection's status a dropped connection, and each
 * consumer loop says while it is re-creating itself. Logged once per change, not per retry.
 */
export class NatsHealth {
  private connected = true;
  private reported = true;
  private probing = false;
  private readonly interrupted = new Map<string, unknown>();
  private readonly listeners = new Set<(healthy: boolean) => void>();

  constructor(private readonly nc: NatsConnection, private readonly logger?: Logger, probeMs = 500, probeTimeoutMs = 1000) {
    const timer = setInterval(() => void this.probe(probeTimeoutMs), probeMs);
    timer.unref();
    void nc.closed().then(() => clearInterval(timer), () => clearInterval(timer));
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "disconnect" || s.type === "staleConnection") this.setConnected(false, s.type);
        // "reconnect": the next probe says whether the server answers again.
      }
    })().catch(() => undefined);
  }

  get healthy(): boolean {
    return this.connected && this.interrupted.size === 0;
  }

  onChange(listener: (healthy: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A consumer, fetch loop or watch lost its messages and is re-creating itself. */
  interrupt(name: string, err: unknown): void {
    if (!this.interrupted.has(name)) this.logger?.warn({ err, consumer: name }, "NATS consumer interrupted; re-creating it with backoff");
    this.interrupted.set(name, err);
    this.changed();
  }

  /** It reads again. */
  restore(name: string): void {
    if (!this.interrupted.delete(name)) return;
    this.logger?.info({ consumer: name }, "NATS consumer reading again");
    this.changed();
  }

  /** It stopped: no longer counted. */
  forget(name: string): void {
    if (this.interrupted.delete(name)) this.changed();
  }

  private async probe(timeoutMs: number): Promise<void> {
    if (this.probing || this.nc.isClosed()) return;
    this.probing = true;
    try {
      // JetStream's own API, not only the server: after a restart it answers a while after the socket.
      const reply = await this.nc.request(JS_API_INFO, undefined, { timeout: timeoutMs });
      const error = (reply.json<{ error?: { description?: string } }>()).error;
      if (error) throw new Error(`JetStream: ${error.description ?? "unavailable"}`);
      this.setConnected(true);
    } catch (err) {
      this.setConnected(false, err);
    } finally {
      this.probing = false;
    }
  }

  private setConnected(connected: boolean, reason?: unknown): void {
    if (connected === this.connected) return;
    this.connected = connected;
    if (connected) this.logger?.info({ server: this.nc.getServer() }, "NATS answers again");
    else this.logger?.warn({ reason: reason instanceof Error ? reason.message : reason, server: this.nc.getServer() }, "NATS unavailable; riding it out");
    this.changed();
  }

  private changed(): void {
    const healthy = this.healthy;
    if (healthy === this.reported) return;
    this.reported = healthy;
    for (const l of this.listeners) l(healthy);
  }
}
