// OIDC-style JWTs as bearer tokens: signed by a key of a JWKS file (EPHEMERA_API_JWKS), for the
// configured issuer and audience, unexpired; the caller is the `sub` claim and the role comes
// from one claim (a string or a list of strings: the strongest role in it counts).
import { createLocalJWKSet, errors, jwtVerify, type JSONWebKeySet } from "jose";
import { PermissionDeniedError, UnauthenticatedError } from "@ephemera/kit";
import { ROLES, isRole, type Principal, type Role } from "./roles.js";

export interface JwtSettings {
  jwks: JSONWebKeySet;
  issuer: string;
  audience: string;
  /** Name of the claim that holds the role (default `ephemera_role`). */
  roleClaim: string;
}

export const DEFAULT_ROLE_CLAIM = "ephemera_role";
/** Asymmetric only: the API holds public keys, never a shared secret. */
const ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"];
/** Clock skew between the issuer and this machine that exp and nbf tolerate. */
const CLOCK_TOLERANCE_S = 30;

/** A JWT's shape: three base64url parts. Anything else is not tried as one. */
export const looksLikeJwt = (token: string): boolean => /^[\w-]+\.[\w-]+\.[\w-]+$/.test(token);

/** Reads the JWKS file's text; the error names the file. */
export function parseJwks(text: string, source: string): JSONWebKeySet {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new Error(`${source}: not JSON: ${(err as Error).message}`, { cause: err });
  }
  const keys = (doc as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0) throw new Error(`${source}: expected a JWKS, {"keys": [...]}, with at least one key`);
  const secret = keys.findIndex((k) => typeof k === "object" && k !== null && ("d" in k || (k as { kty?: unknown }).kty === "oct"));
  if (secret >= 0) throw new Error(`${source}: keys[${secret}] is a private or secret key; the API needs the issuer's public keys only`);
  try {
    createLocalJWKSet(doc as JSONWebKeySet);
  } catch (err) {
    throw new Error(`${source}: not a usable JWKS: ${(err as Error).message}`, { cause: err });
  }
  return doc as JSONWebKeySet;
}

export type JwtVerifier = (token: string, now: Date) => Promise<Principal>;

export function jwtVerifier(settings: JwtSettings): JwtVerifier {
  const keys = createLocalJWKSet(settings.jwks);
  return async (token, now) => {
    let payload;
    try {
      ({ payload } = await jwtVerify(token, keys, {
        issuer: settings.issuer, audience: settings.audience, algorithms: ALGORITHMS,
        clockTolerance: CLOCK_TOLERANCE_S, currentDate: now,
      }));
    } catch (err) {
      throw new UnauthenticatedError(refusal(err, settings), { cause: err });
    }
    if (typeof payload.sub !== "string" || !payload.sub) throw new UnauthenticatedError("token has no sub claim");
    const role = strongestRole(payload[settings.roleClaim]);
    if (!role) {
      throw new PermissionDeniedError(`token of ${payload.sub} carries no role: its claim "${settings.roleClaim}" holds none of ${ROLES.join(", ")}`);
    }
    return { name: payload.sub.slice(0, 128), role, via: "jwt" };
  };
}

function strongestRole(claim: unknown): Role | undefined {
  const values = Array.isArray(claim) ? claim : [claim];
  const roles = values.filter(isRole);
  return [...ROLES].reverse().find((r) => roles.includes(r));
}

/** What is wrong with a token, in words; never the token. */
function refusal(err: unknown, settings: JwtSettings): string {
  if (err instanceof errors.JWTExpired) return "token expired";
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === "nbf") return "token not valid yet (nbf)";
    if (err.claim === "iss") return `token issuer is not ${settings.issuer}`;
    if (err.claim === "aud") return `token audience does not include ${settings.audience}`;
    return `token claim ${err.claim}: ${err.reason}`;
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) return "token signature does not verify";
  if (err instanceof errors.JWKSNoMatchingKey) return "token signed by a key the API does not know";
  if (err instanceof errors.JOSEAlgNotAllowed) return `token algorithm not accepted (accepted: ${ALGORITHMS.join(", ")})`;
  return "malformed token (not a verifiable JWT)";
}
