// The job agent against a JobAgent server written here on real gRPC (the peer of the agent's
// client: it records what it receives and hands out assignments), running real processes:
// the output of both streams in order and whole, exit codes, `#!` scripts, the environment,
// the timeout and cancel kills (SIGTERM, then SIGKILL), artifacts byte for byte, a missing
// artifact named in Finish, backpressure, Take again after the server went away, and the
// bundled agent (dist/agent.cjs job-agent) as the pod runs it.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pb from "@ephemera/proto";
import { grpc, waitFor } from "@ephemera/kit";
import { freePort } from "../../../../test/support/stack.js";
import { start } from "../pod/process.testkit.js";
import { JobAgent } from "./agent.js";
import type { JobAgentConfig } from "./config.js";

const ROOT = join(__dirname, "..", "..", "..", "..");
const TOKEN = "pod-token-5c1e";

interface Artifact {
  path: string;
  data: Buffer;
  /** Every chunk's job, token and `last`. */
  chunks: Array<{ job: string; token: string; last: boolean }>;
}

/** A JobAgent server: records every Take, output chunk, artifact and Finish; assigns what the test says. */
class JobService {
  readonly takes: pb.TakeJobsRequest[] = [];
  readonly output: pb.JobOutputChunk[] = [];
  readonly artifacts: Artifact[] = [];
  readonly finishes: Array<pb.FinishJobRequest & { at: number }> = [];
  /** While set, Output reads nothing (the agent must hold the job's output back). */
  paused = false;
  private outputs: grpc.ServerReadableStream<pb.JobOutputChunk, pb.JobOutputAck>[] = [];
  private take?: grpc.ServerWritableStream<pb.TakeJobsRequest, pb.JobAssignment>;
  private server?: grpc.Server;

  async listen(port: number): Promise<void> {
    const server = new grpc.Server();
    server.addService(pb.JobAgentService, {
      take: (call: grpc.ServerWritableStream<pb.TakeJobsRequest, pb.JobAssignment>) => {
        this.takes.push(call.request);
        this.take = call;
        call.sendMetadata(new grpc.Metadata());
      },
      output: (call: grpc.ServerReadableStream<pb.JobOutputChunk, pb.JobOutputAck>, done: grpc.sendUnaryData<pb.JobOutputAck>) => {
        this.outputs.push(call);
        if (this.paused) call.pause();
        call.on("data", (c: pb.JobOutputChunk) => this.output.push(c));
        call.on("end", () => done(null, {}));
      },
      putArtifact: (call: grpc.ServerReadableStream<pb.ArtifactChunk, pb.PutArtifactResponse>, done: grpc.sendUnaryData<pb.PutArtifactResponse>) => {
        const a: Artifact = { path: "", data: Buffer.alloc(0), chunks: [] };
        call.on("data", (c: pb.ArtifactChunk) => {
          a.path = c.path;
          a.data = Buffer.concat([a.data, c.data]);
          a.chunks.push({ job: c.job, token: c.token, last: c.last });
        });
        call.on("end", () => {
          this.artifacts.push(a);
          done(null, { size: a.data.length, sha256: "" });
        });
      },
      finish: (call: grpc.ServerUnaryCall<pb.FinishJobRequest, pb.FinishJobResponse>, done: grpc.sendUnaryData<pb.FinishJobResponse>) => {
        this.finishes.push({ ...call.request, at: Date.now() });
        done(null, {});
      },
    });
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err: Error | null) => (err ? reject(err) : resolve())));
    this.server = server;
  }

  resume(): void {
    this.paused = false;
    for (const o of this.outputs) o.resume();
  }

  /** Waits for a Take (the `n`th in all), then sends the assignment on it. */
  async assign(job: Partial<pb.AssignedJob>, n = 1): Promise<void> {
    await waitFor(() => this.takes.length >= n && this.take, { timeoutMs: 15_000, what: `Take #${n}` });
    this.take!.write(pb.JobAssignment.fromPartial({ job }));
  }

  cancel(name: string): void {
    this.take!.write(pb.JobAssignment.fromPartial({ cancel: { name, reason: "job deleted" } }));
  }

  finished(job: string, timeoutMs = 20_000) {
    return waitFor(() => this.finishes.find((f) => f.job === job), { timeoutMs, what: `Finish of ${job}` });
  }

  text(job: string, stream: "stdout" | "stderr"): string {
    return Buffer.concat(this.output.filter((c) => c.job === job && c.stream === stream).map((c) => c.data)).toString();
  }

  stop(): void {
    this.server?.forceShutdown();
  }
}

