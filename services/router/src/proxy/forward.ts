// One HTTP/1.x request passed to its destination and its answer passed back, as they came:
// method, target, header names' case, order and repeats, body, and the answer's trailers. Only the
// hop-by-hop headers (RFC 9110 §7.6.1: Connection and those it names, Keep-Alive,
// Transfer-Encoding, TE, Upgrade, Proxy-Connection) stay behind: they are about one
// connection, and the router's connection to the destination is pooled and has its own.
import { request, type Agent, type IncomingMessage, type ServerResponse } from "node:http";
import { pipeline } from "node:stream";
import type { Logger } from "@ephemera/kit";
import type { Destination } from "../rules/table.js";
import { addressOf } from "./upstreams.js";

const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade"]);

/** Pure: raw headers (`[name, value, name, value, …]`) without the hop-by-hop ones, those Connection names included. */
export function endToEnd(raw: readonly string[]): string[] {
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === "connection") for (const token of raw[i + 1]!.split(",")) named.add(token.trim().toLowerCase());
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (!HOP_BY_HOP.has(name) && !named.has(name)) out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

export function forward(req: IncomingMessage, res: ServerResponse, to: Destination, agent: Agent, logger: Logger): void {
  // Host is among the headers as the client sent it (or absent, as HTTP/1.0 allows).
  const upstream = request({ host: to.host, port: to.port, method: req.method, path: req.url, headers: endToEnd(req.rawHeaders), setHost: false, agent });
  res.sendDate = false;
  const failed = (err: Error) => {
    if (res.destroyed || res.writableEnded) return; // the client went first
    logger.warn({ upstream: addressOf(to), err: err.message }, "request not proxied");
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.writeHead(502, { "content-type": "text/plain; charset=utf-8", connection: "close" });
    res.end(`ephemera-router: cannot reach ${addressOf(to)}: ${err.message}\n`);
  };
  upstream.on("error", failed);
  upstream.on("response", (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.statusMessage, endToEnd(answer.rawHeaders));
    answer.on("end", () => {
      if (answer.rawTrailers.length) res.addTrailers(pairs(answer.rawTrailers));
    });
    // The answer cut short cuts the client's response; the client gone releases the upstream connection.
    pipeline(answer, res, () => undefined);
  });
  req.pipe(upstream);
  req.on("error", () => upstream.destroy());
  res.on("close", () => {
    if (!res.writableFinished) upstream.destroy();
  });
}

const pairs = (raw: readonly string[]): Array<[string, string]> => {
  const out: Array<[string, string]> = [];
  for (let i = 0; i < raw.length; i += 2) out.push([raw[i]!, raw[i + 1]!]);
  return out;
};
