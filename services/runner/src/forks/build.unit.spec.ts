import * as pb from "@ephemera/proto";
import { isValidationError } from "@ephemera/kit";
import {
  ForkValueError, buildFork, buildForkService, buildOutputsSecret, buildOutputsSecrets, forkServiceOf, isOutputsTooLargeError, outputKey,
  outputsSecretName, type ForkService,
} from "./build.js";

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
const cart = { kind: "Deployment", namespace: "shop", name: "cart" };
const cartService: Obj = {
  metadata: { name: "cart", namespace: "shop" }, spec: { selector: { app: "cart" }, ports: [{ name: "http", port: 9090, targetPort: 8080 }] },
};
/** cart's fork Service when cart's baseline Service has no ports. */
const portless: ForkService = { name: "cart-rk1", baselineName: "cart", host: "cart-rk1.shop.svc" };
/** The sandbox's other fork, of cart, as the runner finds it: with its baseline's Service. */
const forkServices = (service: ForkService | null = forkServiceOf(cart, [cartService], "rk1")!) =>
  new Map([["Deployment shop/orders", undefined], ["Deployment shop/cart", service ?? undefined]]);
const build = (c: Partial<pb.Customizations> = {}, services = forkServices()) =>
  buildFork({ sandbox, fork: fork(c), baseline, forkServices: services }) as Obj;
const fromCart = (name: string, expression: string, container = "web") =>
  ({ name, value: "", container, operation: "", valueFrom: { fork: { forkOf: cart, expression } } });
