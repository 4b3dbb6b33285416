// One invalid file per rule: each must fail with exactly one violation, at the field the
// author has to change, under the rule's stable code.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { clone, violationsOf } from "./fixtures.testkit.js";
import { validateJob, validateJobRunnerGroup, validatePlugin, validateRouteGroup, validateSandbox } from "./validate.js";
import { RULES } from "./violations.js";
import {
  baseJob, baseJobRunnerGroup, basePlugin, baseRouteGroup, baseSandbox, create, jobRows, jobRunnerGroupRows, overlay, pluginRows, routeGroupRows,
  sandboxRows, type Doc,
} from "./invalid.testkit.js";

describe("the base files are valid", () => {
  it("plugin", () => expect(() => validatePlugin(basePlugin())).not.toThrow());
  it("sandbox", () => expect(() => validateSandbox(baseSandbox())).not.toThrow());
  it("route group", () => expect(() => validateRouteGroup(baseRouteGroup())).not.toThrow());
  it("job runner group", () => expect(() => validateJobRunnerGroup(baseJobRunnerGroup())).not.toThrow());
  it("job", () => expect(() => validateJob(baseJob())).not.toThrow());
});

describe.each([
  ["plugin", pluginRows, basePlugin, validatePlugin],
  ["sandbox", sandboxRows, baseSandbox, validateSandbox],
  ["route group", routeGroupRows, baseRouteGroup, validateRouteGroup],
  ["job runner group", jobRunnerGroupRows, baseJobRunnerGroup, validateJobRunnerGroup],
  ["job", jobRows, baseJob, validateJob],
] as const)("invalid %s files", (_kind, rows, base, validate) => {
  // Rows as objects: jest would take a fifth parameter for a `done` callback.
  it.each(rows.map((row) => ({ what: row[0], row })))("$what", ({ row: [, edit, field, rule, says] }) => {
    const doc = clone(base());
    edit(doc);
    const violations = violationsOf(() => validate(doc));
    expect(violations.map((v) => ({ field: v.field, rule: v.rule }))).toEqual([{ field, rule }]);
    expect(violations[0]?.description).toContain(says ?? "");
    expect(violations[0]?.description.length).toBeGreaterThan(5);
  });
});

describe("the rules", () => {
  it("each have a row in these tables", () => {
    const covered = new Set([...pluginRows, ...sandboxRows, ...routeGroupRows, ...jobRunnerGroupRows, ...jobRows].map((row) => row[3]));
    expect(RULES.filter((rule) => !covered.has(rule))).toEqual([]);
  });

  it("are each explained in docs/plugins.md", () => {
    const docs = readFileSync(join(__dirname, "..", "..", "..", "docs", "plugins.md"), "utf8");
    expect(RULES.filter((rule) => !docs.includes(`\`${rule}\``))).toEqual([]);
  });
});

describe("accepted variants", () => {
  it.each([
    ["ttl in seconds (ours)", (d: Doc) => { d.spec.ttl.duration = "90s"; }],
    ["ttl in weeks, default offset", (d: Doc) => { d.spec.ttl = { duration: "1w" }; }],
    ["ttl of exactly 365 days", (d: Doc) => { d.spec.ttl.duration = "365d"; }],
    ["ttl of 365 days in seconds", (d: Doc) => { d.spec.ttl.duration = "31536000s"; }],
    ["ttl of 365 days in hours", (d: Doc) => { d.spec.ttl.duration = "8760h"; }],
    ["ttl of 52 weeks", (d: Doc) => { d.spec.ttl.duration = "52w"; }],
    ["params and labels as numbers and booleans", (d: Doc) => { d.spec.resources[0].params = { port: 5432, tls: false }; d.spec.labels = { pr: 12 }; }],
    ["a bare plugin name and @latest", (d: Doc) => { d.spec.resources.push({ name: "q", plugin: "queue" }, { name: "r", plugin: "queue@latest" }); }],
    ["env removed by operation delete", (d: Doc) => { d.spec.forks[0].customizations.env.push({ name: "OLD", operation: "delete" }); }],
    ["the same env var in two containers", (d: Doc) => { d.spec.forks[0].customizations.env.push({ name: "DB_HOST", value: "x", container: "sidecar" }); }],
    ["a fork of an Argo Rollout", (d: Doc) => { d.spec.forks[0].forkOf.kind = "Rollout"; }],
    ["a fork of a StatefulSet (ours)", (d: Doc) => { d.spec.forks[0].forkOf.kind = "StatefulSet"; }],
    ["local and virtual workloads of any kind (upstream names none)", (d: Doc) => {
      d.spec.local[0].from.kind = "DaemonSet";
      d.spec.virtual = [{ name: "legacy", workload: { kind: "ReplicaSet", namespace: "shop", name: "legacy" } }];
    }],
    ["a fork expression with text around its fields, spaces and trim markers", (d: Doc) => {
      d.spec.forks.push({ forkOf: { kind: "Deployment", namespace: "shop", name: "cart" } });
      const forkOf = { kind: "Deployment", namespace: "shop", name: "cart" };
      const expression = "http://{{.Service.Host}}:{{- .Service.Port }}/api";
      d.spec.forks[0].customizations.env.push({ name: "CART_URL", valueFrom: { fork: { forkOf, expression } } });
    }],
  ])("sandbox: %s", (_what, edit) => {
    const doc = clone(baseSandbox());
    edit(doc);
    expect(() => validateSandbox(doc)).not.toThrow();
  });

  it.each([
    ["a delete step reading a create output", (d: Doc) => { d.spec.delete[0].inputs[0].as = { path: "/work/host" }; }],
    ["an input file that is also an output file", (d: Doc) => { create(1)(d).outputs[0].valueFromPath = "/work/host"; }],
    ["overlay keeping runner image, namespace and Never", overlay("metadata:\n  namespace: ephemera\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: alpine:3\n")],
    ["an empty overlay", overlay("# nothing yet\n")],
    ["no delete phase", (d: Doc) => { delete d.spec.delete; }],
    ["timeout and retries (ours)", (d: Doc) => { create(0)(d).timeout = "90s"; create(0)(d).retries = 0; }],
    ["a 1000h timeout", (d: Doc) => { create(0)(d).timeout = "1000h"; }],
    ["a timeout of exactly 365 days in hours", (d: Doc) => { create(0)(d).timeout = "8760h"; }],
    ["a timeout of 365 days in seconds", (d: Doc) => { create(0)(d).timeout = "31536000s"; }],
    ["an output description (upstream)", (d: Doc) => { create(0)(d).outputs[0].description = "the host"; }],
    ["a version given as v1.2", (d: Doc) => { d.name = "hello-db@v1.2"; }],
  ])("plugin: %s", (_what, edit) => {
    const doc = clone(basePlugin());
    edit(doc);
    expect(() => validatePlugin(doc)).not.toThrow();
  });
});
