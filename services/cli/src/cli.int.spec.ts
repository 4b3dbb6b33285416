import { ValidationError, waitFor } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { FakeApi, eph } from "./fake-api.testkit.js";

let api: FakeApi;
beforeEach(async () => { api = await FakeApi.start(); });
afterEach(() => api.stop());

describe("eph usage", () => {
  it("--help describes the commands and exits 0", async () => {
    const r = await eph(api.address, ["--help"]);
    expect(r.code).toBe(0);
    for (const word of ["plugin|rp", "sandbox|sb", "logs", "events", "schema", "Exit codes"]) expect(r.stdout).toContain(word);
  });

  it("sandbox --help lists its subcommands", async () => {
    const r = await eph(api.address, ["sandbox", "--help"]);
    expect(r.code).toBe(0);
    for (const word of ["apply", "get", "list", "delete"]) expect(r.stdout).toContain(word);
  });

  it("exits 2 on an unknown command, an unknown option, or no command", async () => {
    for (const args of [["frobnicate"], ["sandbox", "frobnicate"], ["sandbox", "list", "--bogus"], []]) {
      const r = await eph(api.address, args);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stdout).toBe("");
    }
    expect(api.received).toEqual([]);
  });
});

describe("an unreachable API", () => {
  it("exits 1 naming the address", async () => {
    const address = api.address;
    api.stop();
    const r = await eph(address, ["sandbox", "list", "-o", "json"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(`error: the ephemera API at ${address} is unavailable`);
  });

  it("--api overrides EPHEMERA_API", async () => {
    const r = await eph("127.0.0.1:1", ["--api", api.address, "sandbox", "list"]);
    expect(r.code).toBe(0);
    expect(api.requestsOf("sandbox.list")).toHaveLength(1);
  });
});

describe("errors from the server", () => {
  it("prints every field violation and exits 2", async () => {
    api.failures.set("sandbox.list", new ValidationError([
      { field: "spec.cluster", description: "is required", rule: "required" },
      { field: "spec.resources[0].plugin", description: "plugin nope is not published", rule: "unknown-plugin" },
    ]));
    const r = await eph(api.address, ["sandbox", "list"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("  spec.cluster: is required\n");
    expect(r.stderr).toContain("  spec.resources[0].plugin: plugin nope is not published\n");
  });
});

describe("eph logs", () => {
  beforeEach(() => {
    api.logChunks = [
      pb.LogChunk.fromPartial({ step: "provision", phase: "create", runId: "r1", data: Buffer.from("creating db\n") }),
      pb.LogChunk.fromPartial({ step: "seed", phase: "create", runId: "r2", data: Buffer.from([0x6f, 0x6b, 0xff, 0x0a]) }),
    ];
  });

  it("streams every step's log to stdout, with step headers on stderr", async () => {
    const r = await eph(api.address, ["logs", "--sandbox", "sb", "--resource", "db"]);
    expect(r.code).toBe(0);
    expect(r.stdoutBytes).toEqual(Buffer.concat([Buffer.from("creating db\n"), Buffer.from([0x6f, 0x6b, 0xff, 0x0a])]));
    expect(r.stderr).toBe("==> provision (create) <==\n==> seed (create) <==\n");
    expect(api.requestsOf("logs.get")).toEqual([{ sandbox: "sb", resource: "db", step: "", phase: "", attempt: 0 }]);
  });

  it("passes --step and --phase", async () => {
    const r = await eph(api.address, ["logs", "--sandbox", "sb", "--resource", "db", "--step", "seed", "--phase", "create"]);
    expect(r.code).toBe(0);
    expect(api.requestsOf("logs.get")).toEqual([{ sandbox: "sb", resource: "db", step: "seed", phase: "create", attempt: 0 }]);
    expect(r.stderr).toBe("");
  });

  it("exits 2 without --resource or with a bad --phase", async () => {
    expect((await eph(api.address, ["logs", "--sandbox", "sb"])).code).toBe(2);
    expect((await eph(api.address, ["logs", "--sandbox", "sb", "--resource", "db", "--phase", "update"])).code).toBe(2);
  });
});

describe("eph events", () => {
  const envelope = (type: string, subject: string) =>
    JSON.stringify({ id: "01J", type, subject, time: "2026-01-02T03:04:05.000Z", data: { a: 1 } }, null, 2);
  beforeEach(() => {
    api.events = [envelope("ephemera.sandbox.created.v1", "feature-x"), envelope("ephemera.sandbox.ready.v1", "feature-x")];
  });

  it("-o json prints one envelope per line and nothing else", async () => {
    const r = await eph(api.address, ["events", "-o", "json", "--sandbox", "feature-x", "--type", "ephemera.sandbox.*"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines.map((l) => JSON.parse(l).type)).toEqual(["ephemera.sandbox.created.v1", "ephemera.sandbox.ready.v1"]);
    expect(api.requestsOf("events.watch")).toEqual([{ follow: false, sandbox: "feature-x", typeGlob: "ephemera.sandbox.*" }]);
  });

  it("prints time, type and subject for people", async () => {
    const r = await eph(api.address, ["events"]);
    expect(r.stdout).toBe(
      "2026-01-02T03:04:05.000Z  ephemera.sandbox.created.v1  feature-x\n2026-01-02T03:04:05.000Z  ephemera.sandbox.ready.v1  feature-x\n",
    );
  });

  it("--follow keeps printing until interrupted, then exits 0", async () => {
    const abort = new AbortController();
    const live = { stdout: "", stderr: "" };
    const running = eph(api.address, ["events", "--follow", "-o", "json"], { signal: abort.signal, live });
    await waitFor(() => live.stdout.split("\n").length === 3, { what: "the replayed events" });
    abort.abort();
    const r = await running;
    expect(r.code).toBe(0);
    expect(api.requestsOf("events.watch")).toEqual([{ follow: true, sandbox: "", typeGlob: "" }]);
  });
});
