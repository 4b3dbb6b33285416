// injectRouter, given a pod, when injected, then the patch and the pod it makes: the
// containers, their env and security, the ports and the workload read from the pod.
import jsonpatch from "fast-json-patch";
import { decide } from "./decide.js";
import { injectRouter, type InjectOptions } from "./inject.js";
import type { Container, Pod } from "./pod.js";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const options: InjectOptions = { image: "ephemera/router:0.1.0", routes: "routeserver.ephemera-system.svc:7777" };
const apply = (pod: Pod, opts = options): Obj => jsonpatch.applyPatch(structuredClone(pod), injectRouter(pod, opts) as jsonpatch.Operation[], true, false).newDocument as Obj;
const env = (c: Obj) => Object.fromEntries((c["env"] as Obj[]).map((e) => [e["name"], e["value"] ?? e["valueFrom"]]));
const named = (list: Obj[], name: string) => list.find((c) => c["name"] === name)!;

/** A Deployment's pod: owned by its ReplicaSet `<deployment>-<pod-template-hash>`. */
function deploymentPod(annotations: Record<string, string>, containers: Container[]): Pod {
  return {
    metadata: {
      generateName: "orders-7d9c5f6b8-", namespace: "shop", annotations,
      labels: { app: "orders", "pod-template-hash": "7d9c5f6b8" },
      ownerReferences: [{ kind: "ReplicaSet", name: "orders-7d9c5f6b8", controller: true }],
    },
    spec: { containers },
  };
}
const asked = { "sidecar.ephemera.dev/inject": "true" };
const web: Container = { name: "web", image: "orders:1", ports: [{ containerPort: 8080 }] };

describe("a Deployment's pod annotated sidecar.ephemera.dev/inject", () => {
  const pod = deploymentPod({ ...asked }, [web]);
  const out = apply(pod);

  it("gets the status annotation, and kubectl's default container stays the app", () => {
    expect(out["metadata"].annotations).toEqual({
      ...asked, "sidecar.ephemera.dev/status": "injected", "kubectl.kubernetes.io/default-container": "web",
    });
  });

  it("gets the init container first, as root with NET_ADMIN and NET_RAW only, told the ports to capture", () => {
    const [init] = out["spec"].initContainers as Obj[];
    expect(init).toMatchObject({ name: "ephemera-router-init", image: "ephemera/router:0.1.0", command: ["ephemera-router-init"] });
    expect(env(init!)).toEqual({ EPHEMERA_ROUTER_PORTS: "8080:15000" });
    expect(init!["securityContext"]).toMatchObject({
      runAsUser: 0, runAsNonRoot: false, allowPrivilegeEscalation: false, capabilities: { add: ["NET_ADMIN", "NET_RAW"], drop: ["ALL"] },
    });
  });

  it("gets the router after the app, as user 10001 with no capability, told its workload, ports and the Routes API", () => {
    const containers = out["spec"].containers as Obj[];
    expect(containers.map((c) => c["name"])).toEqual(["web", "ephemera-router"]);
    const router = containers[1]!;
    expect(router).toMatchObject({ image: "ephemera/router:0.1.0", command: ["node", "/router/router.cjs"] });
    expect(env(router)).toEqual({
      EPHEMERA_ROUTER_WORKLOAD: "Deployment/shop/orders", EPHEMERA_ROUTER_PORTS: "8080:15000", EPHEMERA_ROUTES: "routeserver.ephemera-system.svc:7777",
    });
    expect(router["securityContext"]).toMatchObject({ runAsUser: 10001, runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } });
    expect(router["securityContext"].capabilities.add).toBeUndefined();
    expect(router["readinessProbe"]).toEqual({ httpGet: { path: "/healthz", port: 15020 }, periodSeconds: 2 });
  });

  it("leaves the app container as it was", () => {
    expect(named(out["spec"].containers, "web")).toEqual(web);
  });

  it("is an RFC 6902 patch of adds, escaping the annotation keys' slashes", () => {
    const withAnnotations = injectRouter(pod, options);
    expect(withAnnotations.map((o) => [o.op, o.path])).toEqual([
      ["add", "/metadata/annotations/sidecar.ephemera.dev~1status"],
      ["add", "/metadata/annotations/kubectl.kubernetes.io~1default-container"],
      ["add", "/spec/initContainers"],
      ["add", "/spec/containers/-"],
    ]);
  });
});

