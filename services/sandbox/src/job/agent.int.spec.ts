// The JobAgent server of the real sandbox service on NATS, called over real gRPC by two pods
// played here with the pods' real tokens: a forged token, another group's or another pod's is
// refused; five jobs of two submitters go to the free pods two at a time in the fair order;
// output lands in the log store under the job; exit 0, exit 3 and a timeout end the jobs as
// they should; a delete reaches the pod's Take stream as a cancel; a pod whose stream ends
// while it runs a job loses it after the grace. Then the real job agent program, run as the
// pod runs it, against the server: output, exit codes, a cancel.
import { join } from "node:path";
import { call, createLogger, grpc, signPodCapability, signingKey, waitFor, type SigningKey } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { JetStreamLogStore, connectNats, type LogStore } from "@ephemera/eventstore";
import { testNats } from "../../../../test/support/servers.js";
import { start as startProcess } from "../../../io-agent/src/pod/process.testkit.js";
import { start } from "../index.js";

const logger = createLogger("jobagent-test", "silent");
const nats = testNats("jobagent");
const KEY = signingKey(Buffer.from("a-signing-key-of-at-least-32-bytes-for-jobs"));
const OTHER_KEY = signingKey(Buffer.from("another-signing-key-of-at-least-32-bytes!"));
const ROOT = join(__dirname, "..", "..", "..", "..");

const group = (name: string) => pb.JobRunnerGroup.fromJSON({
  name, spec: {
    cluster: "local", image: "ubuntu:24.04", jobTimeout: "2m",
    podTemplate: JSON.stringify({ spec: { containers: [{ name: "main", image: "ubuntu:24.04" }] } }), scaling: { manual: { desiredPods: 2 } },
  },
});

const token = (pod: string, g = "e2e", key: SigningKey = KEY) => signPodCapability(key, { group: g, pod }, 60_000);

/** A pod of a group: its Take stream and what it was sent. */
class Pod {
  readonly sent: pb.JobAssignment[] = [];
  ended?: grpc.ServiceError | "end";
  private stream?: grpc.ClientReadableStream<pb.JobAssignment>;

  constructor(private readonly client: pb.JobAgentClient, readonly name: string, readonly token: string, readonly group = "e2e") {}

  take(): this {
    this.stream = this.client.take({ group: this.group, pod: this.name, token: this.token });
    this.stream.on("data", (a: pb.JobAssignment) => this.sent.push(a));
    this.stream.on("error", (err: grpc.ServiceError) => { this.ended = err; });
    this.stream.on("end", () => { this.ended ??= "end"; });
    return this;
  }

  /** Drops the Take stream, as a pod that went away. */
  drop(): void {
    this.stream?.cancel();
  }

  get jobs(): string[] {
    return this.sent.filter((a) => a.job).map((a) => a.job!.name);
  }

  async nextJob(count: number): Promise<pb.AssignedJob> {
    await waitFor(() => this.jobs.length >= count, { timeoutMs: 10_000, what: `pod ${this.name}'s job #${count}` });
    return this.sent.filter((a) => a.job)[count - 1]!.job!;
  }

  output(job: string, chunks: Array<[string, string]>, as = this.token): Promise<pb.JobOutputAck> {
    return new Promise((resolve, reject) => {
      const out = this.client.output((err, ack) => (err ? reject(err) : resolve(ack!)));
      for (const [stream, data] of chunks) out.write(pb.JobOutputChunk.fromPartial({ job, token: as, stream, data: Buffer.from(data) }));
      out.end();
    });
  }

  finish(job: string, reason: string, exitCode: number | undefined, message = ""): Promise<pb.FinishJobResponse> {
    return call(this.client.finish.bind(this.client), pb.FinishJobRequest.fromPartial({ job, token: this.token, reason, message, ...(exitCode === undefined ? {} : { exitCode }) }), 10_000);
  }
}

