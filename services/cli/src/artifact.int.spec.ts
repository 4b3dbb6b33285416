// `eph artifact download` against the real core: a pod of a job runner group (real gRPC, a
// real pod token) stores a binary artifact and writes output through the JobAgent server;
// `eph job get` lists the artifact with its size and meta; `eph artifact download` writes it
// byte for byte to stdout and to -o FILE, serves @stdout, and names what exists for a path
// the job does not have.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Aggregates } from "@ephemera/events";
import { createLogger, grpc, signPodCapability, signingKey, startGrpcServer, waitFor } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { JobAgentServer } from "../../sandbox/src/index.js";
import { eph, useCore } from "./eph.testkit.js";

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

const JOB = `
spec:
  namePrefix: art
  runnerGroup: e2e
  command: [make, e2e]
  uploadArtifact:
  - path: /out/report.bin
    meta: {format: binary}
`;

describe("eph artifact download", () => {
  it("downloads a pod's stored artifact byte for byte to stdout and to -o FILE, @stdout too; job get lists it", async () => {
    const sandboxes = core().sandboxes;
    const agent = new JobAgentServer({ jobs: sandboxes.jobs, logs: core().logs, values: sandboxes.deps.values, keys: [KEY], logger: createLogger("artifact-cli", "silent"), groupTimeout: () => undefined });
    sandboxes.feed.onCommit((c) => {
      const state = c.aggregate === Aggregates.job ? sandboxes.jobStates.get(c.aggregateId)?.state : undefined;
      if (state?.status === "job") agent.onJobChange(state);
    });
    const server = await startGrpcServer("127.0.0.1:0", [agent.binding()], createLogger("artifact-cli", "silent"));
    const client = new pb.JobAgentClient(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
    const token = await signPodCapability(KEY, { group: "e2e", pod: "e2e-1" }, 60_000);
    const take = client.take({ group: "e2e", pod: "e2e-1", token });
    const sent: pb.JobAssignment[] = [];
    take.on("data", (a: pb.JobAssignment) => sent.push(a));
    take.on("error", () => undefined);
    try {
      expect((await eph(api(), ["jrg", "apply", "-f", core().file("jrg.yaml", GROUP)])).code).toBe(0);
      const name = (await eph(api(), ["job", "submit", "-f", core().file("job.yaml", JOB)])).stdout.trim();
      await waitFor(() => sent.some((a) => a.job?.name === name), { timeoutMs: 10_000, what: "the job's assignment" });

      const file = Buffer.concat([Buffer.from([0, 0xff, 0x0a, 0x0d, 0xc3]), randomBytes(100_000)]);
      await new Promise<void>((resolve, reject) => {
        const upload = client.putArtifact((err) => (err ? reject(err) : resolve()));
        upload.write(pb.ArtifactChunk.fromPartial({ job: name, token, path: "/out/report.bin", data: file, last: true }));
        upload.end();
      });
      await new Promise<void>((resolve, reject) => {
        const out = client.output((err) => (err ? reject(err) : resolve()));
        out.write(pb.JobOutputChunk.fromPartial({ job: name, token, stream: "stdout", data: Buffer.from("built\n") }));
        out.write(pb.JobOutputChunk.fromPartial({ job: name, token, stream: "stderr", data: Buffer.from("warned\n") }));
        out.end();
      });

      const got = JSON.parse((await eph(api(), ["job", "get", name, "-o", "json"])).stdout) as { status: { artifacts: unknown[] } };
      expect(got.status.artifacts).toEqual([{ path: "/out/report.bin", size: file.length, sha256: expect.stringMatching(/^[0-9a-f]{64}$/), meta: { format: "binary" } }]);

      const toStdout = await eph(api(), ["artifact", "download", "--job", name, "/out/report.bin"]);
      expect(toStdout).toMatchObject({ code: 0, stderr: "" });
      expect(toStdout.stdoutBytes.equals(file)).toBe(true);
      const target = join(core().scratch, "report.bin");
      expect(await eph(api(), ["artifact", "download", "--job", name, "/out/report.bin", "-o", target])).toMatchObject({ code: 0, stdout: "", stderr: "" });
      expect((await readFile(target)).equals(file)).toBe(true);
      expect((await eph(api(), ["artifact", "download", "--job", name, "@stdout"])).stdout).toBe("built\n");

      const missing = await eph(api(), ["artifact", "download", "--job", name, "/out/nope"]);
      expect(missing.code).not.toBe(0);
      expect(missing.stderr).toContain(`job ${name} has no artifact /out/nope: it has @stdout, @stderr, /out/report.bin`);
      const noJob = await eph(api(), ["artifact", "download", "--job", "nope", "@stdout"]);
      expect(noJob.stderr).toContain("job nope not found");
    } finally {
      take.cancel();
      client.close();
      agent.stop();
      await server.shutdown();
    }
  });
});
