// The container runtimes' shared contract: the same pods run under the process runtime and,
// where Docker answers, the docker runtime; then what only real containers can show
// (memory limits, users, a read-only root, images, a host that pods cannot write).
// Commands say `$$$$` for the shell's `$$`: Kubernetes reduces `$$` to `$` in commands.
import type { V1Pod } from "@kubernetes/client-node";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fresh, pod, podWhere, startHarness, waitFor, type Harness } from "./sim.testkit.js";
import { startKubeSimProcess } from "./child.js";
import { startKubeSim } from "./start.js";

const DEBIAN = "debian:bookworm-slim";
const NODE = "ephemera/node:20.20.2";
const dockerAnswers = spawnSync("docker", ["info"], { timeout: 20_000, stdio: "ignore" }).status === 0;
if (!dockerAnswers) console.warn("kube-sim runtimes: Docker does not answer here, so only the process runtime's contract runs");
const runtimes = dockerAnswers ? (["process", "docker"] as const) : (["process"] as const);

const phase = (p: V1Pod) => p.status?.phase;
const state = (p: V1Pod, name = "main") => p.status?.containerStatuses?.find((c) => c.name === name)?.state;
const sh = (name: string, script: string, extra: Record<string, unknown> = {}) => ({ name, image: DEBIAN, command: ["sh", "-c", script], ...extra });
/** Names of the running containers carrying a label. */
const dockerPs = (label: string) => execFileSync("docker", ["ps", "-a", "--filter", `label=${label}`, "--format", "{{.Names}}"], { encoding: "utf8" })
  .split("\n").filter(Boolean);
const log = (h: Harness, name: string, container = "main") => h.core.readNamespacedPodLog({ name, namespace: h.ns, container });

describe.each(runtimes)("the %s runtime", (runtime) => {
  let h: Harness;
  beforeAll(async () => { h = await startHarness({ runtime }); });
  afterAll(async () => { await h?.sim.stop(); });

  it("gives a pod's containers one localhost and a shared emptyDir", async () => {
    const name = fresh("net");
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const server = `require("net").createServer((s) => s.end("pong")).listen(${port}, "127.0.0.1", () => require("fs").writeFileSync("/shared/up", ""))`;
    const client = `require("net").connect(${port}, "127.0.0.1").on("data", (d) => { console.log(String(d)); process.exit(0); })`;
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, {
      containers: [
        { name: "server", image: NODE, command: ["node", "-e", server], volumeMounts: [{ name: "shared", mountPath: "/shared" }] },
        { name: "main", image: NODE, command: ["sh", "-c", `while [ ! -e /shared/up ]; do sleep 0.05; done; node -e '${client}'; kill 0`],
          volumeMounts: [{ name: "shared", mountPath: "/shared" }] },
      ],
      volumes: [{ name: "shared", emptyDir: {} }],
    }) });
    await podWhere(h, name, (p) => !!state(p)?.terminated, "main to end", 30_000);
    expect(await log(h, name)).toBe("pong\n");
    await h.core.deleteNamespacedPod({ name, namespace: h.ns, gracePeriodSeconds: 0 });
  });

  it("mounts secret and configMap files, resolves secretKeyRef, and reports exit codes, termination messages and logs", async () => {
    const name = fresh("vol");
    await h.core.createNamespacedSecret({ namespace: h.ns, body: { metadata: { name: `${name}-s` }, stringData: { token: "s3cret", other: "o" } } });
    await h.core.createNamespacedConfigMap({ namespace: h.ns, body: { metadata: { name: `${name}-c` }, data: { "app.conf": "fast=1" } } });
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [sh("main",
      "cat /etc/s/tok; echo; cat /etc/c/app.conf; echo; echo $TOKEN; ls /etc/s; echo bye > /dev/termination-log; exit 3", {
        env: [{ name: "TOKEN", valueFrom: { secretKeyRef: { name: `${name}-s`, key: "token" } } }],
        volumeMounts: [{ name: "s", mountPath: "/etc/s", readOnly: true }, { name: "c", mountPath: "/etc/c" }],
      })],
    volumes: [{ name: "s", secret: { secretName: `${name}-s`, items: [{ key: "token", path: "tok" }] } }, { name: "c", configMap: { name: `${name}-c` } }],
    }) });
    const done = await podWhere(h, name, (p) => phase(p) === "Failed", "Failed", 30_000);
    expect(state(done)?.terminated).toMatchObject({ exitCode: 3, reason: "Error", message: "bye\n" });
    expect(await log(h, name)).toBe("s3cret\nfast=1\ns3cret\ntok\n");
  });

  it("runs init containers one after the other before the app containers", async () => {
    const name = fresh("init");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, {
      initContainers: [sh("first", "echo one >> /w/order"), sh("second", "echo two >> /w/order")].map((c) => ({ ...c, volumeMounts: [{ name: "w", mountPath: "/w" }] })),
      containers: [sh("main", "cat /w/order", { volumeMounts: [{ name: "w", mountPath: "/w" }] })],
      volumes: [{ name: "w", emptyDir: {} }],
    }) });
    const done = await podWhere(h, name, (p) => phase(p) === "Succeeded", "Succeeded", 30_000);
    expect(state(done)?.terminated).toMatchObject({ exitCode: 0, reason: "Completed" });
    expect(await log(h, name)).toBe("one\ntwo\n");
  });
});

