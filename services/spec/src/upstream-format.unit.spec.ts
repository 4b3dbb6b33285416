// Files written the way Signadot users write them: every construct of the upstream format
// validates, and reaches the proto message (and back) without a field dropped.
import type * as pb from "@ephemera/proto";
import { clone, loadFixture, violationsOf } from "./fixtures.testkit.js";
import { checkSandboxAgainstPlugins, pluginToDoc, sandboxToDoc, validatePlugin, validateSandbox } from "./validate.js";

describe("an upstream-format plugin", () => {
  it("validates with a long description and typed inputs and outputs, and keeps them", async () => {
    const warnings: string[] = [];
    const plugin = validatePlugin(await loadFixture("upstream-format/plugin.yaml"), (w) => warnings.push(w));
    const spec = plugin.spec as pb.ResourcePluginSpec;
    expect(Buffer.byteLength(spec.description)).toBeGreaterThan(255);
    const provision = spec.create[0] as pb.Step;
    expect(provision.inputs.map((i) => i.type)).toEqual(["string", "string"]);
    expect(provision.outputs.map((o) => o.type)).toEqual(["string", "string"]);
    expect(Buffer.byteLength(provision.outputs[0]?.description ?? "")).toBeGreaterThan(255);
    expect(pluginToDoc(plugin)).toMatchObject({ spec: { create: [{ inputs: [{ type: "string" }, { type: "string" }] }] } });
  });

  it("ignores a stray top-level version with a warning naming it", async () => {
    const warnings: string[] = [];
    const plugin = validatePlugin(await loadFixture("upstream-format/plugin.yaml"), (w) => warnings.push(w));
    expect(plugin.name).toBe("ledger-db@2.1.0");
    expect(warnings).toEqual([expect.stringContaining('"version: 2.1.0" is ignored')]);
  });

  it("still rejects a misspelt field next to them", async () => {
    const doc = clone(await loadFixture("upstream-format/plugin.yaml")) as { spec: { create: { inputs: Record<string, unknown>[] }[] } };
    doc.spec.create[0]!.inputs[0]!.typ = "string";
    expect(violationsOf(() => validatePlugin(doc))).toEqual([
      expect.objectContaining({ field: "spec.create[0].inputs[0].typ", rule: "unknown-field" }),
    ]);
  });
});

describe("an upstream-format sandbox", () => {
  it("validates with every construct, and the message carries each one back", async () => {
    const sandbox = validateSandbox(await loadFixture("upstream-format/sandbox.yaml"));
    const spec = sandbox.spec as pb.SandboxSpec;
    const [api, worker] = spec.forks as [pb.Fork, pb.Fork];
    expect(api.name).toBe("ledger-api");
    expect(api.endpoints).toEqual([{ name: "api-http", port: 8080, protocol: "http" }]);
    expect(api.customizations?.patch?.type).toBe("strategic");
    expect(api.customizations?.env.map((e) => e.container)).toEqual(["api", "", ""]);
    expect(api.customizations?.env[1]?.valueFrom?.secret).toEqual({ name: "ledger-api-token", key: "token", optional: undefined });
    expect(api.customizations?.env[2]?.valueFrom?.configMap).toEqual({ name: "ledger-flags", key: "flags", optional: true });
    expect(worker.customizations?.env[0]?.valueFrom?.fork?.forkOf).toEqual({ kind: "Deployment", namespace: "ledger", name: "api" });
    expect(worker.customizations?.patch?.type).toBe("json");
    const local = spec.local[0] as pb.Local;
    expect(local.env[0]?.valueFrom?.resource).toEqual({ name: "ledgerdb", outputKey: "provision.dsn" });
    expect(local.files[0]).toMatchObject({ path: "/tmp/ledger/host", valueFrom: { resource: { name: "ledgerdb", outputKey: "provision.host" } } });
    expect(spec.virtual).toEqual([{ name: "ledger-reports", workload: { kind: "Deployment", namespace: "ledger", name: "reports" } }]);
    expect(spec.endpoints).toEqual([{ name: "ui", host: "ui.ledger.svc", port: 3000, protocol: "http" }]);
    expect(spec.ttl).toEqual({ duration: "3d", offsetFrom: "createdAt" });
    expect(spec.labels).toEqual({ team: "ledger", pr: "7" });
    // The message, as a document, validates again to the same message: nothing was dropped.
    expect(validateSandbox(sandboxToDoc(sandbox))).toEqual(sandbox);
  });

  it("accepts fields written null, as upstream's own output has them", () => {
    const doc = {
      name: "nulls", spec: {
        cluster: "local", endpoints: null, labels: { reqid: "yes" },
        forks: [{ forkOf: { kind: "Deployment", namespace: "shop", name: "web" }, endpoints: null, customizations: { env: null, images: null } }],
      },
    };
    expect(validateSandbox(doc).spec?.forks[0]?.forkOf?.name).toBe("web");
  });

  it("checks outputKeys of local env and files against the plugin version, with field paths", async () => {
    const plugin = validatePlugin(await loadFixture("upstream-format/plugin.yaml"));
    const sandbox = validateSandbox(await loadFixture("upstream-format/sandbox.yaml"));
    expect(checkSandboxAgainstPlugins(sandbox, () => plugin.spec)).toEqual([]);
    const local = sandbox.spec?.local[0] as pb.Local;
    local.env[0]!.valueFrom!.resource!.outputKey = "provision.port";
    local.files[0]!.valueFrom!.resource!.outputKey = "drop.host";
    expect(checkSandboxAgainstPlugins(sandbox, () => plugin.spec)).toEqual([
      expect.objectContaining({ field: "spec.local[0].env[0].valueFrom.resource.outputKey", rule: "undeclared-output" }),
      expect.objectContaining({ field: "spec.local[0].files[0].valueFrom.resource.outputKey", rule: "unknown-step", description: expect.stringContaining("delete step") }),
    ]);
  });
});
