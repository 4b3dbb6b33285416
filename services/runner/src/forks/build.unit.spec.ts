import * as pb from "@ephemera/proto";
import { isValidationError } from "@ephemera/kit";
import { buildFork, buildForkService, buildOutputsSecret, buildOutputsSecrets, isOutputsTooLargeError, outputKey, outputsSecretName } from "./build.js";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const baseline: Obj = {
  apiVersion: "apps/v1", kind: "Deployment",
  metadata: { name: "orders", namespace: "shop", labels: { app: "orders" }, uid: "u1", resourceVersion: "7" },
  spec: {
    replicas: 3,
    selector: { matchLabels: { app: "orders" } },
    template: {
      metadata: { labels: { app: "orders", tier: "web" } },
      spec: { containers: [{ name: "web", image: "orders:1", env: [{ name: "MODE", value: "prod" }] }, { name: "proxy", image: "envoy:1" }] },
    },
  },
};
const sandbox = { name: "feature-x", routingKey: "rk1" };
const fork = (c: Partial<pb.Customizations> = {}) => pb.Fork.fromPartial({ forkOf: { kind: "Deployment", namespace: "shop", name: "orders" }, customizations: c });
const build = (c: Partial<pb.Customizations> = {}) => buildFork({ sandbox, fork: fork(c), baseline }) as Obj;
const container = (w: Obj, name: string) => (w["spec"].template.spec.containers as Obj[]).find((c) => c["name"] === name)!;

describe("a forked workload", () => {
  it("is named from the baseline and the routing key, labelled, one replica, in the baseline's namespace, without the baseline's identity", () => {
    const w = build();
    expect(w["metadata"]).toEqual({
      name: "orders-rk1", namespace: "shop",
      labels: { app: "orders", "ephemera.dev/sandbox": "feature-x", "ephemera.dev/routing-key": "rk1", "ephemera.dev/fork": "orders-rk1" },
    });
    expect(w["spec"].replicas).toBe(1);
    expect(baseline["spec"].replicas).toBe(3); // the baseline object is not changed
  });

  it("has pods the baseline's selector does not select, and a selector of its own", () => {
    const w = build();
    const podLabels = w["spec"].template.metadata.labels as Record<string, string>;
    const baselineSelects = Object.entries(baseline["spec"].selector.matchLabels as Record<string, string>).every(([k, v]) => podLabels[k] === v);
    expect(baselineSelects).toBe(false);
    expect(Object.entries(w["spec"].selector.matchLabels as Record<string, string>).every(([k, v]) => podLabels[k] === v)).toBe(true);
    expect(podLabels["tier"]).toBe("web");
  });

  it("sets images and env by container (or in every container), resource outputs through the outputs Secret, never inlined", () => {
    const w = build({
      images: [{ image: "orders:pr-42", container: "web" }],
      env: [
        { name: "MODE", value: "sandbox", container: "web", operation: "" },
        { name: "DB_DSN", value: "", container: "web", operation: "", valueFrom: { resource: { name: "db", outputKey: "provision.dsn" } } },
        { name: "TOKEN", value: "", container: "", operation: "", valueFrom: { secret: { name: "api", key: "token" } } },
        { name: "CART", value: "", container: "web", operation: "", valueFrom: { fork: { forkOf: { kind: "Deployment", namespace: "shop", name: "cart" }, expression: "" } } },
      ],
    });
    expect(container(w, "web")["image"]).toBe("orders:pr-42");
    expect(container(w, "proxy")["image"]).toBe("envoy:1");
    const env = container(w, "web")["env"] as Obj[];
    expect(env).toContainEqual({ name: "MODE", value: "sandbox" });
    expect(env.filter((e) => e["name"] === "MODE")).toHaveLength(1);
    expect(env).toContainEqual({ name: "DB_DSN", valueFrom: { secretKeyRef: { name: outputsSecretName("rk1"), key: outputKey("db", "provision.dsn") } } });
    expect(env).toContainEqual({ name: "CART", value: "cart-rk1.shop.svc" });
    for (const c of ["web", "proxy"]) {
      expect(container(w, c)["env"]).toContainEqual({ name: "TOKEN", valueFrom: { secretKeyRef: { name: "api", key: "token" } } });
      expect(container(w, c)["env"]).toContainEqual({ name: "SIGNADOT_SANDBOX_ROUTING_KEY", value: "rk1" });
      expect(container(w, c)["env"]).toContainEqual({ name: "EPHEMERA_SANDBOX_NAME", value: "feature-x" });
    }
  });

  it.each([
    ["strategic", "spec:\n  template:\n    spec:\n      containers:\n      - name: web\n        resources: {limits: {memory: 64Mi}}"],
    ["merge", '{"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "x", "resources": {"limits": {"memory": "64Mi"}}}]}}}}'],
    ["json", '[{"op": "add", "path": "/spec/template/spec/containers/0/resources", "value": {"limits": {"memory": "64Mi"}}}]'],
  ])("applies a %s patch", (type, value) => {
    const w = build({ patch: { type, value } });
    expect(container(w, "web")["resources"]).toEqual({ limits: { memory: "64Mi" } });
    if (type === "strategic") expect(container(w, "proxy")["image"]).toBe("envoy:1"); // merged by name, not replaced
    if (type === "merge") expect(w["spec"].template.spec.containers).toHaveLength(1); // lists replaced, as RFC 7386 says
  });

  it("refuses a patch that cannot apply, naming the field and the rule", () => {
    for (const patch of [{ type: "json", value: '[{"op": "replace", "path": "/spec/nope/x", "value": 1}]' }, { type: "yaml-ish", value: "a: 1" }, { type: "json", value: "{}" }]) {
      try {
        build({ patch });
        throw new Error("accepted");
      } catch (err) {
        expect(isValidationError(err)).toBe(true);
        expect((err as { violations: Array<{ field: string; rule: string }> }).violations[0]).toMatchObject({ field: "forks.customizations.patch", rule: "patch" });
      }
    }
  });
});

