// One router listener: the port an app port's inbound traffic is redirected to. Each
// connection is sniffed (sniff.ts) and handed to the HTTP/2 server, the HTTP/1.1 server or
// a TCP pipe to the app; a connection that stays silent (a server-first protocol) goes to
// the app as TCP after the sniff timeout. Closed with a drain: no new connection, the
// requests under way finished, for at most the drain's time.
import type { ServerHttp2Session } from "node:http2";
import { createServer, type Socket } from "node:net";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "@ephemera/kit";
import type { PortMapping } from "../config.js";
import { routingKeyOf } from "../headers.js";
import { localApp, type RoutingTable } from "../rules/table.js";
import { h2cServer } from "./h2c.js";
import { http1Server } from "./http1.js";
import { sniff, type Protocol } from "./sniff.js";
import { pipeTcp } from "./tcp.js";
import type { Upstreams } from "./upstreams.js";

export interface ListenerOptions {
  /** The address to listen on (0.0.0.0 in a pod: REDIRECT sends to the interface's address). */
  host: string;
  table: RoutingTable;
  upstreams: Upstreams;
  sniffTimeoutMs: number;
  logger: Logger;
}

export interface RunningListener {
  mapping: PortMapping;
  /** The port bound (the mapping's, or the one the system gave for 0). */
  port: number;
  /**
   * Takes no new connection; idle HTTP/1.1 connections are closed, HTTP/2 ones told to go
   * (GOAWAY), the requests under way answered (HTTP/1.1 with `Connection: close`); what is
   * still open after `drainMs` is cut. Resolves when every connection is closed.
   */
  close(drainMs?: number): Promise<void>;
}

export async function startListener(mapping: PortMapping, options: ListenerOptions): Promise<RunningListener> {
  const { host, table, upstreams, sniffTimeoutMs, logger } = options;
  const { appPort } = mapping;
  const route = (headers: Parameters<typeof routingKeyOf>[0]) => table.destination(routingKeyOf(headers), appPort);
  const http1 = http1Server(route, upstreams, logger);
  const h2c = h2cServer(route, upstreams, logger);
  const sockets = new Set<Socket>();
  const drain = drainer(sockets);
  http1.on("request", drain.onRequest);
  h2c.on("session", drain.onSession);

  const handOver = (socket: Socket, protocol: Protocol, first: Buffer, ended: boolean) => {
    if (protocol === "tcp") return pipeTcp(socket, first, ended, localApp(appPort));
    socket.unshift(first);
    if (protocol === "http1") {
      drain.trackHttp1(socket);
      http1.emit("connection", socket);
      // The HTTP parser reads the socket's handle directly from now on; what was read while
      // sniffing is still in the stream, which must flow for the parser to get it.
      socket.resume();
    } else {
      // Node's HTTP/2 session would likewise read the handle directly and miss the preface
      // put back: made to read through the stream instead.
      const handle = (socket as unknown as { _handle?: { isStreamBase?: boolean } })._handle;
      if (handle) handle.isStreamBase = false;
      h2c.emit("connection", socket);
    }
  };

  const server = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    let first: Buffer = Buffer.alloc(0);
    const decide = (protocol: Protocol, ended = false) => {
      clearTimeout(timer);
      socket.off("data", onData).off("end", onEnd).off("error", onError);
      socket.pause();
      handOver(socket, protocol, first, ended);
    };
    const onData = (chunk: Buffer) => {
      first = first.length ? Buffer.concat([first, chunk]) : chunk;
      const protocol = sniff(first);
      if (protocol) decide(protocol);
    };
    // A client that sent all it had before the bytes told anything: the app gets it as it is.
    const onEnd = () => decide("tcp", true);
    const onError = () => {
      clearTimeout(timer);
      socket.destroy();
    };
    const timer = setTimeout(() => decide("tcp"), sniffTimeoutMs);
    socket.on("data", onData).on("end", onEnd).on("error", onError);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(mapping.listenPort, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  server.on("error", (err) => logger.error({ err: err.message, listen: mapping.listenPort }, "listener failed"));
  const port = (server.address() as { port: number }).port;
  return {
    mapping,
    port,
    close: (drainMs = 0) => new Promise((resolve) => {
      server.close(() => resolve());
      drain.start(drainMs);
    }),
  };
}

/** What a drain needs to know of a listener's connections: which HTTP/1.1 ones have a request under way, the HTTP/2 sessions. */
function drainer(sockets: Set<Socket>) {
  const http1 = new Set<Socket>();
  const busy = new Map<Socket, number>();
  const sessions = new Set<ServerHttp2Session>();
  let draining = false;
  return {
    trackHttp1(socket: Socket) {
      http1.add(socket);
      socket.once("close", () => http1.delete(socket));
    },
    onRequest(req: IncomingMessage, res: ServerResponse) {
      const socket = req.socket;
      busy.set(socket, (busy.get(socket) ?? 0) + 1);
      if (draining) res.shouldKeepAlive = false;
      res.once("close", () => {
        const left = (busy.get(socket) ?? 1) - 1;
        if (left > 0) return void busy.set(socket, left);
        busy.delete(socket);
        if (draining) socket.end();
      });
    },
    onSession(session: ServerHttp2Session) {
      sessions.add(session);
      session.once("close", () => sessions.delete(session));
    },
    start(drainMs: number) {
      draining = true;
      for (const socket of http1) if (!busy.has(socket)) socket.end();
      for (const session of sessions) session.close();
      const cut = () => {
        for (const socket of sockets) socket.destroy();
      };
      if (drainMs > 0) setTimeout(cut, drainMs).unref();
      else cut();
    },
  };
}
