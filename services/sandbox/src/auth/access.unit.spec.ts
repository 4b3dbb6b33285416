// Bearer tokens: the tokens file's format and its refusals, static tokens by hash, and JWTs
// verified against a JWKS; each refusal says what is wrong and never holds the token.
import { SignJWT, exportJWK, generateKeyPair, type JWTPayload, type KeyLike } from "jose";
import { PermissionDeniedError, UnauthenticatedError, grpc } from "@ephemera/kit";
import { apiAccess, type ApiAccess } from "./access.js";
import { parseJwks } from "./jwt.js";
import { parseTokensFile, sha256 } from "./tokens.js";

const NOW = new Date("2026-06-01T12:00:00Z");
const hex = (token: string) => sha256(token).toString("hex");
const bearer = (value?: string) => {
  const m = new grpc.Metadata();
  if (value !== undefined) m.set("authorization", value);
  return m;
};

/** The error authenticate() fails with, checked never to contain the token. */
async function refusal(access: ApiAccess, header: string | undefined, secret = header?.split(" ")[1]): Promise<Error> {
  const err = await access.authenticate(bearer(header)).then(() => undefined, (e: unknown) => e as Error);
  if (!err) throw new Error("the token was accepted");
  if (secret) expect(err.message).not.toContain(secret);
  return err;
}

describe("the tokens file", () => {
  it("lists name, role, the token's SHA-256 and an optional expiry, in YAML or JSON", () => {
    const yaml = `# who may call the API\ntokens:\n  - name: ci\n    role: editor\n    sha256: ${hex("t1")}\n  - {name: alice@example.com, role: admin, sha256: ${hex("t2").toUpperCase()}, expires: 2027-01-31T00:00:00Z}\n`;
    const entries = parseTokensFile(yaml, "tokens.yaml");
    expect(entries.map((e) => [e.name, e.role, e.expires?.toISOString()])).toEqual([
      ["ci", "editor", undefined], ["alice@example.com", "admin", "2027-01-31T00:00:00.000Z"],
    ]);
    expect(parseTokensFile(JSON.stringify({ tokens: [{ name: "x", role: "viewer", sha256: hex("t") }] }), "t.json")).toHaveLength(1);
  });

  it("names every problem at once, by its place in the file", () => {
    const text = `tokens:\n  - {name: ci, role: writer, sha256: ${hex("a")}}\n  - {name: ci, role: viewer, sha256: abc, token: plain}\n  - {name: b, role: viewer, sha256: ${hex("a")}, expires: soon}\n`;
    expect(() => parseTokensFile(text, "EPHEMERA_API_TOKENS (t.yaml)")).toThrow([
      "EPHEMERA_API_TOKENS (t.yaml):",
      "  tokens[0].role: must be one of viewer, editor, admin",
      "  tokens[1].token: unknown field (fields: name, role, sha256, expires)",
      "  tokens[1].name: \"ci\" is named twice",
      "  tokens[1].sha256: must be the token's SHA-256 in hex (64 characters; printf %s \"$TOKEN\" | sha256sum)",
      "  tokens[2].sha256: the same token is listed twice",
      "  tokens[2].expires: must be a time such as 2027-01-31T00:00:00Z",
    ].join("\n"));
    expect(() => parseTokensFile("tokens: []", "f")).toThrow('f: expected "tokens:", a list of {name, role, sha256}, with at least one entry');
    expect(() => parseTokensFile("tokens: [", "f")).toThrow(/^f: not YAML or JSON/);
  });
});

describe("static bearer tokens", () => {
  const access = apiAccess({
    tokens: parseTokensFile(`tokens:
  - {name: ci, role: editor, sha256: ${hex("s3cret-ci")}}
  - {name: old, role: admin, sha256: ${hex("s3cret-old")}, expires: "2026-05-01T00:00:00Z"}`, "f"),
  }, () => NOW)!;

  it("stand for their entry's name and role", async () => {
    expect(await access.authenticate(bearer("Bearer s3cret-ci"))).toEqual({ name: "ci", role: "editor", via: "token" });
    expect(await access.authenticate(bearer("bearer s3cret-ci"))).toEqual({ name: "ci", role: "editor", via: "token" });
  });

  it("are refused missing, malformed, unknown or expired, saying which", async () => {
    const cases: Array<[string | undefined, string]> = [
      [undefined, "missing bearer token"],
      ["Basic czNjcmV0LWNp", 'authorization is not a bearer token (expected "Bearer <token>")'],
      ["Bearer", 'authorization is not a bearer token (expected "Bearer <token>")'],
      ["Bearer s3cret-cj", "token not recognised"],
      ["Bearer s3cret-old", "token expired (token old, at 2026-05-01T00:00:00.000Z)"],
    ];
    for (const [header, message] of cases) {
      const err = await refusal(access, header);
      expect(err).toBeInstanceOf(UnauthenticatedError);
      expect(err.message).toBe(message);
    }
  });

  it("are not mistaken for one another by a header sent twice", async () => {
    const m = bearer("Bearer s3cret-ci");
    m.add("authorization", "Bearer s3cret-old");
    await expect(access.authenticate(m)).rejects.toThrow("more than one authorization header");
  });
});

