import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CapabilityVerifier, signCapability, signingKey, signingKeys, verifyCapability, type StepCapability } from "./capability.js";
import { PermissionDeniedError, UnauthenticatedError } from "./errors.js";

const key = signingKey(Buffer.from("k".repeat(32)));
const other = signingKey(Buffer.from("o".repeat(32)));
const cap: StepCapability = { run: "rk.db.create.provision.1", inputs: ["param:region", "step:a.host"], outputs: ["dsn"] };
const at = new Date("2026-11-23T10:00:00Z");

describe("capability tokens", () => {
  it("grant exactly what they name to their run", async () => {
    const token = await signCapability(key, cap, 60_000, at);
    expect(await verifyCapability([key], token, cap.run, at)).toEqual(cap);
    expect(token).not.toContain("k".repeat(8));
  });

  it("refuse a missing, malformed, forged or expired token, and never echo it", async () => {
    const token = await signCapability(key, cap, 60_000, at);
    const refusal = async (t: string, when = at) => verifyCapability([key], t, cap.run, when).then(() => undefined, (e: unknown) => e as Error);
    const cases: Array<[string, Error | undefined, RegExp]> = [
      ["missing", await refusal(""), /no capability token/],
      ["malformed", await refusal("not.a.jwt"), /malformed/],
      ["signed by another key", await refusal(await signCapability({ ...other, id: key.id }, cap, 60_000, at)), /signature does not verify/],
      ["unknown key", await refusal(await signCapability(other, cap, 60_000, at)), /unknown key/],
      ["expired", await refusal(token, new Date(at.getTime() + 120_000)), /expired/],
      ["claims rewritten", await refusal(token.replace(/^([^.]+)\.([^.]+)/, (_, h: string) => `${h}.${Buffer.from(JSON.stringify({ sub: cap.run, in: ["param:all"], out: [] })).toString("base64url")}`)), /signature does not verify/],
    ];
    for (const [what, err, message] of cases) {
      expect({ what, err }).toEqual({ what, err: expect.any(UnauthenticatedError) });
      expect(err!.message).toMatch(message);
      expect(err!.message).not.toContain(token);
    }
  });

  it("refuse a valid token of another run as permission denied", async () => {
    const token = await signCapability(key, { ...cap, run: "other.db.create.provision.1" }, 60_000, at);
    await expect(verifyCapability([key], token, cap.run, at)).rejects.toBeInstanceOf(PermissionDeniedError);
  });

  it("verify with the previous key during a rotation", async () => {
    const token = await signCapability(other, cap, 60_000, at);
    expect(await verifyCapability([key, other], token, cap.run, at)).toEqual(cap);
  });
});

describe("CapabilityVerifier: tokens verified once, recognised until they expire", () => {
  const refusal = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e as Error);

  it("recognises a token it verified without verifying it again, and only that exact token", async () => {
    const keys = [key];
    const verifier = new CapabilityVerifier(keys);
    const token = await signCapability(key, cap, 60_000, at);
    expect(await verifier.verify(token, cap.run, at)).toEqual(cap);
    // With no key left, only a token recognised from before can pass: this one is.
    keys.length = 0;
    expect(await verifier.verify(token, cap.run, at)).toEqual(cap);
    // The same claims with another signature are not the token verified: checked, and refused.
    const forged = `${token.slice(0, token.lastIndexOf(".") + 1)}${"A".repeat(43)}`;
    expect(await refusal(verifier.verify(forged, cap.run, at))).toEqual(expect.any(UnauthenticatedError));
  });

  it("refuses a recognised token once it expired (past the clocks' tolerance), and for another run", async () => {
    const verifier = new CapabilityVerifier([key]);
    const token = await signCapability(key, cap, 60_000, at);
    await verifier.verify(token, cap.run, at);
    expect(await verifier.verify(token, cap.run, new Date(at.getTime() + 64_000))).toEqual(cap);
    const other = await refusal(verifier.verify(token, "other.db.create.provision.1", at));
    expect(other).toEqual(expect.any(PermissionDeniedError));
    expect(other!.message).toContain(`the token is for another run (${cap.run})`);
    const late = await refusal(verifier.verify(token, cap.run, new Date(at.getTime() + 66_000)));
    expect(late).toEqual(expect.any(UnauthenticatedError));
    expect(late!.message).toMatch(/expired/);
    expect(late!.message).not.toContain(token);
  });

  it("remembers nothing it refused: a bad token is refused every time", async () => {
    const verifier = new CapabilityVerifier([key]);
    const token = await signCapability(other, cap, 60_000, at);
    for (let i = 0; i < 2; i++) expect(await refusal(verifier.verify(token, cap.run, at))).toEqual(expect.any(UnauthenticatedError));
    const stranger = await signCapability(key, { ...cap, run: "other.db.create.provision.1" }, 60_000, at);
    for (let i = 0; i < 2; i++) expect(await refusal(verifier.verify(stranger, cap.run, at))).toEqual(expect.any(PermissionDeniedError));
  });
});

describe("signing keys", () => {
  let dir: string;
  beforeEach(() => { dir = mkdtempSync(join(tmpdir(), "keys-")); });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("create one key file (0600) that every later reader shares", () => {
    const file = join(dir, "p", "signing.key");
    const [a] = signingKeys({}, file);
    const [b] = signingKeys({}, file);
    expect(a!.id).toBe(b!.id);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file).length).toBeGreaterThanOrEqual(32);
  });

  it("take EPHEMERA_SIGNING_KEY first, EPHEMERA_SIGNING_KEY_PREVIOUS as a second key, and refuse short keys by name", () => {
    const keys = signingKeys({ EPHEMERA_SIGNING_KEY: "a".repeat(40), EPHEMERA_SIGNING_KEY_PREVIOUS: "b".repeat(40) }, join(dir, "unused"));
    expect(keys.map((k) => k.id)).toEqual([signingKey(Buffer.from("a".repeat(40))).id, signingKey(Buffer.from("b".repeat(40))).id]);
    expect(() => signingKeys({ EPHEMERA_SIGNING_KEY: "short" }, join(dir, "unused"))).toThrow("EPHEMERA_SIGNING_KEY: a signing key must be at least 32 bytes, got 5");
    expect(() => signingKeys({ EPHEMERA_SIGNING_KEY: "short" }, join(dir, "unused"))).not.toThrow(/short/);
  });
});
