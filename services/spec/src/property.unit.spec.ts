// Property-based tests: whatever document arrives (from a file or from a gRPC client), the
// validator never crashes, and either accepts it or names fields that exist in it (or a
// required field missing from an existing parent). Valid documents survive the trip
// through the proto unchanged. SPEC_PROPERTY_RUNS=5000 searches longer.
import fc from "fast-check";
import { isValidationError, type FieldViolation } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { pluginToDoc, sandboxToDoc, validatePlugin, validateSandbox } from "./validate.js";
import { ROOT_FIELD } from "./violations.js";

type Segment = string | number;

/** Parses `spec.create[2].inputs[0]["odd.key"]` back into segments. */
function parseField(field: string): Segment[] {
  const out: Segment[] = [];
  const re = /(?:^|\.)([A-Za-z0-9_-]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/gy;
  let m: RegExpExecArray | null;
  let consumed = 0;
  while ((m = re.exec(field)) !== null) {
    if (m[1] !== undefined) out.push(m[1]);
    else if (m[2] !== undefined) out.push(Number(m[2]));
    else out.push(JSON.parse(m[3] as string) as string);
    consumed = re.lastIndex;
  }
  if (consumed !== field.length) throw new Error(`unparsable field path ${JSON.stringify(field)}`);
  return out;
}

function lookup(doc: unknown, path: Segment[]): { exists: boolean; value?: unknown } {
  let cur: unknown = doc;
  for (const seg of path) {
    if (cur === null || typeof cur !== "object" || !Object.hasOwn(cur, seg)) return { exists: false };
    cur = (cur as Record<Segment, unknown>)[seg];
  }
  return { exists: true, value: cur };
}

function located(doc: unknown, v: FieldViolation): boolean {
  if (v.field === "" || v.description === "" || v.rule === "") return false;
  if (v.field === ROOT_FIELD) return doc === null || typeof doc !== "object" || Array.isArray(doc);
  const path = parseField(v.field);
  const found = lookup(doc, path);
  // A field written null counts as absent, as upstream's decoder reads it.
  if (found.exists) return v.rule !== "required" || found.value === "" || found.value === undefined || found.value === null;
  return v.rule === "required" && lookup(doc, path.slice(0, -1)).exists;
}

function outcome(validate: (doc: unknown) => unknown, doc: unknown): FieldViolation[] | "valid" {
  try {
    validate(doc);
    return "valid";
  } catch (err) {
    if (isValidationError(err)) return err.violations;
    throw err;
  }
}

// Small pools, so that random documents often repeat names, refer to each other and cycle.
const stepNames = fc.constantFrom("a", "b", "c", "seed-a", "x.y", "", "1st", "a".repeat(64));
const outputNames = fc.constantFrom("out", "host", "dsn", "o.k", "");
const paths = fc.constantFrom("/tmp/a", "/tmp/b", "/outputs/x", "rel/p", "/a/../b", "/", "/tmp//a", "/tmp/a/");
const envs = fc.constantFrom("HOST", "DSN", "SIGNADOT_SANDBOX_ID", "EPHEMERA_X", "1BAD", "");
const junk = fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.string({ maxLength: 5 }), fc.array(fc.integer(), { maxLength: 2 }));

/** Occasionally replaces a value with junk, drops it, or adds an unknown field next to it. */
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.oneof({ weight: 8, arbitrary: arb }, { weight: 1, arbitrary: junk }, { weight: 1, arbitrary: fc.constant(undefined) });

function record(shape: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<Record<string, unknown>> {
  return fc.tuple(fc.record(shape), fc.option(fc.constantFrom("extra", "valueFromStpe", "__proto__", "constructor"), { freq: 6 }))
    .map(([obj, extra]) => {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(obj)) if (v !== undefined) out[k] = v;
      if (extra !== null) Object.defineProperty(out, extra, { value: 1, enumerable: true, writable: true, configurable: true });
      return out;
    });
}

const input = record({
  name: maybe(fc.constantFrom("dbname", "host", "db-name", "db_name", "signadot-sandbox-name", "in.put", "")),
  valueFromSandbox: maybe(fc.boolean()),
  valueFromStep: maybe(record({ name: maybe(stepNames), output: maybe(outputNames) })),
  as: maybe(record({ env: maybe(envs), path: maybe(paths) })),
});

