// What the tunnel service counts: sessions open, connections and bytes each way, and how sessions end.
import { Counter, Gauge, type Registry } from "@ephemera/kit/metrics";
import type { SessionEndReason } from "../protocol.js";

export type Direction = "to_workstation" | "to_cluster";

export class TunnelMetrics {
  private readonly sessions: Gauge;
  private readonly connections: Counter<"direction">;
  private readonly bytes: Counter<"direction">;
  private readonly ends: Counter<"reason">;

  constructor(registry: Registry) {
    this.sessions = new Gauge({ name: "ephemera_tunnel_sessions_open", help: "Workstation sessions open now", registers: [registry] });
    this.connections = new Counter({
      name: "ephemera_tunnel_connections_total", help: "TCP connections carried, by direction", labelNames: ["direction"], registers: [registry],
    });
    this.bytes = new Counter({
      name: "ephemera_tunnel_bytes_total", help: "Bytes carried, by the way they went", labelNames: ["direction"], registers: [registry],
    });
    this.ends = new Counter({
      name: "ephemera_tunnel_session_ends_total", help: "Sessions ended, by reason", labelNames: ["reason"], registers: [registry],
    });
  }

  sessionOpened(): void { this.sessions.inc(); }
  sessionEnded(reason: SessionEndReason): void { this.sessions.dec(); this.ends.inc({ reason }); }
  connection(direction: Direction): void { this.connections.inc({ direction }); }
  carried(toWorkstation: number, toCluster: number): void {
    if (toWorkstation) this.bytes.inc({ direction: "to_workstation" }, toWorkstation);
    if (toCluster) this.bytes.inc({ direction: "to_cluster" }, toCluster);
  }
}
