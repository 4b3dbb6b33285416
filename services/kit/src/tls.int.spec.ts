// TLS on the shared gRPC server: a client that trusts the CA connects, any other does not;
// with a client CA, only a client showing a certificate it signed. And the environment
// variables that configure it, refused with the variable named when they do not add up.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeCerts, type TestCerts } from "../../../test/support/certs.js";
import { checkHealth, startGrpcServer, type RunningServer } from "./grpc.js";
import { createLogger } from "./logger.js";
import { clientTlsFromEnv, serverTlsFromEnv } from "./tls.js";

const logger = createLogger("test", "silent");
let certs: TestCerts;
beforeAll(() => { certs = makeCerts(); });
afterAll(() => certs.remove());

describe("a gRPC server on TLS", () => {
  let server: RunningServer;
  const address = () => `127.0.0.1:${server.port}`;
  beforeAll(async () => { server = await startGrpcServer("127.0.0.1:0", [], logger, { tls: certs.server() }); });
  afterAll(() => server.shutdown());

  it("answers a client that trusts its CA", async () => {
    expect(await checkHealth(address(), 10_000, certs.client())).toBe(true);
    expect(await checkHealth(`localhost:${server.port}`, 10_000, certs.client())).toBe(true);
  });

  it("is not reached in plaintext, nor by a client trusting only the system's roots or another CA", async () => {
    expect(await checkHealth(address(), 2000)).toBe(false);
    expect(await checkHealth(address(), 2000, {})).toBe(false);
    const other = clientTlsFromEnv({ EPHEMERA_TLS_CA: certs.files.otherCa })!;
    expect(await checkHealth(address(), 2000, other)).toBe(false);
  });

  it("checks the name on its certificate: the expected server name must be on it", async () => {
    expect(await checkHealth(address(), 10_000, certs.client({ serverName: "localhost" }))).toBe(true);
    expect(await checkHealth(address(), 2000, certs.client({ serverName: "api.example.com" }))).toBe(false);
  });
});

describe("a gRPC server on mTLS (a client CA)", () => {
  let server: RunningServer;
  const address = () => `127.0.0.1:${server.port}`;
  beforeAll(async () => { server = await startGrpcServer("127.0.0.1:0", [], logger, { tls: certs.server({ mtls: true }) }); });
  afterAll(() => server.shutdown());

  it("answers only a client that shows a certificate its client CA signed", async () => {
    expect(await checkHealth(address(), 10_000, certs.client({ withCert: true }))).toBe(true);
    expect(await checkHealth(address(), 2000, certs.client())).toBe(false);
  });
});

describe("TLS from the environment", () => {
  const f = () => certs.files;

  it("serves plaintext when nothing is set, TLS with a certificate and its key, mTLS with a client CA", () => {
    expect(serverTlsFromEnv({})).toBeUndefined();
    const tls = serverTlsFromEnv({ EPHEMERA_TLS_CERT: f().server.cert, EPHEMERA_TLS_KEY: f().server.key });
    expect(tls).toEqual({ cert: expect.stringContaining("BEGIN CERTIFICATE"), key: expect.stringContaining("PRIVATE KEY") });
    expect(serverTlsFromEnv({ EPHEMERA_TLS_CERT: f().server.cert, EPHEMERA_TLS_KEY: f().server.key, EPHEMERA_TLS_CLIENT_CA: f().ca })?.clientCa)
      .toContain("BEGIN CERTIFICATE");
  });

  it("refuses a server configuration that does not add up, naming the variable and never a key", () => {
    const refusal = (env: Record<string, string>) => { try { serverTlsFromEnv(env); return ""; } catch (err) { return (err as Error).message; } };
    expect(refusal({ EPHEMERA_TLS_CERT: f().server.cert })).toBe("EPHEMERA_TLS_CERT and EPHEMERA_TLS_KEY go together; one of them is empty");
    expect(refusal({ EPHEMERA_TLS_CLIENT_CA: f().ca })).toMatch(/^EPHEMERA_TLS_CLIENT_CA needs EPHEMERA_TLS_CERT and EPHEMERA_TLS_KEY/);
    expect(refusal({ EPHEMERA_TLS_CERT: join(certs.dir, "nope.crt"), EPHEMERA_TLS_KEY: f().server.key }))
      .toMatch(/^EPHEMERA_TLS_CERT: cannot read .*nope\.crt: ENOENT/);
    expect(refusal({ EPHEMERA_TLS_CERT: f().server.key, EPHEMERA_TLS_KEY: f().server.key }))
      .toBe(`EPHEMERA_TLS_CERT: ${f().server.key} holds no PEM certificate`);
    const mismatch = refusal({ EPHEMERA_TLS_CERT: f().server.cert, EPHEMERA_TLS_KEY: f().client.key });
    expect(mismatch).toMatch(/^EPHEMERA_TLS_CERT and EPHEMERA_TLS_KEY do not make a usable pair .*key values mismatch/);
    expect(mismatch).not.toContain("PRIVATE KEY");
  });

  it("makes a client TLS with EPHEMERA_TLS or any client setting, plaintext otherwise", () => {
    expect(clientTlsFromEnv({})).toBeUndefined();
    expect(clientTlsFromEnv({ EPHEMERA_TLS: "true" })).toEqual({});
    expect(clientTlsFromEnv({ EPHEMERA_TLS_SERVER_NAME: "api.internal" })).toEqual({ serverName: "api.internal" });
    expect(clientTlsFromEnv({ EPHEMERA_TLS_CA: f().ca })).toEqual({ ca: expect.stringContaining("BEGIN CERTIFICATE") });
    expect(Object.keys(clientTlsFromEnv({ EPHEMERA_TLS_CLIENT_CERT: f().client.cert, EPHEMERA_TLS_CLIENT_KEY: f().client.key })!)).toEqual(["cert", "key"]);
    expect(() => clientTlsFromEnv({ EPHEMERA_TLS_CLIENT_CERT: f().client.cert }))
      .toThrow("EPHEMERA_TLS_CLIENT_CERT and EPHEMERA_TLS_CLIENT_KEY go together; one of them is empty");
    expect(() => clientTlsFromEnv({ EPHEMERA_TLS: "false", EPHEMERA_TLS_CA: f().ca })).toThrow(/^EPHEMERA_TLS is false, but/);
    const notPem = join(certs.dir, "not.pem");
    writeFileSync(notPem, "hello");
    expect(() => clientTlsFromEnv({ EPHEMERA_TLS_CA: notPem })).toThrow(`EPHEMERA_TLS_CA: ${notPem} holds no PEM certificate`);
  });
});
