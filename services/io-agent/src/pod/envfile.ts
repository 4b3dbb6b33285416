// The environment file init writes and the entrypoint sources: one `export NAME='value'`
// line per variable. Inside single quotes sh takes every byte literally (newlines, `$`,
// backslashes, bytes that are not UTF-8) but the quote itself, written as '\''.
import type * as pb from "@ephemera/proto";
import { STEP_HOME } from "../init.js";

export interface EnvVar {
  name: string;
  value: Buffer;
}

export class EnvFileError extends Error {
  override readonly name = "EnvFileError";
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const QUOTE = 0x27;

/** `'…'` for sh: the bytes of `value`, each `'` closed, escaped and reopened. */
export function shQuote(value: Buffer | string): Buffer {
  const bytes = typeof value === "string" ? Buffer.from(value) : value;
  const parts: Buffer[] = [Buffer.from("'")];
  let start = 0;
  for (let i = bytes.indexOf(QUOTE); i !== -1; i = bytes.indexOf(QUOTE, start)) {
    parts.push(bytes.subarray(start, i), Buffer.from("'\\''"));
    start = i + 1;
  }
  parts.push(bytes.subarray(start), Buffer.from("'"));
  return Buffer.concat(parts);
}

/**
 * Pure: the script's variables as the process driver sets them, HOME first and the
 * inputs after it (an input may set HOME), absent inputs unset. Values stay bytes: an
 * input need not be UTF-8.
 */
export function stepEnv(res: pb.GetStepInputsResponse): EnvVar[] {
  const vars: EnvVar[] = [{ name: "HOME", value: Buffer.from(STEP_HOME) }];
  for (const input of res.inputs) {
    if (input.present && input.env) vars.push({ name: input.env, value: Buffer.from(input.value) });
  }
  return vars;
}

/** Pure: the file's bytes; a name sh cannot export or a NUL byte (no variable can hold one) is refused, named, never shown. */
export function renderEnvFile(vars: EnvVar[]): Buffer {
  const lines: Buffer[] = [];
  for (const v of vars) {
    if (!NAME.test(v.name)) throw new EnvFileError(`environment variable "${v.name}" is not a name sh can export`);
    if (v.value.includes(0)) throw new EnvFileError(`the value of environment variable ${v.name} holds a NUL byte, which no environment variable can carry`);
    lines.push(Buffer.from(`export ${v.name}=`), shQuote(v.value), Buffer.from("\n"));
  }
  return Buffer.concat(lines);
}