const step = record({
  name: maybe(stepNames),
  inputs: maybe(fc.array(input, { maxLength: 3 })),
  outputs: maybe(fc.array(record({ name: maybe(outputNames), valueFromPath: maybe(paths) }), { maxLength: 3 })),
  script: maybe(fc.constantFrom("#!/bin/sh\necho\n", "echo no shebang", "")),
  timeout: maybe(fc.constantFrom("10m", "90s", "1h", "5", "0m")),
  retries: maybe(fc.constantFrom(0, 3, 10, 11, -1, 1.5)),
});

const overlays = fc.constantFrom(
  "spec:\n  serviceAccountName: db\n",
  "spec:\n  restartPolicy: Always\n",
  "spec:\n  containers:\n  - name: main\n    image: other\n",
  "metadata:\n  namespace: elsewhere\n",
  "spec: [",
  "- 1\n",
  "spec:\n  containers:\n  - name: ephemera-init\n",
  "",
);

const pluginDoc = record({
  name: maybe(fc.constantFrom("db", "db@1.2.3", "db@latest", "db@x", "1db", "d".repeat(254))),
  spec: maybe(record({
    description: maybe(fc.string({ maxLength: 300 })),
    runner: maybe(record({ image: maybe(fc.constantFrom("alpine", "")), namespace: maybe(fc.constantFrom("ephemera", "Bad_NS")), podTemplateOverlay: maybe(overlays) })),
    create: maybe(fc.array(step, { maxLength: 4 })),
    delete: maybe(fc.array(step, { maxLength: 3 })),
  })),
});

const workload = record({ kind: maybe(fc.constant("Deployment")), namespace: maybe(fc.constantFrom("shop", "")), name: maybe(fc.constantFrom("orders", "payments")) });
const resourceNames = fc.constantFrom("db", "queue", "bad_name", "");

const sandboxDoc = record({
  name: maybe(fc.constantFrom("feature-x", "f", "bad_name", "f".repeat(31))),
  spec: maybe(record({
    cluster: maybe(fc.constantFrom("local", "a.b", "")),
    description: maybe(fc.string({ maxLength: 10 })),
    labels: maybe(fc.dictionary(fc.string({ maxLength: 4 }), maybe(fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), fc.boolean())), { maxKeys: 2 })),
    ttl: maybe(record({ duration: maybe(fc.constantFrom("2d", "30s", "1y", "0h")), offsetFrom: maybe(fc.constantFrom("createdAt", "updatedAt", "never")) })),
    resources: maybe(fc.array(record({
      name: maybe(resourceNames),
      plugin: maybe(fc.constantFrom("db", "db@1.0.0", "db@latest", "db@x", "bad name")),
      params: maybe(fc.dictionary(fc.string({ maxLength: 4 }), maybe(fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), fc.boolean())), { maxKeys: 2 })),
    }), { maxLength: 3 })),
    forks: maybe(fc.array(record({
      forkOf: maybe(workload),
      customizations: maybe(record({
        images: maybe(fc.array(record({ image: maybe(fc.constant("img")), container: maybe(fc.constantFrom("a", "")) }), { maxLength: 2 })),
        env: maybe(fc.array(record({
          name: maybe(fc.constantFrom("A", "B", "1=")),
          value: maybe(fc.constantFrom("v", "", 3)),
          valueFrom: maybe(record({ resource: maybe(record({ name: maybe(resourceNames), outputKey: maybe(fc.constantFrom("s.o", "s", "a.b.c")) })) })),
          operation: maybe(fc.constantFrom("upsert", "delete", "drop")),
        }), { maxLength: 3 })),
      })),
    }), { maxLength: 2 })),
    local: maybe(fc.array(record({
      name: maybe(fc.constantFrom("l", "l", "")),
      from: maybe(workload),
      mappings: maybe(fc.array(record({ port: maybe(fc.constantFrom(80, 0, 70000)), toLocal: maybe(fc.constantFrom("localhost:80", "x")) }), { maxLength: 2 })),
    }), { maxLength: 2 })),
    defaultRouteGroup: maybe(record({
      endpoints: maybe(fc.array(record({ name: maybe(fc.constantFrom("web", "api")), target: maybe(fc.constantFrom("http://a.b:80", "nope")) }), { maxLength: 3 })),
    })),
  })),
});

// Documents valid by construction: unique names, references only to earlier steps'
// declared outputs, unique env vars and paths.
const validName = fc.stringMatching(/^[a-z][a-z0-9-]{0,8}[a-z0-9]$/);
const validStepName = fc.stringMatching(/^[a-zA-Z][a-zA-Z0-9_-]{0,10}$/);

interface Declared { step: string; outputs: string[] }

