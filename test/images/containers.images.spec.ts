// ephemera's images, built by `pnpm images`, run as containers the way a cluster runs them:
// as user 10001 with a read-only root filesystem (only /tmp writable), against this
// machine's NATS and Redis (host network), under a fresh EPHEMERA_PREFIX on free ports.
// Sandboxes go through them with `eph` on the host. The runner container uses the
// Kubernetes driver against kube-sim on the host, whose kubelet runs each step pod as
// Docker containers (the agent image's ephemera-init and ephemera-sidecar, the plugin's
// image for main) on Docker's bridge: the IO context listens on the bridge's gateway, where
// pods reach it as host.kube-sim.internal. A plugin that installs packages as root (as the
// public dolt plugin does with apt-get) changes its own container only. When Docker cannot
// run here, one line says why; under CI=true that is a failure, elsewhere the suite is
// reported skipped.
import { execFile, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { checkHealth, waitFor } from "@ephemera/kit";
import { ephAt, ephOk, type Eph } from "../support/eph.js";
import { bridgeGateway, kubectl, startSim, type Sim } from "../support/kube.js";
import { NATS_URL, REDIS_URL, removePrefix, uniquePrefix } from "../support/servers.js";
import { describeWithDocker, withContainerLogs } from "../support/docker.js";
import { freePort } from "../support/stack.js";

const ROOT = join(__dirname, "..", "..");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const SERVICES = ["iocontext", "scheduler", "runner", "sandbox"] as const;
type Service = (typeof SERVICES)[number];

const run = promisify(execFile);
const docker = async (args: string[]) => (await run("docker", args, { maxBuffer: 16 << 20 })).stdout.trim();

describeWithDocker("ephemera's images as containers", () => {
  const prefix = uniquePrefix("img");
  const scratch = mkdtempSync("/var/tmp/ephemera-images-");
  const started: string[] = [];
  const ports = {} as Record<Service, number>;
  let sim: Sim;
  let eph: Eph;
  // Every pod container Docker starts while the suite runs (docker events), as "name image".
  let events: ChildProcess | undefined;
  const podContainers: string[] = [];
  // The step pods' namespace: this suite's own, so that the containers it sees are its pods'.
  const namespace = `img-${process.pid}`;
  // A failure says what the containers said last.
  const withLogs = (f: () => Promise<void>) => withContainerLogs(started, f);

  beforeAll(async () => {
    // From the workspace `pnpm test` has built; an image whose files did not change is kept.
    await run("bash", [join(ROOT, "scripts/images.sh"), "--no-build"], { cwd: ROOT, timeout: 600_000, maxBuffer: 16 << 20 });
    sim = await startSim({}, "docker");
    await kubectl(sim, ["create", "namespace", namespace]);
    events = spawn("docker", ["events", "--filter", "label=dev.ephemera.kube-sim", "--filter", "event=start",
      "--format", '{{index .Actor.Attributes "name"}} {{index .Actor.Attributes "image"}}'], { stdio: ["ignore", "pipe", "ignore"] });
    createInterface({ input: events.stdout! }).on("line", (line) => { if (line.includes(`_${namespace}_`)) podContainers.push(line); });
    // The runner reads the cluster's kubeconfig as user 10001: a copy it may read, mounted read-only.
    const kubeconfig = join(scratch, "kubeconfig");
    copyFileSync(sim.kubeconfig, kubeconfig);
    chmodSync(kubeconfig, 0o644);
    for (const s of SERVICES) ports[s] = await freePort();
    // The IO context on Docker's bridge: the runner and the pods reach it there.
    const io = `${bridgeGateway()}:${ports.iocontext}`;
    const env: Record<string, string> = {
      NATS_URL, REDIS_URL, EPHEMERA_PREFIX: prefix, EPHEMERA_CLUSTER: "local", EPHEMERA_LOG_FORMAT: "json",
      // The runner and the IO context must agree on it; each container has its own /tmp.
      EPHEMERA_SIGNING_KEY: `images-${prefix}-${"k".repeat(32)}`,
      EPHEMERA_API_LISTEN: `127.0.0.1:${ports.sandbox}`, EPHEMERA_IOCONTEXT_LISTEN: io,
      EPHEMERA_SCHEDULER_LISTEN: `127.0.0.1:${ports.scheduler}`, EPHEMERA_RUNNER_LISTEN: `127.0.0.1:${ports.runner}`,
      EPHEMERA_METRICS_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_HTTP_LISTEN: "127.0.0.1:0", EPHEMERA_GATEWAY_LISTEN: "127.0.0.1:0", EPHEMERA_JOBS_LISTEN: "127.0.0.1:0", EPHEMERA_TUNNEL_LISTEN: "127.0.0.1:0",
      EPHEMERA_RUNNER_DRIVER: "kubernetes", KUBECONFIG: "/kube/config", EPHEMERA_KUBE_NAMESPACE: namespace,
      EPHEMERA_IOCONTEXT_ADDR: io, EPHEMERA_POD_IOCONTEXT: `host.kube-sim.internal:${ports.iocontext}`, EPHEMERA_AGENT_IMAGE: `ephemera/agent:${VERSION}`,
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
  }, 720_000);

  afterAll(async () => {
    // Every container this suite started, also when it failed.
    if (started.length) await docker(["rm", "-f", ...started]);
    events?.kill();
    await sim?.stop();
    await removePrefix(prefix);
    rmSync(scratch, { recursive: true, force: true });
  }, 60_000);

  it("each service runs as user 10001 on a read-only root filesystem and answers its health check", () => withLogs(async () => {
    for (const s of SERVICES) {
      const at = s === "iocontext" ? `${bridgeGateway()}:${ports[s]}` : `127.0.0.1:${ports[s]}`;
      await waitFor(() => checkHealth(at), { timeoutMs: 60_000, intervalMs: 200, what: `${s}'s container to report SERVING` });
      const inspected = JSON.parse(await docker(["inspect", `${prefix}-${s}`])) as [{ Config: { User: string }; HostConfig: { ReadonlyRootfs: boolean } }];
      expect([s, inspected[0].Config.User, inspected[0].HostConfig.ReadonlyRootfs]).toEqual([s, "10001:10001", true]);
      expect(await docker(["exec", `${prefix}-${s}`, "id", "-u"])).toBe("10001");
      // As root, so that only the read-only filesystem can refuse it.
      const write = await run("docker", ["exec", "-u", "0", `${prefix}-${s}`, "touch", "/app/x"]).then(() => "written", (e: Error) => e.message);
      expect(write).toContain("Read-only file system");
    }
  }), 90_000);

  it("a sandbox goes through them: applied with eph, its step a pod of three Docker containers, ready, its output read, deleted", () => withLogs(async () => {
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
    await ephOk(eph, ["sandbox", "apply", "-f", sandbox], { timeoutMs: 90_000 });
    const view = JSON.parse((await ephOk(eph, ["sandbox", "get", "boxed", "--show-outputs", "-o", "json"])).stdout) as {
      resources: { outputs: Record<string, { value: string }> }[];
    };
    expect(view.resources[0]!.outputs["greet.text"]!.value).toBe("hello from boxed");
    // The step's pod: a pause container, then ephemera-init, main and ephemera-sidecar, each from its image.
    const ofStep = podContainers.map((l) => l.split(" "));
    expect(ofStep.map(([name, image]) => `${name!.split("_")[1]} ${image}`).sort()).toEqual([
      "POD debian:bookworm-slim", "ephemera-init ephemera/agent:" + VERSION, "ephemera-sidecar ephemera/agent:" + VERSION, "main debian:bookworm-slim",
    ].sort());
    await ephOk(eph, ["sandbox", "delete", "boxed"], { timeoutMs: 60_000 });
    expect((await eph(["sandbox", "get", "boxed"])).code).not.toBe(0);
  }), 150_000);

  it("a step that installs packages as root, as the public dolt plugin does, changes its own container and nothing on this machine", () => withLogs(async () => {
    const probe = `/etc/ephemera-probe-${process.pid}`;
    // What a package install changes on a Debian machine: dpkg's status file, and the package's state in it.
    const installed = () => spawnSync("dpkg-query", ["-W", "-f", "${Status}", "default-mysql-client"], { encoding: "utf8" }).stdout;
    const dpkgStatus = () => createHash("sha256").update(readFileSync("/var/lib/dpkg/status")).digest("hex");
    const before = dpkgStatus();
    // Not on this machine before: otherwise the test would show nothing.
    expect([installed(), existsSync(probe)]).toEqual(["", false]);
    const plugin = join(scratch, "mysql-client.yaml");
    writeFileSync(plugin, `
name: mysql-client
spec:
  runner: {image: "debian:bookworm-slim"}
  create:
  - name: install
    outputs: [{name: version, valueFromPath: /tmp/version}]
    script: |
      #!/bin/bash
      set -euo pipefail
      apt-get update -qq
      apt-get install -y -qq default-mysql-client >/dev/null 2>&1
      touch ${probe}
      mysql --version > /tmp/version
`);
    await ephOk(eph, ["plugin", "apply", "-f", plugin]);
    const sandbox = join(scratch, "sandbox-mysql.yaml");
    writeFileSync(sandbox, "name: installs\nspec:\n  cluster: local\n  resources:\n  - {name: client, plugin: mysql-client}\n");
    await ephOk(eph, ["sandbox", "apply", "-f", sandbox], { timeoutMs: 240_000 });
    const view = JSON.parse((await ephOk(eph, ["sandbox", "get", "installs", "--show-outputs", "-o", "json"])).stdout) as {
      resources: { outputs: Record<string, { value: string }> }[];
    };
    // It ran as root in its container: the client is installed there, and the file written.
    expect(view.resources[0]!.outputs["install.version"]!.value).toMatch(/^mysql\s+Ver .*MariaDB/);
    expect([installed(), existsSync(probe), dpkgStatus()]).toEqual(["", false, before]);
    await ephOk(eph, ["sandbox", "delete", "installs"], { timeoutMs: 60_000 });
  }), 300_000);

  it("the agent image runs as user 10001 with the V8 code cache its build made", async () => {
    const image = `ephemera/agent:${VERSION}`;
    const out = await docker(["run", "--rm", "--read-only", "--entrypoint", "sh", image, "-c", "id -u; ls /agent"]);
    expect(out.split("\n")).toEqual(["10001", "agent-bundle.cache", "agent-bundle.cjs", "agent.cjs"]);
  });
});
