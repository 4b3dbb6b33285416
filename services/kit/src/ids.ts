// Id and random-token generators, passed into domain code as plain functions, and the short
// deterministic hash that keeps names apart once they are cut.
import { createHash, randomBytes, randomFillSync } from "node:crypto";
import { monotonicFactory } from "ulid";

export type IdGen = () => string;

export function ulidGen(): IdGen {
  const next = monotonicFactory(pooledRandom());
  return () => next();
}

/**
 * A PRNG for ulid: the operating system's random bytes, taken from a pool filled `size` bytes
 * at a time. ulid's own asks the OS for one byte per character, 16 calls for each id that
 * starts a new millisecond (half a millisecond of a step's CPU in a service's profile).
 * `fill` is the OS's source (tests count its calls).
 */
export function pooledRandom(size = 4096, fill: (pool: Uint8Array) => void = randomFillSync): () => number {
  const pool = new Uint8Array(size);
  let at = size;
  return () => {
    if (at === size) {
      fill(pool);
      at = 0;
    }
    return pool[at++]! / 256;
  };
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
