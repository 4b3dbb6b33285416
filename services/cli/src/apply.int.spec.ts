import { join } from "node:path";
import { waitFor } from "@ephemera/kit";
import type { Core } from "../../../test/support/core.js";
import { eph, useCore, type Live } from "./eph.testkit.js";

// provision waits for $GATE (when given) so a test sees it running; seed waits for $HOLD
// and fails with exit code $FAIL when asked, after printing what a migration would.
const PROVISION_SH = `#!/bin/sh
echo "creating $DBNAME"
if [ -n "$GATE" ]; then while [ ! -e "$GATE" ]; do sleep 0.05; done; fi
printf db > /tmp/host
`;

const PLUGIN = `
name: hello-db@1.0.0
spec:
  description: a pretend database
  runner:
    image: debian:bookworm-slim
    namespace: ephemera
  create:
  - name: provision
    inputs:
    - {name: dbname, valueFromSandbox: true}
    - {name: gate, valueFromSandbox: true}
    outputs:
    - {name: host, valueFromPath: /tmp/host}
    script: "@{embed: ./provision.sh}"
  - name: seed
    inputs:
    - name: host
      valueFromStep: {name: provision, output: host}
      as: {env: HOST}
    - {name: hold, valueFromSandbox: true}
    - {name: fail, valueFromSandbox: true}
    script: |
      #!/bin/sh
      echo "seeding @{target} on $HOST"
      if [ -n "$HOLD" ]; then while [ ! -e "$HOLD" ]; do sleep 0.05; done; fi
      if [ -n "$FAIL" ]; then echo migrating; echo "error: relation already exists"; exit "$FAIL"; fi
  delete:
  - name: deprovision
    inputs:
    - {name: host, valueFromStep: {name: provision, output: host}}
    script: |
      #!/bin/sh
      echo bye
`;

const INVALID_PLUGIN = `
name: hello-db@1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: provision
    script: "echo no interpreter line"
  - name: seed
    inputs:
    - {name: host, valueFromStep: {name: nowhere, output: host}}
    script: |
      #!/bin/sh
      true
`;

/** The sandbox file, with these params of its resource besides dbname. */
const sandbox = (params: Record<string, string> = {}) => `
name: "feature-@{suffix}"
spec:
  cluster: local
  labels: {owner: "@{owner}"}
  defaultRouteGroup:
    endpoints: [{name: web, target: "http://web:8080"}]
  resources:
  - name: db
    plugin: hello-db
    params: ${JSON.stringify({ dbname: "orders", ...params })}
`;

const core = useCore();
const api = () => core().address;
const file = (name: string, content: string) => core().file(name, content);
const typesOf = async (c: Core) => (await c.events()).map((e) => e.type);

beforeEach(() => {
  file("provision.sh", PROVISION_SH);
});

