// Reading plugin and sandbox files: templating and validation run here, before any call,
// so a wrong file is reported at once with every problem it has.
import { isValidationError } from "@ephemera/kit";
import type * as pb from "@ephemera/proto";
import { TemplateError, loadTemplate, parsePluginRef, validatePlugin, validateSandbox } from "@ephemera/spec";
import { UsageError } from "./errors.js";

export interface FileInput {
  file: string;
  sets: string[];
  stdin?: () => Promise<string>;
  /** Told what the file has that is accepted but ignored (a plugin's stray `version:`). */
  warn?: (message: string) => void;
}

export async function readPlugin(input: FileInput): Promise<pb.ResourcePlugin> {
  return validatePlugin(await load(input, false), input.warn);
}

export async function readSandbox(input: FileInput): Promise<pb.Sandbox> {
  return validateSandbox(await load(input, false), input.warn);
}

/** The name a file publishes, needing only the variables used in `name` (for `delete -f`). */
export async function readName(input: FileInput): Promise<string> {
  const doc = await load(input, true);
  const name = (doc as { name?: unknown } | null)?.name;
  if (typeof name !== "string" || !name) throw new UsageError(`${describe(input.file)} has no name`);
  return name;
}

/** The exact version a plugin file publishes: a bare name is version 0.0.0. */
export function publishedRef(name: string): string {
  const ref = parsePluginRef(name);
  return `${ref.name}@${ref.version ?? "0.0.0"}`;
}

async function load(input: FileInput, onlyName: boolean): Promise<unknown> {
  try {
    return await loadTemplate(input.file, input.sets, { stdin: input.stdin, onlyName });
  } catch (err) {
    if (err instanceof TemplateError || isValidationError(err)) throw err;
    if (err instanceof Error && /^YAML/.test(err.name)) {
      throw new UsageError(`${describe(input.file)} is not valid YAML: ${err.message}`);
    }
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "EISDIR" || code === "EACCES") {
      throw new UsageError(`cannot read ${describe(input.file)}: ${(err as Error).message}`);
    }
    throw err;
  }
}

function describe(file: string): string {
  return file === "-" ? "standard input" : file;
}
