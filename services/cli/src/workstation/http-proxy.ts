// The workstation's HTTP proxy into the cluster: CONNECT host:port (any TCP, HTTPS included)
// and absolute-form `GET http://host:port/path` requests, each connection made with the
// tunnel's dial. Hand-written on node:http: the proxy libraries (proxy-chain) dial upstream
// themselves or through another proxy, and cannot take a dial function.
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { Socket } from "node:net";
import { errorMessage } from "@ephemera/kit/errors";
import type { Dial } from "./tunnel.js";

/** Hop-by-hop headers (RFC 9110 §7.6.1) and the proxy's own: not forwarded. */
const HOP_BY_HOP = ["connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate", "te", "trailer", "upgrade"];

/** `host:port` of a CONNECT (`[::1]:443` too); undefined when it is not one. */
export function connectTarget(authority: string): { host: string; port: number } | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(authority);
  const port = Number(m?.[3]);
  const host = m?.[1] ?? m?.[2];
  return host && port > 0 && port < 65536 ? { host, port } : undefined;
}

export function createHttpProxy(dial: Dial, onError: (message: string) => void = () => {}): Server {
  const server = createServer((req, res) => forward(dial, req, res, onError));
  server.on("connect", (req: IncomingMessage, client: Socket, head: Buffer) => tunnel(dial, req, client, head, onError));
  return server;
}

function tunnel(dial: Dial, req: IncomingMessage, client: Socket, head: Buffer, onError: (message: string) => void): void {
  client.on("error", () => client.destroy());
  const target = connectTarget(req.url ?? "");
  if (!target) {
    client.end(`HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\n\r\nCONNECT needs host:port, got "${req.url ?? ""}"\n`);
    return;
  }
  dial(target.host, target.port).then((upstream) => {
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    if (head.length) upstream.write(head);
    splice(client, upstream);
  }, (err: unknown) => {
    onError(`CONNECT ${req.url ?? ""}: ${errorMessage(err)}`);
    client.end(`HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\n\r\n${oneLine(err)}\n`);
  });
}

function forward(dial: Dial, req: IncomingMessage, res: ServerResponse, onError: (message: string) => void): void {
  let url: URL;
  try {
    url = new URL(req.url ?? "");
  } catch {
    return fail(res, 400, `the proxy takes absolute-form http:// requests and CONNECT, got "${req.url ?? ""}"`);
  }
  if (url.protocol !== "http:") return fail(res, 400, `the proxy forwards http:// requests; use CONNECT for ${url.protocol}`);
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = Number(url.port || 80);
  const headers = { ...req.headers };
  for (const h of HOP_BY_HOP) delete headers[h];
  dial(host, port).then((stream) => {
    const upstream = request({
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers: { ...headers, host: url.host, connection: "close" },
      createConnection: () => stream,
    }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, withoutHopByHop(answer.headers));
      answer.pipe(res);
    });
    upstream.on("error", (err) => {
      onError(`${req.method ?? "GET"} ${url.host}: ${errorMessage(err)}`);
      if (!res.headersSent) fail(res, 502, oneLine(err));
      else res.destroy();
    });
    req.pipe(upstream);
  }, (err: unknown) => {
    onError(`${req.method ?? "GET"} ${url.host}: ${errorMessage(err)}`);
    fail(res, 502, oneLine(err));
  });
}

function withoutHopByHop(headers: IncomingMessage["headers"]): IncomingMessage["headers"] {
  const out = { ...headers };
  for (const h of HOP_BY_HOP) delete out[h];
  return out;
}

function fail(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { "content-type": "text/plain", connection: "close" }).end(`${message}\n`);
}

function oneLine(err: unknown): string {
  return errorMessage(err).split("\n")[0] ?? "";
}

/** Bytes both ways until either side ends; an error on one side closes both. */
export function splice(a: Duplex, b: Duplex): void {
  a.pipe(b);
  b.pipe(a);
  const close = () => {
    a.destroy();
    b.destroy();
  };
  a.on("error", close);
  b.on("error", close);
  a.on("close", () => b.end());
  b.on("close", () => a.end());
}
