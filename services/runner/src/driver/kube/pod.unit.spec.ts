import * as pb from "@ephemera/proto";
import { isValidationError } from "@ephemera/kit";
import { buildPod, labelValue, podName, sharedDirs } from "./pod.js";

type Pod = {
  metadata: { name: string; namespace: string; labels: Record<string, string>; annotations?: Record<string, string> };
  spec: {
    restartPolicy: string; activeDeadlineSeconds?: number; serviceAccountName?: string;
    initContainers: Array<Record<string, unknown>>; containers: Array<Record<string, unknown> & { name: string; env?: Array<{ name: string; value?: string }> }>;
    volumes: Array<{ name: string }>;
  };
};

const dispatch = (over: Partial<pb.StepDispatch> = {}) => pb.StepDispatch.fromPartial({
  runId: "rk1.db.create.provision.2", sandbox: "feature-x", resource: "db", phase: "create", step: "provision", attempt: 2,
  timeoutMs: 90_500, runner: { image: "postgres:16", namespace: "", podTemplateOverlay: "" },
  inputPaths: ["/etc/app/cfg"], outputPaths: ["dsn"], ...over,
});
const build = (over: Partial<pb.StepDispatch> = {}) => buildPod({
  env: { SIGNADOT_SANDBOX_NAME: "feature-x" }, dispatch: dispatch(over), prefix: "p1", agentImage: "ephemera/agent:1", iocontext: "io:7401", token: "tok", defaultNamespace: "ephemera",
}) as unknown as Pod;
const container = (p: Pod, name: string) => [...p.spec.initContainers, ...p.spec.containers].find((c) => c["name"] === name)!;

describe("runner pod names and labels", () => {
  it("derives a DNS label of at most 63 characters from the run id, stable and distinct", () => {
    const long = `${"r".repeat(40)}.a-very-long-resource-name.create.a-very-long-step-name.1`;
    for (const id of ["rk1.db.create.provision.1", long, "RK.Db.create.s_1.1"]) {
      const n = podName(id);
      expect(n.length).toBeLessThanOrEqual(63);
      expect(n).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
      expect(podName(id)).toBe(n);
    }
    expect(podName(`${long}`)).not.toBe(podName(long.replace(/1$/, "2"))); // the hash tells attempts apart past the cut
  });

  it("makes label values valid", () => {
    expect(labelValue("feature/x y")).toBe("feature-x-y");
    expect(labelValue("-a-")).toBe("a");
    expect(labelValue("x".repeat(70))).toHaveLength(63);
  });
});

