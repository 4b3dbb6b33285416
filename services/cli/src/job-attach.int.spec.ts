// `eph job submit --attach` and `eph job get`'s output against the real core, with the
// sandbox service's JobAgent server on it and a pod played by a real gRPC client with a real
// pod token: the job's stdout and stderr reach eph's own as the pod writes them, and eph
// exits with the job's exit code (0, 3), 125 for a job failed without one (a timeout) and
// 130 for a cancelled one; `job get` ends with the last lines of output.
import { call, createLogger, grpc, signPodCapability, signingKey, waitFor } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { startJobAgent } from "../../sandbox/src/index.js";
import { eph, useCore, type Live, type Ran } from "./eph.testkit.js";
import { EXIT_JOB_CANCELLED, EXIT_JOB_FAILED } from "./job.js";

const core = useCore();
const api = () => core().address;
const KEY = signingKey(Buffer.from("a-signing-key-of-at-least-32-bytes-for-jobs"));

const GROUP = `
name: e2e
spec:
  cluster: local
  image: ubuntu:24.04
  podTemplate:
    spec:
      containers:
      - {name: main, image: ubuntu:24.04}
`;
const JOB = "spec:\n  namePrefix: attached\n  runnerGroup: e2e\n  command: [make, e2e]\n";

describe("eph job submit --attach", () => {
  let stopAgent: (() => Promise<void>) | undefined;
  let client: pb.JobAgentClient | undefined;
  let take: grpc.ClientReadableStream<pb.JobAssignment> | undefined;
  afterEach(async () => {
    take?.cancel();
    client?.close();
    await stopAgent?.();
    stopAgent = undefined;
  });

  /** The JobAgent server on the core, and one pod of group e2e taking jobs; what it was sent. */
  async function podTaking(): Promise<{ token: string; sent: pb.JobAssignment[] }> {
    const agent = await startJobAgent(core().sandboxes, { listen: "127.0.0.1:0", keys: [KEY] }, undefined, createLogger("jobagent", "silent"));
    stopAgent = agent.stop;
    client = new pb.JobAgentClient(`127.0.0.1:${agent.port}`, grpc.credentials.createInsecure());
    const token = await signPodCapability(KEY, { group: "e2e", pod: "e2e-p1" }, 60_000);
    const sent: pb.JobAssignment[] = [];
    take = client.take({ group: "e2e", pod: "e2e-p1", token });
    take.on("data", (a: pb.JobAssignment) => sent.push(a));
    take.on("error", () => undefined);
    return { token, sent };
  }

  /** Submits with --attach; resolves with the job's name once the pod has it, and eph's end. */
  async function attach(sent: pb.JobAssignment[], live: Live): Promise<{ name: string; ran: Promise<Ran> }> {
    expect((await eph(api(), ["jrg", "apply", "-f", core().file("jrg.yaml", GROUP)])).code).toBe(0);
    const ran = eph(api(), ["job", "submit", "-f", core().file("job.yaml", JOB), "--attach"], { live });
    await waitFor(() => sent.some((a) => a.job), { timeoutMs: 10_000, what: "the job at the pod" });
    return { name: sent.find((a) => a.job)!.job!.name, ran };
  }

  const output = (token: string, job: string, stream: string, data: string) => new Promise<void>((resolve, reject) => {
    const out = client!.output((err) => (err ? reject(err) : resolve()));
    out.write(pb.JobOutputChunk.fromPartial({ job, token, stream, data: Buffer.from(data) }));
    out.end();
  });
  const finish = (token: string, job: string, reason: string, exitCode?: number) =>
    call(client!.finish.bind(client!), pb.FinishJobRequest.fromPartial({ job, token, reason, ...(exitCode === undefined ? {} : { exitCode }) }), 10_000);

  it("streams stdout and stderr live to eph's own and exits with the job's exit code", async () => {
    const { token, sent } = await podTaking();
    const live: Live = { stdout: "", stderr: "" };
    const { name, ran } = await attach(sent, live);
    await output(token, name, "stdout", "step 1\n");
    await waitFor(() => live.stdout === "step 1\n", { timeoutMs: 10_000, what: "stdout while the job runs" });
    await output(token, name, "stderr", "careful\n");
    await waitFor(() => live.stderr.includes("careful\n"), { timeoutMs: 10_000, what: "stderr while the job runs" });
    await output(token, name, "stdout", "step 2\n");
    await finish(token, name, "exited", 3);
    const result = await ran;
    expect(result.code).toBe(3);
    expect(result.stdout).toBe("step 1\nstep 2\n");
    expect(result.stderr).toBe(`job ${name} submitted\ncareful\njob ${name} Failed (exited): exited with 3\n`);

    // `job get` ends with the last lines of output.
    const got = await eph(api(), ["job", "get", name]);
    expect(got.code).toBe(0);
    expect(got.stdout).toContain(`name: ${name}\n`);
    expect(got.stdout.endsWith("# last 20 lines of output:\n#   step 1\n#   careful\n#   step 2\n")).toBe(true);
    expect((await eph(api(), ["job", "get", name, "-o", "json"])).stdout).not.toContain("step 1");
  });

  it("exits 0 for a success, 125 for a failure without an exit code and 130 for a cancel", async () => {
    const { token, sent } = await podTaking();
    const live: Live = { stdout: "", stderr: "" };
    const first = await attach(sent, live);
    await finish(token, first.name, "exited", 0);
    expect(await first.ran).toMatchObject({ code: 0, stdout: "", stderr: `job ${first.name} submitted\n` });

    const second = eph(api(), ["job", "submit", "-f", core().file("job.yaml", JOB), "--attach"]);
    await waitFor(() => sent.filter((a) => a.job).length === 2, { timeoutMs: 10_000, what: "the second job at the pod" });
    const name2 = sent.filter((a) => a.job)[1]!.job!.name;
    await finish(token, name2, "timeout");
    const timedOut = await second;
    expect(timedOut.code).toBe(EXIT_JOB_FAILED);
    expect(timedOut.stderr).toContain(`job ${name2} Failed (timeout): ran past the group's jobTimeout (30m)`);

    const third = eph(api(), ["job", "submit", "-f", core().file("job.yaml", JOB), "--attach"]);
    await waitFor(() => sent.filter((a) => a.job).length === 3, { timeoutMs: 10_000, what: "the third job at the pod" });
    const name3 = sent.filter((a) => a.job)[2]!.job!.name;
    expect((await eph(api(), ["job", "delete", name3])).code).toBe(0);
    await waitFor(() => sent.some((a) => a.cancel?.name === name3), { timeoutMs: 10_000, what: "the cancel at the pod" });
    await finish(token, name3, "cancelled");
    const cancelled = await third;
    expect(cancelled.code).toBe(EXIT_JOB_CANCELLED);
    expect(cancelled.stderr).toContain(`job ${name3} Cancelled`);
  });
});
