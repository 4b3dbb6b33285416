import { createServer } from "node:net";
import { join } from "node:path";
import { Aggregates, encode } from "@ephemera/events";
import { NO_AGGREGATE } from "@ephemera/eventstore";
import { waitFor } from "@ephemera/kit";
import { startCore, type Core } from "../../../test/support/core.js";
import { eph, type Live } from "./eph.testkit.js";

/** An address nothing listens on: a port taken from the OS and given back. */
async function closedAddress(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `127.0.0.1:${port}`;
}

// provision and seed print what `eph logs` must hand back byte for byte (seed's is not
// UTF-8); flaky fails its first attempt and succeeds on its retry.
const PLUGIN = `
name: hello-db@1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: provision
    outputs:
    - {name: host, valueFromPath: /tmp/host}
    script: |
      #!/bin/sh
      echo "creating db"
      printf db-42 > /tmp/host
  - name: seed
    inputs:
    - {name: host, valueFromStep: {name: provision, output: host}}
    script: |
      #!/bin/sh
      printf 'ok\\377\\n'
  - name: flaky
    retries: 1
    inputs:
    - {name: marker, valueFromSandbox: true}
    script: |
      #!/bin/sh
      if [ -n "$MARKER" ] && [ ! -e "$MARKER" ]; then touch "$MARKER"; echo "failing once"; exit 3; fi
      echo "flaky done"
`;

const SANDBOX = `
name: feature-x
spec:
  cluster: local
  resources:
  - {name: db, plugin: hello-db}
`;

/** A core with hello-db published and sandbox feature-x ready (`sandbox` may change its file). */
async function coreWithSandbox(sandbox = (_core: Core) => SANDBOX): Promise<Core> {
  const core = await startCore();
  try {
    for (const [file, args] of [["plugin.yaml", ["plugin", "apply"]], ["sb.yaml", ["sandbox", "apply"]]] as const) {
      const r = await eph(core.address, [...args, "-f", core.file(file, file === "sb.yaml" ? sandbox(core) : PLUGIN)]);
      if (r.code !== 0) throw new Error(`eph ${args.join(" ")} exited ${r.code}:\n${r.stderr}`);
    }
    return core;
  } catch (err) {
    await core.stop();
    throw err;
  }
}

describe("eph usage", () => {
  // Against an address nothing listens on: a command that called the API would exit 1.
  let nowhere: string;
  beforeAll(async () => { nowhere = await closedAddress(); });

  it("--help describes the commands and exits 0", async () => {
    const r = await eph(nowhere, ["--help"]);
    expect(r.code).toBe(0);
    for (const word of ["plugin|rp", "sandbox|sb", "logs", "events", "schema", "Exit codes"]) expect(r.stdout).toContain(word);
  });

  it("sandbox --help lists its subcommands", async () => {
    const r = await eph(nowhere, ["sandbox", "--help"]);
    expect(r.code).toBe(0);
    for (const word of ["apply", "get", "get-status", "list", "delete", "retry"]) expect(r.stdout).toContain(word);
  });

  it("sandbox apply --help shows -f, --filename and that it waits unless told --wait=false", async () => {
    const r = await eph(nowhere, ["sandbox", "apply", "--help"]);
    expect(r.code).toBe(0);
    const help = r.stdout.replace(/\s+/g, " ");
    expect(help).toContain('-f, --filename <file> sandbox file ("-" reads standard input)');
    expect(help).toContain("--wait [bool] wait until the sandbox is ready, printing progress on stderr; --wait=false returns at once " +
      "(default: true)");
    expect(help).toContain("--no-wait return at once (as --wait=false)");
    expect(help).toContain('--wait-timeout <duration> how long to wait (e.g. 90s, 3m, 1h30m, 2d, 1w; at most 365 days) (default: "3m")');
  });

  it("takes Signadot's names for the plugin commands: resourceplugin and rp", async () => {
    for (const name of ["resourceplugin", "rp", "plugin"]) {
      const r = await eph(nowhere, [name, "--help"]);
      expect({ name, code: r.code }).toEqual({ name, code: 0 });
      expect(r.stdout).toMatch(/^Usage: eph plugin\|rp \[options\] \[command\]/);
      expect(r.stdout).toContain("publish, inspect and delete resource plugin versions");
    }
    expect((await eph(nowhere, ["--help"])).stdout).toMatch(/plugin\|rp +publish/);
  });

  it("exits 2 on an unknown command, an unknown option, or no command, without calling the API", async () => {
    for (const args of [["frobnicate"], ["sandbox", "frobnicate"], ["sandbox", "list", "--bogus"], []]) {
      const r = await eph(nowhere, args);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stdout).toBe("");
      expect(r.stderr).not.toContain("unavailable");
    }
  });
});

