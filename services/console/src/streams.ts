// The live views, each an SSE stream on one upstream: the sandbox list (listed again every
// ~1 s while the stream is open, and diffed), one sandbox (SandboxService.Watch), a step's
// log (LogService.Get) and the events (EventService.Watch). Each ends its upstream, or its
// poller, as soon as the browser goes away.
import { TextDecoder } from "node:util";
import * as pb from "@ephemera/proto";
import type { Logger } from "@ephemera/kit";
import type { ConsoleApi, Upstream } from "./api.js";
import { errorResponse } from "./errors.js";
import { LastEvents, eventOf, inWindow, sinceMs, type ConsoleEvent, type EventQuery } from "./events.js";
import { diffRows, sandboxList, type Row, type SandboxFilter } from "./sandboxes.js";
import type { SseStream } from "./sse.js";

export interface StreamContext {
  api: ConsoleApi;
  token: string | undefined;
  sse: SseStream;
  logger: Logger;
  /** Counts what the console holds open for the browser (upstream calls and pollers), for its tests and its log. */
  track(kind: "upstream" | "poller"): () => void;
}

/** Ends the stream with `event: error` when the upstream fails; closes it when it ends. */
function follow(ctx: StreamContext, upstream: Upstream, kind: "upstream" | "poller" = "upstream", onEnd?: () => void): void {
  const untrack = ctx.track(kind);
  ctx.sse.onClose(() => upstream.cancel());
  upstream.done.then(
    (how) => { if (how === "end") onEnd?.(); ctx.sse.close(); },
    (err: unknown) => ctx.sse.fail(errorResponse(err).body),
  ).finally(untrack);
}

export function sandboxListStream(ctx: StreamContext, filter: SandboxFilter, pollMs: number): void {
  const untrack = ctx.track("poller");
  let shown = new Map<string, Row>();
  let counts = "";
  let timer: NodeJS.Timeout | undefined;
  let first = true;
  ctx.sse.onClose(() => { clearTimeout(timer); untrack(); });
  const poll = async () => {
    try {
      const list = sandboxList(await ctx.api.listSandboxes(ctx.token), filter);
      if (ctx.sse.closed) return;
      if (first) {
        first = false;
        ctx.sse.send("snapshot", list);
      } else {
        for (const change of diffRows(shown, list.sandboxes)) {
          if (change.kind === "upsert") ctx.sse.send("upsert", { row: change.row });
          else ctx.sse.send("remove", { name: change.name });
        }
        const now = JSON.stringify({ total: list.total, statuses: list.statuses });
        if (now !== counts) ctx.sse.send("counts", { total: list.total, statuses: list.statuses });
      }
      shown = new Map(list.sandboxes.map((row) => [row.name, row]));
      counts = JSON.stringify({ total: list.total, statuses: list.statuses });
      timer = setTimeout(() => void poll(), pollMs);
    } catch (err) {
      ctx.sse.fail(errorResponse(err).body);
    }
  };
  void poll();
}

export function sandboxStream(ctx: StreamContext, name: string): void {
  const upstream = ctx.api.watchSandbox(ctx.token, name, (view) => ctx.sse.send("sandbox", pb.SandboxView.toJSON(view)));
  // The API ends a watch once the sandbox is gone.
  follow(ctx, upstream, "upstream", () => ctx.sse.send("deleted", { name }));
}

export function logStream(ctx: StreamContext, request: pb.GetLogsRequest): void {
  // One decoder per run: a character split across two chunks is decoded whole.
  const decoders = new Map<string, TextDecoder>();
  const upstream = ctx.api.streamLogs(ctx.token, request, (chunk) => {
    const run = { attempt: chunk.attempt, runId: chunk.runId, step: chunk.step, phase: chunk.phase };
    if (!chunk.data.length && !chunk.time) {
      ctx.sse.send("run", run);
      return;
    }
    let decoder = decoders.get(chunk.runId);
    if (!decoder) decoders.set(chunk.runId, (decoder = new TextDecoder("utf-8")));
    ctx.sse.send("chunk", { ...run, time: chunk.time, text: decoder.decode(chunk.data, { stream: true }) });
  });
  follow(ctx, upstream, "upstream", () => ctx.sse.send("end", {}));
}

/**
 * The last `limit` events, then each new one. The API's watch has no "caught up" mark, so the
 * snapshot is a watch without follow (from the query's `since`, else the API's default window),
 * and the live part a follow that resumes after the snapshot's last stream position.
 */
export function eventStream(ctx: StreamContext, query: EventQuery): void {
  const request = { sandbox: query.sandbox, typeGlob: query.type, sinceMs: sinceMs(query, Date.now()) };
  const last = new LastEvents(query.limit);
  let lastPosition = -1;
  const position = (e: ConsoleEvent) => (typeof e["position"] === "number" ? e["position"] : undefined);
  const replay = ctx.api.watchEvents(ctx.token, { ...request, follow: false }, (record) => {
    const event = eventOf(record);
    if (!event) return;
    lastPosition = Math.max(lastPosition, position(event) ?? -1);
    if (inWindow(event, query)) last.push(event);
  });
  const untrack = ctx.track("upstream");
  ctx.sse.onClose(() => replay.cancel());
  replay.done.then((how) => {
    if (how !== "end" || ctx.sse.closed) return;
    ctx.sse.send("snapshot", { events: last.list() });
    // After the snapshot's last event; with none, the same window again (what it matched is new).
    const resume = lastPosition >= 0 ? { afterPosition: lastPosition } : {};
    const live = ctx.api.watchEvents(ctx.token, { ...request, ...resume, follow: true }, (record) => {
      const event = eventOf(record);
      if (!event || (position(event) ?? Infinity) <= lastPosition || !inWindow(event, query)) return;
      ctx.sse.send("event", { event });
    });
    follow(ctx, live);
  }, (err: unknown) => ctx.sse.fail(errorResponse(err).body)).finally(untrack);
}
