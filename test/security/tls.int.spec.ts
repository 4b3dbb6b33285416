// ephemera over TLS: the public API with bearer tokens, the IO context on mTLS, and the
// runner's steps reaching it with the CA and a client certificate. eph, with a token and
// the CA, runs a sandbox whose second step asks the IO context for the first's value (its
// script and params are too large to plan into its dispatch); a client that does not trust
// the CA, or shows no certificate, does not get through.
import { UnavailableError, isRetryable } from "@ephemera/kit";
import { Registry } from "@ephemera/kit/metrics";
import { fetchStepInputs, ioContextClient } from "../../services/io-agent/src/index.js";
import { eph } from "../../services/cli/src/eph.testkit.js";
import { TOKENS, tokensAccess } from "../support/api-tokens.js";
import { makeCerts } from "../support/certs.js";
import { startCore, type Core } from "../support/core.js";
import { parseExposition, total } from "../support/prometheus.js";

const certs = makeCerts();
let core: Core;
const runnerMetrics = new Registry();

beforeAll(async () => {
  core = await startCore({
    api: { access: tokensAccess(), tls: certs.server() },
    iocontextTls: { server: certs.server({ mtls: true }), client: certs.client({ withCert: true }) },
    runnerMetrics,
  });
});
afterAll(async () => {
  await core?.stop();
  certs.remove();
});

const plugin = `
name: relay
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - name: first
    script: |
      #!/bin/sh
      printf 'from-first' > /outputs/value
    outputs:
    - {name: value, valueFromPath: /outputs/value}
  - name: second
    inputs:
    - {name: value, valueFromStep: {name: first, output: value}, as: {env: VALUE}}
    - {name: pad, valueFromSandbox: true, as: {path: /pad/pad}}
    script: |
      #!/bin/sh
      # ${"x".repeat(200 * 1024)}
      printf '%s+second' "$VALUE" > /outputs/value
    outputs:
    - {name: value, valueFromPath: /outputs/value}
`;
const sandbox = `
name: over-tls
spec:
  cluster: local
  resources:
  - {name: r, plugin: relay, params: {pad: ${"y".repeat(60 * 1024)}}}
`;

describe("ephemera over TLS", () => {
  it("runs a sandbox for eph with a token and the CA, its second step asking the IO context on mTLS for the first's value", async () => {
    const env = { EPHEMERA_TOKEN: TOKENS.editor, EPHEMERA_TLS_CA: certs.files.ca };
    const run = async (args: string[]) => {
      const r = await eph(core.address, args, { env });
      if (r.code !== 0) throw new Error(`eph ${args.join(" ")} exited ${r.code}:\n${r.stderr}`);
      return r.stdout;
    };
    await run(["plugin", "apply", "-f", core.file("relay.yaml", plugin)]);
    await run(["sandbox", "apply", "-f", core.file("sb.yaml", sandbox)]);
    const view = JSON.parse(await run(["sandbox", "get", "over-tls", "-o", "json", "--show-outputs"])) as {
      resources: Array<{ outputs: Record<string, { value?: string }> }>;
    };
    expect(view.resources[0]?.outputs["second.value"]?.value).toBe("from-first+second");
    // The first step's dispatch carried its plan; the second's was too large to, and it asked the IO context.
    const counted = parseExposition(await runnerMetrics.metrics());
    expect(total(counted, "ephemera_runner_step_inputs_total", { from: "dispatch" })).toBe(1);
    expect(total(counted, "ephemera_runner_step_inputs_total", { from: "iocontext" })).toBe(1);
    expect(total(counted, "ephemera_grpc_client_requests_total", { method: "GetStepInputs", code: "OK" })).toBe(1);
  });

  it("does not let a client through that does not trust the CA, or shows no client certificate", async () => {
    const attempt = async (tls: Parameters<typeof ioContextClient>[1]) => {
      const client = ioContextClient(core.iocontext, tls);
      try {
        return await fetchStepInputs(client, "no.such.run.at.all", "token", { retry: false, timeoutMs: 3_000 }).then(() => undefined, (e: unknown) => e);
      } finally {
        client.close();
      }
    };
    // Through: the IO context itself answers (this run does not exist), not the transport.
    const through = await attempt(certs.client({ withCert: true }));
    expect(through).toBeInstanceOf(Error);
    expect(isRetryable(through)).toBe(false);
    for (const tls of [undefined, certs.client(), { cert: certs.client({ withCert: true }).cert!, key: certs.client({ withCert: true }).key! }]) {
      expect(await attempt(tls)).toBeInstanceOf(UnavailableError);
    }
  });
});
