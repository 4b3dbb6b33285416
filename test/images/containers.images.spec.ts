// ephemera's images, built by `pnpm images`, run as containers the way a cluster runs them:
// as user 10001 with a read-only root filesystem (only /tmp writable), against this
// machine's NATS and Redis (host network), under a fresh EPHEMERA_PREFIX on free ports.
// One sandbox goes through them with `eph` on the host. The runner container uses the
// Kubernetes driver against kube-sim on the host, whose kubelet runs the step pods as host
// processes: the process driver needs root and mount namespaces, which a container running
// as 10001 does not have. When Docker cannot run here, one line says why; under CI=true that
// is a failure, elsewhere the suite is reported skipped.
import { execFile, spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { checkHealth, waitFor } from "@ephemera/kit";
import { ephAt, ephOk, type Eph } from "../support/eph.js";
import { startSim, type Sim } from "../support/kube.js";
import { NATS_URL, REDIS_URL, removePrefix, uniquePrefix } from "../support/servers.js";
import { freePort } from "../support/stack.js";

const ROOT = join(__dirname, "..", "..");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const SERVICES = ["iocontext", "scheduler", "runner", "sandbox"] as const;
type Service = (typeof SERVICES)[number];

// Exit 3 is ensure-docker.sh's "cannot run here"; any other failure is a failure.
const ensured = spawnSync("bash", [join(ROOT, "scripts/ensure-docker.sh")], { encoding: "utf8", timeout: 300_000 });
const cannotRun = ensured.status === 3 ? ensured.stderr.trim().split("\n").pop() : undefined;

const run = promisify(execFile);
const docker = async (args: string[]) => (await run("docker", args, { maxBuffer: 16 << 20 })).stdout.trim();

if (cannotRun !== undefined && process.env["CI"] !== "true") {
  console.log(`ephemera's images not run: ${cannotRun}`);
  it.skip(`runs ephemera's images as containers (${cannotRun})`, () => undefined);
} else if (cannotRun !== undefined) {
  it("runs ephemera's images as containers", () => {
    throw new Error(`Docker should run in CI, and cannot: ${cannotRun}`);
  });
} else {
  describe("ephemera's images as containers", () => {
    const prefix = uniquePrefix("img");
    const scratch = mkdtempSync("/var/tmp/ephemera-images-");
    const started: string[] = [];
    const ports = {} as Record<Service, number>;
    let sim: Sim;
    let eph: Eph;
    // A failure says what the containers said last.
    const withLogs = async (f: () => Promise<void>) => {
      try {
        await f();
      } catch (err) {
        const tails = await Promise.all(started.map(async (name) => {
          const logs = await run("docker", ["logs", "--tail", "15", name]).catch((e: Error) => ({ stdout: e.message, stderr: "" }));
          return `--- ${name}\n${logs.stdout}${logs.stderr}`;
        }));
        throw new Error(`${(err as Error).message}\n${tails.join("\n")}`, { cause: err });
      }
    };

    beforeAll(async () => {
      if (ensured.status !== 0) throw new Error(`ensure-docker.sh exited ${ensured.status}: ${ensured.stderr}`);
      // From the workspace `pnpm test` has built; an image whose files did not change is kept.
      await run("bash", [join(ROOT, "scripts/images.sh"), "--no-build"], { cwd: ROOT, timeout: 300_000, maxBuffer: 16 << 20 });
      sim = await startSim();
      // The runner reads the cluster's kubeconfig as user 10001: a copy it may read, mounted read-only.
      const kubeconfig = join(scratch, "kubeconfig");
      copyFileSync(sim.kubeconfig, kubeconfig);
      chmodSync(kubeconfig, 0o644);
      for (const s of SERVICES) ports[s] = await freePort();
      const io = `127.0.0.1:${ports.iocontext}`;
      const env: Record<string, string> = {
        NATS_URL, REDIS_URL, EPHEMERA_PREFIX: prefix, EPHEMERA_CLUSTER: "local", EPHEMERA_LOG_FORMAT: "json",
        // The runner and the IO context must agree on it; each container has its own /tmp.
        EPHEMERA_SIGNING_KEY: `images-${prefix}-${"k".repeat(32)}`,
        EPHEMERA_API_LISTEN: `127.0.0.1:${ports.sandbox}`, EPHEMERA_IOCONTEXT_LISTEN: io,
        EPHEMERA_SCHEDULER_LISTEN: `127.0.0.1:${ports.scheduler}`, EPHEMERA_RUNNER_LISTEN: `127.0.0.1:${ports.runner}`,
        EPHEMERA_METRICS_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_HTTP_LISTEN: "127.0.0.1:0",
        EPHEMERA_RUNNER_DRIVER: "kubernetes", KUBECONFIG: "/kube/config", EPHEMERA_KUBE_NAMESPACE: "default",
        EPHEMERA_IOCONTEXT_ADDR: io, EPHEMERA_POD_IOCONTEXT: io, EPHEMERA_AGENT_IMAGE: `ephemera/agent:${VERSION}`,
      };
      for (const s of SERVICES) {
        const name = `${prefix}-${s}`;
        started.push(name);
        await docker([
          "run", "-d", "--name", name, "--network", "host", "--read-only", "--tmpfs", "/tmp",
          ...(s === "runner" ? ["-v", `${kubeconfig}:/kube/config:ro`] : []),
          ...Object.entries(env).flatMap(([k, v]) => ["-e", `${k}=${v}`]),
          `ephemera/${s}:${VERSION}`,
        ]);
      }
      eph = ephAt(`127.0.0.1:${ports.sandbox}`);
    }, 420_000);

    afterAll(async () => {
      // Every container this suite started, also when it failed.
      if (started.length) await docker(["rm", "-f", ...started]);
      await sim?.stop();
      await removePrefix(prefix);
      rmSync(scratch, { recursive: true, force: true });
    }, 60_000);

    it("each service runs as user 10001 on a read-only root filesystem and answers its health check", () => withLogs(async () => {
      for (const s of SERVICES) {
        await waitFor(() => checkHealth(`127.0.0.1:${ports[s]}`), { timeoutMs: 60_000, intervalMs: 200, what: `${s}'s container to report SERVING` });
        const inspected = JSON.parse(await docker(["inspect", `${prefix}-${s}`])) as [{ Config: { User: string }; HostConfig: { ReadonlyRootfs: boolean } }];
        expect([s, inspected[0].Config.User, inspected[0].HostConfig.ReadonlyRootfs]).toEqual([s, "10001:10001", true]);
        expect(await docker(["exec", `${prefix}-${s}`, "id", "-u"])).toBe("10001");
        // As root, so that only the read-only filesystem can refuse it.
        const write = await run("docker", ["exec", "-u", "0", `${prefix}-${s}`, "touch", "/app/x"]).then(() => "written", (e: Error) => e.message);
        expect(write).toContain("Read-only file system");
      }
    }), 90_000);

    it("a sandbox goes through them: applied with eph, ready, its output read, deleted", () => withLogs(async () => {
      const plugin = join(scratch, "plugin.yaml");
      writeFileSync(plugin, `
name: greeting
spec:
  runner: {image: "debian:bookworm-slim"}
  create:
  - name: greet
    outputs: [{name: text, valueFromPath: /tmp/text}]
    script: |
      #!/bin/sh
      printf 'hello from %s' "$SIGNADOT_SANDBOX_NAME" > /tmp/text
`);
      const sandbox = join(scratch, "sandbox.yaml");
      writeFileSync(sandbox, "name: boxed\nspec:\n  cluster: local\n  resources:\n  - {name: res, plugin: greeting}\n");
      await ephOk(eph, ["plugin", "apply", "-f", plugin]);
      await ephOk(eph, ["sandbox", "apply", "-f", sandbox, "--wait"], { timeoutMs: 90_000 });
      const view = JSON.parse((await ephOk(eph, ["sandbox", "get", "boxed", "--show-outputs", "-o", "json"])).stdout) as {
        resources: { outputs: Record<string, { value: string }> }[];
      };
      expect(view.resources[0]!.outputs["greet.text"]!.value).toBe("hello from boxed");
      await ephOk(eph, ["sandbox", "delete", "boxed", "--wait"], { timeoutMs: 60_000 });
      expect((await eph(["sandbox", "get", "boxed"])).code).not.toBe(0);
    }), 150_000);

    it("the agent image runs as user 10001 with the V8 code cache its build made", async () => {
      const image = `ephemera/agent:${VERSION}`;
      const out = await docker(["run", "--rm", "--read-only", "--entrypoint", "sh", image, "-c", "id -u; ls /agent"]);
      expect(out.split("\n")).toEqual(["10001", "agent-bundle.cache", "agent-bundle.cjs", "agent.cjs"]);
    });
  });
}