function buildStep(name: string, outputs: string[], refs: Declared[], choice: number[], extras: { timeout?: string; retries?: number }) {
  const inputs = choice.map((c, j) => {
    const source = refs.length > 0 && c % 2 === 0 && (refs[c % refs.length] as Declared).outputs.length > 0
      ? (() => {
        const target = refs[c % refs.length] as Declared;
        return { valueFromStep: { name: target.step, output: target.outputs[c % target.outputs.length] as string } };
      })()
      : { valueFromSandbox: true };
    const as = [undefined, { env: `E_${j}` }, { path: `/in/${j}` }, { env: `E_${j}`, path: `/in/${j}` }][Math.floor(c / 2) % 4];
    return { name: `in${j}`, ...source, ...(as ? { as } : {}) };
  });
  return {
    name,
    ...(inputs.length ? { inputs } : {}),
    ...(outputs.length ? { outputs: outputs.map((o, k) => ({ name: o, valueFromPath: k % 2 ? `/tmp/${o}` : `/outputs/${o}` })) } : {}),
    script: "#!/bin/sh\necho ok\n",
    ...extras,
  };
}

const validPlugin = fc.record({
  name: fc.tuple(validName, fc.option(fc.tuple(fc.nat(9), fc.nat(9), fc.nat(9)))).map(([n, v]) => (v ? `${n}@${v.join(".")}` : n)),
  names: fc.uniqueArray(validStepName, { minLength: 1, maxLength: 7, comparator: (a, b) => a === b }),
  split: fc.nat(),
  outputs: fc.array(fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9_]{0,6}$/), { maxLength: 3 }), { minLength: 7, maxLength: 7 }),
  choices: fc.array(fc.array(fc.nat(11), { maxLength: 3 }), { minLength: 7, maxLength: 7 }),
  extras: fc.array(fc.record({ timeout: fc.constantFrom("30s", "10m", "1h"), retries: fc.nat(10) }, { requiredKeys: [] }), { minLength: 7, maxLength: 7 }),
  description: fc.option(fc.string({ maxLength: 80 }), { nil: undefined }),
  overlay: fc.option(overlays.filter((o) => o === "spec:\n  serviceAccountName: db\n"), { nil: undefined }),
}).map(({ name, names, split, outputs, choices, extras, description, overlay }) => {
  const createCount = 1 + (split % names.length);
  const declared: Declared[] = [];
  const create = names.slice(0, createCount).map((n, i) => {
    const step = buildStep(n, outputs[i] ?? [], [...declared], choices[i] ?? [], extras[i] ?? {});
    declared.push({ step: n, outputs: outputs[i] ?? [] });
    return step;
  });
  const del = names.slice(createCount).map((n, i) => {
    const k = createCount + i;
    const step = buildStep(n, outputs[k] ?? [], [...declared], choices[k] ?? [], extras[k] ?? {});
    declared.push({ step: n, outputs: outputs[k] ?? [] });
    return step;
  });
  return {
    name,
    spec: {
      ...(description !== undefined ? { description } : {}),
      runner: { image: "alpine:3", ...(overlay ? { podTemplateOverlay: overlay } : {}) },
      create,
      ...(del.length ? { delete: del } : {}),
    },
  };
});

const validSandbox = fc.record({
  name: validName.filter((n) => n.length <= 30),
  resources: fc.uniqueArray(validName, { maxLength: 3 }),
  baselines: fc.uniqueArray(validName, { maxLength: 4 }),
  // Not "xn--…": a URL host of that form is an IDNA A-label, and a random one is not valid punycode.
  endpoints: fc.uniqueArray(validName.filter((n) => !n.startsWith("xn--")), { maxLength: 3 }),
  forkCount: fc.nat(),
  params: fc.dictionary(validStepName, fc.oneof(fc.string({ maxLength: 5 }), fc.integer(), fc.boolean()), { maxKeys: 3 }),
  ttl: fc.option(fc.record({ duration: fc.constantFrom("30s", "15m", "2h", "3d", "1w"), offsetFrom: fc.constantFrom("createdAt", "updatedAt") }, { requiredKeys: ["duration"] }), { nil: undefined }),
}).map(({ name, resources, baselines, endpoints, forkCount, params, ttl }) => {
  const forks = baselines.slice(0, forkCount % (baselines.length + 1));
  const locals = baselines.slice(forks.length);
  return {
    name,
    spec: {
      cluster: "local",
      ...(ttl ? { ttl } : {}),
      resources: resources.map((r) => ({ name: r, plugin: `${r}@1.0.0`, params })),
      forks: forks.map((b, i) => ({
        forkOf: { kind: "Deployment", namespace: "shop", name: b },
        customizations: {
          images: [{ image: `${b}:pr-${i}` }],
          env: resources.map((r, k) => ({ name: `R${k}`, valueFrom: { resource: { name: r, outputKey: "create.out" } } })),
        },
      })),
      local: locals.map((b, i) => ({ name: `${b}-local`, from: { kind: "Deployment", namespace: "shop", name: b }, mappings: [{ port: 8000 + i, toLocal: `localhost:${9000 + i}` }] })),
      defaultRouteGroup: { endpoints: endpoints.map((e) => ({ name: e, target: `http://${e}.shop.svc:8080` })) },
    },
  };
});

