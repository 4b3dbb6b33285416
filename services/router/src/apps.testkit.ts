// The upstreams of the router's tests: an app named "baseline" or "fork" serving, each on
// a port of its own, HTTP/1.1 with WebSocket, gRPC (h2c), a TCP echo, and a server-first
// TCP protocol (it greets before the client says anything). Every answer names the app.
import { createServer as createHttpServer, type IncomingHttpHeaders, type Server as HttpServer } from "node:http";
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from "node:net";
import { grpc } from "@ephemera/kit/client";
import { WebSocketServer } from "ws";

const bytes = {
  requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b,
  responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b,
};

/**
 * A tiny gRPC service: Who answers the app's name; Fail fails NOT_FOUND naming it; Count
 * streams three messages; Hold streams one and waits until the call is cancelled.
 */
export const WHO = {
  who: { path: "/test.Who/Who", requestStream: false, responseStream: false, ...bytes },
  fail: { path: "/test.Who/Fail", requestStream: false, responseStream: false, ...bytes },
  count: { path: "/test.Who/Count", requestStream: false, responseStream: true, ...bytes },
  hold: { path: "/test.Who/Hold", requestStream: false, responseStream: true, ...bytes },
} as const;

/** What the HTTP app answers: who it is, and the request as it arrived. */
export interface Echo {
  app: string;
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
}

export interface App {
  name: string;
  httpPort: number;
  grpcPort: number;
  tcpPort: number;
  greetingPort: number;
  /** The HTTP connections the app accepted. */
  httpConnections: number;
  /** The headers of every WebSocket upgrade the app accepted. */
  upgrades: IncomingHttpHeaders[];
  /** Hold calls the app saw cancelled. */
  cancelled: number;
  close(): Promise<void>;
}

export async function startApp(name: string): Promise<App> {
  const app = { name, httpConnections: 0, upgrades: [] as IncomingHttpHeaders[], cancelled: 0 };
  const http = createHttpServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      const echo: Echo = { app: name, method: req.method ?? "", url: req.url ?? "", headers: req.headers, rawHeaders: req.rawHeaders, body };
      // /slow/<ms>: answers the headers at once and the body after that long.
      const slowMs = Number(/^\/slow\/(\d+)$/.exec(req.url ?? "")?.[1] ?? 0);
      res.writeHead(200, { "content-type": "application/json" });
      if (slowMs) setTimeout(() => res.end(JSON.stringify(echo)), slowMs);
      else res.end(JSON.stringify(echo));
    });
  });
  http.on("connection", () => app.httpConnections++);
  const ws = new WebSocketServer({ server: http });
  ws.on("connection", (socket, req) => {
    app.upgrades.push(req.headers);
    socket.on("message", (data: Buffer) => socket.send(`${name}:${data.toString()}`));
  });

  const grpcServer = new grpc.Server();
  grpcServer.addService(WHO, {
    who: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => callback(null, Buffer.from(name)),
    fail: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
      const metadata = new grpc.Metadata();
      metadata.set("x-app", name);
      callback({ code: grpc.status.NOT_FOUND, details: `${name} has no such thing`, metadata });
    },
    count: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      for (let i = 1; i <= 3; i++) call.write(Buffer.from(`${name}-${i}`));
      const trailers = new grpc.Metadata();
      trailers.set("x-app", name);
      call.end(trailers);
    },
    hold: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      call.write(Buffer.from(`${name}-held`));
      call.on("cancelled", () => app.cancelled++);
    },
  });
  const grpcPort = await new Promise<number>((resolve, reject) =>
    grpcServer.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))));

  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  };
  // Echoes what it gets after its name, and ends when the client has.
  const tcp = createTcpServer({ allowHalfOpen: true }, (socket) => {
    track(socket);
    socket.write(`${name}:`);
    socket.pipe(socket);
  });
  const greeting = createTcpServer((socket) => {
    track(socket);
    socket.write(`220 ${name} ready\r\n`);
    socket.on("data", (line) => socket.end(`250 ${name} got ${line.toString().trim()}\r\n`));
  });
  const httpPort = await listen(http);
  const tcpPort = await listen(tcp);
  const greetingPort = await listen(greeting);
  return Object.assign(app, {
    httpPort, grpcPort, tcpPort, greetingPort,
    close: async () => {
      ws.close();
      http.closeAllConnections();
      grpcServer.forceShutdown();
      for (const socket of sockets) socket.destroy();
      await Promise.all([http, tcp, greeting].map((s) => new Promise((resolve) => s.close(resolve))));
    },
  });
}

function listen(server: HttpServer | TcpServer): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port));
  });
}
