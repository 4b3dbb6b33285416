// Valid files: the fixtures validate, become the expected protos, and survive the trip
// through proto and back; the helpers other packages build on.
import * as pb from "@ephemera/proto";
import { ValidationError } from "@ephemera/kit";
import { clone, loadFixture, violationsOf } from "./fixtures.testkit.js";
import {
  canonicalJson, checkSandboxAgainstPlugins, parsePluginRef, pluginDigest, pluginToDoc, pluginViolations, sandboxToDoc,
  stepDependencies, stepEnvName, validatePlugin, validateSandbox,
} from "./validate.js";

const PLUGINS = ["orders-db/plugin.yaml", "vault-db/plugin.yaml", "sqs-queue/plugin.yaml"];

describe("valid plugin files", () => {
  it.each(PLUGINS)("%s validates and round-trips through the proto", async (file) => {
    const doc = await loadFixture(file);
    const plugin = validatePlugin(doc);
    // What the sandbox service receives over gRPC validates the same way.
    const again = validatePlugin(pluginToDoc(pb.ResourcePlugin.decode(pb.ResourcePlugin.encode(plugin).finish())));
    expect(again).toEqual(plugin);
    expect(pluginDigest(again.spec as pb.ResourcePluginSpec)).toBe(pluginDigest(plugin.spec as pb.ResourcePluginSpec));
  });

  it("keeps every construct of the orders-db plugin", async () => {
    const plugin = validatePlugin(await loadFixture("orders-db/plugin.yaml"));
    const spec = plugin.spec as pb.ResourcePluginSpec;
    expect(plugin.name).toBe("orders-db@1.2.0");
    expect(spec.create.map((s) => s.name)).toEqual(["provision", "seed-a", "seed-b", "verify"]);
    const [provision, seedA, seedB] = spec.create as [pb.Step, pb.Step, pb.Step];
    expect(provision.inputs[0]).toEqual({ name: "dbname", valueFromSandbox: true, valueFromStep: undefined, as: undefined, type: "" });
    expect(provision.inputs[1]?.as).toEqual({ env: "OWNER", path: "" });
    expect(provision.outputs.map((o) => o.valueFromPath)).toEqual(["/outputs/host", "/tmp/dsn"]);
    expect(provision.script).toMatch(/^#!\/usr\/bin\/env bash\n/);
    expect(provision.timeout).toBe("5m");
    expect(provision.retries).toBe(2);
    expect(seedA.inputs[0]?.as).toEqual({ env: "", path: "/work/dsn" });
    expect(seedB.inputs[0]?.as).toEqual({ env: "DSN", path: "/work/dsn" });
    expect(seedB.retries).toBeUndefined();
    expect(spec.delete[0]?.inputs[0]?.valueFromStep).toEqual({ name: "provision", output: "dsn" });
  });

  it("accepts an overlay embedded from a file with secrets, volumes and annotations", async () => {
    const plugin = validatePlugin(await loadFixture("vault-db/plugin.yaml"));
    const overlay = plugin.spec?.runner?.podTemplateOverlay ?? "";
    expect(overlay).toContain("secretKeyRef");
    expect(overlay).toContain("vault.hashicorp.com/agent-inject");
  });

  it("substitutes variables inside an inline overlay", async () => {
    const plugin = validatePlugin(await loadFixture("sqs-queue/plugin.yaml"));
    expect(plugin.spec?.runner?.podTemplateOverlay).toContain("serviceAccountName: sqs-runner");
    expect(plugin.spec?.runner?.podTemplateOverlay).toContain('"arn:aws:iam::123456789012:role/sqs"');
  });
});

describe("valid sandbox files", () => {
  it("validates every field and turns scalar params and labels into strings", async () => {
    const sandbox = validateSandbox(await loadFixture("sandboxes/feature.yaml"));
    expect(sandbox.name).toBe("feature-42");
    const spec = sandbox.spec as pb.SandboxSpec;
    expect(spec.labels).toEqual({ team: "shop", pr: "42", priority: "2" });
    expect(spec.ttl).toEqual({ duration: "2d", offsetFrom: "updatedAt" });
    expect(spec.resources[0]?.params).toEqual({ dbname: "orders", port: "5432" });
    expect(spec.resources[1]?.params).toEqual({ "queue-name": "orders-events", fifo: "true" });
    expect(spec.forks[0]?.customizations?.images[0]).toEqual({ image: "registry.example/orders:pr-42", container: "orders" });
    expect(spec.forks[0]?.customizations?.env[3]).toMatchObject({ name: "LEGACY_FLAG", operation: "delete" });
    expect(spec.local[0]?.mappings).toEqual([{ port: 8080, toLocal: "localhost:8080" }]);
    expect(spec.defaultRouteGroup?.endpoints).toEqual([{ name: "web", target: "http://orders.shop.svc:8080" }]);
    expect(validateSandbox(sandboxToDoc(sandbox))).toEqual(sandbox);
  });

  it("checks outputKeys against the plugins the resources resolve to", async () => {
    const sandbox = validateSandbox(await loadFixture("sandboxes/feature.yaml"));
    const plugins = {
      "orders-db": validatePlugin(await loadFixture("orders-db/plugin.yaml")).spec,
      queue: validatePlugin(await loadFixture("sqs-queue/plugin.yaml")).spec,
    } as Record<string, pb.ResourcePluginSpec | undefined>;
    expect(checkSandboxAgainstPlugins(sandbox, (r) => plugins[r])).toEqual([]);

    const env = sandbox.spec?.forks[0]?.customizations?.env ?? [];
    (env[0]?.valueFrom?.resource as pb.ResourceOutputRef).outputKey = "provision.password";
    (env[1]?.valueFrom?.resource as pb.ResourceOutputRef).outputKey = "delete-queue.queue-url";
    const field = (i: number) => `spec.forks[0].customizations.env[${i}].valueFrom.resource.outputKey`;
    expect(checkSandboxAgainstPlugins(sandbox, (r) => plugins[r])).toEqual([
      { field: field(0), rule: "undeclared-output", description: expect.stringContaining('declares no output "password" (outputs: host, dsn)') },
      { field: field(1), rule: "unknown-step", description: expect.stringContaining("it is a delete step") },
    ]);
  });

  it("treats a param the plugin reads but the sandbox leaves out as unset, not as an error", async () => {
    // orders-db reads `owner-role`, sqs-queue `attributes` and `tags`; this sandbox sets none of them.
    const sandbox = validateSandbox({
      name: "s",
      spec: { cluster: "local", resources: [{ name: "db", plugin: "orders-db" }, { name: "q", plugin: "sqs-queue", params: { "queue-name": "q" } }] },
    });
    const plugins: Record<string, pb.ResourcePluginSpec | undefined> = {
      db: validatePlugin(await loadFixture("orders-db/plugin.yaml")).spec,
      q: validatePlugin(await loadFixture("sqs-queue/plugin.yaml")).spec,
    };
    expect(checkSandboxAgainstPlugins(sandbox, (r) => plugins[r])).toEqual([]);
  });
});

describe("violations", () => {
  it("are all reported at once, in the order of the file", () => {
    const violations = violationsOf(() => validatePlugin({
      name: "bad name",
      spec: { runner: {}, create: [{ name: "a.b", script: "echo" }], extra: 1 },
    }));
    expect(violations.map((v) => [v.field, v.rule])).toEqual([
      ["name", "name-format"],
      ["spec.runner.image", "required"],
      ["spec.create[0].name", "name-format"],
      ["spec.create[0].script", "script-shebang"],
      ["spec.extra", "unknown-field"],
    ]);
  });

  it("are the same for the file and for the proto the server receives", async () => {
    const original = await loadFixture("orders-db/plugin.yaml");
    // The same two mistakes, once in the file and once in a proto sent by a client that skipped the CLI.
    const file = clone(original) as { spec: { create: { script: string; inputs: { valueFromStep: { output: string } }[] }[] } };
    (file.spec.create[0] as { script: string }).script = "";
    (file.spec.create[3]?.inputs[0] as { valueFromStep: { output: string } }).valueFromStep.output = "rows";
    const proto = validatePlugin(original);
    const create = (proto.spec as pb.ResourcePluginSpec).create as [pb.Step, pb.Step, pb.Step, pb.Step];
    create[0].script = "";
    (create[3].inputs[0]?.valueFromStep as pb.StepRef).output = "rows";

    const fromFile = pluginViolations(file);
    expect(fromFile.map((v) => [v.field, v.rule])).toEqual([
      ["spec.create[0].script", "required"],
      ["spec.create[3].inputs[0].valueFromStep.output", "undeclared-output"],
    ]);
    expect(pluginViolations(pluginToDoc(proto))).toEqual(fromFile);
  });

  it("name the whole document when it is not a mapping", () => {
    expect(violationsOf(() => validateSandbox("hello"))).toEqual([
      { field: "(document)", rule: "type", description: "a sandbox file is a mapping with name and spec, not string" },
    ]);
    expect(violationsOf(() => validatePlugin(null))[0]?.field).toBe("(document)");
  });
});

describe("parsePluginRef", () => {
  it.each([
    ["hello-db", { name: "hello-db", latest: false }],
    ["hello-db@1.2.3", { name: "hello-db", version: "1.2.3", latest: false }],
    ["hello-db@v1.2.3-rc.1", { name: "hello-db", version: "1.2.3-rc.1", latest: false }],
    ["hello-db@1.2", { name: "hello-db", version: "1.2.0", latest: false }],
    ["hello-db@v2", { name: "hello-db", version: "2.0.0", latest: false }],
    ["hello-db@latest", { name: "hello-db", latest: true }],
  ])("%s", (ref, expected) => {
    expect(parsePluginRef(ref)).toEqual(expected);
  });

  it.each([
    ["hello_db", "name-format"],
    ["-db", "name-format"],
    ["db-", "name-format"],
    ["", "name-format"],
    ["db@", "version-format"],
    ["db@1.2.3.4", "version-format"],
    ["db@1.0.0+build", "version-format"],
    ["db@ 1.0.0", "version-format"],
    ["db@01.0.0", "version-format"],
    [`${"a".repeat(254)}@1.0.0`, "too-long"],
  ])("rejects %j", (ref, rule) => {
    const err = (() => {
      try {
        parsePluginRef(ref);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).violations).toEqual([{ field: "name", rule, description: expect.any(String) }]);
  });
});

describe("helpers", () => {
  it("stepEnvName upper-cases and turns '-' into '_'", () => {
    expect(stepEnvName("db-name")).toBe("DB_NAME");
    expect(stepEnvName("queueUrl")).toBe("QUEUEURL");
    expect(stepEnvName("a_b-c")).toBe("A_B_C");
  });

  it("stepDependencies lists same-phase edges only", async () => {
    const spec = validatePlugin(await loadFixture("orders-db/plugin.yaml")).spec as pb.ResourcePluginSpec;
    expect(stepDependencies(spec.create)).toEqual(new Map([
      ["provision", []],
      ["seed-a", ["provision"]],
      ["seed-b", ["provision"]],
      ["verify", ["seed-a", "provision"]],
    ]));
    // deprovision reads provision, a create step: not an edge of the delete phase.
    expect(stepDependencies(spec.delete)).toEqual(new Map([["deprovision", []]]));
  });

  it("pluginDigest ignores key order and changes with the spec", async () => {
    const doc = await loadFixture("orders-db/plugin.yaml");
    const spec = validatePlugin(doc).spec as pb.ResourcePluginSpec;
    const digest = pluginDigest(spec);
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    expect(pluginDigest(validatePlugin(reverseKeys(doc)).spec as pb.ResourcePluginSpec)).toBe(digest);
    expect(pluginDigest({ ...spec, description: "changed" })).not.toBe(digest);
    expect(canonicalJson({ b: 1, a: { d: [2, { f: 1, e: 0 }], c: 3 } })).toBe('{"a":{"c":3,"d":[2,{"e":0,"f":1}]},"b":1}');
  });
});

function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(Object.entries(value).reverse().map(([k, v]) => [k, reverseKeys(v)]));
}
