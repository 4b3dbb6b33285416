// localValues merging the cluster's environment of a local (as eph local connect's daemon
// gives it) with the sandbox's customizations: order, replacement, deletion, and what is
// named as unresolved, for env and files apart.
import * as pb from "@ephemera/proto";
import { localValues } from "./local.js";
import type { Environment } from "./workstation/tunnel.js";

const view = pb.SandboxView.fromJSON({
  name: "dev", routingKey: "rk1",
  spec: {
    local: [{
      name: "api", from: { kind: "Deployment", namespace: "shop", name: "api" },
      env: [
        { name: "LOG_LEVEL", value: "trace" },
        { name: "FEATURE", operation: "delete" },
        { name: "TOKEN", valueFrom: { secret: { name: "s", key: "token" } } },
        { name: "CART", valueFrom: { fork: { forkOf: { name: "cart" }, expression: "" } } },
      ],
      files: [{ path: "/etc/mode", valueFrom: { configMap: { name: "c", key: "MODE" } } }],
    }],
  },
});

const cluster: Environment = {
  sandbox: "dev", local: "api", baseline: { kind: "Deployment", namespace: "shop", name: "api", container: "api" },
  env: [{ name: "LOG_LEVEL", value: "info" }, { name: "FEATURE", value: "on" }, { name: "DB", value: "pw" }],
  values: { env: [{ name: "TOKEN", value: "tok" }], files: [{ path: "/etc/mode", value: Buffer.from("blue").toString("base64") }] },
  unresolved: ["env CART: no Service selects the pods", "file /etc/other: there is no ConfigMap shop/x"],
};

it("puts the baseline's env first and the customizations on top, each replacing its name and going last", () => {
  const values = localValues(view, "api", cluster);
  expect(values.env).toEqual([
    { name: "DB", value: "pw" }, { name: "SIGNADOT_SANDBOX_NAME", value: "dev" }, { name: "SIGNADOT_SANDBOX_ROUTING_KEY", value: "rk1" },
    { name: "LOG_LEVEL", value: "trace" }, { name: "TOKEN", value: "tok" },
  ]);
  expect(values.files).toEqual([{ path: "/etc/mode", value: Buffer.from("blue") }]);
  expect(values.unresolved).toEqual({ env: ["env CART: no Service selects the pods"], files: ["file /etc/other: there is no ConfigMap shop/x"] });
});

it("without the cluster, names each cluster-only value as eph local connect's to resolve", () => {
  const values = localValues(view, "api");
  expect(values.env).toEqual([
    { name: "SIGNADOT_SANDBOX_NAME", value: "dev" }, { name: "SIGNADOT_SANDBOX_ROUTING_KEY", value: "rk1" }, { name: "LOG_LEVEL", value: "trace" },
  ]);
  expect(values.files).toEqual([]);
  expect(values.unresolved).toEqual({
    env: [
      "env TOKEN: from Secret s key token, which only the cluster has (eph local connect resolves it)",
      "env CART: from fork cart, which only the cluster has (eph local connect resolves it)",
    ],
    files: ["file /etc/mode: from ConfigMap c key MODE, which only the cluster has (eph local connect resolves it)"],
  });
});
