import { formatLine } from "./format.js";
import { SERVICES, accessNotice, consoleUrlOf, metricsListenOf, stackEnv, stackServices } from "./stack.js";

describe("stack", () => {
  it("gives every service the defaults of a local stack, keeping what the caller set", () => {
    expect(stackEnv({})).toMatchObject({
      EPHEMERA_API_LISTEN: "127.0.0.1:7400", EPHEMERA_IOCONTEXT_LISTEN: "127.0.0.1:7401", EPHEMERA_IOCONTEXT_ADDR: "127.0.0.1:7401",
      EPHEMERA_CLUSTER: "local", EPHEMERA_RUNNER_DRIVER: "process", EPHEMERA_SCHEDULER_LISTEN: "127.0.0.1:0", EPHEMERA_RUNNER_LISTEN: "127.0.0.1:0",
    });
    expect(stackEnv({ EPHEMERA_API_LISTEN: "127.0.0.1:7500" }))
      .toMatchObject({ EPHEMERA_TUNNEL_LISTEN: "127.0.0.1:7785", EPHEMERA_CONSOLE_LISTEN: "127.0.0.1:7790", EPHEMERA_API: "127.0.0.1:7500" });
    expect(stackEnv({})).toMatchObject({ EPHEMERA_JOBS_LISTEN: "127.0.0.1:7779", EPHEMERA_POD_JOBS: "127.0.0.1:7779" });
    expect(stackEnv({ EPHEMERA_JOBS_LISTEN: "127.0.0.1:7579" })).toMatchObject({ EPHEMERA_POD_JOBS: "127.0.0.1:7579" });
    expect(stackEnv({ EPHEMERA_JOBS_LISTEN: "127.0.0.1:0" })).toMatchObject({ EPHEMERA_POD_JOBS: "" });
    expect(stackEnv({ EPHEMERA_POD_JOBS: "host.kube-sim.internal:7779" })).toMatchObject({ EPHEMERA_JOBS_LISTEN: "127.0.0.1:7779", EPHEMERA_POD_JOBS: "host.kube-sim.internal:7779" });
    const mine = stackEnv({ EPHEMERA_IOCONTEXT_LISTEN: "127.0.0.1:7501", EPHEMERA_PREFIX: "other" });
    expect(mine).toMatchObject({ EPHEMERA_IOCONTEXT_ADDR: "127.0.0.1:7501", EPHEMERA_PREFIX: "other" });
  });

  it("gives each service its own metrics port: five from the one set, or each a free port", () => {
    const at = (env: Record<string, string>) => SERVICES.map((s) => [s, metricsListenOf(env, s)]);
    expect(Object.fromEntries(at({ EPHEMERA_METRICS_LISTEN: "0.0.0.0:9400" }))).toEqual({
      sandbox: "0.0.0.0:9400", scheduler: "0.0.0.0:9401", runner: "0.0.0.0:9402", iocontext: "0.0.0.0:9403", tunnel: "0.0.0.0:9405", console: "0.0.0.0:9406",
    });
    expect(new Set(at({}).map(([, l]) => l))).toEqual(new Set(["127.0.0.1:0"]));
    expect(metricsListenOf({ EPHEMERA_METRICS_LISTEN: "[::1]:0" }, "runner")).toBe("[::1]:0");
  });

  it("has the runner's steps dial the IO context on TLS when the servers are on TLS", () => {
    expect(stackEnv({ EPHEMERA_TLS_CERT: "/c.pem", EPHEMERA_TLS_KEY: "/k.pem" })).toMatchObject({ EPHEMERA_TLS: "true" });
    expect(stackEnv({})).not.toHaveProperty("EPHEMERA_TLS");
    expect(stackEnv({ EPHEMERA_TLS_CERT: "/c.pem", EPHEMERA_TLS: "false" })).toMatchObject({ EPHEMERA_TLS: "false" });
  });

  it("says at start that the API is open on loopback, or that it asks for tokens; refuses it open elsewhere", () => {
    expect(accessNotice(stackEnv({}))).toBe("Note: the API on 127.0.0.1:7400 is open: no EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS, " +
      "so anyone who reaches it may apply and delete (loopback only: processes of this machine); in plaintext. To ask for tokens, see docs/security.md.");
    expect(accessNotice(stackEnv({ EPHEMERA_API_TOKENS: "/etc/eph/tokens.yaml", EPHEMERA_TLS_CERT: "/c.pem" })))
      .toBe("The API asks every call for a bearer token (eph: EPHEMERA_TOKEN or --token), over TLS.");
    expect(() => accessNotice(stackEnv({ EPHEMERA_API_LISTEN: "0.0.0.0:7400" }))).toThrow(/from other machines too\. Set EPHEMERA_API_TOKENS/);
    expect(accessNotice(stackEnv({ EPHEMERA_API_LISTEN: "0.0.0.0:7400", EPHEMERA_API_ALLOW_OPEN: "true" }))).toMatch(/^Note: .*EPHEMERA_API_ALLOW_OPEN/);
  });

  it("refuses the Routes API open on an address other machines reach, as the API", () => {
    for (const variable of ["EPHEMERA_ROUTES_LISTEN", "EPHEMERA_ROUTES_HTTP_LISTEN"]) {
      expect(() => accessNotice(stackEnv({ [variable]: "0.0.0.0:7777" })))
        .toThrow(/^the Routes API on 0\.0\.0\.0:7777 is open: .* from other machines too\. Set EPHEMERA_API_TOKENS/);
      expect(() => accessNotice(stackEnv({ [variable]: "0.0.0.0:7777", EPHEMERA_API_TOKENS: "/etc/eph/tokens.yaml" }))).not.toThrow();
      expect(() => accessNotice(stackEnv({ [variable]: "0.0.0.0:7777", EPHEMERA_API_ALLOW_OPEN: "true" }))).not.toThrow();
    }
  });

  it("refuses the tunnel open on an address other machines reach: anyone could serve a sandbox's locals and dial the cluster", () => {
    expect(() => accessNotice(stackEnv({ EPHEMERA_TUNNEL_LISTEN: "0.0.0.0:7785" })))
      .toThrow(/^the tunnel on 0\.0\.0\.0:7785 is open: .* reach every cluster Service, from other machines too\. Set EPHEMERA_API_TOKENS/);
    expect(() => accessNotice(stackEnv({ EPHEMERA_TUNNEL_LISTEN: "0.0.0.0:7785", EPHEMERA_API_TOKENS: "/etc/eph/tokens.yaml" }))).not.toThrow();
    expect(() => accessNotice(stackEnv({ EPHEMERA_TUNNEL_LISTEN: "10.0.0.1:7785", EPHEMERA_API_ALLOW_OPEN: "true" }))).not.toThrow();
  });

  it("refuses the console open on an address other machines reach: anyone could delete every sandbox", () => {
    expect(() => accessNotice(stackEnv({ EPHEMERA_CONSOLE_LISTEN: "0.0.0.0:7790" })))
      .toThrow(/^the console on 0\.0\.0\.0:7790 is open: .* delete and retry them, from other machines too\. Set EPHEMERA_API_TOKENS/);
    expect(() => accessNotice(stackEnv({ EPHEMERA_CONSOLE_LISTEN: "0.0.0.0:7790", EPHEMERA_API_TOKENS: "/etc/eph/tokens.yaml" }))).not.toThrow();
    expect(() => accessNotice(stackEnv({ EPHEMERA_CONSOLE_LISTEN: "10.0.0.1:7790", EPHEMERA_API_ALLOW_OPEN: "true" }))).not.toThrow();
  });

  it("says where the console is: http, https with the stack's certificate, none on a port picked at start", () => {
    expect(consoleUrlOf(stackEnv({}))).toBe("http://127.0.0.1:7790");
    expect(consoleUrlOf(stackEnv({ EPHEMERA_CONSOLE_LISTEN: "0.0.0.0:8080", EPHEMERA_TLS_CERT: "/c.pem" }))).toBe("https://127.0.0.1:8080");
    expect(consoleUrlOf(stackEnv({ EPHEMERA_CONSOLE_LISTEN: "127.0.0.1:0" }))).toBeUndefined();
  });

  it("renders pino lines for a terminal and passes other lines through", () => {
    const line = JSON.stringify({ level: 40, time: Date.UTC(2026, 0, 1, 12, 30, 5, 7), pid: 1, service: "runner", msg: "step failed", runId: "r.1", exit: 3 });
    expect(formatLine("runner", line)).toBe("12:30:05.007 runner    warn  step failed  runId=r.1 exit=3");
    expect(formatLine("sandbox", "not json")).toBe("sandbox   not json");
  });
});

