import * as pb from "@ephemera/proto";
import { FakeApi, eph } from "./fake-api.testkit.js";

let api: FakeApi;
beforeEach(async () => {
  api = await FakeApi.start();
  const version = (name: string, v: string, sandboxes: string[] = []) =>
    pb.ResourcePluginVersion.fromPartial({
      name, version: v, digest: `sha256:${name}${v}`, createdAt: "2026-01-02T03:04:05.678Z", sandboxes,
      spec: { description: "a db", runner: { image: "debian:bookworm-slim" }, create: [{ name: "provision", script: "#!/bin/sh\n" }] },
    });
  api.plugins = [version("hello-db", "1.2.0", ["a", "b"]), version("hello-db", "1.10.0"), version("cache", "0.0.0", ["a"])];
});
afterEach(() => api.stop());

describe("eph plugin list", () => {
  it("prints name, version, how many sandboxes use it, and when it was created", async () => {
    const r = await eph(api.address, ["plugin", "list"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe([
      "NAME       VERSION   SANDBOXES   CREATED",
      "cache      0.0.0     1           2026-01-02T03:04:05Z",
      "hello-db   1.10.0    0           2026-01-02T03:04:05Z",
      "hello-db   1.2.0     2           2026-01-02T03:04:05Z",
      "",
    ].join("\n"));
  });

  it("-o json prints one array naming the sandboxes", async () => {
    const r = await eph(api.address, ["rp", "list", "-o", "json"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual([
      { name: "cache", version: "0.0.0", digest: "sha256:cache0.0.0", createdAt: "2026-01-02T03:04:05.678Z", sandboxes: ["a"] },
      { name: "hello-db", version: "1.10.0", digest: "sha256:hello-db1.10.0", createdAt: "2026-01-02T03:04:05.678Z", sandboxes: [] },
      { name: "hello-db", version: "1.2.0", digest: "sha256:hello-db1.2.0", createdAt: "2026-01-02T03:04:05.678Z", sandboxes: ["a", "b"] },
    ]);
  });
});

describe("eph plugin versions", () => {
  it("lists one plugin's versions, newest first", async () => {
    const r = await eph(api.address, ["resourceplugin", "versions", "hello-db"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("VERSION   SANDBOXES   CREATED\n1.10.0    0           2026-01-02T03:04:05Z\n1.2.0     2           2026-01-02T03:04:05Z\n");
  });

  it("exits 1 for a plugin without versions", async () => {
    const r = await eph(api.address, ["plugin", "versions", "nope", "-o", "json"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("plugin nope not found");
  });
});

describe("eph plugin get", () => {
  it("-o json prints the version with its file-shaped spec", async () => {
    const r = await eph(api.address, ["plugin", "get", "hello-db@1.2.0", "-o", "json"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      name: "hello-db", version: "1.2.0", digest: "sha256:hello-db1.2.0", createdAt: "2026-01-02T03:04:05.678Z", sandboxes: ["a", "b"],
      spec: { description: "a db", runner: { image: "debian:bookworm-slim" }, create: [{ name: "provision", script: "#!/bin/sh\n" }] },
    });
    expect(api.requestsOf("plugin.get")).toEqual([{ ref: "hello-db@1.2.0" }]);
  });

  it("prints YAML by default", async () => {
    const r = await eph(api.address, ["plugin", "get", "cache"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("name: cache\nversion: 0.0.0\n");
    expect(r.stdout).toContain("  runner:\n    image: debian:bookworm-slim\n");
  });
});

describe("eph plugin delete", () => {
  it("deletes a version and says which", async () => {
    const r = await eph(api.address, ["plugin", "delete", "hello-db@1.10.0"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("plugin hello-db@1.10.0 deleted\n");
    expect(api.plugins.map((p) => `${p.name}@${p.version}`)).toEqual(["hello-db@1.2.0", "cache@0.0.0"]);
  });

  it("exits 1 naming the sandboxes when the version is in use", async () => {
    const r = await eph(api.address, ["plugin", "delete", "hello-db@1.2.0"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("error: plugin hello-db@1.2.0 is used by sandboxes a, b");
    expect(api.plugins).toHaveLength(3);
  });

  it("exits 2 without a ref or a file", async () => {
    const r = await eph(api.address, ["plugin", "delete"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("give a plugin name or -f FILE");
    expect(api.received).toEqual([]);
  });
});

describe("eph plugin apply", () => {
  it("exits 2 without -f", async () => {
    const r = await eph(api.address, ["plugin", "apply"]);
    expect(r.code).toBe(2);
    expect(api.received).toEqual([]);
  });
});
