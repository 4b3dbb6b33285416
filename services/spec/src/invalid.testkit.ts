// The base plugin and sandbox documents and the table of invalid files, one row per rule:
// the spec's own tests and the sandbox service's API tests (same rules over gRPC) share it.
const SH = "#!/bin/sh\necho ok\n";

/* eslint-disable @typescript-eslint/no-explicit-any -- rows edit arbitrary parts of a document */
export type Doc = any;

export const basePlugin = (): Doc => ({
  name: "hello-db@1.0.0",
  spec: {
    description: "a database per sandbox",
    runner: { image: "alpine:3", namespace: "ephemera", podTemplateOverlay: "spec:\n  serviceAccountName: db\n" },
    create: [
      {
        name: "provision",
        inputs: [{ name: "dbname", valueFromSandbox: true }],
        outputs: [{ name: "host", valueFromPath: "/tmp/host" }],
        script: SH,
      },
      {
        name: "seed",
        inputs: [{ name: "host", valueFromStep: { name: "provision", output: "host" }, as: { env: "HOST", path: "/work/host" } }],
        outputs: [{ name: "rows", valueFromPath: "/outputs/rows" }],
        script: SH,
      },
    ],
    delete: [
      { name: "deprovision", inputs: [{ name: "host", valueFromStep: { name: "provision", output: "host" } }], script: SH },
    ],
  },
});

export const baseSandbox = (): Doc => ({
  name: "feature-x",
  spec: {
    cluster: "local",
    ttl: { duration: "2d", offsetFrom: "createdAt" },
    resources: [{ name: "db", plugin: "hello-db@1.0.0", params: { dbname: "orders" } }],
    forks: [{
      forkOf: { kind: "Deployment", namespace: "shop", name: "orders" },
      customizations: {
        images: [{ image: "orders:pr-1", container: "orders" }],
        env: [{ name: "DB_HOST", valueFrom: { resource: { name: "db", outputKey: "provision.host" } } }],
      },
    }],
    local: [{
      name: "payments-local",
      from: { kind: "Deployment", namespace: "shop", name: "payments" },
      mappings: [{ port: 8080, toLocal: "localhost:8080" }],
    }],
    defaultRouteGroup: { endpoints: [{ name: "web", target: "http://orders.shop.svc:8080" }] },
  },
});

export const overlay = (text: string) => (d: Doc) => { d.spec.runner.podTemplateOverlay = text; };
export const create = (i: number) => (d: Doc) => d.spec.create[i];

export type Row = [what: string, edit: (d: Doc) => void, field: string, rule: string, says?: string];

