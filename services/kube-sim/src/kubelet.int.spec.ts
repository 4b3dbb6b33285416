// The kubelet through client-node: pods run as local processes with init containers,
// emptyDirs, env from secrets and config maps, private /tmp, termination messages,
// deadlines, graceful deletion and the injected failures; nothing left running after stop.
// Commands say `$$$$` for the shell's `$$`: Kubernetes reduces `$$` to `$` in commands.
import { Log, Watch, type V1Pod } from "@kubernetes/client-node";
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { fresh, pod, podWhere, sh, startHarness, waitFor, type Harness } from "./sim.testkit.js";
import { startKubeSim } from "./start.js";

let h: Harness;
beforeAll(async () => { h = await startHarness(); });
afterAll(async () => { await h.sim.stop(); });

const phase = (p: V1Pod) => p.status?.phase;
const main = (p: V1Pod) => p.status?.containerStatuses?.find((c) => c.name === "main");
const alive = (pid: number) => existsSync(`/proc/${pid}`) && !/State:\s+Z/.test(readFileSync(`/proc/${pid}/status`, "utf8"));
// Containers run as nobody: a hostPath they write must let them, as on a real node.
const hostDir = () => { const d = mkdtempSync(join(tmpdir(), "kube-sim-host-")); chmodSync(d, 0o777); return d; };
/** Host pids of the processes whose environment holds MARKER=value (a container has its own pid namespace). */
const pidsMarked = (value: string) => readdirSync("/proc").filter((d) => /^\d+$/.test(d)).filter((d) => {
  try { return readFileSync(`/proc/${d}/environ`, "utf8").split("\0").includes(`MARKER=${value}`); } catch { return false; }
}).map(Number);
const marked = (value: string) => ({ env: [{ name: "MARKER", value }] });

it("runs an init container, then main and a sidecar sharing an emptyDir, to Succeeded; logs read and followed", async () => {
  const name = fresh("p");
  await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, {
    initContainers: [sh("init", "echo from-init > /tmp/shared/x", { volumeMounts: [{ name: "shared", mountPath: "/tmp/shared" }] })],
    containers: [
      sh("main", "cat /tmp/shared/x; ls /tmp; for i in 1 2 3; do echo line-$i; sleep 0.2; done; echo done > /dev/termination-log",
        { volumeMounts: [{ name: "shared", mountPath: "/tmp/shared" }] }),
      sh("sidecar", "echo side"),
    ],
    volumes: [{ name: "shared", emptyDir: {} }],
  }) });
  const followed = new PassThrough();
  let text = "";
  followed.on("data", (d: Buffer) => { text += d.toString(); });
  await podWhere(h, name, (p) => !!main(p)?.state?.running || !!main(p)?.state?.terminated, "main to start");
  const ended = new Promise<void>((resolve) => followed.once("end", () => resolve()));
  await new Log(h.kc).log(h.ns, name, "main", followed, { follow: true });
  await ended;
  expect(text).toBe("from-init\nshared\nline-1\nline-2\nline-3\n");
  const done = await podWhere(h, name, (p) => phase(p) === "Succeeded", "Succeeded");
  expect(main(done)?.state?.terminated).toMatchObject({ exitCode: 0, reason: "Completed", message: "done\n" });
  expect(done.status?.initContainerStatuses?.[0]?.state?.terminated?.reason).toBe("Completed");
  expect(done.spec?.nodeName).toBe("kube-sim");
  expect(done.status?.podIP).toBe("127.0.0.1");
  expect(done.status?.conditions?.map((c) => c.type)).toEqual(["PodScheduled", "Initialized", "Ready", "ContainersReady"]);
  expect(await h.core.readNamespacedPodLog({ name, namespace: h.ns, container: "sidecar" })).toBe("side\n");
  expect(await h.core.readNamespacedPodLog({ name, namespace: h.ns, container: "main", tailLines: 1 })).toBe("line-3\n");
  const ambiguous = await fetch(`${h.sim.url}/api/v1/namespaces/${h.ns}/pods/${name}/log`);
  expect(ambiguous.status).toBe(400);
  expect(((await ambiguous.json()) as { message: string }).message)
    .toBe(`a container name must be specified for pod ${name}, choose one of: [main sidecar] or one of the init containers: [init]`);
});