if (dockerAnswers) describe("the docker runtime", () => {
  let h: Harness;
  beforeAll(async () => { h = await startHarness({ runtime: "docker" }); });
  afterAll(async () => { await h?.sim.stop(); });

  it("reports the pause container's address as the pod's IP and runs a container per pod container, gone after delete", async () => {
    const name = fresh("ps");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [sh("main", "sleep 300")] }) });
    const running = await podWhere(h, name, (p) => !!state(p)?.running, "main running", 30_000);
    expect(running.status?.podIP).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(running.status?.podIP).not.toBe("127.0.0.1");
    const label = `dev.ephemera.kube-sim.pod=${running.metadata!.uid!}`;
    expect(dockerPs(label)).toHaveLength(2);
    await h.core.deleteNamespacedPod({ name, namespace: h.ns, gracePeriodSeconds: 1 });
    await waitFor("the pod gone", async () => !(await h.core.listNamespacedPod({ namespace: h.ns })).items.some((p) => p.metadata?.name === name), 30_000);
    await waitFor("its containers gone", () => dockerPs(label).length === 0, 30_000);
  });

  it("lets a pod reach a host service listening on the bridge gateway as host.kube-sim.internal", async () => {
    const server = createServer((_req, res) => res.end("from-host"));
    await new Promise<void>((ok) => server.listen(0, "0.0.0.0", () => ok()));
    try {
      const port = (server.address() as AddressInfo).port;
      const name = fresh("host");
      await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [{ name: "main", image: NODE,
        command: ["node", "-e", `fetch("http://host.kube-sim.internal:${port}/").then((r) => r.text()).then(console.log)`] }] }) });
      const done = await podWhere(h, name, (p) => phase(p) === "Succeeded" || phase(p) === "Failed", "the pod to end", 30_000);
      expect(await log(h, name)).toBe("from-host\n");
      expect(phase(done)).toBe("Succeeded");
    } finally { server.close(); }
  });

  it("reports OOMKilled with exit code 137 for a container past its memory limit", async () => {
    const name = fresh("oom");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [sh("main", "head -c 300m /dev/zero | tail",
      { resources: { limits: { memory: "32Mi" } } })] }) });
    const done = await podWhere(h, name, (p) => phase(p) === "Failed", "Failed", 30_000);
    expect(state(done)?.terminated).toMatchObject({ exitCode: 137, reason: "OOMKilled" });
  });

  it("refuses to start a container that would run as root under runAsNonRoot", async () => {
    const name = fresh("nonroot");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { securityContext: { runAsNonRoot: true }, containers: [sh("main", "id -u")] }) });
    const p = await podWhere(h, name, (x) => state(x)?.waiting?.reason === "CreateContainerConfigError", "CreateContainerConfigError", 30_000);
    expect(state(p)?.waiting?.message).toBe(`container has runAsNonRoot and image will run as root (pod: "${name}_${h.ns}(${p.metadata!.uid!})", container: main)`);
    const asUser = fresh("asuser");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(asUser, { securityContext: { runAsNonRoot: true, runAsUser: 1234 }, containers: [sh("main", "id -u")] }) });
    await podWhere(h, asUser, (x) => phase(x) === "Succeeded", "Succeeded", 30_000);
    expect(await log(h, asUser)).toBe("1234\n");
  });

  it("refuses writes to a read-only root filesystem", async () => {
    const name = fresh("ro");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [sh("main", "touch /etc/x 2>/dev/null || echo refused",
      { securityContext: { readOnlyRootFilesystem: true } })] }) });
    await podWhere(h, name, (p) => phase(p) === "Succeeded", "Succeeded", 30_000);
    expect(await log(h, name)).toBe("refused\n");
  });

  it("reports an image that is neither here nor pullable as ErrImagePull, then ImagePullBackOff", async () => {
    const name = fresh("pull");
    const image = `ephemera-test/none-${name}:1`;
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [{ name: "main", image, command: ["true"] }] }) });
    await podWhere(h, name, (x) => state(x)?.waiting?.reason === "ErrImagePull", "ErrImagePull", 60_000);
    const p = await podWhere(h, name, (x) => state(x)?.waiting?.reason === "ImagePullBackOff", "ImagePullBackOff", 30_000);
    expect(state(p)?.waiting?.message).toBe(`Back-off pulling image "${image}"`);
    expect(phase(p)).toBe("Pending");
  });

  it("runs an image the image map stands in for with a local one", async () => {
    // A throwaway local image with a file of its own, so the pod shows which image it ran.
    const dir = mkdtempSync(join(tmpdir(), "kube-sim-map-"));
    const local = `ephemera-test/stand-in:${process.pid}`;
    writeFileSync(join(dir, "Dockerfile"), `FROM ${DEBIAN}\nRUN echo stand-in > /marker\n`);
    execFileSync("docker", ["build", "-q", "-t", local, dir], { env: { ...process.env, DOCKER_BUILDKIT: "0" }, stdio: "ignore", timeout: 120_000 });
    const own = await startHarness({ runtime: "docker", images: [{ image: "ubuntu:24.04", use: local }], kubeconfigPath: join(dir, "kubeconfig") });
    try {
      const name = fresh("map");
      await own.core.createNamespacedPod({ namespace: own.ns, body: pod(name, { containers: [{ ...sh("main", "cat /marker"), image: "ubuntu:24.04" }] }) });
      await podWhere(own, name, (p) => phase(p) === "Succeeded", "Succeeded", 30_000);
      expect(await log(own, name)).toBe("stand-in\n");
    } finally {
      await own.sim.stop();
      execFileSync("docker", ["rmi", "-f", local], { stdio: "ignore" });
    }
  });

  it("runs a built ephemera/agent image with its own /agent, and the built agent on Node's image where that tag is not built", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kube-sim-agent-"));
    const built = `ephemera/agent:test-${process.pid}`;
    writeFileSync(join(dir, "Dockerfile"), `FROM ${DEBIAN}\nRUN mkdir /agent && echo from-the-image > /agent/marker\n`);
    execFileSync("docker", ["build", "-q", "-t", built, dir], { env: { ...process.env, DOCKER_BUILDKIT: "0" }, stdio: "ignore", timeout: 120_000 });
    try {
      const [own, standIn] = [fresh("agent"), fresh("agent")];
      await h.core.createNamespacedPod({ namespace: h.ns, body: pod(own, { containers: [{ ...sh("main", "ls /agent"), image: built }] }) });
      await h.core.createNamespacedPod({ namespace: h.ns, body: pod(standIn, { containers: [{ ...sh("main", "ls /agent"), image: `ephemera/agent:absent-${process.pid}` }] }) });
      for (const name of [own, standIn]) await podWhere(h, name, (p) => phase(p) === "Succeeded", "Succeeded", 60_000);
      expect(await log(h, own)).toBe("marker\n");
      expect((await log(h, standIn)).split("\n")).toContain("agent.cjs");
    } finally {
      execFileSync("docker", ["rmi", "-f", built], { stdio: "ignore" });
    }
  });
});

