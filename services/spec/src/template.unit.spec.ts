// Templating: @{var}, @{embed: path}, the encodings, `-f -`, `delete -f` needing only the
// name's variables, and every error case, each naming the file, the field and the problem.
import { join } from "node:path";
import { FIXTURES } from "./fixtures.testkit.js";
import { loadTemplate, parseSets, renderTemplate, TemplateError } from "./template.js";

const files: Record<string, string | Buffer> = {
  "/tpl/script.sh": "#!/bin/sh\necho @{not-rendered}\n",
  "/tpl/sub/overlay.yaml": "spec:\n  serviceAccountName: db\n",
  "/tpl/list.yaml": "- a\n- b\n",
  "/tpl/broken.yaml": "a: [unclosed\n",
  "/tpl/bytes.bin": Buffer.from([0, 1, 2, 250]),
};

function readFile(path: string): Buffer {
  const content = files[path];
  if (content === undefined) throw Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), { code: "ENOENT" });
  return Buffer.from(content);
}

const render = (doc: unknown, vars: Record<string, string> = {}) =>
  renderTemplate(doc, { baseDir: "/tpl", vars: new Map(Object.entries(vars)), readFile, file: "t.yaml" });

function errorOf(fn: () => unknown): TemplateError {
  try {
    fn();
  } catch (err) {
    if (err instanceof TemplateError) return err;
    throw err;
  }
  throw new Error("expected a TemplateError");
}

async function asyncErrorOf(promise: Promise<unknown>): Promise<TemplateError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof TemplateError) return err;
    throw err;
  }
  throw new Error("expected a TemplateError");
}

describe("renderTemplate", () => {
  it("substitutes variables in string values, never in keys", () => {
    expect(render({ "@{k}": "v-@{a}", list: ["@{a}@{b}", 1, true, null], n: { deep: "x @{b} y" } }, { a: "1", b: "two" }))
      .toEqual({ "@{k}": "v-1", list: ["1two", 1, true, null], n: { deep: "x two y" } });
  });

  it("embeds files relative to the base directory, with spaces around embed and ':'", () => {
    expect(render({ a: "@{embed: script.sh}", b: "@{ embed : ./sub/overlay.yaml }", c: "@{embed:sub/../script.sh}" })).toEqual({
      a: "#!/bin/sh\necho @{not-rendered}\n",
      b: "spec:\n  serviceAccountName: db\n",
      c: "#!/bin/sh\necho @{not-rendered}\n",
    });
  });

  it("does not render what it embeds", () => {
    expect(render({ script: "@{embed: script.sh}" })).toEqual({ script: "#!/bin/sh\necho @{not-rendered}\n" });
  });

  it("embeds raw inside a larger string", () => {
    expect(render({ s: "header\n@{embed[raw]: sub/overlay.yaml}footer" })).toEqual({ s: "header\nspec:\n  serviceAccountName: db\nfooter" });
  });

  it("inserts parsed YAML and base64 when the directive is the whole value", () => {
    expect(render({
      list: "@{embed[yaml]: list.yaml}",
      bytes: "@{embed[binary]: bytes.bin}",
      fromVar: "@{cfg[yaml]}",
      varBytes: "@{token[binary]}",
      block: "@{embed[yaml]: list.yaml}\n",
    }, { cfg: "{a: 1, b: [x]}", token: "s3cret" })).toEqual({
      list: ["a", "b"],
      bytes: Buffer.from([0, 1, 2, 250]).toString("base64"),
      fromVar: { a: 1, b: ["x"] },
      varBytes: Buffer.from("s3cret").toString("base64"),
      block: ["a", "b"],
    });
  });

  it("lists every variable without a value in one error, with where each is used", () => {
    const err = errorOf(() => render({ name: "@{name}", spec: { image: "@{repo}:@{tag}", other: "@{name}" } }, { repo: "r" }));
    expect(err.problems).toHaveLength(1);
    expect(err.message).toBe(
      "t.yaml: variables without a value: name (at name, spec.other); tag (at spec.image); give each with --set NAME=VALUE",
    );
  });

  it.each([
    ["yaml inside a larger string", "x @{embed[yaml]: list.yaml}", "the yaml encoding must be the whole value"],
    ["binary inside a larger string", "@{token[binary]}-suffix", "the binary encoding must be the whole value"],
    ["an unsupported operation", "@{env: HOME}", 'unsupported operation "env"'],
    ["an unsupported encoding", "@{embed[base64]: bytes.bin}", 'unsupported encoding "base64"'],
    ["an unsupported variable encoding", "@{token[json]}", 'unsupported encoding "json"'],
    ["embed without a path", "@{embed: }", "embed needs a file path"],
    ["embed without ':'", "@{embed}", "embed needs a file path"],
    ["a bad variable name", "@{1st}", '"1st" is not a variable name'],
    ["an empty directive", "@{}", "unsupported directive"],
    ["an unterminated directive", "start @{token", 'has no closing "}"'],
    ["a missing embedded file", "@{embed: nope.sh}", "cannot read /tpl/nope.sh: ENOENT"],
    ["embedded YAML that does not parse", "@{embed[yaml]: broken.yaml}", "content is not valid YAML"],
  ])("reports %s with the file and the field", (_what, value, says) => {
    const err = errorOf(() => render({ spec: { field: value } }, { token: "t" }));
    expect(err.problems).toEqual([{ field: "spec.field", message: expect.stringContaining(says) }]);
    expect(err.message).toMatch(/^t\.yaml: spec\.field: /);
    expect(err.file).toBe("t.yaml");
  });

  it("reports every problem of the file at once", () => {
    const err = errorOf(() => render({ a: "@{embed: nope}", b: ["@{x[xml]}", "@{unset}"] }));
    expect(err.message.split("\n")).toEqual([
      expect.stringMatching(/^t\.yaml: a: @\{embed: nope\}: cannot read/),
      't.yaml: b[0]: @{x[xml]}: unsupported encoding "xml" (use raw, yaml or binary)',
      "t.yaml: variables without a value: unset (at b[1]); give each with --set NAME=VALUE",
    ]);
  });
});

