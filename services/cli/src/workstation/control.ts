// The daemon's control channel: HTTP on a unix socket in the state dir (control.sock, mode
// 0600 in a 0700 dir: only this user), so other `eph` commands can use the daemon's session.
// `POST /environment` {sandbox, local} answers the tunnel's /v1/environment for a local the
// session serves; its body may hold Secrets' values and goes nowhere else.
import { chmod, rm } from "node:fs/promises";
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { join } from "node:path";
import { errorMessage } from "@ephemera/kit/errors";
import type { Environment } from "./tunnel.js";

export const controlPath = (dir: string) => join(dir, "control.sock");

const MAX_BODY_BYTES = 4096;

export interface ControlHandlers {
  environment(sandbox: string, local: string): Promise<Environment>;
}

/** Why the daemon could not answer: its status (the tunnel's when it refused) and one line. */
export class ControlRefused extends Error {
  override readonly name = "ControlRefused";
  constructor(readonly status: number, reason: string) {
    super(reason);
  }
}

/** Listens on control.sock (one left by a killed daemon is replaced: the state dir's lock is held). */
export async function serveControl(dir: string, handlers: ControlHandlers): Promise<Server> {
  const path = controlPath(dir);
  await rm(path, { force: true });
  const server = createServer((req, res) => void handle(req, res, handlers));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => { server.removeListener("error", reject); resolve(); });
  });
  await chmod(path, 0o600);
  return server;
}

async function handle(req: IncomingMessage, res: ServerResponse, handlers: ControlHandlers): Promise<void> {
  const reply = (status: number, text: string) => {
    res.writeHead(status, { "content-type": "text/plain; charset=utf-8" });
    res.end(`${text.replace(/[\r\n]+/g, " ")}\n`);
  };
  if (req.method !== "POST" || req.url !== "/environment") return reply(404, `no ${req.method} ${req.url} here: the daemon answers POST /environment`);
  let body = "";
  for await (const chunk of req) {
    body += String(chunk);
    if (body.length > MAX_BODY_BYTES) return reply(400, "the body is too long");
  }
  let asked: { sandbox?: unknown; local?: unknown };
  try {
    asked = JSON.parse(body) as typeof asked;
  } catch {
    return reply(400, 'the body must be JSON {"sandbox","local"}');
  }
  if (typeof asked.sandbox !== "string" || typeof asked.local !== "string") return reply(400, "sandbox and local must be names");
  try {
    const environment = await handlers.environment(asked.sandbox, asked.local);
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(environment));
  } catch (err) {
    const status = (err as { status?: unknown }).status;
    const reason = (err as { reason?: unknown }).reason;
    reply(typeof status === "number" ? status : 503, typeof reason === "string" ? reason : errorMessage(err));
  }
}

/** Asks the daemon of `dir` for a local's environment; rejects with ControlRefused or when the socket cannot be reached. */
export function askEnvironment(dir: string, sandbox: string, local: string, timeoutMs = 15_000): Promise<Environment> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: controlPath(dir), path: "/environment", method: "POST", headers: { "content-type": "application/json" }, timeout: timeoutMs }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => { body += chunk; });
      res.once("end", () => {
        if (res.statusCode !== 200) return reject(new ControlRefused(res.statusCode ?? 0, body.trim()));
        try {
          resolve(JSON.parse(body) as Environment);
        } catch (err) {
          reject(new Error(`the daemon's answer is not JSON: ${errorMessage(err)}`, { cause: err }));
        }
      });
      res.once("error", reject);
    });
    req.once("timeout", () => req.destroy(new Error(`the daemon did not answer within ${timeoutMs} ms`)));
    req.once("error", reject);
    req.end(JSON.stringify({ sandbox, local }));
  });
}
