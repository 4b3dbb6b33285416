// `eph routegroup` (alias `rg`) against the real core on the in-memory store: apply, get,
// list and delete, the sandboxes a group holds by their labels, and the refusals.
import { eph, useCore } from "./eph.testkit.js";

const core = useCore();
const api = () => core().address;

const sandbox = (name: string, labels: Record<string, string>, cluster = "local") => core().file(`${name}.yaml`, `
name: ${name}
spec:
  cluster: ${cluster}
  labels: ${JSON.stringify(labels)}
`);

const GROUP = `
name: feature-x
spec:
  cluster: local
  description: feature x, end to end
  match:
    label: {key: feature, value: "@{glob}"}
  endpoints:
  - {name: web, target: "http://frontend.shop.svc:8080"}
`;

const json = <T>(text: string) => JSON.parse(text) as T;
type GroupDoc = {
  name: string; routingKey: string; status: { ready: boolean; reason: string; message: string };
  sandboxes: Array<{ name: string; ready: boolean }>; endpoints: Array<{ name: string; url: string }>; spec: { match: unknown };
};

describe("eph routegroup", () => {
  it("applies a group from a file, shows the sandboxes its match selects, and follows a change of match", async () => {
    for (const [name, labels] of [["sb-x", { feature: "x-backend" }], ["sb-other", { team: "other" }]] as const) {
      expect((await eph(api(), ["sandbox", "apply", "-f", sandbox(name, labels)])).code).toBe(0);
    }
    await eph(api(), ["sandbox", "apply", "-f", sandbox("sb-elsewhere", { feature: "x-2" }, "other-cluster")]);
    const file = core().file("rg.yaml", GROUP);
    const applied = await eph(api(), ["rg", "apply", "-f", file, "--set", "glob=x-*"]);
    expect(applied).toMatchObject({ code: 0, stderr: "" });
    expect(applied.stdout).toMatch(/^route group feature-x created \(routing key \w+\)\n {2}status: Ready\n {2}sandbox sb-x\n {2}web: https:\/\/web--\w+\.preview\.test/);

    const got = json<GroupDoc>((await eph(api(), ["routegroup", "get", "feature-x", "-o", "json"])).stdout);
    expect(got.sandboxes.map((s) => s.name)).toEqual(["sb-x"]);
    expect(got.status).toEqual({ ready: true, reason: "Ready", message: "" });
    expect(got.endpoints).toEqual([{ name: "web", url: `https://web--${got.routingKey}.preview.test`, target: "http://frontend.shop.svc:8080", baselineUrl: "https://frontend-shop-8080.preview.test" }]);

    const again = await eph(api(), ["rg", "apply", "-f", file, "--set", "glob=x-*"]);
    expect(again.stdout).toMatch(/^route group feature-x unchanged/);
    const before = (await core().events()).length;
    const planned = await eph(api(), ["rg", "apply", "--dry-run", "--filename", file, "--set", "glob=*"]);
    expect(planned.code).toBe(0);
    expect(planned.stdout).toContain('route group feature-x: would be updated (dry run: nothing written)\n  change spec.match:');
    expect((await core().events()).length).toBe(before);
    const widened = await eph(api(), ["rg", "apply", "-f", file, "--set", "glob=*"]);
    expect(widened.code).toBe(0);
    expect(widened.stdout).toContain(`route group feature-x updated (routing key ${got.routingKey})\n  change spec.match: {"label":{"key":"feature","value":"x-*"}} -> {"label":{"key":"feature","value":"*"}}`);
    // sb-other has no feature label; sb-elsewhere is on another cluster.
    expect(json<GroupDoc>((await eph(api(), ["rg", "get", "feature-x", "-o", "json"])).stdout).sandboxes.map((s) => s.name)).toEqual(["sb-x"]);

    const list = await eph(api(), ["rg", "list"]);
    expect(list.stdout).toMatch(new RegExp(`^NAME\\s+READY\\s+STATUS\\s+SANDBOXES\\s+ROUTING KEY\\s+CREATED\\nfeature-x\\s+true\\s+Ready\\s+1\\s+${got.routingKey}\\s+\\d{4}-`));
    expect(json<GroupDoc[]>((await eph(api(), ["rg", "list", "-o", "json"])).stdout).map((g) => g.name)).toEqual(["feature-x"]);
  });

  it("says when no sandbox matches, and is deleted by name or by file", async () => {
    const file = core().file("rg.yaml", GROUP);
    await eph(api(), ["rg", "apply", "-f", file, "--set", "glob=nothing-*"]);
    const got = json<GroupDoc>((await eph(api(), ["rg", "get", "feature-x", "-o", "json"])).stdout);
    expect(got.status).toEqual({ ready: false, reason: "NoMatchingSandbox", message: "no sandbox of cluster local matches" });

    expect(await eph(api(), ["rg", "delete", "-f", file])).toMatchObject({ code: 0, stdout: "route group feature-x deleted\n" });
    expect(await eph(api(), ["rg", "get", "feature-x"])).toMatchObject({ code: 1, stderr: "error: route group feature-x not found\n" });
    await eph(api(), ["rg", "apply", "-f", file, "--set", "glob=x"]);
    expect((await eph(api(), ["rg", "rm", "feature-x"])).code).toBe(0);
    expect(await core().waitForEvent("ephemera.routegroup.deleted.v1", "feature-x")).toBeDefined();
  });

  it("refuses an invalid file before any call, and a change of cluster naming the field, writing nothing", async () => {
    const bad = core().file("bad.yaml", "name: feature-x\nspec:\n  cluster: local\n  match: {label: {key: a, value: b}, any: [{label: {key: c, value: d}}]}\n");
    const refused = await eph(api(), ["rg", "apply", "-f", bad]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("spec.match: a match has label and any: give exactly one");

    const file = core().file("rg.yaml", GROUP);
    await eph(api(), ["rg", "apply", "-f", file, "--set", "glob=x"]);
    const before = (await core().events()).length;
    const moved = await eph(api(), ["rg", "apply", "-f", core().file("moved.yaml", GROUP.replace("cluster: local", "cluster: c2")), "--set", "glob=x"]);
    expect(moved.code).toBe(2);
    expect(moved.stderr).toContain("spec.cluster: spec.cluster cannot change (\"local\" → \"c2\")");
    expect((await core().events()).length).toBe(before);
  });
});
