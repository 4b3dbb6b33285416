// JobService.Logs on the real sandbox service over NATS: a pod, played by a real gRPC client
// with the pod's real token, takes a job and writes stdout and stderr on one Output stream
// while a follower reads each chunk live, stream by stream; the follow ends when the job
// ends. Without follow: what is stored, at once; a follow of an ended job ends at once too;
// an unknown job is NOT_FOUND.
import { call, createLogger, grpc, signPodCapability, signingKey, waitFor } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { connectNats } from "@ephemera/eventstore";
import { testNats } from "../../../../test/support/servers.js";
import { start } from "../index.js";

const logger = createLogger("joblogs-test", "silent");
const nats = testNats("joblogs");
const KEY = signingKey(Buffer.from("a-signing-key-of-at-least-32-bytes-for-jobs"));

const GROUP = pb.JobRunnerGroup.fromJSON({
  name: "e2e", spec: {
    cluster: "local", image: "ubuntu:24.04", jobTimeout: "2m",
    podTemplate: JSON.stringify({ spec: { containers: [{ name: "main", image: "ubuntu:24.04" }] } }), scaling: { manual: { desiredPods: 1 } },
  },
});

interface Followed { chunks: Array<[string, string]>; end?: grpc.ServiceError | "end" }

describe("JobService.Logs", () => {
  let service: Awaited<ReturnType<typeof start>>;
  let nc: Awaited<ReturnType<typeof connectNats>>;
  let jobs: pb.JobServiceClient;
  let agent: pb.JobAgentClient;
  let take: grpc.ClientReadableStream<pb.JobAssignment> | undefined;

  beforeAll(async () => {
    service = await start({
      natsUrl: nats.url, redisUrl: "", prefix: nats.prefix, streamReplicas: 1, listen: "127.0.0.1:0", previewDomain: "preview.test",
      jobs: { listen: "127.0.0.1:0", keys: [KEY] },
    }, logger);
    nc = await connectNats(nats.url, "joblogs-test");
    const api = `127.0.0.1:${service.port}`;
    jobs = new pb.JobServiceClient(api, grpc.credentials.createInsecure());
    agent = new pb.JobAgentClient(`127.0.0.1:${service.jobs!.port}`, grpc.credentials.createInsecure());
    const groups = new pb.JobRunnerGroupServiceClient(api, grpc.credentials.createInsecure());
    await call(groups.apply.bind(groups), { jobRunnerGroup: GROUP, dryRun: false }, 10_000);
    groups.close();
  });
  afterAll(async () => {
    take?.cancel();
    jobs?.close();
    agent?.close();
    await service?.stop();
    await nats.cleanup(nc);
    await nc?.close();
  });

  const follow = (name: string, followIt: boolean): Followed => {
    const got: Followed = { chunks: [] };
    const stream = jobs.logs({ name, follow: followIt });
    stream.on("data", (c: pb.JobLogChunk) => got.chunks.push([c.stream, Buffer.from(c.data).toString()]));
    stream.on("error", (err: grpc.ServiceError) => { got.end = err; });
    stream.on("end", () => { got.end ??= "end"; });
    return got;
  };
  const ended = (f: Followed) => waitFor(() => f.end !== undefined, { timeoutMs: 10_000, what: "the logs stream to end" });
  const text = (f: Followed, stream: string) => f.chunks.filter(([s]) => s === stream).map(([, d]) => d).join("");

  it("streams a running job's stdout and stderr live to a follower, and ends the follow when the job ends", async () => {
    const name = (await call(jobs.submit.bind(jobs), { job: pb.Job.fromJSON({ spec: { runnerGroup: "e2e", namePrefix: "live", command: ["make"] } }) }, 10_000)).name;
    // Followed while still queued: the follow waits for the job to run.
    const live = follow(name, true);
    const token = await signPodCapability(KEY, { group: "e2e", pod: "e2e-p1" }, 60_000);
    const sent: pb.JobAssignment[] = [];
    take = agent.take({ group: "e2e", pod: "e2e-p1", token });
    take.on("data", (a: pb.JobAssignment) => sent.push(a));
    take.on("error", () => undefined);
    await waitFor(() => sent.some((a) => a.job?.name === name), { timeoutMs: 10_000, what: "the job's assignment" });

    let out!: grpc.ClientWritableStream<pb.JobOutputChunk>;
    const acked = new Promise<void>((resolve, reject) => { out = agent.output((err) => (err ? reject(err) : resolve())); });
    const write = (stream: string, data: string) => out.write(pb.JobOutputChunk.fromPartial({ job: name, token, stream, data: Buffer.from(data) }));
    // Each chunk reaches the follower before the next is written: live, not at the end.
    write("stdout", "building\n");
    await waitFor(() => text(live, "stdout") === "building\n", { timeoutMs: 10_000, what: "the first stdout chunk at the follower" });
    write("stderr", "warning: x\n");
    await waitFor(() => text(live, "stderr") === "warning: x\n", { timeoutMs: 10_000, what: "the stderr chunk at the follower" });
    write("stdout", "done\n");
    await waitFor(() => text(live, "stdout") === "building\ndone\n", { timeoutMs: 10_000, what: "the second stdout chunk at the follower" });
    expect(live.end).toBeUndefined();
    out.end();
    await acked;

    await call(agent.finish.bind(agent), pb.FinishJobRequest.fromPartial({ job: name, token, reason: "exited", exitCode: 0 }), 10_000);
    await ended(live);
    expect(live.end).toBe("end");
    expect(live.chunks).toEqual([["stdout", "building\n"], ["stderr", "warning: x\n"], ["stdout", "done\n"]]);

    // Without follow: what is stored, in order; a follow of the ended job ends at once with the same.
    const stored = follow(name, false);
    await ended(stored);
    expect(stored).toEqual({ end: "end", chunks: [["stdout", "building\n"], ["stderr", "warning: x\n"], ["stdout", "done\n"]] });
    const again = follow(name, true);
    await ended(again);
    expect(again.end).toBe("end");
    expect(text(again, "stdout")).toBe("building\ndone\n");
    expect(text(again, "stderr")).toBe("warning: x\n");
  });

  it("answers what is there for a queued job without follow, and NOT_FOUND for an unknown one", async () => {
    const name = (await call(jobs.submit.bind(jobs), { job: pb.Job.fromJSON({ spec: { runnerGroup: "e2e", namePrefix: "waiting", command: ["make"] } }) }, 10_000)).name;
    const now = follow(name, false);
    await ended(now);
    expect(now).toEqual({ end: "end", chunks: [] });
    const unknown = follow("nope-00000000", false);
    await ended(unknown);
    expect(unknown.end).toMatchObject({ code: grpc.status.NOT_FOUND, details: "job nope-00000000 not found" });
  });
});
