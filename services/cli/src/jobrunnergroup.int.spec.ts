// `eph jobrunnergroup` (alias `jrg`) against the real core: apply from a templated file,
// get, list, delete by name and by file, the dry run, and the refusals.
import { eph, useCore } from "./eph.testkit.js";

const core = useCore();
const api = () => core().address;

/** Templates substitute into strings: the pod count, a number, is written into the text. */
const GROUP = (pods: number) => `
name: e2e-runners
spec:
  cluster: local
  namespace: ephemera-jobs
  jobTimeout: 30m
  image: "@{image}"
  podTemplate:
    metadata:
      creationTimestamp: null
    spec:
      containers:
      - {name: main, image: "@{image}", resources: {}}
  scaling:
    manual:
      desiredPods: ${pods}
`;

type GroupDoc = {
  name: string; spec: { image: string; podTemplate: { metadata: unknown; spec: unknown }; scaling: unknown };
  status: { ready: boolean; reason: string; desiredPods: number; readyPods: number; pods: string[] };
};

describe("eph jobrunnergroup", () => {
  it("applies a group from a file, shows it Pending with its template as written, updates and deletes it", async () => {
    const file = core().file("jrg.yaml", GROUP(2));
    const applied = await eph(api(), ["jrg", "apply", "-f", file, "--set", "image=ubuntu:24.04"]);
    expect(applied).toMatchObject({ code: 0, stderr: "" });
    expect(applied.stdout).toMatch(/^job runner group e2e-runners created\n {2}status: Pending \(waiting for the runner of cluster local to report 2 ready pods\)\n$/);

    const got = JSON.parse((await eph(api(), ["jobrunnergroup", "get", "e2e-runners", "-o", "json"])).stdout) as GroupDoc;
    expect(got.spec.podTemplate).toEqual({ metadata: { creationTimestamp: null }, spec: { containers: [{ name: "main", image: "ubuntu:24.04", resources: {} }] } });
    expect(got.status).toEqual({ ready: false, reason: "Pending", message: expect.stringContaining("2 ready pods"), desiredPods: 2, readyPods: 0, pods: [] });

    expect((await eph(api(), ["jrg", "apply", "-f", file, "--set", "image=ubuntu:24.04"])).stdout)
      .toMatch(/^job runner group e2e-runners unchanged/);
    const before = (await core().events()).length;
    const planned = await eph(api(), ["jrg", "apply", "--dry-run", "-f", file, "--set", "image=ubuntu:25.04"]);
    expect(planned.stdout).toContain("job runner group e2e-runners: would be updated (dry run: nothing written)\n  change spec.image: \"ubuntu:24.04\" -> \"ubuntu:25.04\"");
    expect((await core().events()).length).toBe(before);
    const updated = await eph(api(), ["jrg", "apply", "-f", core().file("jrg3.yaml", GROUP(3)), "--set", "image=ubuntu:25.04"]);
    expect(updated.stdout).toContain("job runner group e2e-runners updated\n  change spec.image:");
    expect(updated.stdout).toContain("  change spec.scaling: {\"manual\":{\"desiredPods\":2}} -> {\"manual\":{\"desiredPods\":3}}");

    const listed = await eph(api(), ["jrg", "list"]);
    expect(listed.stdout).toMatch(/^NAME +CLUSTER +READY +STATUS +PODS +IMAGE +CREATED\ne2e-runners +local +false +Pending +3 +ubuntu:25\.04 /);
    const yaml = await eph(api(), ["jrg", "list", "-o", "yaml"]);
    expect(yaml.stdout).toMatch(/^- name: e2e-runners\n {2}spec:\n/);

    const deleted = await eph(api(), ["jrg", "delete", "-f", file, "--set", "image=x"]);
    expect(deleted).toMatchObject({ code: 0, stdout: "job runner group e2e-runners deleted\n" });
    expect(JSON.parse((await eph(api(), ["jrg", "list", "-o", "json"])).stdout)).toEqual([]);
  });

  it("refuses an invalid file before any call, naming the field and the rule", async () => {
    const file = core().file("bad.yaml", GROUP(0));
    const before = (await core().events()).length;
    const r = await eph(api(), ["jrg", "apply", "-f", file, "--set", "image=ubuntu:24.04"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("spec.scaling.manual.desiredPods: desiredPods 0 must be a whole number from 1 to 64");
    expect((await core().events()).length).toBe(before);
  });

  it("says which group is not there", async () => {
    const r = await eph(api(), ["jrg", "get", "nope"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("job runner group nope not found");
  });
});