describe("the services of a stack", () => {
  it("are the four, and the webhook too with the Kubernetes driver unless EPHEMERA_STACK_WEBHOOK=false", () => {
    expect(stackServices({})).toEqual(["iocontext", "scheduler", "runner", "sandbox", "tunnel", "console"]);
    expect(stackServices({ EPHEMERA_RUNNER_DRIVER: "kubernetes" })).toEqual(["iocontext", "scheduler", "runner", "sandbox", "tunnel", "console", "webhook"]);
    expect(stackServices({ EPHEMERA_RUNNER_DRIVER: "kubernetes", EPHEMERA_STACK_WEBHOOK: "false" })).toEqual(["iocontext", "scheduler", "runner", "sandbox", "tunnel", "console"]);
  });
});

it("refuses a port picked at start for the API or the IO context, naming the variable", () => {
  expect(() => stackEnv({ EPHEMERA_API_LISTEN: "127.0.0.1:0" })).toThrow("EPHEMERA_API_LISTEN=127.0.0.1:0: pnpm start needs a fixed port here");
  expect(() => stackEnv({ EPHEMERA_IOCONTEXT_LISTEN: "127.0.0.1:0" })).toThrow("EPHEMERA_IOCONTEXT_LISTEN=127.0.0.1:0: pnpm start needs a fixed port");
});
