// eph against an API that asks for bearer tokens, over TLS: refusals exit 3 (not
// authenticated) or 4 (permission denied) and say why; an editor's token, given with
// --token or EPHEMERA_TOKEN, works end to end; the CA decides whether eph connects at all.
import { join } from "node:path";
import { TOKENS, tokensAccess } from "../../../test/support/api-tokens.js";
import { makeCerts } from "../../../test/support/certs.js";
import { eph, useCore } from "./eph.testkit.js";
import { EXIT_FAILED, EXIT_PERMISSION_DENIED, EXIT_UNAUTHENTICATED, EXIT_USAGE } from "./program.js";
import { STATUS_EXIT_REFUSED } from "./status.js";

const certs = makeCerts();
afterAll(() => certs.remove());

const plugin = `
name: hello-db
spec:
  description: a db
  runner: {image: debian:bookworm-slim}
  create:
  - name: provision
    script: |
      #!/bin/sh
      printf 'db-1' > /outputs/id
    outputs:
    - {name: id, valueFromPath: /outputs/id}
`;
const sandbox = `
name: feature-x
spec:
  cluster: local
  resources:
  - {name: db, plugin: hello-db}
`;

const core = useCore({ api: { access: tokensAccess(), tls: certs.server() } });
/** eph over TLS (trusting the test CA), with the token given, or none. */
const run = (args: string[], env: Record<string, string> = {}) =>
  eph(core().address, args, { env: { EPHEMERA_TLS_CA: certs.files.ca, ...env } });
const as = (role: keyof typeof TOKENS, args: string[]) => run(args, { EPHEMERA_TOKEN: TOKENS[role] });
const file = (name: string, text: string) => core().file(name, text);

async function ok(role: keyof typeof TOKENS, args: string[]): Promise<string> {
  const r = await as(role, args);
  if (r.code !== 0) throw new Error(`eph ${args.join(" ")} exited ${r.code}:\n${r.stderr}`);
  return r.stdout;
}

