// `pnpm demo:jobs` as a user runs it (examples/demo-jobs.sh --no-build), under its own
// prefix and free ports: a job runner group's two pods on the simulated cluster (Docker pods)
// and a pod deleted by hand replaced; a job in a sandbox's routing context followed with
// --attach prints its output and its routing key and exits 3; its artifact and its @stdout
// download byte for byte; five jobs submitted at once all end; `eph job list --all` shows
// the six.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describeWithDocker } from "../support/docker.js";
import { uniquePrefix } from "../support/servers.js";
import { freePort } from "../support/stack.js";

const ROOT = join(__dirname, "..", "..");
const run = promisify(execFile);

describeWithDocker("pnpm demo:jobs", () => {
  it("keeps a group's two pods, runs a job with its routing key to exit 3, downloads its artifacts, runs five at once, to 'demo finished'", async () => {
    const prefix = uniquePrefix("demoj");
    const ports = ["API", "IOCONTEXT", "JOBS", "ROUTES", "KUBE_SIM"];
    const env: NodeJS.ProcessEnv = { ...process.env, EPHEMERA_PREFIX: prefix };
    for (const p of ports) env[`DEMO_${p}_PORT`] = String(await freePort());
    const demo = await run("bash", [join(ROOT, "examples/demo-jobs.sh"), "--no-build"], { cwd: ROOT, env, timeout: 420_000, maxBuffer: 64 << 20 })
      .catch((err: Error & { stdout?: string; stderr?: string }) => { throw new Error(`the demo failed: ${err.message}\n${err.stdout}\n${err.stderr}`); });
    const out = demo.stdout.split("\n");
    const said = demo.stderr.split("\n");
    const key = /^routing key of jobs-demo: ([a-z0-9]+)$/.exec(out.find((l) => l.startsWith("routing key of jobs-demo: ")) ?? "")?.[1];
    expect(key).toBeTruthy();
    // Two pods Running; after one is deleted by hand, two again, the deleted one not among them.
    const gone = /^pod "(demo-runners-[0-9a-f]+)" deleted$/.exec(out.find((l) => /^pod ".*" deleted$/.test(l)) ?? "")?.[1];
    expect(gone).toBeTruthy();
    const after = out.find((l) => l.startsWith(`pods after deleting ${gone}: `))!.split(": ")[1]!.trim().split(" ");
    expect(after).toHaveLength(2);
    expect(after).not.toContain(gone);
    // The attached job: its output on stdout (its stderr on stderr), its key, its end and exit code 3.
    expect(out).toContain(`routing key: ${key}`);
    expect(out).toContain("done, exiting 3");
    expect(out).toContain("job exit code: 3");
    expect(said).toContain("a line on stderr");
    const job = /^job (demo-job-[a-z0-9]{8}) submitted$/.exec(said.find((l) => /^job demo-job-\S+ submitted$/.test(l)) ?? "")?.[1];
    expect(job).toBeTruthy();
    expect(said).toContain(`job ${job} Failed (exited): exited with 3`);
    // Its artifacts, byte for byte: the report it wrote and its stdout as --attach printed it.
    expect(out).toContain("artifact /tmp/report.txt: the bytes the job wrote");
    expect(out).toContain("artifact @stdout: the bytes --attach printed");
    expect(out).toContain(`routing key ${key}`);
    // Five at once: each ended with exit code 3.
    const batch = out.filter((l) => l.startsWith("batch job "));
    expect(batch).toHaveLength(5);
    for (const l of batch) expect(l).toMatch(/^batch job \d: demo-job-[a-z0-9]{8} exited 3$/);
    // The list of every job: the six, each Failed with 3 on one of the group's pods.
    const listed = out.filter((l) => /^demo-job-[a-z0-9]{8}\s/.test(l));
    expect(listed).toHaveLength(6);
    for (const l of listed) expect(l).toMatch(/^demo-job-[a-z0-9]{8}\s+demo-runners\s+Failed\s+demo-runners-[0-9a-f]+\s+3\s/);
    expect(listed.map((l) => l.split(/\s+/)[0]).sort()).toEqual([job!, ...batch.map((l) => l.split(" ")[3]!)].sort());
    expect(said).toContain("demo finished");
  }, 480_000);
});
