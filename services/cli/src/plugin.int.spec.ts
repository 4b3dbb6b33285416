import type { RecordedEvent } from "@ephemera/eventstore";
import { eph, useCore } from "./eph.testkit.js";

const plugin = (ref: string) => `
name: ${ref}
spec:
  description: a db
  runner: {image: debian:bookworm-slim}
  create:
  - name: provision
    script: |
      #!/bin/sh
`;

const sandbox = (name: string, ...resources: string[]) => `
name: ${name}
spec:
  cluster: local
  resources:
${resources.map((r) => `  - {name: ${r.split("=")[0]}, plugin: "${r.split("=")[1]}"}`).join("\n")}
`;

const core = useCore();
const api = () => core().address;

async function ok(args: string[], file?: [string, string]): Promise<string> {
  const r = await eph(api(), [...args, ...(file ? ["-f", core().file(...file)] : [])]);
  if (r.code !== 0) throw new Error(`eph ${args.join(" ")} exited ${r.code}:\n${r.stderr}`);
  return r.stdout;
}

/** hello-db 1.2.0 (used by sandboxes a and b), hello-db 1.10.0 (unused), cache 0.0.0 (used by a). */
beforeEach(async () => {
  for (const ref of ["hello-db@1.2.0", "hello-db@1.10.0", "cache"]) await ok(["plugin", "apply"], ["plugin.yaml", plugin(ref)]);
  await ok(["sandbox", "apply"], ["a.yaml", sandbox("a", "db=hello-db@1.2.0", "cache=cache")]);
  await ok(["sandbox", "apply"], ["b.yaml", sandbox("b", "db=hello-db@1.2.0")]);
});

/** The published event of each version, by `name@version`. */
async function published(): Promise<Map<string, RecordedEvent>> {
  const events = (await core().events()).filter((e) => e.type === "ephemera.plugin.published.v1");
  return new Map(events.map((e) => {
    const data = e.data as { name: string; version: string };
    return [`${data.name}@${data.version}`, e];
  }));
}

/** The entry `plugin list -o json` has for a published version. */
const summary = (e: RecordedEvent, sandboxes: string[]) => {
  const data = e.data as { name: string; version: string; digest: string };
  return { name: data.name, version: data.version, digest: data.digest, createdAt: e.time, sandboxes, deleting: false };
};

const seconds = (e: RecordedEvent | undefined) => e?.time.replace(/\.\d+Z$/, "Z");

