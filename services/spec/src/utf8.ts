// Plugin and sandbox files are UTF-8. A file that is not is refused before anything else,
// naming the field each bad byte falls in (found on a lenient decoding, used for nothing
// else), its byte offset, line and column: nothing is rewritten to U+FFFD and sent.
import { ValidationError, fieldPath, type FieldViolation, type Path } from "@ephemera/kit/errors";
import { decodeUtf8, firstInvalidUtf8 } from "@ephemera/kit/utf8";
import { isMap, isNode, isScalar, isSeq, parseAllDocuments, type Node } from "yaml";

/** A bad byte: its offset in the file, where an editor shows it, and its index in the lenient decoding. */
export interface BadByte {
  byte: number;
  line: number;
  /** In characters, from 1. */
  column: number;
  index: number;
}

/** A UTF-16 half without its pair (from a caller's string or a YAML "\uD800" escape): not text UTF-8 can carry. */
export const LONE_SURROGATE = /\p{Cs}/u;

const lenient = new TextDecoder("utf-8", { ignoreBOM: true });

/** The text of a file, or a ValidationError (rule `utf8`) listing each field that holds a bad byte. */
export function decodeFile(bytes: Uint8Array, label: string): string {
  const text = decodeUtf8(bytes);
  if (text !== undefined) return text;
  throw new ValidationError(utf8Violations(bytes), `${label} is not valid UTF-8 (nothing was sent)`);
}

/** One violation per field holding a bad byte, at its first one, in file order. */
export function utf8Violations(bytes: Uint8Array): FieldViolation[] {
  const bad = badBytes(bytes);
  if (bad.length === 0) return [];
  const docs = parseAllDocuments(lenient.decode(bytes));
  const out = new Map<string, FieldViolation>();
  for (const b of bad) {
    const field = fieldPath(locate(docs.map((d) => d.contents), b.index, []));
    if (!out.has(field)) out.set(field, { field, rule: "utf8", description: `${where(b)} is not valid UTF-8` });
  }
  return [...out.values()];
}

/** The first bad byte of each line (a newline always ends a broken sequence, so lines decode alone). */
export function badBytes(bytes: Uint8Array): BadByte[] {
  const out: BadByte[] = [];
  let start = 0;
  let index = 0;
  for (let line = 1; start <= bytes.length; line++) {
    const newline = bytes.indexOf(0x0a, start);
    const end = newline < 0 ? bytes.length : newline;
    const lineBytes = bytes.subarray(start, end);
    const text = lenient.decode(lineBytes);
    const bad = firstInvalidUtf8(lineBytes);
    if (bad) {
      const column = [...text.slice(0, bad.index)].length + 1;
      out.push({ byte: start + bad.byte, line, column, index: index + bad.index });
    }
    index += text.length + 1;
    start = end + 1;
  }
  return out;
}

export const where = (b: BadByte) => `byte ${b.byte} (line ${b.line}, column ${b.column})`;

/** The path of the deepest key or value whose source holds `index`; the enclosing collection's when none does. */
function locate(nodes: unknown[], index: number, at: Path): Path {
  const node = nodes.find((n): n is Node => isNode(n) && holds(n, index));
  if (isMap(node)) {
    for (const pair of node.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      if (isNode(pair.key) && holds(pair.key, index)) return [...at, key];
      if (isNode(pair.value) && holds(pair.value, index)) return locate([pair.value], index, [...at, key]);
    }
  }
  if (isSeq(node)) {
    const i = node.items.findIndex((item) => isNode(item) && holds(item, index));
    if (i >= 0) return locate([node.items[i]], index, [...at, i]);
  }
  return at;
}

const holds = (node: Node, index: number) => !!node.range && node.range[0] <= index && index < node.range[1];