describe("the JobAgent server", () => {
  let service: Awaited<ReturnType<typeof start>>;
  let nc: Awaited<ReturnType<typeof connectNats>>;
  let logs: LogStore;
  let jobs: pb.JobServiceClient;
  let groups: pb.JobRunnerGroupServiceClient;
  let agent: pb.JobAgentClient;
  let jobsAddress: string;
  const pods: Pod[] = [];

  beforeAll(async () => {
    service = await start({
      natsUrl: nats.url, redisUrl: "", prefix: nats.prefix, streamReplicas: 1, listen: "127.0.0.1:0", previewDomain: "preview.test",
      jobCancelGraceMs: 5000, jobs: { listen: "127.0.0.1:0", keys: [KEY], podLostGraceMs: 500 },
    }, logger);
    nc = await connectNats(nats.url, "jobagent-test");
    logs = await JetStreamLogStore.open(nc, nats.prefix);
    const api = `127.0.0.1:${service.port}`;
    jobsAddress = `127.0.0.1:${service.jobs!.port}`;
    jobs = new pb.JobServiceClient(api, grpc.credentials.createInsecure());
    groups = new pb.JobRunnerGroupServiceClient(api, grpc.credentials.createInsecure());
    agent = new pb.JobAgentClient(jobsAddress, grpc.credentials.createInsecure());
    for (const name of ["e2e", "other"]) await call(groups.apply.bind(groups), { jobRunnerGroup: group(name), dryRun: false }, 10_000);
  });
  afterAll(async () => {
    for (const p of pods) p.drop();
    for (const c of [jobs, groups, agent]) c?.close();
    await service?.stop();
    await nats.cleanup(nc);
    await nc?.close();
  });

  const as = (actor: string) => {
    const metadata = new grpc.Metadata();
    metadata.set("x-ephemera-actor", actor);
    return metadata;
  };
  const submit = async (actor: string, prefix: string, spec: Record<string, unknown> = {}) =>
    (await call(jobs.submit.bind(jobs), { job: pb.Job.fromJSON({ spec: { runnerGroup: "e2e", namePrefix: prefix, command: ["make", prefix], ...spec } }) }, 10_000, as(actor))).name;
  const get = (name: string) => call(jobs.get.bind(jobs), { name }, 10_000);
  const status = async (name: string) => (await get(name)).status!;
  const ended = async (name: string, state: string) => {
    await waitFor(async () => (await status(name)).state === state, { timeoutMs: 10_000, what: `job ${name} ${state}` });
    return status(name);
  };
  const pod = async (name: string, g = "e2e") => {
    const p = new Pod(agent, name, await token(name, g), g);
    pods.push(p);
    return p;
  };
  const refusal = async (p: Pod) => {
    p.take();
    await waitFor(() => p.ended !== undefined, { timeoutMs: 10_000, what: `pod ${p.name}'s Take to end` });
    return p.ended as grpc.ServiceError;
  };

  it("refuses a forged token, another group's, and one naming another pod, without a word of the token", async () => {
    const forged = new Pod(agent, "e2e-aaaa", await token("e2e-aaaa", "e2e", OTHER_KEY));
    const err = await refusal(forged);
    expect(err.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(err.details).toMatch(/^group e2e: the pod token is signed with an unknown key/);
    expect(err.details).not.toContain(forged.token);
    const otherGroup = new Pod(agent, "other-aaaa", await token("other-aaaa", "other"), "e2e");
    expect(await refusal(otherGroup)).toMatchObject({ code: grpc.status.PERMISSION_DENIED, details: "group e2e: the pod token is for another group (other)" });
    const impostor = new Pod(agent, "e2e-bbbb", await token("e2e-aaaa"));
    expect(await refusal(impostor)).toMatchObject({ code: grpc.status.PERMISSION_DENIED, details: "group e2e: the pod token is for pod e2e-aaaa, not e2e-bbbb" });
    const noToken = new Pod(agent, "e2e-aaaa", "");
    expect(await refusal(noToken)).toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    const artifact = await new Promise<grpc.ServiceError | null>((resolve) => {
      const upload = agent.putArtifact((e) => resolve(e));
      upload.write(pb.ArtifactChunk.fromPartial({ job: "x", token: "t", path: "/a", data: Buffer.from("a"), last: true }));
      upload.end();
    });
    // Artifacts are checked as the other calls are (artifacts.int.spec.ts): an unknown job first.
    expect(artifact).toMatchObject({ code: grpc.status.NOT_FOUND, details: "job x not found" });
  });

  it("gives five jobs of two submitters to the two free pods two at a time, fair across submitters; output stored; each end as reported", async () => {
    const a1 = await submit("ann", "a1");
    const a2 = await submit("ann", "a2");
    const a3 = await submit("ann", "a3");
    const b1 = await submit("bob", "b1");
    const b2 = await submit("bob", "b2");
    const p1 = (await pod("e2e-p1")).take();
    const first = await p1.nextJob(1);
    expect(first).toMatchObject({ name: a1, command: ["make", "a1"], timeoutMs: 120_000, env: { EPHEMERA_JOB_NAME: a1 } });
    const p2 = (await pod("e2e-p2")).take();
    expect((await p2.nextJob(1)).name).toBe(b1);
    // Two pods, two jobs running: the other three wait.
    expect(await status(a1)).toMatchObject({ state: "Running", pod: "e2e-p1" });
    expect(await status(b1)).toMatchObject({ state: "Running", pod: "e2e-p2" });
    for (const name of [a2, a3, b2]) expect((await status(name)).state).toBe("Queued");
    expect(p1.jobs).toEqual([a1]);

    // Output: from the pod running the job only; kept in order under job.<name>.
    await expect(p2.output(a1, [["stdout", "not mine\n"]])).rejects.toMatchObject({ code: grpc.status.PERMISSION_DENIED, details: `job ${a1} is not running on pod e2e-p2` });
    await p1.output(a1, [["stdout", "building\n"], ["stderr", "warning: x\n"], ["stdout", "done\n"]]);
    expect((await logs.read(`job.${a1}`)).toString()).toBe("building\nwarning: x\ndone\n");

    // Exit 0: Succeeded; the pod is free and takes ann's next (ann was served before bob, but bob has been since).
    await p1.finish(a1, "exited", 0);
    expect(await ended(a1, "Succeeded")).toMatchObject({ exitCode: 0, pod: "e2e-p1" });
    expect((await p1.nextJob(2)).name).toBe(a2);
    // The log of an ended job is complete: a follower ends.
    const follower = logs.follow(`job.${a1}`, {}, () => undefined);
    await expect(follower.done).resolves.toBe("ended");
    // A Finish repeated (the pod retries) is answered as done.
    await p1.finish(a1, "exited", 0);

    // Exit 3: Failed, reason exited; p2 takes bob's next.
    await p2.finish(b1, "exited", 3);
    expect(await ended(b1, "Failed")).toMatchObject({ exitCode: 3, reason: "exited", message: "exited with 3" });
    expect((await p2.nextJob(2)).name).toBe(b2);

    // A timeout: Failed, reason timeout; p1 takes a3.
    await p1.finish(a2, "timeout", 143, "killed after its timeout of 120000 ms");
    expect(await ended(a2, "Failed")).toMatchObject({
      reason: "timeout", exitCode: 143, message: "ran past the group's jobTimeout (2m): killed after its timeout of 120000 ms",
    });
    expect((await p1.nextJob(3)).name).toBe(a3);

    // A delete reaches the pod's stream as a cancel; the pod's report ends the job Cancelled.
    await call(jobs.delete.bind(jobs), { name: b2 }, 10_000, as("cy"));
    await waitFor(() => p2.sent.some((a) => a.cancel?.name === b2), { timeoutMs: 10_000, what: "the cancel of b2 on p2's stream" });
    expect(p2.sent.find((a) => a.cancel)!.cancel).toEqual({ name: b2, reason: "deleted by cy" });
    await p2.finish(b2, "cancelled", 143, "stopped after a cancel");
    expect(await ended(b2, "Cancelled")).toMatchObject({ reason: "cancelled", message: "stopped after a cancel" });
    expect(p2.jobs).toEqual([b1, b2]);

    // The order they were given in: a1, b1, a2, b2, a3.
    const started = await Promise.all([a1, b1, a2, b2, a3].map(async (n) => Date.parse((await status(n)).startedAt)));
    expect([...started].sort((x, y) => x - y)).toEqual(started);

    // A pod gone while running a job: after the grace, the job fails pod-lost.
    p1.drop();
    expect(await ended(a3, "Failed")).toMatchObject({ reason: "pod-lost", pod: "e2e-p1", message: expect.stringMatching(/^pod e2e-p1 lost: /) });
  });

  it("keeps a job for a pod that takes again within the grace, and sends it the cancel it missed", async () => {
    const p3 = (await pod("e2e-p3")).take();
    const c1 = await submit("cy", "c1");
    // p2 is free too: whichever pod has it, that pod goes away and comes back.
    const p2 = pods.find((p) => p.name === "e2e-p2")!;
    await waitFor(() => p3.jobs.includes(c1) || p2.jobs.includes(c1), { timeoutMs: 10_000, what: "c1 assigned" });
    const holder = p3.jobs.includes(c1) ? p3 : p2;
    holder.drop();
    await call(jobs.delete.bind(jobs), { name: c1 }, 10_000, as("cy"));
    const back = new Pod(agent, holder.name, holder.token).take();
    pods.push(back);
    await waitFor(() => back.sent.some((a) => a.cancel?.name === c1), { timeoutMs: 10_000, what: "the cancel sent again on the new stream" });
    await back.finish(c1, "cancelled", 143);
    expect(await ended(c1, "Cancelled")).toMatchObject({ pod: holder.name });
  });

  it("runs jobs with the real job agent program: a script's output, exit codes, a cancel", async () => {
    for (const p of pods) p.drop();
    const name = "e2e-real";
    const agentProcess = startProcess(process.execPath, [join(ROOT, "services/io-agent/dist/pod/main.js"), "job-agent"], {
      PATH: process.env["PATH"], EPHEMERA_POD_JOBS: jobsAddress, EPHEMERA_JOB_GROUP: "e2e", EPHEMERA_POD_NAME: name,
      EPHEMERA_POD_TOKEN: await token(name), EPHEMERA_JOB_KILL_GRACE_MS: "300",
    });
    try {
      const ok = await submit("dee", "real", { command: undefined, script: "#!/bin/sh\necho \"hello from $EPHEMERA_JOB_NAME\"\necho oops >&2\nexit 0\n" });
      expect(await ended(ok, "Succeeded")).toMatchObject({ pod: name, exitCode: 0 });
      expect((await logs.read(`job.${ok}`)).toString().split("\n").sort()).toEqual(["", `hello from ${ok}`, "oops"]);
      const bad = await submit("dee", "real", { command: ["sh", "-c", "exit 3"] });
      expect(await ended(bad, "Failed")).toMatchObject({ pod: name, exitCode: 3, reason: "exited" });
      const long = await submit("dee", "real", { command: ["sleep", "300"] });
      await waitFor(async () => (await status(long)).state === "Running", { timeoutMs: 10_000, what: "the long job running" });
      await call(jobs.delete.bind(jobs), { name: long }, 10_000, as("dee"));
      expect(await ended(long, "Cancelled")).toMatchObject({ pod: name });
      expect(agentProcess.output().stderr).not.toContain("EPHEMERA_POD_TOKEN");
    } finally {
      agentProcess.kill("SIGTERM");
      await agentProcess.ended(15_000).catch(() => undefined);
    }
  });
});
