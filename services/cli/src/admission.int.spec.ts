// eph sandbox apply when the API holds its create for admission (a cluster whose sandboxes wait
// for a runner): it says so while it waits, and reports the create once admitted.
import { waitFor } from "@ephemera/kit";
import { eph, useCore, type Live } from "./eph.testkit.js";

const PLUGIN = `
name: slow-db@1.0.0
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: provision
    script: |
      #!/bin/sh
      true
`;
// No runner serves cluster "far": its sandboxes stay created and not started.
const sandbox = (name: string) => `name: ${name}\nspec:\n  cluster: far\n  resources:\n  - {name: db, plugin: slow-db}\n`;

const core = useCore({ admission: { waiting: 1, timeoutMs: 30_000 } });

it("eph sandbox apply says its create is held for admission, and reports it created once admitted", async () => {
  const address = core().address;
  expect((await eph(address, ["plugin", "apply", "-f", core().file("plugin.yaml", PLUGIN)])).code).toBe(0);
  expect((await eph(address, ["sandbox", "apply", "--wait=false", "-f", core().file("a.yaml", sandbox("a"))])).code).toBe(0);

  const live: Live = { stdout: "", stderr: "" };
  const held = eph(address, ["sandbox", "apply", "--wait=false", "-f", core().file("b.yaml", sandbox("b"))], { live });
  await waitFor(() => live.stderr.includes("sandbox b: waiting for the API to admit it (runners are starting the sandboxes created before it)"),
    { what: "the CLI to say the create is held" });
  expect(live.stdout).toBe("");
  expect((await core().events()).some((e) => e.subject === "b")).toBe(false);

  expect((await eph(address, ["sandbox", "delete", "a", "--wait=false"])).code).toBe(0);
  const ran = await held;
  expect(ran.code).toBe(0);
  expect(ran.stdout).toMatch(/^sandbox b created \(routing key \w+\)\n$/);
});