/** Every path to a value in a document. */
function allPaths(doc: unknown, at: Segment[] = []): Segment[][] {
  const here = [at];
  if (Array.isArray(doc)) return here.concat(doc.flatMap((v, i) => allPaths(v, [...at, i])));
  if (doc !== null && typeof doc === "object") return here.concat(Object.entries(doc).flatMap(([k, v]) => allPaths(v, [...at, k])));
  return here;
}

type Mutation = { pick: number; kind: "junk" | "delete" | "extra" | "copy"; junk: unknown };

/** Applies small mistakes to a valid document: a wrong value, a missing field, an unknown field, a duplicated entry. */
function mutate(doc: unknown, mutations: Mutation[]): unknown {
  const out = structuredClone(doc) as Record<Segment, unknown>;
  for (const m of mutations) {
    const paths = allPaths(out).filter((p) => p.length > 0);
    if (paths.length === 0) break;
    const path = paths[m.pick % paths.length] as Segment[];
    const parent = lookup(out, path.slice(0, -1)).value as Record<Segment, unknown>;
    const key = path[path.length - 1] as Segment;
    if (m.kind === "junk") parent[key] = m.junk;
    else if (m.kind === "delete") {
      if (Array.isArray(parent)) parent.splice(Number(key), 1);
      else delete parent[key];
    } else if (m.kind === "copy" && Array.isArray(parent)) parent.push(structuredClone(parent[Number(key)]));
    else if (parent[key] !== null && typeof parent[key] === "object" && !Array.isArray(parent[key])) (parent[key] as Record<string, unknown>).unexpected = m.junk;
  }
  return out;
}

const mutations = fc.array(fc.record({
  pick: fc.nat(),
  kind: fc.constantFrom("junk", "delete", "extra", "copy") as fc.Arbitrary<Mutation["kind"]>,
  junk: fc.oneof(junk, stepNames, paths, envs),
}), { minLength: 1, maxLength: 3 });

const RUNS = { numRuns: Number(process.env.SPEC_PROPERTY_RUNS ?? 300) };

describe.each([
  ["plugin", pluginDoc, validPlugin, validatePlugin, (p: unknown) => pluginToDoc(pb.ResourcePlugin.decode(pb.ResourcePlugin.encode(p as pb.ResourcePlugin).finish()))],
  ["sandbox", sandboxDoc, validSandbox, validateSandbox, (s: unknown) => sandboxToDoc(pb.Sandbox.decode(pb.Sandbox.encode(s as pb.Sandbox).finish()))],
] as const)("random %s documents", (_kind, docs, valid, validate, throughWire) => {
  const checkLocated = (doc: unknown) => {
    const result = outcome(validate, doc);
    if (result === "valid") return;
    expect(result.length).toBeGreaterThan(0);
    for (const v of result) {
      if (!located(doc, v)) throw new Error(`violation not located in the document: ${JSON.stringify(v)}`);
    }
  };

  it("never crash the validator and come back valid or with located violations", () => {
    fc.assert(fc.property(docs, checkLocated), RUNS);
  });

  it("valid by construction are accepted and equal after the trip through the wire", () => {
    fc.assert(fc.property(valid, (doc) => {
      const accepted = validate(doc);
      expect(validate(throughWire(accepted))).toEqual(accepted);
    }), RUNS);
  });

  it("with a few mistakes come back valid or with located violations", () => {
    fc.assert(fc.property(valid, mutations, (doc, m) => checkLocated(mutate(doc, m))), RUNS);
  });

  it("or anything at all never crash it", () => {
    fc.assert(fc.property(fc.anything({ maxDepth: 4 }), checkLocated), RUNS);
  });
});

describe("parseField (the test's own helper)", () => {
  it("reads the validator's paths back", () => {
    expect(parseField('spec.create[2].inputs[0]["a.b"].x')).toEqual(["spec", "create", 2, "inputs", 0, "a.b", "x"]);
  });
});
