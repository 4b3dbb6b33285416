// The public API with bearer tokens, over TLS, in front of the real core (its scheduler,
// IO context and runner running real steps): every method, unary or streaming, refuses a
// call without a valid token; roles decide the rest, and a refused write writes nothing.
// Health and reflection stay open.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SignJWT, exportJWK, generateKeyPair, type JWTPayload, type KeyLike } from "jose";
import * as pb from "@ephemera/proto";
import { channelCredentials, checkHealth, clientOptions, grpc } from "@ephemera/kit";
import { TOKENS, tokensFile } from "../../../../test/support/api-tokens.js";
import { makeCerts } from "../../../../test/support/certs.js";
import { startCore, type Core } from "../../../../test/support/core.js";
import { apiAccess, apiAccessConfigFromEnv } from "./access.js";
import { parseJwks } from "./jwt.js";
import { methodKey } from "./policy.js";
import { parseTokensFile } from "./tokens.js";

const ISSUER = "https://login.example.com";
const AUDIENCE = "ephemera";
const SERVICES = [pb.ResourcePluginServiceService, pb.SandboxServiceService, pb.LogServiceService, pb.EventServiceService, pb.AccessServiceService];
const METHODS = SERVICES.flatMap((s) => Object.values(s) as grpc.MethodDefinition<unknown, unknown>[]);

const PLUGIN = pb.ResourcePlugin.fromJSON({
  name: "hello-db",
  spec: { runner: { image: "debian:bookworm-slim" }, create: [{ name: "provision", script: "#!/bin/sh\necho provisioning\n" }] },
});
const SANDBOX = pb.Sandbox.fromJSON({ name: "feature-x", spec: { cluster: "local", resources: [{ name: "db", plugin: "hello-db" }] } });

const certs = makeCerts();
let core: Core;
let client: grpc.Client;
let key: { privateKey: KeyLike; publicKey: KeyLike };

beforeAll(async () => {
  key = await generateKeyPair("RS256");
  const jwks = parseJwks(JSON.stringify({ keys: [{ ...(await exportJWK(key.publicKey)), kid: "k1", alg: "RS256" }] }), "jwks");
  core = await startCore({
    api: {
      access: apiAccess({ tokens: parseTokensFile(tokensFile(), "tokens"), jwt: { jwks, issuer: ISSUER, audience: AUDIENCE, roleClaim: "ephemera_role" } }),
      tls: certs.server(),
    },
  });
  const { credentials, options } = channelCredentials(certs.client());
  client = new grpc.Client(core.address, credentials, { ...clientOptions, ...options });
});
afterAll(async () => {
  client?.close();
  await core?.stop();
  certs.remove();
});

type Status = { code: grpc.status; details: string };
const OK: Status = { code: grpc.status.OK, details: "" };

/** Calls a method with `request` (default: its empty request) and `bearer`; what it ended with (streams: read to their end). */
function invoke(method: grpc.MethodDefinition<unknown, unknown>, bearer?: string, request?: unknown): Promise<Status> {
  const metadata = new grpc.Metadata();
  if (bearer !== undefined) metadata.set("authorization", bearer);
  const req = request ?? method.requestDeserialize(Buffer.alloc(0));
  const options = { deadline: Date.now() + 5_000 };
  const outcome = (err: grpc.ServiceError | null): Status => (err ? { code: err.code, details: err.details } : OK);
  if (!method.responseStream) {
    return new Promise((resolve) => client.makeUnaryRequest(method.path, method.requestSerialize, method.responseDeserialize, req, metadata, options,
      (err) => resolve(outcome(err))));
  }
  return new Promise((resolve) => {
    const stream = client.makeServerStreamRequest(method.path, method.requestSerialize, method.responseDeserialize, req, metadata, options);
    stream.on("data", () => stream.cancel()); // admitted: that is all this needs to know
    stream.on("error", (err: grpc.ServiceError) => resolve(err.code === grpc.status.CANCELLED ? OK : outcome(err)));
    stream.on("end", () => resolve(OK));
  });
}
const method = (key: string) => METHODS.find((m) => methodKey(m.path) === key)!;
const bearer = (role: keyof typeof TOKENS) => `Bearer ${TOKENS[role]}`;
const jwt = (claims: JWTPayload, exp = Date.now() + 600_000, signer = key.privateKey) =>
  new SignJWT({ sub: "alice@example.com", ephemera_role: "editor", ...claims }).setProtectedHeader({ alg: "RS256", kid: "k1" })
    .setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime(Math.floor(exp / 1000)).sign(signer);

