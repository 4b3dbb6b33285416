// Serves a registry on `GET /metrics` in the Prometheus text format, for a scraper.
import { createServer } from "node:http";
import type { Logger } from "../logger.js";
import type { Registry } from "./registry.js";

export interface MetricsServer {
  port: number;
  stop(): Promise<void>;
}

/** Serves `GET /metrics`; anything else is 404. Resolves once listening (port 0: any free port). */
export async function startMetricsServer(listen: string, registry: Registry, logger: Logger): Promise<MetricsServer> {
  const { host, port } = hostPort(listen);
  const server = createServer((req, res) => {
    if (req.method !== "GET" || (req.url ?? "").split("?")[0] !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found: metrics are on GET /metrics\n");
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { "content-type": registry.contentType }).end(text),
      (err: unknown) => {
        logger.warn({ err }, "cannot collect metrics");
        res.writeHead(500, { "content-type": "text/plain" }).end("cannot collect metrics\n");
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => { server.off("error", reject); resolve(); });
  });
  const bound = (server.address() as { port: number }).port;
  logger.info({ listen, port: bound }, "metrics listening");
  return {
    port: bound,
    stop: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

/** `host:port` or `[v6]:port`. */
export function hostPort(listen: string): { host: string; port: number } {
  const i = listen.lastIndexOf(":");
  const host = listen.slice(0, i).replace(/^\[(.*)\]$/, "$1");
  const port = Number(listen.slice(i + 1));
  if (i <= 0 || !host || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`EPHEMERA_METRICS_LISTEN must be host:port (e.g. 0.0.0.0:9090), got "${listen}"`);
  }
  return { host, port };
}
