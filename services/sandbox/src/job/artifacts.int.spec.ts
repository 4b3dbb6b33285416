// Job artifacts on the real sandbox service and NATS, over real gRPC: a pod (with its real
// pod token) uploads a binary file of its job's uploadArtifact; the event names its path,
// size, sha256 and meta; ArtifactService.Download returns it byte for byte, and `job get`
// lists it. A file over the bound is refused RESOURCE_EXHAUSTED naming the path and the
// limit, and nothing is stored. `@stdout` and `@stderr` come back apart.
import { createHash, randomBytes } from "node:crypto";
import { call, createLogger, grpc, signPodCapability, signingKey, waitFor } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { decode } from "@ephemera/events";
import { JetStreamEventStore, JetStreamValueStore, connectNats } from "@ephemera/eventstore";
import { artifactKey } from "./artifacts.js";
import { testNats } from "../../../../test/support/servers.js";
import { start } from "../index.js";

const logger = createLogger("artifacts-test", "silent");
const nats = testNats("jobartifacts");
const KEY = signingKey(Buffer.from("a-signing-key-of-at-least-32-bytes-for-jobs"));
const MAX = 300_000;

describe("job artifacts", () => {
  let service: Awaited<ReturnType<typeof start>>;
  let nc: Awaited<ReturnType<typeof connectNats>>;
  let jobs: pb.JobServiceClient;
  let artifacts: pb.ArtifactServiceClient;
  let agent: pb.JobAgentClient;
  let take: grpc.ClientReadableStream<pb.JobAssignment> | undefined;

  beforeAll(async () => {
    service = await start({
      natsUrl: nats.url, redisUrl: "", prefix: nats.prefix, streamReplicas: 1, listen: "127.0.0.1:0", previewDomain: "preview.test",
      jobs: { listen: "127.0.0.1:0", keys: [KEY], podLostGraceMs: 60_000, artifactMaxBytes: MAX },
    }, logger);
    nc = await connectNats(nats.url, "artifacts-test");
    const api = `127.0.0.1:${service.port}`;
    jobs = new pb.JobServiceClient(api, grpc.credentials.createInsecure());
    artifacts = new pb.ArtifactServiceClient(api, grpc.credentials.createInsecure());
    agent = new pb.JobAgentClient(`127.0.0.1:${service.jobs!.port}`, grpc.credentials.createInsecure());
    const groups = new pb.JobRunnerGroupServiceClient(api, grpc.credentials.createInsecure());
    await call(groups.apply.bind(groups), {
      jobRunnerGroup: pb.JobRunnerGroup.fromJSON({ name: "art", spec: {
        cluster: "local", image: "ubuntu:24.04", podTemplate: JSON.stringify({ spec: { containers: [{ name: "main", image: "ubuntu:24.04" }] } }),
        scaling: { manual: { desiredPods: 1 } },
      } }), dryRun: false,
    }, 10_000);
    groups.close();
  });
  afterAll(async () => {
    take?.cancel();
    for (const c of [jobs, artifacts, agent]) c?.close();
    await service?.stop();
    await nats.cleanup(nc);
    await nc?.close();
  });

  const download = (job: string, path: string) => new Promise<Buffer>((resolve, reject) => {
    const parts: Buffer[] = [];
    const stream = artifacts.download({ job, path });
    stream.on("data", (d: pb.ArtifactData) => parts.push(Buffer.from(d.data)));
    stream.on("error", reject);
    stream.on("end", () => resolve(Buffer.concat(parts)));
  });
  const put = (job: string, token: string, path: string, data: Buffer) => new Promise<pb.PutArtifactResponse>((resolve, reject) => {
    const upload = agent.putArtifact((err, res) => (err ? reject(err) : resolve(res!)));
    for (let at = 0; at < data.length; at += 64 * 1024) {
      upload.write(pb.ArtifactChunk.fromPartial({ job, token, path, data: data.subarray(at, at + 64 * 1024), last: at + 64 * 1024 >= data.length }));
    }
    upload.end();
  });

  it("stores a pod's binary artifact, records it, serves it byte for byte; refuses one over the bound; serves @stdout and @stderr apart", async () => {
    const token = await signPodCapability(KEY, { group: "art", pod: "art-1" }, 60_000);
    const sent: pb.JobAssignment[] = [];
    take = agent.take({ group: "art", pod: "art-1", token });
    take.on("data", (a: pb.JobAssignment) => sent.push(a));
    take.on("error", () => undefined);
    const name = (await call(jobs.submit.bind(jobs), { job: pb.Job.fromJSON({ spec: {
      runnerGroup: "art", namePrefix: "art", command: ["make"],
      uploadArtifact: [{ path: "/out/report.bin", meta: { format: "binary" } }, { path: "/out/big.bin" }],
    } }) }, 10_000)).name;
    await waitFor(() => sent.some((a) => a.job?.name === name), { timeoutMs: 10_000, what: "the job's assignment" });

    const file = randomBytes(200_000);
    file[0] = 0; file[1] = 0xff;
    const sha256 = createHash("sha256").update(file).digest("hex");
    expect(await put(name, token, "/out/report.bin", file)).toEqual({ size: 200_000, sha256 });
    const store = await JetStreamEventStore.open(nc, { prefix: nats.prefix, logger });
    const stored = (await store.read("job", name)).events.map(decode).filter((e) => e?.type === "ephemera.job.artifact_stored.v1");
    expect(stored.map((e) => e!.data)).toEqual([{ path: "/out/report.bin", size: 200_000, sha256, meta: { format: "binary" } }]);
    expect((await download(name, "/out/report.bin")).equals(file)).toBe(true);

    const tooBig = await put(name, token, "/out/big.bin", randomBytes(MAX + 1)).catch((e: grpc.ServiceError) => e);
    expect(tooBig).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED, details: `artifact /out/big.bin of job ${name} is ${MAX + 1} bytes, over the limit of ${MAX} bytes (EPHEMERA_JOB_ARTIFACT_MAX): not stored` });
    const values = await JetStreamValueStore.open(nc, nats.prefix);
    expect(await values.read(artifactKey(name, "/out/big.bin"))).toBeUndefined();
    expect((await values.read(artifactKey(name, "/out/report.bin")))!.equals(file)).toBe(true);
    const missing = await download(name, "/out/big.bin").catch((e: grpc.ServiceError) => e);
    expect(missing).toMatchObject({ code: grpc.status.NOT_FOUND, details: `job ${name} has no artifact /out/big.bin: it has @stdout, @stderr, /out/report.bin` });
    const notListed = await put(name, token, "/etc/passwd", Buffer.from("x")).catch((e: grpc.ServiceError) => e);
    expect(notListed).toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    const view = await call(jobs.get.bind(jobs), { name }, 10_000);
    expect(view.status!.artifacts).toEqual([{ path: "/out/report.bin", size: 200_000, sha256, meta: { format: "binary" } }]);

    await new Promise<void>((resolve, reject) => {
      const out = agent.output((err) => (err ? reject(err) : resolve()));
      for (const [stream, data] of [["stdout", "one\n"], ["stderr", "oops\n"], ["stdout", "two\n"]]) {
        out.write(pb.JobOutputChunk.fromPartial({ job: name, token, stream, data: Buffer.from(data!) }));
      }
      out.end();
    });
    expect((await download(name, "@stdout")).toString()).toBe("one\ntwo\n");
    expect((await download(name, "@stderr")).toString()).toBe("oops\n");
  });
});