if (dockerAnswers) it("with default settings, a pod cannot write to the host: a touch in /etc and an install into /usr leave nothing", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kube-sim-host-"));
  const sim = await startKubeSim({ listen: "127.0.0.1:0", kubeconfigPath: join(dir, "kubeconfig") });
  const id = fresh("probe");
  const files = [`/etc/ephemera-probe-${id}`, `/usr/local/bin/ephemera-probe-${id}`];
  try {
    const res = await fetch(`${sim.url}/api/v1/namespaces/default/pods`, { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(pod(id, { containers: [sh("main", files.map((f) => `touch ${f}`).join(" && "))] })) });
    expect(res.status).toBe(201);
    const done = await waitFor("the pod to end", async () => {
      const p = await (await fetch(`${sim.url}/api/v1/namespaces/default/pods/${id}`)).json() as V1Pod;
      return phase(p) === "Succeeded" || phase(p) === "Failed" ? p : undefined;
    }, 30_000);
    expect(state(done)?.terminated).toMatchObject({ exitCode: 0, reason: "Completed" });
    expect(files.filter((f) => existsSync(f))).toEqual([]);
  } finally { await sim.stop(); }
});

if (dockerAnswers) it("removes at start the containers a killed kube-sim of the same data dir left", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kube-sim-killed-"));
  const dataDir = join(dir, "data");
  const killed = await startKubeSimProcess({ kubeconfigPath: join(dir, "a"), dataDir, runtime: "docker", deadlineMs: 30_000 });
  try {
    const res = await fetch(`${killed.url}/api/v1/namespaces/default/pods`, { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(pod("left", { containers: [sh("main", "sleep 300")] })) });
    expect(res.status).toBe(201);
    const uid = ((await res.json()) as V1Pod).metadata!.uid!;
    await waitFor("the pod's two containers", () => dockerPs(`dev.ephemera.kube-sim.pod=${uid}`).length === 2, 30_000);
    process.kill(killed.pid, "SIGKILL");
    await killed.kill();
    expect(dockerPs(`dev.ephemera.kube-sim.pod=${uid}`)).toHaveLength(2);
    const next = await startKubeSim({ listen: "127.0.0.1:0", kubeconfigPath: join(dir, "b"), dataDir, runtime: "docker" });
    expect(dockerPs(`dev.ephemera.kube-sim.pod=${uid}`)).toEqual([]);
    expect(next.runtime).toEqual({ name: "docker", why: "Docker answers; 2 leftover container(s) removed" });
    await next.stop();
  } finally { await killed.kill(); }
});
