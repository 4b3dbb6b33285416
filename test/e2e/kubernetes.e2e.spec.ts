// The end-to-end scenarios with the Kubernetes driver: every step a runner pod on the
// simulated cluster (kube-sim, its kubelet running the containers as local processes),
// created, followed and deleted by the runner; kubectl sees what a user would.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { waitFor } from "@ephemera/kit";
import { kubectl, startSim, type Sim } from "../support/kube.js";
import { startTestStack, type TestStack } from "../support/stack.js";
import { endToEndScenarios } from "./scenarios.js";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe("ephemera end to end (Kubernetes driver, simulated cluster)", () => {
  let sim: Sim;
  let stack: TestStack;
  beforeAll(async () => {
    sim = await startSim();
    stack = await startTestStack("e2e-kube", { EPHEMERA_RUNNER_DRIVER: "kubernetes", KUBECONFIG: sim.kubeconfig, EPHEMERA_KUBE_NAMESPACE: "default" });
  }, 90_000);
  afterAll(async () => {
    await stack?.stop();
    await sim?.stop();
  });

  endToEndScenarios(() => stack);

  const ok = async (args: string[]) => {
    const r = await stack.eph(args);
    if (r.code !== 0) throw new Error(`eph ${args.join(" ")} exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    return r;
  };
  const ourPods = async (namespace: string) => (JSON.parse((await kubectl(sim, ["get", "pods", "-n", namespace, "-o", "json"])).stdout) as Json)["items"]
    .filter((p: Json) => p["metadata"].labels?.["ephemera.dev/prefix"] === stack.prefix) as Json[];

  const ourSecrets = async (namespace: string) => (JSON.parse((await kubectl(sim, ["get", "secrets", "-n", namespace, "-o", "json"])).stdout) as Json)["items"]
    .filter((p: Json) => p["metadata"].labels?.["ephemera.dev/prefix"] === stack.prefix).map((p: Json) => p["metadata"].name) as string[];

  it("shows a running step's pod to kubectl with ephemera-init, main and ephemera-sidecar, hardened, its token in a Secret mounted in the agents only; leaves no pod nor Secret once the sandbox is ready", async () => {
    // A barrier the step waits at (outside /tmp: each container has its own /tmp), so the pod is seen running.
    const gate = join("/var/tmp", `${stack.prefix}-gate`);
    mkdirSync(gate, { recursive: true });
    try {
      await ok(["plugin", "apply", "-f", stack.file("held.yaml", `
name: held
spec:
  runner: {image: "debian:bookworm-slim", namespace: team-a}
  create:
  - name: wait
    script: |
      #!/bin/sh
      echo "waiting at the gate"
      while [ ! -e ${gate}/open ]; do sleep 0.05; done
      echo "through"
`)]);
      await kubectl(sim, ["apply", "-f", "-"], { stdin: "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n" });
      const applying = stack.eph(["sandbox", "apply", "-f", stack.file("sb-held.yaml", "name: held-sb\nspec:\n  cluster: local\n  resources:\n  - {name: res, plugin: held}\n")]);
      const pod = await waitFor(async () => {
        const running = (await ourPods("team-a")).find((p) => p["status"]?.containerStatuses?.some((c: Json) => c.name === "main" && c.state?.running));
        return running ?? false;
      }, { timeoutMs: 30_000, intervalMs: 200, what: "the step's pod running in team-a" });
      expect(pod["spec"].initContainers.map((c: Json) => c.name)).toEqual(["ephemera-init"]);
      expect(pod["spec"].containers.map((c: Json) => [c.name, c.image])).toEqual([
        ["main", "debian:bookworm-slim"], ["ephemera-sidecar", expect.stringMatching(/^ephemera\/agent:/)],
      ]);
      expect(pod["spec"].restartPolicy).toBe("Never");
      expect(pod["metadata"].labels).toMatchObject({ "ephemera.dev/sandbox": "held-sb", "ephemera.dev/resource": "res", "ephemera.dev/step": "wait", "ephemera.dev/phase": "create", "ephemera.dev/attempt": "1" });
      // The token is in no container's environment: the agents read it from the Secret named after the pod.
      const podName = pod["metadata"].name as string;
      const all = [...pod["spec"].initContainers, ...pod["spec"].containers] as Json[];
      for (const c of all) expect((c["env"] ?? []).map((e: Json) => e["name"])).not.toContain("EPHEMERA_TOKEN");
      const agents = all.filter((c) => c["name"] !== "main");
      for (const c of agents) {
        expect(c["env"]).toContainEqual({ name: "EPHEMERA_TOKEN_FILE", value: "/var/run/secrets/ephemera.dev/token" });
        expect(c["securityContext"]).toMatchObject({ runAsNonRoot: true, runAsUser: 10001, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } });
        expect(c["resources"]).toEqual({ requests: { cpu: "50m", memory: "64Mi" }, limits: { cpu: "500m", memory: "256Mi" } });
      }
      expect(JSON.stringify(pod["spec"].containers[0])).not.toContain("ephemera-token");
      expect(pod["spec"].containers[0].securityContext).toEqual({ allowPrivilegeEscalation: false });
      expect(pod["spec"].containers[0].resources).toEqual({ requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "1", memory: "1Gi" } });
      expect(pod["spec"].securityContext).toMatchObject({ seccompProfile: { type: "RuntimeDefault" } });
      expect(pod["spec"].automountServiceAccountToken).toBe(false);
      expect(pod["spec"].volumes).toContainEqual(expect.objectContaining({ name: "ephemera-token", secret: expect.objectContaining({ secretName: podName }) }));
      const secret = JSON.parse((await kubectl(sim, ["get", "secret", "-n", "team-a", podName, "-o", "json"])).stdout) as Json;
      expect(secret["metadata"].labels).toMatchObject({ "ephemera.dev/prefix": stack.prefix, "ephemera.dev/step": "wait" });
      expect(Object.keys(secret["data"])).toEqual(["token"]);

      // kubectl follows main's log as the step writes it.
      const described = await kubectl(sim, ["describe", "pod", "-n", "team-a", pod["metadata"].name]);
      expect(described.stdout).toContain("ephemera-sidecar");
      const logs = await kubectl(sim, ["logs", "-n", "team-a", pod["metadata"].name, "-c", "main"]);
      expect(logs.stdout).toContain("waiting at the gate");

      writeFileSync(join(gate, "open"), "");
      expect((await applying).code).toBe(0);
      // The pod goes once the result is recorded, which need not be before the sandbox is ready.
      await waitFor(async () => (await ourPods("team-a")).length === 0, { timeoutMs: 15_000, what: "no pod left in team-a" });
      // The agents used the token from the file (the script came through init, the step succeeded); its Secret is gone.
      expect(await ourSecrets("team-a")).toEqual([]);
      const log = await ok(["logs", "--sandbox", "held-sb", "--resource", "res", "--step", "wait"]);
      expect(log.stdout).toContain("waiting at the gate\nthrough");
      await ok(["sandbox", "delete", "held-sb"]);
    } finally {
      rmSync(gate, { recursive: true, force: true });
    }
  });

  it("passes an overlay's env var, and a secret it references, to the step", async () => {
    await kubectl(sim, ["apply", "-f", "-"], {
      stdin: "apiVersion: v1\nkind: Secret\nmetadata: {name: db-credentials, namespace: default}\nstringData: {password: s3cr3t-from-secret}\n",
    });
    await ok(["plugin", "apply", "-f", stack.file("overlay.yaml", `
name: overlay
spec:
  runner:
    image: debian:bookworm-slim
    podTemplateOverlay: |
      metadata:
        annotations: {team: databases}
      spec:
        containers:
        - name: main
          env:
          - {name: PGHOST, value: db.internal}
          - name: PGPASSWORD
            valueFrom: {secretKeyRef: {name: db-credentials, key: password}}
  create:
  - name: show
    outputs: [{name: seen, valueFromPath: /tmp/seen}]
    script: |
      #!/bin/sh
      printf '%s/%s/%s' "$PGHOST" "$PGPASSWORD" "$SIGNADOT_SANDBOX_NAME" > /tmp/seen
`)]);
    await ok(["sandbox", "apply", "-f", stack.file("sb-overlay.yaml", "name: overlay-sb\nspec:\n  cluster: local\n  resources:\n  - {name: res, plugin: overlay}\n")]);
    const view = JSON.parse((await ok(["sandbox", "get", "overlay-sb", "--show-outputs", "-o", "json"])).stdout) as Json;
    expect(view["resources"][0].outputs["show.seen"].value).toBe("db.internal/s3cr3t-from-secret/overlay-sb");
    await ok(["sandbox", "delete", "overlay-sb"]);
  });

  it("runs main as the user its overlay names, which reads the inputs the agent (another user) wrote", async () => {
    await ok(["plugin", "apply", "-f", stack.file("other-user.yaml", `
name: other-user
spec:
  runner:
    image: debian:bookworm-slim
    podTemplateOverlay: |
      spec:
        containers:
        - name: main
          securityContext: {runAsNonRoot: true, runAsUser: 2000, runAsGroup: 2000}
  create:
  - name: show
    inputs:
    - {name: secret, valueFromSandbox: true, as: {env: SECRET, path: /work/in/secret}}
    outputs: [{name: seen, valueFromPath: /tmp/seen}]
    script: |
      #!/bin/sh
      set -e
      printf '%s/%s/%s' "$(id -u)" "$SECRET" "$(cat /work/in/secret)" > /tmp/seen
`)]);
    await ok(["sandbox", "apply", "-f", stack.file("sb-other-user.yaml",
      "name: other-user-sb\nspec:\n  cluster: local\n  resources:\n  - {name: res, plugin: other-user, params: {secret: s3cret}}\n")]);
    const view = JSON.parse((await ok(["sandbox", "get", "other-user-sb", "--show-outputs", "-o", "json"])).stdout) as Json;
    expect(view["resources"][0].outputs["show.seen"].value).toBe("2000/s3cret/s3cret");
    await ok(["sandbox", "delete", "other-user-sb"]);
  });

  it("creates and deletes one pod and its token Secret per step: four API writes a step, and no polling", async () => {
    const before = await sim.stats();
    await ok(["plugin", "apply", "-f", stack.file("three.yaml", `
name: three
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - {name: one, script: "#!/bin/sh\\necho one"}
  - {name: two, script: "#!/bin/sh\\necho two"}
  - {name: three, script: "#!/bin/sh\\necho three"}
`)]);
    await ok(["sandbox", "apply", "-f", stack.file("sb-three.yaml", "name: three-sb\nspec:\n  cluster: local\n  resources:\n  - {name: res, plugin: three}\n")]);
    // Asked of the simulator's control endpoint, which counts no call (kubectl's own list would count).
    let after = before;
    const delta = (k: string) => (after.calls[k] ?? 0) - (before.calls[k] ?? 0);
    await waitFor(async () => {
      after = await sim.stats();
      return delta("delete pods") >= 3;
    }, { timeoutMs: 10_000, what: "the three pods to be deleted" });
    expect(delta("create pods")).toBe(3);
    expect(delta("delete pods")).toBe(3);
    expect(delta("create secrets")).toBe(3);
    expect(delta("delete secrets")).toBe(3);
    expect(delta("get pods")).toBe(0); // followed through the watch, never polled
    expect(delta("list pods")).toBe(0);
    await ok(["sandbox", "delete", "three-sb"]);
  });
});
