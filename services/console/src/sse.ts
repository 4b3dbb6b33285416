// Server-Sent Events: the framing (pure) and a stream on an HTTP response that keeps the
// connection alive with a comment every 15 s and tells its owner when the browser has gone.
import type { ServerResponse } from "node:http";

/** Pure: one event, `event:` name and one `data:` line of JSON (JSON.stringify never emits a newline). */
export function sseFrame(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** Pure: the stream's opening: how long the browser waits before reconnecting. */
export const SSE_PREAMBLE = "retry: 2000\n\n";
export const SSE_PING = ": ping\n\n";

export interface SseStream {
  send(event: string, data: unknown): void;
  /** Sends `event: error` `{error, code}` and closes. */
  fail(body: { error: string; code: string }): void;
  close(): void;
  readonly closed: boolean;
  /** Runs once the stream has closed, by either side. */
  onClose(cleanup: () => void): void;
}

export function openSse(res: ServerResponse, headers: Record<string, string>, pingMs = 15_000): SseStream {
  res.writeHead(200, {
    ...headers,
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-store",
    Connection: "keep-alive",
    // Proxies (nginx) would otherwise buffer the stream.
    "X-Accel-Buffering": "no",
  });
  res.write(SSE_PREAMBLE);
  const cleanups: Array<() => void> = [];
  let closed = false;
  const ping = setInterval(() => res.write(SSE_PING), pingMs);
  const finish = () => {
    if (closed) return;
    closed = true;
    clearInterval(ping);
    for (const cleanup of cleanups.splice(0)) cleanup();
  };
  // The response closes when it ends or when the browser goes away, whichever comes first.
  res.on("close", finish);
  const stream: SseStream = {
    send: (event, data) => { if (!closed) res.write(sseFrame(event, data)); },
    fail: (body) => {
      if (closed) return;
      res.write(sseFrame("error", body));
      stream.close();
    },
    close: () => {
      if (closed) return;
      finish();
      res.end();
    },
    get closed() { return closed; },
    onClose: (cleanup) => { if (closed) cleanup(); else cleanups.push(cleanup); },
  };
  return stream;
}
