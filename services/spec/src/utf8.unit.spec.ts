// Files must be UTF-8: a bad byte is refused with the field it falls in, its byte offset and
// its line and column; nothing is rewritten to U+FFFD. Valid multibyte text passes unchanged.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ValidationError } from "@ephemera/kit/errors";
import { loadTemplate, renderTemplate, TemplateError } from "./template.js";
import { decodeFile, utf8Violations } from "./utf8.js";

const BAD = Buffer.from([0xc3, 0x28]); // a 2-byte sequence whose second byte is not a continuation byte

/** `text` with each "<BAD>" replaced by the invalid bytes. */
const withBad = (text: string) => Buffer.concat(text.split("<BAD>").flatMap((part, i) => (i === 0 ? [Buffer.from(part)] : [BAD, Buffer.from(part)])));

const PLUGIN = `name: db
spec:
  runner: {image: alpine:3}
  create:
  - name: provision
    script: |
      #!/bin/sh
      echo "caf<BAD>"
`;

const SANDBOX = `name: a
spec:
  cluster: local
  labels:
    team: "pay<BAD>"
  resources:
  - name: db
    plugin: db
    params:
      size: <BAD>small
`;

const at = (bytes: Buffer) => bytes.indexOf(BAD);

describe("utf8Violations", () => {
  it("names the script a bad byte falls in, with its byte offset, line and column", () => {
    const bytes = withBad(PLUGIN);
    expect(at(bytes)).toBe(118);
    expect(utf8Violations(bytes)).toEqual([
      { field: "spec.create[0].script", rule: "utf8", description: "byte 118 (line 8, column 16) is not valid UTF-8" },
    ]);
  });

  it("names a name, a label value and a param", () => {
    expect(utf8Violations(withBad("name: d<BAD>b\nspec: {}\n"))).toEqual([
      { field: "name", rule: "utf8", description: "byte 7 (line 1, column 8) is not valid UTF-8" },
    ]);
    const bytes = withBad(SANDBOX);
    const second = bytes.indexOf(BAD, at(bytes) + 2);
    expect(utf8Violations(bytes)).toEqual([
      { field: "spec.labels.team", rule: "utf8", description: `byte ${at(bytes)} (line 5, column 15) is not valid UTF-8` },
      { field: "spec.resources[0].params.size", rule: "utf8", description: `byte ${second} (line 10, column 13) is not valid UTF-8` },
    ]);
  });

  it("lists a field once, at its first bad byte, and counts columns in characters", () => {
    const bytes = withBad("name: é日本🎉<BAD><BAD>\nspec:\n  description: x<BAD>\n");
    expect(utf8Violations(bytes)).toEqual([
      { field: "name", rule: "utf8", description: "byte 18 (line 1, column 11) is not valid UTF-8" },
      { field: "spec.description", rule: "utf8", description: "byte 45 (line 3, column 17) is not valid UTF-8" },
    ]);
  });

  it("names a key as its path, and a byte outside any value (a comment) as the document", () => {
    expect(utf8Violations(withBad("name: db\nsp<BAD>ec: {}\n"))).toEqual([
      { field: '["sp\uFFFD(ec"]', rule: "utf8", description: "byte 11 (line 2, column 3) is not valid UTF-8" },
    ]);
    expect(utf8Violations(withBad("# caf<BAD>\nname: db\n"))).toEqual([
      { field: "(document)", rule: "utf8", description: "byte 5 (line 1, column 6) is not valid UTF-8" },
    ]);
  });

  it("finds nothing in valid multibyte text and a literal U+FFFD (EF BF BD)", () => {
    const text = "name: db\nspec:\n  description: \"é 日本 🎉 \uFFFD\"\n";
    expect(Buffer.from(text).includes(Buffer.from([0xef, 0xbf, 0xbd]))).toBe(true);
    expect(utf8Violations(Buffer.from(text))).toEqual([]);
    expect(decodeFile(Buffer.from(text), "p.yaml")).toBe(text);
  });
});

describe("decodeFile", () => {
  it("throws a ValidationError naming the file and every field", () => {
    let err: unknown;
    try {
      decodeFile(withBad(SANDBOX), "sb.yaml");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).message).toBe([
      "sb.yaml is not valid UTF-8 (nothing was sent):",
      "  spec.labels.team: byte 55 (line 5, column 15) is not valid UTF-8",
      "  spec.resources[0].params.size: byte 124 (line 10, column 13) is not valid UTF-8",
    ].join("\n"));
  });
});

describe("files read by the templating", () => {
  const dir = mkdtempSync(join(tmpdir(), "eph-utf8-"));

  it("refuses a file with a bad byte before templating it", async () => {
    const file = join(dir, "plugin.yaml");
    writeFileSync(file, withBad(PLUGIN));
    await expect(loadTemplate(file, [])).rejects.toThrow(`${file} is not valid UTF-8 (nothing was sent):\n  spec.create[0].script: byte 118 (line 8, column 16)`);
  });

  it("refuses standard input with a bad byte", async () => {
    await expect(loadTemplate("-", [], { stdin: async () => withBad(PLUGIN) }))
      .rejects.toThrow("standard input is not valid UTF-8 (nothing was sent):\n  spec.create[0].script: byte 118 (line 8, column 16)");
  });

  it("reads valid multibyte files and standard input unchanged", async () => {
    const file = join(dir, "ok.yaml");
    writeFileSync(file, "name: db\nspec: {description: \"é 日本 🎉 \uFFFD\"}\n");
    expect(await loadTemplate(file, [])).toEqual({ name: "db", spec: { description: "é 日本 🎉 \uFFFD" } });
    expect(await loadTemplate("-", [], { stdin: async () => Buffer.from("name: 日本\n") })).toEqual({ name: "日本" });
  });

  it("refuses an embedded file with a bad byte, naming the field, the file and the offset", () => {
    const files: Record<string, Buffer> = {
      "/tpl/provision.sh": withBad("#!/bin/sh\necho caf<BAD>\n"),
      "/tpl/ok.sh": Buffer.from("#!/bin/sh\necho 'é 日本 🎉'\n"),
      "/tpl/blob.bin": BAD,
    };
    const readFile = (path: string) => files[path]!;
    const render = (doc: unknown) => renderTemplate(doc, { baseDir: "/tpl", vars: new Map(), readFile, file: "p.yaml" });
    let err: unknown;
    try {
      render({ spec: { create: [{ script: "@{embed: ./provision.sh}" }] } });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TemplateError);
    expect((err as TemplateError).problems).toEqual([{
      field: "spec.create[0].script",
      message: "@{embed: ./provision.sh}: /tpl/provision.sh is not valid UTF-8: byte 18 (line 2, column 9)",
    }]);
    // Valid text is embedded as it is, and the binary encoding takes any bytes.
    expect(render({ a: "@{embed: ./ok.sh}", b: "@{embed[binary]: ./blob.bin}" }))
      .toEqual({ a: "#!/bin/sh\necho 'é 日本 🎉'\n", b: BAD.toString("base64") });
  });

  it("refuses a --set value UTF-8 cannot carry (a lone surrogate)", async () => {
    const file = join(dir, "var.yaml");
    writeFileSync(file, "name: \"@{n}\"\n");
    await expect(loadTemplate(file, ["n=a\uD800"])).rejects.toThrow("--set n: the value holds a lone surrogate");
  });
});
