// A job's artifacts: the files of its `uploadArtifact` its pod sends with PutArtifact, kept in
// the output journal (the JetStream Object Store bucket `<prefix>_outputs`) under
// `artifact/<job><path>` and recorded by `ephemera.job.artifact_stored.v1` (path, size,
// sha256, the entry's meta). Each file is bounded (EPHEMERA_JOB_ARTIFACT_MAX, 64 MiB by
// default): a larger one is refused whole, RESOURCE_EXHAUSTED, and nothing is stored.
// `@stdout` and `@stderr` are the job's output streams, read from the log store.
import type * as pb from "@ephemera/proto";
import type { ValueJournal } from "@ephemera/events";
import type { LogStore } from "@ephemera/eventstore";
import { NotFoundError, ValidationError, grpc } from "@ephemera/kit";
import type { Jobs } from "./commands.js";
import type { JobRecord } from "./state.js";

export const DEFAULT_ARTIFACT_MAX = 64 * 1024 * 1024;
/** The pseudo-paths of a job's output streams. */
export const OUTPUT_ARTIFACTS = ["@stdout", "@stderr"] as const;
/** Where one of a job's output streams is kept in the log store (besides `job.<name>`, both together). */
/** Where one of a job's streams is kept apart (anything but stderr is stdout): @stdout, @stderr and JobService.Logs read these. */
export const jobStreamLogId = (job: string, stream: string) => `job.${job}.${stream === "stderr" ? "stderr" : "stdout"}`;
export const artifactKey = (job: string, path: string) => `artifact/${job}${path}`;

const invalid = (description: string) => new ValidationError([{ field: "path", description, rule: "upload-artifact" }], "PutArtifact");

/** Refused for its size: answered RESOURCE_EXHAUSTED. */
export class ArtifactTooLargeError extends Error {}

export interface PutArtifactDeps {
  jobs: Jobs;
  values: ValueJournal;
  /** The job running on the pod the token names (PermissionDenied otherwise). */
  runningJob: (job: string, token: string) => Promise<JobRecord>;
  maxBytes: number;
}

/** Reads one artifact's chunks, checks job, pod, path and size, stores it and records it. */
export async function putArtifact(chunks: AsyncIterable<pb.ArtifactChunk>, deps: PutArtifactDeps): Promise<pb.PutArtifactResponse> {
  let first: pb.ArtifactChunk | undefined;
  let job: JobRecord | undefined;
  const parts: Buffer[] = [];
  let size = 0;
  let tooLarge = false;
  for await (const chunk of chunks) {
    if (!first) {
      first = chunk;
      job = await deps.runningJob(chunk.job, chunk.token);
      if (!job.spec.uploadArtifact.some((a) => a.path === chunk.path)) {
        throw invalid(`${chunk.path || "(no path)"} is not one of job ${job.name}'s uploadArtifact paths (${job.spec.uploadArtifact.map((a) => a.path).join(", ") || "none"})`);
      }
    } else if (chunk.job !== first.job || chunk.path !== first.path) {
      throw invalid(`one PutArtifact call carries one file: ${first.path} of job ${first.job}, not ${chunk.path} of ${chunk.job}`);
    }
    size += chunk.data.length;
    // Past the bound the rest is read and dropped, so the pod gets the answer, not a reset.
    if (size > deps.maxBytes) tooLarge = true;
    if (!tooLarge) parts.push(Buffer.from(chunk.data));
  }
  if (!first || !job) throw invalid("no chunk was sent");
  if (tooLarge) throw new ArtifactTooLargeError(`artifact ${first.path} of job ${job.name} is ${size} bytes, over the limit of ${deps.maxBytes} bytes (EPHEMERA_JOB_ARTIFACT_MAX): not stored`);
  const data = Buffer.concat(parts);
  const sha256 = await deps.values.put(artifactKey(job.name, first.path), data);
  const meta = job.spec.uploadArtifact.find((a) => a.path === first.path)?.meta ?? {};
  await deps.jobs.run({ kind: "artifact", name: job.name, pod: job.pod, path: first.path, size, sha256, meta }, { source: "sandbox", command: `artifact:${job.pod}` });
  return { size, sha256 };
}

/** Answers a PutArtifact call: the size bound as RESOURCE_EXHAUSTED, the rest as the kit maps them. */
export function artifactStatus(err: unknown, toServiceError: (err: unknown) => Partial<grpc.StatusObject>): Partial<grpc.StatusObject> {
  return err instanceof ArtifactTooLargeError ? { code: grpc.status.RESOURCE_EXHAUSTED, details: err.message } : toServiceError(err);
}

const CHUNK = 256 * 1024;

/** The bytes of one of a job's artifacts, in chunks; NotFound names the job's artifacts. */
export async function downloadArtifact(job: JobRecord, path: string, values: ValueJournal, logs: LogStore): Promise<Buffer[]> {
  let data: Buffer;
  if (path === "@stdout" || path === "@stderr") {
    data = await logs.read(jobStreamLogId(job.name, path === "@stdout" ? "stdout" : "stderr"));
  } else {
    const stored = job.artifacts?.find((a) => a.path === path);
    if (!stored) {
      const have = [...OUTPUT_ARTIFACTS, ...(job.artifacts ?? []).map((a) => a.path)].join(", ");
      throw new NotFoundError(`job ${job.name} has no artifact ${path || "(no path)"}: it has ${have}`);
    }
    data = await values.get(artifactKey(job.name, path), stored.sha256);
  }
  const chunks: Buffer[] = [];
  for (let at = 0; at < data.length; at += CHUNK) chunks.push(data.subarray(at, at + CHUNK));
  return chunks;
}