export const pluginRows: Row[] = [
  ["name missing", (d) => { delete d.name; }, "name", "required"],
  ["name starting with a digit", (d) => { d.name = "1db"; }, "name", "name-format"],
  ["name ending with '-'", (d) => { d.name = "db-"; }, "name", "name-format"],
  ["name over 253 bytes", (d) => { d.name = "a".repeat(254); }, "name", "too-long"],
  ["version not semver", (d) => { d.name = "hello-db@1.x"; }, "name", "version-format"],
  // What YAML's "\uD800" escape gives: UTF-8 cannot carry it, and encoding would rewrite it to U+FFFD.
  ["a lone surrogate in a script", (d) => { create(0)(d).script = "#!/bin/sh\necho \uD800\n"; }, "spec.create[0].script", "utf8", "lone surrogate"],
  ["@latest in a plugin file", (d) => { d.name = "hello-db@latest"; }, "name", "version-format"],
  ["unknown top-level field", (d) => { d.kind = "ResourcePlugin"; }, "kind", "unknown-field"],
  ["misspelt step field", (d) => { create(0)(d).timout = "5m"; }, "spec.create[0].timout", "unknown-field", 'did you mean "timeout"'],
  ["spec missing", (d) => { delete d.spec; }, "spec", "required"],
  ["create not a list", (d) => { d.spec.create = "provision"; }, "spec.create", "type", "must be a list"],
  ["runner missing", (d) => { delete d.spec.runner; }, "spec.runner", "required"],
  ["runner.image missing", (d) => { delete d.spec.runner.image; }, "spec.runner.image", "required"],
  ["runner.image empty", (d) => { d.spec.runner.image = ""; }, "spec.runner.image", "required"],
  ["runner.namespace not a DNS label", (d) => { d.spec.runner.namespace = "Data_NS"; }, "spec.runner.namespace", "name-format"],
  ["step name with a dot", (d) => { create(1)(d).name = "seed.all"; }, "spec.create[1].name", "name-format"],
  ["step name over 63 bytes", (d) => { create(1)(d).name = "s".repeat(64); }, "spec.create[1].name", "too-long"],
  ["step name repeated in the same phase", (d) => { create(1)(d).name = "provision"; }, "spec.create[1].name", "duplicate-step"],
  ["step name repeated across phases", (d) => { d.spec.delete[0].name = "seed"; }, "spec.delete[0].name", "duplicate-step"],
  ["input name with a dot", (d) => { create(1)(d).inputs[0].name = "db.host"; }, "spec.create[1].inputs[0].name", "name-format"],
  ["input name repeated", (d) => { create(0)(d).inputs.push({ name: "dbname", valueFromSandbox: true, as: { path: "/work/db" } }); },
    "spec.create[0].inputs[1].name", "duplicate-input"],
  ["output name repeated", (d) => { create(0)(d).outputs.push({ name: "host", valueFromPath: "/tmp/host2" }); },
    "spec.create[0].outputs[1].name", "duplicate-output"],
  ["output name with a dot", (d) => { create(1)(d).outputs[0].name = "rows.count"; }, "spec.create[1].outputs[0].name", "name-format"],
  ["input without a source", (d) => { create(0)(d).inputs[0] = { name: "dbname" }; }, "spec.create[0].inputs[0]", "input-source"],
  ["input with valueFromSandbox: false only", (d) => { create(0)(d).inputs[0].valueFromSandbox = false; }, "spec.create[0].inputs[0]", "input-source"],
  ["input with both sources", (d) => { create(1)(d).inputs[0].valueFromSandbox = true; }, "spec.create[1].inputs[0]", "input-source"],
  ["valueFromSandbox not a boolean", (d) => { create(0)(d).inputs[0].valueFromSandbox = "yes"; }, "spec.create[0].inputs[0].valueFromSandbox", "type"],
  ["reference to an unknown step", (d) => { create(1)(d).inputs[0].valueFromStep.name = "provison"; },
    "spec.create[1].inputs[0].valueFromStep.name", "unknown-step", "(steps: provision, seed)"],
  ["reference to an undeclared output", (d) => { create(1)(d).inputs[0].valueFromStep.output = "hostname"; },
    "spec.create[1].inputs[0].valueFromStep.output", "undeclared-output", "(outputs: host)"],
  ["reference without output", (d) => { delete create(1)(d).inputs[0].valueFromStep.output; },
    "spec.create[1].inputs[0].valueFromStep.output", "required"],
  ["two steps reading each other", (d) => { create(0)(d).inputs.push({ name: "rows", valueFromStep: { name: "seed", output: "rows" } }); },
    "spec.create[0].inputs[1].valueFromStep.name", "cycle", "provision -> seed -> provision"],
  ["a step reading itself", (d) => { create(1)(d).inputs.push({ name: "rows", valueFromStep: { name: "seed", output: "rows" } }); },
    "spec.create[1].inputs[1].valueFromStep.name", "cycle", "seed -> seed"],
  ["a create step reading a delete step", (d) => {
    d.spec.delete[0].outputs = [{ name: "done", valueFromPath: "/tmp/done" }];
    create(1)(d).inputs.push({ name: "done", valueFromStep: { name: "deprovision", output: "done" } });
  }, "spec.create[1].inputs[1].valueFromStep.name", "create-refers-to-delete"],
  ["env var name not a shell name", (d) => { create(1)(d).inputs[0].as.env = "1HOST"; }, "spec.create[1].inputs[0].as.env", "env-name"],
  ["reserved SIGNADOT_ env var", (d) => { create(1)(d).inputs[0].as.env = "SIGNADOT_SANDBOX_ID"; }, "spec.create[1].inputs[0].as.env", "reserved-env"],
  ["reserved EPHEMERA_ env var", (d) => { create(1)(d).inputs[0].as.env = "EPHEMERA_TOKEN"; }, "spec.create[1].inputs[0].as.env", "reserved-env"],
  ["input whose default env var is reserved", (d) => { create(0)(d).inputs[0].name = "signadot-resource-name"; },
    "spec.create[0].inputs[0].name", "reserved-env"],
  ["two inputs on one env var", (d) => { create(0)(d).inputs.push({ name: "db", valueFromSandbox: true, as: { env: "DBNAME" } }); },
    "spec.create[0].inputs[1].as.env", "duplicate-env"],
  ["two inputs whose default env vars collide", (d) => {
    create(0)(d).inputs = [{ name: "db-name", valueFromSandbox: true }, { name: "db_name", valueFromSandbox: true }];
  }, "spec.create[0].inputs[1].name", "duplicate-env"],
  ["as with neither env nor path", (d) => { create(1)(d).inputs[0].as = {}; }, "spec.create[1].inputs[0].as", "as-empty"],
  ["relative input path", (d) => { create(1)(d).inputs[0].as.path = "work/host"; }, "spec.create[1].inputs[0].as.path", "path-format", "absolute"],
  ["input path with ..", (d) => { create(1)(d).inputs[0].as.path = "/work/../etc/passwd"; }, "spec.create[1].inputs[0].as.path", "path-format", ".."],
  ["input path /", (d) => { create(1)(d).inputs[0].as.path = "/"; }, "spec.create[1].inputs[0].as.path", "path-format", "not '/'"],
  ["input path not normalised", (d) => { create(1)(d).inputs[0].as.path = "/work//host"; }, "spec.create[1].inputs[0].as.path", "path-format", '"/work/host"'],
  ["input path with a trailing /", (d) => { create(1)(d).inputs[0].as.path = "/work/"; }, "spec.create[1].inputs[0].as.path", "path-format", '"/work"'],
  ["two inputs on one path", (d) => { create(0)(d).inputs.push({ name: "owner", valueFromSandbox: true, as: { path: "/tmp/host" } }, { name: "role", valueFromSandbox: true, as: { path: "/tmp/host" } }); },
    "spec.create[0].inputs[2].as.path", "duplicate-path"],
  ["input file directly under /", (d) => { create(1)(d).inputs[0].as.path = "/host"; }, "spec.create[1].inputs[0].as.path", "path-format", "not directly under '/'"],
  ["output file directly under /", (d) => { create(0)(d).outputs[0].valueFromPath = "/value"; }, "spec.create[0].outputs[0].valueFromPath", "path-format", '"/outputs/value"'],
  ["relative output path", (d) => { create(0)(d).outputs[0].valueFromPath = "host"; }, "spec.create[0].outputs[0].valueFromPath", "path-format"],
  ["output without a path", (d) => { delete create(0)(d).outputs[0].valueFromPath; }, "spec.create[0].outputs[0].valueFromPath", "required"],
  ["two outputs on one path", (d) => { create(0)(d).outputs.push({ name: "port", valueFromPath: "/tmp/host" }); },
    "spec.create[0].outputs[1].valueFromPath", "duplicate-path"],
  ["script without #!", (d) => { create(0)(d).script = "echo hello"; }, "spec.create[0].script", "script-shebang"],
  ["script missing", (d) => { delete d.spec.delete[0].script; }, "spec.delete[0].script", "required"],
  ["script over 256 KiB", (d) => { create(0)(d).script = `#!/bin/sh\n${"#".repeat(256 * 1024)}`; }, "spec.create[0].script", "too-long",
    "over the 262144-byte limit"],
  ["overlay over 64 KiB", overlay(`metadata:\n  annotations:\n    big: "${"x".repeat(64 * 1024)}"\n`), "spec.runner.podTemplateOverlay", "too-long",
    "over the 65536-byte limit"],
  ["a spec over 900 KiB in all, each script within its limit", (d) => {
    for (let i = 0; i < 4; i++) d.spec.create.push({ name: `big${i}`, script: `#!/bin/sh\n${"#".repeat(250 * 1024)}` });
  }, "spec", "too-long", "over the 921600-byte limit"],
  ["65 create steps", (d) => {
    for (let i = 0; d.spec.create.length < 65; i++) d.spec.create.push({ name: `extra${i}`, script: "#!/bin/sh\n" });
  }, "spec.create", "too-many", "more than the 64 allowed"],
  ["timeout without a unit", (d) => { create(0)(d).timeout = "600"; }, "spec.create[0].timeout", "timeout-format"],
  ["timeout in words", (d) => { create(0)(d).timeout = "10 minutes"; }, "spec.create[0].timeout", "timeout-format"],
  ["timeout an hour over 365 days", (d) => { create(0)(d).timeout = "8761h"; }, "spec.create[0].timeout", "timeout-range",
    'timeout "8761h" is longer than the 365-day limit'],
  ["timeout a second over 365 days", (d) => { create(0)(d).timeout = "31536001s"; }, "spec.create[0].timeout", "timeout-range", "365-day limit"],
  ["retries above 10", (d) => { create(0)(d).retries = 11; }, "spec.create[0].retries", "retries-range"],
  ["negative retries", (d) => { create(0)(d).retries = -1; }, "spec.create[0].retries", "retries-range"],
  ["fractional retries", (d) => { create(0)(d).retries = 1.5; }, "spec.create[0].retries", "retries-range"],
  ["overlay that is not YAML", overlay("spec: [unclosed"), "spec.runner.podTemplateOverlay", "overlay-yaml"],
  ["overlay that is a list", overlay("- name: main\n"), "spec.runner.podTemplateOverlay", "overlay-shape"],
  ["overlay with a field a pod template lacks", overlay("kind: Pod\nspec: {}\n"), "spec.runner.podTemplateOverlay", "overlay-shape", '"kind"'],
  ["overlay with a misspelt pod spec field", overlay("spec:\n  serviceAcountName: db\n"), "spec.runner.podTemplateOverlay", "overlay-shape", "serviceAcountName"],
  ["overlay container without a name", overlay("spec:\n  containers:\n  - image: x\n"), "spec.runner.podTemplateOverlay", "overlay-shape", "needs a name"],
  ["overlay containers not a list", overlay("spec:\n  containers: {name: main}\n"), "spec.runner.podTemplateOverlay", "overlay-shape"],
  ["overlay with restartPolicy OnFailure", overlay("spec:\n  restartPolicy: OnFailure\n"), "spec.runner.podTemplateOverlay", "overlay-restart-policy"],
  ["overlay changing main's image", overlay("spec:\n  containers:\n  - name: main\n    image: busybox\n"), "spec.runner.podTemplateOverlay", "overlay-image"],
  ["overlay changing the namespace", overlay("metadata:\n  namespace: kube-system\n"), "spec.runner.podTemplateOverlay", "overlay-namespace"],
  ["overlay taking an agent's container name", overlay("spec:\n  initContainers:\n  - name: ephemera-init\n    image: x\n"),
    "spec.runner.podTemplateOverlay", "overlay-reserved-container"],
  ["overlay with a reserved sidecar name", overlay("spec:\n  containers:\n  - name: ephemera-sidecar\n"),
    "spec.runner.podTemplateOverlay", "overlay-reserved-container"],
];

