import * as pb from "@ephemera/proto";
import { isValidationError } from "@ephemera/kit";
import { OUTPUTS_STORE_GRACE_S, START_GRACE_S, buildPod, buildTokenSecret, labelValue, podName, sharedDirs } from "./pod.js";

type Pod = {
  metadata: { name: string; namespace: string; labels: Record<string, string>; annotations?: Record<string, string> };
  spec: {
    restartPolicy: string; activeDeadlineSeconds?: number; serviceAccountName?: string; automountServiceAccountToken?: boolean;
    securityContext?: Record<string, unknown>;
    initContainers: Array<Record<string, unknown>>; containers: Array<Record<string, unknown> & { name: string; env?: Array<{ name: string; value?: string }> }>;
    volumes: Array<{ name: string; secret?: { secretName: string } }>;
  };
};

const dispatch = (over: Partial<pb.StepDispatch> = {}) => pb.StepDispatch.fromPartial({
  runId: "rk1.db.create.provision.2", sandbox: "feature-x", resource: "db", phase: "create", step: "provision", attempt: 2,
  timeoutMs: 90_500, runner: { image: "postgres:16", namespace: "", podTemplateOverlay: "" },
  inputPaths: ["/etc/app/cfg"], outputPaths: ["dsn"], ...over,
});
const request = (over: Partial<pb.StepDispatch> = {}) => ({
  env: { SIGNADOT_SANDBOX_NAME: "feature-x" }, dispatch: dispatch(over), prefix: "p1", agentImage: "ephemera/agent:1", iocontext: "io:7401", defaultNamespace: "ephemera",
});
const build = (over: Partial<pb.StepDispatch> = {}) => buildPod(request(over)) as unknown as Pod;
const withOverlay = (...lines: string[]) => build({ runner: { image: "x", namespace: "", podTemplateOverlay: lines.join("\n") } });
const AGENTS = ["ephemera-init", "ephemera-sidecar"];
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
    expect(labelValue("p".repeat(63))).toBe("p".repeat(63)); // one that fits is as it always was
  });

  it("keeps two long values apart with a hash of the whole value, the same each time", () => {
    const prefix = `${"team-payments-eu-west-".repeat(3)}staging`;
    const [a, b] = [labelValue(`${prefix}-a`), labelValue(`${prefix}-b`)];
    expect(a).not.toBe(b);
    expect(labelValue(`${prefix}-a`)).toBe(a);
    for (const v of [a, b, labelValue(`${"/".repeat(70)}x`)]) {
      expect(v.length).toBeLessThanOrEqual(63);
      expect(v).toMatch(/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/);
    }
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
    // The timeout, plus fetching the inputs before main and storing the outputs after it.
    expect(p.spec.activeDeadlineSeconds).toBe(91 + START_GRACE_S + OUTPUTS_STORE_GRACE_S);
    expect([START_GRACE_S, OUTPUTS_STORE_GRACE_S]).toEqual([60, 60]);
    expect(sharedDirs(dispatch())).toEqual(["/etc/app", "/tmp"]);
    expect(p.spec.volumes.map((v) => v.name)).toEqual(["ephemera-agent", "ephemera-path-0", "ephemera-path-1", "ephemera-token"]);
    expect(container(p, "ephemera-init")["command"]).toEqual(["node", "/agent/agent.cjs", "init"]);
    expect(container(p, "main")).toMatchObject({ image: "postgres:16", command: ["/ephemera/entrypoint"] });
    expect(container(p, "ephemera-sidecar")["command"]).toEqual(["node", "/agent/agent.cjs", "sidecar"]);
    // The agents' reports come back through the pod's status.
    for (const c of ["ephemera-init", "ephemera-sidecar"]) {
      expect(container(p, c)).toMatchObject({ terminationMessagePath: "/dev/termination-log" });
      expect(container(p, c)["env"]).toContainEqual({ name: "EPHEMERA_TERMINATION_MESSAGE_PATH", value: "/dev/termination-log" });
    }
    expect(p.metadata.annotations).toEqual({ "ephemera.dev/run-id": "rk1.db.create.provision.2" });
    expect((container(p, "main")["volumeMounts"] as Array<{ mountPath: string }>).map((m) => m.mountPath)).toEqual(["/ephemera", "/etc/app", "/tmp"]);
    for (const c of AGENTS) {
      expect((container(p, c)["volumeMounts"] as Array<{ mountPath: string }>).map((m) => m.mountPath))
        .toEqual(["/ephemera", "/etc/app", "/tmp", "/var/run/secrets/ephemera.dev"]);
    }
  });

  it("lets the sidecar wait for main as long as the step may run (a 1000h step outlives the agent's 6 h default)", () => {
    const timeoutMs = 1000 * 3_600_000;
    const p = build({ timeoutMs });
    expect(p.spec.activeDeadlineSeconds).toBe(3_600_000 + START_GRACE_S + OUTPUTS_STORE_GRACE_S);
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

  it("hardens every container by default: no privilege escalation, agents non-root without capabilities, RuntimeDefault seccomp", () => {
    const p = build();
    expect(p.spec.securityContext).toEqual({ seccompProfile: { type: "RuntimeDefault" } });
    for (const c of AGENTS) {
      expect(container(p, c)["securityContext"]).toEqual({
        runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] },
      });
    }
    // main runs the plugin's image, which may need root (apt-get install): no escalation, the runtime's default capabilities.
    expect(container(p, "main")["securityContext"]).toEqual({ allowPrivilegeEscalation: false });
    expect(p.spec.automountServiceAccountToken).toBe(false);
  });

  it("gives every container requests and limits: the agents small, main the configured defaults", () => {
    const p = build();
    for (const c of AGENTS) {
      expect(container(p, c)["resources"]).toEqual({ requests: { cpu: "50m", memory: "64Mi" }, limits: { cpu: "500m", memory: "256Mi" } });
    }
    expect(container(p, "main")["resources"]).toEqual({ requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "1", memory: "1Gi" } });
    const configured = buildPod({ ...request(), resources: { main: { requests: { cpu: "1", memory: "2Gi" }, limits: { memory: "4Gi" } } } }) as unknown as Pod;
    expect(container(configured, "main")["resources"]).toEqual({ requests: { cpu: "1", memory: "2Gi" }, limits: { memory: "4Gi" } });
  });

  it("lets the overlay ask main for root, more memory and a service account; the agents stay as they are", () => {
    const p = withOverlay(
      "spec:",
      "  serviceAccountName: vault-reader",
      "  securityContext: {fsGroup: 2000}",
      "  containers:",
      "  - name: main",
      "    securityContext: {runAsUser: 0, capabilities: {add: [NET_ADMIN]}}",
      "    resources: {limits: {memory: 4Gi}}",
      "  - name: ephemera-sidecar",
      "    securityContext: {runAsUser: 0, privileged: true}",
      "    resources: {limits: {memory: 512Mi}}",
    );
    expect(container(p, "main")["securityContext"]).toEqual({ allowPrivilegeEscalation: false, runAsUser: 0, capabilities: { add: ["NET_ADMIN"] } });
    expect(container(p, "main")["resources"]).toEqual({ requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "1", memory: "4Gi" } });
    expect(p.spec.securityContext).toEqual({ seccompProfile: { type: "RuntimeDefault" }, fsGroup: 2000 });
    expect(p.spec.serviceAccountName).toBe("vault-reader");
    // The service account's token is the plugin's to have, as the cluster's defaults say.
    expect(p.spec.automountServiceAccountToken).toBeUndefined();
    expect(container(p, "ephemera-sidecar")["securityContext"]).toMatchObject({ runAsNonRoot: true, runAsUser: 10001, allowPrivilegeEscalation: false });
    expect(container(p, "ephemera-sidecar")["securityContext"]).not.toHaveProperty("privileged");
    expect(container(p, "ephemera-sidecar")["resources"]).toEqual({ requests: { cpu: "50m", memory: "64Mi" }, limits: { cpu: "500m", memory: "512Mi" } });
  });

  it("lets the overlay ask main for less (restricted), and keeps automountServiceAccountToken if the overlay sets it", () => {
    const p = withOverlay(
      "spec:",
      "  automountServiceAccountToken: true",
      "  containers:",
      "  - name: main",
      "    securityContext: {runAsNonRoot: true, runAsUser: 1000, capabilities: {drop: [ALL]}, readOnlyRootFilesystem: true}",
    );
    expect(container(p, "main")["securityContext"]).toEqual({
      allowPrivilegeEscalation: false, runAsNonRoot: true, runAsUser: 1000, capabilities: { drop: ["ALL"] }, readOnlyRootFilesystem: true,
    });
    expect(p.spec.automountServiceAccountToken).toBe(true);
  });

  it("puts the token in no container's environment: a Secret named after the pod, mounted read-only in the agents only", () => {
    const p = withOverlay(
      "spec:",
      "  containers:",
      "  - name: main",
      "    volumeMounts: [{name: ephemera-token, mountPath: /stolen}]",
      "  volumes: [{name: ephemera-token, secret: {secretName: elsewhere}}]",
    );
    for (const c of [...p.spec.initContainers, ...p.spec.containers]) {
      expect(((c["env"] ?? []) as Array<{ name: string }>).map((e) => e.name)).not.toContain("EPHEMERA_TOKEN");
    }
    expect(p.spec.volumes).toContainEqual({ name: "ephemera-token", secret: { secretName: p.metadata.name, defaultMode: 0o444 } });
    expect(JSON.stringify(container(p, "main"))).not.toContain("ephemera-token");
    for (const c of AGENTS) {
      expect(container(p, c)["volumeMounts"]).toContainEqual({ name: "ephemera-token", mountPath: "/var/run/secrets/ephemera.dev", readOnly: true });
      expect(container(p, c)["env"]).toContainEqual({ name: "EPHEMERA_TOKEN_FILE", value: "/var/run/secrets/ephemera.dev/token" });
    }
  });

  it("builds the token's Secret: the pod's name, namespace and labels, the token as its one key", () => {
    const p = build({ runner: { image: "x", namespace: "team-a", podTemplateOverlay: "" } });
    const secret = buildTokenSecret({ ...request({ runner: { image: "x", namespace: "team-a", podTemplateOverlay: "" } }), token: "tok-1" });
    expect(secret).toEqual({
      apiVersion: "v1", kind: "Secret", type: "Opaque",
      metadata: { name: p.metadata.name, namespace: "team-a", labels: p.metadata.labels, annotations: { "ephemera.dev/run-id": "rk1.db.create.provision.2" } },
      data: { token: Buffer.from("tok-1").toString("base64") },
    });
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
