// `eph job` against the real core: submit from a templated file (the generated name printed),
// get, list (queued by default, --all with the ended), delete; and the refusals.
import { eph, useCore } from "./eph.testkit.js";

const core = useCore();
const api = () => core().address;

const GROUP = `
name: e2e
spec:
  cluster: local
  image: ubuntu:24.04
  podTemplate:
    spec:
      containers:
      - {name: main, image: ubuntu:24.04}
`;

const JOB = `
spec:
  namePrefix: "@{prefix}"
  runnerGroup: e2e
  command: [make, e2e]
  labels: {pr: "42"}
`;

type JobDoc = { name: string; submitter: string; routingKey: string; spec: { runnerGroup: string; command: string[] }; status: { state: string; reason: string; message: string; queuedAt: string } };

describe("eph job", () => {
  it("submits a job and prints its name, shows it queued, lists it, deletes it", async () => {
    const missing = await eph(api(), ["job", "submit", "-f", core().file("job.yaml", JOB), "--set", "prefix=orders"]);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain("spec.runnerGroup: job runner group e2e not found");

    expect((await eph(api(), ["jrg", "apply", "-f", core().file("jrg.yaml", GROUP)])).code).toBe(0);
    const submitted = await eph(api(), ["job", "submit", "-f", core().file("job.yaml", JOB), "--set", "prefix=orders"]);
    expect(submitted).toMatchObject({ code: 0, stderr: "" });
    expect(submitted.stdout).toMatch(/^orders-[0-9a-z]{8}\n$/);
    const name = submitted.stdout.trim();

    const got = JSON.parse((await eph(api(), ["job", "get", name, "-o", "json"])).stdout) as JobDoc;
    expect(got).toMatchObject({ name, routingKey: "", spec: { runnerGroup: "e2e", command: ["make", "e2e"] }, status: { state: "Queued" } });
    expect(got.status.queuedAt).not.toBe("");
    expect((await eph(api(), ["job", "get", name])).stdout).toContain(`name: ${name}\n`);

    const listed = await eph(api(), ["job", "list"]);
    expect(listed.stdout).toMatch(new RegExp(`^NAME +GROUP +STATE .*\\n${name} +e2e +Queued `));

    expect((await eph(api(), ["job", "delete", name])).stdout).toBe(`job ${name} cancelled\n`);
    expect((await eph(api(), ["job", "list", "-o", "json"])).stdout).toBe("[]\n");
    const all = JSON.parse((await eph(api(), ["job", "list", "--all", "-o", "json"])).stdout) as JobDoc[];
    expect(all.map((j) => [j.name, j.status.state])).toEqual([[name, "Cancelled"]]);
  });

  it("refuses a job file that breaks the rules before calling, and a job it does not know", async () => {
    const both = await eph(api(), ["job", "submit", "-f", core().file("bad.yaml", "spec:\n  runnerGroup: e2e\n  command: [a]\n  script: \"#!/bin/sh\\n\"\n")]);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toContain("spec.command");
    const unknown = await eph(api(), ["job", "get", "nope"]);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain("job nope not found");
  });
});