it("builds the environment from values, secrets, config maps and the pod's fields, expanding $(VAR)", async () => {
  const name = fresh("env");
  await h.core.createNamespacedSecret({ namespace: h.ns, body: { metadata: { name: `${name}-s` }, stringData: { token: "s3cret", other: "o" } } });
  await h.core.createNamespacedConfigMap({ namespace: h.ns, body: { metadata: { name: `${name}-c` }, data: { mode: "fast" } } });
  await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [{
    name: "main", image: "x", command: ["sh", "-c"], args: ["echo $TOKEN $MODE $POD $NS $GREETING $CM_mode ${HOME:-nohome} $(GREETING)"],
    env: [
      { name: "TOKEN", valueFrom: { secretKeyRef: { name: `${name}-s`, key: "token" } } },
      { name: "MODE", valueFrom: { configMapKeyRef: { name: `${name}-c`, key: "mode" } } },
      { name: "MISSING", valueFrom: { configMapKeyRef: { name: "nope", key: "k", optional: true } } },
      { name: "POD", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
      { name: "NS", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
      { name: "GREETING", value: "hi-$(MODE)" },
    ],
    envFrom: [{ configMapRef: { name: `${name}-c` }, prefix: "CM_" }],
  }] }) });
  await podWhere(h, name, (p) => phase(p) === "Succeeded", "Succeeded");
  expect(await h.core.readNamespacedPodLog({ name, namespace: h.ns })).toBe(`s3cret fast ${name} ${h.ns} hi-fast fast nohome hi-fast\n`);
});

it("keeps a container waiting with CreateContainerConfigError until its secret exists", async () => {
  const name = fresh("cfg");
  await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [{
    name: "main", image: "x", command: ["sh", "-c", "echo $V"], env: [{ name: "V", valueFrom: { secretKeyRef: { name: `${name}-s`, key: "v" } } }],
  }] }) });
  const waiting = await podWhere(h, name, (p) => main(p)?.state?.waiting?.reason === "CreateContainerConfigError", "CreateContainerConfigError");
  expect(main(waiting)?.state?.waiting?.message).toBe(`secret "${name}-s" not found`);
  expect(phase(waiting)).toBe("Pending");
  await h.core.createNamespacedSecret({ namespace: h.ns, body: { metadata: { name: `${name}-s` }, stringData: { v: "now" } } });
  await podWhere(h, name, (p) => phase(p) === "Succeeded", "Succeeded once the secret exists");
  expect(await h.core.readNamespacedPodLog({ name, namespace: h.ns })).toBe("now\n");
});

it("gives each of two pods running at once its own view of the same mountPath", async () => {
  const barrier = hostDir();
  const names = [fresh("a"), fresh("b")];
  for (const name of names) {
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, {
      containers: [sh("main", `echo ${name} > /tmp/work/mine; echo ${name} > /tmp/own; touch /barrier/${name}; while [ ! -e /barrier/go ]; do sleep 0.02; done; ls /tmp/work; cat /tmp/own`,
        { volumeMounts: [{ name: "work", mountPath: "/tmp/work" }, { name: "barrier", mountPath: "/barrier" }] })],
      volumes: [{ name: "work", emptyDir: {} }, { name: "barrier", hostPath: { path: barrier } }],
    }) });
  }
  // Both are running (each has written its file) before either may finish.
  await waitFor("both pods at the barrier", () => names.every((n) => existsSync(join(barrier, n))));
  writeFileSync(join(barrier, "go"), "");
  for (const name of names) {
    await podWhere(h, name, (p) => phase(p) === "Succeeded", `${name} Succeeded`);
    expect(await h.core.readNamespacedPodLog({ name, namespace: h.ns })).toBe(`mine\n${name}\n`);
  }
});

