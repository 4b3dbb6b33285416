// EventService.Watch: the audit stream from a position (after_position), a time (since_ms)
// or, given neither, the last hour, then live with `follow`. Each record carries its
// commit's position to resume from. The store is read only as fast as the client takes
// records: a full gRPC buffer stops the reading until it drains.
import type * as pb from "@ephemera/proto";
import { redact } from "@ephemera/events";
import type { Commit, FollowOptions, RecordedEvent } from "@ephemera/eventstore";
import { toServiceError, type grpc } from "@ephemera/kit";
import type { SandboxCore } from "../service.js";

/** What a watch given neither a position nor a time starts from: recent history, as `tail` shows the last lines. */
export const DEFAULT_WATCH_WINDOW_MS = 60 * 60_000;

type WatchCall = grpc.ServerWritableStream<pb.WatchEventsRequest, pb.EventRecord>;

/** Where the store starts reading for `request`. */
export function watchStart(request: Pick<pb.WatchEventsRequest, "afterPosition" | "sinceMs">, now: number): Pick<FollowOptions, "from" | "since"> {
  if (request.afterPosition !== undefined) return { from: request.afterPosition };
  return { since: new Date(now - (request.sinceMs || DEFAULT_WATCH_WINDOW_MS)) };
}

export function watchEvents(core: SandboxCore): (call: WatchCall) => void {
  return (call) => {
    const { follow, sandbox, typeGlob } = call.request;
    const pattern = typeGlob ? new RegExp(`^${typeGlob.split("*").map(escapeRegExp).join(".*")}$`) : undefined;
    const mine = sandbox ? sandboxFilter(core, sandbox) : () => true;
    let closed = false;
    const sub = core.followEvents(watchStart(call.request, core.nowMs()), async (commit: Commit) => {
      for (const e of commit.events) {
        if (closed) return;
        if (!mine(e) || (pattern && !pattern.test(e.type))) continue;
        if (!call.write({ json: JSON.stringify(redact(e)), position: commit.position })) await drained(call);
      }
    });
    const end = () => {
      closed = true;
      void sub.stop();
    };
    call.on("cancelled", end);
    call.on("close", end);
    sub.caughtUp.then(async () => {
      if (follow) return;
      await sub.stop();
      call.end();
    }, (err: unknown) => call.emit("error", toServiceError(err)));
  };
}

/** Resolves once the stream takes writes again, or is gone. */
function drained(call: WatchCall): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      for (const event of ["drain", "cancelled", "close"]) call.off(event, done);
      resolve();
    };
    for (const event of ["drain", "cancelled", "close"]) call.on(event, done);
  });
}

/**
 * Whether an event is the sandbox's: its own, its workflows' and runs' (by routing key: the
 * current one from the read model, an earlier incarnation's from its `created` event when
 * the watch starts before it), and the tunnel sessions that served it.
 */
function sandboxFilter(core: SandboxCore, sandbox: string): (e: RecordedEvent) => boolean {
  const routingKeys = new Set<string>();
  const current = core.sandboxes.get(sandbox)?.state;
  if (current && current.status !== "none") routingKeys.add(current.routingKey);
  const sessions = new Set<string>();
  return (e) => {
    if (e.aggregate === "sandbox" && e.subject === sandbox && e.type === "ephemera.sandbox.created.v1") {
      routingKeys.add((e.data as { routingKey: string }).routingKey);
    }
    if (e.type === "ephemera.tunnel.session_opened.v1" && (e.data as { sandboxes?: string[] }).sandboxes?.includes(sandbox)) {
      sessions.add(e.subject);
    }
    return e.aggregate === "sandbox" ? e.subject === sandbox
      : e.aggregate === "tunnel" ? sessions.has(e.subject)
      : routingKeys.has(e.subject.split(".")[0]!);
  };
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
