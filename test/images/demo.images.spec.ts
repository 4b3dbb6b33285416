// `pnpm demo:containers` as a user runs it (examples/demo-containers.sh, with --no-build:
// `pnpm test` has built the workspace), under its own prefix and free ports: hello-db with
// the four services as containers and every step pod's containers as Docker containers. It
// ends with "demo finished" and leaves no container behind.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describeWithDocker } from "../support/docker.js";
import { uniquePrefix } from "../support/servers.js";
import { freePort } from "../support/stack.js";

const ROOT = join(__dirname, "..", "..");
const run = promisify(execFile);
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;

describeWithDocker("pnpm demo:containers", () => {
  it("runs hello-db with the services and the step pods as containers, to 'demo finished', and removes them", async () => {
    const prefix = uniquePrefix("democ");
    const env = {
      ...process.env, EPHEMERA_PREFIX: prefix,
      DEMO_API_PORT: String(await freePort()), DEMO_IOCONTEXT_PORT: String(await freePort()), DEMO_KUBE_SIM_PORT: String(await freePort()),
    };
    const demo = await run("bash", [join(ROOT, "examples/demo-containers.sh"), "--no-build"], { cwd: ROOT, env, timeout: 420_000, maxBuffer: 64 << 20 })
      .catch((err: Error & { stdout?: string; stderr?: string }) => { throw new Error(`the demo failed: ${err.message}\n${err.stdout}\n${err.stderr}`); });
    const said = `${demo.stdout}${demo.stderr}`;
    expect(demo.stderr.trim().split("\n")).toContain("demo finished");
    // The services ran as containers of ephemera's images.
    for (const role of ["iocontext", "scheduler", "runner", "sandbox"]) expect(said).toMatch(new RegExp(`${prefix}-${role}\\s+ephemera/${role}:${VERSION}\\s+Up`));
    // Each of hello-db's four create steps was a pod of Docker containers: init, main and sidecar from their images.
    const started = demo.stdout.split("\n").filter((l) => l.startsWith("k8s_")).map((l) => `${l.split("_")[1]} ${/image=(\S+)/.exec(l)?.[1]}`);
    const count = (what: string) => started.filter((s) => s === what).length;
    expect([count(`ephemera-init ephemera/agent:${VERSION}`), count("main debian:bookworm-slim"), count(`ephemera-sidecar ephemera/agent:${VERSION}`)])
      .toEqual([4, 4, 4]);
    expect(said).toContain("--- pod containers left: 0");
    // Nothing left: neither the services' containers nor any pod's.
    const left = (await run("docker", ["ps", "-a", "--filter", `name=^${prefix}-`, "--format", "{{.Names}}"])).stdout.trim();
    expect(left).toBe("");
  }, 480_000);
});