describe("the API with bearer tokens", () => {
  it("refuses every method without a token, unary and streaming, with UNAUTHENTICATED: missing bearer token", async () => {
    expect(METHODS.filter((m) => m.responseStream).map((m) => methodKey(m.path)).sort())
      .toEqual(["EventService/Watch", "LogService/Get", "SandboxService/Watch"]);
    for (const m of METHODS) {
      expect([methodKey(m.path), await invoke(m)]).toEqual([methodKey(m.path), { code: grpc.status.UNAUTHENTICATED, details: "missing bearer token" }]);
    }
    expect(await core.events()).toEqual([]);
  });

  it("refuses tokens not in the file, expired or badly signed JWTs, naming the fault and never echoing the token", async () => {
    const other = await generateKeyPair("RS256");
    const cases: Array<[string, string]> = [
      ["Bearer not-a-listed-token", "token not recognised"],
      [`Bearer ${await jwt({}, Date.now() - 120_000)}`, "token expired"],
      [`Bearer ${await jwt({}, undefined, other.privateKey)}`, "token signature does not verify"],
      [`Token ${TOKENS.admin}`, 'authorization is not a bearer token (expected "Bearer <token>")'],
    ];
    for (const [header, details] of cases) {
      for (const m of [method("SandboxService/List"), method("SandboxService/Watch")]) {
        const status = await invoke(m, header, m === method("SandboxService/Watch") ? { name: "x", showOutputs: false } : undefined);
        expect(status).toEqual({ code: grpc.status.UNAUTHENTICATED, details });
        expect(status.details).not.toContain(header.split(" ")[1]!.slice(0, 12));
      }
    }
  });

  it("lets a viewer read, and refuses its writes with PERMISSION_DENIED, writing nothing", async () => {
    expect(await invoke(method("ResourcePluginService/Apply"), bearer("editor"), { plugin: PLUGIN })).toEqual(OK);
    const written = (await core.events()).length;
    for (const key of ["ResourcePluginService/List", "ResourcePluginService/Get", "SandboxService/List", "EventService/Watch"]) {
      const request = key === "ResourcePluginService/Get" ? { ref: "hello-db" } : undefined;
      expect([key, await invoke(method(key), bearer("viewer"), request)]).toEqual([key, OK]);
    }
    const refused: Array<[string, unknown, string]> = [
      ["ResourcePluginService/Apply", { plugin: PLUGIN }, "role viewer may not call ResourcePluginService/Apply (it needs editor)"],
      ["SandboxService/Apply", { sandbox: SANDBOX }, "role viewer may not call SandboxService/Apply (it needs editor)"],
      ["SandboxService/Delete", { name: "feature-x", force: false }, "role viewer may not call SandboxService/Delete (it needs editor)"],
      ["SandboxService/Retry", { name: "feature-x" }, "role viewer may not call SandboxService/Retry (it needs editor)"],
      ["ResourcePluginService/Delete", { ref: "hello-db" }, "role viewer may not call ResourcePluginService/Delete (it needs admin)"],
      ["SandboxService/Watch", { name: "feature-x", showOutputs: true }, "role viewer may not call SandboxService/Watch with show_outputs (it needs editor)"],
    ];
    for (const [key, request, details] of refused) {
      expect([key, await invoke(method(key), bearer("viewer"), request)]).toEqual([key, { code: grpc.status.PERMISSION_DENIED, details }]);
    }
    expect((await core.events()).length).toBe(written);
  });

  it("lets an editor (a listed token or a JWT) apply, and records who did it; a forced delete needs an admin", async () => {
    expect(await invoke(method("SandboxService/Apply"), `Bearer ${await jwt({})}`, { sandbox: SANDBOX })).toEqual(OK);
    const created = await core.waitForEvent("ephemera.sandbox.created.v1", "feature-x");
    expect(created.actor).toBe("alice@example.com");
    await core.waitForEvent("ephemera.sandbox.ready.v1", "feature-x");
    expect(await invoke(method("SandboxService/Delete"), bearer("editor"), { name: "feature-x", force: true }))
      .toEqual({ code: grpc.status.PERMISSION_DENIED, details: "role editor may not call SandboxService/Delete with force (it needs admin)" });
    expect(await invoke(method("SandboxService/Delete"), bearer("admin"), { name: "feature-x", force: true })).toEqual(OK);
    expect((await core.waitForEvent("ephemera.sandbox.deleted.v1", "feature-x")).actor).toBe("test-admin");
  });

  it("tells a caller who its token stands for and its role (WhoAmI), and refuses one without a valid token", async () => {
    const whoAmI = (header?: string) => new Promise<{ err: grpc.ServiceError | null; res?: pb.WhoAmIResponse }>((resolve) => {
      const metadata = new grpc.Metadata();
      if (header) metadata.set("authorization", header);
      const m = method("AccessService/WhoAmI");
      client.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, {}, metadata, { deadline: Date.now() + 5_000 },
        (err, res) => resolve({ err, res: res as pb.WhoAmIResponse | undefined }));
    });
    expect((await whoAmI(bearer("viewer"))).res).toEqual({ name: "test-viewer", role: "viewer", open: false });
    expect((await whoAmI(bearer("admin"))).res).toEqual({ name: "test-admin", role: "admin", open: false });
    expect((await whoAmI(`Bearer ${await jwt({ sub: "bob@example.com" })}`)).res).toEqual({ name: "bob@example.com", role: "editor", open: false });
    expect((await whoAmI()).err?.code).toBe(grpc.status.UNAUTHENTICATED);
    expect((await whoAmI("Bearer not-a-token")).err?.code).toBe(grpc.status.UNAUTHENTICATED);
  });

  it("keeps health and reflection open", async () => {
    expect(await checkHealth(core.address, 10_000, certs.client())).toBe(true);
    // ServerReflectionRequest{list_services: ""}: field 7, length 0. The first reflection call
    // builds the descriptor index (about 0.5 s alone, several seconds on a loaded machine).
    const answer = await new Promise<Buffer>((resolve, reject) => {
      const stream = client.makeBidiStreamRequest("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        (b: Buffer) => b, (b: Buffer) => b, new grpc.Metadata(), { deadline: Date.now() + 20_000 });
      stream.on("data", (b: Buffer) => { resolve(b); stream.end(); });
      stream.on("error", reject);
      stream.write(Buffer.from([0x3a, 0x00]));
    });
    expect(answer.toString("latin1")).toContain("ephemera.v1.SandboxService");
  });

  it("is not reached without trusting its CA", async () => {
    expect(await checkHealth(core.address, 2_000)).toBe(false);
    expect(await checkHealth(core.address, 2_000, {})).toBe(false);
  });
});