describe("confinement: what a pod's scripts can do to the host", () => {
  const probe = fresh("ephemera-probe");
  const onHost = [`/etc/${probe}`, `/usr/${probe}`, `/tmp/${probe}`];
  afterAll(() => { for (const f of onHost) rmSync(f, { recursive: true, force: true }); });

  it("runs a container as nobody, the host read-only, /tmp its own; the refused writes are in its log", async () => {
    const name = fresh("confined");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [sh("main", [
      "echo uid=$(id -u)",
      `touch /etc/${probe} 2>&1 || echo etc-refused`,
      `mkdir /usr/${probe} 2>&1 || echo usr-refused`,
      `echo mine > /tmp/${probe} && cat /tmp/${probe}`,
    ].join("; "))] }) });
    await podWhere(h, name, (p) => phase(p) === "Succeeded", "Succeeded");
    const log = await h.core.readNamespacedPodLog({ name, namespace: h.ns });
    expect(log).toMatch(/^uid=65534\n/);
    expect(log).toMatch(/Read-only file system\netc-refused\n/);
    expect(log).toMatch(/Read-only file system\nusr-refused\n/);
    expect(log).toMatch(/\nmine\n$/);
    expect(onHost.filter((f) => existsSync(f))).toEqual([]);
  });

  it("honours a non-zero runAsUser and runAsGroup", async () => {
    const name = fresh("as");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, {
      securityContext: { runAsGroup: 4321 },
      containers: [sh("main", "echo $(id -u):$(id -g)", { securityContext: { runAsUser: 1234 } })],
    }) });
    await podWhere(h, name, (p) => phase(p) === "Succeeded", "Succeeded");
    expect(await h.core.readNamespacedPodLog({ name, namespace: h.ns })).toBe("1234:4321\n");
  });

  it("ends a container whose command is not found StartError, exit code 128, naming the command", async () => {
    const name = fresh("nocmd");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [{ name: "main", image: "x", command: ["no-such-command-here"] }] }) });
    const failed = await podWhere(h, name, (p) => phase(p) === "Failed", "Failed");
    expect(main(failed)?.state?.terminated).toMatchObject({ exitCode: 128, reason: "StartError" });
    expect(main(failed)?.state?.terminated?.message).toMatch(/^failed to start the container: exec "no-such-command-here": \w/);
  });

  it.each([
    ["runAsUser 0", { runAsUser: 0 }, "securityContext.runAsUser 0 (root) is refused"],
    ["privileged", { privileged: true }, "securityContext.privileged is refused"],
  ])("refuses %s: the container waits with CreateContainerConfigError and never runs", async (_, securityContext, message) => {
    const out = hostDir();
    const name = fresh("root");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [sh("main", "touch /out/ran",
      { securityContext, volumeMounts: [{ name: "out", mountPath: "/out" }] })], volumes: [{ name: "out", hostPath: { path: out } }] }) });
    const waiting = await podWhere(h, name, (p) => main(p)?.state?.waiting?.reason === "CreateContainerConfigError", "CreateContainerConfigError");
    expect(main(waiting)?.state?.waiting?.message).toContain(message);
    expect(main(waiting)?.state?.waiting?.message).toContain("EPHEMERA_KUBE_SIM_ALLOW_ROOT");
    expect(phase(waiting)).toBe("Pending");
    expect(existsSync(join(out, "ran"))).toBe(false);
  });
});

it("fails a pod past its activeDeadlineSeconds", async () => {
  const name = fresh("deadline");
  await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { activeDeadlineSeconds: 1, containers: [sh("main", "sleep 60")] }) });
  const failed = await podWhere(h, name, (p) => phase(p) === "Failed", "Failed");
  expect(failed.status).toMatchObject({ reason: "DeadlineExceeded", message: "Pod was active on the node longer than the specified deadline" });
  await podWhere(h, name, (p) => main(p)?.state?.terminated?.exitCode === 137, "main killed");
});

it("deletes gracefully: TERM to the container, KILL after the grace period, then the object goes", async () => {
  const out = hostDir();
  const name = fresh("del");
  await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [sh("main",
    "trap 'echo TERM > /out/signal' TERM; echo $$$$ > /out/pid; while true; do sleep 0.05; done",
    { volumeMounts: [{ name: "out", mountPath: "/out" }], ...marked(name) })], volumes: [{ name: "out", hostPath: { path: out } }] }) });
  await waitFor("the pid", () => existsSync(join(out, "pid")) && readFileSync(join(out, "pid"), "utf8").trim());
  const pids = pidsMarked(name);
  expect(pids.length).toBeGreaterThan(0);
  const events: string[] = [];
  const list = await h.core.listNamespacedPod({ namespace: h.ns });
  const req = await new Watch(h.kc).watch(`/api/v1/namespaces/${h.ns}/pods`, { resourceVersion: list.metadata!.resourceVersion!, fieldSelector: `metadata.name=${name}` },
    (type: string, p: V1Pod) => events.push(`${type}${p.metadata?.deletionTimestamp ? " deleting" : ""}`), () => undefined);
  try {
    const started = Date.now();
    const answer = await h.core.deleteNamespacedPod({ name, namespace: h.ns, gracePeriodSeconds: 1 });
    expect(answer.metadata?.deletionGracePeriodSeconds).toBe(1);
    await waitFor("DELETED", () => events.includes("DELETED deleting"));
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(readFileSync(join(out, "signal"), "utf8")).toBe("TERM\n");
    expect(events[0]).toBe("MODIFIED deleting");
    expect(events[events.length - 1]).toBe("DELETED deleting");
    expect(pids.some(alive)).toBe(false);
  } finally { req.abort(); }
});