export const sandboxRows: Row[] = [
  ["name missing", (d) => { delete d.name; }, "name", "required"],
  ["name with '_'", (d) => { d.name = "feature_x"; }, "name", "name-format"],
  ["name over 30 bytes", (d) => { d.name = "f".repeat(31); }, "name", "too-long"],
  ["cluster missing", (d) => { delete d.spec.cluster; }, "spec.cluster", "required"],
  ["a lone surrogate in a label value", (d) => { d.spec.labels = { team: "a\uDC00" }; }, "spec.labels.team", "utf8", "lone surrogate"],
  ["cluster with a dot", (d) => { d.spec.cluster = "eu.west"; }, "spec.cluster", "name-format"],
  ["misspelt field", (d) => { d.spec.forks[0].customisations = d.spec.forks[0].customizations; delete d.spec.forks[0].customizations; },
    "spec.forks[0].customisations", "unknown-field", 'did you mean "customizations"'],
  ["labels as a list", (d) => { d.spec.labels = ["a"]; }, "spec.labels", "type"],
  ["label value over 255 bytes", (d) => { d.spec.labels = { team: "t".repeat(256) }; }, "spec.labels.team", "too-long", "256 bytes"],
  ["65 labels", (d) => { d.spec.labels = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`l${i}`, "v"])); }, "spec.labels", "too-many",
    "65 labels, more than the 64 allowed"],
  ["a spec over 256 KiB in all, each param within its limit", (d) => {
    d.spec.resources[0].params = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`p${i}`, "v".repeat(60 * 1024)]));
  }, "spec", "too-long", "over the 262144-byte limit"],
  ["33 resources", (d) => {
    for (let i = 0; d.spec.resources.length < 33; i++) d.spec.resources.push({ name: `r${i}`, plugin: "pg" });
  }, "spec.resources", "too-many", "33 resources"],
  ["ttl in words", (d) => { d.spec.ttl.duration = "2 days"; }, "spec.ttl.duration", "ttl-duration"],
  ["ttl of zero", (d) => { d.spec.ttl.duration = "0d"; }, "spec.ttl.duration", "ttl-duration"],
  ["ttl in years", (d) => { d.spec.ttl.duration = "1y"; }, "spec.ttl.duration", "ttl-duration"],
  ["ttl of 99999999 weeks", (d) => { d.spec.ttl.duration = "99999999w"; }, "spec.ttl.duration", "ttl-duration",
    'duration "99999999w" is longer than the 365-day limit'],
  ["ttl a second over 365 days", (d) => { d.spec.ttl.duration = "31536001s"; }, "spec.ttl.duration", "ttl-duration", "365-day limit"],
  ["ttl of 366 days", (d) => { d.spec.ttl.duration = "366d"; }, "spec.ttl.duration", "ttl-duration", "365-day limit"],
  ["ttl of 53 weeks", (d) => { d.spec.ttl.duration = "53w"; }, "spec.ttl.duration", "ttl-duration", "365-day limit"],
  ["ttl past what a number holds", (d) => { d.spec.ttl.duration = `${"9".repeat(400)}s`; }, "spec.ttl.duration", "ttl-duration", "365-day limit"],
  ["ttl without duration", (d) => { delete d.spec.ttl.duration; }, "spec.ttl.duration", "required"],
  ["ttl offsetFrom unknown", (d) => { d.spec.ttl.offsetFrom = "deletedAt"; }, "spec.ttl.offsetFrom", "ttl-offset-from"],
  ["resource name with '_'", (d) => { d.spec.resources.push({ name: "orders_db", plugin: "pg" }); }, "spec.resources[1].name", "name-format"],
  ["resource name over 63 bytes", (d) => { d.spec.resources.push({ name: "r".repeat(64), plugin: "pg" }); }, "spec.resources[1].name", "too-long"],
  ["resource name repeated", (d) => { d.spec.resources.push({ name: "db", plugin: "other" }); }, "spec.resources[1].name", "duplicate-resource"],
  ["resource without a plugin", (d) => { delete d.spec.resources[0].plugin; }, "spec.resources[0].plugin", "required"],
  ["plugin reference with a bad name", (d) => { d.spec.resources[0].plugin = "hello db"; }, "spec.resources[0].plugin", "name-format"],
  ["plugin reference with a bad version", (d) => { d.spec.resources[0].plugin = "hello-db@next"; }, "spec.resources[0].plugin", "version-format"],
  ["param without a value", (d) => { d.spec.resources[0].params.dbname = null; }, "spec.resources[0].params.dbname", "type", "string, a number or true or false"],
  ["param given as a list", (d) => { d.spec.resources[0].params.tags = ["a"]; }, "spec.resources[0].params.tags", "type"],
  ["baseline forked twice", (d) => { d.spec.forks.push({ forkOf: { kind: "Deployment", namespace: "shop", name: "orders" } }); },
    "spec.forks[1].forkOf", "duplicate-baseline"],
  ["baseline forked and local", (d) => { d.spec.local[0].from.name = "orders"; }, "spec.local[0].from", "duplicate-baseline", "spec.forks[0].forkOf"],
  ["forkOf without a namespace", (d) => { delete d.spec.forks[0].forkOf.namespace; }, "spec.forks[0].forkOf.namespace", "required"],
  ["two images for one container", (d) => { d.spec.forks[0].customizations.images.push({ image: "orders:pr-2", container: "orders" }); },
    "spec.forks[0].customizations.images[1]", "duplicate-container"],
  ["env with value and valueFrom", (d) => { d.spec.forks[0].customizations.env[0].value = "db"; },
    "spec.forks[0].customizations.env[0]", "env-value-conflict"],
  ["env var set twice", (d) => { d.spec.forks[0].customizations.env.push({ name: "DB_HOST", value: "x" }); },
    "spec.forks[0].customizations.env[1].name", "duplicate-env"],
  ["env var name with '='", (d) => { d.spec.forks[0].customizations.env[0].name = "A=B"; }, "spec.forks[0].customizations.env[0].name", "env-name"],
  ["env operation unknown", (d) => { d.spec.forks[0].customizations.env.push({ name: "X", operation: "remove" }); },
    "spec.forks[0].customizations.env[1].operation", "env-operation"],
  ["env delete with a value", (d) => { d.spec.forks[0].customizations.env.push({ name: "X", value: "1", operation: "delete" }); },
    "spec.forks[0].customizations.env[1].operation", "env-operation"],
  ["valueFrom naming no resource of the sandbox", (d) => { d.spec.forks[0].customizations.env[0].valueFrom.resource.name = "cache"; },
    "spec.forks[0].customizations.env[0].valueFrom.resource.name", "unknown-resource", "(resources: db)"],
  ["outputKey without a step", (d) => { d.spec.forks[0].customizations.env[0].valueFrom.resource.outputKey = "host"; },
    "spec.forks[0].customizations.env[0].valueFrom.resource.outputKey", "output-key-format"],
  ["outputKey with three parts", (d) => { d.spec.forks[0].customizations.env[0].valueFrom.resource.outputKey = "a.b.c"; },
    "spec.forks[0].customizations.env[0].valueFrom.resource.outputKey", "output-key-format"],
  ["local name repeated", (d) => { d.spec.local.push({ name: "payments-local", from: { kind: "Deployment", namespace: "shop", name: "cart" } }); },
    "spec.local[1].name", "duplicate-local"],
  ["port out of range", (d) => { d.spec.local[0].mappings[0].port = 70000; }, "spec.local[0].mappings[0].port", "port-range"],
  ["toLocal without a port", (d) => { d.spec.local[0].mappings[0].toLocal = "localhost"; }, "spec.local[0].mappings[0].toLocal", "local-address"],
  ["endpoint name repeated", (d) => { d.spec.defaultRouteGroup.endpoints.push({ name: "web", target: "http://cart.shop.svc:80" }); },
    "spec.defaultRouteGroup.endpoints[1].name", "duplicate-endpoint"],
  ["endpoint target not a URL", (d) => { d.spec.defaultRouteGroup.endpoints[0].target = "orders:8080"; },
    "spec.defaultRouteGroup.endpoints[0].target", "endpoint-target"],
  ["patch of an unknown type", (d) => { d.spec.forks[0].customizations.patch = { type: "jsonpatch", value: "[]" }; },
    "spec.forks[0].customizations.patch.type", "patch-type", "strategic, merge, json"],
  ["patch without a value", (d) => { d.spec.forks[0].customizations.patch = { type: "merge" }; },
    "spec.forks[0].customizations.patch.value", "required"],
  ["valueFrom with two sources", (d) => { d.spec.forks[0].customizations.env[0].valueFrom.secret = { name: "s", key: "k" }; },
    "spec.forks[0].customizations.env[0].valueFrom", "value-source", "resource and secret"],
  ["valueFrom with no source", (d) => { d.spec.forks[0].customizations.env[0].valueFrom = {}; },
    "spec.forks[0].customizations.env[0].valueFrom", "value-source"],
  ["secret without a key", (d) => { d.spec.forks[0].customizations.env[0].valueFrom = { secret: { name: "s" } }; },
    "spec.forks[0].customizations.env[0].valueFrom.secret.key", "required"],
  ["valueFrom.fork naming a workload the sandbox does not fork", (d) => {
    d.spec.forks[0].customizations.env[0].valueFrom = { fork: { forkOf: { kind: "Deployment", namespace: "shop", name: "cart" }, expression: "{{ .Service.Host }}" } };
  }, "spec.forks[0].customizations.env[0].valueFrom.fork.forkOf", "unknown-fork", "Deployment shop/cart"],
  ["a fork of a kind that cannot be forked", (d) => { d.spec.forks[0].forkOf.kind = "Banana"; },
    "spec.forks[0].forkOf.kind", "fork-kind", 'kind "Banana" cannot be forked (a fork copies a Deployment, Rollout or StatefulSet)'],
  ["a fork kind in the wrong case", (d) => { d.spec.forks[0].forkOf.kind = "deployment"; },
    "spec.forks[0].forkOf.kind", "fork-kind", "did you mean Deployment?"],
  ["a fork expression reading an unknown field", (d) => {
    d.spec.forks[0].customizations.env[0].valueFrom = { fork: { forkOf: d.spec.forks[0].forkOf, expression: "{{ .Service.Foo }}" } };
  }, "spec.forks[0].customizations.env[0].valueFrom.fork.expression", "fork-expression", "unknown field .Service.Foo"],
  ["a fork expression with an unclosed action", (d) => {
    d.spec.forks[0].customizations.env[0].valueFrom = { fork: { forkOf: d.spec.forks[0].forkOf, expression: "http://{{ .Service.Host" } };
  }, "spec.forks[0].customizations.env[0].valueFrom.fork.expression", "fork-expression", "unclosed action"],
  ["local env valueFrom naming no resource", (d) => { d.spec.local[0].env = [{ name: "DB", valueFrom: { resource: { name: "cache", outputKey: "a.b" } } }]; },
    "spec.local[0].env[0].valueFrom.resource.name", "unknown-resource"],
  ["local file valueFrom naming no resource", (d) => { d.spec.local[0].files = [{ path: "/tmp/dsn", valueFrom: { resource: { name: "cache", outputKey: "a.b" } } }]; },
    "spec.local[0].files[0].valueFrom.resource.name", "unknown-resource"],
  ["local file without valueFrom", (d) => { d.spec.local[0].files = [{ path: "/tmp/dsn" }]; }, "spec.local[0].files[0].valueFrom", "required"],
  ["fork name repeated", (d) => {
    d.spec.forks[0].name = "orders";
    d.spec.forks.push({ name: "orders", forkOf: { kind: "Deployment", namespace: "shop", name: "cart" } });
  }, "spec.forks[1].name", "duplicate-fork"],
  ["virtual name repeated", (d) => {
    const workload = { kind: "Deployment", namespace: "shop", name: "cart" };
    d.spec.virtual = [{ name: "cart", workload }, { name: "cart", workload }];
  }, "spec.virtual[1].name", "duplicate-virtual"],
  ["a fork and a virtual workload with one name", (d) => {
    d.spec.forks[0].name = "cart";
    d.spec.virtual = [{ name: "cart", workload: { kind: "Deployment", namespace: "shop", name: "cart" } }];
  }, "spec.virtual[0].name", "duplicate-workload"],
  ["virtual without a workload", (d) => { d.spec.virtual = [{ name: "cart" }]; }, "spec.virtual[0].workload", "required"],
  ["misspelt field in a deprecated endpoint", (d) => { d.spec.endpoints = [{ name: "web", hots: "orders" }]; },
    "spec.endpoints[0].hots", "unknown-field", 'did you mean "host"'],
];