describe("idempotence", () => {
  it("given an injected pod, when injected again, then no operation and the pod is unchanged", () => {
    const once = apply(deploymentPod({ ...asked }, [web]));
    expect(injectRouter(once as Pod, options)).toEqual([]);
    expect(apply(once as Pod)).toEqual(once);
  });

  it("given a pod with other init containers and annotations, then the capture goes first and its annotations stay", () => {
    const pod = deploymentPod({ ...asked, team: "shop", "kubectl.kubernetes.io/default-container": "web" }, [web]);
    pod.spec!.initContainers = [{ name: "migrate", image: "orders:1" }];
    const out = apply(pod);
    expect((out["spec"].initContainers as Obj[]).map((c) => c["name"])).toEqual(["ephemera-router-init", "migrate"]);
    expect(out["metadata"].annotations).toEqual({ ...asked, team: "shop", "kubectl.kubernetes.io/default-container": "web", "sidecar.ephemera.dev/status": "injected" });
  });
});

describe("which pods are injected", () => {
  it("given Signadot's annotation sidecar.signadot.com/inject, then injected as well", () => {
    expect(apply(deploymentPod({ "sidecar.signadot.com/inject": "true" }, [web]))["spec"].containers).toHaveLength(2);
  });

  it("given no annotation, \"false\", or ephemera's \"false\" over Signadot's \"true\", then no operation", () => {
    const cases: Array<Record<string, string>> = [{}, { "sidecar.ephemera.dev/inject": "false" }, { "sidecar.ephemera.dev/inject": "false", "sidecar.signadot.com/inject": "true" }];
    for (const annotations of cases) {
      const pod = deploymentPod(annotations, [web]);
      expect(injectRouter(pod, options)).toEqual([]);
      expect(decide(pod, "shop")).toEqual({ inject: false, reason: "not-asked" });
    }
  });

  it("given a pod with no ports, then nothing is injected and the decision says why, for a warning", () => {
    const pod = deploymentPod({ ...asked }, [{ name: "worker", image: "worker:1" }]);
    expect(injectRouter(pod, options)).toEqual([]);
    expect(decide(pod, "shop")).toEqual({
      inject: false, reason: "no-ports",
      warning: 'ephemera-router not injected into pod "shop/orders-7d9c5f6b8-*": its containers declare no TCP containerPort, so there is no traffic to capture (declare the ports its Services target)',
    });
  });

  it("given only UDP ports, then there is nothing to capture either", () => {
    const pod = deploymentPod({ ...asked }, [{ name: "dns", image: "dns:1", ports: [{ containerPort: 53, protocol: "UDP" }] }]);
    expect(decide(pod, "shop")).toMatchObject({ inject: false, reason: "no-ports" });
  });

  it("given a bare pod with no owner and no workload annotation, then not injected, naming the annotation to set", () => {
    const pod: Pod = { metadata: { name: "debug", namespace: "shop", annotations: { ...asked } }, spec: { containers: [web] } };
    expect(injectRouter(pod, options)).toEqual([]);
    expect(decide(pod, "shop")).toMatchObject({ inject: false, reason: "no-workload", warning: expect.stringContaining("set the annotation sidecar.ephemera.dev/workload: Kind/name") });
  });
});

describe("ports", () => {
  it("given two containers with named ports, then every TCP port of both is captured once, listeners from 15000", () => {
    const pod = deploymentPod({ ...asked }, [
      { name: "web", image: "orders:1", ports: [{ name: "http", containerPort: 8080 }, { name: "grpc", containerPort: 9090, protocol: "TCP" }, { name: "stats", containerPort: 8125, protocol: "UDP" }] },
      { name: "admin", image: "admin:1", ports: [{ name: "admin", containerPort: 8081 }, { name: "http-again", containerPort: 8080 }] },
    ]);
    const out = apply(pod);
    const mapping = "8080:15000,9090:15001,8081:15002";
    expect(env(named(out["spec"].containers, "ephemera-router"))["EPHEMERA_ROUTER_PORTS"]).toBe(mapping);
    expect(env(named(out["spec"].initContainers, "ephemera-router-init"))["EPHEMERA_ROUTER_PORTS"]).toBe(mapping);
    expect(out["metadata"].annotations["kubectl.kubernetes.io/default-container"]).toBe("web");
  });

  it("given an app port in the router's range, then its listener skips it and the health port", () => {
    const pod = deploymentPod({ ...asked }, [{ name: "web", image: "w:1", ports: [{ containerPort: 15001 }, { containerPort: 80 }, { containerPort: 81 }] }]);
    expect(decide(pod, "shop")).toMatchObject({ ports: [{ app: 15001, listen: 15000 }, { app: 80, listen: 15002 }, { app: 81, listen: 15003 }] });
  });
});