describe("failures asked for by annotation", () => {
  it("OOMKilled: main is killed with exit code 137", async () => {
    const name = fresh("oom");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [sh("main", "sleep 30")] }, { "sim.ephemera.dev/fail": "OOMKilled" }) });
    const p = await podWhere(h, name, (x) => phase(x) === "Failed", "Failed");
    expect(main(p)?.state?.terminated).toMatchObject({ exitCode: 137, reason: "OOMKilled" });
  });

  it("ImagePullBackOff: the container never starts and the pod stays Pending", async () => {
    const name = fresh("pull");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [sh("main", "echo never")] }, { "sim.ephemera.dev/fail": "ImagePullBackOff" }) });
    await podWhere(h, name, (x) => main(x)?.state?.waiting?.reason === "ErrImagePull", "ErrImagePull");
    const p = await podWhere(h, name, (x) => main(x)?.state?.waiting?.reason === "ImagePullBackOff", "ImagePullBackOff");
    expect(main(p)?.state?.waiting?.message).toBe('Back-off pulling image "busybox"');
    expect(phase(p)).toBe("Pending");
    expect(main(p)?.started).toBe(false);
  });

  it("Evicted: the pod fails with the eviction's reason and message", async () => {
    const name = fresh("evict");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [sh("main", "sleep 30")] }, { "sim.ephemera.dev/fail": "Evicted", "sim.ephemera.dev/fail-after-ms": "100" }) });
    const p = await podWhere(h, name, (x) => phase(x) === "Failed", "Failed");
    expect(p.status).toMatchObject({ reason: "Evicted", message: "The node was low on resource: memory. " });
  });

  it("NodeLost: the pod's phase becomes Unknown and the kubelet stops reporting it", async () => {
    const out = hostDir();
    const name = fresh("lost");
    await h.core.createNamespacedPod({ namespace: h.ns, body: pod(name, { containers: [sh("main", "echo $$$$ > /out/pid; sleep 30", { volumeMounts: [{ name: "out", mountPath: "/out" }], ...marked(name) })],
      volumes: [{ name: "out", hostPath: { path: out } }] }, { "sim.ephemera.dev/fail": "NodeLost", "sim.ephemera.dev/fail-after-ms": "3000" }) });
    // Its host pids while it runs (it has its own pid namespace); the node is lost seconds later.
    await waitFor("the pid", () => existsSync(join(out, "pid")));
    const pids = pidsMarked(name);
    expect(pids.length).toBeGreaterThan(0);
    const p = await podWhere(h, name, (x) => phase(x) === "Unknown", "Unknown");
    expect(p.status?.reason).toBe("NodeLost");
    await waitFor("the container killed", () => !pids.some(alive));
    // Still reported as running: nothing updates it any more.
    expect((await h.core.readNamespacedPod({ name, namespace: h.ns })).metadata?.resourceVersion).toBe(p.metadata?.resourceVersion);
    expect(main(p)?.state?.running).toBeDefined();
  });
});

it("leaves no process behind when it stops", async () => {
  const out = hostDir();
  const marker = fresh("stop");
  const own = await startKubeSim({ listen: "127.0.0.1:0", kubeconfigPath: join(out, "kubeconfig"), runtime: "process" });
  const res = await fetch(`${own.url}/api/v1/namespaces/default/pods`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(pod("p", {
    containers: [sh("main", "sleep 300 & echo $$! > /out/child; echo $$$$ > /out/pid; wait", { volumeMounts: [{ name: "out", mountPath: "/out" }], ...marked(marker) })],
    volumes: [{ name: "out", hostPath: { path: out } }],
  })) });
  expect(res.status).toBe(201);
  await waitFor("both pids", () => existsSync(join(out, "pid")) && existsSync(join(out, "child")) && readFileSync(join(out, "child"), "utf8").trim());
  // The shell and its background sleep, by their host pids (the container has its own pid namespace).
  const pids = pidsMarked(marker);
  expect(pids.length).toBeGreaterThanOrEqual(2);
  expect(pids.every(alive)).toBe(true);
  await own.stop();
  await waitFor("no process left", () => !pids.some(alive));
  expect(existsSync(own.dataDir)).toBe(false);
});
