// Every way a runner pod can end, named (the simulated cluster's failure injection, set
// through the plugin's podTemplateOverlay), and a runner killed with SIGKILL mid-step that
// follows its pod again instead of running the step twice.
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { waitFor } from "@ephemera/kit";
import { ephOk } from "../support/eph.js";
import { kubectl, startSim, type Sim } from "../support/kube.js";
import { startOwnStack, type OwnStack } from "../support/own-stack.js";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const GRACE_MS = 1000;

const plugin = (name: string, overlay: string, script = "#!/bin/sh\necho started\nsleep 30\n", extra = "") => `
name: ${name}
spec:
  runner:
    image: debian:bookworm-slim
    podTemplateOverlay: |
${overlay.split("\n").map((l) => `      ${l}`).join("\n")}
  create:
  - name: step
${extra}    script: |
${script.split("\n").map((l) => `      ${l}`).join("\n")}
`;
const fault = (kind: string, container = "main") =>
  `metadata:\n  annotations:\n    sim.ephemera.dev/fail: ${kind}\n    sim.ephemera.dev/fail-container: ${container}`;

describe("runner pod outcomes and re-attachment (Kubernetes driver, simulated cluster)", () => {
  let sim: Sim;
  let stack: OwnStack;
  beforeAll(async () => {
    // The gates are host files shared with the test, written by steps running as nobody: the
    // host stays writable to pods here (kubelet.int.spec.ts proves the read-only host).
    sim = await startSim({ EPHEMERA_STEP_HOST_READONLY: "false" });
    stack = await startOwnStack("kube-outcomes", {
      env: {
        EPHEMERA_RUNNER_DRIVER: "kubernetes", KUBECONFIG: sim.kubeconfig, EPHEMERA_KUBE_NAMESPACE: "default",
        EPHEMERA_KUBE_IMAGE_PULL_GRACE_MS: String(GRACE_MS), EPHEMERA_KUBE_NODE_LOST_GRACE_MS: String(GRACE_MS),
      },
    });
    chmodSync(stack.scratch, 0o711);
  }, 90_000);
  afterAll(async () => {
    await stack?.stop();
    await sim?.stop();
  });

  const gateDir = (name: string) => {
    const dir = join(stack.scratch, name);
    mkdirSync(dir);
    chmodSync(dir, 0o777);
    return dir;
  };
  const file = (name: string, text: string) => {
    const p = join(stack.scratch, name);
    writeFileSync(p, text);
    return p;
  };
  const sandbox = (name: string, pluginName: string) => file(`${name}.yaml`, `name: ${name}\nspec:\n  cluster: local\n  resources:\n  - {name: res, plugin: ${pluginName}}\n`);
  const view = async (name: string) => JSON.parse((await ephOk(stack.eph, ["sandbox", "get", name, "-o", "json"])).stdout) as Json;
  /** The failures recorded for the sandbox's step runs, in order. */
  const failures = async (name: string) => {
    const feed = (await ephOk(stack.eph, ["events", "--sandbox", name, "-o", "json"])).stdout.trim().split("\n").map((l) => JSON.parse(l) as Json);
    return feed.filter((e) => e["type"] === "ephemera.steprun.failed.v1").map((e) => e["data"].failure as Json);
  };
  const ourPods = async () => (JSON.parse((await kubectl(sim, ["get", "pods", "-A", "-o", "json"])).stdout) as Json)["items"]
    .filter((p: Json) => p["metadata"].labels?.["ephemera.dev/prefix"] === stack.prefix) as Json[];
  /** The runs' token Secrets of a sandbox: each goes once its pod has ended, whatever the outcome. */
  const tokenSecrets = async (sandbox: string) => (JSON.parse((await kubectl(sim, ["get", "secrets", "-A", "-o", "json"])).stdout) as Json)["items"]
    .filter((s: Json) => s["metadata"].labels?.["ephemera.dev/prefix"] === stack.prefix && s["metadata"].labels?.["ephemera.dev/sandbox"] === sandbox)
    .map((s: Json) => s["metadata"].name) as string[];

  const cases: Array<{ reason: string; id?: string; overlay: string; script?: string; extra?: string; infra: boolean; message: RegExp }> = [
    { reason: "OOMKilled", overlay: fault("OOMKilled"), infra: false, message: /main was killed for using too much memory/ },
    { reason: "ImagePullFailed", overlay: fault("ImagePullBackOff"), infra: false, message: /main: (ErrImagePull|ImagePullBackOff)/ },
    { reason: "Evicted", overlay: fault("Evicted"), infra: true, message: /low on resource/ },
    { reason: "NodeLost", overlay: fault("NodeLost"), infra: true, message: /stopped reporting/ },
    {
      reason: "ConfigError", infra: false, message: /secret "no-such-secret" not found/,
      overlay: "spec:\n  containers:\n  - name: main\n    env:\n    - name: X\n      valueFrom: {secretKeyRef: {name: no-such-secret, key: k}}",
    },
    { reason: "DeadlineExceeded", overlay: "", extra: "    timeout: 2s\n", infra: false, message: /timeout|deadline/i },
    // The API server refuses the pod itself (422): not tried again, the refusal named.
    {
      reason: "ConfigError", id: "refused-label", infra: false, overlay: "metadata:\n  labels:\n    tier: not valid!",
      message: /^the cluster refused the runner pod: 422: Pod "[^"]+" is invalid: metadata\.labels: Invalid value: "not valid!": a valid label must be/,
    },
  ];

  const titled = cases.map((c) => ({ ...c, title: c.id ? `${c.reason} (${c.id})` : c.reason }));
  it.each(titled)("names a pod that ends $title, within 30 s, and deletes the pod", async (c) => {
    const name = `out-${(c.id ?? c.reason).toLowerCase()}`;
    await ephOk(stack.eph, ["plugin", "apply", "-f", file(`${name}-plugin.yaml`, plugin(name, c.overlay, c.script, c.extra))]);
    const started = Date.now();
    const applied = await stack.eph(["sandbox", "apply", "-f", sandbox(name, name)], { timeoutMs: 90_000 });
    expect(applied.code).toBe(1);
    const recorded = await failures(name);
    // An infrastructure failure is run again as a new attempt (three more), a plugin's failure is not.
    expect(recorded.map((f) => f["reason"])).toEqual(c.infra ? [c.reason, c.reason, c.reason, c.reason] : [c.reason]);
    expect(recorded[0]!["message"]).toMatch(c.message);
    if (!c.infra) expect(Date.now() - started).toBeLessThan(30_000);
    const v = await view(name);
    expect(v["resources"][0].failure.reason).toBe(c.reason);
    await waitFor(async () => (await ourPods()).every((p) => p["metadata"].labels["ephemera.dev/sandbox"] !== name), { timeoutMs: 15_000, what: `the pods of ${name} to be deleted` });
    expect(await tokenSecrets(name)).toEqual([]);
    await ephOk(stack.eph, ["sandbox", "delete", name]);
  }, 120_000);

  it("names a pod someone else deleted PodDeleted, and runs the step again as a new attempt", async () => {
    const gate = gateDir("gate-deleted");
    await ephOk(stack.eph, ["plugin", "apply", "-f", file("deleted-plugin.yaml", plugin("deleted", "", `#!/bin/sh\necho "attempt $EPHEMERA_RUN_ID"\nwhile [ ! -e ${gate}/open ]; do sleep 0.05; done\n`))]);
    const applying = stack.eph(["sandbox", "apply", "-f", sandbox("deleted", "deleted")], { timeoutMs: 90_000 });
    const first = await waitFor(async () => (await ourPods()).find((p) => p["metadata"].labels["ephemera.dev/sandbox"] === "deleted" && p["status"]?.phase === "Running") ?? false,
      { timeoutMs: 30_000, intervalMs: 200, what: "the first attempt's pod running" });
    expect(first["metadata"].labels["ephemera.dev/attempt"]).toBe("1");
    await kubectl(sim, ["delete", "pod", "-n", "default", first["metadata"].name, "--wait=false"]);
    await waitFor(async () => (await ourPods()).some((p) => p["metadata"].labels["ephemera.dev/sandbox"] === "deleted" && p["metadata"].labels["ephemera.dev/attempt"] === "2"),
      { timeoutMs: 30_000, intervalMs: 200, what: "a second attempt's pod" });
    writeFileSync(join(gate, "open"), "");
    expect((await applying).code).toBe(0);
    expect((await failures("deleted")).map((f) => f["reason"])).toEqual(["PodDeleted"]);
    await waitFor(async () => (await tokenSecrets("deleted")).length === 0, { timeoutMs: 15_000, what: "no token Secret of either attempt" });
    await ephOk(stack.eph, ["sandbox", "delete", "deleted"]);
  }, 120_000);

  it("deletes the running pod of a sandbox deleted mid-step, and the step ends Cancelled", async () => {
    await ephOk(stack.eph, ["plugin", "apply", "-f", file("cancelled-plugin.yaml", plugin("cancelled", "", "#!/bin/sh\necho started\nsleep 300\n"))]);
    const applying = stack.eph(["sandbox", "apply", "-f", sandbox("cancelled", "cancelled")], { timeoutMs: 90_000 });
    const running = await waitFor(async () => (await ourPods()).find((p) => p["metadata"].labels["ephemera.dev/sandbox"] === "cancelled" && p["status"]?.phase === "Running") ?? false,
      { timeoutMs: 30_000, intervalMs: 200, what: "the step's pod running" });
    await ephOk(stack.eph, ["sandbox", "delete", "cancelled"], { timeoutMs: 60_000 });
    expect((await applying).code).toBe(1);
    expect(await kubectl(sim, ["get", "pod", "-n", "default", running["metadata"].name], { allowFail: true })).toMatchObject({ code: 1, stderr: expect.stringContaining("NotFound") });
    expect((await failures("cancelled")).map((f) => f["reason"])).toEqual(["Cancelled"]);
    expect(await tokenSecrets("cancelled")).toEqual([]);
  }, 120_000);

  it("rides out refused API calls: creates and deletes answered 429 and 500 are tried again, and the step runs in one pod", async () => {
    await ephOk(stack.eph, ["plugin", "apply", "-f", file("refused-plugin.yaml", plugin("refused", "", "#!/bin/sh\necho fine\n"))]);
    const gone = (name: string) => waitFor(async () => (await ourPods()).every((p) => p["metadata"].labels["ephemera.dev/sandbox"] !== name),
      { timeoutMs: 15_000, what: `the pod of ${name} to be deleted` });
    const delta = (a: { calls: Record<string, number> }, b: { calls: Record<string, number> }, k: string) => (b.calls[k] ?? 0) - (a.calls[k] ?? 0);
    // Creates refused four times.
    let before = await sim.stats();
    await sim.faults({ apiErrors: { next: 4, codes: [429, 500], verbs: ["create"], resources: ["pods"] } });
    try {
      await ephOk(stack.eph, ["sandbox", "apply", "-f", sandbox("refused", "refused")], { timeoutMs: 60_000 });
      await gone("refused");
    } finally {
      await sim.faults(null);
    }
    let after = await sim.stats();
    expect(after.containersStarted - before.containersStarted).toBe(3); // one pod: init, main, sidecar
    expect(delta(before, after, "create pods")).toBe(5);
    expect(delta(before, after, "delete pods")).toBe(1);
    // Deletes refused twice.
    before = after;
    await sim.faults({ apiErrors: { next: 2, codes: [500, 429], verbs: ["delete"], resources: ["pods"] } });
    try {
      await ephOk(stack.eph, ["sandbox", "apply", "-f", sandbox("refused-delete", "refused")], { timeoutMs: 60_000 });
      await gone("refused-delete");
    } finally {
      await sim.faults(null);
    }
    after = await sim.stats();
    expect(delta(before, after, "create pods")).toBe(1);
    expect(delta(before, after, "delete pods")).toBe(3);
    expect([...await failures("refused"), ...await failures("refused-delete")]).toEqual([]);
    await ephOk(stack.eph, ["sandbox", "delete", "refused"]);
    await ephOk(stack.eph, ["sandbox", "delete", "refused-delete"]);
  }, 120_000);

  it("rides out its watch being cut and its resourceVersion compacted away: it watches again, lists again on 410, and the steps run", async () => {
    await ephOk(stack.eph, ["plugin", "apply", "-f", file("cut-plugin.yaml", plugin("cut", "", "#!/bin/sh\necho fine\n"))]);
    // A change the runner's watch does not see moves the cluster past the last version it saw; the compaction then forgets it.
    await kubectl(sim, ["apply", "-f", "-"], { stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: moved-on, namespace: default}\ndata: {a: b}\n" });
    const before = await sim.stats();
    expect(await sim.compactAndDropWatches()).toBeGreaterThanOrEqual(1); // the runner's watch of "default"
    await ephOk(stack.eph, ["sandbox", "apply", "-f", sandbox("cut", "cut")], { timeoutMs: 60_000 });
    const after = await sim.stats();
    expect((after.calls["watch pods"] ?? 0) - (before.calls["watch pods"] ?? 0)).toBeGreaterThanOrEqual(2); // from the old version (410), then the new
    expect((after.calls["list pods"] ?? 0) - (before.calls["list pods"] ?? 0)).toBeGreaterThanOrEqual(1);
    expect(stack.services.log("runner").lines().map((l) => l.line).join("\n")).toContain("the watch of runner pods failed; starting it again");
    expect(await failures("cut")).toEqual([]);
    await ephOk(stack.eph, ["sandbox", "delete", "cut"]);
  }, 120_000);

  it("a runner killed with SIGKILL mid-step follows its pod again when restarted: the step runs once, in one pod", async () => {
    const gate = gateDir("gate-reattach");
    const ran = join(gate, "ran");
    // Made here (the wait below opens it too), writable by the step's user.
    writeFileSync(ran, "");
    chmodSync(ran, 0o666);
    await ephOk(stack.eph, ["plugin", "apply", "-f", file("reattach-plugin.yaml", plugin("reattach", "", [
      "#!/bin/sh", `echo "$EPHEMERA_RUN_ID" >> ${ran}`, "echo before the restart", `while [ ! -e ${gate}/open ]; do sleep 0.05; done`, "printf done > /tmp/out", "",
    ].join("\n"), "    outputs: [{name: out, valueFromPath: /tmp/out}]\n"))]);
    const before = await sim.stats();
    const applying = stack.eph(["sandbox", "apply", "-f", sandbox("reattach", "reattach")], { timeoutMs: 120_000 });
    await waitFor(() => readFileSync(ran, { encoding: "utf8", flag: "a+" }).length > 0, { timeoutMs: 30_000, what: "the step to start" });
    // The first runner has stored the start of the log: the second must not store it again.
    await waitFor(async () => (await stack.eph(["logs", "--sandbox", "reattach", "--resource", "res", "--step", "step"])).stdout.includes("before the restart"),
      { timeoutMs: 15_000, intervalMs: 200, what: "the first line in the stored log" });
    await stack.services.kill("runner");
    await stack.services.start("runner");
    // The dispatch comes back to the new runner after the work queue's ack wait (30 s); the
    // step is still running then, held at the gate, and the new runner follows its pod.
    await waitFor(() => stack.services.log("runner").lines().some((l) => l.line.includes("following the run's existing pod")),
      { timeoutMs: 60_000, intervalMs: 200, what: "the new runner to follow the pod" });
    writeFileSync(join(gate, "open"), "");
    const applied = await applying;
    expect(applied.code).toBe(0);
    expect(readFileSync(ran, "utf8").trim().split("\n")).toEqual([expect.stringMatching(/\.res\.create\.step\.1$/)]);
    const after = await sim.stats();
    expect((after.calls["create pods"] ?? 0) - (before.calls["create pods"] ?? 0)).toBe(1);
    expect(await failures("reattach")).toEqual([]);
    const shown = JSON.parse((await ephOk(stack.eph, ["sandbox", "get", "reattach", "--show-outputs", "-o", "json"])).stdout) as Json;
    expect(shown["resources"][0].outputs["step.out"].value).toBe("done");
    // The log once, though two runners streamed it.
    const log = await ephOk(stack.eph, ["logs", "--sandbox", "reattach", "--resource", "res", "--step", "step"]);
    expect(log.stdout.match(/before the restart/g)).toHaveLength(1);
    await waitFor(async () => (await ourPods()).every((p) => p["metadata"].labels["ephemera.dev/sandbox"] !== "reattach"), { timeoutMs: 15_000, what: "the pod to be deleted" });
    expect(await tokenSecrets("reattach")).toEqual([]);
    await ephOk(stack.eph, ["sandbox", "delete", "reattach"]);
    rmSync(gate, { recursive: true, force: true });
  }, 150_000);

  it("a step whose script ended within its timeout succeeds, though storing its outputs (the IO context away) ran past it", async () => {
    const gate = gateDir("gate-store");
    const started = join(gate, "started");
    await ephOk(stack.eph, ["plugin", "apply", "-f", file("store-plugin.yaml", plugin("store", "", [
      "#!/bin/sh", `touch ${started}`, `while [ ! -e ${gate}/open ]; do sleep 0.05; done`, "printf done > /tmp/out", "",
    ].join("\n"), "    timeout: 3s\n    outputs: [{name: out, valueFromPath: /tmp/out}]\n"))]);
    const before = await sim.stats();
    const applying = stack.eph(["sandbox", "apply", "-f", sandbox("store", "store")], { timeoutMs: 120_000 });
    await waitFor(() => existsSync(started), { timeoutMs: 30_000, what: "the step to start" });
    const startedAt = statSync(started).mtimeMs;
    // The pod's sidecar cannot store the outputs until the IO context is back.
    await stack.services.kill("iocontext");
    writeFileSync(join(gate, "open"), "");
    const mainEnded = async () => (await ourPods()).some((p) => p["metadata"].labels["ephemera.dev/sandbox"] === "store" &&
      (p["status"]?.containerStatuses ?? []).some((c: Json) => c.name === "main" && c.state?.terminated));
    await waitFor(mainEnded, { timeoutMs: 30_000, intervalMs: 100, what: "the script's container to end" });
    // The step's timeout passes while its outputs wait to be stored (a deadline, not a guess: the time is the condition).
    await waitFor(() => Date.now() > startedAt + 4_000, { timeoutMs: 10_000, intervalMs: 100, what: "the step's 3 s timeout to pass" });
    await stack.services.start("iocontext");
    const applied = await applying;
    expect({ code: applied.code, stderr: applied.code ? applied.stderr : "" }).toEqual({ code: 0, stderr: "" });
    expect(await failures("store")).toEqual([]);
    const after = await sim.stats();
    expect((after.calls["create pods"] ?? 0) - (before.calls["create pods"] ?? 0)).toBe(1);
    const shown = JSON.parse((await ephOk(stack.eph, ["sandbox", "get", "store", "--show-outputs", "-o", "json"])).stdout) as Json;
    expect(shown["resources"][0].outputs["step.out"].value).toBe("done");
    await ephOk(stack.eph, ["sandbox", "delete", "store"]);
    rmSync(gate, { recursive: true, force: true });
  }, 150_000);

  it("a runner killed while a fork is progressing waits for it again when restarted, without writing it again", async () => {
    await kubectl(sim, ["apply", "-f", "-"], { stdin: `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "web:1"}]}
` });
    await ephOk(stack.eph, ["plugin", "apply", "-f", file("quick-plugin.yaml", plugin("quick", "", "#!/bin/sh\necho ok\n"))]);
    // The fork is held unavailable (the simulator's switch, set by the fork's own patch) until the test releases it.
    await ephOk(stack.eph, ["sandbox", "apply", "-f", file("held-fork.yaml", `name: held-fork
spec:
  cluster: local
  resources:
  - {name: res, plugin: quick}
  forks:
  - forkOf: {kind: Deployment, namespace: shop, name: web}
    customizations:
      patch: {type: merge, value: '{"metadata": {"annotations": {"sim.ephemera.dev/unavailable": "true"}}}'}
`), "--wait=false"]);
    const progressing = await waitFor(async () => {
      const v = await view("held-fork");
      return v["workloads"]?.[0]?.status === "Progressing" ? v : false;
    }, { timeoutMs: 30_000, intervalMs: 200, what: "the fork applied and progressing" });
    const fork = `web-${progressing["routingKey"]}`;
    const before = await sim.stats();
    const takingWork = () => stack.services.log("runner").lines().filter((l) => l.line.includes("runner taking work")).length;
    const incarnations = takingWork();
    await stack.services.kill("runner");
    await stack.services.start("runner");
    await waitFor(() => takingWork() > incarnations, { timeoutMs: 30_000, what: "the new runner up (its own \"runner taking work\" line)" });
    await kubectl(sim, ["annotate", "deployment", fork, "-n", "shop", "sim.ephemera.dev/unavailable=false", "--overwrite"]);
    await waitFor(async () => (await view("held-fork"))["status"].ready === true, { timeoutMs: 30_000, intervalMs: 200, what: "the sandbox ready once the fork is available" });
    // The new runner only watched: it wrote the fork neither again nor anew.
    const after = await sim.stats();
    for (const call of ["create deployments", "update deployments"]) expect((after.calls[call] ?? 0) - (before.calls[call] ?? 0)).toBe(0);
    await ephOk(stack.eph, ["sandbox", "delete", "held-fork"]);
    const left = JSON.parse((await kubectl(sim, ["get", "deployments", "-n", "shop", "-o", "json"])).stdout)["items"].map((d: Json) => d["metadata"].name);
    expect(left).toEqual(["web"]);
  }, 150_000);
});
