// The server's own jobTimeout and a group's deletion, on the real sandbox service over NATS
// with pods played by real gRPC clients with real pod tokens: a running job whose pod never
// reports fails, reason timeout, once the group's jobTimeout and the grace have passed since
// it started, and so does one whose service restarted meanwhile (the timer re-armed from the
// start time); a group deleted sends a cancel to the pods of its running jobs, which end
// Cancelled when the pod reports or, if it does not, after the cancel grace.
import { call, createLogger, grpc, signPodCapability, signingKey, waitFor } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { connectNats } from "@ephemera/eventstore";
import { testNats } from "../../../../test/support/servers.js";
import { start } from "../index.js";

const logger = createLogger("jobtimeout-test", "silent");
const nats = testNats("jobtimeout");
const KEY = signingKey(Buffer.from("a-signing-key-of-at-least-32-bytes-for-jobs"));
// Long enough for a pod's report to arrive on a busy machine (0.3 s was not, in a full run).
const GRACE_MS = 1_500;

const group = (name: string, jobTimeout: string) => pb.JobRunnerGroup.fromJSON({
  name, spec: {
    cluster: "local", image: "ubuntu:24.04", jobTimeout,
    podTemplate: JSON.stringify({ spec: { containers: [{ name: "main", image: "ubuntu:24.04" }] } }), scaling: { manual: { desiredPods: 2 } },
  },
});

type Service = Awaited<ReturnType<typeof start>>;

