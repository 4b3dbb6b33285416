// `GET /healthz` (plain HTTP) for the router container's readiness probe: ready once the
// first rules snapshot arrived, and from then on, the watch cut or not (the router serves
// the last rules meanwhile, which is what it is there to do).
import { createServer, type Server } from "node:http";

export interface HealthStatus {
  /** The first snapshot arrived. */
  ready: boolean;
  /** A watch is open and synced now. */
  watching: boolean;
  /** Routing keys with a rule. */
  rules: number;
}

export interface RunningHealth {
  port: number;
  close(): Promise<void>;
}

export async function startHealth(listen: string, status: () => HealthStatus): Promise<RunningHealth> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" || path !== "/healthz") {
      res.writeHead(404, { "content-type": "text/plain; charset=utf-8" });
      res.end("ephemera-router serves GET /healthz only\n");
      return;
    }
    const now = status();
    res.writeHead(now.ready ? 200 : 503, { "content-type": "application/json" });
    res.end(`${JSON.stringify(now.ready ? now : { ...now, reason: "waiting for the first routing rules from the Routes API" })}\n`);
  });
  const i = listen.lastIndexOf(":");
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(Number(listen.slice(i + 1)), listen.slice(0, i).replace(/^\[|\]$/g, ""), () => {
      server.off("error", reject);
      resolve();
    });
  });
  return {
    port: (server.address() as { port: number }).port,
    close: () => new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}
