// What the console's integration tests share: requests with the raw path and headers as
// sent, an SSE reader that waits for events with a deadline, a fixture of the built page, and
// a logger whose lines the test reads.
import { writeFileSync, mkdirSync, mkdtempSync } from "node:fs";
import { request, type IncomingHttpHeaders } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { brotliCompressSync, gzipSync } from "node:zlib";
import { createLogger, waitFor, type Logger } from "@ephemera/kit";

export interface Answer { status: number; headers: IncomingHttpHeaders; body: Buffer; text: string; json: unknown }

/** One request to the console, the path sent exactly as given (no normalisation). */
export function http(base: string, method: string, path: string, options: { headers?: Record<string, string>; body?: unknown } = {}): Promise<Answer> {
  const url = new URL(base);
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = request({
      host: url.hostname, port: url.port, method, path,
      headers: { ...(payload ? { "Content-Type": "application/json" } : {}), ...options.headers },
    }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (d: Buffer) => parts.push(d));
      res.on("end", () => {
        const body = Buffer.concat(parts);
        const text = body.toString("utf8");
        let json: unknown;
        try { json = JSON.parse(text); } catch { json = undefined; }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, json });
      });
    });
    req.on("error", reject);
    req.end(payload);
  });
}

export interface SseEvent { event: string; data: unknown }

export interface SseReader {
  status: number;
  headers: IncomingHttpHeaders;
  events: SseEvent[];
  /** The raw text received so far. */
  raw(): string;
  /** Waits for an event matching `match` (after the first `from` events) and returns it. */
  next(match: (e: SseEvent) => boolean, what: string, timeoutMs?: number, from?: number): Promise<SseEvent>;
  ended: Promise<void>;
  /** The browser goes away. */
  close(): void;
}

export function sse(base: string, path: string, headers: Record<string, string> = {}): Promise<SseReader> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, headers: { Accept: "text/event-stream", ...headers } }, (res) => {
      let raw = "";
      let pending = "";
      const events: SseEvent[] = [];
      let ended = false;
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        raw += d;
        pending += d;
        let i: number;
        while ((i = pending.indexOf("\n\n")) >= 0) {
          const frame = pending.slice(0, i);
          pending = pending.slice(i + 2);
          const lines = frame.split("\n");
          const event = lines.find((l) => l.startsWith("event: "))?.slice(7);
          const data = lines.find((l) => l.startsWith("data: "))?.slice(6);
          if (event !== undefined && data !== undefined) events.push({ event, data: JSON.parse(data) });
        }
      });
      const endedP = new Promise<void>((r) => { res.on("end", () => { ended = true; r(); }); res.on("close", () => { ended = true; r(); }); });
      resolve({
        status: res.statusCode ?? 0, headers: res.headers, events, raw: () => raw, ended: endedP,
        next: (match, what, timeoutMs = 20_000, from = 0) => waitFor(() => {
          const found = events.slice(from).find(match);
          if (!found && ended) throw new Error(`the stream ended without ${what}: ${raw.slice(-2000)}`);
          return found;
        }, { what, timeoutMs }),
        close: () => req.destroy(),
      });
    });
    req.on("error", reject);
    req.end();
  });
}

/** A built page as the bundle lays it out: index.html and a hashed script with its .gz and .br; beside the root, a file no request may read. */
export function webFixture(): { root: string; script: string; secret: string } {
  const dir = mkdtempSync(join(tmpdir(), "eph-console-web-"));
  const root = join(dir, "web");
  mkdirSync(join(root, "assets"), { recursive: true });
  writeFileSync(join(root, "index.html"), '<!doctype html><html><head><script type="module" src="/assets/app-abc123.js"></script></head><body><div id="root"></div></body></html>\n');
  const script = `console.log(${JSON.stringify("ephemera console ".repeat(200))});\n`;
  writeFileSync(join(root, "assets", "app-abc123.js"), script);
  writeFileSync(join(root, "assets", "app-abc123.js.gz"), gzipSync(script));
  writeFileSync(join(root, "assets", "app-abc123.js.br"), brotliCompressSync(script));
  writeFileSync(join(root, "assets", "app-abc123.css"), "body{margin:0}\n");
  const secret = "not-for-the-browser";
  writeFileSync(join(dir, "secret.txt"), secret);
  return { root, script, secret };
}

/** A logger at debug whose lines the test can read. */
export function capturedLogger(service: string): { logger: Logger; text(): string } {
  const lines: string[] = [];
  const sink = new Writable({ write(chunk: Buffer, _enc, done) { lines.push(chunk.toString()); done(); } });
  return { logger: createLogger(service, "debug", sink), text: () => lines.join("") };
}