export const baseRouteGroup = (): Doc => ({
  name: "feature-x",
  spec: {
    cluster: "local",
    description: "the sandboxes of feature x, together",
    match: { any: [{ label: { key: "feature", value: "x-*" } }, { all: [{ label: { key: "team", value: "shop" } }, { label: { key: "stage", value: "e2e" } }] }] },
    endpoints: [{ name: "web", target: "http://frontend.shop.svc:8080" }],
  },
});

export const routeGroupRows: Row[] = [
  ["name with a dot", (d) => { d.name = "feature.x"; }, "name", "name-format"],
  ["without a cluster", (d) => { delete d.spec.cluster; }, "spec.cluster", "required"],
  ["without a match", (d) => { delete d.spec.match; }, "spec.match", "required"],
  ["a match with label and any", (d) => { d.spec.match.label = { key: "feature", value: "x" }; }, "spec.match", "match-one", "label and any"],
  ["an empty match", (d) => { d.spec.match.any[1] = {}; }, "spec.match.any[1]", "match-one", "one of label, all or any"],
  ["an empty all", (d) => { d.spec.match.any[1].all = []; }, "spec.match.any[1].all", "match-one", "every sandbox"],
  ["matches nested five deep", (d) => {
    d.spec.match = { all: [{ any: [{ all: [{ any: [{ all: [{ label: { key: "a", value: "b" } }] }] }] }] }] };
  }, "spec.match.all[0].any[0].all[0].any[0].all", "match-depth", "4 levels"],
  ["a label without a value", (d) => { d.spec.match.any[0].label.value = ""; }, "spec.match.any[0].label.value", "required"],
  ["endpoint name repeated", (d) => { d.spec.endpoints.push({ name: "web", target: "http://cart.shop.svc:80" }); },
    "spec.endpoints[1].name", "duplicate-endpoint"],
  ["endpoint target not a URL", (d) => { d.spec.endpoints[0].target = "frontend:8080"; }, "spec.endpoints[0].target", "endpoint-target"],
  ["a misspelt match field", (d) => { d.spec.match.any[0].lable = d.spec.match.any[0].label; delete d.spec.match.any[0].label; },
    "spec.match.any[0].lable", "unknown-field"],
];