describe("parseSets", () => {
  it("splits at the first '=' and accepts a repeat with the same value", () => {
    expect(parseSets(["a=b=c", "empty=", "a.b-c_d=1", "a=b=c"])).toEqual(new Map([["a", "b=c"], ["empty", ""], ["a.b-c_d", "1"]]));
  });

  it.each([
    [["noequals"], 'must be NAME=VALUE'],
    [["=value"], 'variable name "" must match'],
    [["1x=2"], 'variable name "1x" must match'],
    [["x=1", "x=2"], '--set x is given twice with different values ("1" and "2")'],
  ])("rejects %j", (sets, says) => {
    expect(errorOf(() => parseSets(sets)).message).toContain(says);
  });
});

describe("loadTemplate", () => {
  const template = join(FIXTURES, "templates", "plugin.yaml");
  const sets = ["suffix=a", "team=data", "owner=ann", "image=alpine:3"];

  it("reads the file and embeds relative to its directory", async () => {
    const doc = await loadTemplate(template, sets) as { name: string; spec: Record<string, unknown> };
    expect(doc.name).toBe("tpl-a");
    expect(doc.spec).toEqual({
      description: "built for data by ann",
      runner: { image: "alpine:3" },
      create: [{ name: "run", script: '#!/bin/sh\necho "@{left-alone}"\n' }],
      "@{not-a-key}": "keys are never substituted",
      config: { retries: 2, labels: ["a", "b"] },
      blob: Buffer.from([0, 1, 0xff, 0x6f, 0x6b]).toString("base64"),
      count: 3,
    });
  });

  it("needs only the name's variables with onlyName, leaving the rest as written", async () => {
    const doc = await loadTemplate(template, ["suffix=b"], { onlyName: true }) as { name: string; spec: { description: string } };
    expect(doc.name).toBe("tpl-b");
    expect(doc.spec.description).toBe("built for @{team} by @{owner}");
    const err = await asyncErrorOf(loadTemplate(template, [], { onlyName: true }));
    expect(err.message).toBe(`${template}: variables without a value: suffix (at name); give each with --set NAME=VALUE`);
  });

  it("reads standard input for '-', embedding relative to the working directory", async () => {
    const stdin = async () => Buffer.from(`name: "@{n}"\nspec:\n  script: "@{embed: ${join("services", "spec", "fixtures", "templates", "parts", "run.sh")}}"\n`);
    const cwd = process.cwd();
    process.chdir(join(FIXTURES, "..", "..", ".."));
    try {
      expect(await loadTemplate("-", ["n=x"], { stdin })).toEqual({ name: "x", spec: { script: '#!/bin/sh\necho "@{left-alone}"\n' } });
    } finally {
      process.chdir(cwd);
    }
    const err = await asyncErrorOf(loadTemplate("-", [], { stdin: async () => Buffer.from("name: [") }));
    expect(err.message).toMatch(/^standard input: is not valid YAML: /);
  });

  it("rejects a stream of several documents", async () => {
    const err = await asyncErrorOf(loadTemplate("-", [], { stdin: async () => Buffer.from("name: a\n---\nname: b\n") }));
    expect(err.message).toBe("standard input: holds 2 YAML documents; expected one");
  });

  it("reports conflicting --set before reading anything", async () => {
    const err = await asyncErrorOf(loadTemplate("/does/not/exist.yaml", ["a=1", "a=2"]));
    expect(err.message).toContain("--set a is given twice with different values");
  });

  it("lets a missing file surface as the file system's error", async () => {
    await expect(loadTemplate(join(FIXTURES, "nope.yaml"), [])).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("reports variables without a value across the whole file", async () => {
    const err = await asyncErrorOf(loadTemplate(template, ["suffix=a"]));
    expect(err.message).toBe(
      `${template}: variables without a value: team (at spec.description); owner (at spec.description); image (at spec.runner.image); give each with --set NAME=VALUE`,
    );
  });
});
