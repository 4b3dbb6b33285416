// patchManifests, given manifests of several kinds, then the pod templates that ask are
// injected for the workload they belong to, and every other one is said to be left alone.
import { parseAllDocuments } from "yaml";
import { patchManifests } from "./manifests.js";

type Rec = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const options = { image: "ephemera/router:0.1.0", routes: "routeserver.ephemera-system.svc:7777" };
const template = (name: string) => ({
  metadata: { annotations: { "sidecar.ephemera.dev/inject": "true" } },
  spec: { containers: [{ name, image: `${name}:1`, ports: [{ containerPort: 8080 }] }] },
});
const docs = (yaml: string) => parseAllDocuments(yaml).map((d) => d.toJSON() as Rec);
const containers = (t: Rec) => (t["spec"].containers as Rec[]).map((c) => c["name"]);

describe("patchManifests", () => {
  it("given a List of a Rollout, a DaemonSet and a CronJob, then only the Rollout's template is injected, the others said why not", () => {
    const list = {
      apiVersion: "v1", kind: "List",
      items: [
        { apiVersion: "argoproj.io/v1alpha1", kind: "Rollout", metadata: { name: "cart" }, spec: { template: template("cart") } },
        { apiVersion: "apps/v1", kind: "DaemonSet", metadata: { name: "agent", namespace: "infra" }, spec: { template: template("agent") } },
        { apiVersion: "batch/v1", kind: "CronJob", metadata: { name: "report" }, spec: { jobTemplate: { spec: { template: template("report") } } } },
      ],
    };
    const out = patchManifests(JSON.stringify(list), { ...options, namespace: "shop" });
    const [rollout, daemonSet, cronJob] = docs(out.yaml)[0]!["items"] as Rec[];
    expect(containers(rollout!["spec"].template)).toEqual(["cart", "ephemera-router"]);
    expect(rollout!["spec"].template.spec.containers[1].env[0]).toEqual({ name: "EPHEMERA_ROUTER_WORKLOAD", value: "Rollout/shop/cart" });
    expect(containers(daemonSet!["spec"].template)).toEqual(["agent"]);
    expect(containers(cronJob!["spec"].jobTemplate.spec.template)).toEqual(["report"]);
    expect(out.notes).toEqual([
      "Rollout shop/cart: injected (workload Rollout/shop/cart, ports 8080→15000)",
      expect.stringMatching(/^DaemonSet infra\/agent: left as it is: ephemera-router not injected into pod "infra\/agent-\*": it belongs to DaemonSet agent, and only Deployment, Rollout, StatefulSet are forked and routed/),
      expect.stringMatching(/^CronJob shop\/report: left as it is: .*it belongs to CronJob report/),
    ]);
  });

  it("given a bare Pod that names its workload, then injected for it; given documents that are no objects, then refused naming the document", () => {
    const pod = { apiVersion: "v1", kind: "Pod", metadata: { name: "debug", namespace: "shop", annotations: { "sidecar.ephemera.dev/inject": "true", "sidecar.ephemera.dev/workload": "Deployment/orders" } }, spec: template("debug").spec };
    const out = patchManifests(`${JSON.stringify(pod)}\n---\n# only a comment\n`, options);
    expect(containers(docs(out.yaml)[0]!)).toEqual(["debug", "ephemera-router"]);
    expect(out.notes).toEqual(["Pod shop/debug: injected (workload Deployment/shop/orders, ports 8080→15000)"]);
    expect(() => patchManifests("- a\n- b\n", options)).toThrow("document 1: a manifest must be a mapping with apiVersion and kind");
  });
});