describe("an unreachable API", () => {
  it("exits 1 naming the address", async () => {
    // A stopped ephemera: nothing answers at its address any more.
    const core = await startCore();
    await core.stop();
    const r = await eph(core.address, ["sandbox", "list", "-o", "json"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(`error: the ephemera API at ${core.address} is unavailable`);
  });

  it("--api overrides EPHEMERA_API", async () => {
    const core = await startCore();
    try {
      const r = await eph(await closedAddress(), ["--api", core.address, "plugin", "apply", "-f", core.file("plugin.yaml", PLUGIN)]);
      expect(r).toMatchObject({ code: 0, stdout: "plugin hello-db@1.0.0 created\n" });
      await core.waitForEvent("ephemera.plugin.published.v1", "hello-db");
    } finally {
      await core.stop();
    }
  });
});

describe("errors from the server", () => {
  it("prints every field violation the API finds, exits 2 and writes nothing", async () => {
    const core = await startCore();
    try {
      // Valid as a file; only the API knows that neither plugin is published.
      const doc = "name: feature-x\nspec:\n  cluster: local\n  resources:\n  - {name: db, plugin: nope}\n  - {name: cache, plugin: nada@1.0.0}\n";
      const r = await eph(core.address, ["sandbox", "apply", "-f", core.file("sb.yaml", doc)]);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toContain("  spec.resources[0].plugin: plugin nope is not published (no version of it exists)\n");
      expect(r.stderr).toContain("  spec.resources[1].plugin: plugin nada@1.0.0 is not published\n");
      expect(await core.events()).toEqual([]);
    } finally {
      await core.stop();
    }
  });
});

describe("eph logs", () => {
  let core: Core;
  beforeEach(async () => { core = await coreWithSandbox(); });
  afterEach(() => core.stop());

  it("streams every step's log to stdout, with step headers on stderr", async () => {
    const r = await eph(core.address, ["logs", "--sandbox", "feature-x", "--resource", "db"]);
    expect(r.code).toBe(0);
    expect(r.stdoutBytes).toEqual(Buffer.concat([Buffer.from("creating db\n"), Buffer.from([0x6f, 0x6b, 0xff, 0x0a]), Buffer.from("flaky done\n")]));
    expect(r.stderr).toBe("==> provision (create) <==\n==> seed (create) <==\n==> flaky (create) <==\n");
  });

  it("--step and --phase pick one step's log, without headers", async () => {
    const r = await eph(core.address, ["logs", "--sandbox", "feature-x", "--resource", "db", "--step", "seed", "--phase", "create"]);
    expect(r.code).toBe(0);
    expect(r.stdoutBytes).toEqual(Buffer.from([0x6f, 0x6b, 0xff, 0x0a]));
    expect(r.stderr).toBe("");
    const none = await eph(core.address, ["logs", "--sandbox", "feature-x", "--resource", "db", "--phase", "delete"]);
    expect(none).toMatchObject({ code: 0, stdout: "", stderr: "" });
  });

  it("exits 1 for an unknown sandbox or resource", async () => {
    const r = await eph(core.address, ["logs", "--sandbox", "nope", "--resource", "db"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("sandbox nope not found");
    const cache = await eph(core.address, ["logs", "--sandbox", "feature-x", "--resource", "cache"]);
    expect(cache.code).toBe(1);
    expect(cache.stderr).toContain("sandbox feature-x has no resource cache");
  });

  it("exits 2 without --resource, with a bad --phase or a bad --attempt", async () => {
    expect((await eph(core.address, ["logs", "--sandbox", "feature-x"])).code).toBe(2);
    expect((await eph(core.address, ["logs", "--sandbox", "feature-x", "--resource", "db", "--phase", "update"])).code).toBe(2);
    const zero = await eph(core.address, ["logs", "--sandbox", "feature-x", "--resource", "db", "--attempt", "0"]);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toContain('--attempt must be a positive whole number, not "0"');
  });
});

describe("eph logs of a step that ran twice", () => {
  let core: Core;
  beforeEach(async () => {
    // flaky creates the marker on its first attempt and fails; its automatic retry succeeds.
    core = await coreWithSandbox((c) => SANDBOX.replace("plugin: hello-db}", `plugin: hello-db, params: {marker: "${join(c.scratch, "marker")}"}}`));
  });
  afterEach(() => core.stop());

  it("shows the latest attempt, naming it, and --attempt 1 the first", async () => {
    const latest = await eph(core.address, ["logs", "--sandbox", "feature-x", "--resource", "db", "--step", "flaky"]);
    expect(latest).toMatchObject({ code: 0, stdout: "flaky done\n", stderr: "" });
    const all = await eph(core.address, ["logs", "--sandbox", "feature-x", "--resource", "db"]);
    expect(all.stderr).toBe("==> provision (create) <==\n==> seed (create) <==\n==> flaky (create, attempt 2) <==\n");
    const first = await eph(core.address, ["logs", "--sandbox", "feature-x", "--resource", "db", "--attempt", "1"]);
    expect(first.code).toBe(0);
    expect(first.stdoutBytes).toEqual(Buffer.concat([Buffer.from("creating db\n"), Buffer.from([0x6f, 0x6b, 0xff, 0x0a]), Buffer.from("failing once\n")]));
    expect(first.stderr).toBe("==> provision (create) <==\n==> seed (create) <==\n==> flaky (create) <==\n");
    const second = await eph(core.address, ["logs", "--sandbox", "feature-x", "--resource", "db", "--attempt", "2"]);
    expect(second).toMatchObject({ code: 0, stdout: "flaky done\n", stderr: "==> flaky (create, attempt 2) <==\n" });
  });
});

describe("eph events", () => {
  let core: Core;
  beforeEach(async () => { core = await coreWithSandbox(); });
  afterEach(() => core.stop());

  it("-o json prints one envelope per line, as written, and nothing else", async () => {
    const r = await eph(core.address, ["events", "-o", "json", "--sandbox", "feature-x", "--type", "ephemera.sandbox.*"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    const lines = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
    const written = (await core.events()).filter((e) => e.aggregate === "sandbox" && e.subject === "feature-x");
    expect(lines.map((e) => e.type)).toEqual([
      "ephemera.sandbox.created.v1",
      "ephemera.sandbox.resource_provision_requested.v1",
      "ephemera.sandbox.resource_provisioned.v1",
      "ephemera.sandbox.ready.v1",
    ]);
    expect(lines.map((e) => [e.id, e.type, e.time])).toEqual(written.map((e) => [e.id, e.type, e.time]));
  });

  it("--sandbox includes its workflows and step runs, with output values left out", async () => {
    const r = await eph(core.address, ["events", "-o", "json", "--sandbox", "feature-x"]);
    expect(r.code).toBe(0);
    const subjects = new Set(r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l).subject as string));
    const rk = `${core.tag}00000001`;
    expect(subjects).toEqual(new Set(["feature-x", `${rk}.db.create`, `${rk}.db.create.provision.1`, `${rk}.db.create.seed.1`,
      `${rk}.db.create.flaky.1`]));
    expect(r.stdout).toContain('"name":"host"');
    expect(r.stdout).not.toContain(Buffer.from("db-42").toString("base64"));
  });

  it("--sandbox includes the tunnel sessions that served it, with every connection's byte counts, and no other session", async () => {
    const session = async (id: string, sandboxes: string[], target: string) => {
      await core.store.append(Aggregates.tunnel, id, NO_AGGREGATE, [
        encode({ type: "ephemera.tunnel.session_opened.v1", data: { sessionId: id, subject: "ana", sandboxes, peer: "10.0.0.2:5000", client: "eph", tunnel: "t-1" } }),
      ], { source: "tunnel" });
      const { revision, version } = await core.store.read(Aggregates.tunnel, id);
      await core.store.append(Aggregates.tunnel, id, { revision, version }, [
        encode({ type: "ephemera.tunnel.connection_closed.v1", data: {
          sessionId: id, direction: "to_cluster", sandbox: "", local: "", target, bytesToWorkstation: 120, bytesToCluster: 80,
          startedAt: "2026-11-26T10:00:00Z", endedAt: "2026-11-26T10:00:01Z", error: "" } }),
      ], { source: "tunnel" });
    };
    await session("s-mine", ["feature-x"], "backend.demo.svc:8080");
    await session("s-other", ["feature-y"], "other.demo.svc:8080");
    const r = await eph(core.address, ["events", "-o", "json", "--sandbox", "feature-x", "--type", "ephemera.tunnel.*"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
    expect(lines.map((e) => [e.type, e.subject])).toEqual([
      ["ephemera.tunnel.session_opened.v1", "s-mine"],
      ["ephemera.tunnel.connection_closed.v1", "s-mine"],
    ]);
    expect(lines[1].data).toMatchObject({ target: "backend.demo.svc:8080", bytesToWorkstation: 120, bytesToCluster: 80 });
  });

  it("prints time, type and subject for people", async () => {
    const r = await eph(core.address, ["events"]);
    expect(r.code).toBe(0);
    const written = await core.events();
    expect(r.stdout).toBe(written.map((e) => `${e.time}  ${e.type}  ${e.subject}\n`).join(""));
  });

  it("--follow prints what is written next until interrupted, then exits 0", async () => {
    const abort = new AbortController();
    const live: Live = { stdout: "", stderr: "" };
    const running = eph(core.address, ["events", "--follow", "-o", "json", "--type", "ephemera.sandbox.*"], { signal: abort.signal, live });
    await waitFor(() => live.stdout.includes("ephemera.sandbox.ready.v1"), { what: "the events so far" });
    expect((await eph(core.address, ["sandbox", "delete", "feature-x", "--force"])).code).toBe(0);
    await waitFor(() => live.stdout.includes("ephemera.sandbox.deleted.v1"), { what: "the delete, live" });
    abort.abort();
    const r = await running;
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l).type).slice(-2)).toEqual([
      "ephemera.sandbox.deleting.v1", "ephemera.sandbox.deleted.v1",
    ]);
  });
});