describe("eph and an API that asks for tokens", () => {
  it("without a token: exit 3 for every kind of call, saying the token is missing and how to give one", async () => {
    const commands = [["plugin", "list"], ["sandbox", "get", "x"], ["plugin", "apply", "-f", file("p.yaml", plugin)],
      ["events"], ["logs", "--sandbox", "x", "--resource", "db"]];
    for (const args of commands) {
      const r = await run(args);
      expect([args.join(" "), r.code, r.stderr]).toEqual([args.join(" "), EXIT_UNAUTHENTICATED,
        `error: the ephemera API at ${core().address} did not accept the call: missing bearer token (set EPHEMERA_TOKEN or --token)\n`]);
    }
    expect(await core().events()).toEqual([]);
  });

  it("with a token the API does not know: exit 3, and the token is never printed", async () => {
    const r = await run(["plugin", "list", "--token", "made-up-token-123"]);
    expect(r.code).toBe(EXIT_UNAUTHENTICATED);
    expect(r.stderr).toBe(`error: the ephemera API at ${core().address} did not accept the call: token not recognised\n`);
    expect(r.stderr + r.stdout).not.toContain("made-up-token-123");
  });

  it("a viewer reads but cannot apply or delete: exit 4, naming the role and the call, and nothing is written", async () => {
    await ok("editor", ["plugin", "apply", "-f", file("p.yaml", plugin)]);
    const before = (await core().events()).length;
    expect(await ok("viewer", ["plugin", "list", "-o", "json"])).toContain('"hello-db"');
    const refused = [
      [["plugin", "apply", "-f", file("p2.yaml", plugin.replace("a db", "another db").replace("hello-db", "other"))],
        "role viewer may not call ResourcePluginService/Apply (it needs editor)"],
      [["sandbox", "apply", "-f", file("sb.yaml", sandbox)], "role viewer may not call SandboxService/Apply (it needs editor)"],
      [["sandbox", "delete", "feature-x"], "role viewer may not call SandboxService/Delete (it needs editor)"],
      [["plugin", "delete", "hello-db"], "role viewer may not call ResourcePluginService/Delete (it needs admin)"],
    ] as const;
    for (const [args, why] of refused) {
      const r = await as("viewer", [...args]);
      expect([r.code, r.stderr]).toEqual([EXIT_PERMISSION_DENIED, `error: permission denied: ${why}\n`]);
    }
    expect((await core().events()).length).toBe(before);
  });

  it("an editor applies a plugin and a sandbox and waits for it (--token, or EPHEMERA_TOKEN); a forced delete is an admin's", async () => {
    const p = await run(["--token", TOKENS.editor, "plugin", "apply", "-f", file("p.yaml", plugin)]);
    expect([p.code, p.stderr]).toEqual([0, ""]);
    await ok("editor", ["sandbox", "apply", "-f", file("sb.yaml", sandbox)]);
    const view = JSON.parse(await ok("editor", ["sandbox", "get", "feature-x", "-o", "json", "--show-outputs"])) as { status: { reason: string } };
    expect(view.status.reason).toBe("Ready");
    // Output values are secrets: the viewer sees the sandbox, not them.
    expect((await as("viewer", ["sandbox", "get", "feature-x"])).code).toBe(0);
    expect((await as("viewer", ["sandbox", "get", "feature-x", "--show-outputs"])).stderr)
      .toBe("error: permission denied: role viewer may not call SandboxService/Get with show_outputs (it needs editor)\n");
    // The verified name, not $USER, is who did it.
    const created = (await core().events()).find((e) => e.type === "ephemera.sandbox.created.v1");
    expect(created?.actor).toBe("test-editor");

    const forced = await as("editor", ["sandbox", "delete", "feature-x", "--force"]);
    expect([forced.code, forced.stderr]).toEqual([EXIT_PERMISSION_DENIED,
      "error: permission denied: role editor may not call SandboxService/Delete with force (it needs admin)\n"]);
    await ok("editor", ["sandbox", "delete", "feature-x"]);
  });

  it("sandbox get-status: a refused call exits 4, never 3 (which it answers for a pending sandbox); a viewer gets the answer", async () => {
    for (const env of [{}, { EPHEMERA_TOKEN: "made-up-token-123" }] as Array<Record<string, string>>) {
      const r = await run(["sandbox", "get-status", "feature-x"], env);
      expect([r.code, r.stdout]).toEqual([STATUS_EXIT_REFUSED, ""]);
      expect(r.stderr).toContain(`error: the ephemera API at ${core().address} did not accept the call`);
    }
    await ok("editor", ["plugin", "apply", "-f", file("p.yaml", plugin)]);
    await ok("editor", ["sandbox", "apply", "-f", file("sb.yaml", sandbox)]);
    expect(await as("viewer", ["sandbox", "get-status", "feature-x"])).toMatchObject({ code: 0, stdout: "ready\n", stderr: "" });
  });

  it("connects only trusting the API's CA: without it exit 1 (unavailable), a CA file that is not there is bad usage naming the flag", async () => {
    const noCa = await eph(core().address, ["plugin", "list", "--tls"], { env: { EPHEMERA_TOKEN: TOKENS.viewer } });
    expect(noCa.code).toBe(EXIT_FAILED);
    expect(noCa.stderr).toMatch(new RegExp(`^error: the ephemera API at ${core().address} is unavailable: .*certificate`));
    const plaintext = await eph(core().address, ["plugin", "list"], { env: { EPHEMERA_TOKEN: TOKENS.viewer } });
    expect(plaintext.code).toBe(EXIT_FAILED);
    const missing = join(certs.dir, "missing.crt");
    const badCa = await run(["plugin", "list", "--tls-ca", missing], { EPHEMERA_TOKEN: TOKENS.viewer });
    expect([badCa.code, badCa.stderr]).toEqual([EXIT_USAGE, `error: --tls-ca (EPHEMERA_TLS_CA): cannot read ${missing}: ENOENT\n`]);
  });
});