describe("the outputs Secret and the fork's Services", () => {
  it("keeps the outputs base64 in a Secret named for the sandbox", () => {
    const s = buildOutputsSecret(sandbox, "shop", new Map([[outputKey("db", "provision.dsn"), Buffer.from("postgres://x")]])) as Obj;
    expect(s["metadata"]).toMatchObject({ name: "ephemera-rk1-outputs", namespace: "shop" });
    expect(s["data"]).toEqual({ "db.provision.dsn": Buffer.from("postgres://x").toString("base64") });
  });

  it("puts in each namespace's outputs Secret only the outputs its forks read", () => {
    const reads = (namespace: string, name: string, ...keys: string[]) => pb.Fork.fromPartial({
      forkOf: { kind: "Deployment", namespace, name },
      customizations: { env: keys.map((k) => ({ name: k.toUpperCase().replace(/\W/g, "_"), valueFrom: { resource: { name: "db", outputKey: k } } })) },
    });
    const values = new Map([["db.provision.dsn", Buffer.from("dsn")], ["db.seed.report", Buffer.from("report")]]);
    const secrets = buildOutputsSecrets(sandbox, [reads("shop", "orders", "provision.dsn"), reads("ops", "audit", "seed.report", "provision.dsn"), reads("web", "ui")], values) as Obj[];
    expect(secrets.map((s) => [s["metadata"].namespace, Object.keys(s["data"])])).toEqual([
      ["shop", ["db.provision.dsn"]], ["ops", ["db.provision.dsn", "db.seed.report"]],
    ]);
  });

  it("refuses a namespace's outputs over the 1 MiB a Kubernetes Secret holds, naming their keys and sizes, never a value", () => {
    const forks = [pb.Fork.fromPartial({
      forkOf: { kind: "Deployment", namespace: "shop", name: "orders" },
      customizations: { env: ["provision.dump", "provision.dsn"].map((k, i) => ({ name: `V${i}`, valueFrom: { resource: { name: "db", outputKey: k } } })) },
    })];
    const exactly = new Map([["db.provision.dump", Buffer.alloc(1024 * 1024 - 3, "a")], ["db.provision.dsn", Buffer.from("dsn")]]);
    expect(buildOutputsSecrets(sandbox, forks, exactly)).toHaveLength(1);
    const over = new Map([["db.provision.dump", Buffer.alloc(1024 * 1024 - 2, "a")], ["db.provision.dsn", Buffer.from("dsn")]]);
    let caught: unknown;
    try {
      buildOutputsSecrets(sandbox, forks, over);
    } catch (err) {
      caught = err;
    }
    expect(isOutputsTooLargeError(caught)).toBe(true);
    expect((caught as Error).message).toBe("the outputs the forks in namespace shop read total 1048577 bytes, over the 1048576 bytes (1 MiB) "
      + "a Kubernetes Secret may hold: db.provision.dump (1048574 bytes), db.provision.dsn (3 bytes)");
    expect((caught as Error).message).not.toContain("aaa");
  });

  it("gives each baseline Service a fork Service with the same ports, selecting the fork's pods", () => {
    const w = build();
    const svc = buildForkService({ metadata: { name: "orders", namespace: "shop" }, spec: { selector: { app: "orders" }, ports: [{ name: "http", port: 80, targetPort: 8080 }] } }, w, "rk1") as Obj;
    expect(svc["metadata"]["name"]).toBe("orders-rk1");
    // Labelled as the fork is, and with the baseline Service it stands for (a mesh's routes are found from it).
    expect(svc["metadata"]["labels"]).toEqual({ ...w["metadata"].labels, "ephemera.dev/baseline-service": "orders" });
    expect(svc["spec"]).toEqual({ selector: w["spec"].selector.matchLabels, ports: [{ name: "http", port: 80, targetPort: 8080 }] });
  });

  it("makes a fork Service ClusterIP whatever the baseline's type, without its node ports", () => {
    const w = build();
    const svc = buildForkService({
      metadata: { name: "orders", namespace: "shop" },
      spec: { type: "NodePort", selector: { app: "orders" }, ports: [{ name: "http", port: 80, targetPort: 8080, nodePort: 30080 }] },
    }, w, "rk1") as Obj;
    expect(svc["spec"].type).toBeUndefined();
    expect(svc["spec"].ports).toEqual([{ name: "http", port: 80, targetPort: 8080 }]);
  });
});
