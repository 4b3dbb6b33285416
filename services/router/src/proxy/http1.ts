// HTTP/1.1 on a listener: each request (several on a kept-alive connection) routed on its
// own by its routing key and forwarded as it came (forward.ts). An Upgrade (WebSocket or
// any other) or a CONNECT becomes a byte tunnel to the same destination once its request
// line and headers are passed on as they arrived.
import { createServer, type IncomingMessage, type Server } from "node:http";
import { connect } from "node:net";
import { pipeline, type Duplex } from "node:stream";
import type { Logger } from "@ephemera/kit";
import type { Destination } from "../rules/table.js";
import { forward } from "./forward.js";
import { addressOf, type Upstreams } from "./upstreams.js";

/** Where a request with these headers goes. */
export type Route = (headers: IncomingMessage["headers"]) => Destination;

export function http1Server(route: Route, upstreams: Upstreams, logger: Logger): Server {
  const server = createServer({
    // How long a request may take is the app's and its clients' to say (uploads, long polls).
    requestTimeout: 0,
    keepAliveTimeout: 60_000,
    noDelay: true,
  }, (req, res) => forward(req, res, route(req.headers), upstreams.agent, logger));
  const tunnel = (req: IncomingMessage, socket: Duplex, head: Buffer) => tunnelTo(route(req.headers), req, socket, head, logger);
  server.on("upgrade", tunnel);
  server.on("connect", tunnel);
  return server;
}

/** The request's head as it arrived (names' case, order and repeats kept), then bytes both ways. */
function tunnelTo(to: Destination, req: IncomingMessage, socket: Duplex, head: Buffer, logger: Logger): void {
  const upstream = connect({ host: to.host, port: to.port, noDelay: true });
  const lines = [`${req.method} ${req.url} HTTP/${req.httpVersion}`];
  for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
  upstream.write(`${lines.join("\r\n")}\r\n\r\n`);
  if (head.length) upstream.write(head);
  const done = (err?: Error | null) => {
    if (!err) return;
    logger.debug({ upstream: addressOf(to), err: err.message }, "tunnel closed on error");
    socket.destroy();
    upstream.destroy();
  };
  pipeline(socket, upstream, done);
  pipeline(upstream, socket, done);
}
