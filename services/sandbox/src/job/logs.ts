// JobService.Logs: a job's output, stdout and stderr apart, from the log store the JobAgent
// server's Output writes (agent.ts). Without `follow`: what is stored, in the order it was
// stored. With `follow`: that, then what comes, until the job has ended (its logs' end
// records, written when it ends) or the caller goes; a follow is bounded (the job's group
// bounds how long a job runs, this bounds the wait of a job that never starts).
import type * as pb from "@ephemera/proto";
import type { LogEntry, LogFollower, LogStore } from "@ephemera/eventstore";
import { grpc, toServiceError } from "@ephemera/kit";
import { JOB_STREAMS, jobStreamLogId, type JobStream } from "./agent.js";
import { isEnded, type JobRecord } from "./state.js";

export const DEFAULT_JOB_FOLLOW_LIMIT_MS = 8 * 24 * 3_600_000;
/** A stored entry goes out in pieces of at most this much. */
const PIECE = 64 * 1024;

export interface JobLogsDeps {
  record: (name: string) => JobRecord;
  logs: () => LogStore;
  /** Calls back on each change of a job (to drain a follow whose job ended without its logs' end record). */
  onJobChange: (listener: (job: JobRecord) => void) => () => void;
  followLimitMs?: number;
}

type Call = grpc.ServerWritableStream<pb.GetJobLogsRequest, pb.JobLogChunk>;

export function jobLogs(deps: JobLogsDeps): (call: Call) => void {
  return (call) => {
    serve(deps, call).catch((err: unknown) => call.emit("error", toServiceError(err)));
  };
}

async function serve(deps: JobLogsDeps, call: Call): Promise<void> {
  const { name, follow } = call.request;
  const job = deps.record(name);
  const logs = deps.logs();
  const send = (stream: JobStream, e: LogEntry) => {
    for (let i = 0; i < e.data.length; i += PIECE) call.write({ stream, data: e.data.subarray(i, i + PIECE) });
  };
  if (!follow) {
    const stored = await Promise.all(JOB_STREAMS.map(async (stream) =>
      (await logs.entries(jobStreamLogId(name, stream))).map((e) => ({ stream, e }))));
    // Stored order across the two streams: by time, stdout first on a tie.
    for (const { stream, e } of stored.flat().sort((a, b) => a.e.time - b.e.time)) send(stream, e);
    call.end();
    return;
  }
  const followers: LogFollower[] = JOB_STREAMS.map((stream) => logs.follow(jobStreamLogId(name, stream), {}, (e) => send(stream, e)));
  const drain = () => { for (const f of followers) f.drain(); };
  let limited = false;
  const stopAll = () => { for (const f of followers) void f.stop(); };
  const limit = setTimeout(() => { limited = true; stopAll(); }, deps.followLimitMs ?? DEFAULT_JOB_FOLLOW_LIMIT_MS);
  const unwatch = deps.onJobChange((changed) => { if (changed.name === name && isEnded(changed)) drain(); });
  call.on("cancelled", stopAll);
  if (isEnded(job)) drain();
  try {
    await Promise.all(followers.map((f) => f.done));
  } finally {
    clearTimeout(limit);
    unwatch();
  }
  if (call.cancelled) return;
  if (limited) {
    call.emit("error", { code: grpc.status.DEADLINE_EXCEEDED, details: `following job ${name}'s output: the follow reached its bound; follow again` });
    return;
  }
  call.end();
}
