import { logRetention, runnerConfig } from "./config.js";

const defaults = { launcher: "/ephemera-launch", workRoot: "/tmp", runnerId: "r1", uid: 1000 };

describe("runner configuration: log retention", () => {
  it("keeps step logs 7 days unless EPHEMERA_LOG_RETENTION says otherwise", () => {
    expect(runnerConfig({}, defaults).logRetentionMs).toBe(7 * 24 * 3_600_000);
    expect(logRetention({ EPHEMERA_LOG_RETENTION: "36h" })).toBe(36 * 3_600_000);
    expect(logRetention({ EPHEMERA_LOG_RETENTION: "1d12h" })).toBe(36 * 3_600_000);
    expect(logRetention({ EPHEMERA_LOG_RETENTION: "90m" })).toBe(90 * 60_000);
    expect(logRetention({ EPHEMERA_LOG_RETENTION: "30s" })).toBe(30_000);
  });

  it("reads it as every duration is read (kit's parser): decimals and weeks too", () => {
    expect(logRetention({ EPHEMERA_LOG_RETENTION: "1.5d" })).toBe(36 * 3_600_000);
    expect(logRetention({ EPHEMERA_LOG_RETENTION: "2w" })).toBe(14 * 86_400_000);
  });

  it("refuses a retention over 10 years, which JetStream's max age in nanoseconds would not hold", () => {
    expect(logRetention({ EPHEMERA_LOG_RETENTION: "3650d" })).toBe(3650 * 86_400_000);
    for (const bad of ["3651d", "99999999999d"]) {
      expect(() => logRetention({ EPHEMERA_LOG_RETENTION: bad }))
        .toThrow(`EPHEMERA_LOG_RETENTION: "${bad}" is longer than the 3650-day limit`);
    }
  });

  it("refuses what is not a duration of at least a second, naming the variable", () => {
    for (const bad of ["7", "a week", "0s", "-1d", "7 d"]) {
      expect(() => logRetention({ EPHEMERA_LOG_RETENTION: bad })).toThrow(
        `EPHEMERA_LOG_RETENTION: "${bad}" is not a duration such as 90s, 10m, 1h30m, 2d or 1w (numbers with a unit: ms, s, m, h, d or w)`,
      );
    }
    expect(() => logRetention({ EPHEMERA_LOG_RETENTION: "500ms" }))
      .toThrow('EPHEMERA_LOG_RETENTION: "500ms" is shorter than the 1-second minimum');
  });
});

describe("runner configuration: runner pods' requests and limits", () => {
  const kube = (env: Record<string, string>) => runnerConfig({ EPHEMERA_RUNNER_DRIVER: "kubernetes", ...env }, defaults).kube!;

  it("leaves the pod builder's defaults unless the environment names others", () => {
    expect(kube({}).resources).toBeUndefined();
    const set = kube({ EPHEMERA_KUBE_MAIN_REQUESTS: "cpu=250m, memory=512Mi", EPHEMERA_KUBE_MAIN_LIMITS: "memory=2Gi", EPHEMERA_KUBE_AGENT_LIMITS: "" });
    expect(set.resources).toEqual({
      main: { requests: { cpu: "250m", memory: "512Mi" }, limits: { memory: "2Gi" } },
      agents: { requests: { cpu: "50m", memory: "64Mi" } },
    });
  });

  it("refuses what is not name=quantity, naming the variable and the rule", () => {
    expect(() => kube({ EPHEMERA_KUBE_MAIN_LIMITS: "memory=1GB" }))
      .toThrow('EPHEMERA_KUBE_MAIN_LIMITS: "1GB" (memory) is not a Kubernetes quantity (e.g. 500m, 2, 128Mi, 1Gi)');
    expect(() => kube({ EPHEMERA_KUBE_AGENT_REQUESTS: "cpu" }))
      .toThrow('EPHEMERA_KUBE_AGENT_REQUESTS: "cpu" is not name=quantity (e.g. cpu=100m,memory=128Mi)');
  });
});

describe("runner configuration: the routing mesh", () => {
  const kube = (env: Record<string, string>) => runnerConfig({ EPHEMERA_RUNNER_DRIVER: "kubernetes", ...env }, defaults).kube!;

  it("keeps no mesh's routes unless EPHEMERA_ROUTING_MESH names istio", () => {
    expect(kube({}).routingMesh).toBe("none");
    expect(kube({ EPHEMERA_ROUTING_MESH: "none" }).routingMesh).toBe("none");
    expect(kube({ EPHEMERA_ROUTING_MESH: "istio" }).routingMesh).toBe("istio");
  });

  it("refuses a mesh it does not know, and a mesh without the Kubernetes driver", () => {
    for (const bad of ["linkerd", "Istio", " istio"]) {
      expect(() => kube({ EPHEMERA_ROUTING_MESH: bad })).toThrow(`EPHEMERA_ROUTING_MESH must be one of none, istio, got "${bad}"`);
    }
    expect(() => runnerConfig({ EPHEMERA_ROUTING_MESH: "istio" }, defaults))
      .toThrow("EPHEMERA_ROUTING_MESH=istio needs EPHEMERA_RUNNER_DRIVER=kubernetes (the process driver runs no forks to route)");
    expect(runnerConfig({ EPHEMERA_ROUTING_MESH: "none" }, defaults).kube).toBeUndefined();
  });
});