export const baseJobRunnerGroup = (): Doc => ({
  name: "e2e-runners",
  spec: {
    cluster: "local",
    labels: { team: "shop" },
    namespace: "ephemera-jobs",
    jobTimeout: "30m",
    image: "ubuntu:24.04",
    podTemplate: {
      metadata: { creationTimestamp: null },
      spec: { containers: [{ name: "main", image: "ubuntu:24.04", resources: {} }] },
    },
    scaling: { manual: { desiredPods: 2 } },
  },
});

export const jobRunnerGroupRows: Row[] = [
  ["name with an underscore", (d) => { d.name = "e2e_runners"; }, "name", "name-format"],
  ["without a cluster", (d) => { delete d.spec.cluster; }, "spec.cluster", "required"],
  ["without an image", (d) => { delete d.spec.image; }, "spec.image", "required"],
  ["an upper-case namespace", (d) => { d.spec.namespace = "Jobs"; }, "spec.namespace", "name-format", "lower-case DNS label"],
  ["a jobTimeout that is not a duration", (d) => { d.spec.jobTimeout = "an hour"; }, "spec.jobTimeout", "timeout-format", "is not a duration"],
  ["a jobTimeout of eight days", (d) => { d.spec.jobTimeout = "8d"; }, "spec.jobTimeout", "timeout-range", "7-day limit"],
  ["no pods", (d) => { d.spec.scaling.manual.desiredPods = 0; }, "spec.scaling.manual.desiredPods", "desired-pods-range", "from 1 to 64"],
  ["65 pods", (d) => { d.spec.scaling.manual.desiredPods = 65; }, "spec.scaling.manual.desiredPods", "desired-pods-range"],
  ["half a pod", (d) => { d.spec.scaling.manual.desiredPods = 1.5; }, "spec.scaling.manual.desiredPods", "desired-pods-range"],
  ["a pod template given as text", (d) => { d.spec.podTemplate = "spec: {}"; }, "spec.podTemplate", "type"],
  ["a pod template with a kind", (d) => { d.spec.podTemplate.kind = "Pod"; }, "spec.podTemplate.kind", "unknown-field"],
  ["a container of ephemera's", (d) => { d.spec.podTemplate.spec.containers.push({ name: "ephemera-sidecar", image: "x" }); },
    "spec.podTemplate.spec.containers[1].name", "pod-template", "ephemera's"],
  ["containers not a list", (d) => { d.spec.podTemplate.spec.containers = { name: "main" }; }, "spec.podTemplate.spec.containers", "pod-template"],
  ["a pod template over 64 KiB", (d) => { d.spec.podTemplate.metadata.annotations = { big: "x".repeat(65 * 1024) }; },
    "spec.podTemplate", "too-long", "65536-byte limit"],
  ["a misspelt scaling field", (d) => { d.spec.scaling.manual.desiredPod = 2; }, "spec.scaling.manual.desiredPod", "unknown-field"],
];

