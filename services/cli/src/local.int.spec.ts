// A local workload's environment and files, resource outputs resolved, against the real core.
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eph, useCore } from "./eph.testkit.js";

const PLUGIN = `
name: hello-db@1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: provision
    outputs:
    - {name: host, valueFromPath: /outputs/host}
    - {name: config, valueFromPath: /outputs/config}
    script: |
      #!/bin/sh
      printf 'db-%s' "$EPHEMERA_ROUTING_KEY" > /outputs/host
      printf 'user = "app"\\nport = 5432\\n' > /outputs/config
`;

const SANDBOX = `
name: dev
spec:
  cluster: local
  resources:
  - {name: db, plugin: hello-db}
  forks:
  - forkOf: {kind: Deployment, namespace: shop, name: web}
    customizations:
      env:
      - {name: DB_HOST, valueFrom: {resource: {name: db, outputKey: provision.host}}}
  local:
  - name: api
    from: {kind: Deployment, namespace: shop, name: api}
    mappings: [{port: 8080, toLocal: "localhost:8080"}]
    env:
    - {name: DB_HOST, valueFrom: {resource: {name: db, outputKey: provision.host}}}
    - {name: GREETING, value: "hello world"}
    - {name: TOKEN, valueFrom: {secret: {name: api-secrets, key: token}}}
    files:
    - {path: /etc/api/db.toml, valueFrom: {resource: {name: db, outputKey: provision.config}}}
`;

const core = useCore();
const api = () => core().address;
let dir: string;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "eph-local-"));
  expect((await eph(api(), ["plugin", "apply", "-f", core().file("plugin.yaml", PLUGIN)])).code).toBe(0);
  expect((await eph(api(), ["sandbox", "apply", "-f", core().file("sb.yaml", SANDBOX)])).code).toBe(0);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const routingKey = async () => JSON.parse((await eph(api(), ["sandbox", "get", "dev", "-o", "json"])).stdout).routingKey as string;

describe("eph sandbox get shows forks and locals", () => {
  it("a fork as Skipped (the process driver's cluster runs no workloads), a local workload as Disconnected until a workstation serves it", async () => {
    const doc = JSON.parse((await eph(api(), ["sandbox", "get", "dev", "-o", "json"])).stdout) as { workloads: Array<{ kind: string; name: string; status: string; message: string }> };
    expect(doc.workloads).toEqual([
      { kind: "fork", name: "deployment/web", status: "Skipped", message: expect.stringContaining("forks need a runner with the Kubernetes driver") },
      { kind: "local", name: "api", status: "Disconnected", message: expect.stringContaining("no workstation has connected"), workload: "Deployment shop/api" },
    ]);
  });
});

describe("eph sandbox get-env / get-files", () => {
  it("prints the local workload's env as dotenv: the sandbox's name and routing key, resource outputs, values; names what only the cluster has", async () => {
    const rk = await routingKey();
    const r = await eph(api(), ["sandbox", "get-env", "dev", "--local", "api"], { env: { EPHEMERA_HOME: dir } });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`SIGNADOT_SANDBOX_NAME=dev\nSIGNADOT_SANDBOX_ROUTING_KEY=${rk}\nDB_HOST=db-${rk}\nGREETING="hello world"\n`);
    expect(r.stderr).toBe("not included: the env of the baseline Deployment shop/api (eph local connect is not running)\n"
      + "not set: env TOKEN: from Secret api-secrets key token, which only the cluster has (eph local connect resolves it)\n");
    const json = await eph(api(), ["sandbox", "get-env", "dev", "--local", "api", "-o", "json"], { env: { EPHEMERA_HOME: dir } });
    expect(JSON.parse(json.stdout)).toEqual({ SIGNADOT_SANDBOX_NAME: "dev", SIGNADOT_SANDBOX_ROUTING_KEY: rk, DB_HOST: `db-${rk}`, GREETING: "hello world" });
  });

  it("writes the local workload's files under --dir, mode 0600, and prints their paths", async () => {
    const r = await eph(api(), ["sandbox", "get-files", "dev", "--local", "api", "--dir", dir], { env: { EPHEMERA_HOME: dir } });
    expect(r.code).toBe(0);
    const path = join(dir, "etc/api/db.toml");
    expect(r.stdout).toBe(`${path}\n`);
    expect(readFileSync(path, "utf8")).toBe('user = "app"\nport = 5432\n');
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it("exits 1 for a local workload the sandbox does not have, naming those it has", async () => {
    const r = await eph(api(), ["sandbox", "get-env", "dev", "--local", "web"], { env: { EPHEMERA_HOME: dir } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('sandbox dev has no local workload "web" (it has: api)');
  });
});
