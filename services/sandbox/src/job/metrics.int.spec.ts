// The jobs' metrics of the real sandbox service over NATS, scraped from its registry while a
// pod (a real gRPC client with a real pod token) takes and ends jobs: the queue depth per
// group (0 for a group with none), the wait and run histograms per group, jobs ended by state.
import { call, createLogger, grpc, signPodCapability, signingKey, waitFor } from "@ephemera/kit";
import { Registry } from "@ephemera/kit/metrics";
import * as pb from "@ephemera/proto";
import { connectNats } from "@ephemera/eventstore";
import { testNats } from "../../../../test/support/servers.js";
import { start } from "../index.js";

const logger = createLogger("jobmetrics-test", "silent");
const nats = testNats("jobmetrics");
const KEY = signingKey(Buffer.from("a-signing-key-of-at-least-32-bytes-for-jobs"));

const group = (name: string) => pb.JobRunnerGroup.fromJSON({
  name, spec: {
    cluster: "local", image: "ubuntu:24.04",
    podTemplate: JSON.stringify({ spec: { containers: [{ name: "main", image: "ubuntu:24.04" }] } }), scaling: { manual: { desiredPods: 1 } },
  },
});

describe("the jobs' metrics", () => {
  const registry = new Registry();
  let service: Awaited<ReturnType<typeof start>>;
  let nc: Awaited<ReturnType<typeof connectNats>>;
  let jobs: pb.JobServiceClient;
  let agent: pb.JobAgentClient;
  let take: grpc.ClientReadableStream<pb.JobAssignment> | undefined;

  beforeAll(async () => {
    service = await start({
      natsUrl: nats.url, redisUrl: "", prefix: nats.prefix, streamReplicas: 1, listen: "127.0.0.1:0", previewDomain: "preview.test",
      metrics: registry, jobs: { listen: "127.0.0.1:0", keys: [KEY] },
    }, logger);
    nc = await connectNats(nats.url, "jobmetrics-test");
    const api = `127.0.0.1:${service.port}`;
    jobs = new pb.JobServiceClient(api, grpc.credentials.createInsecure());
    agent = new pb.JobAgentClient(`127.0.0.1:${service.jobs!.port}`, grpc.credentials.createInsecure());
    const groups = new pb.JobRunnerGroupServiceClient(api, grpc.credentials.createInsecure());
    for (const name of ["e2e", "idle"]) await call(groups.apply.bind(groups), { jobRunnerGroup: group(name), dryRun: false }, 10_000);
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

  /** One sample of the scrape, by its name and labels as printed; undefined when absent. */
  const sample = async (series: string) => {
    const line = (await registry.metrics()).split("\n").find((l) => l.startsWith(`${series} `));
    return line === undefined ? undefined : Number(line.slice(series.length + 1));
  };
  const submit = async (prefix: string) =>
    (await call(jobs.submit.bind(jobs), { job: pb.Job.fromJSON({ spec: { runnerGroup: "e2e", namePrefix: prefix, command: ["make"] } }) }, 10_000)).name;

  it("counts the queue per group, the waits and runs per group and the ended jobs by state", async () => {
    const [a, b, c] = [await submit("a"), await submit("b"), await submit("c")];
    expect(await sample('ephemera_job_queue_depth{group="e2e"}')).toBe(3);
    expect(await sample('ephemera_job_queue_depth{group="idle"}')).toBe(0);
    expect(await sample('ephemera_job_wait_seconds_count{group="e2e"}')).toBeUndefined();

    const token = await signPodCapability(KEY, { group: "e2e", pod: "e2e-p1" }, 60_000);
    const sent: pb.JobAssignment[] = [];
    take = agent.take({ group: "e2e", pod: "e2e-p1", token });
    take.on("data", (x: pb.JobAssignment) => sent.push(x));
    take.on("error", () => undefined);
    await waitFor(() => sent.some((x) => x.job?.name === a), { timeoutMs: 10_000, what: "job a at the pod" });
    await waitFor(async () => (await sample('ephemera_job_wait_seconds_count{group="e2e"}')) === 1, { timeoutMs: 10_000, what: "a wait observed" });
    expect(await sample('ephemera_job_queue_depth{group="e2e"}')).toBe(2);

    // a succeeds; b runs and fails; c, queued, is deleted: Cancelled without a run.
    await call(agent.finish.bind(agent), pb.FinishJobRequest.fromPartial({ job: a, token, reason: "exited", exitCode: 0 }), 10_000);
    await waitFor(() => sent.some((x) => x.job?.name === b), { timeoutMs: 10_000, what: "job b at the pod" });
    await call(jobs.delete.bind(jobs), { name: c }, 10_000);
    await call(agent.finish.bind(agent), pb.FinishJobRequest.fromPartial({ job: b, token, reason: "exited", exitCode: 2 }), 10_000);
    await waitFor(async () => (await sample('ephemera_jobs_ended_total{group="e2e",state="Failed"}')) === 1, { timeoutMs: 10_000, what: "b counted Failed" });
    expect(await sample('ephemera_jobs_ended_total{group="e2e",state="Succeeded"}')).toBe(1);
    expect(await sample('ephemera_jobs_ended_total{group="e2e",state="Cancelled"}')).toBe(1);
    expect(await sample('ephemera_job_wait_seconds_count{group="e2e"}')).toBe(2);
    expect(await sample('ephemera_job_run_seconds_count{group="e2e"}')).toBe(2);
    expect(await sample('ephemera_job_run_seconds_bucket{le="+Inf",group="e2e"}')).toBe(2);
    expect(await sample('ephemera_job_queue_depth{group="e2e"}')).toBe(0);
    const runSum = await sample('ephemera_job_run_seconds_sum{group="e2e"}');
    expect(runSum).toBeGreaterThan(0);
    expect(runSum).toBeLessThan(60);
  });
});
