// Id and random-token generators, passed into domain code as plain functions, and the short
// deterministic hash that keeps names apart once they are cut.
import { createHash, randomBytes } from "node:crypto";
import { monotonicFactory } from "ulid";

export type IdGen = () => string;

export function ulidGen(): IdGen {
  const next = monotonicFactory();
  return () => next();
}

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

/** Lower-case alphanumeric token of `length` characters (routing keys). */
export function randomToken(length: number): string {
  const bytes = randomBytes(length);
  let s = "";
  for (const b of bytes) s += ALPHABET[b % ALPHABET.length];
  return s;
}

/**
 * Pure: 10 hex characters of the SHA-256 of `text`, the same each time: what keeps two
 * names apart once they are cut to fit a limit (a DNS label, a label value).
 */
export function shortHash(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 10);
}
