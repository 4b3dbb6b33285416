// Who is calling the public API: the bearer token of a request, checked against the tokens
// file, or verified as a JWT against the JWKS file. Configured from the environment at start.
import { readFileSync } from "node:fs";
import { UnauthenticatedError, envString, errorMessage, type Env, type grpc } from "@ephemera/kit";
import { DEFAULT_ROLE_CLAIM, jwtVerifier, looksLikeJwt, parseJwks, type JwtSettings } from "./jwt.js";
import type { Principal } from "./roles.js";
import { findToken, parseTokensFile, tokenPrincipal, type TokenEntry } from "./tokens.js";

export interface ApiAccessConfig {
  tokens?: TokenEntry[];
  jwt?: JwtSettings;
}

export interface ApiAccess {
  /** The caller a request's bearer token stands for; UnauthenticatedError without a valid one. */
  authenticate(metadata: grpc.Metadata): Promise<Principal>;
  /** What it accepts, for the start-up log (never a secret). */
  readonly describe: string;
}

/** `Bearer <token>` from the request's `authorization` metadata. */
export function bearerToken(metadata: grpc.Metadata): string {
  const values = metadata.get("authorization");
  if (values.length === 0) throw new UnauthenticatedError("missing bearer token");
  if (values.length > 1) throw new UnauthenticatedError("more than one authorization header");
  const match = typeof values[0] === "string" ? /^Bearer +(\S+) *$/i.exec(values[0]) : null;
  if (!match) throw new UnauthenticatedError('authorization is not a bearer token (expected "Bearer <token>")');
  return match[1]!;
}

/** Undefined when neither tokens nor JWTs are configured: the API is open. */
export function apiAccess(config: ApiAccessConfig, now: () => Date = () => new Date()): ApiAccess | undefined {
  const { tokens } = config;
  const verifyJwt = config.jwt ? jwtVerifier(config.jwt) : undefined;
  if (!tokens && !verifyJwt) return undefined;
  const describe = [
    tokens ? `tokens file (${tokens.length} token${tokens.length === 1 ? "" : "s"})` : undefined,
    config.jwt ? `JWTs of ${config.jwt.issuer} for ${config.jwt.audience} (role claim ${config.jwt.roleClaim})` : undefined,
  ].filter(Boolean).join(", ");
  return {
    describe,
    authenticate: async (metadata) => {
      const token = bearerToken(metadata);
      const entry = tokens ? findToken(tokens, token) : undefined;
      if (entry) return tokenPrincipal(entry, now());
      if (verifyJwt && looksLikeJwt(token)) return verifyJwt(token, now());
      throw new UnauthenticatedError(verifyJwt && !tokens ? "token is not a JWT" : "token not recognised");
    },
  };
}

const read = (variable: string, path: string) => {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new Error(`${variable}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}`, { cause: err });
  }
};

/**
 * EPHEMERA_API_TOKENS (the tokens file) and/or EPHEMERA_API_JWKS (a JWKS file) with
 * EPHEMERA_API_JWT_ISSUER, EPHEMERA_API_JWT_AUDIENCE and EPHEMERA_API_JWT_ROLE_CLAIM. Files are
 * read once: a change needs a restart.
 */
export function apiAccessConfigFromEnv(env: Env): ApiAccessConfig {
  const tokensPath = envString(env, "EPHEMERA_API_TOKENS", "");
  const jwksPath = envString(env, "EPHEMERA_API_JWKS", "");
  const issuer = envString(env, "EPHEMERA_API_JWT_ISSUER", "");
  const audience = envString(env, "EPHEMERA_API_JWT_AUDIENCE", "");
  if (!jwksPath && (issuer || audience)) throw new Error("EPHEMERA_API_JWT_ISSUER and EPHEMERA_API_JWT_AUDIENCE need EPHEMERA_API_JWKS, the keys to verify JWTs with");
  if (jwksPath && (!issuer || !audience)) {
    throw new Error("EPHEMERA_API_JWKS needs EPHEMERA_API_JWT_ISSUER and EPHEMERA_API_JWT_AUDIENCE: a JWT is accepted only from one issuer, for this API");
  }
  return {
    ...(tokensPath ? { tokens: parseTokensFile(read("EPHEMERA_API_TOKENS", tokensPath), `EPHEMERA_API_TOKENS (${tokensPath})`) } : {}),
    ...(jwksPath ? {
      jwt: {
        jwks: parseJwks(read("EPHEMERA_API_JWKS", jwksPath), `EPHEMERA_API_JWKS (${jwksPath})`),
        issuer, audience, roleClaim: envString(env, "EPHEMERA_API_JWT_ROLE_CLAIM", DEFAULT_ROLE_CLAIM),
      },
    } : {}),
  };
}
