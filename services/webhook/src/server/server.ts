// The webhook's HTTPS server: `POST /mutate-pods` answers AdmissionReviews, `GET /healthz`
// says it is up. The API server calls it with a deadline of a few seconds and, with
// failurePolicy Ignore, creates the pod unmutated when it does not answer.
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "@ephemera/kit";
import type { InjectOptions } from "../inject/inject.js";
import type { ReviewOutcome, WebhookMetrics } from "./metrics.js";
import { HEALTH_PATH, MUTATE_PATH } from "./paths.js";
import { answerReview, isMalformedReviewError } from "./review.js";

/** An AdmissionReview carries one object of at most the API server's 3 MiB, and its old version. */
const MAX_BODY_BYTES = 7 * 1024 * 1024;

export interface WebhookServerOptions {
  /** host:port; port 0 picks a free one. */
  listen: string;
  tls: { cert: string; key: string };
  inject: InjectOptions;
  logger: Logger;
  metrics?: WebhookMetrics;
}

export interface WebhookServer {
  /** `https://host:port`. */
  url: string;
  port: number;
  stop(): Promise<void>;
}

class HttpError extends Error {
  constructor(readonly status: number, message: string, readonly headers: Record<string, string> = {}) { super(message); }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        req.removeAllListeners("data");
        req.resume();
        reject(new HttpError(413, `the body is over ${MAX_BODY_BYTES} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

function reply(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}, type = "text/plain; charset=utf-8"): void {
  res.writeHead(status, { "Content-Type": type, "Content-Length": Buffer.byteLength(body), ...headers });
  res.end(body);
}

async function mutate(req: IncomingMessage, res: ServerResponse, options: WebhookServerOptions): Promise<void> {
  const startedAt = process.hrtime.bigint();
  try {
    // Answered first: `metrics?.answered(await …)` would skip the answer itself without metrics.
    const outcome = await respond(req, res, options);
    options.metrics?.answered(outcome, startedAt);
  } catch (err) {
    options.metrics?.answered(err instanceof HttpError ? "refused" : "error", startedAt);
    throw err;
  }
}

/** Answers one review; says what was done. */
async function respond(req: IncomingMessage, res: ServerResponse, options: WebhookServerOptions): Promise<ReviewOutcome> {
  if (req.method !== "POST") throw new HttpError(405, `${MUTATE_PATH} takes POST`, { Allow: "POST" });
  const type = (req.headers["content-type"] ?? "application/json").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/json") throw new HttpError(415, `the body must be application/json, not ${type}`);
  const text = (await readBody(req)).toString("utf8");
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new HttpError(400, `malformed AdmissionReview: the body is not JSON (${(err as Error).message})`);
  }
  let answer;
  try {
    answer = answerReview(body, options.inject);
  } catch (err) {
    if (isMalformedReviewError(err)) throw new HttpError(400, err.message);
    throw err;
  }
  const { outcome, pod } = answer;
  const warnings = answer.review.response.warnings;
  if (outcome === "injected") options.logger.info({ pod, uid: answer.review.response.uid }, "injected the router");
  else if (warnings) options.logger.warn({ pod, outcome, warning: warnings[0] }, "not injected");
  else options.logger.debug({ pod, outcome }, "left as it is");
  reply(res, 200, JSON.stringify(answer.review), {}, "application/json");
  return outcome;
}

export async function startWebhookServer(options: WebhookServerOptions): Promise<WebhookServer> {
  const i = options.listen.lastIndexOf(":");
  const host = options.listen.slice(0, i).replace(/^\[(.*)\]$/, "$1");
  const portText = options.listen.slice(i + 1);
  if (i <= 0 || !host || !/^\d+$/.test(portText)) throw new Error(`EPHEMERA_WEBHOOK_LISTEN must be host:port (e.g. 127.0.0.1:7781), got "${options.listen}"`);
  const server: Server = createServer({ cert: options.tls.cert, key: options.tls.key }, (req, res) => {
    const path = new URL(req.url ?? "/", "https://webhook").pathname;
    const handled = path === MUTATE_PATH ? mutate(req, res, options)
      : path === HEALTH_PATH && (req.method === "GET" || req.method === "HEAD") ? Promise.resolve(reply(res, 200, "ok\n"))
      : Promise.reject(new HttpError(404, `no ${path} here: AdmissionReviews go to POST ${MUTATE_PATH}`));
    handled.catch((err: unknown) => {
      if (err instanceof HttpError) return reply(res, err.status, `${err.message}\n`, err.headers);
      options.logger.error({ err }, "answering a review failed");
      reply(res, 500, "the webhook failed to answer; see its log\n");
    });
  });
  // A slow or stuck client holds no connection for long: the API server's own deadline is shorter.
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(Number(portText), host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
    port,
    stop: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}