export const baseJob = (): Doc => ({
  spec: {
    namePrefix: "e2e-orders",
    runnerGroup: "e2e-runners",
    script: "#!/bin/bash\nset -e\ncurl -fsS -H \"baggage: sd-routing-key=$SIGNADOT_ROUTING_KEY\" http://orders.shop.svc:8080/healthz\n",
    labels: { pr: "42" },
    uploadArtifact: [{ path: "/tmp/report.xml", meta: { format: "junit" } }],
    routingContext: { sandbox: "feature-x" },
  },
});

export const jobRows: Row[] = [
  ["without a runner group", (d) => { delete d.spec.runnerGroup; }, "spec.runnerGroup", "required"],
  ["a name prefix with a dot", (d) => { d.spec.namePrefix = "e2e.orders"; }, "spec.namePrefix", "name-format", "letters, digits"],
  ["a name prefix of 33 bytes", (d) => { d.spec.namePrefix = "a".repeat(33); }, "spec.namePrefix", "too-long", "32 bytes"],
  ["a script without #!", (d) => { d.spec.script = "echo hi\n"; }, "spec.script", "script-shebang"],
  ["script and command", (d) => { d.spec.command = ["make", "test"]; }, "spec.command", "script-or-command", "exactly one"],
  ["neither script nor command", (d) => { delete d.spec.script; }, "spec.script", "script-or-command", "needs a script"],
  ["an empty argument", (d) => { delete d.spec.script; d.spec.command = ["make", ""]; }, "spec.command[1]", "required"],
  ["a sandbox and a route group", (d) => { d.spec.routingContext.routegroup = "feature-x"; }, "spec.routingContext", "routing-context", "not both"],
  ["a sandbox name with a dot", (d) => { d.spec.routingContext.sandbox = "feature.x"; }, "spec.routingContext.sandbox", "name-format"],
  ["a relative artifact path", (d) => { d.spec.uploadArtifact[0].path = "report.xml"; }, "spec.uploadArtifact[0].path", "path-format"],
  ["an artifact kept twice", (d) => { d.spec.uploadArtifact.push({ path: "/tmp/report.xml" }); }, "spec.uploadArtifact[1].path", "duplicate-path"],
  ["33 artifacts", (d) => { d.spec.uploadArtifact = Array.from({ length: 33 }, (_, i) => ({ path: `/tmp/a${i}` })); }, "spec.uploadArtifact", "too-many"],
  ["a name given", (d) => { d.name = "mine"; }, "name", "unknown-field"],
];
