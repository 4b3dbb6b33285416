import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { FakeApi, eph, resourceView, sandboxView } from "./fake-api.testkit.js";

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
    outputs:
    - {name: host, valueFromPath: /tmp/host}
    script: "@{embed: ./provision.sh}"
  - name: seed
    inputs:
    - name: host
      valueFromStep: {name: provision, output: host}
      as: {env: HOST}
    script: |
      #!/bin/sh
      echo "seeding @{target}"
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

const SANDBOX = `
name: "feature-@{suffix}"
spec:
  cluster: local
  labels: {owner: "@{owner}"}
  resources:
  - name: db
    plugin: hello-db
    params: {dbname: orders}
`;

let api: FakeApi;
let dir: string;
const file = (name: string, content: string) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};

beforeEach(async () => {
  api = await FakeApi.start();
  dir = mkdtempSync(join(tmpdir(), "eph-cli-"));
  file("provision.sh", "#!/bin/sh\nprintf db > /tmp/host\n");
});
afterEach(() => {
  api.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("eph plugin apply", () => {
  it("sends the validated, templated plugin and says it was created, then unchanged", async () => {
    const path = file("plugin.yaml", PLUGIN);
    const first = await eph(api.address, ["plugin", "apply", "-f", path, "--set", "target=orders"]);
    expect(first).toMatchObject({ code: 0, stdout: "plugin hello-db@1.0.0 created\n" });
    const [sent] = api.requestsOf("plugin.apply") as pb.ApplyResourcePluginRequest[];
    expect(sent?.plugin?.name).toBe("hello-db@1.0.0");
    expect(sent?.plugin?.spec?.create.map((s) => s.script)).toEqual([
      "#!/bin/sh\nprintf db > /tmp/host\n",
      "#!/bin/sh\necho \"seeding orders\"\n",
    ]);
    const again = await eph(api.address, ["rp", "apply", "-f", path, "--set", "target=orders"]);
    expect(again).toMatchObject({ code: 0, stdout: "plugin hello-db@1.0.0 unchanged\n" });
  });

  it("exits 1 with the server's message when the version is published with another spec", async () => {
    const path = file("plugin.yaml", PLUGIN);
    expect((await eph(api.address, ["plugin", "apply", "-f", path, "--set", "target=a"])).code).toBe(0);
    const r = await eph(api.address, ["plugin", "apply", "-f", path, "--set", "target=b"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("plugin hello-db@1.0.0 is published with a different spec");
  });

  it("reads standard input with -f -", async () => {
    const r = await eph(api.address, ["plugin", "apply", "-f", "-"], {
      stdin: PLUGIN.replace('"@{embed: ./provision.sh}"', "|\n      #!/bin/sh\n      true").replace("@{target}", "x"),
    });
    expect(r).toMatchObject({ code: 0, stdout: "plugin hello-db@1.0.0 created\n" });
  });

  it("exits 2 listing every violation with its field path, and sends nothing", async () => {
    const r = await eph(api.address, ["plugin", "apply", "-f", file("bad.yaml", INVALID_PLUGIN)]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/^ {2}spec\.create\[0\]\.script: .+$/m);
    expect(r.stderr).toMatch(/^ {2}spec\.create\[1\]\.inputs\[0\]\.valueFromStep\.name: .+$/m);
    expect(api.received).toEqual([]);
  });

  it("exits 2 naming every unset variable", async () => {
    const r = await eph(api.address, ["sandbox", "apply", "-f", file("sb.yaml", SANDBOX)]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("suffix");
    expect(r.stderr).toContain("owner");
    expect(api.received).toEqual([]);
  });

  it("exits 2 for a file that does not exist", async () => {
    const r = await eph(api.address, ["plugin", "apply", "-f", join(dir, "missing.yaml")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("missing.yaml");
  });
});

describe("eph plugin delete -f", () => {
  it("deletes exactly the version the file publishes", async () => {
    api.plugins = ["1.0.0", "2.0.0"].map((version) => pb.ResourcePluginVersion.fromPartial({ name: "hello-db", version }));
    const r = await eph(api.address, ["plugin", "delete", "-f", file("plugin.yaml", PLUGIN)]);
    expect(r).toMatchObject({ code: 0, stdout: "plugin hello-db@1.0.0 deleted\n" });
    expect(api.requestsOf("plugin.delete")).toEqual([{ ref: "hello-db@1.0.0" }]);
  });

  it("takes a bare name as version 0.0.0", async () => {
    api.plugins = [pb.ResourcePluginVersion.fromPartial({ name: "hello-db", version: "0.0.0" })];
    const r = await eph(api.address, ["plugin", "delete", "-f", file("plugin.yaml", PLUGIN.replace("hello-db@1.0.0", "hello-db"))]);
    expect(r.code).toBe(0);
    expect(api.requestsOf("plugin.delete")).toEqual([{ ref: "hello-db@0.0.0" }]);
  });
});

describe("eph sandbox apply", () => {
  const sets = ["--set", "suffix=x", "--set", "owner=ana"];
  const creating = (steps: Array<[string, string, number?]>) =>
    sandboxView("feature-x", { reason: "Creating", resources: [resourceView("db", "Provisioning", steps)] });

  it("sends the validated sandbox and returns without --wait", async () => {
    const r = await eph(api.address, ["sandbox", "apply", "-f", file("sb.yaml", SANDBOX), ...sets]);
    expect(r).toMatchObject({ code: 0, stdout: "sandbox feature-x created (routing key rk123)\n" });
    const [sent] = api.requestsOf("sandbox.apply") as pb.ApplySandboxRequest[];
    expect(sent?.sandbox?.name).toBe("feature-x");
    expect(sent?.sandbox?.spec?.labels).toEqual({ owner: "ana" });
    expect(sent?.sandbox?.spec?.resources[0]).toMatchObject({ name: "db", plugin: "hello-db", params: { dbname: "orders" } });
    expect(api.watchCalls).toBe(0);
  });

  it("--wait prints progress while it waits and exits 0 once ready", async () => {
    let release!: () => void;
    api.watchPlans = [[
      creating([["provision", "Running"], ["seed", "Pending"]]),
      { gate: new Promise<void>((r) => (release = r)) },
      creating([["provision", "Succeeded"], ["seed", "Running"]]),
      sandboxView("feature-x", { reason: "Ready", ready: true, resources: [resourceView("db", "Ready", [["provision", "Succeeded"], ["seed", "Succeeded"]])] }),
    ]];
    const live = { stdout: "", stderr: "" };
    const running = eph(api.address, ["sb", "apply", "-f", file("sb.yaml", SANDBOX), ...sets, "--wait"], { live });
    await waitFor(() => live.stderr.includes("db: provision running\n"), { what: "progress before the sandbox is ready" });
    expect(live.stdout).not.toContain("ready");
    release();
    const r = await running;
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("db: provision running\ndb: provision succeeded\ndb: seed running\ndb: seed succeeded\ndb: ready\n");
    expect(r.stdout).toBe("sandbox feature-x created (routing key rk123)\nsandbox feature-x ready\n  web: https://web--rk123.preview.local\n");
  });

  it("--wait exits 1 on ResourceFailed naming the step, its exit code, reason and log tail", async () => {
    api.watchPlans = [[
      creating([["provision", "Running"]]),
      sandboxView("feature-x", {
        reason: "ResourceFailed",
        message: "resource db failed",
        resources: [resourceView("db", "Failed", [["provision", "Succeeded"], ["seed", "Failed", 3]], {
          failure: { step: "seed", runId: "r", exitCode: 3, reason: "Error", message: "script exited with 3", logTail: "migrating\nerror: relation already exists\n" },
        })],
      }),
    ]];
    const r = await eph(api.address, ["sandbox", "apply", "-f", file("sb.yaml", SANDBOX), ...sets, "--wait"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("db: seed failed (exit code 3)");
    expect(r.stderr).toContain("resource db failed at step seed (create)\n  exit code: 3\n  reason:    Error\n");
    expect(r.stderr).toContain("    | error: relation already exists\n");
    expect(r.stderr).toContain("error: sandbox feature-x failed: resource db failed");
  });

  it("--wait-timeout exits 1 saying what it was still waiting for", async () => {
    api.watchPlans = [[creating([["provision", "Succeeded"], ["seed", "Running"]])]];
    const r = await eph(api.address, ["sandbox", "apply", "-f", file("sb.yaml", SANDBOX), ...sets, "--wait", "--wait-timeout", "250ms"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("error: timed out after 250ms waiting for sandbox feature-x to be ready; still waiting for: db (provisioning, seed running)");
  });
});

describe("eph sandbox delete -f", () => {
  it("needs only the variables used in the name", async () => {
    api.sandboxes.set("feature-x", sandboxView("feature-x", { reason: "Ready", ready: true }));
    const r = await eph(api.address, ["sandbox", "delete", "-f", file("sb.yaml", SANDBOX), "--set", "suffix=x"]);
    expect(r).toMatchObject({ code: 0, stdout: "sandbox feature-x deleting\n" });
    expect(api.requestsOf("sandbox.delete")).toEqual([{ name: "feature-x", force: false }]);
  });
});

describe("eph schema", () => {
  it("prints the JSON Schema of each file", async () => {
    for (const kind of ["plugin", "sandbox"]) {
      const r = await eph(api.address, ["schema", kind]);
      expect(r.code).toBe(0);
      const schema = JSON.parse(r.stdout);
      expect(schema.properties).toHaveProperty("name");
      expect(schema.properties).toHaveProperty("spec");
    }
  });

  it("exits 2 for another kind", async () => {
    expect((await eph(api.address, ["schema", "workload"])).code).toBe(2);
  });
});