describe("eph plugin apply", () => {
  it("publishes the validated, templated plugin and says it was created, then unchanged", async () => {
    const path = file("plugin.yaml", PLUGIN);
    const first = await eph(api(), ["plugin", "apply", "-f", path, "--set", "target=orders"]);
    expect(first).toMatchObject({ code: 0, stdout: "plugin hello-db@1.0.0 created\n", stderr: "" });
    const published = await core().waitForEvent("ephemera.plugin.published.v1", "hello-db");
    const data = published.data as { version: string; spec: { create: Array<{ script: string }> } };
    expect(data.version).toBe("1.0.0");
    expect(data.spec.create.map((s) => s.script)).toEqual([
      PROVISION_SH,
      expect.stringMatching(/^#!\/bin\/sh\necho "seeding orders on \$HOST"\n/),
    ]);
    const again = await eph(api(), ["rp", "apply", "-f", path, "--set", "target=orders"]);
    expect(again).toMatchObject({ code: 0, stdout: "plugin hello-db@1.0.0 unchanged\n" });
    expect(await typesOf(core())).toEqual(["ephemera.plugin.published.v1"]);
  });

  it("exits 1 with the server's message when the version is published with another spec", async () => {
    const path = file("plugin.yaml", PLUGIN);
    expect((await eph(api(), ["plugin", "apply", "-f", path, "--set", "target=a"])).code).toBe(0);
    const r = await eph(api(), ["plugin", "apply", "-f", path, "--set", "target=b"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("error: plugin hello-db@1.0.0 is already published with a different spec");
    expect(await typesOf(core())).toEqual(["ephemera.plugin.published.v1"]);
  });

  it("reads standard input with -f -", async () => {
    const r = await eph(api(), ["plugin", "apply", "-f", "-"], {
      stdin: PLUGIN.replace('"@{embed: ./provision.sh}"', "|\n      #!/bin/sh\n      true").replace("@{target}", "x"),
    });
    expect(r).toMatchObject({ code: 0, stdout: "plugin hello-db@1.0.0 created\n" });
    await core().waitForEvent("ephemera.plugin.published.v1", "hello-db");
  });

  it("exits 2 listing every violation with its field path, and writes nothing", async () => {
    const r = await eph(api(), ["plugin", "apply", "-f", file("bad.yaml", INVALID_PLUGIN)]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/^ {2}spec\.create\[0\]\.script: .+$/m);
    expect(r.stderr).toMatch(/^ {2}spec\.create\[1\]\.inputs\[0\]\.valueFromStep\.name: .+$/m);
    expect(await core().events()).toEqual([]);
  });

  it("exits 2 naming every unset variable", async () => {
    const r = await eph(api(), ["sandbox", "apply", "-f", file("sb.yaml", sandbox())]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("suffix");
    expect(r.stderr).toContain("owner");
    expect(await core().events()).toEqual([]);
  });

  it("exits 2 for a file that does not exist", async () => {
    const r = await eph(api(), ["plugin", "apply", "-f", join(core().scratch, "missing.yaml")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("missing.yaml");
  });
});

describe("eph plugin delete -f", () => {
  const versions = async () =>
    JSON.parse((await eph(api(), ["plugin", "list", "-o", "json"])).stdout).map((p: { name: string; version: string }) => `${p.name}@${p.version}`);

  it("deletes exactly the version the file publishes", async () => {
    const v1 = file("plugin.yaml", PLUGIN);
    const v2 = file("plugin-2.yaml", PLUGIN.replace("hello-db@1.0.0", "hello-db@2.0.0"));
    for (const path of [v1, v2]) expect((await eph(api(), ["plugin", "apply", "-f", path, "--set", "target=x"])).code).toBe(0);
    const r = await eph(api(), ["plugin", "delete", "-f", v1]);
    expect(r).toMatchObject({ code: 0, stdout: "plugin hello-db@1.0.0 deleted\n" });
    const deleted = await core().waitForEvent("ephemera.plugin.version_deleted.v1", "hello-db");
    expect(deleted.data).toEqual({ name: "hello-db", version: "1.0.0" });
    expect(await versions()).toEqual(["hello-db@2.0.0"]);
  });

  it("takes a bare name as version 0.0.0", async () => {
    const path = file("plugin.yaml", PLUGIN.replace("hello-db@1.0.0", "hello-db"));
    expect((await eph(api(), ["plugin", "apply", "-f", path, "--set", "target=x"])).stdout).toBe("plugin hello-db@0.0.0 created\n");
    const r = await eph(api(), ["plugin", "delete", "-f", path]);
    expect(r).toMatchObject({ code: 0, stdout: "plugin hello-db@0.0.0 deleted\n" });
    expect((await core().waitForEvent("ephemera.plugin.version_deleted.v1", "hello-db")).data).toEqual({ name: "hello-db", version: "0.0.0" });
    expect(await versions()).toEqual([]);
  });
});

describe("eph sandbox apply", () => {
  const sets = ["--set", "suffix=x", "--set", "owner=ana"];
  const rk = () => `${core().tag}00000001`;
  const publish = async () => {
    const r = await eph(api(), ["plugin", "apply", "-f", file("plugin.yaml", PLUGIN), "--set", "target=orders"]);
    expect(r.code).toBe(0);
  };
  beforeEach(() => publish());

  /** The status of the sandbox's steps, as the API reports them, e.g. `provision=Running`. */
  const stepsOf = async (name: string) =>
    (await core().sandboxes.view(name, false)).resources.flatMap((r) => r.steps.map((s) => `${s.name}=${s.status}`));

  it.each(["--wait=false", "--wait false", "--no-wait", "--wait=FALSE"])(
    "with %s creates the sandbox and returns at once, before it is ready",
    async (noWait) => {
      const gate = join(core().scratch, "go");
      const r = await eph(api(), ["sandbox", "apply", "-f", file("sb.yaml", sandbox({ gate })), ...sets, ...noWait.split(" ")]);
      expect(r).toMatchObject({ code: 0, stdout: `sandbox feature-x created (routing key ${rk()})\n`, stderr: "" });
      const created = await core().waitForEvent("ephemera.sandbox.created.v1", "feature-x");
      expect(created.data).toMatchObject({
        name: "feature-x",
        routingKey: rk(),
        spec: { cluster: "local", labels: { owner: "ana" } },
        resources: [{ name: "db", plugin: "hello-db", version: "1.0.0", params: { dbname: "orders", gate } }],
      });
      // It returned while provision still waits for its gate: the sandbox is not ready.
      expect((await core().sandboxes.view("feature-x", false)).status?.ready).toBe(false);
    },
  );

  it("waits by default: prints progress while it waits and exits 0 once ready", async () => {
    const gate = join(core().scratch, "go");
    const live: Live = { stdout: "", stderr: "" };
    const running = eph(api(), ["sb", "apply", "-f", file("sb.yaml", sandbox({ gate })), ...sets], { live });
    await waitFor(() => live.stderr.includes("db: provision running\n"), { what: "progress before the sandbox is ready" });
    expect(live.stdout).toBe(`sandbox feature-x created (routing key ${rk()})\n`);
    file("go", "");
    const r = await running;
    expect(r.code).toBe(0);
    // seed ends sooner than the scheduler records a start (START_RECORD_DELAY_MS): it has a
    // running line, between its queued and succeeded ones, only where it ran that long.
    expect(r.stderr.replace("db: seed queued\ndb: seed running\n", "db: seed queued\n")).toBe(
      "db: provision running\ndb: provision succeeded\ndb: seed queued\ndb: seed succeeded\ndb: ready\n",
    );
    expect(r.stdout).toBe(
      `sandbox feature-x created (routing key ${rk()})\nsandbox feature-x ready\n  web: https://web--${rk()}.preview.test (target http://web:8080)\n`,
    );
    await core().waitForEvent("ephemera.sandbox.ready.v1", "feature-x");
  });

  it.each(["--wait", "--wait=true", "--wait true", "--wait=1"])("still takes %s, and waits", async (wait) => {
    const r = await eph(api(), ["sandbox", "apply", ...wait.split(" "), "-f", file("sb.yaml", sandbox()), ...sets]);
    expect(r).toMatchObject({ code: 0, stdout: expect.stringContaining("sandbox feature-x ready\n") });
    expect((await core().sandboxes.view("feature-x", false)).status?.ready).toBe(true);
  });

  it("exits 2 on a malformed --wait, naming the flag, before anything is written", async () => {
    for (const bad of ["--wait=maybe", "--wait=", "--wait=yes"]) {
      const r = await eph(api(), ["sandbox", "apply", "-f", file("sb.yaml", sandbox()), ...sets, bad]);
      expect(r).toMatchObject({ code: 2, stdout: "" });
      const value = bad.slice("--wait=".length);
      expect(r.stderr).toContain(`error: option '--wait [bool]' argument '${value}' is invalid. --wait takes true or false`);
    }
    expect(await typesOf(core())).toEqual(["ephemera.plugin.published.v1"]);
  });

  it("--dry-run does not wait (the default asks it to); a --wait asked for with it is bad usage", async () => {
    const path = file("sb.yaml", sandbox());
    const dry = await eph(api(), ["sandbox", "apply", "--dry-run", "-f", path, ...sets]);
    expect(dry).toMatchObject({ code: 0, stderr: "" });
    expect(dry.stdout).toMatch(/^sandbox feature-x: would create \(dry run: nothing written\)\n/);
    expect((await eph(api(), ["sandbox", "apply", "--dry-run", "--wait=false", "-f", path, ...sets])).code).toBe(0);
    const both = await eph(api(), ["sandbox", "apply", "--dry-run", "--wait", "-f", path, ...sets]);
    expect(both).toMatchObject({ code: 2, stdout: "" });
    expect(both.stderr).toContain("error: --dry-run changes nothing, so there is nothing to --wait for");
    expect(await typesOf(core())).toEqual(["ephemera.plugin.published.v1"]);
  });

  it("exits 1 on ResourceFailed naming the step, its exit code, reason and log tail", async () => {
    const r = await eph(api(), ["sandbox", "apply", "-f", file("sb.yaml", sandbox({ fail: "3" })), ...sets]);
    expect(r.code).toBe(1);
    // A sandbox this apply created: its failed step gets its line even when it failed before the watch's first view.
    expect(r.stderr).toContain("db: seed failed (exit code 3)\n");
    expect(r.stderr).toContain("resource db failed at step seed (create)\n  exit code: 3\n  reason:    Error\n");
    expect(r.stderr).toContain("    | seeding orders on db\n    | migrating\n    | error: relation already exists\n");
    expect(r.stderr).toContain("error: sandbox feature-x failed: resource db: step seed exited 3 (Error)");
    const failed = await core().waitForEvent("ephemera.sandbox.resource_provision_failed.v1", "feature-x");
    expect(failed.data).toMatchObject({ resource: "db", failure: { step: "seed", exitCode: 3, reason: "Error" } });
  });

  it("--wait-timeout exits 1 saying what it was still waiting for", async () => {
    const path = file("sb.yaml", sandbox({ hold: join(core().scratch, "never") }));
    expect((await eph(api(), ["sandbox", "apply", "-f", path, ...sets, "--wait=false"])).code).toBe(0);
    await waitFor(async () => (await stepsOf("feature-x")).includes("seed=Running"), { what: "seed to be running" });
    // Applying the same file again changes nothing, and waits.
    const r = await eph(api(), ["sandbox", "apply", "-f", path, ...sets, "--wait-timeout", "250ms"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe(`sandbox feature-x unchanged (routing key ${rk()})\n`);
    expect(r.stderr).toContain(
      "error: timed out after 250ms waiting for sandbox feature-x to be ready; still waiting for: db (provisioning, seed running)",
    );
  });
});

describe("eph sandbox delete -f", () => {
  it("needs only the variables used in the name, and waits until the sandbox is gone", async () => {
    expect((await eph(api(), ["plugin", "apply", "-f", file("plugin.yaml", PLUGIN), "--set", "target=x"])).code).toBe(0);
    const path = file("sb.yaml", sandbox());
    expect((await eph(api(), ["sandbox", "apply", "-f", path, "--set", "suffix=x", "--set", "owner=ana"])).code).toBe(0);
    const r = await eph(api(), ["sandbox", "delete", "-f", path, "--set", "suffix=x"]);
    expect(r).toMatchObject({ code: 0, stdout: "sandbox feature-x deleting\nsandbox feature-x deleted\n" });
    expect((await core().waitForEvent("ephemera.sandbox.deleting.v1", "feature-x")).data).toEqual({ reason: "requested" });
    await core().waitForEvent("ephemera.sandbox.deleted.v1", "feature-x");
  });
});

describe("--filename, Signadot's spelling of -f", () => {
  const sets = ["--set", "suffix=x", "--set", "owner=ana"];
  const names = async () => JSON.parse((await eph(api(), ["sandbox", "list", "-o", "json"])).stdout).map((s: { name: string }) => s.name);
  beforeEach(() => file("plugin.yaml", PLUGIN));

  it("works for plugin apply and delete, sandbox apply and delete, and --file too", async () => {
    const plugin = join(core().scratch, "plugin.yaml");
    const sb = file("sb.yaml", sandbox());
    expect(await eph(api(), ["plugin", "apply", "--filename", plugin, "--set", "target=x"])).toMatchObject({
      code: 0, stdout: "plugin hello-db@1.0.0 created\n",
    });
    expect(await eph(api(), ["sandbox", "apply", `--filename=${sb}`, ...sets])).toMatchObject({ code: 0 });
    expect(await names()).toEqual(["feature-x"]);
    expect(await eph(api(), ["sandbox", "delete", "--filename", sb, "--set", "suffix=x"])).toMatchObject({
      code: 0, stdout: "sandbox feature-x deleting\nsandbox feature-x deleted\n",
    });
    expect(await names()).toEqual([]);
    expect(await eph(api(), ["plugin", "delete", "--file", plugin])).toMatchObject({ code: 0, stdout: "plugin hello-db@1.0.0 deleted\n" });
  });

  it("may repeat -f with the same file; two different files exit 2, before anything is written", async () => {
    const plugin = join(core().scratch, "plugin.yaml");
    const other = file("other.yaml", PLUGIN.replace("hello-db@1.0.0", "hello-db@2.0.0"));
    const twice = [
      ["-f", plugin, "--filename", other], ["--filename", plugin, "-f", other], ["-f", plugin, "--file", other], ["-f", plugin, "-f", other],
    ];
    for (const args of twice) {
      const r = await eph(api(), ["plugin", "apply", ...args, "--set", "target=x"]);
      expect(r).toMatchObject({ code: 2, stdout: "" });
      expect(r.stderr).toMatch(/^error: (-f\/--filename|--file) ".*": the plugin file was already given as ".*"; give one file\n$/);
    }
    expect(await core().events()).toEqual([]);
    expect(await eph(api(), ["plugin", "apply", "-f", plugin, "--filename", plugin, "--set", "target=x"])).toMatchObject({ code: 0 });
  });

  it("is one of NAME or -f: both exit 2", async () => {
    const r = await eph(api(), ["sandbox", "delete", "feature-x", "--filename", file("sb.yaml", sandbox())]);
    expect(r).toMatchObject({ code: 2, stdout: "" });
    expect(r.stderr).toContain("give either a sandbox name or -f FILE, not both");
  });
});

describe("eph schema", () => {
  it("prints the JSON Schema of each file", async () => {
    for (const kind of ["plugin", "sandbox", "routegroup", "jobrunnergroup", "job"]) {
      const r = await eph(api(), ["schema", kind]);
      expect(r.code).toBe(0);
      const schema = JSON.parse(r.stdout);
      // A job's name is generated at submit: its file has none.
      if (kind !== "job") expect(schema.properties).toHaveProperty("name");
      expect(schema.properties).toHaveProperty("spec");
    }
  });

  it("exits 2 for another kind", async () => {
    expect((await eph(api(), ["schema", "workload"])).code).toBe(2);
  });
});
