// The tokens file (EPHEMERA_API_TOKENS): who may call the API, with which role. Each token is
// kept as its SHA-256, so the file holds no secret; a presented token is hashed and compared
// with every entry in constant time.
import { createHash, timingSafeEqual } from "node:crypto";
import { parse } from "yaml";
import { UnauthenticatedError } from "@ephemera/kit";
import { ROLES, isRole, type Principal, type Role } from "./roles.js";

export interface TokenEntry {
  name: string;
  role: Role;
  /** SHA-256 of the token (32 bytes). */
  sha256: Buffer;
  expires?: Date;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
const HEX64 = /^[0-9a-fA-F]{64}$/;

export const sha256 = (token: string): Buffer => createHash("sha256").update(token, "utf8").digest();

/**
 * Reads the file's text: `tokens:`, a list of `{name, role, sha256, expires?}` (YAML or JSON).
 * Every problem is reported at once, by its place in the file; a hash never is.
 */
export function parseTokensFile(text: string, source: string): TokenEntry[] {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw new Error(`${source}: not YAML or JSON: ${(err as Error).message.split("\n")[0]}`, { cause: err });
  }
  const list = (doc as { tokens?: unknown } | null)?.tokens;
  if (!Array.isArray(list) || list.length === 0) throw new Error(`${source}: expected "tokens:", a list of {name, role, sha256}, with at least one entry`);
  const problems: string[] = [];
  const entries: TokenEntry[] = [];
  const names = new Set<string>();
  const hashes = new Set<string>();
  list.forEach((item: unknown, i) => {
    const at = `tokens[${i}]`;
    const e = (typeof item === "object" && item !== null ? item : {}) as Record<string, unknown>;
    const known = new Set(["name", "role", "sha256", "expires"]);
    for (const key of Object.keys(e)) if (!known.has(key)) problems.push(`${at}.${key}: unknown field (fields: name, role, sha256, expires)`);
    const { name, role, sha256: hash, expires } = e;
    if (typeof name !== "string" || !NAME.test(name)) problems.push(`${at}.name: must be 1-64 letters, digits, ".", "_", "@" or "-"`);
    else if (names.has(name)) problems.push(`${at}.name: "${name}" is named twice`);
    else names.add(name);
    if (!isRole(role)) problems.push(`${at}.role: must be one of ${ROLES.join(", ")}`);
    if (typeof hash !== "string" || !HEX64.test(hash)) problems.push(`${at}.sha256: must be the token's SHA-256 in hex (64 characters; printf %s "$TOKEN" | sha256sum)`);
    else if (hashes.has(hash.toLowerCase())) problems.push(`${at}.sha256: the same token is listed twice`);
    else hashes.add(hash.toLowerCase());
    const until = expires === undefined ? undefined : expires instanceof Date ? expires : typeof expires === "string" ? new Date(expires) : new Date(NaN);
    if (until && Number.isNaN(until.getTime())) problems.push(`${at}.expires: must be a time such as 2027-01-31T00:00:00Z`);
    if (typeof name === "string" && isRole(role) && typeof hash === "string" && HEX64.test(hash)) {
      entries.push({ name, role, sha256: Buffer.from(hash, "hex"), ...(until ? { expires: until } : {}) });
    }
  });
  if (problems.length) throw new Error(`${source}:\n${problems.map((p) => `  ${p}`).join("\n")}`);
  return entries;
}

/** The entry a token stands for, or undefined: every entry is compared, whichever matches. */
export function findToken(entries: readonly TokenEntry[], token: string): TokenEntry | undefined {
  const hash = sha256(token);
  let found: TokenEntry | undefined;
  for (const entry of entries) if (timingSafeEqual(entry.sha256, hash) && !found) found = entry;
  return found;
}

/** The principal of a listed, unexpired token; UnauthenticatedError otherwise. */
export function tokenPrincipal(entry: TokenEntry, now: Date): Principal {
  if (entry.expires && entry.expires.getTime() <= now.getTime()) {
    throw new UnauthenticatedError(`token expired (token ${entry.name}, at ${entry.expires.toISOString()})`);
  }
  return { name: entry.name, role: entry.role, via: "token" };
}