describe("the runner pod", () => {
  it("runs init, main and sidecar with the agent directory and a shared volume per declared directory", () => {
    const p = build();
    expect(p.metadata).toMatchObject({ name: podName("rk1.db.create.provision.2"), namespace: "ephemera" });
    expect(p.metadata.labels).toEqual({
      "ephemera.dev/prefix": "p1", "ephemera.dev/sandbox": "feature-x", "ephemera.dev/resource": "db",
      "ephemera.dev/phase": "create", "ephemera.dev/step": "provision", "ephemera.dev/attempt": "2",
    });
    expect(p.spec.restartPolicy).toBe("Never");
    expect(p.spec.activeDeadlineSeconds).toBe(91);
    expect(sharedDirs(dispatch())).toEqual(["/etc/app", "/tmp"]);
    expect(p.spec.volumes.map((v) => v.name)).toEqual(["ephemera-agent", "ephemera-path-0", "ephemera-path-1"]);
    expect(container(p, "ephemera-init")["command"]).toEqual(["node", "/agent/agent.cjs", "init"]);
    expect(container(p, "main")).toMatchObject({ image: "postgres:16", command: ["/ephemera/entrypoint"] });
    expect(container(p, "ephemera-sidecar")["command"]).toEqual(["node", "/agent/agent.cjs", "sidecar"]);
    // The agents' reports come back through the pod's status.
    for (const c of ["ephemera-init", "ephemera-sidecar"]) {
      expect(container(p, c)).toMatchObject({ terminationMessagePath: "/dev/termination-log" });
      expect(container(p, c)["env"]).toContainEqual({ name: "EPHEMERA_TERMINATION_MESSAGE_PATH", value: "/dev/termination-log" });
    }
    expect(p.metadata.annotations).toEqual({ "ephemera.dev/run-id": "rk1.db.create.provision.2" });
    for (const c of ["ephemera-init", "main", "ephemera-sidecar"]) {
      expect((container(p, c)["volumeMounts"] as Array<{ mountPath: string }>).map((m) => m.mountPath)).toEqual(["/ephemera", "/etc/app", "/tmp"]);
    }
  });

  it("gives the token to the agents only, never to main", () => {
    const p = build();
    expect((container(p, "ephemera-init")["env"] as Array<{ name: string }>).map((e) => e.name)).toContain("EPHEMERA_TOKEN");
    expect(JSON.stringify(container(p, "main"))).not.toContain("tok");
  });

  it("lets the sidecar wait for main as long as the step may run (a 1000h step outlives the agent's 6 h default)", () => {
    const timeoutMs = 1000 * 3_600_000;
    const p = build({ timeoutMs });
    expect(p.spec.activeDeadlineSeconds).toBe(3_600_000);
    const env = container(p, "ephemera-sidecar")["env"] as Array<{ name: string; value: string }>;
    const wait = env.find((e) => e.name === "EPHEMERA_WAIT_TIMEOUT_MS");
    expect(Number(wait?.value)).toBeGreaterThan(timeoutMs);
  });

  it("uses the plugin's namespace, and no deadline for a step without a timeout", () => {
    const p = build({ timeoutMs: 0, runner: { image: "x", namespace: "team-a", podTemplateOverlay: "" } });
    expect(p.metadata.namespace).toBe("team-a");
    expect(p.spec.activeDeadlineSeconds).toBeUndefined();
  });

  it("merges the overlay: env, service account, annotations reach the pod; what the driver relies on stays", () => {
    const overlay = [
      "metadata:",
      "  annotations: {vault.hashicorp.com/agent-inject: 'true'}",
      "  labels: {ephemera.dev/step: forged, team: db}",
      "spec:",
      "  serviceAccountName: runner",
      "  restartPolicy: Always",
      "  containers:",
      "  - name: main",
      "    command: [sleep, infinity]",
      "    env: [{name: PGHOST, value: db.internal}]",
    ].join("\n");
    const p = build({ runner: { image: "x", namespace: "", podTemplateOverlay: overlay } });
    expect(p.metadata.annotations).toEqual({ "vault.hashicorp.com/agent-inject": "true", "ephemera.dev/run-id": "rk1.db.create.provision.2" });
    expect(p.metadata.labels).toMatchObject({ team: "db", "ephemera.dev/step": "provision" });
    expect(p.spec.serviceAccountName).toBe("runner");
    expect(p.spec.restartPolicy).toBe("Never");
    expect(container(p, "main")["command"]).toEqual(["/ephemera/entrypoint"]);
    expect(container(p, "main")["env"]).toEqual([{ name: "SIGNADOT_SANDBOX_NAME", value: "feature-x" }, { name: "PGHOST", value: "db.internal" }]);
  });

  it("refuses an overlay that is not a pod template, naming the field and the rule", () => {
    for (const overlay of ["- a\n- b", "kind: Pod\nspec: {}", "spec: [unclosed"]) {
      let caught: unknown;
      try {
        build({ runner: { image: "x", namespace: "", podTemplateOverlay: overlay } });
      } catch (err) {
        caught = err;
      }
      expect(isValidationError(caught)).toBe(true);
      expect((caught as { violations: Array<{ field: string; rule: string }> }).violations[0]).toMatchObject({ field: "runner.podTemplateOverlay", rule: "pod-template" });
    }
  });
});
