import { createArgs } from "./docker-runtime.js";
import type { ContainerLaunch } from "./runtime.js";

const launch = (over: Partial<ContainerLaunch>): ContainerLaunch => ({
  name: "main", image: "debian:bookworm-slim", command: ["true"], args: undefined, env: {}, workingDir: undefined,
  securityContext: {}, resources: {}, mounts: [], runDir: "/unused", logFile: "/unused", ...over,
});
const POD = '"p_ns(uid)"';

it("turns the security context and limits into docker create's options", () => {
  expect(createArgs(launch({
    securityContext: { runAsUser: 1000, runAsGroup: 2000, supplementalGroups: [3000], fsGroup: 4000, readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false, capabilities: { add: ["NET_ADMIN"], drop: ["ALL"] }, privileged: true },
    resources: { limits: { memory: "64Mi", cpu: "500m" } },
    workingDir: "/w",
    mounts: [{ source: "/data/v", target: "/v", readOnly: true }, { source: "/data/t", target: "/dev/termination-log", readOnly: false }],
  }), "", POD)).toEqual([
    "--user", "1000:2000", "--group-add", "3000", "--group-add", "4000", "--read-only", "--privileged",
    "--security-opt", "no-new-privileges", "--cap-add", "NET_ADMIN", "--cap-drop", "ALL",
    "--memory", String(64 * 2 ** 20), "--memory-swap", String(64 * 2 ** 20), "--cpus", "0.5",
    "--workdir", "/w", "-v", "/data/v:/v:ro", "-v", "/data/t:/dev/termination-log",
  ]);
});

it("refuses root under runAsNonRoot as the kubelet does, and accepts a numeric non-root image user", () => {
  const nonRoot = (sc: Record<string, unknown>, imageUser: string) => () => createArgs(launch({ securityContext: { runAsNonRoot: true, ...sc } }), imageUser, POD);
  expect(nonRoot({}, "")).toThrow(`container has runAsNonRoot and image will run as root (pod: ${POD}, container: main)`);
  expect(nonRoot({}, "root")).toThrow("image will run as root");
  expect(nonRoot({ runAsUser: 0 }, "10001")).toThrow(`container's runAsUser breaks non-root policy (pod: ${POD}, container: main)`);
  expect(nonRoot({}, "node")).toThrow(`container has runAsNonRoot and image has non-numeric user (node), cannot verify user is non-root (pod: ${POD}, container: main)`);
  expect(nonRoot({}, "10001")()).toEqual([]);
});

it("names the field of a limit that is not a quantity", () => {
  expect(() => createArgs(launch({ resources: { limits: { memory: "lots" } } }), "", POD))
    .toThrow('container "main" resources.limits.memory: "lots" is not a quantity');
});
