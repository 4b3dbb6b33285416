// Id and random-token generators, passed into domain code as plain functions.
import { randomBytes } from "node:crypto";
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