describe("the server's jobTimeout and a group's deletion", () => {
  let nc: Awaited<ReturnType<typeof connectNats>>;
  const services: Service[] = [];
  const closers: Array<() => void> = [];

  const startService = async () => {
    const service = await start({
      natsUrl: nats.url, redisUrl: "", prefix: nats.prefix, streamReplicas: 1, listen: "127.0.0.1:0", previewDomain: "preview.test",
      jobCancelGraceMs: GRACE_MS, jobTimeoutGraceMs: GRACE_MS,
      // Pods that went away keep their jobs long enough for the timeout to be what ends them.
      jobs: { listen: "127.0.0.1:0", keys: [KEY], podLostGraceMs: 60_000 },
    }, logger);
    services.push(service);
    const api = `127.0.0.1:${service.port}`;
    const clients = {
      jobs: new pb.JobServiceClient(api, grpc.credentials.createInsecure()),
      groups: new pb.JobRunnerGroupServiceClient(api, grpc.credentials.createInsecure()),
      agent: new pb.JobAgentClient(`127.0.0.1:${service.jobs!.port}`, grpc.credentials.createInsecure()),
    };
    closers.push(() => { for (const c of Object.values(clients)) c.close(); });
    return { service, ...clients };
  };

  beforeAll(async () => { nc = await connectNats(nats.url, "jobtimeout-test"); });
  afterAll(async () => {
    for (const close of closers) close();
    for (const s of services) await s.stop().catch(() => undefined);
    await nats.cleanup(nc);
    await nc?.close();
  });

  type Clients = Awaited<ReturnType<typeof startService>>;
  const submit = async (c: Clients, runnerGroup: string, prefix: string) =>
    (await call(c.jobs.submit.bind(c.jobs), { job: pb.Job.fromJSON({ spec: { runnerGroup, namePrefix: prefix, command: ["make"] } }) }, 10_000)).name;
  const status = async (c: Clients, name: string) => (await call(c.jobs.get.bind(c.jobs), { name }, 10_000)).status!;
  const ended = async (c: Clients, name: string, state: string, timeoutMs = 10_000) => {
    await waitFor(async () => (await status(c, name)).state === state, { timeoutMs, what: `job ${name} ${state}` });
    return status(c, name);
  };
  /** A pod taking its group's jobs; what it was sent. */
  const takePod = async (c: Clients, g: string, pod: string) => {
    const token = await signPodCapability(KEY, { group: g, pod }, 60_000);
    const sent: pb.JobAssignment[] = [];
    const stream = c.agent.take({ group: g, pod, token });
    stream.on("data", (a: pb.JobAssignment) => sent.push(a));
    stream.on("error", () => undefined);
    closers.unshift(() => stream.cancel());
    return { token, sent, stream };
  };
  const assigned = (sent: pb.JobAssignment[], name: string) =>
    waitFor(() => sent.some((a) => a.job?.name === name), { timeoutMs: 10_000, what: `job ${name} at its pod` });

  it("fails a running job its pod never reports once the jobTimeout and the grace have passed, also across a restart", async () => {
    const first = await startService();
    await call(first.groups.apply.bind(first.groups), { jobRunnerGroup: group("slow", "2s"), dryRun: false }, 10_000);
    const stuck = await submit(first, "slow", "stuck");
    const pod = await takePod(first, "slow", "slow-p1");
    await assigned(pod.sent, stuck);
    // Still running before its deadline.
    expect((await status(first, stuck)).state).toBe("Running");
    const done = await ended(first, stuck, "Failed");
    expect(done).toMatchObject({
      reason: "timeout", pod: "slow-p1",
      message: `ran past the group's jobTimeout (2s): pod slow-p1 did not report the job's end within ${GRACE_MS / 1000}s after it`,
    });
    expect(Date.parse(done.endedAt) - Date.parse(done.startedAt)).toBeGreaterThanOrEqual(2000 + GRACE_MS);
    expect(done.exitCode).toBeUndefined();

    // A second job starts on the same pod; the service stops and another starts: the timer is re-armed.
    const again = await submit(first, "slow", "again");
    await assigned(pod.sent, again);
    pod.stream.cancel();
    await first.service.stop();
    // Whatever the timing of the restart, the job ends after the first service stopped: the
    // second one's re-armed timer failed it (asking its state at once raced the 2 s deadline on a busy machine).
    const stoppedAt = Date.now();
    const second = await startService();
    const after = await ended(second, again, "Failed");
    expect(Date.parse(after.endedAt)).toBeGreaterThanOrEqual(stoppedAt);
    expect(after).toMatchObject({ reason: "timeout", message: expect.stringContaining("ran past the group's jobTimeout (2s)") });
    expect(Date.parse(after.endedAt) - Date.parse(after.startedAt)).toBeGreaterThanOrEqual(2000 + GRACE_MS);
  });

  it("cancels a deleted group's running jobs on their pods' streams: Cancelled as the pod reports, or after the grace", async () => {
    const c = await startService();
    await call(c.groups.apply.bind(c.groups), { jobRunnerGroup: group("gone", "1h"), dryRun: false }, 10_000);
    const reporting = await takePod(c, "gone", "gone-p1");
    const silent = await takePod(c, "gone", "gone-p2");
    const j1 = await submit(c, "gone", "j1");
    const j2 = await submit(c, "gone", "j2");
    const queued = await submit(c, "gone", "j3");
    await waitFor(() => [reporting, silent].every((p) => p.sent.some((a) => a.job)), { timeoutMs: 10_000, what: "both pods busy" });
    const [onReporting, onSilent] = [reporting, silent].map((p) => p.sent.find((a) => a.job)!.job!.name);
    expect([onReporting, onSilent].sort()).toEqual([j1, j2].sort());

    await call(c.groups.delete.bind(c.groups), { name: "gone" }, 10_000);
    for (const [p, job] of [[reporting, onReporting], [silent, onSilent]] as const) {
      await waitFor(() => p.sent.some((a) => a.cancel?.name === job), { timeoutMs: 10_000, what: `the cancel of ${job} on its pod's stream` });
      expect(p.sent.find((a) => a.cancel)!.cancel).toEqual({ name: job, reason: "deleted by the deletion of job runner group gone" });
    }
    expect(await ended(c, queued, "Cancelled")).toMatchObject({ message: "job runner group gone was deleted" });
    await call(c.agent.finish.bind(c.agent), pb.FinishJobRequest.fromPartial({ job: onReporting, token: reporting.token, reason: "cancelled", exitCode: 143, message: "stopped" }), 10_000);
    expect(await ended(c, onReporting!, "Cancelled")).toMatchObject({ message: "stopped" });
    expect(await ended(c, onSilent!, "Cancelled")).toMatchObject({ message: `pod gone-p2 did not report the job within ${GRACE_MS / 1000}s of its cancel` });
  });
});
