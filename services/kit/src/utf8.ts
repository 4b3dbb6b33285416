// Where text stops being UTF-8. Node's decoders only say whether it is (or replace what is
// not with U+FFFD); a refusal has to say where, so the first bad byte is found here.
import { isUtf8 } from "node:buffer";

/** A bad byte: its offset in the bytes, and its index (UTF-16 units) in their lenient decoding. */
export interface InvalidUtf8 {
  byte: number;
  index: number;
}

// Lenient, and a leading U+FEFF is text (as in a protobuf string), so indexes count it.
const lenient = new TextDecoder("utf-8", { ignoreBOM: true });
const FFFD = [0xef, 0xbf, 0xbd];

/** The first byte that is not part of valid UTF-8, or undefined when all of `bytes` is. */
export function firstInvalidUtf8(bytes: Uint8Array): InvalidUtf8 | undefined {
  if (isUtf8(bytes)) return undefined;
  // The lenient decoding is exact up to its first U+FFFD that was not written as EF BF BD:
  // that one stands for the first bad byte.
  let byte = 0;
  let index = 0;
  for (const char of lenient.decode(bytes)) {
    const code = char.codePointAt(0)!;
    if (code === 0xfffd && !FFFD.every((b, i) => bytes[byte + i] === b)) return { byte, index };
    byte += code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
    index += char.length;
  }
  return { byte, index };
}

/** The decoded text, or undefined when `bytes` is not UTF-8; never rewrites a byte to U+FFFD. */
export function decodeUtf8(bytes: Uint8Array): string | undefined {
  return isUtf8(bytes) ? lenient.decode(bytes) : undefined;
}
