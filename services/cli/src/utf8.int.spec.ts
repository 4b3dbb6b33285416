// eph refuses a plugin or sandbox file that is not UTF-8 before any call: exit 2, the field,
// the byte offset and its line and column named, nothing stored; multibyte text goes through unchanged.
import { eph, useCore } from "./eph.testkit.js";

const BAD = Buffer.from([0xc3, 0x28]);
const withBad = (text: string) => Buffer.concat(text.split("<BAD>").flatMap((part, i) => (i === 0 ? [Buffer.from(part)] : [BAD, Buffer.from(part)])));

const plugin = (script: string, description = "a db") => `name: db
spec:
  description: "${description}"
  runner: {image: debian:bookworm-slim}
  create:
  - name: provision
    script: |
      #!/bin/sh
      ${script}
`;

const sandbox = (team: string) => `name: a
spec:
  cluster: local
  labels: {team: "${team}"}
  resources:
  - {name: db, plugin: db}
`;

const core = useCore();
const api = () => core().address;

describe("a file that is not UTF-8", () => {
  it("eph plugin apply -f: exits 2 naming spec.create[0].script and the offset, and stores nothing", async () => {
    const bytes = withBad(plugin('echo "caf<BAD>"'));
    const offset = bytes.indexOf(BAD);
    const r = await eph(api(), ["plugin", "apply", "-f", core().file("plugin.yaml", bytes)]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("plugin.yaml is not valid UTF-8 (nothing was sent):\n");
    expect(r.stderr).toContain(`  spec.create[0].script: byte ${offset} (line 9, column 16) is not valid UTF-8\n`);
    expect(await core().events()).toEqual([]);
    const get = await eph(api(), ["plugin", "get", "db"]);
    expect(get.code).toBe(1);
    expect(get.stderr).toContain("db");
  });

  it("eph plugin apply -f -: the same from standard input", async () => {
    const r = await eph(api(), ["plugin", "apply", "-f", "-"], { stdin: withBad(plugin('echo "caf<BAD>"')) });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("standard input is not valid UTF-8 (nothing was sent):\n  spec.create[0].script: byte ");
    expect(await core().events()).toEqual([]);
  });

  it("eph sandbox apply -f: exits 2 naming the label and the offset, and creates nothing", async () => {
    await eph(api(), ["plugin", "apply", "-f", core().file("plugin.yaml", plugin("true"))]);
    const before = await core().events();
    const bytes = withBad(sandbox("pay<BAD>"));
    const r = await eph(api(), ["sandbox", "apply", "-f", core().file("sandbox.yaml", bytes)]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`  spec.labels.team: byte ${bytes.indexOf(BAD)} (line 4, column 22) is not valid UTF-8\n`);
    expect(await core().events()).toEqual(before);
    expect((await eph(api(), ["sandbox", "get", "a"])).code).toBe(1);
  });
});

it("multibyte text and a literal U+FFFD are stored as written", async () => {
  const text = "é 日本 🎉 \uFFFD";
  const r = await eph(api(), ["plugin", "apply", "-f", core().file("plugin.yaml", plugin(`echo '${text}'`, text))]);
  expect(r).toMatchObject({ code: 0, stdout: "plugin db@0.0.0 created\n" });
  const stored = JSON.parse((await eph(api(), ["plugin", "get", "db", "-o", "json"])).stdout);
  expect(stored.spec.description).toBe(text);
  expect(stored.spec.create[0].script).toBe(`#!/bin/sh\necho '${text}'\n`);
});
