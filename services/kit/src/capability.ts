// Capability tokens of step runs: what one attempt of one step may do at the IO context,
// signed by the runner that starts it and checked by the IO context on every call, from
// the token alone. An HS256 JWT (jose) whose claims name the run, the input sources it
// may read and the outputs it may write, and when it expires; its key id names the
// signing key, so a key can be rotated while tokens signed with the previous one live.
import { createHash, randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { SignJWT, errors as joseErrors, jwtVerify } from "jose";
import { LRUCache } from "lru-cache";
import type * as pb from "@ephemera/proto";
import { envString, type Env } from "./config.js";
import { PermissionDeniedError, UnauthenticatedError } from "./errors.js";

/** What a step run may do. Input sources: `param:<name>` (a sandbox value) or `step:<step>.<output>`. */
export interface StepCapability {
  run: string;
  inputs: string[];
  outputs: string[];
}

export const paramSource = (name: string) => `param:${name}`;
export const stepSource = (step: string, output: string) => `step:${step}.${output}`;

/** What any run of `step` may do, from its spec: read its declared inputs' sources, write its declared outputs. */
export function stepGrants(step: Pick<pb.Step, "inputs" | "outputs">): Omit<StepCapability, "run"> {
  return {
    inputs: step.inputs.map((i) => (i.valueFromStep ? stepSource(i.valueFromStep.name, i.valueFromStep.output) : paramSource(i.name))),
    outputs: step.outputs.map((o) => o.name),
  };
}

/** `as.env`; an input without `as` (or with an empty one) arrives as its upper-cased name, '-' → '_'. */
export function inputEnvName(input: pb.StepInput): string {
  if (input.as && (input.as.env || input.as.path)) return input.as.env;
  return input.name.toUpperCase().replace(/-/g, "_");
}

/** A sandbox param's value; undefined when it is not set (a param named like an Object method included). */
export const sandboxParam = (params: Record<string, string> | undefined, name: string): string | undefined =>
  params && Object.hasOwn(params, name) ? params[name] : undefined;

export const stepCapability = (run: string, step: Pick<pb.Step, "inputs" | "outputs">): StepCapability => ({ run, ...stepGrants(step) });

const ISSUER = "ephemera-runner";
const AUDIENCE = "ephemera-iocontext";
const MIN_KEY_BYTES = 32;

export interface SigningKey {
  id: string;
  secret: Uint8Array;
}

export function signingKey(secret: Uint8Array): SigningKey {
  if (secret.length < MIN_KEY_BYTES) throw new Error(`a signing key must be at least ${MIN_KEY_BYTES} bytes, got ${secret.length}`);
  return { id: createHash("sha256").update(secret).digest("hex").slice(0, 16), secret };
}

/**
 * The keys of a service: the first signs, all verify. From EPHEMERA_SIGNING_KEY (the key
 * itself, at least 32 bytes) or else the file EPHEMERA_SIGNING_KEY_FILE (default
 * `<tmpdir>/ephemera/<prefix>/signing.key`, created with a random key, mode 0600, by the
 * first service that needs it: the runner and the IO context of one machine share it);
 * EPHEMERA_SIGNING_KEY_PREVIOUS, a key still accepted while tokens it signed may live.
 */
export function signingKeys(env: Env, defaultFile: string): SigningKey[] {
  const given = envString(env, "EPHEMERA_SIGNING_KEY", "");
  const file = envString(env, "EPHEMERA_SIGNING_KEY_FILE", defaultFile);
  const current = given ? Buffer.from(given, "utf8") : keyFile(file);
  const keys = [withName(() => signingKey(current), given ? "EPHEMERA_SIGNING_KEY" : `the key in ${file}`)];
  const previous = envString(env, "EPHEMERA_SIGNING_KEY_PREVIOUS", "");
  if (previous) keys.push(withName(() => signingKey(Buffer.from(previous, "utf8")), "EPHEMERA_SIGNING_KEY_PREVIOUS"));
  return keys;
}

function withName<T>(f: () => T, name: string): T {
  try {
    return f();
  } catch (err) {
    throw new Error(`${name}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Reads the key file, or creates it: written whole under a name of its own, then linked
 * into place (a link never replaces a file), so two services starting at once agree on
 * one key and neither ever reads a half-written one.
 */
function keyFile(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const staged = `${path}.${process.pid}.${randomBytes(6).toString("hex")}`;
  writeFileSync(staged, randomBytes(48).toString("base64url"), { mode: 0o600, flag: "wx" });
  try {
    linkSync(staged, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  } finally {
    unlinkSync(staged);
  }
  return readFileSync(path);
}

/** Where a machine's runner and IO context keep their shared key when none is given. */
export const defaultSigningKeyFile = (tmpdir: string, prefix: string) => join(tmpdir, "ephemera", prefix, "signing.key");

/** A token for `capability`, valid for `ttlMs` from `now`. */
export async function signCapability(key: SigningKey, capability: StepCapability, ttlMs: number, now = new Date()): Promise<string> {
  const iat = Math.floor(now.getTime() / 1000);
  return new SignJWT({ in: capability.inputs, out: capability.outputs })
    .setProtectedHeader({ alg: "HS256", kid: key.id })
    .setSubject(capability.run)
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt(iat)
    .setExpirationTime(iat + Math.ceil(ttlMs / 1000))
    .sign(key.secret);
}

/**
 * The capability a token grants to `runId`. UnauthenticatedError: missing, malformed,
 * signed with an unknown key, badly signed or expired; PermissionDeniedError: a valid
 * token of another run. Messages never hold the token.
 */
export async function verifyCapability(keys: SigningKey[], token: string, runId: string, now = new Date()): Promise<StepCapability> {
  return (await verifiedToken(keys, token, runId, now)).capability;
}

/** How far past its expiry a token is still taken: the signer's clock and the verifier's differ. */
const CLOCK_TOLERANCE_S = 5;

async function verifiedToken(keys: SigningKey[], token: string, runId: string, now: Date): Promise<{ capability: StepCapability; exp?: number }> {
  if (!token) throw new UnauthenticatedError(`run ${runId}: no capability token`);
  let payload;
  try {
    ({ payload } = await jwtVerify(token, ({ kid }) => {
      const key = keys.find((k) => k.id === kid);
      if (!key) throw new UnauthenticatedError(`run ${runId}: the token is signed with an unknown key (${kid ?? "none named"})`);
      return key.secret;
    }, { algorithms: ["HS256"], issuer: ISSUER, audience: AUDIENCE, currentDate: now, clockTolerance: CLOCK_TOLERANCE_S }));
  } catch (err) {
    if (err instanceof UnauthenticatedError) throw err;
    const why = err instanceof joseErrors.JWTExpired ? "the token has expired"
      : err instanceof joseErrors.JWSSignatureVerificationFailed ? "the token's signature does not verify"
      : err instanceof joseErrors.JWTClaimValidationFailed ? `the token's ${err.claim} claim is wrong`
      : "the token is malformed";
    throw new UnauthenticatedError(`run ${runId}: ${why}`);
  }
  if (payload.sub !== runId) throw anotherRun(runId, String(payload.sub));
  const list = (v: unknown) => (Array.isArray(v) && v.every((x) => typeof x === "string") ? v : []);
  return { capability: { run: runId, inputs: list(payload["in"]), outputs: list(payload["out"]) }, ...(payload.exp === undefined ? {} : { exp: payload.exp }) };
}

const anotherRun = (runId: string, sub: string) => new PermissionDeniedError(`run ${runId}: the token is for another run (${sub})`);

/**
 * verifyCapability, remembering the tokens it verified until they expire: a run's calls after
 * its first cost a lookup instead of a JWT parse and an HMAC. A token is recognised by its
 * whole text, signature included, so only the exact string verified is; one without an
 * expiry is never remembered. Bounded (least recently used first out).
 */
export class CapabilityVerifier {
  private readonly verified: LRUCache<string, { capability: StepCapability; exp: number }>;

  constructor(private readonly keys: SigningKey[], max = 10_000) {
    this.verified = new LRUCache({ max });
  }

  async verify(token: string, runId: string, now = new Date()): Promise<StepCapability> {
    const known = token ? this.verified.get(token) : undefined;
    if (known) {
      if (now.getTime() / 1000 > known.exp + CLOCK_TOLERANCE_S) {
        this.verified.delete(token);
        throw new UnauthenticatedError(`run ${runId}: the token has expired`);
      }
      if (known.capability.run !== runId) throw anotherRun(runId, known.capability.run);
      return known.capability;
    }
    const { capability, exp } = await verifiedToken(this.keys, token, runId, now);
    if (exp !== undefined) this.verified.set(token, { capability: Object.freeze(capability), exp });
    return capability;
  }
}

/**
 * What a job runner group's pod may do at the JobAgent service: take and report the jobs of
 * its group, as that pod. Minted by the runner that creates the pod (scope `job-agent`,
 * claims `group` and `pod`, subject `<group>/<pod>`), checked by the service from the token alone.
 */
export interface PodCapability {
  group: string;
  pod: string;
}

export const JOB_AGENT_SCOPE = "job-agent";
const JOBS_AUDIENCE = "ephemera-jobs";

/** A token for the pod `capability` names, valid for `ttlMs` from `now`. */
export async function signPodCapability(key: SigningKey, capability: PodCapability, ttlMs: number, now = new Date()): Promise<string> {
  const iat = Math.floor(now.getTime() / 1000);
  return new SignJWT({ scope: JOB_AGENT_SCOPE, group: capability.group, pod: capability.pod })
    .setProtectedHeader({ alg: "HS256", kid: key.id })
    .setSubject(`${capability.group}/${capability.pod}`)
    .setIssuer(ISSUER)
    .setAudience(JOBS_AUDIENCE)
    .setIssuedAt(iat)
    .setExpirationTime(iat + Math.ceil(ttlMs / 1000))
    .sign(key.secret);
}

/**
 * The pod a token names, when it is a valid job-agent token of `group`. UnauthenticatedError:
 * missing, malformed, unknown key, bad signature, expired, another scope; PermissionDeniedError:
 * a valid token of another group. Messages never hold the token.
 */
export async function verifyPodCapability(keys: SigningKey[], token: string, group: string, now = new Date()): Promise<PodCapability> {
  if (!token) throw new UnauthenticatedError(`group ${group}: no pod token`);
  let payload;
  try {
    ({ payload } = await jwtVerify(token, ({ kid }) => {
      const key = keys.find((k) => k.id === kid);
      if (!key) throw new UnauthenticatedError(`group ${group}: the pod token is signed with an unknown key (${kid ?? "none named"})`);
      return key.secret;
    }, { algorithms: ["HS256"], issuer: ISSUER, audience: JOBS_AUDIENCE, currentDate: now, clockTolerance: 5 }));
  } catch (err) {
    if (err instanceof UnauthenticatedError) throw err;
    const why = err instanceof joseErrors.JWTExpired ? "the pod token has expired"
      : err instanceof joseErrors.JWSSignatureVerificationFailed ? "the pod token's signature does not verify"
      : err instanceof joseErrors.JWTClaimValidationFailed ? `the pod token's ${err.claim} claim is wrong`
      : "the pod token is malformed";
    throw new UnauthenticatedError(`group ${group}: ${why}`);
  }
  if (payload["scope"] !== JOB_AGENT_SCOPE || typeof payload["pod"] !== "string" || typeof payload["group"] !== "string") {
    throw new UnauthenticatedError(`group ${group}: not a ${JOB_AGENT_SCOPE} token`);
  }
  if (payload["group"] !== group) throw new PermissionDeniedError(`group ${group}: the pod token is for another group (${payload["group"]})`);
  return { group, pod: payload["pod"] };
}
