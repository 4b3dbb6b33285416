// The LogService: a resource's step logs, as stored so far or followed while the steps run
// (GetLogsRequest.follow). A follow ends when no more runs can come, when the client goes,
// or at the server's bound (DEADLINE_EXCEEDED): never waits for ever.
import type * as pb from "@ephemera/proto";
import type { LogEntry, LogFollower } from "@ephemera/eventstore";
import { grpc, toServiceError } from "@ephemera/kit";
import type { SandboxCore } from "../service.js";
import type { LogRun } from "./select.js";

export interface LogServiceOptions {
  /** How long one follow may last (default 6 h); the client may follow again after. */
  followLimitMs?: number;
}

export const DEFAULT_FOLLOW_LIMIT_MS = 6 * 3_600_000;
/** A stored entry goes out in pieces of at most this much. */
const PIECE = 64 * 1024;

type Call = grpc.ServerWritableStream<pb.GetLogsRequest, pb.LogChunk>;

export function logService(core: SandboxCore, { followLimitMs = DEFAULT_FOLLOW_LIMIT_MS }: LogServiceOptions = {}): pb.LogServiceServer {
  return { get: (call) => void serve(core, call, followLimitMs) };
}

async function serve(core: SandboxCore, call: Call, followLimitMs: number): Promise<void> {
  const { sandbox, resource, step, phase, attempt, follow, sinceMs } = call.request;
  const since = sinceMs > 0 ? core.nowMs() - sinceMs : 0;
  const filter = { step, phase, attempt };
  let over: "cancelled" | "limit" | undefined;
  let following: { runId: string; follower: LogFollower } | undefined;
  let wake: (() => void) | undefined;
  let changed: boolean;
  const onChange = () => {
    changed = true;
    wake?.();
    // A run whose end record never came (its runner died) ends when its workflow says so.
    if (following && core.runEnded(following.runId)) following.follower.drain();
  };
  const stop = (why: "cancelled" | "limit") => {
    over ??= why;
    void following?.follower.stop();
    wake?.();
  };
  const unwatch = follow ? core.watch(sandbox, onChange) : () => undefined;
  const limit = follow ? setTimeout(() => stop("limit"), followLimitMs) : undefined;
  call.on("cancelled", () => stop("cancelled"));
  const out = writer(call);
  const sendEntry = (run: LogRun, e: LogEntry) => {
    const time = new Date(e.time).toISOString();
    for (let i = 0; i < e.data.length; i += PIECE) out.send({ ...opening(run), data: e.data.subarray(i, i + PIECE), time });
  };
  try {
    // The selection reads the workflows: first catch up with writes made through any replica.
    await core.readYourWrites();
    const seen = new Set<string>();
    while (!over) {
      changed = false;
      const selection = await core.logRuns(sandbox, resource, filter);
      const run = selection.runs.find((r) => !seen.has(r.runId));
      if (run) {
        seen.add(run.runId);
        out.send(opening(run));
        if (!follow || run.ended) {
          for (const e of await core.logEntries(run.runId, { since })) sendEntry(run, e);
        } else {
          const follower = core.followLog(run.runId, { since }, (e) => sendEntry(run, e));
          following = { runId: run.runId, follower };
          if (core.runEnded(run.runId)) follower.drain();
          await follower.done;
          following = undefined;
        }
        continue;
      }
      if (!follow || !selection.more) break;
      // Wait for the next change of the sandbox's workflows: a step dispatched, a retry, an end.
      if (!changed) await new Promise<void>((resolve) => { wake = resolve; });
      wake = undefined;
    }
    await out.flushed();
    if (over === "limit") {
      call.emit("error", {
        code: grpc.status.DEADLINE_EXCEEDED,
        details: `stopped following the logs after ${Math.round(followLimitMs / 60_000)} min (the server's bound); the steps still run: follow them again`,
      });
    } else if (!over) {
      call.end();
    }
  } catch (err) {
    if (!over) call.emit("error", toServiceError(err));
  } finally {
    unwatch();
    clearTimeout(limit);
    await following?.follower.stop();
  }
}

const opening = (run: LogRun): pb.LogChunk => ({
  step: run.step, phase: run.phase, attempt: run.attempt, runId: run.runId, data: Buffer.alloc(0), time: "",
});

/** Writes in order, waiting while the client's buffer is full (a slow reader holds the stream, not the server's memory). */
function writer(call: Call): { send(chunk: pb.LogChunk): void; flushed(): Promise<void> } {
  let chain = Promise.resolve();
  let gone = false;
  call.on("cancelled", () => { gone = true; });
  return {
    send: (chunk) => {
      chain = chain.then(() => new Promise<void>((resolve) => {
        if (gone || call.write(chunk)) return resolve();
        const done = () => { call.off("drain", done); call.off("cancelled", done); resolve(); };
        call.on("drain", done);
        call.on("cancelled", done);
      }));
    },
    flushed: () => chain,
  };
}