describe("the workload", () => {
  const ownedBy = (kind: string, name: string, labels: Record<string, string> = {}): Pod => ({
    metadata: { name: `${name}-0`, namespace: "shop", labels, annotations: { ...asked }, ownerReferences: [{ kind, name, controller: true }] },
    spec: { containers: [web] },
  });
  const workload = (pod: Pod) => (decide(pod, "shop") as { workload?: string }).workload;

  it("given a StatefulSet's pod, then the StatefulSet by its name", () => {
    expect(workload(ownedBy("StatefulSet", "ledger", { "controller-revision-hash": "ledger-5f7c" }))).toBe("StatefulSet/shop/ledger");
  });

  it("given an Argo Rollout's pod (a ReplicaSet with rollouts-pod-template-hash), then the Rollout", () => {
    expect(workload(ownedBy("ReplicaSet", "cart-6c8f9d", { "rollouts-pod-template-hash": "6c8f9d" }))).toBe("Rollout/shop/cart");
  });

  it("given a pod of a bare ReplicaSet (its name not ending in the hash), a Job or a DaemonSet, then not injected: only forked kinds are routed", () => {
    for (const [kind, name] of [["ReplicaSet", "plain"], ["Job", "migrate"], ["DaemonSet", "agent"]] as const) {
      expect(decide(ownedBy(kind, name, { "pod-template-hash": "abc12" }), "shop")).toEqual({
        inject: false, reason: "no-workload",
        warning: `ephemera-router not injected into pod "shop/${name}-0": it belongs to ${kind} ${name}, and only Deployment, Rollout, StatefulSet are forked and routed (set the annotation sidecar.ephemera.dev/workload: Kind/name to name one)`,
      });
    }
  });

  it("given the annotation sidecar.ephemera.dev/workload, then it wins, in the pod's namespace", () => {
    const pod = ownedBy("ReplicaSet", "orders-7d9c5f6b8", { "pod-template-hash": "7d9c5f6b8" });
    pod.metadata!.annotations!["sidecar.ephemera.dev/workload"] = "Rollout/orders-v2";
    expect(workload(pod)).toBe("Rollout/shop/orders-v2");
  });

  it("given a malformed workload annotation, or one naming a kind never routed, then not injected, the warning naming the annotation and its form", () => {
    const pod = ownedBy("StatefulSet", "ledger");
    pod.metadata!.annotations!["sidecar.ephemera.dev/workload"] = "Job/ledger";
    expect(decide(pod, "shop")).toMatchObject({ inject: false, reason: "no-workload" });
    pod.metadata!.annotations!["sidecar.ephemera.dev/workload"] = "ledger";
    expect(decide(pod, "shop")).toMatchObject({
      inject: false, reason: "no-workload", warning: expect.stringContaining('annotation sidecar.ephemera.dev/workload must be Kind/name with Kind one of Deployment, Rollout, StatefulSet (e.g. Deployment/orders), not "ledger"'),
    });
  });

  it("given no namespace in the object, then the one the options give (the AdmissionReview's)", () => {
    const pod = deploymentPod({ ...asked }, [web]);
    delete pod.metadata!.namespace;
    expect(env(named(apply(pod, { ...options, namespace: "team-a" })["spec"].containers, "ephemera-router"))["EPHEMERA_ROUTER_WORKLOAD"]).toBe("Deployment/team-a/orders");
  });
});

describe("options", () => {
  it("given a token Secret, then the router reads EPHEMERA_TOKEN from it, optionally", () => {
    const out = apply(deploymentPod({ ...asked }, [web]), { ...options, tokenSecret: { name: "ephemera-routes-token", key: "token" } });
    expect(env(named(out["spec"].containers, "ephemera-router"))["EPHEMERA_TOKEN"]).toEqual({ secretKeyRef: { name: "ephemera-routes-token", key: "token", optional: true } });
  });
});