describe("JWT bearer tokens", () => {
  let key: { privateKey: KeyLike; publicKey: KeyLike };
  let other: { privateKey: KeyLike; publicKey: KeyLike };
  let access: ApiAccess;
  const issuer = "https://login.example.com";
  const audience = "ephemera-api";

  beforeAll(async () => {
    key = await generateKeyPair("ES256");
    other = await generateKeyPair("ES256");
    const jwks = { keys: [{ ...(await exportJWK(key.publicKey)), kid: "k1", alg: "ES256", use: "sig" }] };
    access = apiAccess({ jwt: { jwks: parseJwks(JSON.stringify(jwks), "jwks.json"), issuer, audience, roleClaim: "ephemera_role" } }, () => NOW)!;
  });

  const sign = (claims: JWTPayload, options: { signer?: KeyLike; kid?: string; iss?: string; aud?: string; exp?: Date } = {}) =>
    new SignJWT({ sub: "alice", ephemera_role: "editor", ...claims })
      .setProtectedHeader({ alg: "ES256", kid: options.kid ?? "k1" })
      .setIssuer(options.iss ?? issuer).setAudience(options.aud ?? audience)
      .setIssuedAt(new Date(NOW.getTime() - 60_000))
      .setExpirationTime(options.exp ?? new Date(NOW.getTime() + 3_600_000))
      .sign(options.signer ?? key.privateKey);

  it("stand for their sub, with the strongest role their role claim holds", async () => {
    expect(await access.authenticate(bearer(`Bearer ${await sign({})}`))).toEqual({ name: "alice", role: "editor", via: "jwt" });
    const many = await sign({ ephemera_role: ["viewer", "admin", "cook"] });
    expect((await access.authenticate(bearer(`Bearer ${many}`))).role).toBe("admin");
  });

  it("are refused expired, badly signed, from another issuer or for another audience, saying which", async () => {
    const cases: Array<[Promise<string>, string]> = [
      [sign({}, { exp: new Date(NOW.getTime() - 120_000) }), "token expired"],
      [sign({}, { signer: other.privateKey }), "token signature does not verify"],
      [sign({}, { signer: other.privateKey, kid: "k2" }), "token signed by a key the API does not know"],
      [sign({}, { iss: "https://evil.example.com" }), "token issuer is not https://login.example.com"],
      [sign({}, { aud: "another-api" }), "token audience does not include ephemera-api"],
      [sign({ nbf: Math.floor(NOW.getTime() / 1000) + 600 }), "token not valid yet (nbf)"],
      [sign({ sub: undefined }), "token has no sub claim"],
      [Promise.resolve("not-a-jwt"), "token is not a JWT"],
      [Promise.resolve("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.x"), "token algorithm not accepted (accepted: RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)"],
      [Promise.resolve("abc.def.ghi"), "malformed token (not a verifiable JWT)"],
    ];
    for (const [token, message] of cases) {
      const jwt = await token;
      const err = await refusal(access, `Bearer ${jwt}`, jwt);
      expect([err.constructor.name, err.message]).toEqual(["UnauthenticatedError", message]);
    }
  });

  it("without a role in the claim are authenticated but allowed nothing", async () => {
    const err = await refusal(access, `Bearer ${await sign({ ephemera_role: "owner" })}`);
    expect(err).toBeInstanceOf(PermissionDeniedError);
    expect(err.message).toBe('token of alice carries no role: its claim "ephemera_role" holds none of viewer, editor, admin');
  });

  it("are checked against public keys only: a JWKS holding a private or secret key is refused", async () => {
    const priv = { keys: [await exportJWK(key.privateKey)] };
    expect(() => parseJwks(JSON.stringify(priv), "jwks.json")).toThrow("jwks.json: keys[0] is a private or secret key; the API needs the issuer's public keys only");
    expect(() => parseJwks(JSON.stringify({ keys: [{ kty: "oct", k: "c2VjcmV0" }] }), "j")).toThrow(/keys\[0\] is a private or secret key/);
    expect(() => parseJwks("{}", "j")).toThrow('j: expected a JWKS, {"keys": [...]}, with at least one key');
  });
});