describe("API access from the environment", () => {
  const dir = mkdtempSync(join(tmpdir(), "eph-access-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, text: string) => { const p = join(dir, name); writeFileSync(p, text); return p; };

  it("reads the tokens file and the JWKS once, and refuses a configuration that does not add up, naming the variables", async () => {
    const tokens = write("tokens.yaml", tokensFile());
    const jwks = write("jwks.json", JSON.stringify({ keys: [await exportJWK(key.publicKey)] }));
    const config = apiAccessConfigFromEnv({
      EPHEMERA_API_TOKENS: tokens, EPHEMERA_API_JWKS: jwks, EPHEMERA_API_JWT_ISSUER: ISSUER, EPHEMERA_API_JWT_AUDIENCE: AUDIENCE,
    });
    expect(config.tokens?.map((t) => t.name)).toEqual(["test-viewer", "test-editor", "test-admin"]);
    expect(config.jwt).toMatchObject({ issuer: ISSUER, audience: AUDIENCE, roleClaim: "ephemera_role" });
    expect(apiAccess(config)?.describe).toBe(`tokens file (3 tokens), JWTs of ${ISSUER} for ${AUDIENCE} (role claim ephemera_role)`);
    expect(apiAccess(apiAccessConfigFromEnv({}))).toBeUndefined();

    expect(() => apiAccessConfigFromEnv({ EPHEMERA_API_JWKS: jwks, EPHEMERA_API_JWT_ISSUER: ISSUER }))
      .toThrow("EPHEMERA_API_JWKS needs EPHEMERA_API_JWT_ISSUER and EPHEMERA_API_JWT_AUDIENCE: a JWT is accepted only from one issuer, for this API");
    expect(() => apiAccessConfigFromEnv({ EPHEMERA_API_JWT_AUDIENCE: AUDIENCE })).toThrow(/^EPHEMERA_API_JWT_ISSUER and EPHEMERA_API_JWT_AUDIENCE need EPHEMERA_API_JWKS/);
    expect(() => apiAccessConfigFromEnv({ EPHEMERA_API_TOKENS: join(dir, "nope.yaml") })).toThrow(`EPHEMERA_API_TOKENS: cannot read ${join(dir, "nope.yaml")}: ENOENT`);
    const bad = write("bad.yaml", "tokens:\n  - {name: x, role: root, sha256: 00}\n");
    expect(() => apiAccessConfigFromEnv({ EPHEMERA_API_TOKENS: bad })).toThrow(`EPHEMERA_API_TOKENS (${bad}):\n  tokens[0].role: must be one of viewer, editor, admin`);
  });
});
