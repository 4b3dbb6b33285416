// The VirtualServices the fork reconciler writes under EPHEMERA_ROUTING_MESH=istio,
// validated against Istio's own schema for networking.istio.io/v1 VirtualService: the
// OpenAPI schema of the CRD Istio 1.29.2 installs (manifests/charts/base/files/
// crd-all.gen.yaml), as @kubernetes-models/istio compiles it into a JSON-schema validator
// (ajv). The CEL rules of the CRD (x-kubernetes-validations) are the API server's to run
// and are not checked here. A broken object is shown to fail, so a pass means something.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { buildVirtualService } from "../../services/runner/src/forks/istio.js";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const ROOT = join(__dirname, "..", "..");

const validate = (objects: Obj[]) => {
  const yaml = objects.map((o) => stringify(o)).join("---\n");
  const r = spawnSync(process.execPath, [join(__dirname, "validate.mjs"), "-"], { input: yaml, encoding: "utf8", cwd: ROOT });
  if (r.status !== 0) throw new Error(`validate.mjs exited ${r.status}: ${r.stderr}`);
  return r.stdout.trim().split("\n").map((l) => JSON.parse(l) as { kind: string; apiVersion: string; name: string; ok: boolean; error?: string });
};

const orders = { name: "orders", namespace: "shop", ports: [8080] };
const fork = (routingKey: string, ports = [8080]) => ({ routingKey, service: `orders-${routingKey}`, ports });

describe("ephemera's VirtualServices against Istio's schema", () => {
  it("checks against the CRD of Istio 1.29.2", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "node_modules/@kubernetes-models/istio/package.json"), "utf8")) as Obj;
    expect(pkg["version"]).toBe("3.0.1");
    expect(pkg["crd-generate"].input).toContain("https://raw.githubusercontent.com/istio/istio/1.29.2/manifests/charts/base/files/crd-all.gen.yaml");
  });

  it("validates what the builder makes: one sandbox, several, a Service with several ports, another cluster domain", () => {
    const built = [
      buildVirtualService(orders, [fork("k3fd0c2a91b7")]),
      buildVirtualService(orders, [fork("aa0000000001"), fork("bb0000000002"), fork("cc0000000003")]),
      buildVirtualService({ ...orders, name: "cart", ports: [8080, 9090] }, [fork("aa0000000001", [8080, 9090]), fork("bb0000000002", [9090])]),
      buildVirtualService({ ...orders, ports: [] }, [fork("aa0000000001", [])], "example.internal"),
    ] as Obj[];
    const results = validate(built);
    expect(results.map((r) => [r.apiVersion, r.kind, r.name])).toEqual(built.map((b) => ["networking.istio.io/v1", "VirtualService", b["metadata"].name]));
    expect(results.filter((r) => !r.ok)).toEqual([]);
  });

  it("refuses a VirtualService Istio would refuse, naming the field", () => {
    const good = buildVirtualService(orders, [fork("k3fd0c2a91b7")]) as Obj;
    const broken = (name: string, change: (spec: Obj) => void) => {
      const vs = structuredClone(good);
      vs["metadata"].name = name;
      change(vs["spec"]);
      return vs;
    };
    const results = validate([
      // A header matched two ways at once: StringMatch is one of exact, prefix, regex.
      broken("two-ways", (spec) => { spec.http[0].match[0].headers.baggage.exact = "sd-routing-key=k3fd0c2a91b7"; }),
      broken("no-host", (spec) => { delete spec.http[0].route[0].destination.host; }),
      broken("port-text", (spec) => { spec.http[1].route[0].destination.port.number = "8080"; }),
      broken("hosts-not-list", (spec) => { spec.hosts = "orders"; }),
    ]);
    expect(results.map((r) => [r.name, r.ok])).toEqual([["two-ways", false], ["no-host", false], ["port-text", false], ["hosts-not-list", false]]);
    expect(results[0]!.error).toContain("/spec/http/0/match/0/headers/baggage");
    expect(results[1]!.error).toContain("/spec/http/0/route/0/destination must have required property host");
    expect(results[2]!.error).toContain("/spec/http/1/route/0/destination/port/number must be integer");
    expect(results[3]!.error).toContain("/spec/hosts must be array");
  });
});