describe("the job agent against a JobAgent server", () => {
  let service: JobService;
  let agent: JobAgent | undefined;
  let running: Promise<void> | undefined;
  let port: number;
  let work: string;
  let config: JobAgentConfig;
  const said: string[] = [];

  beforeEach(async () => {
    work = await mkdtemp(join(tmpdir(), "ephemera-job-agent-"));
    port = await freePort();
    service = new JobService();
    await service.listen(port);
    said.length = 0;
    config = {
      jobs: `127.0.0.1:${port}`, token: TOKEN, group: "builders", pod: "builders-abc12",
      killGraceMs: 500, reconnect: { initialDelayMs: 50, maxDelayMs: 200 }, retryMs: 5000,
    };
  });
  afterEach(async () => {
    agent?.stop();
    await running;
    agent = undefined;
    running = undefined;
    service.stop();
    await rm(work, { recursive: true, force: true });
  });

  /** Starts the agent; afterEach stops it and waits for its end. */
  const startAgent = (): void => {
    agent = new JobAgent(config, {
      env: { PATH: process.env["PATH"], FROM_CONTAINER: "image-env", EPHEMERA_POD_TOKEN: TOKEN },
      cwd: work, say: (l) => said.push(l),
    });
    running = agent.run();
  };

  it("takes jobs as its group's pod and runs a script's output through in order, each stream whole, with its exit code", async () => {
    startAgent();
    const lines = Array.from({ length: 2000 }, (_, i) => `line ${i} ${"x".repeat(60)}`);
    await service.assign({
      name: "j1",
      // The 60 x's made once: two processes per line made it 4,000 forks, past the deadline on a busy machine.
      script: `#!/bin/sh\nx=$(printf 'x%.0s' $(seq 60))\ni=0\nwhile [ $i -lt 2000 ]; do echo "line $i $x"; echo "err $i" >&2; i=$((i+1)); done\nexit 3\n`,
    });
    const f = await service.finished("j1");
    expect(service.takes[0]).toEqual({ group: "builders", pod: "builders-abc12", token: TOKEN });
    expect(f).toMatchObject({ job: "j1", token: TOKEN, reason: "exited", exitCode: 3, message: "" });
    expect(service.text("j1", "stdout")).toBe(lines.map((l) => `${l}\n`).join(""));
    expect(service.text("j1", "stderr")).toBe(Array.from({ length: 2000 }, (_, i) => `err ${i}\n`).join(""));
    expect(service.output.every((c) => c.token === TOKEN && c.data.length <= 64 * 1024)).toBe(true);
  });

  it("honours the script's #! line and runs commands in the container's environment plus the job's, without the pod's token", async () => {
    startAgent();
    await service.assign({ name: "node", script: `#!${process.execPath}\nprocess.stdout.write("node " + process.argv.length)\n` });
    expect(await service.finished("node")).toMatchObject({ reason: "exited", exitCode: 0 });
    expect(service.text("node", "stdout")).toBe("node 2");
    await service.assign({
      name: "cmd", command: ["sh", "-c", 'echo "$FROM_CONTAINER $EPHEMERA_ROUTING_KEY ${EPHEMERA_POD_TOKEN:-none} $(pwd)"'],
      env: { EPHEMERA_ROUTING_KEY: "rk42" },
    });
    expect(await service.finished("cmd")).toMatchObject({ reason: "exited", exitCode: 0 });
    expect(service.text("cmd", "stdout")).toBe(`image-env rk42 none ${work}\n`);
    await service.assign({ name: "nope", command: ["/no/such/program"] });
    const f = await service.finished("nope");
    expect(f.reason).toBe("error");
    expect(f.exitCode).toBeUndefined();
    expect(f.message).toContain("cannot start /no/such/program: ENOENT");
  });

  it("kills a job at its timeout: SIGTERM, then SIGKILL after the grace when it ignores it (reason timeout)", async () => {
    startAgent();
    const started = Date.now();
    await service.assign({
      name: "slow", timeoutMs: 300,
      script: "#!/bin/sh\ntrap 'echo got-term' TERM\necho started\nwhile :; do sleep 0.05; done\n",
    });
    const f = await service.finished("slow");
    expect(f).toMatchObject({ reason: "timeout", exitCode: 137, message: "killed after its timeout of 300 ms" });
    expect(f.at - started).toBeGreaterThanOrEqual(300 + 500);
    expect(f.at - started).toBeLessThan(5000);
    expect(service.text("slow", "stdout")).toBe("started\ngot-term\n");
  });

  it("stops a job when told to cancel it, within 10 s (reason cancelled), and what the job started with it", async () => {
    config.killGraceMs = 5000;
    startAgent();
    const pidFile = join(work, "child.pid");
    await service.assign({ name: "long", script: `#!/bin/sh\nsleep 300 &\necho $! > ${pidFile}\nwait\n` });
    await waitFor(() => existsSync(pidFile), { timeoutMs: 10_000, what: "the job's child to start" });
    const sent = Date.now();
    service.cancel("long");
    const f = await service.finished("long");
    expect(f.at - sent).toBeLessThan(10_000);
    expect(f).toMatchObject({ reason: "cancelled", exitCode: 128 + 15 });
    const child = Number((await import("node:fs")).readFileSync(pidFile, "utf8"));
    await waitFor(() => !alive(child), { timeoutMs: 5000, what: "the job's child to be gone" });
  });

  it("uploads each artifact byte for byte (relative to the working directory), and names a missing one in Finish", async () => {
    startAgent();
    const big = randomBytes(300 * 1024 + 7);
    await writeFile(join(work, "report.bin"), big);
    await service.assign({
      name: "arts", script: "#!/bin/sh\nmkdir -p out && printf '' > out/empty && echo done\n",
      uploadArtifact: [{ path: "report.bin", meta: {} }, { path: "out/empty", meta: {} }, { path: "/nowhere/log.txt", meta: {} }],
    });
    const f = await service.finished("arts");
    expect(f).toMatchObject({ reason: "exited", exitCode: 0, message: "artifact /nowhere/log.txt: no such file" });
    expect(service.artifacts.map((a) => a.path)).toEqual(["report.bin", "out/empty"]);
    const [report, empty] = service.artifacts;
    expect(report!.data.equals(big)).toBe(true);
    expect(report!.chunks.length).toBeGreaterThan(1);
    expect(report!.chunks.map((c) => c.last)).toEqual([...report!.chunks.slice(1).map(() => false), true]);
    expect(report!.chunks.every((c) => c.job === "arts" && c.token === TOKEN)).toBe(true);
    expect(empty!.data.length).toBe(0);
    expect(empty!.chunks).toEqual([{ job: "arts", token: TOKEN, last: true }]);
  });

  it("holds the job's output back while the server does not read it (the job's writes block), then delivers it all", async () => {
    startAgent();
    service.paused = true;
    const marker = join(work, "wrote-all");
    const bytes = 32 * 1024 * 1024;
    await service.assign({ name: "flood", script: `#!/bin/sh\nhead -c ${bytes} /dev/zero\ntouch ${marker}\n` });
    // While nothing is read, the job cannot get past its writes.
    await expect(waitFor(() => existsSync(marker), { timeoutMs: 1500, what: "the job to write all" })).rejects.toThrow();
    service.resume();
    expect(await service.finished("flood", 30_000)).toMatchObject({ reason: "exited", exitCode: 0 });
    expect(existsSync(marker)).toBe(true);
    expect(service.output.reduce((n, c) => n + c.data.length, 0)).toBe(bytes);
  });

  it("takes again, with backoff, when the server goes away, and runs what the server that comes back assigns", async () => {
    startAgent();
    await waitFor(() => service.takes.length === 1, { timeoutMs: 10_000, what: "the first Take" });
    const takes = service.takes;
    service.stop();
    await waitFor(() => said.some((l) => l.includes("taking again")), { timeoutMs: 10_000, what: "a reconnect to be scheduled" });
    const back = new JobService();
    service = back;
    await back.listen(port);
    await back.assign({ name: "after", command: ["sh", "-c", "echo back"] });
    expect(await back.finished("after")).toMatchObject({ reason: "exited", exitCode: 0 });
    expect(back.text("after", "stdout")).toBe("back\n");
    expect(takes).toHaveLength(1);
    expect(back.takes[0]).toEqual({ group: "builders", pod: "builders-abc12", token: TOKEN });
  });

  it("ships in the agent bundle: `agent.cjs job-agent` runs a job and, on SIGTERM, stops the running one and reports it", async () => {
    const bundle = join(work, "agent.cjs");
    const built = spawnSync(process.execPath, [join(ROOT, "scripts", "bundle-agent.mjs"), "--outfile", bundle, "--no-code-cache"], { encoding: "utf8" });
    if (built.status !== 0) throw new Error(`bundle-agent.mjs failed: ${built.stderr}`);
    const p = start(process.execPath, [bundle, "job-agent"], {
      PATH: process.env["PATH"], EPHEMERA_POD_JOBS: `127.0.0.1:${port}`, EPHEMERA_JOB_GROUP: "builders",
      EPHEMERA_POD_NAME: "builders-xyz", EPHEMERA_POD_TOKEN: TOKEN, EPHEMERA_JOB_KILL_GRACE_MS: "300",
    });
    try {
      await service.assign({ name: "b1", command: ["sh", "-c", "echo bundled; exit 4"] });
      expect(await service.finished("b1")).toMatchObject({ reason: "exited", exitCode: 4 });
      expect(service.text("b1", "stdout")).toBe("bundled\n");
      await service.assign({ name: "b2", command: ["sleep", "300"] });
      await waitFor(() => p.output().stderr.includes("job b2: starting"), { timeoutMs: 10_000, what: "b2 to start" });
      p.kill("SIGTERM");
      const ended = await p.ended(15_000);
      expect(ended.code).toBe(0);
      expect(service.finishes.find((f) => f.job === "b2")).toMatchObject({ reason: "error", message: "pod builders-xyz is stopping" });
      expect(ended.stderr).not.toContain(TOKEN);
      expect(service.takes[0]).toEqual({ group: "builders", pod: "builders-xyz", token: TOKEN });
    } finally {
      p.kill("SIGKILL");
    }
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