const envOf = (w: Obj, c: string) =>
  Object.fromEntries((container(w, c)["env"] as Obj[]).map((e) => [e["name"], e["value"] ?? e["valueFrom"]]));
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
        fromCart("CART", "{{ .Service.Host }}"),
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

  it("removes a variable deleted, from the containers named (every one when none is), and sets nothing for it", () => {
    const w = build({ env: [{ name: "MODE", value: "", container: "", operation: "delete" }] });
    for (const c of ["web", "proxy"]) expect(container(w, c)["env"].map((e: Obj) => e["name"])).not.toContain("MODE");
    expect(container(w, "web")["env"]).toContainEqual({ name: "SIGNADOT_SANDBOX_NAME", value: "feature-x" }); // the others stay

    const both = { ...baseline, spec: structuredClone(baseline["spec"]) };
    both["spec"].template.spec.containers[1].env = [{ name: "MODE", value: "proxy" }];
    const deleteInWeb = fork({ env: [{ name: "MODE", value: "", container: "web", operation: "delete" }] });
    const one = buildFork({ sandbox, fork: deleteInWeb, baseline: both }) as Obj;
    expect(envOf(one, "web")["MODE"]).toBeUndefined();
    expect(envOf(one, "proxy")["MODE"]).toBe("proxy");
    // Upsert (or no operation) sets it.
    expect(envOf(build({ env: [{ name: "MODE", value: "x", container: "", operation: "upsert" }] }), "web")["MODE"]).toBe("x");
  });

  it("sets a valueFrom.fork as its expression says, over the other fork's Service: host, first port, and the text around them", () => {
    const w = build({
      env: [
        fromCart("CART_ADDR", "{{ .Service.Host }}:{{ .Service.Port }}"),
        fromCart("CART_URL", "http://{{.Service.Host}}:{{   .Service.Port }}/api"),
        fromCart("CART_HOST", ""), // no expression: the host, as before expressions
      ],
    });
    expect(envOf(w, "web")).toMatchObject({
      CART_ADDR: "cart-rk1.shop.svc:9090", CART_URL: "http://cart-rk1.shop.svc:9090/api", CART_HOST: "cart-rk1.shop.svc",
    });
    expect(envOf(w, "proxy")["CART_ADDR"]).toBeUndefined();
  });

  it("names the fork Service of the baseline's Service, not of the workload: the first by name of those selecting it, with its first port", () => {
    const named = (name: string, ports: number[]) => ({ metadata: { name, namespace: "shop" }, spec: { ports: ports.map((port) => ({ port })) } });
    expect(forkServiceOf(cart, [named("cart-http", [80, 8080]), named("cart-admin", [9000])], "rk1"))
      .toEqual({ name: "cart-admin-rk1", baselineName: "cart-admin", host: "cart-admin-rk1.shop.svc", port: 9000 });
    expect(forkServiceOf(cart, [named("carts", [80])], "rk1")).toMatchObject({ host: "carts-rk1.shop.svc", port: 80 });
    expect(forkServiceOf(cart, [named("headless", [])], "rk1"))
      .toEqual({ name: "headless-rk1", baselineName: "headless", host: "headless-rk1.shop.svc" });
    expect(forkServiceOf(cart, [], "rk1")).toBeUndefined();
  });

  it("fails ServiceNotFound, naming the env var and the workload, when no Service selects the other fork's baseline", () => {
    const failure = (c: Partial<pb.Customizations>, services: Map<string, ForkService | undefined>) => {
      try {
        build(c, services);
      } catch (err) {
        return err;
      }
      throw new Error("built");
    };
    const noService = failure({ env: [fromCart("CART_URL", "http://{{ .Service.Host }}")] }, forkServices(null)) as ForkValueError;
    expect(noService).toBeInstanceOf(ForkValueError);
    expect(noService.reason).toBe("ServiceNotFound");
    expect(noService.message).toBe("env CART_URL reads valueFrom.fork of Deployment shop/cart, but no Service in namespace shop selects "
      + "the pods of Deployment shop/cart: its fork has no Service to take .Service.Host and .Service.Port from (give the baseline a "
      + "Service, or set CART_URL otherwise)");
    const noPort = failure({ env: [fromCart("CART_PORT", "{{ .Service.Port }}")] }, forkServices(portless)) as ForkValueError;
    expect(noPort.reason).toBe("ServiceNotFound");
    expect(noPort.message).toBe("env CART_PORT reads valueFrom.fork of Deployment shop/cart, but its expression reads .Service.Port, "
      + "and its Service cart-rk1 (the fork of Service cart) has no ports");
    // Without a port, the host alone is still there to read.
    expect(envOf(build({ env: [fromCart("CART", "{{ .Service.Host }}")] }, forkServices(portless)), "web")["CART"]).toBe("cart-rk1.shop.svc");
    // What validation refuses is refused here too, should it get this far.
    expect((failure({ env: [fromCart("X", "{{ .Service.Foo }}")] }, forkServices()) as ForkValueError).reason).toBe("Rejected");
    expect((failure({ env: [fromCart("X", "")] }, new Map()) as ForkValueError).message).toContain("but that is not a fork of this sandbox");
  });

  it("cuts a long baseline's name with a hash, so two such forks (and their Services) differ; a name that fits is unchanged", () => {
    const longName = (suffix: string) => `${"orders-reconciliation-".repeat(3)}${suffix}`;
    const long = (suffix: string) => ({ ...baseline, metadata: { ...baseline["metadata"], name: longName(suffix) } });
    const [a, b] = ["a", "b"].map((x) => buildFork({ sandbox, fork: fork(), baseline: long(x) }) as Obj);
    expect(a!["metadata"].name).not.toBe(b!["metadata"].name);
    expect(a!["metadata"].name.length).toBeLessThanOrEqual(63);
    const svc = (w: Obj, name: string) =>
      buildForkService({ metadata: { name, namespace: "shop" }, spec: { ports: [{ port: 80 }] } }, w, "rk1") as Obj;
    // A Service named as its workload gets the workload's fork name; two such Services differ as their workloads do.
    expect(svc(a!, longName("a"))["metadata"].name).toBe(a!["metadata"].name);
    expect(svc(a!, longName("a"))["metadata"].name).not.toBe(svc(b!, longName("b"))["metadata"].name);
    expect(build()["metadata"].name).toBe("orders-rk1");
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
