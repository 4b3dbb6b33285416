// Oversized files against the real core: refused with exit 2, naming the field, the size
// and the limit, before anything is written.
import { eph, useCore } from "./eph.testkit.js";

const core = useCore();

const pluginWithScript = (bytes: number) => `
name: big
spec:
  description: a plugin with a large script
  runner: {image: debian:bookworm-slim}
  create:
  - name: provision
    script: |
      #!/bin/sh
      # ${"x".repeat(bytes)}
`;

async function published(): Promise<number> {
  return (await core().events()).filter((e) => e.type === "ephemera.plugin.published.v1").length;
}

describe("eph refuses what is over a limit", () => {
  it("a 3 MB script: exit 2, naming the script, its size and the limit; nothing published", async () => {
    const r = await eph(core().address, ["plugin", "apply", "-f", core().file("big.yaml", pluginWithScript(3_000_000))]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/spec\.create\[0\]\.script/);
    expect(r.stderr).toMatch(/\d{7} bytes/);
    expect(r.stderr).toMatch(/limit/);
    expect(await published()).toBe(0);
  });

  it("a 5 MB plugin file: exit 2 with the size of the spec and the limit, not a retryable error; nothing published", async () => {
    const r = await eph(core().address, ["plugin", "apply", "-f", core().file("huge.yaml", pluginWithScript(5_000_000))]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/\d{7} bytes.*limit/);
    expect(r.stderr).not.toMatch(/unavailable|try again/i);
    expect(await published()).toBe(0);
  });

  it("a sandbox with 2,000 resources: exit 2 naming spec.resources and the limit; nothing applied", async () => {
    const resources = Array.from({ length: 2000 }, (_, i) => `  - {name: r${i}, plugin: "x@1.0.0"}`).join("\n");
    const file = core().file("many.yaml", `name: many\nspec:\n  cluster: local\n  resources:\n${resources}\n`);
    const r = await eph(core().address, ["sandbox", "apply", "-f", file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/spec\.resources/);
    expect(r.stderr).toMatch(/2000 resources, more than the \d+ allowed/);
    expect((await core().events()).filter((e) => e.type.startsWith("ephemera.sandbox."))).toEqual([]);
  });
});