describe("eph plugin list", () => {
  it("prints the highest version of each plugin (semver order), how many sandboxes use it, and when it was published", async () => {
    const p = await published();
    expect(await ok(["plugin", "list"])).toBe([
      "NAME       VERSION   SANDBOXES   CREATED",
      `cache      0.0.0     1           ${seconds(p.get("cache@0.0.0"))}`,
      `hello-db   1.10.0    0           ${seconds(p.get("hello-db@1.10.0"))}`,
      "",
    ].join("\n"));
  });

  it("-A prints every version", async () => {
    const p = await published();
    expect(await ok(["plugin", "list", "-A"])).toBe([
      "NAME       VERSION   SANDBOXES   CREATED",
      `cache      0.0.0     1           ${seconds(p.get("cache@0.0.0"))}`,
      `hello-db   1.10.0    0           ${seconds(p.get("hello-db@1.10.0"))}`,
      `hello-db   1.2.0     2           ${seconds(p.get("hello-db@1.2.0"))}`,
      "",
    ].join("\n"));
  });

  it("--all-versions -o json prints one array naming the sandboxes", async () => {
    const p = await published();
    expect(p.get("cache@0.0.0")?.data).toMatchObject({ digest: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(JSON.parse(await ok(["rp", "list", "--all-versions", "-o", "json"]))).toEqual([
      summary(p.get("cache@0.0.0")!, ["a"]),
      summary(p.get("hello-db@1.10.0")!, []),
      summary(p.get("hello-db@1.2.0")!, ["a", "b"]),
    ]);
  });
});

describe("eph plugin versions", () => {
  it("lists one plugin's versions, newest first", async () => {
    const p = await published();
    expect(await ok(["resourceplugin", "versions", "hello-db"])).toBe([
      "VERSION   SANDBOXES   CREATED",
      `1.10.0    0           ${seconds(p.get("hello-db@1.10.0"))}`,
      `1.2.0     2           ${seconds(p.get("hello-db@1.2.0"))}`,
      "",
    ].join("\n"));
  });

  it("exits 1 for a plugin without versions", async () => {
    const r = await eph(api(), ["plugin", "versions", "nope", "-o", "json"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("plugin nope not found");
  });
});

describe("eph plugin get", () => {
  it("-o json prints the version with its file-shaped spec", async () => {
    const p = await published();
    expect(JSON.parse(await ok(["plugin", "get", "hello-db@1.2.0", "-o", "json"]))).toEqual({
      ...summary(p.get("hello-db@1.2.0")!, ["a", "b"]),
      spec: { description: "a db", runner: { image: "debian:bookworm-slim" }, create: [{ name: "provision", script: "#!/bin/sh\n" }] },
    });
  });

  it("takes the latest version when none is named", async () => {
    expect(JSON.parse(await ok(["plugin", "get", "hello-db", "-o", "json"])).version).toBe("1.10.0");
  });

  it("prints YAML by default", async () => {
    const out = await ok(["plugin", "get", "cache"]);
    expect(out).toContain("name: cache\nversion: 0.0.0\n");
    expect(out).toContain("  runner:\n    image: debian:bookworm-slim\n");
  });
});

describe("eph plugin delete", () => {
  const versions = async () => JSON.parse(await ok(["plugin", "list", "-A", "-o", "json"])).map((v: { name: string; version: string }) => `${v.name}@${v.version}`);

  it("deletes a version and says which", async () => {
    expect(await ok(["plugin", "delete", "hello-db@1.10.0"])).toBe("plugin hello-db@1.10.0 deleted\n");
    const deleted = await core().waitForEvent("ephemera.plugin.version_deleted.v1", "hello-db");
    expect(deleted.data).toEqual({ name: "hello-db", version: "1.10.0" });
    expect(await versions()).toEqual(["cache@0.0.0", "hello-db@1.2.0"]);
  });

  it("removes a version in use only once its last sandbox is gone, and lets no new sandbox use it meanwhile", async () => {
    // Deleting a version is a process (docs/architecture.md): the API accepts the delete and
    // marks the version, and the CLI says it stays until a and b go.
    const r = await eph(api(), ["plugin", "delete", "hello-db@1.2.0"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("plugin hello-db@1.2.0 deleting: still used by a, b; it goes once they are deleted\n");
    expect(JSON.parse(await ok(["plugin", "get", "hello-db@1.2.0", "-o", "json"]))).toMatchObject({ deleting: true, sandboxes: ["a", "b"] });
    expect((await core().waitForEvent("ephemera.plugin.version_delete_requested.v1", "hello-db")).data)
      .toEqual({ name: "hello-db", version: "1.2.0" });
    expect(await versions()).toEqual(["cache@0.0.0", "hello-db@1.10.0", "hello-db@1.2.0"]);
    const refused = await eph(api(), ["sandbox", "apply", "-f", core().file("c.yaml", sandbox("c", "db=hello-db@1.2.0"))]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("  spec.resources[0].plugin: plugin hello-db@1.2.0 is being deleted: no new sandbox may use it\n");

    await ok(["sandbox", "delete", "a"]);
    expect(await versions()).toContain("hello-db@1.2.0");
    await ok(["sandbox", "delete", "b"]);
    await core().waitForEvent("ephemera.plugin.version_deleted.v1", "hello-db");
    expect(await versions()).toEqual(["cache@0.0.0", "hello-db@1.10.0"]);
  });

  it("exits 2 without a ref or a file, and deletes nothing", async () => {
    const before = await core().store.position();
    const r = await eph(api(), ["plugin", "delete"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("give a plugin name or -f FILE");
    expect(await core().store.position()).toBe(before);
  });

  it("exits 1 for a version that does not exist", async () => {
    const r = await eph(api(), ["plugin", "delete", "hello-db@9.9.9"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("plugin hello-db@9.9.9 not found");
  });
});

describe("eph plugin apply", () => {
  it("ignores a stray top-level version with a warning on stderr, and keeps input and output types", async () => {
    const file = core().file("typed.yaml", `
name: typed@1.0.0
version: 1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: provision
    inputs: [{name: region, type: string, valueFromSandbox: true}]
    outputs: [{name: host, type: string, valueFromPath: /tmp/out/host}]
    script: |
      #!/bin/sh
`);
    const r = await eph(api(), ["plugin", "apply", "-f", file]);
    expect(r.stderr).toContain('warning: top-level "version: 1.0.0" is ignored');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("plugin typed@1.0.0 created\n");
    const got = JSON.parse(await ok(["plugin", "get", "typed@1.0.0", "-o", "json"])) as { spec: { create: [{ inputs: [{ type: string }]; outputs: [{ type: string }] }] } };
    expect(got.spec.create[0].inputs[0].type).toBe("string");
    expect(got.spec.create[0].outputs[0].type).toBe("string");
  });

  it("--dry-run says it would publish, or change nothing, and refuses a changed published version, writing nothing", async () => {
    const before = await core().store.position();
    const fresh = await eph(api(), ["plugin", "apply", "--dry-run", "-f", core().file("new.yaml", plugin("newdb@2.0.0"))]);
    expect(fresh.code).toBe(0);
    expect(fresh.stdout).toBe("plugin newdb@2.0.0: would be published (dry run: nothing written)\n");
    const same = await eph(api(), ["plugin", "apply", "--dry-run", "-f", core().file("same.yaml", plugin("hello-db@1.2.0"))]);
    expect(same.stdout).toBe("plugin hello-db@1.2.0: would change nothing (published as is) (dry run: nothing written)\n");
    const changed = await eph(api(), ["plugin", "apply", "--dry-run", "-f", core().file("changed.yaml", plugin("hello-db@1.2.0").replace("a db", "another db"))]);
    expect(changed.code).not.toBe(0);
    expect(changed.stderr).toMatch(/1\.2\.0/);
    expect(await core().store.position()).toBe(before);
    expect((await eph(api(), ["plugin", "get", "newdb"])).code).toBe(1);
  });

  it("exits 2 without -f, and publishes nothing", async () => {
    const before = await core().store.position();
    expect((await eph(api(), ["plugin", "apply"])).code).toBe(2);
    expect(await core().store.position()).toBe(before);
  });
});
